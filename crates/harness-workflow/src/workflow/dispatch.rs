//! What the run loop does beside model turns: echoes a participant's message into the log
//! (S12, the channel), runs a slash command through `run_command` (S9), and completes the
//! task on a control (S8). Echoes and commands do not wait for a turn: a running turn lets
//! them through between its model output (turn::during_turn).

use super::TaskWorkflow;
use super::emit::{command_marks, emit_unchanged, set_status, set_status_with, unchanged_event};
use super::{Flow, Side};
use crate::activity;
use crate::{AWAITING_NEXT_MESSAGE, CommandContext, InboxItem, ItemKind};
use a2a_types::{Message, Struct, TaskState};
use std::time::Duration;
use temporalio_sdk::{ActivityOptions, CancellableFuture, WorkflowContext, WorkflowResult};

/// Does the side work waiting, in order.
pub(super) async fn side_work(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    while let Some(work) = ctx.state_mut(|s| s.work.side.pop_front()) {
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

/// S12: the message as a status update in the unchanged state, naming its sender. A run
/// recorded before the channel echoed nothing, and replays so.
async fn echo(ctx: &WorkflowContext<TaskWorkflow>, message: Message, sender: String) -> WorkflowResult<()> {
    if !ctx.state(|s| s.log.channel) {
        return Ok(());
    }
    let channel = crate::channel_mark(&message.task_id, &sender);
    emit_unchanged(ctx, message, vec![channel], false).await
}

/// Issue 31: when the side work is only the echo of the message whose turn is next (no turn
/// runs, no cancel or control waits, the message is the mailbox's first and its turn begins
/// with WORKING), takes the echo out and holds it back, its key taken, for the turn's
/// WORKING to append with it. Whether it did. A run recorded before
/// [`super::ECHO_WITH_WORKING`] never holds.
pub(super) fn hold_echo(ctx: &WorkflowContext<TaskWorkflow>) -> bool {
    let echo = ctx.state_mut(|s| {
        let only_echo = s.log.channel
            && s.log.echo_with_working
            && s.work.side.len() == 1
            && s.work.cancel.is_none()
            && s.work.control.is_none()
            && s.input.assignee.is_none();
        let Some(Side::Echo { message, .. }) = s.work.side.front() else { return None };
        let its_turn_next = s
            .work
            .mailbox
            .front()
            .is_some_and(|(_, item)| item.message.message_id == message.message_id && !item.skip_working);
        if !(only_echo && its_turn_next) {
            return None;
        }
        match s.work.side.pop_front() {
            Some(Side::Echo { message, sender }) => Some((message, sender)),
            _ => None,
        }
    });
    let Some((message, sender)) = echo else { return false };
    let channel = crate::channel_mark(&message.task_id, &sender);
    let event = unchanged_event(ctx, message, vec![channel]);
    super::emit::hold(ctx, event, None);
    true
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
        activity::RunCommand,
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
        _ = ctx.wait_condition(|s| s.work.cancel.is_some() || s.work.control.is_some()) => None,
    };
    let Some(reply) = reply else {
        call.cancel();
        let _ = call.await;
        return Ok(());
    };
    let text = match reply {
        Ok(r) => r.text,
        Err(e) => format!("/{name} failed: {}", super::emit::failure_text(&e)),
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
            s.log.changed_participants = Some(list);
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
    let echoes: Vec<Side> =
        ctx.state_mut(|s| s.work.side.drain(..).filter(|w| matches!(w, Side::Echo { .. })).collect());
    for work in echoes {
        if let Side::Echo { message, sender } = work {
            echo(ctx, message, sender).await?;
        }
    }
    let Some(control) = ctx.state_mut(|s| s.work.control.take()) else { return Ok(Flow::Next) };
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
            turn: self.work.turn,
            participants: self.participants(),
            open_sub_tasks: self.open_sub_tasks(),
            mailbox_depth: self.work.mailbox.len() as u32,
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
        let mut message = Message::agent_text(format!("{}:{what}:{}", self.head.id, self.log.next_key + 1), text);
        message.task_id = self.head.id.clone();
        message.context_id = self.head.context_id.clone();
        message.metadata = Some(Struct::from_iter(marks));
        self.log.pending_history.push(message.clone());
        message
    }

    /// Sub-tasks that have not ended (issue 19).
    pub(super) fn open_sub_tasks(&self) -> Vec<String> {
        self.delegation.sub_tasks.iter().filter(|t| t.state.is_none()).map(|t| t.task_id.clone()).collect()
    }

    /// Why a control may not complete the task now: open sub-tasks (S8).
    fn completion_refused(&self) -> Option<String> {
        let open = self.open_sub_tasks();
        (!open.is_empty()).then(|| {
            format!("the task cannot complete while its sub-tasks are open ({}): it waits for them", open.join(", "))
        })
    }
}
