//! `TaskWorkflow`: one per task (workflow id = task id). Its `inbox` update is the only way
//! a message reaches the task; its run loop takes inbox items in order, runs one model turn
//! per message and emits every event through `emit_event` (D1). Decisions only; every side
//! effect is an activity.
//!
//! Lifecycle (D5): a `conversation` parks INPUT_REQUIRED / awaiting-next-message after each
//! turn (unless more messages are already waiting); a `one-shot` completes after its turn.
//! Cancel (S6) cuts a running turn and ends CANCELED. A terminal task refuses every message
//! in the validator, naming its state (S7).
//!
//! Bounded state (issue 15): the workflow keeps the task's head, the counters of its log
//! and the messages and artifacts the store does not have yet, never the conversation; the
//! history and artifacts live in the store. Between turns a run whose history passed its
//! [`crate::RunLimits`] continues as new, handing the next run its [`Carried`] state
//! (docs/event-log.md, "The run boundary").

mod builtin;
mod delegate;
mod dispatch;
mod emit;
mod turn;

pub use delegate::sub_task_ext_key;
pub(crate) use emit::set_head_status;

use crate::{
    CancelRequest, InboxItem, ItemKind, Json, LiveTask, LogPosition, Participant, Receipt, Refusal, RemotePush,
    RemoteStarted, Route, SubTask, SubTaskResult, TaskInput, status_ext_key,
};
use a2a_types::{Artifact, Message, Shared, Task, TaskState, TaskStatus};
use std::collections::VecDeque;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};

/// The patch under which every accepted message from a known participant is echoed into
/// the log (S12, the channel extension). A run recorded before echoes none.
const CHANNEL_ECHO: &str = "channel-echo";

/// The patch under which a message's channel echo, when its turn follows at once, is held
/// back and appended with the turn's WORKING in one `emit_event` (issue 31: one local
/// activity, one marker and one store transaction less per message). A run recorded before
/// emits the echo alone.
const ECHO_WITH_WORKING: &str = "echo-with-working";

/// The patch under which an instant provider's turn (a local `call_model`) appends its
/// WORKING, and what was held for it (a message's echo), with its first chunks in
/// `call_model`'s one transaction (issue 31: one local activity, one marker and one store
/// transaction less per message). A run recorded before emits the WORKING alone.
const WORKING_WITH_REPLY: &str = "working-with-instant-reply";

/// The patch under which a new task's Task event, when its first turn follows at once, is
/// held back and appended with that turn's first events (its WORKING, or an instant
/// provider's model call) in one transaction (issue 31: one local activity, one marker and
/// one store transaction less per new task, and its first event one round sooner). A run
/// recorded before appends the Task alone.
const TASK_WITH_TURN: &str = "task-with-turn";

/// The patch under which an instant provider's turn in a conversation that parks after it
/// plans its end before the model call, and the call appends that final status with its last
/// chunks in one transaction (issue 31: one local activity, one marker and one store
/// transaction less per message). A run recorded before emits the final status alone.
const FINAL_WITH_REPLY: &str = "final-with-reply";

/// The patch under which events carry what changed of the history and artifacts, and a
/// turn's model input names where its message ends (docs/event-log.md). A run recorded
/// before it sends whole snapshots and whole histories to its end.
const HISTORY_BY_ROW: &str = "history-by-row";

/// The patch of a run started by code that has every patch above and [`turn::FAILURE_PARKS`]:
/// such a run records this one marker and takes all of them without asking for each
/// (issue 31). Every patch records a marker and, for a run that is not replaying, upserts
/// Temporal's `TemporalChangeVersion` search attribute, so a new task's first workflow task
/// carried six markers and six upserts, a visibility write each on the server, before its
/// message's turn. A run recorded before this patch has no such marker: it asks for each
/// patch as it did, and replays as recorded. A patch added later is not taken by this one
/// (runs recorded with it did not have that patch): it is asked for on its own, or a new
/// run-patches id takes it and all of these, this one asked for after it.
const RUN_PATCHES: &str = "run-patches-2026-12";

