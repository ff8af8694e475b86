//! `call_model`: one model turn. Each text delta is appended to the log as an artifact
//! chunk (`reply-<turn>`) as soon as the next one arrives (so the last can be marked
//! `lastChunk`); the whole reply is returned to the workflow for the final status.
//!
//! Chunks are keyed `turn-<n>-chunk-<i>`: a retried turn re-appends the same keys and the
//! store ignores them. A cancel (or a control) that ends the task fences the log; a chunk
//! after that is refused by the store and the activity stops.

use crate::models::{ModelEvent, ModelRegistry, ModelRequest};
use crate::{ModelReply, ModelTurn};
use a2a_types::{Artifact, Message, Part, StreamResponse, TaskArtifactUpdateEvent};
use futures::StreamExt;
use harness_store::{NewEvent, Store, StoreError};
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

pub(super) async fn run(
    store: &Store,
    models: &ModelRegistry,
    ctx: &ActivityContext,
    input: ModelTurn,
) -> Result<ModelReply, ActivityError> {
    let provider = models.get(&input.model).ok_or_else(|| {
        let names = models.names().join(", ");
        ActivityError::application(ApplicationFailure::non_retryable(format!(
            "unknown model `{}` (this worker has: {names})",
            input.model
        )))
    })?;
    let request =
        ModelRequest { history: conversation(store, provider.history_window(), &input).await?, turn: input.turn };
    let mut deltas = provider.stream(request).await.map_err(model_failure)?;
    let mut reply = ModelReply::default();
    let mut pending: Option<String> = None;
    let mut index = 0u32;
    let mut own = 0u32;
    loop {
        let next = tokio::select! {
            next = deltas.next() => next,
            _ = ctx.cancelled() => return Err(ActivityError::cancelled()),
        };
        let next = next.transpose().map_err(model_failure)?;
        if let Some(previous) = pending.take() {
            // A text chunk is the last one unless more text follows.
            let last = !matches!(next, Some(ModelEvent::Text(_)));
            append_chunk(store, &input, index, previous, last).await?;
            index += 1;
            let _ = ctx.record_heartbeat(index).await;
        }
        match next {
            Some(ModelEvent::Text(delta)) => {
                reply.text.push_str(&delta);
                pending = Some(delta);
            }
            Some(ModelEvent::Artifact { artifact, append, last_chunk }) => {
                let key = format!("turn-{}-artifact-{own}", input.turn);
                own += 1;
                let event = TaskArtifactUpdateEvent {
                    task_id: input.task_id.clone(),
                    context_id: input.context_id.clone(),
                    artifact: artifact.clone(),
                    append,
                    last_chunk,
                    metadata: None,
                };
                append_event(store, &input, key, StreamResponse::ArtifactUpdate(event)).await?;
                merge_artifact(&mut reply.artifacts, artifact, append);
            }
            Some(ModelEvent::Finish(finish)) => reply.finish = Some(finish),
            None => break,
        }
    }
    reply.chunks = index;
    Ok(reply)
}

/// The conversation up to this turn's message, at most the provider's window of it: the
/// turn's own messages, after what the store has of the rest.
async fn conversation(store: &Store, window: Option<usize>, turn: &ModelTurn) -> Result<Vec<Message>, ActivityError> {
    let wanted = window.unwrap_or(usize::MAX);
    let given = &turn.history[turn.history.len().saturating_sub(wanted)..];
    let before = wanted - given.len();
    if before == 0 || turn.history_from == 0 {
        return Ok(given.to_vec());
    }
    let mut history = store
        .history(&turn.task_id, i64::from(turn.history_from), window.map(|_| before))
        .await
        .map_err(|e| ActivityError::application(ApplicationFailure::new(e)))?;
    history.extend_from_slice(given);
    Ok(history)
}

/// Adds an artifact update to the artifacts of a reply: appended parts join the artifact
/// with the same id, anything else replaces or adds it.
fn merge_artifact(artifacts: &mut Vec<Artifact>, artifact: Artifact, append: bool) {
    match artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
        Some(existing) if append => existing.parts.extend(artifact.parts),
        Some(existing) => *existing = artifact,
        None => artifacts.push(artifact),
    }
}

async fn append_chunk(
    store: &Store,
    turn: &ModelTurn,
    index: u32,
    text: String,
    last: bool,
) -> Result<(), ActivityError> {
    let event = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: turn.task_id.clone(),
        context_id: turn.context_id.clone(),
        artifact: Artifact {
            artifact_id: turn.artifact_id.clone(),
            name: "reply".into(),
            parts: vec![Part::text(text)],
            ..Default::default()
        },
        append: index > 0,
        last_chunk: last,
        metadata: None,
    });
    append_event(store, turn, format!("turn-{}-chunk-{index}", turn.turn), event).await
}

async fn append_event(
    store: &Store,
    turn: &ModelTurn,
    key: String,
    event: StreamResponse,
) -> Result<(), ActivityError> {
    let new = NewEvent::new(turn.task_id.clone(), key, event, turn.task_queue.clone());
    match store.append(&new).await {
        Ok(_) => Ok(()),
        // The task ended under us (cancel, control): stop streaming.
        Err(StoreError::Closed(_)) => Err(ActivityError::cancelled()),
        Err(e) => Err(ActivityError::application(ApplicationFailure::new(e))),
    }
}

fn model_failure(e: crate::models::ModelError) -> ActivityError {
    let failure = if e.retryable { ApplicationFailure::new(e) } else { ApplicationFailure::non_retryable(e) };
    ActivityError::application(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(history: &[&str], history_from: u32) -> ModelTurn {
        ModelTurn {
            task_id: "t".into(),
            context_id: "c".into(),
            task_queue: "q".into(),
            model: "any".into(),
            turn: 3,
            artifact_id: "reply-3".into(),
            history: history.iter().map(|id| Message::agent_text(*id, *id)).collect(),
            history_from,
        }
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.message_id.as_str()).collect()
    }

    /// A turn reads the conversation before its own messages from the store, as much of it
    /// as the provider's window asks for.
    #[tokio::test]
    async fn a_turn_reads_what_its_input_lacks_from_the_store_up_to_the_providers_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
        let stored: Vec<Message> = ["m0", "m1", "m2", "m3"].iter().map(|id| Message::agent_text(*id, *id)).collect();
        let event =
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent { task_id: "t".into(), ..Default::default() });
        store.append(&NewEvent { history: stored, ..NewEvent::new("t", "k", event, "q") }).await.unwrap();

        let whole = conversation(&store, None, &turn(&["m4"], 4)).await.unwrap();
        assert_eq!(ids(&whole), ["m0", "m1", "m2", "m3", "m4"]);
        let window = conversation(&store, Some(3), &turn(&["m4"], 4)).await.unwrap();
        assert_eq!(ids(&window), ["m2", "m3", "m4"]);
        // A message the store does not have yet (a turn without WORKING) comes in the input.
        let two_given = conversation(&store, Some(3), &turn(&["m3", "m4"], 3)).await.unwrap();
        assert_eq!(ids(&two_given), ["m2", "m3", "m4"]);
        // The turn's message alone: nothing read. A turn from an older worker carries it all.
        assert_eq!(ids(&conversation(&store, Some(1), &turn(&["m4"], 4)).await.unwrap()), ["m4"]);
        let old = conversation(&store, None, &turn(&["x0", "x1"], 0)).await.unwrap();
        assert_eq!(ids(&old), ["x0", "x1"]);
    }
}
