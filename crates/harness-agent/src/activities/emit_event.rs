//! `emit_event`: append one workflow event to the log (idempotent on its key) and wake
//! the task's readers, then queue it for the task's push configs (S14: the Task and every
//! status update; delivery never blocks the task), which are read only when the append put
//! the event in the push outbox. Returns the seq the store assigned.

use crate::EmitInput;
use harness_store::{NewEvent, Store, StoreError, Stored};
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;

pub(super) async fn run(
    store: &Store,
    pusher: Option<&std::sync::Arc<harness_push::Pusher>>,
    input: EmitInput,
) -> Result<i64, ActivityError> {
    if let Some(participants) = &input.participants {
        // Before the event: a reader that sees the change may rely on the access list.
        store
            .set_participants(&input.task_id, participants)
            .await
            .map_err(|e| ActivityError::application(ApplicationFailure::new(e)))?;
    }
    let event = NewEvent {
        snapshot: input.snapshot,
        history: input.history,
        history_from: i64::from(input.history_from),
        artifacts: input.artifacts.into_iter().map(|(i, a)| (i64::from(i), a)).collect(),
        stored_before: input
            .stored_before
            .map(|(history, artifacts)| Stored { history: i64::from(history), artifacts: i64::from(artifacts) }),
        ..NewEvent::new(input.task_id, input.key, input.event, input.task_queue)
    };
    let ending = input.turn.zip(match &event.event {
        a2a_types::StreamResponse::StatusUpdate(update) => Some(update.status.state),
        _ => None,
    });
    match store.append(&event).await {
        Ok(appended) => {
            // The turn's end (issue 32): its count and duration, and its span.
            if let Some((turn, state)) = ending {
                crate::metrics::turn(&turn, state);
                crate::trace::turn_ended(&turn, &event.task_id, state);
            }
            // The append put the event in the push outbox (the Task or a status event of a
            // task with push configs); a retry's was put there by its first append.
            if let Some(pusher) = pusher.filter(|_| appended.pushes) {
                pusher.deliver(&event.task_id, &event.event, appended.seq).await;
            }
            Ok(appended.seq)
        }
        // The log already ended: retrying cannot help.
        Err(e @ StoreError::Closed(_)) => Err(ActivityError::application(ApplicationFailure::non_retryable(e))),
        Err(e) => Err(ActivityError::application(ApplicationFailure::new(e))),
    }
}
