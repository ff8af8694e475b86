//! `conformance`: behaves as the A2A conformance kit (TCK) asks of a system under test, in
//! its scenario files (`crates/contract-tests/conformance/*.feature`, copied unchanged),
//! keyed on the incoming `messageId` prefix (longest prefix first). Anything else is
//! completed with the echoed text. docs/conformance.md has the table and the readings.

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

/// Whether a scenario streams WORKING first: those whose steps begin with "stream a status
/// update to working", and the echo of an unknown id (an ordinary turn).
fn shows_working(prefix: Option<&str>) -> bool {
    match prefix {
        None => true,
        Some(p) => (p.starts_with("tck-stream-") && p != "tck-stream-002") || p == "test-resubscribe-message-id",
    }
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

fn text(text: &str) -> ModelEvent {
    whole(artifact("tck-text", "text", Part::text(text)))
}

/// "a file part named \"output.txt\" with media type \"text/plain\"" (the scenario leaves
/// the bytes open).
fn file() -> ModelEvent {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD.encode("Generated file content");
    let part =
        Part { raw: Some(raw), filename: "output.txt".into(), media_type: "text/plain".into(), ..Default::default() };
    whole(artifact("tck-file", "file", part))
}

fn chunk(text: &str, append: bool, last_chunk: bool) -> ModelEvent {
    ModelEvent::Artifact { artifact: artifact("tck-chunked", "chunked", Part::text(text)), append, last_chunk }
}

/// The events for a message id, scenario by scenario (the scenario's steps in comments).
pub fn script(message_id: &str, echoed: &str) -> Vec<ModelEvent> {
    let completed = |m: Option<&str>| finish(TaskState::Completed, m);
    match matching_prefix(message_id) {
        // complete the task with the message "Hello from TCK"
        Some("tck-complete-task") => vec![completed(Some("Hello from TCK"))],
        // complete the task; add an artifact with a text part "Generated text content"
        Some("tck-artifact-text") => vec![text("Generated text content"), completed(None)],
        // ... a file part named "output.txt" with media type "text/plain"
        Some("tck-artifact-file") => vec![file(), completed(None)],
        // ... a file url "https://example.com/output.txt" named "output.txt" with media type "text/plain"
        Some("tck-artifact-file-url") => {
            let part = Part {
                url: Some("https://example.com/output.txt".into()),
                filename: "output.txt".into(),
                media_type: "text/plain".into(),
                ..Default::default()
            };
            vec![whole(artifact("tck-file-url", "file-url", part)), completed(None)]
        }
        // ... a data part {"key": "value", "count": 42}
        Some("tck-artifact-data") => {
            let data = Part::data(serde_json::json!({"key": "value", "count": 42}), "application/json");
            vec![whole(artifact("tck-data", "data", data)), completed(None)]
        }
        // return a message with a text part "Direct message response" (a direct reply:
        // [`ModelProvider::replies_directly`])
        Some("tck-message-response") => vec![completed(Some("Direct message response"))],
        // update the task status to "input_required"
        Some("tck-input-required") => vec![finish(TaskState::InputRequired, None)],
        // reject with error "rejected"
        Some("tck-reject-task") => vec![finish(TaskState::Rejected, Some("rejected"))],
        // stream working; an artifact with a text part "..."; completed
        Some("tck-stream-001") => vec![text("Stream hello from TCK"), completed(None)],
        Some("tck-stream-003") => vec![text("Stream task lifecycle"), completed(None)],
        Some("tck-stream-ordering-001") => vec![text("Ordered output"), completed(None)],
        Some("tck-stream-artifact-text") => vec![text("Streamed text content"), completed(None)],
        // stream working; an artifact with a file part named "output.txt" ...; completed
        Some("tck-stream-artifact-file") => vec![file(), completed(None)],
        // stream a status update to "completed"
        Some("tck-stream-002") => vec![completed(None)],
        // stream working; a chunk "chunk-1 "; a final chunk "chunk-2"; completed
        Some("tck-stream-artifact-chunked") => {
            vec![chunk("chunk-1 ", false, false), chunk("chunk-2", true, true), completed(None)]
        }
        // stream working; wait for 2x streaming timeout; completed
        Some("test-resubscribe-message-id") => vec![completed(None)],
        _ => vec![ModelEvent::Text(echoed.to_string()), completed(None)],
    }
}

/// The kit's streaming timeout (`TCK_STREAMING_TIMEOUT`, seconds, as the kit reads it;
/// default 2): `test-resubscribe-message-id` stays WORKING twice that long.
pub fn resubscribe_pause() -> Duration {
    let timeout = std::env::var("TCK_STREAMING_TIMEOUT").ok().and_then(|v| v.trim().parse::<f64>().ok());
    let timeout = timeout.filter(|t| t.is_finite() && *t >= 0.0 && *t <= 3600.0).unwrap_or(2.0);
    Duration::from_secs_f64(2.0 * timeout)
}

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

    /// WORKING only where the scenario streams it.
    fn shows_working(&self, message: &a2a_types::Message) -> bool {
        shows_working(matching_prefix(&message.message_id))
    }

    /// `tck-message-response` is answered with the reply Message.
    fn replies_directly(&self, message: &a2a_types::Message) -> bool {
        matching_prefix(&message.message_id) == Some("tck-message-response")
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let message = last_user_message(&request.history);
        let id = message.map(|m| m.message_id.clone()).unwrap_or_default();
        let text = message.map(|m| m.text()).unwrap_or_default();
        let events = script(&id, &text);
        let pause = if matching_prefix(&id) == Some("test-resubscribe-message-id") {
            resubscribe_pause()
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