#[workflow]
pub struct TaskWorkflow {
    input: TaskInput,
    /// The task's head: id, context, status, metadata (no history, no artifacts).
    head: Task,
    /// What this workflow knows of the task's log and what the next event must carry.
    log: LogState,
    /// What waits to be done and the turn in progress.
    work: Work,
    /// The `messageId`s accepted, for duplicates (S5).
    accepted: Accepted,
    /// What this run has added to its Temporal history (the run boundary).
    run: RunUse,
    /// Sub-tasks this task delegated, and what a stand-in follows (issue 19).
    delegation: Delegation,
    /// The A2UI surfaces the task has open, and what its client renders (issue 30).
    ui: crate::a2ui::Surfaces,
}

/// What the workflow knows of the task's log (D1) and what the next event carries.
#[derive(Default)]
struct LogState {
    /// The newest seq this workflow knows was appended.
    last_seq: i64,
    /// Counter of this workflow's own event keys (`wf-<n>`).
    next_key: u64,
    /// Whether this run stores the history by row ([`HISTORY_BY_ROW`]).
    by_row: bool,
    /// Whether this run echoes messages into the log ([`CHANNEL_ECHO`]).
    channel: bool,
    /// Whether this run holds an echo back for its turn's WORKING ([`ECHO_WITH_WORKING`]).
    echo_with_working: bool,
    /// Whether an instant provider's turn hands its WORKING to `call_model`
    /// ([`WORKING_WITH_REPLY`]).
    working_with_reply: bool,
    /// Whether a new task's Task waits for its first turn ([`TASK_WITH_TURN`]).
    task_with_turn: bool,
    /// Whether an instant provider's turn may plan its end for its model call to append
    /// ([`FINAL_WITH_REPLY`]).
    final_with_reply: bool,
    /// Whether this run took every patch at its start ([`RUN_PATCHES`]): the ones asked
    /// for later (a failure's [`turn::FAILURE_PARKS`]) are then taken without a marker.
    run_patches: bool,
    /// Events held back (their keys taken) for the next `emit_event`, which appends them
    /// before its own: a new task's Task and a message's echo waiting for its turn's WORKING.
    held: Vec<Held>,
    /// How many messages of the history the store has (confirmed by an appended event).
    stored_history: usize,
    /// Messages accepted or replied and not stored yet, the first at `stored_history`: the
    /// next event carries them (EmitInput).
    pending_history: Vec<Message>,
    /// Artifacts added or changed since the last stored event, each with its index.
    pending_artifacts: Vec<(u32, Artifact)>,
    /// The next artifact index (artifacts the store has: an artifact that replaces one by
    /// id keeps the stored one's place, so indexes may skip).
    stored_artifacts: usize,
    /// The participants after a task envelope changed them, for the next event (S11).
    changed_participants: Option<Vec<(String, String)>>,
}

/// An event held back for the next append, its key taken, with the snapshot it stores.
#[derive(Clone)]
struct Held {
    key: String,
    event: a2a_types::StreamResponse,
    snapshot: Option<Task>,
}

/// What waits to be done, and the turn in progress.
#[derive(Default)]
struct Work {
    /// Messages accepted and not yet taken by a turn, each with its place in the history.
    mailbox: VecDeque<(usize, InboxItem)>,
    /// An accepted control (S8), waiting to complete the task: it cuts a running turn.
    control: Option<InboxItem>,
    /// Work that does not wait for a turn: channel echoes and commands, in order (S9, S12).
    side: VecDeque<Side>,
    /// Pushes for a stand-in the run loop has not folded in yet (S15).
    pushes: VecDeque<a2a_types::StreamResponse>,
    /// An accepted cancel (S6): it cuts a running turn.
    cancel: Option<CancelRequest>,
    /// The number of the newest turn.
    turn: u32,
    /// A turn is running (between taking a message and its final status).
    in_turn: bool,
    /// The running turn's mark, for the event that ends it (issue 32).
    turn_mark: Option<crate::TurnMark>,
    /// A brief alone opened the task (S22): it opens with nothing for its model.
    brief_only: bool,
}

/// Receipt cursors of the newest accepted messages by `messageId` (at most
/// [`REMEMBERED_MESSAGES`]): a message that comes again is answered with its first receipt
/// and runs no second turn (S5).
#[derive(Default)]
struct Accepted {
    ids: std::collections::HashMap<String, i64>,
    order: VecDeque<String>,
}

