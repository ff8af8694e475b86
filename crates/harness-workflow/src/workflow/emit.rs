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
    ctx: &mut WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    substate: Option<&str>,
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
        s.task.status = TaskStatus { state, message, timestamp: ts };
        let mut md = s.task.metadata.take().unwrap_or_default();
        md.remove(&status_ext_key());
        if let Some(m) = &metadata {
            md.extend(m.clone());
        }
        s.task.metadata = if md.is_empty() { None } else { Some(md) };
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: s.task.id.clone(),
            context_id: s.task.context_id.clone(),
            status: s.task.status.clone(),
            metadata,
        });
        (event, s.task.head())
    });
    // The stored snapshot serves reads once the workflow is gone; the final status of a
    // turn (and a terminal one) is what such a read must see. WORKING updates the state only.
    let snapshot = state.is_final().then_some(snapshot);
    emit(ctx, event, snapshot).await
}

/// Emits one event through the `emit_event` local activity; the store assigns its seq.
pub(super) async fn emit(
    ctx: &mut WorkflowContext<TaskWorkflow>,
    event: StreamResponse,
    snapshot: Option<Task>,
) -> WorkflowResult<()> {
    let input = ctx.state_mut(|s| {
        s.next_key += 1;
        let changed = std::mem::take(&mut s.changed_artifacts);
        // A run recorded before the patch sends the whole task with a final status.
        let stored_before = s.by_row.then_some((s.stored_history as u32, s.stored_artifacts as u32));
        let (snapshot, history_from, history, artifacts) = if s.by_row {
            let history_from = s.stored_history;
            s.stored_history = s.task.history.len();
            s.stored_artifacts = s.task.artifacts.len();
            let mut artifacts = Vec::new();
            for id in changed {
                if let Some(i) = s.task.artifacts.iter().position(|a| a.artifact_id == id)
                    && !artifacts.iter().any(|(j, _)| *j == i as u32)
                {
                    artifacts.push((i as u32, s.task.artifacts[i].clone()));
                }
            }
            (snapshot, history_from, s.task.history[history_from..].to_vec(), artifacts)
        } else {
            (snapshot.map(|_| s.task.clone()), 0, Vec::new(), Vec::new())
        };
        EmitInput {
            task_id: s.input.task_id.clone(),
            task_queue: s.input.task_queue.clone(),
            key: format!("wf-{}", s.next_key),
            event,
            snapshot,
            history,
            history_from: history_from as u32,
            artifacts,
            stored_before,
        }
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
    ctx.state_mut(|s| s.last_seq = s.last_seq.max(seq));
    Ok(())
}
