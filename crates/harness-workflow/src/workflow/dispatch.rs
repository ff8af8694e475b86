//! What the run loop does beside model turns: echoes a participant's message into the log
//! (S12, the channel), runs a slash command through `run_command` (S9), and completes the
//! task on a control (S8). Echoes and commands do not wait for a turn: a running turn lets
//! them through between its model output (turn::during_turn).

use super::TaskWorkflow;
use super::emit::{emit, set_status, set_status_with, timestamp};
use super::turn::Flow;
use crate::activities::Activities;
use crate::{AWAITING_NEXT_MESSAGE, CommandContext, InboxItem, ItemKind, status_ext_key};
use a2a_types::{Message, StreamResponse, Struct, TaskState, TaskStatus, TaskStatusUpdateEvent};
use std::time::Duration;
use temporalio_sdk::{ActivityOptions, CancellableFuture, WorkflowContext, WorkflowResult};

/// Work that does not wait for a turn.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Side {
    /// A participant's accepted message, for every subscriber to see (S12).
    Echo { message: Message, sender: String },
    /// A message answered without a turn: a registered slash command (S9), a task envelope
    /// or an event envelope to record (S11).
    Answer(Box<InboxItem>),
    /// A sub-task's result, for the history (issue 19).
    SubResult(crate::SubTaskResult),
}

/// Does the side work waiting, in order.
pub(super) async fn side_work(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    while let Some(work) = ctx.state_mut(|s| s.side.pop_front()) {
        match work {
            Side::Echo { message, sender } => echo(ctx, message, sender).await?,
            Side::Answer(item) => match &item.kind {
                ItemKind::Command { .. } => command(ctx, *item).await?,
                ItemKind::TaskUpdate { .. } => task_update(ctx, *item).await?,
                ItemKind::Record { .. } => record(ctx, *item).await?,
                _ => {}
            },
            Side::SubResult(result) => super::delegate::sub_result(ctx, result).await?,
        }
    }
    Ok(())
}

/// A status update in the unchanged state carrying `message`, its metadata the head's
/// substate and `extra`; with `snapshot`, the head (which a task envelope changed) is
/// stored with it.
pub(super) async fn emit_unchanged(
    ctx: &WorkflowContext<TaskWorkflow>,
    message: Message,
    extra: Vec<(String, serde_json::Value)>,
    snapshot: bool,
) -> WorkflowResult<()> {
    let ts = timestamp(ctx.workflow_time());
    let (event, head) = ctx.state(|s| {
        let mut md = Struct::new();
        if let Some(sub) = s.head.metadata.as_ref().and_then(|m| m.get(&status_ext_key())) {
            md.insert(status_ext_key(), sub.clone());
        }
        md.extend(extra);
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: s.head.id.clone(),
            context_id: s.head.context_id.clone(),
            status: TaskStatus { state: s.head.status.state, message: Some(message), timestamp: ts },
            metadata: Some(md),
        });
        (event, snapshot.then(|| s.head.clone()))
    });
    emit(ctx, event, head).await
}

/// S12: the message as a status update in the unchanged state, naming its sender. A run
/// recorded before the channel echoed nothing, and replays so.
async fn echo(ctx: &WorkflowContext<TaskWorkflow>, message: Message, sender: String) -> WorkflowResult<()> {
    if !ctx.state(|s| s.channel) {
        return Ok(());
    }
    let channel = crate::channel_mark(&message.task_id, &sender);
    emit_unchanged(ctx, message, vec![channel], false).await
}

/// S9: runs the command and replies in the unchanged state with `{"command": <name>}`; a
/// task that had no turn yet (the command opened it) parks instead of staying SUBMITTED.
async fn command(ctx: &WorkflowContext<TaskWorkflow>, item: InboxItem) -> WorkflowResult<()> {
    let ItemKind::Command { name, args } = item.kind.clone() else { return Ok(()) };
    if name == "delegate" {
        return super::delegate::delegate(ctx, item, args).await;
    }
    let input = ctx.state(|s| s.command_context(&item, name.clone(), args));
    // A regular activity, not a local one: the message's acceptance (which Temporal sends
    // when the workflow task that took it completes) must not wait for a host's handler.
    let call = ctx.execute_activity(
        Activities::run_command,
        input,
        ActivityOptions::with_start_to_close_timeout(Duration::from_secs(60))
            .retry_policy(temporalio_common::RetryPolicy::builder().maximum_attempts(3).build())
            .build(),
    );
    let mut call = std::pin::pin!(call);
    // A cancel or a control does not wait for a command (S6, S8): the command is dropped
    // unanswered, and the task ends.
    let reply = temporalio_sdk::workflows::select! {
        r = &mut call => Some(r),
        _ = ctx.wait_condition(|s| s.cancel.is_some() || s.control.is_some()) => None,
    };
    let Some(reply) = reply else {
        call.cancel();
        let _ = call.await;
        return Ok(());
    };
    let text = match reply {
        Ok(r) => r.text,
        Err(e) => format!("/{name} failed: {}", super::turn::failure_text(&e)),
    };
    let message = ctx.state_mut(|s| s.agent_message("command", text, command_marks(&name, &item, None)));
    let tag = ("command".to_string(), serde_json::json!(name));
    if ctx.state(|s| s.head.status.state == TaskState::Submitted) {
        let extra = Struct::from_iter([tag]);
        return set_status_with(ctx, TaskState::InputRequired, Some(message), Some(AWAITING_NEXT_MESSAGE), Some(extra))
            .await;
    }
    emit_unchanged(ctx, message, vec![tag], false).await
}