/// What this run has added to its history: `inbox` updates, and an estimate of the bytes
/// ([`crate::RunLimits`]); and how many runs came before it.
#[derive(Default)]
struct RunUse {
    updates: u32,
    bytes: u64,
    runs: u32,
}

/// The sub-tasks this task delegated (issue 19), open and ended, and, for a stand-in, the
/// remote task it follows once the remote agent took the brief.
#[derive(Default)]
struct Delegation {
    sub_tasks: Vec<SubTask>,
    following: Option<RemoteStarted>,
}

/// What the run loop does after a step.
#[derive(Clone, Debug, PartialEq)]
enum Flow {
    /// Wait for the next message (or cancel).
    Next,
    /// The task ended: leave the loop.
    End,
    /// The run's history passed its limits: continue as new with this input.
    ContinueAsNew(Box<TaskInput>),
}

/// Work that does not wait for a turn.
#[derive(Clone, Debug, PartialEq)]
enum Side {
    /// A participant's accepted message, for every subscriber to see (S12).
    Echo { message: Message, sender: String },
    /// A message answered without a turn: a registered slash command (S9), a task envelope
    /// or an event envelope to record (S11).
    Answer(Box<InboxItem>),
    /// A sub-task's result, for the history (issue 19).
    SubResult(crate::SubTaskResult),
}

/// How many accepted `messageId`s a run remembers for duplicates (docs/event-log.md).
pub const REMEMBERED_MESSAGES: usize = 1000;

