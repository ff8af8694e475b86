//! `TaskWorkflow`: one per task (workflow id = task id). Its `inbox` update is the only way
//! a message reaches the task; its run loop takes inbox items in order, runs one model turn
//! per message and emits every event through `emit_event` (D1). Decisions only; every side
//! effect is an activity.
//!
//! Lifecycle (D5): a `conversation` parks INPUT_REQUIRED / awaiting-next-message after each
//! turn (unless more messages are already waiting); a `one-shot` completes after its turn.
//! Cancel (S6) cuts a running turn and ends CANCELED. A terminal task refuses every message
//! in the validator, naming its state (S7).

use crate::activities::Activities;
use crate::{
    AWAITING_NEXT_MESSAGE, CancelRequest, EmitInput, InboxItem, Lifecycle, LogPosition, ModelTurn, MonitorRow, Receipt,
    Refusal, TaskInput, status_ext_key,
};
use a2a_types::{Artifact, Message, Part, StreamResponse, Struct, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
use std::collections::VecDeque;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, CancellableFuture, LocalActivityOptions, SyncWorkflowContext,
    WorkflowContext, WorkflowContextView, WorkflowResult,
};

/// How long a workflow whose first inbox update was refused waits for a message before it
/// ends (TEMPORAL-RUST.md item 2).
const UNOPENED_IDLE: Duration = Duration::from_secs(600);

/// The patch under which events carry what changed of the history and artifacts, and a
/// turn's model input names where its message ends (docs/event-log.md). A run recorded
/// before it sends whole snapshots and whole histories to its end.
const HISTORY_BY_ROW: &str = "history-by-row";

#[workflow]
pub struct TaskWorkflow {
    input: TaskInput,
    task: Task,
    /// Messages accepted and not yet taken by a turn, each with its place in `task.history`.
    mailbox: VecDeque<(usize, InboxItem)>,
    /// The newest seq this workflow knows was appended.
    last_seq: i64,
    /// Counter of this workflow's own event keys (`wf-<n>`).
    next_key: u64,
    turn: u32,
    cancel: Option<CancelRequest>,
    /// Whether this run stores the history by row ([`HISTORY_BY_ROW`]).
    by_row: bool,
    /// How much of `task.history` the store has: every event carries the messages added
    /// since the one before (EmitInput).
    stored_history: usize,
    /// Ids of the artifacts added or changed since the last event.
    changed_artifacts: Vec<String>,
    /// How many of `task.artifacts` the store has (the count the newest event knew).
    stored_artifacts: usize,
    /// Receipt cursors of the newest accepted messages by `messageId` (at most
    /// [`REMEMBERED_MESSAGES`]): a message that comes again is answered with its first
    /// receipt and runs no second turn (S5).
    accepted: std::collections::HashMap<String, i64>,
    accepted_order: VecDeque<String>,
    /// A turn is running (between taking a message and its final status).
    in_turn: bool,
}

/// How many accepted `messageId`s a run remembers for duplicates (docs/event-log.md).
pub const REMEMBERED_MESSAGES: usize = 1000;

