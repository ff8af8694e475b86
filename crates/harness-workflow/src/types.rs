//! Inputs and outputs of `TaskWorkflow`'s handlers and activities (one struct each).

use a2a_types::{Artifact, Message, StreamResponse, Task, TaskState};
use serde::{Deserialize, Serialize};

/// How a task ends (D5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    /// After each turn the task parks INPUT_REQUIRED / awaiting-next-message.
    #[default]
    Conversation,
    /// The task completes when the model's turn ends.
    OneShot,
}

impl std::str::FromStr for Lifecycle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "conversation" => Ok(Self::Conversation),
            "one-shot" => Ok(Self::OneShot),
            other => Err(format!("unknown lifecycle `{other}` (expected `conversation` or `one-shot`)")),
        }
    }
}

/// The workflow's input: what a new task is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskInput {
    pub task_id: String,
    pub context_id: String,
    pub task_queue: String,
    pub lifecycle: Lifecycle,
    /// Model provider name (D6), e.g. `echo`.
    pub model: String,
    /// After reaching a terminal state the run stays open this long, so a message racing
    /// the end is refused by the validator naming the state (S7), then it closes.
    #[serde(default)]
    pub linger_secs: u64,
    /// Run `call_model` as a local activity (an instant provider such as echo).
    #[serde(default)]
    pub instant_model: bool,
    /// The task's metadata at creation: the task extension's data under `NS/task`
    /// (EXTENSIONS.md), e.g. the default brief of a plain first message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<a2a_types::Struct>,
    /// The message that opens the task, carried in the start itself: it is durable with the
    /// workflow's start, so a workflow task that dies before it commits cannot lose it (the
    /// `inbox` update that follows is a duplicate and answers with its receipt). Runs started
    /// before this field existed have none and take their first message from the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<InboxItem>,
    /// When a run continues as new after this many history events, estimated history bytes
    /// or messages (docs/event-log.md, "The run boundary"). A run started before the field
    /// existed takes the defaults.
    #[serde(default)]
    pub run_limits: RunLimits,
    /// Participant mode (S22): the brief named this assignee, not this agent; the task makes
    /// no model call and waits for the assignee's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    /// The brief's reasoning effort for every turn (S21, a trusted delegator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// What a run that continued as new hands the next one; `None` for a task's first run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<Box<Carried>>,
    /// Set on a sub-task's stand-in (issue 19): the workflow follows a remote task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stand_in: Option<StandIn>,
    /// How turns use tools (issue 29); a run started before takes the defaults.
    #[serde(default)]
    pub tools: ToolLimits,
}

/// When a task's run continues as new (`[agent] run_max_*`): Temporal caps each run at
/// 2,000 updates, 51,200 events and 50 MB of history, and warns at 10,240 events and 10 MB;
/// these defaults stay well under all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunLimits {
    /// History events of one run.
    pub events: u32,
    /// History bytes of one run, as the workflow estimates them from what it adds
    /// (messages, replies, receipts, and a fixed cost per event).
    pub bytes: u64,
    /// `inbox` updates of one run (every message, a retried one included).
    pub messages: u32,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self { events: 4_000, bytes: 4 * 1024 * 1024, messages: 1_000 }
    }
}

/// The state one run hands the next when it continues as new: what the workflow needs to
/// decide, never the conversation (the store has that). Its size is bounded by the
/// messages still waiting for a turn, and a run does not continue while that is large.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Carried {
    /// The task's head (id, context, status, metadata): no history, no artifacts.
    pub head: Task,
    /// The newest seq appended, the workflow's event-key counter and the turn counter: the
    /// log, its keys (`wf-<n>`, `turn-<t>-chunk-<i>`) and cursors go on where they were.
    pub last_seq: i64,
    pub next_key: u64,
    pub turn: u32,
    /// How many messages the store has, and the next artifact index.
    pub stored_history: u32,
    pub stored_artifacts: u32,
    /// Messages accepted or replied and not stored yet, the first at `stored_history`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_history: Vec<Message>,
    /// Messages waiting for a turn, each with its place in the history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mailbox: Vec<(u32, InboxItem)>,
    /// The newest accepted `messageId`s with their receipt cursors, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<(String, i64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<CancelRequest>,
    /// Runs before this one (1 for the second run).
    pub runs: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_tasks: Vec<SubTask>,
    /// The A2UI surfaces the task has open (issue 30): an action is checked against them.
    #[serde(default, skip_serializing_if = "crate::a2ui::Surfaces::is_empty")]
    pub ui: crate::a2ui::Surfaces,
}