#[workflow_methods]
impl TaskWorkflow {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, mut input: TaskInput) -> Self {
        let carried = input.carried.take().map(|c| *c).unwrap_or_default();
        let head = if carried.head.id.is_empty() {
            Task {
                id: input.task_id.clone(),
                context_id: input.context_id.clone(),
                status: TaskStatus { state: TaskState::Submitted, message: None, timestamp: None },
                metadata: input.metadata.clone(),
                ..Default::default()
            }
        } else {
            carried.head
        };
        let mut wf = Self {
            input,
            head,
            log: LogState {
                last_seq: carried.last_seq,
                next_key: carried.next_key,
                stored_history: carried.stored_history as usize,
                pending_history: carried.pending_history,
                stored_artifacts: carried.stored_artifacts as usize,
                ..Default::default()
            },
            work: Work {
                mailbox: carried.mailbox.into_iter().map(|(i, item)| (i as usize, item)).collect(),
                turn: carried.turn,
                cancel: carried.cancel,
                ..Default::default()
            },
            accepted: Accepted::default(),
            run: RunUse { runs: carried.runs, ..Default::default() },
            delegation: Delegation { sub_tasks: carried.sub_tasks, following: None },
            ui: carried.ui,
        };
        for (id, cursor) in carried.accepted {
            wf.remember(id, cursor);
        }
        if let Some(first) = wf.input.first.clone() {
            wf.take(first);
        }
        wf
    }

    #[run(name = "TaskWorkflow")]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<TaskState> {
        // Short-circuit: a run with RUN_PATCHES asks for none of the others (no marker each).
        let all = ctx.patched(RUN_PATCHES);
        let by_row = all || ctx.patched(HISTORY_BY_ROW);
        let channel = all || ctx.patched(CHANNEL_ECHO);
        let echo_with_working = all || ctx.patched(ECHO_WITH_WORKING);
        let working_with_reply = all || ctx.patched(WORKING_WITH_REPLY);
        let task_with_turn = all || ctx.patched(TASK_WITH_TURN);
        let final_with_reply = all || ctx.patched(FINAL_WITH_REPLY);
        ctx.state_mut(|s| {
            s.log.run_patches = all;
            s.log.task_with_turn = task_with_turn;
            s.log.final_with_reply = final_with_reply;
            s.log.by_row = by_row;
            s.log.channel = channel;
            s.log.echo_with_working = echo_with_working;
            s.log.working_with_reply = working_with_reply;
        });
        if ctx.state(|s| s.input.stand_in.is_some()) {
            delegate::stand_in(ctx).await?;
            return Self::linger(ctx).await;
        }
        // A continued run's task was opened by the first run.
        if ctx.state(|s| s.run.runs == 0) && !turn::open(ctx).await? {
            return Ok(ctx.state(|s| s.head.status.state));
        }
        loop {
            match turn::step(ctx).await? {
                Flow::Next => {}
                Flow::End => break,
                Flow::ContinueAsNew(input) => {
                    ctx.continue_as_new(*input, Default::default())?;
                }
            }
        }
        // However the task ended (cancelled, failed, completed by its provider or its
        // assignee), a sub-task still open has no one to report to: it is cancelled.
        delegate::cancel_children(ctx).await;
        Self::linger(ctx).await
    }

    /// Refuses what must be refused before anything changes (S7).
    #[update_validator(inbox)]
    pub fn validate_inbox(
        &self,
        _ctx: &WorkflowContextView,
        item: &Json<InboxItem>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if self.accepted.ids.contains_key(&item.message.message_id) {
            // A retry of an accepted message: answered with its first receipt (S5).
            return Ok(());
        }
        let state = self.head.status.state;
        if state.is_terminal() || self.work.cancel.is_some() {
            let state = if state.is_terminal() { state } else { TaskState::Canceled };
            return Err(Refusal::task_ended(state).into_error());
        }
        if let Some(si) = &self.input.stand_in {
            return Err(Refusal::not_allowed(format!(
                "task {} is the stand-in of a sub-task delegated to agent `{}`: it takes no messages (write to its parent task {})",
                self.head.id, si.agent, si.parent
            ))
            .into_error());
        }
        if item.message.parts.is_empty() {
            return Err(Refusal::invalid_message("the message has no parts").into_error());
        }
        // An A2UI action answers a surface this task showed, from a component on it (issue 30).
        if let Err(e) = self.ui.check_incoming(&item.message) {
            let refusal = Refusal::invalid_message(e.message);
            return Err(match e.code {
                Some(code) => refusal.with_code(code),
                None => refusal,
            }
            .into_error());
        }
        match &item.kind {
            ItemKind::Control => self.may_complete(item.sender.as_deref()).map_err(Refusal::into_error)?,
            ItemKind::TaskUpdate { fields } => {
                self.may_update(item.sender.as_deref(), fields).map_err(Refusal::into_error)?
            }
            _ => {}
        }
        Ok(())
    }

    /// Accepts a message into the mailbox; the receipt carries the log cursor (S4, S5). A
    /// message accepted before (same `messageId`) gets its first receipt again and is not
    /// queued twice.
    #[update(name = "inbox")]
    pub fn inbox(&mut self, _ctx: &mut SyncWorkflowContext<Self>, item: Json<InboxItem>) -> Json<Receipt> {
        let item = item.into_inner();
        self.run.updates += 1;
        self.run.bytes += turn::update_bytes(&item);
        if let Some(&cursor) = self.accepted.ids.get(&item.message.message_id) {
            let opened = cursor == 0 && self.log.last_seq == 0;
            return Json(Receipt {
                accepted: true,
                cursor,
                state: self.head.status.state,
                task: opened.then(|| self.live_task()),
                duplicate: true,
            });
        }
        let cursor = self.log.last_seq;
        self.take(item);
        let opened = self.log.last_seq == 0 && self.history_len() == 1;
        Json(Receipt {
            accepted: true,
            cursor,
            state: self.head.status.state,
            task: opened.then(|| self.live_task()),
            duplicate: false,
        })
    }

    /// Requests cancellation (S6); a terminal task ignores it.
    #[signal(name = "cancel")]
    pub fn cancel(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: CancelRequest) {
        if !self.head.status.state.is_terminal() {
            self.work.cancel = Some(request);
        }
    }

    /// S15: a push for a stand-in is taken only with the digest of the token it registered
    /// (compared in constant time) and naming the remote task it follows, while it runs.
    #[update_validator(remote_push)]
    pub fn validate_remote_push(
        &self,
        _ctx: &WorkflowContextView,
        push: &RemotePush,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        use subtle::ConstantTimeEq;
        let refused = || Err("push refused".into());
        let Some(following) = &self.delegation.following else { return refused() };
        let Some(digest) = &following.token_digest else { return refused() };
        if self.head.status.state.is_terminal() || self.work.cancel.is_some() {
            return refused();
        }
        let same: bool = digest.as_bytes().ct_eq(push.token_digest.as_bytes()).into();
        if !same || remote_task_of(&push.event) != following.remote_task_id {
            return refused();
        }
        Ok(())
    }

    /// A push for a stand-in (S15): folded into what it knows of its remote task.
    #[update(name = "remote_push")]
    pub fn remote_push(&mut self, _ctx: &mut SyncWorkflowContext<Self>, push: RemotePush) {
        self.run.updates += 1;
        self.work.pushes.push_back(push.event);
    }

    /// A stand-in's result (issue 19): its sub-task closes and the result is recorded.
    #[signal(name = "sub_task_done")]
    pub fn sub_task_done(&mut self, _ctx: &mut SyncWorkflowContext<Self>, result: SubTaskResult) {
        self.take_sub_result(result);
    }

    /// The tokens the task's turns used so far (the head's usage metadata).
    fn usage(&self) -> Option<crate::TokenUsage> {
        let value = self.head.metadata.as_ref()?.get(&crate::usage_ext_key())?;
        serde_json::from_value(value.clone()).ok()
    }

    /// The task as this workflow holds it ([`LiveTask`]): for operators and the crash tests'
    /// invariants; the harness itself never queries a workflow (issue 20).
    #[query(name = "live")]
    pub fn live(&self, _ctx: &WorkflowContextView) -> LiveTask {
        LiveTask { task: self.live_task(), stored_history: self.log.stored_history as u32 }
    }

    /// Where the committed log ends, for an operator's `temporal workflow query`. The
    /// harness itself asks [`TaskWorkflow::position`]: a query can cross a message.
    #[query(name = "log")]
    pub fn log(&self, _ctx: &WorkflowContextView) -> LogPosition {
        self.log_position()
    }

    /// Where the committed log ends, as the reconciler asks it (docs/event-log.md): an
    /// update that changes nothing, because a query crossing a message's workflow task on
    /// another instance can make the worker lose one (issue 20). Its answer is sent only
    /// once the workflow task that took it has committed, with everything before it.
    #[update(name = "position")]
    pub fn position(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _ask: ()) -> LogPosition {
        self.run.updates += 1;
        self.log_position()
    }

    fn log_position(&self) -> LogPosition {
        LogPosition {
            last_seq: self.log.last_seq,
            stored_history: self.log.stored_history as u32,
            stored_artifacts: self.log.stored_artifacts as u32,
            idle: self.work.mailbox.is_empty() && !self.work.in_turn && self.log.last_seq > 0,
            by_row: self.log.by_row,
            head: self.head.clone(),
        }
    }
}