#[workflow_methods]
impl TaskWorkflow {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: TaskInput) -> Self {
        let task = Task {
            id: input.task_id.clone(),
            context_id: input.context_id.clone(),
            status: TaskStatus { state: TaskState::Submitted, message: None, timestamp: None },
            metadata: input.metadata.clone(),
            ..Default::default()
        };
        let mut wf = Self {
            input,
            task,
            mailbox: VecDeque::new(),
            last_seq: 0,
            next_key: 0,
            turn: 0,
            cancel: None,
            by_row: false,
            stored_history: 0,
            changed_artifacts: Vec::new(),
            stored_artifacts: 0,
            accepted: Default::default(),
            accepted_order: VecDeque::new(),
            in_turn: false,
        };
        if let Some(first) = wf.input.first.clone() {
            wf.take(first);
        }
        wf
    }

    #[run(name = "TaskWorkflow")]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<TaskState> {
        let by_row = ctx.patched(HISTORY_BY_ROW);
        ctx.state_mut(|s| s.by_row = by_row);
        let opened = {
            let idle = ctx.timer(UNOPENED_IDLE);
            let mut idle = std::pin::pin!(idle);
            let opened = temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(|s| !s.mailbox.is_empty() || s.cancel.is_some()) => r.is_ok(),
                _ = &mut idle => false,
            };
            if opened {
                idle.cancel();
            }
            opened
        };
        if !opened {
            return Ok(ctx.state(|s| s.task.status.state));
        }
        let opened_at = timestamp(ctx.workflow_time());
        let task = ctx.state_mut(|s| {
            s.task.status.timestamp = opened_at;
            s.task.clone()
        });
        let head = task.head();
        emit(ctx, StreamResponse::Task(task), Some(head)).await?;

        loop {
            ctx.wait_condition(|s| !s.mailbox.is_empty() || s.cancel.is_some()).await?;
            if ctx.state(|s| s.cancel.is_some()) {
                set_status(ctx, TaskState::Canceled, None, None).await?;
                break;
            }
            let Some((position, item)) = ctx.state_mut(|s| {
                let next = s.mailbox.pop_front();
                s.in_turn = next.is_some();
                next
            }) else {
                continue;
            };
            let turn = ctx.state_mut(|s| {
                s.turn += 1;
                s.turn
            });
            // A provider may answer a message straight from SUBMITTED (decided at admission).
            if !item.skip_working {
                set_status(ctx, TaskState::Working, None, None).await?;
            }

            // The conversation up to this turn's message; what the store already has is
            // read from there by `call_model`.
            let model_turn = ctx.state(|s| {
                let upto = if s.by_row { position + 1 } else { s.task.history.len() };
                let from = if s.by_row { s.stored_history.min(upto) } else { 0 };
                ModelTurn {
                    task_id: s.input.task_id.clone(),
                    context_id: s.input.context_id.clone(),
                    task_queue: s.input.task_queue.clone(),
                    model: s.input.model.clone(),
                    turn,
                    artifact_id: format!("reply-{turn}"),
                    history: s.task.history[from..upto].to_vec(),
                    history_from: from as u32,
                }
            });
            let artifact_id = model_turn.artifact_id.clone();
            let outcome = if ctx.state(|s| s.input.instant_model) {
                let call = ctx.execute_local_activity(
                    Activities::call_model,
                    model_turn,
                    LocalActivityOptions::builder().start_to_close_timeout(Duration::from_secs(60)).build(),
                );
                cancellable(ctx, call).await
            } else {
                let call = ctx.execute_activity(
                    Activities::call_model,
                    model_turn,
                    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(600))
                        .heartbeat_timeout(Duration::from_secs(30))
                        .retry_policy(temporalio_common::RetryPolicy::builder().maximum_attempts(3).build())
                        .build(),
                );
                cancellable(ctx, call).await
            };
            let Some(result) = outcome else {
                // Cancel cut the turn (S6): the store's terminal fence stops any late chunk.
                set_status(ctx, TaskState::Canceled, None, None).await?;
                break;
            };
            match result {
                Ok(reply) => {
                    let task_id = ctx.state(|s| s.task.id.clone());
                    let status_text =
                        reply.finish.as_ref().and_then(|f| f.message.clone()).unwrap_or(reply.text.clone());
                    let mut reply_message = (!status_text.is_empty())
                        .then(|| Message::agent_text(format!("{task_id}:reply:{turn}"), status_text));
                    ctx.state_mut(|s| {
                        if !reply.text.is_empty() {
                            s.changed_artifacts.push(artifact_id.clone());
                            s.task.artifacts.push(Artifact {
                                artifact_id,
                                name: "reply".into(),
                                parts: vec![Part::text(reply.text.clone())],
                                ..Default::default()
                            });
                        }
                        for artifact in reply.artifacts {
                            s.changed_artifacts.push(artifact.artifact_id.clone());
                            match s.task.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
                                Some(existing) => *existing = artifact,
                                None => s.task.artifacts.push(artifact),
                            }
                        }
                        if let Some(m) = reply_message.as_mut() {
                            m.task_id = s.task.id.clone();
                            m.context_id = s.task.context_id.clone();
                            s.task.history.push(m.clone());
                        }
                    });
                    if let Some(finish) = reply.finish {
                        // The provider decided how the turn ends (the conformance profile).
                        match finish.state {
                            TaskState::InputRequired => {
                                set_status(ctx, TaskState::InputRequired, reply_message, None).await?;
                                continue;
                            }
                            state if state.is_terminal() => {
                                set_status(ctx, state, reply_message, None).await?;
                                break;
                            }
                            _ => {}
                        }
                    }
                    if ctx.state(|s| !s.mailbox.is_empty()) {
                        continue;
                    }
                    match ctx.state(|s| s.input.lifecycle) {
                        Lifecycle::OneShot => {
                            set_status(ctx, TaskState::Completed, reply_message, None).await?;
                            break;
                        }
                        Lifecycle::Conversation => {
                            set_status(ctx, TaskState::InputRequired, reply_message, Some(AWAITING_NEXT_MESSAGE))
                                .await?;
                        }
                    }
                }
                Err(ActivityExecutionError::Cancelled(_)) if ctx.state(|s| s.cancel.is_some()) => {
                    set_status(ctx, TaskState::Canceled, None, None).await?;
                    break;
                }
                Err(e) => {
                    let why = e.failure().map(|f| f.message.clone()).unwrap_or_else(|| e.to_string());
                    let message_id = format!("{}:failure:{turn}", ctx.state(|s| s.task.id.clone()));
                    let text = format!("the model failed: {why}");
                    set_status(ctx, TaskState::Failed, Some(Message::agent_text(message_id, text)), None).await?;
                    break;
                }
            }
        }
        let linger = ctx.state(|s| s.input.linger_secs);
        if linger > 0 {
            ctx.timer(Duration::from_secs(linger)).await;
        }
        // TEMPORAL-RUST.md item 6: the handlers are synchronous, so none is cut off here.
        Ok(ctx.state(|s| s.task.status.state))
    }

    /// Refuses what must be refused before anything changes (S7).
    #[update_validator(inbox)]
    pub fn validate_inbox(
        &self,
        _ctx: &WorkflowContextView,
        item: &InboxItem,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if self.accepted.contains_key(&item.message.message_id) {
            // A retry of an accepted message: answered with its first receipt (S5).
            return Ok(());
        }
        let state = self.task.status.state;
        if state.is_terminal() || self.cancel.is_some() {
            let state = if state.is_terminal() { state } else { TaskState::Canceled };
            return Err(Refusal::task_ended(state).into_error());
        }
        if item.message.parts.is_empty() {
            return Err(Refusal::invalid_message("the message has no parts").into_error());
        }
        Ok(())
    }

    /// Accepts a message into the mailbox; the receipt carries the log cursor (S4, S5). A
    /// message accepted before (same `messageId`) gets its first receipt again and is not
    /// queued twice.
    #[update(name = "inbox")]
    pub fn inbox(&mut self, _ctx: &mut SyncWorkflowContext<Self>, item: InboxItem) -> Receipt {
        if let Some(&cursor) = self.accepted.get(&item.message.message_id) {
            let opened = cursor == 0 && self.last_seq == 0;
            return Receipt {
                accepted: true,
                cursor,
                state: self.task.status.state,
                task: opened.then(|| self.task.clone()),
                duplicate: true,
            };
        }
        let cursor = self.last_seq;
        self.take(item);
        let opened = self.last_seq == 0 && self.task.history.len() == 1;
        Receipt {
            accepted: true,
            cursor,
            state: self.task.status.state,
            task: opened.then(|| self.task.clone()),
            duplicate: false,
        }
    }

    /// Requests cancellation (S6); a terminal task ignores it.
    #[signal(name = "cancel")]
    pub fn cancel(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: CancelRequest) {
        if !self.task.status.state.is_terminal() {
            self.cancel = Some(request);
        }
    }

    /// The task as this workflow sees it (S13).
    /// What `/_monitor` shows of a running task (S20).
    #[query(name = "monitor")]
    pub fn monitor(&self, _ctx: &WorkflowContextView) -> MonitorRow {
        let substate = self
            .task
            .metadata
            .as_ref()
            .and_then(|m| m.get(&status_ext_key()))
            .and_then(|v| v.get("substate"))
            .and_then(|v| v.as_str())
            .map(String::from);
        MonitorRow {
            task_id: self.task.id.clone(),
            state: self.task.status.state,
            substate,
            mailbox_depth: self.mailbox.len() as u32,
            turn: self.turn,
            children: Vec::new(),
        }
    }

    #[query(name = "task")]
    pub fn task(&self, _ctx: &WorkflowContextView) -> Task {
        self.task.clone()
    }

    /// Where the committed log ends (docs/event-log.md, the reconciler).
    #[query(name = "log")]
    pub fn log(&self, _ctx: &WorkflowContextView) -> LogPosition {
        LogPosition {
            last_seq: self.last_seq,
            stored_history: self.stored_history as u32,
            stored_artifacts: self.stored_artifacts as u32,
            idle: self.mailbox.is_empty() && !self.in_turn && self.last_seq > 0,
            by_row: self.by_row,
            head: self.task.head(),
        }
    }
}