/// The `live` query's answer: the task as the workflow holds it, with what the store may not
/// have yet. No read of the harness sends it (reads come from the store, issue 20): it is for
/// an operator's `temporal workflow query` and for the crash tests, which check that the
/// store says what the workflow says.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveTask {
    /// The head, with the messages and artifacts not stored yet.
    pub task: Task,
    pub stored_history: u32,
}

/// One message for the task's inbox (the `inbox` update's input). Already redacted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InboxItem {
    /// The inbox audit row of this message.
    pub request_id: String,
    pub message: Message,
    /// The turn on this message goes to its final state without WORKING: the provider said
    /// so when the message was admitted (`ModelProvider::shows_working` (harness-agent)),
    /// and it travels with the message, so a replay decides the same.
    #[serde(default, skip_serializing_if = "is_false")]
    pub skip_working: bool,
    /// The turn on this message is a direct reply
    /// (`ModelProvider::replies_directly`, harness-agent): the task completes after it,
    /// whatever the lifecycle, since its client was answered with a Message and tracks no task.
    #[serde(default, skip_serializing_if = "is_false")]
    pub direct: bool,
    /// What the message is to the workflow (S8, S9), decided when it was admitted: an
    /// ordinary message (the default, and every message of a run recorded before), the
    /// control envelope, or a registered slash command.
    #[serde(default, skip_serializing_if = "ItemKind::is_message")]
    pub kind: ItemKind,
    /// The participant who sent it, when known (D4): a control needs one (S8), and the
    /// channel names it (S12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    /// The W3C `traceparent` of what it belongs to (issue 32), when traces are on: the
    /// request that delivered the message; the turn's model and tool calls are its children.
    /// Recorded in the history, so a replayed or retried call continues the same trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// What an inbox item is to the workflow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ItemKind {
    /// A message for the model: it takes a turn.
    #[default]
    Message,
    /// `{"kind":"control","action":"complete"}` (S8): completes the task, cutting a
    /// running turn.
    Control,
    /// `/<name> <args>` for a registered command (S9): runs through `run_command`, never
    /// reaches the model.
    Command { name: String, args: String },
    /// A task envelope on an existing task (S11): these fields of the task data change
    /// (name, description, acceptance criteria; participants from an admin). The message
    /// is recorded and takes no turn.
    TaskUpdate { fields: a2a_types::Struct },
    /// A `status_update` or `artifact_update` envelope (S11): recorded into the history as
    /// a framed event (the message's text frames it), no turn.
    Record { event: String },
    /// A brief alone opened the task (S22): nothing for the model, no history entry.
    BriefOnly,
}

/// Where the workflow puts an accepted item ([`ItemKind::route`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The mailbox: it takes a turn.
    Turn,
    /// The waiting control: it completes the task, cutting a running turn.
    Control,
    /// The side queue, answered by the workflow without a turn (in order with echoes).
    Answer,
    /// Nowhere: the brief alone is the task (no history entry, no turn).
    Opening,
}

impl ItemKind {
    pub fn is_message(&self) -> bool {
        *self == Self::Message
    }

    /// Where the workflow puts an item of this kind: the one place that decides it.
    pub fn route(&self) -> Route {
        match self {
            Self::Message => Route::Turn,
            Self::Control => Route::Control,
            Self::Command { .. } | Self::TaskUpdate { .. } | Self::Record { .. } => Route::Answer,
            Self::BriefOnly => Route::Opening,
        }
    }

