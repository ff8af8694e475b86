//! `TaskWorkflow`: one per task (workflow id = task id). Its `inbox` update is the only way
//! a message reaches the task; its run loop takes inbox items in order, runs one model turn
//! per message and emits every event through `emit_event` (D1). Decisions only; every side
//! effect is an activity.
//!
//! Lifecycle (D5): a `conversation` parks INPUT_REQUIRED / awaiting-next-message after each
//! turn (unless more messages are already waiting); a `one-shot` completes after its turn.
//! Cancel (S6) cuts a running turn and ends CANCELED. A terminal task refuses every message
//! in the validator, naming its state (S7).

mod emit;
mod turn;

use crate::{CancelRequest, InboxItem, LogPosition, MonitorRow, Receipt, Refusal, TaskInput, status_ext_key};
use a2a_types::{Task, TaskState, TaskStatus};
use std::collections::VecDeque;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};

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
        if !turn::open(ctx).await? {
            return Ok(ctx.state(|s| s.task.status.state));
        }
        while turn::step(ctx).await? == turn::Flow::Next {}
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
