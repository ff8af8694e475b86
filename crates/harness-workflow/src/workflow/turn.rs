//! The steps of the run loop: wait for the first message, take the next one, run its
//! model turn and end the turn as the lifecycle (D5) or the provider says.

use super::TaskWorkflow;
use super::emit::{emit, set_status, timestamp};
use crate::activities::Activities;
use crate::{AWAITING_NEXT_MESSAGE, InboxItem, Lifecycle, ModelReply, ModelTurn};
use a2a_types::{Artifact, Message, Part, StreamResponse, TaskState};
use std::time::Duration;
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, CancellableFuture, LocalActivityOptions, WorkflowContext, WorkflowResult,
};

/// How long a workflow whose first inbox update was refused waits for a message before it
/// ends (TEMPORAL-RUST.md item 2).
const UNOPENED_IDLE: Duration = Duration::from_secs(600);

/// What the run loop does after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// Wait for the next message (or cancel).
    Next,
    /// The task ended: leave the loop.
    End,
}

/// Waits for the first message (or a cancel); false when none came within
/// [`UNOPENED_IDLE`]. Once opened, emits the Task (seq 1).
pub(super) async fn open(ctx: &mut WorkflowContext<TaskWorkflow>) -> WorkflowResult<bool> {
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
        return Ok(false);
    }
    let opened_at = timestamp(ctx.workflow_time());
    let task = ctx.state_mut(|s| {
        s.task.status.timestamp = opened_at;
        s.task.clone()
    });
    let head = task.head();
    emit(ctx, StreamResponse::Task(task), Some(head)).await?;
    Ok(true)
}

/// Waits for a message or a cancel and handles it.
pub(super) async fn step(ctx: &mut WorkflowContext<TaskWorkflow>) -> WorkflowResult<Flow> {
    ctx.wait_condition(|s| !s.mailbox.is_empty() || s.cancel.is_some()).await?;
    if ctx.state(|s| s.cancel.is_some()) {
        set_status(ctx, TaskState::Canceled, None, None).await?;
        return Ok(Flow::End);
    }
    let Some((position, item)) = ctx.state_mut(|s| {
        let next = s.mailbox.pop_front();
        s.in_turn = next.is_some();
        next
    }) else {
        return Ok(Flow::Next);
    };
    turn(ctx, position, item).await
}

/// One model turn for the message at `position` of the history.
async fn turn(ctx: &mut WorkflowContext<TaskWorkflow>, position: usize, item: InboxItem) -> WorkflowResult<Flow> {
    let turn = ctx.state_mut(|s| {
        s.turn += 1;
        s.turn
    });
    // A provider may answer a message straight from SUBMITTED (decided at admission).
    if !item.skip_working {
        set_status(ctx, TaskState::Working, None, None).await?;
    }
    let model_turn = ctx.state(|s| s.model_turn(position, turn));
    let artifact_id = model_turn.artifact_id.clone();
    let Some(result) = call_model(ctx, model_turn).await else {
        // Cancel cut the turn (S6): the store's terminal fence stops any late chunk.
        set_status(ctx, TaskState::Canceled, None, None).await?;
        return Ok(Flow::End);
    };
    match result {
        Ok(reply) => end_turn(ctx, turn, artifact_id, reply).await,
        Err(ActivityExecutionError::Cancelled(_)) if ctx.state(|s| s.cancel.is_some()) => {
            set_status(ctx, TaskState::Canceled, None, None).await?;
            Ok(Flow::End)
        }
        Err(e) => {
            let why = e.failure().map(|f| f.message.clone()).unwrap_or_else(|| e.to_string());
            let message_id = format!("{}:failure:{turn}", ctx.state(|s| s.task.id.clone()));
            let text = format!("the model failed: {why}");
            set_status(ctx, TaskState::Failed, Some(Message::agent_text(message_id, text)), None).await?;
            Ok(Flow::End)
        }
    }
}

/// Calls the model: a local activity for an instant provider, a regular one (heartbeating,
/// retried, cancellable) for any other. `None` when a cancel cut it.
async fn call_model(
    ctx: &WorkflowContext<TaskWorkflow>,
    model_turn: ModelTurn,
) -> Option<Result<ModelReply, ActivityExecutionError>> {
    if ctx.state(|s| s.input.instant_model) {
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
    }
}

/// Takes the reply into the task and ends the turn: as the provider decided, else parked
/// (conversation) or completed (one-shot), unless more messages wait.
async fn end_turn(
    ctx: &mut WorkflowContext<TaskWorkflow>,
    turn: u32,
    artifact_id: String,
    reply: ModelReply,
) -> WorkflowResult<Flow> {
    let finish = reply.finish.as_ref().map(|f| f.state);
    let reply_message = ctx.state_mut(|s| s.take_reply(turn, artifact_id, reply));
    match finish {
        // The provider decided how the turn ends (the conformance profile).
        Some(TaskState::InputRequired) => {
            set_status(ctx, TaskState::InputRequired, reply_message, None).await?;
            return Ok(Flow::Next);
        }
        Some(state) if state.is_terminal() => {
            set_status(ctx, state, reply_message, None).await?;
            return Ok(Flow::End);
        }
        _ => {}
    }
    if ctx.state(|s| !s.mailbox.is_empty()) {
        return Ok(Flow::Next);
    }
    match ctx.state(|s| s.input.lifecycle) {
        Lifecycle::OneShot => {
            set_status(ctx, TaskState::Completed, reply_message, None).await?;
            Ok(Flow::End)
        }
        Lifecycle::Conversation => {
            set_status(ctx, TaskState::InputRequired, reply_message, Some(AWAITING_NEXT_MESSAGE)).await?;
            Ok(Flow::Next)
        }
    }
}

impl TaskWorkflow {
    /// The conversation up to this turn's message; what the store already has is read from
    /// there by `call_model`.
    fn model_turn(&self, position: usize, turn: u32) -> ModelTurn {
        let upto = if self.by_row { position + 1 } else { self.task.history.len() };
        let from = if self.by_row { self.stored_history.min(upto) } else { 0 };
        ModelTurn {
            task_id: self.input.task_id.clone(),
            context_id: self.input.context_id.clone(),
            task_queue: self.input.task_queue.clone(),
            model: self.input.model.clone(),
            turn,
            artifact_id: format!("reply-{turn}"),
            history: self.task.history[from..upto].to_vec(),
            history_from: from as u32,
        }
    }

    /// Adds a reply's artifacts and its message to the task; returns the status message
    /// the turn ends with (the provider's finishing text, else the reply's).
    fn take_reply(&mut self, turn: u32, artifact_id: String, reply: ModelReply) -> Option<Message> {
        let status_text = reply.finish.as_ref().and_then(|f| f.message.clone()).unwrap_or(reply.text.clone());
        let mut reply_message = (!status_text.is_empty())
            .then(|| Message::agent_text(format!("{}:reply:{turn}", self.task.id), status_text));
        if !reply.text.is_empty() {
            self.changed_artifacts.push(artifact_id.clone());
            self.task.artifacts.push(Artifact {
                artifact_id,
                name: "reply".into(),
                parts: vec![Part::text(reply.text.clone())],
                ..Default::default()
            });
        }
        for artifact in reply.artifacts {
            self.changed_artifacts.push(artifact.artifact_id.clone());
            match self.task.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
                Some(existing) => *existing = artifact,
                None => self.task.artifacts.push(artifact),
            }
        }
        if let Some(m) = reply_message.as_mut() {
            m.task_id = self.task.id.clone();
            m.context_id = self.task.context_id.clone();
            self.task.history.push(m.clone());
        }
        reply_message
    }
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
