//! After a crash the store may hold what no workflow committed, and a workflow may have
//! ended without its end reaching the store. The reconciler makes the store say what
//! Temporal says (docs/event-log.md, "What a crash can leave, and how it is undone"):
//!
//! - a task whose workflow is idle (no turn running, none waiting) but whose stored log goes
//!   past the workflow's newest seq is cut back to that seq, its head set to the workflow's:
//!   those events came from a workflow task that died before it committed, whose message
//!   Temporal never accepted (the sender never got an answer);
//! - a task whose workflow closed without the store knowing (terminated by Temporal for a
//!   limit, or by an operator) is ended FAILED in the store, naming why, so every later
//!   message is refused naming that state instead of failing forever.
//!
//! It runs when the harness starts (in the background, a few tasks at a time) over the open
//! tasks that changed within two minutes of the queue's newest change (where a crash can
//! have left a tail), and a send that finds a task's run closed uses [`ended_run`] at once.

use crate::handler::HarnessHandler;
use a2a_types::{Message, StreamResponse, TaskState, TaskStatus, TaskStatusUpdateEvent};
use futures::StreamExt;
use harness_store::{NewEvent, Store, Stored};
use harness_workflow::TaskWorkflow;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::{Client, WorkflowDescribeOptions, WorkflowExecuteUpdateOptions, WorkflowExecutionStatus};

/// How long one task's question (its `position` update, or a describe) may take: a
/// workflow task that a dead worker had started is retried only after its timeout (10 s),
/// and the update waits for it.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Tasks reconciled at once.
const AT_ONCE: usize = 4;

/// What the reconciler did, for its log line and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reconciled {
    pub checked: usize,
    pub cut_back: usize,
    pub ended: usize,
    pub unanswered: usize,
}

/// Starts the reconciler in the background; `done` is told when it has finished.
pub(crate) fn spawn(
    handler: Arc<HarnessHandler>,
    done: tokio::sync::oneshot::Sender<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _done = DoneOnDrop(Some(done));
        match reconcile(&handler).await {
            Ok(done) if done.cut_back + done.ended + done.unanswered > 0 => {
                tracing::warn!(?done, "reconciled the store with Temporal after a restart")
            }
            Ok(done) => tracing::debug!(?done, "the store agrees with Temporal"),
            Err(e) => tracing::warn!(error = %e, "could not reconcile the store with Temporal"),
        }
        release_freed_memory();
    })
}

/// Hands the heap's free pages back to the system (issue 31): the reconciler's pass replays
/// every recently changed task once, on several threads, and glibc keeps what those
/// replays freed in its per-thread arenas, so a restarted harness would hold more than the
/// one it replaced for as long as it runs.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointer.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How long before the queue's newest change a task's row must have changed to be looked
/// at: a workflow task appends only while it runs (10 s at most before Temporal retries it),
/// so an uncommitted tail is among the tasks that changed last before a crash.
const RECENT: Duration = Duration::from_secs(120);

/// Tells the push sweeper the reconciler finished, however it ends.
struct DoneOnDrop(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            let _ = done.send(());
        }
    }
}

/// Reconciles the open tasks of this agent's queue that changed shortly before its newest
/// change (at most 1000).
pub(crate) async fn reconcile(handler: &HarnessHandler) -> Result<Reconciled, harness_store::StoreError> {
    let ids = handler.store.recently_changed_open_tasks(handler.task_queue(), RECENT).await?;
    let outcomes =
        futures::stream::iter(ids).map(|id| async move { one(handler, &id).await }).buffer_unordered(AT_ONCE);
    let outcomes: Vec<Outcome> = outcomes.collect().await;
    let mut done = Reconciled { checked: outcomes.len(), ..Default::default() };
    for o in outcomes {
        match o {
            Outcome::Agrees => {}
            Outcome::CutBack => done.cut_back += 1,
            Outcome::Ended => done.ended += 1,
            Outcome::Unanswered => done.unanswered += 1,
        }
    }
    Ok(done)
}

enum Outcome {
    Agrees,
    CutBack,
    Ended,
    Unanswered,
}

async fn one(handler: &HarnessHandler, task_id: &str) -> Outcome {
    match ended_run(&handler.temporal.client, &handler.store, task_id).await {
        Ok(Some(_)) => return Outcome::Ended,
        Ok(None) => {}
        Err(e) => {
            tracing::debug!(task_id, error = %e, "reconcile: no answer from Temporal");
            return Outcome::Unanswered;
        }
    }
    let Ok(Some(seen)) = handler.store.task_head(task_id).await else { return Outcome::Agrees };
    if committed_seq(&handler.temporal.client, task_id).await.is_some_and(|committed| seen.last_seq <= committed) {
        return Outcome::Agrees;
    }
    let handle = handler.temporal.client.get_workflow_handle::<TaskWorkflow>(task_id);
    let ask = handle.execute_update(TaskWorkflow::position, (), WorkflowExecuteUpdateOptions::default());
    let position = match tokio::time::timeout(QUERY_TIMEOUT, ask).await {
        Ok(Ok(p)) => p,
        _ => return Outcome::Unanswered,
    };
    if !position.by_row || !position.idle || seen.last_seq <= position.last_seq {
        return Outcome::Agrees;
    }
    let kept = Stored { history: i64::from(position.stored_history), artifacts: i64::from(position.stored_artifacts) };
    match handler.store.cut_back(task_id, &seen, position.last_seq, kept, &position.head).await {
        Ok(true) => {
            tracing::warn!(
                task_id,
                from = seen.last_seq,
                to = position.last_seq,
                "cut back events a crashed workflow task had appended but never committed"
            );
            Outcome::CutBack
        }
        _ => Outcome::Agrees,
    }
}

