//! How the workflow emits: a status with its timestamp from workflow time, and every event
//! through the `emit_event` local activity with what changed of the history and artifacts
//! since the event before (D1, docs/event-log.md).

use super::TaskWorkflow;
use crate::activities::Activities;
use crate::{EmitInput, status_ext_key};
use a2a_types::{Message, StreamResponse, Struct, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
use std::time::Duration;
use temporalio_sdk::{LocalActivityOptions, WorkflowContext, WorkflowResult};

pub(super) fn timestamp(t: Option<std::time::SystemTime>) -> Option<String> {
    t.map(a2a_types::format_timestamp)
}

/// Sets the status (with its timestamp from workflow time) and emits it with the snapshot.
pub(super) async fn set_status(
    ctx: &WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    substate: Option<&str>,
) -> WorkflowResult<()> {
    set_status_with(ctx, state, message, substate, None).await
}

/// [`set_status`], the event's metadata with `extra` (a command's `{"command": <name>}`);
/// the head keeps the substate only.
pub(super) async fn set_status_with(
    ctx: &WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    substate: Option<&str>,
    extra: Option<Struct>,
) -> WorkflowResult<()> {
    let ts = timestamp(ctx.workflow_time());
    let metadata = substate.map(|sub| {
        let mut m = Struct::new();
        m.insert(status_ext_key(), serde_json::json!({ "substate": sub }));
        m
    });
    let (event, snapshot) = ctx.state_mut(|s| {
        if state.is_final() {
            s.in_turn = false;
        }
        s.head.status = TaskStatus { state, message, timestamp: ts };
        let mut md = s.head.metadata.take().unwrap_or_default();
        md.remove(&status_ext_key());
        if let Some(m) = &metadata {
            md.extend(m.clone());
        }
        s.head.metadata = if md.is_empty() { None } else { Some(md) };
        let metadata = match extra {
            Some(extra) => Some(metadata.unwrap_or_default().into_iter().chain(extra).collect()),
            None => metadata,
        };
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: s.head.id.clone(),
            context_id: s.head.context_id.clone(),
            status: s.head.status.clone(),
            metadata,
        });
        (event, s.head.clone())
    });
    // The stored snapshot serves reads once the workflow is gone; the final status of a
    // turn (and a terminal one) is what such a read must see. WORKING updates the state only.
    let snapshot = state.is_final().then_some(snapshot);
    emit(ctx, event, snapshot).await
}

/// Emits one event through the `emit_event` local activity; the store assigns its seq. The
/// event carries the messages and artifacts the store does not have yet, which count as
/// stored once the append has answered. (A run recorded before [`super::HISTORY_BY_ROW`]
/// stored them only with a snapshot, so it carries them only then.)
pub(super) async fn emit(
    ctx: &WorkflowContext<TaskWorkflow>,
    event: StreamResponse,
    snapshot: Option<Task>,
) -> WorkflowResult<()> {
    let (input, sent) = ctx.state_mut(|s| {
        s.next_key += 1;
        let stored_before = s.by_row.then_some((s.stored_history as u32, s.stored_artifacts as u32));
        let carries = s.by_row || snapshot.is_some();
        let (history, artifacts) =
            if carries { (s.pending_history.clone(), s.pending_artifacts.clone()) } else { Default::default() };
        let sent = (history.len(), artifacts.len());
        let input = EmitInput {
            task_id: s.input.task_id.clone(),
            task_queue: s.input.task_queue.clone(),
            key: format!("wf-{}", s.next_key),
            event,
            snapshot,
            history,
            history_from: s.stored_history as u32,
            artifacts,
            stored_before,
            participants: s.changed_participants.take(),
        };
        (input, sent)
    });
    let seq = ctx
        .execute_local_activity(
            Activities::emit_event,
            input,
            LocalActivityOptions::builder()
                .start_to_close_timeout(Duration::from_secs(30))
                .retry_policy(
                    temporalio_common::RetryPolicy::builder()
                        .initial_interval(Duration::from_millis(100))
                        .maximum_interval(Duration::from_secs(5))
                        .build(),
                )
                .build(),
        )
        .await?;
    ctx.state_mut(|s| {
        s.last_seq = s.last_seq.max(seq);
        s.run_bytes += super::turn::EMIT_BYTES;
        s.pending_history.drain(..sent.0);
        s.stored_history += sent.0;
        s.pending_artifacts.drain(..sent.1);
        s.stored_artifacts += sent.1;
    });
    Ok(())
}