    /// Whether the item records an event someone else produced (S11): its sender is not
    /// echoed as speaking.
    pub fn is_record(&self) -> bool {
        matches!(self, Self::Record { .. })
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The `inbox` update's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub accepted: bool,
    /// The newest seq of the log when the message was accepted: the events this message
    /// causes come after it.
    pub cursor: i64,
    pub state: TaskState,
    /// The task, when this message opened it (its first message). Later receipts leave it
    /// out: the snapshot grows with the conversation, and every receipt is recorded in the
    /// workflow's history.
    pub task: Option<Task>,
    /// The message was accepted before (same `messageId`): this is the first receipt again,
    /// and no second turn runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

/// The `cancel` signal's input.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CancelRequest {
    pub reason: String,
}

/// `emit_event`'s input. Its size does not grow with the conversation: the snapshot is the
/// task's head, and the history and artifacts travel as what changed since the event before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmitInput {
    pub task_id: String,
    pub task_queue: String,
    pub key: String,
    pub event: StreamResponse,
    /// The task's head (no history, no artifacts) after a final status or the Task. (A
    /// workflow recorded before the history was stored by rows sends the whole task; the
    /// store takes its history and artifacts as changes from index 0.)
    pub snapshot: Option<Task>,
    /// Messages added to the history since the event before, the first at `history_from`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default)]
    pub history_from: u32,
    /// Artifacts added or changed since the event before, each with its place in the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<(u32, Artifact)>,
    /// How many messages and artifacts the workflow knew stored before this event: when the
    /// event replaces an uncommitted one, the store drops the rows past these counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_before: Option<(u32, u32)>,
    /// The task's participants (id, role) after a task envelope changed them (S11): the
    /// store's access list follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub participants: Option<Vec<(String, String)>>,
    /// The turn this event ends (its final status), for the turn's metrics and span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnMark>,
    /// Events the workflow held back to append with this one, in one transaction and one
    /// local activity, before it (issue 31: a message's channel echo goes with its turn's
    /// WORKING). Each is complete as it would have been appended alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<EmitInput>,
}

/// A model turn as its end reports it (issue 32): when it began and, with traces on, its
/// span: a child of the request that delivered its message, with an id derived from the
/// task and the turn (so a replay derives the same), and the parent of the turn's model and
/// tool calls. The activity that stores the turn's final status exports the span.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnMark {
    pub turn: u32,
    /// When the turn began: workflow time, Unix milliseconds.
    pub started_ms: u64,
    /// The W3C `traceparent` of the turn's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The turn span's id (16 hex digits), when there is a parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
}

impl TurnMark {
    /// Turn `turn` of `task_id`, begun at `started`, for the message delivered under `parent`.
    pub fn new(task_id: &str, turn: u32, started: Option<std::time::SystemTime>, parent: Option<&str>) -> Self {
        let started_ms =
            started.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_millis() as u64);
        let parent = parent.filter(|p| traceparent_parts(p).is_some()).map(String::from);
        // FNV-1a of the task id and the turn: the same on every replay, never zero.
        let span_id = parent.as_ref().map(|_| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in task_id.bytes().chain(turn.to_be_bytes()) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            format!("{:016x}", h.max(1))
        });
        Self { turn, started_ms, parent, span_id }
    }

    /// The `traceparent` of what the turn runs (its model and tool calls, a delegation): the
    /// turn span as their parent. `None` without traces.
    pub fn child_trace(&self) -> Option<String> {
        let (trace_id, _, flags) = traceparent_parts(self.parent.as_deref()?)?;
        Some(format!("00-{trace_id}-{}-{flags}", self.span_id.as_deref()?))
    }
}

/// A W3C `traceparent`'s trace id, parent id and flags (version 00 only).
fn traceparent_parts(traceparent: &str) -> Option<(&str, &str, &str)> {
    let mut parts = traceparent.split('-');
    let (version, trace_id, span_id, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (version == "00" && parts.next().is_none() && hex(trace_id, 32) && hex(span_id, 16) && hex(flags, 2))
        .then_some((trace_id, span_id, flags))
}

/// The `log` query's answer: where the workflow's committed log ends, for the reconciler
/// that cuts back what a crashed workflow task left in the store (docs/event-log.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogPosition {
    /// The newest seq the workflow appended.
    pub last_seq: i64,
    /// Messages and artifacts the workflow knows stored.
    pub stored_history: u32,
    pub stored_artifacts: u32,
    /// No turn runs and none waits: nothing may append to the log until the next message.
    pub idle: bool,
    /// Whether this run stores the history by row (a run from before cannot be cut back).
    pub by_row: bool,
    /// The task's head (no history, no artifacts).
    pub head: Task,
}