/// The remote task a pushed event names.
fn remote_task_of(event: &a2a_types::StreamResponse) -> &str {
    match event {
        a2a_types::StreamResponse::Task(t) => &t.id,
        a2a_types::StreamResponse::Message(m) => &m.task_id,
        a2a_types::StreamResponse::StatusUpdate(u) => &u.task_id,
        a2a_types::StreamResponse::ArtifactUpdate(u) => &u.task_id,
    }
}

impl TaskWorkflow {
    /// The terminal linger (so late readers still reach the workflow), then the final state.
    async fn linger(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<TaskState> {
        let linger = ctx.state(|s| s.input.linger_secs);
        if linger > 0 {
            ctx.timer(Duration::from_secs(linger)).await;
        }
        // TEMPORAL-RUST.md item 6: the handlers are synchronous, so none is cut off here.
        Ok(ctx.state(|s| s.head.status.state))
    }

    /// The task's participants (its task data, EXTENSIONS.md).
    fn participants(&self) -> Vec<Participant> {
        self.task_data()
            .and_then(|d| d.get("participants"))
            .and_then(|p| serde_json::from_value(p.clone()).ok())
            .unwrap_or_default()
    }

    /// S8, D4: only a known participant who is more than a watcher may complete the task.
    fn may_complete(&self, sender: Option<&str>) -> Result<(), Refusal> {
        let task = &self.head.id;
        let Some(sender) = sender else {
            return Err(Refusal::invalid_message(format!(
                "a control needs a known sender: name the participant (X-Participant-Id or metadata.participant_id); \
                 an anonymous caller cannot complete task {task}"
            )));
        };
        match self.participants().iter().find(|p| p.id == sender).map(|p| p.role.as_str()) {
            None => Err(Refusal::not_allowed(format!("participant `{sender}` is not on task {task}"))),
            Some("watcher") => {
                Err(Refusal::not_allowed(format!("participant `{sender}` watches task {task} and may not complete it")))
            }
            Some(_) => Ok(()),
        }
    }

    /// S11, D4: a task envelope needs a known participant; participants change only by an
    /// admin's.
    fn may_update(&self, sender: Option<&str>, fields: &a2a_types::Struct) -> Result<(), Refusal> {
        let task = &self.head.id;
        let Some(sender) = sender else {
            return Err(Refusal::invalid_message(format!(
                "a task envelope needs a known sender: an anonymous caller cannot change task {task}"
            )));
        };
        let participants = self.participants();
        let Some(me) = participants.iter().find(|p| p.id == sender) else {
            return Err(Refusal::not_allowed(format!("participant `{sender}` is not on task {task}")));
        };
        if fields.contains_key("participants") && me.role != "admin" {
            return Err(Refusal::invalid_message("admin required to change participants"));
        }
        Ok(())
    }

    /// The task extension's data on the head.
    fn task_data(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.head.metadata.as_ref()?.get(&crate::task_ext_key())?.as_object()
    }

    /// The substate the task's head carries.
    fn substate(&self) -> Option<String> {
        let md = self.head.metadata.as_ref()?;
        md.get(&status_ext_key())?.get("substate")?.as_str().map(String::from)
    }

    /// How long the history is: what the store has and what it does not have yet.
    fn history_len(&self) -> usize {
        self.log.stored_history + self.log.pending_history.len()
    }

    /// The head with the messages and artifacts the store does not have yet.
    fn live_task(&self) -> Task {
        Task {
            history: self.log.pending_history.iter().cloned().map(Shared::new).collect(),
            artifacts: self.log.pending_artifacts.iter().map(|(_, a)| Shared::new(a.clone())).collect(),
            ..self.head.clone()
        }
    }

    /// Puts an accepted message into the history and the mailbox, and remembers its
    /// `messageId` with the receipt's cursor.
    fn take(&mut self, item: InboxItem) {
        let mut message = item.message.clone();
        message.task_id = self.head.id.clone();
        message.context_id = self.head.context_id.clone();
        if let ItemKind::Command { name, .. } = &item.kind {
            // Marked so the model never reads it (S9).
            let mark = serde_json::json!({ "name": name });
            message.metadata.get_or_insert_with(Default::default).insert(crate::command_ext_key(), mark);
        }
        let id = message.message_id.clone();
        // What this sender's renderer takes, for the surfaces the model shows next (issue 30).
        self.ui.note_client(message.metadata.as_ref());
        let route = item.kind.route();
        if route == Route::Opening {
            // Nothing for the model and nothing to record: the brief is the task (S22).
            self.work.brief_only = true;
            self.remember(id, self.log.last_seq);
            return;
        }
        self.log.pending_history.push(message.clone());
        let position = self.history_len() - 1;
        if let Some(sender) = item.sender.clone().filter(|_| !item.kind.is_record()) {
            self.work.side.push_back(Side::Echo { message: message.clone(), sender });
        }
        let item = InboxItem { message, ..item };
        match route {
            Route::Turn => self.work.mailbox.push_back((position, item)),
            Route::Control => self.work.control = Some(item),
            Route::Answer => self.work.side.push_back(Side::Answer(Box::new(item))),
            Route::Opening => {}
        }
        self.remember(id, self.log.last_seq);
    }

    /// Remembers an accepted `messageId` with its receipt cursor.
    fn remember(&mut self, id: String, cursor: i64) {
        self.accepted.remember(id, cursor);
    }
}

impl Accepted {
    /// Remembers an accepted `messageId` with its receipt cursor, forgetting the oldest past
    /// [`REMEMBERED_MESSAGES`].
    fn remember(&mut self, id: String, cursor: i64) {
        if self.ids.insert(id.clone(), cursor).is_none() {
            self.order.push_back(id);
            if self.order.len() > REMEMBERED_MESSAGES
                && let Some(old) = self.order.pop_front()
            {
                self.ids.remove(&old);
            }
        }
    }
}
