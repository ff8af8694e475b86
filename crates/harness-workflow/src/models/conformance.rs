//! `conformance`: behaves as public A2A conformance kits (TCK) expect of a system under
//! test, keyed on the incoming `messageId` prefix (longest prefix first). Anything else is
//! completed with the echoed text. See docs/conformance.md for the table and what differs.

use super::{DeltaStream, Finish, ModelError, ModelEvent, ModelProvider, ModelRequest, last_user_message};
use a2a_types::{Artifact, Part, TaskState};
use futures::StreamExt;
use std::time::Duration;

/// The conformance model.
pub struct ConformanceModel;

/// The prefixes the model knows, in the order they are tried (longest first among those
/// that share a beginning).
pub const PREFIXES: &[&str] = &[
    "tck-stream-artifact-chunked",
    "tck-stream-artifact-text",
    "tck-stream-artifact-file",
    "tck-stream-ordering-001",
    "tck-stream-001",
    "tck-stream-002",
    "tck-stream-003",
    "tck-artifact-file-url",
    "tck-artifact-text",
    "tck-artifact-file",
    "tck-artifact-data",
    "tck-complete-task",
    "tck-input-required",
    "tck-message-response",
    "tck-reject-task",
    "test-resubscribe-message-id",
];

/// The prefix a message id matches, longest first.
pub fn matching_prefix(message_id: &str) -> Option<&'static str> {
    PREFIXES.iter().copied().filter(|p| message_id.starts_with(p)).max_by_key(|p| p.len())
}

fn artifact(id: &str, name: &str, part: Part) -> Artifact {
    Artifact { artifact_id: id.into(), name: name.into(), parts: vec![part], ..Default::default() }
}

fn whole(artifact: Artifact) -> ModelEvent {
    ModelEvent::Artifact { artifact, append: false, last_chunk: true }
}

fn finish(state: TaskState, message: Option<&str>) -> ModelEvent {
    ModelEvent::Finish(Finish { state, message: message.map(String::from) })
}

fn text_artifact() -> Artifact {
    artifact("tck-text", "text", Part::text("Hello from TCK artifact"))
}

fn file_artifact() -> Artifact {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD.encode("Hello from TCK file");
    artifact(
        "tck-file",
        "file",
        Part { raw: Some(raw), filename: "hello.txt".into(), media_type: "text/plain".into(), ..Default::default() },
    )
}

/// The events for a message id.
pub fn script(message_id: &str, text: &str) -> Vec<ModelEvent> {
    let completed = |m: Option<&str>| finish(TaskState::Completed, m);
    match matching_prefix(message_id) {
        Some("tck-complete-task") => vec![completed(Some("Hello from TCK"))],
        Some("tck-input-required") => vec![finish(TaskState::InputRequired, Some("Input required: send more"))],
        // No task-less replies in this design (every message is a durable task): the closest
        // honest answer is a task that completes with that message (docs/conformance.md).
        Some("tck-message-response") => vec![completed(Some("Direct message response"))],
        Some("tck-reject-task") => vec![finish(TaskState::Rejected, Some("Task rejected"))],
        Some("tck-artifact-text") | Some("tck-stream-artifact-text") => vec![whole(text_artifact()), completed(None)],
        Some("tck-artifact-file") | Some("tck-stream-artifact-file") => vec![whole(file_artifact()), completed(None)],
        Some("tck-artifact-file-url") => vec![
            whole(artifact(
                "tck-file-url",
                "file-url",
                Part {
                    url: Some("https://example.com/hello.txt".into()),
                    filename: "hello.txt".into(),
                    media_type: "text/plain".into(),
                    ..Default::default()
                },
            )),
            completed(None),
        ],
        Some("tck-artifact-data") => vec![
            whole(artifact("tck-data", "data", Part::data(serde_json::json!({"key": "value"}), "application/json"))),
            completed(None),
        ],
        Some("tck-stream-001") | Some("tck-stream-003") | Some("tck-stream-ordering-001") => {
            vec![whole(text_artifact()), completed(None)]
        }
        Some("tck-stream-002") => vec![completed(None)],
        Some("tck-stream-artifact-chunked") => vec![
            ModelEvent::Artifact {
                artifact: artifact("tck-chunked", "chunked", Part::text("chunk-1 ")),
                append: false,
                last_chunk: false,
            },
            ModelEvent::Artifact {
                artifact: artifact("tck-chunked", "chunked", Part::text("chunk-2")),
                append: true,
                last_chunk: true,
            },
            completed(None),
        ],
        Some("test-resubscribe-message-id") => vec![completed(Some("Done after a pause"))],
        _ => vec![ModelEvent::Text(text.to_string()), completed(None)],
    }
}

/// How long `test-resubscribe-message-id` stays WORKING (a client resubscribes meanwhile).
pub const RESUBSCRIBE_PAUSE: Duration = Duration::from_secs(4);

#[async_trait::async_trait]
impl ModelProvider for ConformanceModel {
    /// It answers the turn's message alone.
    fn history_window(&self) -> Option<usize> {
        Some(1)
    }

    /// Every task runs one-shot (docs/conformance.md).
    fn lifecycle(&self) -> Option<crate::Lifecycle> {
        Some(crate::Lifecycle::OneShot)
    }

    /// `tck-stream-002` goes from SUBMITTED to COMPLETED directly.
    fn shows_working(&self, message: &a2a_types::Message) -> bool {
        matching_prefix(&message.message_id) != Some("tck-stream-002")
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let message = last_user_message(&request.history);
        let id = message.map(|m| m.message_id.clone()).unwrap_or_default();
        let text = message.map(|m| m.text()).unwrap_or_default();
        let events = script(&id, &text);
        let pause = if matching_prefix(&id) == Some("test-resubscribe-message-id") {
            RESUBSCRIBE_PAUSE
        } else {
            Duration::ZERO
        };
        let head = futures::stream::once(async move {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        })
        .filter_map(|_| async { None });
        Ok(head.chain(futures::stream::iter(events.into_iter().map(Ok))).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_prefix_wins() {
        assert_eq!(matching_prefix("tck-artifact-file-url-1"), Some("tck-artifact-file-url"));
        assert_eq!(matching_prefix("tck-artifact-file-7"), Some("tck-artifact-file"));
        assert_eq!(matching_prefix("tck-stream-artifact-chunked-x"), Some("tck-stream-artifact-chunked"));
        assert_eq!(matching_prefix("hello"), None);
    }

    #[test]
    fn unknown_ids_complete_echoing_the_text() {
        assert_eq!(script("m-1", "hi"), vec![ModelEvent::Text("hi".into()), finish(TaskState::Completed, None)]);
    }
}
