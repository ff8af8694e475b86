//! `emit_event`: append one workflow event to the log (idempotent on its key) and wake
//! the task's readers. Returns the seq the store assigned.

use crate::EmitInput;
use harness_store::{NewEvent, Store, StoreError};
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;

pub(super) async fn run(store: &Store, input: EmitInput) -> Result<i64, ActivityError> {
    let event = NewEvent {
        task_id: input.task_id,
        key: input.key,
        event: input.event,
        snapshot: input.snapshot,
        task_queue: input.task_queue,
    };
    match store.append(&event).await {
        Ok(appended) => Ok(appended.seq),
        // The log already ended: retrying cannot help.
        Err(e @ StoreError::Closed(_)) => Err(ActivityError::application(ApplicationFailure::non_retryable(e))),
        Err(e) => Err(ActivityError::application(ApplicationFailure::new(e))),
    }
}
