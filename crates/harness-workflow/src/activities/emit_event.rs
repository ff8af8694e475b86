//! `emit_event`: append one workflow event to the log (idempotent on its key) and wake
//! the task's readers, then queue it for the task's push configs (S14: the Task and every
//! status update; delivery never blocks the task), which are read only when the append says
//! the task has some. Returns the seq the store assigned.

use crate::EmitInput;
use a2a_types::StreamResponse;
use harness_store::{NewEvent, Store, StoreError};
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;

pub(super) async fn run(
    store: &Store,
    pusher: Option<&std::sync::Arc<harness_push::Pusher>>,
    input: EmitInput,
) -> Result<i64, ActivityError> {
    let event = NewEvent {
        snapshot: input.snapshot,
        history: input.history,
        history_from: i64::from(input.history_from),
        artifacts: input.artifacts.into_iter().map(|(i, a)| (i64::from(i), a)).collect(),
        ..NewEvent::new(input.task_id, input.key, input.event, input.task_queue)
    };
    match store.append(&event).await {
        Ok(appended) => {
            let pushed = matches!(event.event, StreamResponse::Task(_) | StreamResponse::StatusUpdate(_));
            if let Some(pusher) = pusher.filter(|_| appended.new && appended.pushes && pushed) {
                pusher.deliver(&event.task_id, &event.event).await;
            }
            Ok(appended.seq)
        }
        // The log already ended: retrying cannot help.
        Err(e @ StoreError::Closed(_)) => Err(ActivityError::application(ApplicationFailure::non_retryable(e))),
        Err(e) => Err(ActivityError::application(ApplicationFailure::new(e))),
    }
}