/// `call_model`'s input: one turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelTurn {
    pub task_id: String,
    pub context_id: String,
    pub task_queue: String,
    pub model: String,
    pub turn: u32,
    pub artifact_id: String,
    /// The conversation up to this turn's message (the last), from index `history_from` on:
    /// `call_model` reads the messages before that from the store, which has every message
    /// added before the event before the turn (WORKING stores the turn's own, so this is
    /// usually empty). A turn scheduled by an older worker sends it all.
    pub history: Vec<Message>,
    #[serde(default)]
    pub history_from: u32,
    /// The task's reasoning effort, when its brief set one (S21).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// The model call's round within the turn (0 first; each round of tool calls adds one,
    /// issue 29): its chunk keys are its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub round: u32,
    /// The tool calls of this turn's earlier rounds and their results, in order: what the
    /// model reads after the conversation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<ToolRound>,
    /// The W3C `traceparent` of what it belongs to (issue 32), when traces are on: the
    /// request that delivered the message; the turn's model and tool calls are its children.
    /// Recorded in the history, so a replayed or retried call continues the same trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// Events the workflow held back for this call to append first, in the transaction of
    /// its first chunks (an instant provider's turn: its WORKING, and a message's echo held
    /// for it; issue 31). Each is complete as `emit_event` would have appended it, and the
    /// call appends them even when the reply has no chunk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<EmitInput>,
    /// How the turn ends if this call's reply is plain (text alone: no tool call, finish,
    /// usage or artifact of the provider's own): the call appends that final status with its
    /// last chunks, in their transaction (issue 31), and says so in [`ModelReply::ended`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<PlannedEnd>,
}

/// A turn's end decided before its model call (an instant provider's turn in a conversation
/// that parks after it; issue 31): everything the final status holds but the reply's text.
/// [`PlannedEnd::input`] makes the append the workflow's own end of the turn would make.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlannedEnd {
    /// The final status's event key (the workflow took it when it planned).
    pub key: String,
    /// The task's head before the status: the event sets the status on it for its snapshot.
    pub head: Task,
    pub state: TaskState,
    /// The status's timestamp (workflow time when the turn planned its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The status extension's object (`{"substate": ...}`), on the event and the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
    /// The reply message's id, and the `messageId` it answers.
    pub reply_id: String,
    pub answers: String,
    /// The reply artifact's id, and where the reply goes: its history index, its artifact's
    /// index, and what the store has before (as [`EmitInput`] counts them).
    pub artifact_id: String,
    pub history_from: u32,
    pub artifact_index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_before: Option<(u32, u32)>,
    /// The turn the status ends, for its metrics and span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnMark>,
}

impl PlannedEnd {
    /// The final status's append for a plain reply of `text`, as the workflow's end of the
    /// turn would make it: the reply message (none when `text` is empty) on the status, in
    /// the history and as the `reply` artifact, the head with the status as its snapshot.
    pub fn input(&self, task_queue: &str, text: &str) -> EmitInput {
        let message = (!text.is_empty())
            .then(|| reply_message(&self.head, self.reply_id.clone(), text.to_string(), &self.answers));
        let artifacts =
            message.as_ref().map(|_| (self.artifact_index, reply_artifact(self.artifact_id.clone(), text.to_string())));
        let mut head = self.head.clone();
        let status =
            a2a_types::TaskStatus { state: self.state, message: message.clone(), timestamp: self.timestamp.clone() };
        let metadata = crate::workflow::set_head_status(&mut head, status, self.status.clone());
        let event = StreamResponse::StatusUpdate(a2a_types::TaskStatusUpdateEvent {
            task_id: head.id.clone(),
            context_id: head.context_id.clone(),
            status: head.status.clone(),
            metadata,
        });
        EmitInput {
            task_id: head.id.clone(),
            task_queue: task_queue.to_string(),
            key: self.key.clone(),
            event,
            snapshot: Some(head),
            history: message.into_iter().collect(),
            history_from: self.history_from,
            artifacts: artifacts.into_iter().collect(),
            stored_before: self.stored_before,
            participants: None,
            turn: None,
            earlier: Vec::new(),
        }
    }
}

