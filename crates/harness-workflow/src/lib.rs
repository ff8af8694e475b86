//! The durable core: `TaskWorkflow` (one per task, id = task id), its inbox, its state
//! and its turn, and the types that cross the workflow's boundary (inputs, receipts, what
//! each activity takes and answers). What the activities run (model providers, commands,
//! the remote A2A client, redaction) lives in harness-agent; [`activity`] names them.
//!
//! Owns: every decision about a task's lifecycle (D5), in deterministic workflow code.
//! Must never: do I/O (activities do), use tokio (TEMPORAL-RUST.md item 7), or rename a
//! workflow, update, query, signal or activity name (recorded histories would stop
//! replaying).

pub mod a2ui;
pub mod activity;
mod join;
mod payload;
mod refusal;
mod types;
mod workflow;

pub use payload::Json;
pub use refusal::{REFUSAL_FAILURE_TYPE, Refusal, RefusalError, RefusalKind, terminal_refusal};
pub use types::*;
pub use workflow::{TaskWorkflow, sub_task_ext_key};

/// The namespace prefix of this project's A2A extensions (EXTENSIONS.md).
pub const EXT_NS: &str = "io.github.madarauchiha-314.tiny-harness";
/// Metadata key of the task extension (the task's own data, `TaskData`).
pub fn task_ext_key() -> String {
    format!("{EXT_NS}/task")
}

/// Metadata key of the status extension (`{"substate": ...}`).
pub fn status_ext_key() -> String {
    format!("{EXT_NS}/status")
}
/// Metadata key of the channel extension: on a message, `{"channel_id": <task id>,
/// "sender": <participant id>}` names who sent it (EXTENSIONS.md, channel).
pub fn channel_ext_key() -> String {
    format!("{EXT_NS}/channel")
}

/// The channel extension's entry naming who sent a message on a task (key and value).
pub fn channel_mark(task_id: &str, sender: &str) -> (String, serde_json::Value) {
    (channel_ext_key(), serde_json::json!({"channel_id": task_id, "sender": sender}))
}

/// Metadata key of a reply chunk that closes a void attempt (`{"abandoned": reason}`).
pub fn attempt_ext_key() -> String {
    format!("{EXT_NS}/attempt")
}

/// Metadata key of token usage: a turn's on its final status update, the task's sum on the
/// task (`{"promptTokens", "completionTokens", "reasoningTokens"}`).
pub fn usage_ext_key() -> String {
    format!("{EXT_NS}/usage")
}

/// Metadata key of a command's message and its reply (`{"name": <command>, "inReplyTo":
/// <messageId>}` on the reply, beside S9's top-level `command`): the model never sees either.
pub fn command_ext_key() -> String {
    format!("{EXT_NS}/command")
}

/// Metadata key of the workflow's answer to a message that takes no turn (a control that
/// could not complete the task, a task envelope): `{"inReplyTo": <messageId>}`. The
/// model never sees such an answer.
pub fn answer_ext_key() -> String {
    format!("{EXT_NS}/answer")
}

/// Metadata key of a turn's reply: `{"inReplyTo": <messageId>}`, the message it answers.
pub fn reply_ext_key() -> String {
    format!("{EXT_NS}/reply")
}

/// The mark of an agent message that answers the message `message_id` (under
/// [`reply_ext_key`], [`answer_ext_key`] or [`command_ext_key`]): camelCase like every A2A
/// field, so a plain client never meets a snake_case key (issue 28).
pub fn reply_mark(message_id: &str) -> serde_json::Value {
    serde_json::json!({ "inReplyTo": message_id })
}

/// The messageId a mark says its message answers. Events stored before issue 28 spell the
/// key `in_reply_to`; both are read.
pub fn marked_reply_to(mark: &serde_json::Value) -> Option<&str> {
    mark.get("inReplyTo").or_else(|| mark.get("in_reply_to")).and_then(serde_json::Value::as_str)
}

/// Metadata key of a recorded event envelope (S11): `{"kind": .., "payload": ..}` on the
/// message that carried it, and `{"kind": ..}` on the status update that records it.
pub fn event_ext_key() -> String {
    format!("{EXT_NS}/event")
}

/// `/delegate`'s arguments: the agent id, then the brief (trimmed).
pub fn delegate_args(args: &str) -> (&str, &str) {
    let (agent, brief) = args.trim().split_once(char::is_whitespace).unwrap_or((args.trim(), ""));
    (agent, brief.trim())
}

/// Substate of a conversation between turns (D5).
pub const AWAITING_NEXT_MESSAGE: &str = "awaiting-next-message";
/// Substate of a task in participant mode, waiting for its assignee (S22).
pub const AWAITING_ASSIGNEE: &str = "awaiting-assignee";
/// Substate of a turn while the tools its model asked for run (issue 29).
pub const CALLING_TOOLS: &str = "calling-tools";
/// Substate of a task whose model asked a participant a question (`ask_participant`, issue
/// 29): the status extension names the participant (`"participant"`) when the model did.
pub const AWAITING_PARTICIPANT: &str = "awaiting-participant";
/// The built-in tool that asks a participant of the task a question (issue 29).
pub const ASK_PARTICIPANT: &str = "ask_participant";
/// The built-in tool that hands a brief to a configured remote agent (issue 29).
pub const DELEGATE: &str = "delegate";

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Metadata key of a turn's tool call on its WORKING status update (issue 29):
/// `{"callId", "name", "phase": "call"|"result", "arguments", "outcome", "durationMs"}`.
pub fn tool_ext_key() -> String {
    format!("{EXT_NS}/tool")
}

/// Substate of a parked task while a sub-task it delegated is open (issue 19).
pub const AWAITING_SUBTASKS: &str = "awaiting-subtasks";
