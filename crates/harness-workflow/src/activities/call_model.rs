//! `call_model`: one model turn. Each text delta is appended to the log as an artifact
//! chunk (`reply-<turn>`) as soon as the next one arrives (so the last can be marked
//! `lastChunk`); the whole reply is returned to the workflow for the final status.
//!
//! Chunks are keyed `turn-<n>-chunk-<i>`: a retried turn re-appends the same keys and the
//! store ignores them. A cancel (or a control) that ends the task fences the log; a chunk
//! after that is refused by the store and the activity stops.

use crate::models::{ModelRegistry, ModelRequest};
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
    let mut text = String::new();
    let mut pending: Option<String> = None;
    let mut index = 0u32;
    loop {
        let next = tokio::select! {
            next = deltas.next() => next,
            _ = ctx.cancelled() => return Err(ActivityError::cancelled()),
        };
        let next = next.transpose().map_err(model_failure)?;
        if let Some(previous) = pending.take() {
            append_chunk(store, &input, index, previous, next.is_none()).await?;
            index += 1;
            let _ = ctx.record_heartbeat(index).await;
        }
        match next {
            Some(delta) => {
                text.push_str(&delta);
                pending = Some(delta);
            }
            None => break,
        }
    }
    Ok(ModelReply { text, chunks: index })
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
    let new = NewEvent {
        task_id: turn.task_id.clone(),
        key: format!("turn-{}-chunk-{index}", turn.turn),
        event,
        snapshot: None,
        task_queue: turn.task_queue.clone(),
    };
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
