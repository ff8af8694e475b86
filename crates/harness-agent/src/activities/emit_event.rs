//! `emit_event`: append a workflow event to the log (idempotent on its key), after the
//! events the workflow held back to go with it, all in one transaction (issue 31), and wake
//! the task's readers, then queue each for the task's push configs (S14: the Task and every
//! status update; delivery never blocks the task), which are read only when the append put
//! the event in the push outbox. Returns the seq the store assigned to the event.

use crate::EmitInput;
use harness_store::{NewEvent, Store, StoreError, Stored};
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;

pub(super) async fn run(
    store: &Store,
    pusher: Option<&std::sync::Arc<harness_push::Pusher>>,
    mut input: EmitInput,
) -> Result<i64, ActivityError> {
    let failed = |e: StoreError| match e {
        // The log already ended: retrying cannot help.
        e @ StoreError::Closed(_) => ActivityError::application(ApplicationFailure::non_retryable(e)),
        e => ActivityError::application(ApplicationFailure::new(e)),
    };
    let turn = input.turn.take();
    let mut inputs = std::mem::take(&mut input.earlier);
    inputs.push(input);
    for participants in inputs.iter().filter_map(|i| i.participants.as_ref()) {
        // Before the event: a reader that sees the change may rely on the access list.
        store.set_participants(&inputs[0].task_id, participants).await.map_err(failed)?;
    }
    let events: Vec<NewEvent> = inputs.into_iter().map(new_event).collect();
    let appended = store.append_all(&events).await.map_err(failed)?;
    let (last, last_appended) = (&events[events.len() - 1], appended[appended.len() - 1]);
    // The turn's end (issue 32): its count and duration, and its span.
    if let (Some(turn), a2a_types::StreamResponse::StatusUpdate(update)) = (&turn, &last.event) {
        turn_ended(turn, &last.task_id, update.status.state);
    }
    // An append that put its event in the push outbox (the Task or a status event of a task
    // with push configs); a retry's was put there by its first append.
    if let Some(pusher) = pusher {
        for (event, appended) in events.iter().zip(&appended).filter(|(_, a)| a.pushes) {
            pusher.deliver(&event.task_id, &event.event, appended.seq).await;
        }
    }
    Ok(last_appended.seq)
}

/// A turn's end is stored (issue 32): its count and duration, and its span.
pub(super) fn turn_ended(turn: &harness_workflow::TurnMark, task_id: &str, state: a2a_types::TaskState) {
    crate::metrics::turn(turn, state);
    crate::trace::turn_ended(turn, task_id, state);
}

/// The store's append of one event the workflow emits.
pub(super) fn new_event(input: EmitInput) -> NewEvent {
    NewEvent {
        snapshot: input.snapshot,
        history: input.history,
        history_from: i64::from(input.history_from),
        artifacts: input.artifacts.into_iter().map(|(i, a)| (i64::from(i), a)).collect(),
        stored_before: input
            .stored_before
            .map(|(history, artifacts)| Stored { history: i64::from(history), artifacts: i64::from(artifacts) }),
        ..NewEvent::new(input.task_id, input.key, input.event, input.task_queue)
    }
}