/// The id of turn `turn`'s reply message in task `task_id`.
pub(crate) fn reply_id(task_id: &str, turn: u32) -> String {
    format!("{task_id}:reply:{turn}")
}

/// A turn's reply message `id` saying `text` in `head`'s task, marked with the `messageId` it
/// answers: a SendMessage answered at a later turn's final status still carries its own
/// reply (S5).
pub(crate) fn reply_message(head: &Task, id: String, text: String, answers: &str) -> Message {
    let mut m = Message::agent_text(id, text);
    m.metadata = Some(a2a_types::Struct::from_iter([(crate::reply_ext_key(), crate::reply_mark(answers))]));
    m.task_id = head.id.clone();
    m.context_id = head.context_id.clone();
    m
}

/// The `reply` artifact of a turn's reply text.
pub(crate) fn reply_artifact(artifact_id: String, text: String) -> Artifact {
    Artifact { artifact_id, name: "reply".into(), parts: vec![a2a_types::Part::text(text)], ..Default::default() }
}

pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A tool call the model asked for (issue 29).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id of the call, which its result names.
    pub id: String,
    /// The tool's name as the model sees it.
    pub name: String,
    /// The arguments as the model wrote them (a JSON object's text, maybe malformed).
    pub arguments: String,
    /// Whether the tool may run again after a crash (set by `call_model` from the tool's
    /// declaration, so the workflow's retry choice is in its history).
    #[serde(default)]
    pub idempotent: bool,
}

/// What a tool call gave back: its text for the model, or an error the model reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    /// The result's text (redacted, capped), or why it failed.
    pub content: String,
    pub is_error: bool,
    /// The arguments, redacted and shortened, for clients to see.
    #[serde(default)]
    pub summary: String,
    /// How long the call took, in milliseconds.
    #[serde(default)]
    pub duration_ms: u64,
}

/// One round of a turn's tool use: what the model said and asked, and each result in the
/// order of the calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRound {
    /// Text the model wrote beside its calls (often none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub results: Vec<ToolResult>,
}

/// `invoke_tool`'s input: one call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolInvocation {
    pub task_id: String,
    pub context_id: String,
    pub turn: u32,
    pub call: ToolCall,
    /// The W3C `traceparent` of what it belongs to (issue 32), when traces are on: the
    /// request that delivered the message; the turn's model and tool calls are its children.
    /// Recorded in the history, so a replayed or retried call continues the same trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// How a task's turns use tools (`[agent]`, issue 29): carried in the workflow's input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLimits {
    /// Rounds of tool calls a turn may take before it ends saying so.
    pub max_rounds: u32,
    /// How long one call may run.
    pub timeout_secs: u64,
    /// The model may call the built-in `ask_participant`, which the workflow runs
    /// (`[agent] builtin_tools`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ask_participant: bool,
    /// The remote agents (`[[agents]]` ids) the built-in `delegate` may name; empty: the
    /// model is not offered `delegate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegates: Vec<String>,
    /// The model may call the built-in `emit_ui` (issue 30), which the workflow runs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub emit_ui: bool,
}

impl Default for ToolLimits {
    fn default() -> Self {
        Self { max_rounds: 16, timeout_secs: 300, ask_participant: false, delegates: Vec::new(), emit_ui: false }
    }
}