/// The metadata of a command's reply message: S9's `{"command": <name>}` (plus `"task_ref"`
/// when the command created a sub-task), and the commands extension's mark naming the
/// message it answers (`{"name", "inReplyTo"}`).
pub(super) fn command_marks(name: &str, item: &InboxItem, task_ref: Option<&str>) -> Vec<(String, serde_json::Value)> {
    let mut mark = crate::reply_mark(&item.message.message_id);
    mark["name"] = serde_json::json!(name);
    let mut marks = vec![("command".to_string(), serde_json::json!(name)), (crate::command_ext_key(), mark)];
    if let Some(id) = task_ref {
        marks.push(("task_ref".to_string(), serde_json::json!(id)));
    }
    marks
}

/// S11: applies a task envelope's fields to the task data and answers in the unchanged
/// state with the new data; changed participants go to the store's access list.
async fn task_update(ctx: &WorkflowContext<TaskWorkflow>, item: InboxItem) -> WorkflowResult<()> {
    let ItemKind::TaskUpdate { fields } = &item.kind else { return Ok(()) };
    let changed: Vec<String> = fields.keys().cloned().collect();
    let data = ctx.state_mut(|s| {
        let key = crate::task_ext_key();
        let md = s.head.metadata.get_or_insert_with(Default::default);
        let data = md.entry(key).or_insert_with(|| serde_json::json!({}));
        if let Some(data) = data.as_object_mut() {
            data.extend(fields.clone());
        }
        let data = data.clone();
        if fields.contains_key("participants") {
            let list = s.participants().into_iter().map(|p| (p.id, p.role)).collect();
            s.changed_participants = Some(list);
        }
        data
    });
    let text = format!("updated the task: {}", changed.join(", "));
    let mark = crate::reply_mark(&item.message.message_id);
    let message = ctx.state_mut(|s| s.agent_message("update", text, [(crate::answer_ext_key(), mark)]));
    emit_unchanged(ctx, message, vec![(crate::task_ext_key(), data)], true).await
}

/// S11: a status or artifact update envelope, framed into the history by admission, as a
/// status update in the unchanged state that carries it (naming its sender, when known).
async fn record(ctx: &WorkflowContext<TaskWorkflow>, item: InboxItem) -> WorkflowResult<()> {
    let ItemKind::Record { event } = &item.kind else { return Ok(()) };
    let mut extra = vec![(crate::event_ext_key(), serde_json::json!({"kind": event}))];
    if let Some(sender) = &item.sender {
        extra.push(crate::channel_mark(&item.message.task_id, sender));
    }
    emit_unchanged(ctx, item.message, extra, false).await
}

/// S8: completes the task on the control waiting, after echoing what came before it; a
/// completion that open sub-tasks refuse parks the task instead, saying why.
pub(super) async fn complete(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<Flow> {
    let echoes: Vec<Side> = ctx.state_mut(|s| s.side.drain(..).filter(|w| matches!(w, Side::Echo { .. })).collect());
    for work in echoes {
        if let Side::Echo { message, sender } = work {
            echo(ctx, message, sender).await?;
        }
    }
    let Some(control) = ctx.state_mut(|s| s.control.take()) else { return Ok(Flow::Next) };
    if let Some(why) = ctx.state(|s| s.completion_refused()) {
        let mark = crate::reply_mark(&control.message.message_id);
        let message = ctx.state_mut(|s| s.agent_message("control", why, [(crate::answer_ext_key(), mark)]));
        set_status(ctx, TaskState::InputRequired, Some(message), Some(AWAITING_NEXT_MESSAGE)).await?;
        return Ok(Flow::Next);
    }
    set_status(ctx, TaskState::Completed, None, None).await?;
    Ok(Flow::End)
}

impl TaskWorkflow {
    /// What `run_command` tells a command about its task.
    fn command_context(&self, item: &InboxItem, name: String, args: String) -> CommandContext {
        CommandContext {
            task_id: self.head.id.clone(),
            context_id: self.head.context_id.clone(),
            name,
            args,
            sender: item.sender.clone(),
            state: self.head.status.state,
            substate: self.substate(),
            turn: self.turn,
            participants: self.participants(),
            open_sub_tasks: self.open_sub_tasks(),
            mailbox_depth: self.mailbox.len() as u32,
        }
    }

    /// An agent message of the workflow's own (`<task>:<what>:<n>`), marked with `mark`,
    /// added to the history.
    pub(super) fn agent_message(
        &mut self,
        what: &str,
        text: String,
        marks: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Message {
        let mut message = Message::agent_text(format!("{}:{what}:{}", self.head.id, self.next_key + 1), text);
        message.task_id = self.head.id.clone();
        message.context_id = self.head.context_id.clone();
        message.metadata = Some(Struct::from_iter(marks));
        self.pending_history.push(message.clone());
        message
    }

    /// Sub-tasks that have not ended (issue 19).
    pub(super) fn open_sub_tasks(&self) -> Vec<String> {
        self.sub_tasks.iter().filter(|t| t.state.is_none()).map(|t| t.task_id.clone()).collect()
    }

    /// Why a control may not complete the task now: open sub-tasks (S8).
    fn completion_refused(&self) -> Option<String> {
        let open = self.open_sub_tasks();
        (!open.is_empty()).then(|| {
            format!("the task cannot complete while its sub-tasks are open ({}): it waits for them", open.join(", "))
        })
    }
}