impl TaskWorkflow {
    /// Puts an accepted message into the history and the mailbox, and remembers its
    /// `messageId` with the receipt's cursor.
    fn take(&mut self, item: InboxItem) {
        let mut message = item.message.clone();
        message.task_id = self.task.id.clone();
        message.context_id = self.task.context_id.clone();
        self.task.history.push(message.clone());
        self.mailbox.push_back((self.task.history.len() - 1, InboxItem { message, ..item }));
        let id = self.task.history[self.task.history.len() - 1].message_id.clone();
        if self.accepted.insert(id.clone(), self.last_seq).is_none() {
            self.accepted_order.push_back(id);
            if self.accepted_order.len() > REMEMBERED_MESSAGES
                && let Some(old) = self.accepted_order.pop_front()
            {
                self.accepted.remove(&old);
            }
        }
    }
}

fn timestamp(t: Option<std::time::SystemTime>) -> Option<String> {
    t.map(a2a_types::format_timestamp)
}

/// Runs an activity until it ends or the task is canceled (`None`); a cancel tells the
/// worker to stop it, and the store's terminal fence refuses its late chunks (D1).
async fn cancellable<T>(
    ctx: &WorkflowContext<TaskWorkflow>,
    call: impl CancellableFuture<Output = Result<T, ActivityExecutionError>>,
) -> Option<Result<T, ActivityExecutionError>> {
    let mut call = std::pin::pin!(call);
    let outcome = temporalio_sdk::workflows::select! {
        r = &mut call => Some(r),
        _ = ctx.wait_condition(|s| s.cancel.is_some()) => None,
    };
    if outcome.is_none() {
        call.cancel();
        let _ = call.await;
    }
    outcome
}

/// Sets the status (with its timestamp from workflow time) and emits it with the snapshot.
async fn set_status(
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
async fn emit(
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