/// `call_model`'s result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    /// The whole reply text.
    pub text: String,
    /// How many chunks were streamed to the log.
    pub chunks: u32,
    /// Artifacts of the provider's own, merged by id (`append` chunks joined).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<a2a_types::Artifact>,
    /// How the turn ends, when the provider said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<Finish>,
    /// Tokens the turn used, when the provider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// Tools the model asked to call before it answers (issue 29): the turn runs them and
    /// calls the model again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call appended its turn's planned end ([`ModelTurn::end`]) with its last chunks:
    /// the final status's seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<i64>,
}

impl ModelReply {
    /// Text alone: what a planned end ([`PlannedEnd`]) is made for.
    pub fn is_plain(&self) -> bool {
        self.tool_calls.is_empty() && self.finish.is_none() && self.usage.is_none() && self.artifacts.is_empty()
    }
}

/// A participant of a task, as the task extension names it (EXTENSIONS.md, task).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    pub id: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub role: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
}

/// What a command sees of its task (S9): `run_command`'s input with the command.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandContext {
    pub task_id: String,
    pub context_id: String,
    /// The command's name (no slash) and the rest of the message after it, trimmed.
    pub name: String,
    pub args: String,
    /// Who sent the command, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<String>,
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substate: Option<String>,
    /// Turns started so far.
    pub turn: u32,
    pub participants: Vec<Participant>,
    /// Sub-tasks it delegated that have not ended (issue 19).
    #[serde(default)]
    pub open_sub_tasks: Vec<String>,
    /// Messages accepted and waiting for a turn.
    pub mailbox_depth: u32,
}

/// `run_command`'s result: the reply text (a failed command says why in it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandReply {
    pub text: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
}

/// A running task as `/_monitor` shows it (S20).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MonitorRow {
    pub task_id: String,
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub substate: Option<String>,
    /// Messages accepted but not yet taken by the run loop.
    pub mailbox_depth: u32,
    /// Turns started so far.
    pub turn: u32,
    /// The sub-tasks it delegated (issue 19), each with the state the store last saw.
    pub children: Vec<ChildRow>,
    /// A stand-in's remote task (issue 19): what it follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<ChildRow>,
    /// Tokens the task's turns used so far, when its provider counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

/// What makes a `TaskWorkflow` the stand-in of a sub-task delegated to a remote A2A agent
/// (issue 19): it runs no model turn, sends the brief to the agent and mirrors the remote
/// task into its own log until the remote task reaches a final state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StandIn {
    /// The configured id of the remote agent (`[[agents]] id`).
    pub agent: String,
    /// The task that delegated (the parent), on this harness.
    pub parent: String,
    /// The brief's text, sent to the remote agent as the first message.
    pub brief: String,
    /// Who asked for the sub-task (the `/delegate` sender), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// The W3C `traceparent` of the message that delegated (issue 32): the brief's request
    /// to the remote agent joins its trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// A sub-task as its parent knows it (the parent's state, carried across runs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubTask {
    pub task_id: String,
    pub agent: String,
    /// The final state it reported; `None` while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
}

/// What a stand-in tells its parent when the remote task reached a final state (the
/// `sub_task_done` signal).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubTaskResult {
    pub task_id: String,
    pub agent: String,
    pub remote_task_id: String,
    /// The remote task's state.
    pub state: TaskState,
    /// The remote task's answer, at most [`SUMMARY_CHARS`] characters.
    pub summary: String,
}

/// How long a sub-task's summary in its parent's history may be.
pub const SUMMARY_CHARS: usize = 500;

/// The `remote_push` update (S15): a push the receiver took for a stand-in. It carries the
/// token's SHA-256 digest, never the token (an update's input is kept in the history).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemotePush {
    /// Hex SHA-256 of the `X-A2A-Notification-Token` the push carried.
    pub token_digest: String,
    pub event: StreamResponse,
}

/// What the stand-in sends the remote agent (the `remote_send` activity).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteSend {
    pub agent: String,
    /// The stand-in's task id: the brief's message id derives from it, and the push
    /// callback names it.
    pub stand_in: String,
    pub brief: String,
    /// Whether the remote task should be followed by push (the push route is on).
    pub push: bool,
    /// The W3C `traceparent` of the message that delegated (issue 32): the brief's request
    /// to the remote agent joins its trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// The remote task as one look at it saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
}

