//! `call_model`: one model turn. Each text delta is appended to the log as an artifact
//! chunk (`reply-<turn>`) as soon as the next one arrives (so the last can be marked
//! `lastChunk`); the whole reply is returned to the workflow for the final status.
//!
//! Chunks are keyed `turn-<n>-chunk-<i>`: a retried turn re-appends the same keys and the
//! store ignores them. A cancel (or a control) that ends the task fences the log; a chunk
//! after that is refused by the store and the activity stops.

use crate::models::{ModelEvent, ModelRegistry, ModelRequest};
use crate::{ModelReply, ModelTurn};
use a2a_types::{Artifact, Part, StreamResponse, TaskArtifactUpdateEvent};
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
    let request = ModelRequest { history: input.history.clone(), turn: input.turn };
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
    let new =
        NewEvent { task_id: turn.task_id.clone(), key, event, snapshot: None, task_queue: turn.task_queue.clone() };
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