/// Newest history events read to find the last `emit_event` a run committed: a turn's last
/// workflow task ends with its final status's marker (`emit_event`'s, or the model call's
/// that stored it), the update's events and the task's
/// completion, so an idle task's marker is among its newest few events.
const NEWEST_EVENTS: i32 = 32;

/// The highest seq the current run's committed history says its `emit_event` local
/// activities stored, read from the run's newest events (one page, newest first), or `None`
/// when that page holds none (issue 31). A stored log that goes no further than this is
/// committed, so the reconciler leaves it without asking the workflow: asking (the
/// `position` update) replays the run's whole history into the worker's cache, which after a
/// restart with many parked tasks held tens of MiB that nothing used.
///
/// Sound because the workflow's own position (`LogPosition::last_seq`) is the highest seq
/// its `emit_event` calls and the model calls that stored a turn's end
/// (`ModelReply::ended`) returned, and every such marker in the history is one of those
/// calls, committed: the position is never below what this finds.
async fn committed_seq(client: &Client, task_id: &str) -> Option<i64> {
    use temporalio_client::{NamespacedClient, grpc::WorkflowService, tonic::IntoRequest};
    use temporalio_common::ActivityDefinition;
    use temporalio_common::protos::coresdk::common::extract_local_activity_marker_data;
    use temporalio_common::protos::temporal::api::{
        common::v1::WorkflowExecution, history::v1::history_event::Attributes,
        workflowservice::v1::GetWorkflowExecutionHistoryReverseRequest,
    };
    let request = GetWorkflowExecutionHistoryReverseRequest {
        namespace: client.namespace(),
        execution: Some(WorkflowExecution { workflow_id: task_id.to_string(), run_id: String::new() }),
        maximum_page_size: NEWEST_EVENTS,
        next_page_token: Vec::new(),
    };
    let mut service = client.clone();
    let ask = WorkflowService::get_workflow_execution_history_reverse(&mut service, request.into_request());
    let page = match tokio::time::timeout(QUERY_TIMEOUT, ask).await {
        Ok(Ok(page)) => page.into_inner(),
        Ok(Err(e)) => {
            tracing::debug!(task_id, error = %e, "reconcile: could not read the run's newest events");
            return None;
        }
        Err(_) => return None,
    };
    page.history?
        .events
        .into_iter()
        .filter_map(|event| match event.attributes? {
            Attributes::MarkerRecordedEventAttributes(marker)
                if marker.marker_name == temporalio_common::protos::constants::LOCAL_ACTIVITY_MARKER_NAME =>
            {
                let data = extract_local_activity_marker_data(&marker.details)?;
                let result = marker.details.get("result")?.payloads.first()?;
                if data.activity_type == harness_workflow::activity::EmitEvent.name() {
                    return serde_json::from_slice::<i64>(&result.data).ok();
                }
                // An instant model call that stored its turn's planned end returned its seq.
                if data.activity_type == harness_workflow::activity::CallModel.name() {
                    #[derive(serde::Deserialize)]
                    struct Ended {
                        ended: Option<i64>,
                    }
                    return serde_json::from_slice::<Ended>(&result.data).ok()?.ended;
                }
                None
            }
            _ => None,
        })
        .max()
}

/// When a task's workflow has closed but the store still shows it open, ends it FAILED in
/// the store, naming how the run ended, and returns that state. `None` while it runs, or
/// when the store already shows it ended.
pub(crate) async fn ended_run(client: &Client, store: &Store, task_id: &str) -> Result<Option<TaskState>, String> {
    // The stored head (no history): its state, and the metadata the FAILED snapshot keeps.
    let Some(row) = store.task(task_id, Some(0)).await.map_err(|e| e.to_string())? else { return Ok(None) };
    if row.state.is_terminal() {
        return Ok(None);
    }
    let handle = client.get_workflow_handle::<TaskWorkflow>(task_id);
    let described = tokio::time::timeout(QUERY_TIMEOUT, handle.describe(WorkflowDescribeOptions::default()))
        .await
        .map_err(|_| "describe timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let how = match described.status() {
        WorkflowExecutionStatus::Running
        | WorkflowExecutionStatus::Paused
        | WorkflowExecutionStatus::ContinuedAsNew => return Ok(None),
        WorkflowExecutionStatus::Terminated => "was terminated by Temporal (a run limit, or an operator)",
        WorkflowExecutionStatus::TimedOut => "timed out",
        WorkflowExecutionStatus::Failed => "failed",
        WorkflowExecutionStatus::Canceled => "was canceled in Temporal",
        _ => "ended without finishing",
    };
    let text = format!("the task's workflow {how} while the task was {}; it cannot take more messages", row.state);
    let status = TaskStatus {
        state: TaskState::Failed,
        message: Some(Message::agent_text(format!("{task_id}:run-ended"), text)),
        timestamp: Some(a2a_types::now_timestamp()),
    };
    let snapshot = a2a_types::Task { status: status.clone(), ..row.task.head() };
    let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task_id.to_string(),
        context_id: snapshot.context_id.clone(),
        status,
        metadata: None,
    });
    let ended =
        NewEvent { snapshot: Some(snapshot), ..NewEvent::new(task_id, "harness-run-ended", event, row.task_queue) };
    match store.append(&ended).await {
        Ok(_) | Err(harness_store::StoreError::Closed(_)) => {}
        Err(e) => return Err(e.to_string()),
    }
    tracing::warn!(task_id, how, "a task's workflow closed without ending it; the store now says FAILED");
    Ok(Some(TaskState::Failed))
}