impl Observation {
    /// A remote task as an observation: its state, its status message and artifacts.
    pub fn of(task: &Task) -> Self {
        Observation {
            state: task.status.state,
            message: task.status.message.clone(),
            artifacts: task.artifacts.iter().map(|a| Artifact::clone(a)).collect(),
        }
    }

    /// Whether `now` saw something this observation has not: another state, another status
    /// message, other artifacts.
    pub fn changed(&self, now: &Observation) -> bool {
        now.state != self.state
            || now.artifacts != self.artifacts
            || now.message.as_ref().map(|m| &m.parts) != self.message.as_ref().map(|m| &m.parts)
    }

    /// Folds a stream event into what is known of the remote task. A status update carrying
    /// a user's message (a channel's echo of what was sent) is not the agent's status.
    pub fn fold(&mut self, event: StreamResponse) {
        match event {
            StreamResponse::Task(task) => *self = Observation::of(&task),
            StreamResponse::StatusUpdate(update) => {
                if update.status.message.as_ref().is_some_and(|m| m.role == a2a_types::Role::User) {
                    return;
                }
                self.state = update.status.state;
                if update.status.message.is_some() || update.status.state.is_final() {
                    self.message = update.status.message;
                }
            }
            StreamResponse::ArtifactUpdate(update) => {
                let artifact = update.artifact;
                match self.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
                    Some(existing) if update.append => existing.parts.extend(artifact.parts),
                    Some(existing) => *existing = artifact,
                    None => self.artifacts.push(artifact),
                }
            }
            StreamResponse::Message(m) => {
                self.message = Some(m);
            }
        }
    }

    /// The text this observation answers with: its status message, else its artifacts' text.
    pub fn answer_text(&self) -> String {
        let text = |parts: &[a2a_types::Part]| parts.iter().filter_map(|p| p.text.clone()).collect::<Vec<_>>().join("");
        if let Some(m) = &self.message {
            let t = text(&m.parts);
            if !t.is_empty() {
                return t;
            }
        }
        self.artifacts.iter().map(|a| text(&a.parts)).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n")
    }
}

/// What `remote_send` answers: the remote task and how it is followed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteStarted {
    pub remote_task_id: String,
    /// The remote agent's card URL (what the parent's TaskRef names).
    pub agent_url: String,
    /// SHA-256 of the push token registered on the remote task; `None`: followed by
    /// subscribing (push off here, or the remote agent does not push).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_digest: Option<String>,
    pub seen: Observation,
}

/// One look at the remote task (the `remote_observe` activity): subscribe and wait for
/// something newer than `seen`, or read it once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteLook {
    pub agent: String,
    pub remote_task_id: String,
    pub subscribe: bool,
    pub seen: Observation,
}

/// CancelTask on the remote agent (the `remote_cancel` activity).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteCancel {
    pub agent: String,
    pub remote_task_id: String,
}

/// A child of a task on `/_monitor` (S20).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChildRow {
    pub task_id: String,
    pub agent: String,
    /// The remote task's state as its stand-in last saw it (`None`: not known yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task_id: Option<String>,
}

/// How a turn ends when the provider says so; otherwise the task's lifecycle decides
/// (INPUT_REQUIRED for a conversation, COMPLETED for one-shot).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finish {
    /// COMPLETED, INPUT_REQUIRED, REJECTED or FAILED.
    pub state: TaskState,
    /// The final status message; the reply text when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Token usage of a turn (or, summed, of a task).
/// camelCase on the wire (issue 28); histories and stores from before it spell the keys in
/// snake_case, which are still read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(alias = "prompt_tokens")]
    pub prompt_tokens: u64,
    #[serde(alias = "completion_tokens")]
    pub completion_tokens: u64,
    /// Of the completion tokens, those spent reasoning, where the endpoint says.
    #[serde(default, alias = "reasoning_tokens")]
    pub reasoning_tokens: u64,
}

impl TokenUsage {
    /// This usage with `other` added.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            reasoning_tokens: self.reasoning_tokens + other.reasoning_tokens,
        }
    }
}
