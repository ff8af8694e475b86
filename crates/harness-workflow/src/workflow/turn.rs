//! The steps of the run loop: wait for the first message, take the next one, run its
//! model turn and end the turn as the lifecycle (D5) or the provider says.

use super::builtin::{self, Cut};
use super::emit::{emit, failure_text, set_status, timestamp};
use super::{Flow, TaskWorkflow};
use crate::activity;
use crate::{AWAITING_NEXT_MESSAGE, Carried, InboxItem, Json, Lifecycle, ModelReply, ModelTurn, TaskInput};
use a2a_types::{Artifact, Message, StreamResponse, TaskState};
use std::time::Duration;
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, CancellableFuture, LocalActivityOptions, WorkflowContext, WorkflowResult,
};

/// How long a workflow whose first inbox update was refused waits for a message before it
/// ends (TEMPORAL-RUST.md item 2).
const UNOPENED_IDLE: Duration = Duration::from_secs(600);

/// The patch under which a run continues as new past its [`crate::RunLimits`]; its id
/// names the turn it is asked at (turn::may_continue).
const CONTINUE_AS_NEW: &str = "continue-as-new";

/// The patch under which a failed model turn parks a conversation instead of failing it.
pub(super) const FAILURE_PARKS: &str = "failure-parks";

/// What the history gains per model call beyond the reply (an estimate, on the large side).
const CALL_BYTES: u64 = 800;
/// What one history event costs beyond the payloads counted apart (ids, timestamps, the
/// worker's identity): an estimate on the large side.
const PER_EVENT_BYTES: u64 = 250;

/// A run continues as new once it has used this share of a limit, so that the turn (and
/// the messages queued with it) that passes the mark still ends within the limit.
fn near(used: u64, limit: u64) -> bool {
    used * 10 >= limit * 9
}

/// How much of the remembered `messageId`s a run hands the next (their lengths).
const MAX_CARRIED_IDS_BYTES: usize = 128 * 1024;

/// A run does not continue while what it would hand over is larger than this (the mailbox
/// of queued messages): Temporal refuses a payload over 2 MB.
const MAX_CARRIED_BYTES: usize = 1024 * 1024;

/// What an accepted `inbox` update adds to the history: the message and its receipt.
pub(super) fn update_bytes(item: &InboxItem) -> u64 {
    a2a_types::json_len(item).map_or(0, |n| n as u64) + 400
}

/// Waits for the first message (or a cancel); false when none came within
/// [`UNOPENED_IDLE`]. Once opened, emits the Task (seq 1).
pub(super) async fn open(ctx: &mut WorkflowContext<TaskWorkflow>) -> WorkflowResult<bool> {
    let opened = {
        let idle = ctx.timer(UNOPENED_IDLE);
        let mut idle = std::pin::pin!(idle);
        let opened = temporalio_sdk::workflows::select! {
            r = ctx.wait_condition(|s| s.has_work() || s.work.brief_only) => r.is_ok(),
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
        s.head.status.timestamp = opened_at;
        s.live_task()
    });
    let head = task.head();
    // Its first turn follows at once: the Task goes with that turn's first events (issue 31).
    if ctx.state(|s| s.turn_follows_open()) {
        super::emit::hold(ctx, StreamResponse::Task(task), Some(head));
    } else {
        emit(ctx, StreamResponse::Task(task), Some(head)).await?;
    }
    after_open(ctx).await?;
    Ok(true)
}

/// S22: a task in participant mode waits for its assignee, with the goal as its status
/// text; one a brief alone opened has nothing for its model: a conversation parks, a
/// one-shot waits for its first message.
async fn after_open(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    if ctx.state(|s| s.input.assignee.is_some()) {
        return park_for_assignee(ctx).await;
    }
    if ctx.state(|s| s.work.brief_only && s.work.mailbox.is_empty() && s.input.lifecycle == Lifecycle::Conversation) {
        set_status(ctx, TaskState::InputRequired, None, Some(AWAITING_NEXT_MESSAGE)).await?;
    }
    Ok(())
}

/// INPUT_REQUIRED / awaiting-assignee, the goal as the status text (S22).
async fn park_for_assignee(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    let message = ctx.state(|s| {
        let goal = s.task_data().and_then(|d| d.get("goal")).and_then(|g| g.as_str()).unwrap_or_default().to_string();
        let mut m = Message::agent_text(format!("{}:goal", s.head.id), goal);
        m.task_id = s.head.id.clone();
        m.context_id = s.head.context_id.clone();
        m
    });
    set_status(ctx, TaskState::InputRequired, Some(message), Some(crate::AWAITING_ASSIGNEE)).await
}

/// S22: in participant mode a message takes no model turn: the assignee's completes the
/// task with its text; anyone else's is recorded and the task goes on waiting.
async fn participant_turn(ctx: &WorkflowContext<TaskWorkflow>, item: InboxItem) -> WorkflowResult<Flow> {
    let from_assignee = ctx.state(|s| item.sender.is_some() && item.sender == s.input.assignee);
    ctx.state_mut(|s| s.work.in_turn = false);
    if !from_assignee {
        park_for_assignee(ctx).await?;
        return Ok(Flow::Next);
    }
    let message = ctx.state_mut(|s| {
        let mut m = Message::agent_text(format!("{}:result", s.head.id), item.message.text());
        m.task_id = s.head.id.clone();
        m.context_id = s.head.context_id.clone();
        // Who produced the result: the assignee, as the channel names it.
        let channel = crate::channel_ext_key();
        m.metadata = item.message.metadata.as_ref().and_then(|md| md.get(&channel)).map(|c| {
            let mut md = a2a_types::Struct::new();
            md.insert(channel.clone(), c.clone());
            md
        });
        s.log.pending_history.push(m.clone());
        m
    });
    set_status(ctx, TaskState::Completed, Some(message), None).await?;
    Ok(Flow::End)
}

/// Whether this run continues as new now: between turns, with no cancel waiting, once its
/// history reached nine tenths of a limit (or Temporal suggests it), and only when what it
/// hands over is small. Runs recorded before [`CONTINUE_AS_NEW`] never do while they replay;
/// the patch is asked under an id that names the turn (the SDK remembers a patch's first
/// answer, a replay's "no" included), so such a run is asked again, and says yes, at the
/// next turn it runs live.
fn may_continue(ctx: &WorkflowContext<TaskWorkflow>) -> Option<Box<TaskInput>> {
    let events = ctx.history_length();
    let suggested = ctx.continue_as_new_suggested();
    let over = ctx.state(|s| {
        let limits = s.input.run_limits;
        s.work.cancel.is_none()
            && s.work.control.is_none()
            && s.work.side.is_empty()
            && s.log.held.is_empty()
            && !s.work.in_turn
            && s.log.pending_artifacts.is_empty()
            && (suggested
                || near(u64::from(events), u64::from(limits.events))
                || near(u64::from(s.run.updates), u64::from(limits.messages))
                || near(s.run.bytes + u64::from(events) * PER_EVENT_BYTES, limits.bytes))
    });
    if !over {
        return None;
    }
    let input = ctx.state(|s| s.next_run_input());
    let carried = input.carried.as_ref().map_or(0, |c| a2a_types::json_len(c).unwrap_or(usize::MAX));
    if carried > MAX_CARRIED_BYTES {
        return None;
    }
    let turn = ctx.state(|s| s.work.turn);
    ctx.patched(&format!("{CONTINUE_AS_NEW}@{turn}")).then_some(input)
}

/// Waits for a message or a cancel and handles it.
pub(super) async fn step(ctx: &mut WorkflowContext<TaskWorkflow>) -> WorkflowResult<Flow> {
    if let Some(input) = may_continue(ctx) {
        return Ok(Flow::ContinueAsNew(input));
    }
    ctx.wait_condition(|s| s.has_work()).await?;
    if ctx.state(|s| s.work.cancel.is_some()) {
        set_status(ctx, TaskState::Canceled, None, None).await?;
        return Ok(Flow::End);
    }
    // A control goes before what waits (S8); side work before the next turn.
    if ctx.state(|s| s.work.control.is_some()) {
        return super::dispatch::complete(ctx).await;
    }
    // A message's echo that is all the side work goes with its turn's WORKING, next in this
    // step: nothing held outlives it.
    if ctx.state(|s| !s.work.side.is_empty()) && !super::dispatch::hold_echo(ctx) {
        super::dispatch::side_work(ctx).await?;
        return Ok(Flow::Next);
    }
    let Some((position, item)) = ctx.state_mut(|s| {
        let next = s.work.mailbox.pop_front();
        s.work.in_turn = next.is_some();
        next
    }) else {
        return Ok(Flow::Next);
    };
    if ctx.state(|s| s.input.assignee.is_some()) {
        return participant_turn(ctx, item).await;
    }
    turn(ctx, position, item).await
}

/// One model turn for the message at `position` of the history.
async fn turn(ctx: &mut WorkflowContext<TaskWorkflow>, position: usize, item: InboxItem) -> WorkflowResult<Flow> {
    let turn = ctx.state_mut(|s| {
        s.work.turn += 1;
        s.work.turn
    });
    // A provider may answer a message straight from SUBMITTED (decided at admission).
    // The turn's mark: its start and span, whose child its model and tool calls are.
    let mark = ctx.state(|s| crate::TurnMark::new(&s.head.id, turn, ctx.workflow_time(), item.trace.as_deref()));
    let trace = mark.child_trace();
    ctx.state_mut(|s| s.work.turn_mark = Some(mark));
    // An instant provider's turn hands its WORKING (and what was held for it) to its model
    // call, which appends them with its chunks (issue 31).
    let handed = !item.skip_working && ctx.state(|s| s.input.instant_model && s.log.working_with_reply);
    if handed {
        super::emit::hold_status(ctx, TaskState::Working);
    } else if !item.skip_working {
        set_status(ctx, TaskState::Working, None, None).await?;
    }
    // Nothing held waits past the turn's start (the WORKING took it, or the model call takes
    // it; an echo is held only for a turn that begins with WORKING, so this appends nothing).
    if !handed {
        super::emit::flush_held(ctx).await?;
    }
    let mut model_turn = ctx.state(|s| s.model_turn(position, turn));
    model_turn.trace = trace.clone();
    let mut handed = handed.then(|| super::emit::hand_held(ctx));
    let artifact_id = model_turn.artifact_id.clone();
    // The usage of the turn's rounds before the last (issue 29).
    let mut used: Option<crate::TokenUsage> = None;
    loop {
        model_turn.before = handed.as_ref().map(|h| h.inputs.clone()).unwrap_or_default();
        // A plain reply's end goes with the call's last chunks, when it can be told now.
        let (carried, now) = (handed.as_ref().map_or((0, 0), |h| h.sent), ctx.workflow_time());
        model_turn.end = ctx.state_mut(|s| s.plan_end(&item, &artifact_id, carried, now));
        let called = call_model(ctx, model_turn.clone()).await?;
        model_turn.before.clear();
        let planned = model_turn.end.take();
        // What the call was handed is stored when it answered; else it is held again, and
        // the next event appends it (again: an append of the same key is a no-op).
        if let Some(h) = handed.take() {
            match &called {
                Ok(Ok(_)) => super::emit::handed_stored(ctx, h),
                _ => super::emit::hold_again(ctx, h),
            }
        }
        let result = match called {
            Ok(result) => result,
            // Cancel cut the turn (S6): the store's terminal fence stops any late chunk.
            Err(Cut::Cancel) => {
                set_status(ctx, TaskState::Canceled, None, None).await?;
                return Ok(Flow::End);
            }
            // A control cut it (S8): the task completes (or parks, when sub-tasks refuse).
            Err(Cut::Control) => return super::dispatch::complete(ctx).await,
        };
        match result {
            Ok(mut reply) => {
                let size = a2a_types::json_len(&reply).map_or(0, |n| n as u64);
                ctx.state_mut(|s| s.run.bytes += size + CALL_BYTES);
                if let (Some(seq), Some(plan)) = (reply.ended, &planned) {
                    // The call stored the turn's end: the task takes it as stored.
                    ctx.state_mut(|s| s.planned_end_stored(plan, &reply.text, seq));
                    return Ok(Flow::Next);
                }
                if let Some(before) = used {
                    reply.usage = Some(before.plus(reply.usage.unwrap_or_default()));
                }
                if reply.tool_calls.is_empty() {
                    return end_turn(ctx, turn, artifact_id, reply, &item).await;
                }
                let max_rounds = ctx.state(|s| s.input.tools.max_rounds);
                if model_turn.round >= max_rounds {
                    // Past `[agent] max_tool_rounds` the turn ends, saying so (issue 29).
                    reply.text = format!(
                        "The turn stopped: the model asked for tools again after {max_rounds} rounds of tool calls \
                         (`agent.max_tool_rounds`).{}",
                        if reply.text.is_empty() { String::new() } else { format!("\n\n{}", reply.text) }
                    );
                    reply.tool_calls.clear();
                    return end_turn(ctx, turn, artifact_id, reply, &item).await;
                }
                used = reply.usage;
                let calls = std::mem::take(&mut reply.tool_calls);
                let results = match tool_round(ctx, turn, &calls, trace.as_deref()).await? {
                    Ok(results) => results,
                    Err(Cut::Cancel) => {
                        set_status(ctx, TaskState::Canceled, None, None).await?;
                        return Ok(Flow::End);
                    }
                    Err(Cut::Control) => return super::dispatch::complete(ctx).await,
                };
                model_turn.exchanges.push(crate::ToolRound { text: reply.text, calls, results });
                model_turn.round += 1;
            }
            Err(ActivityExecutionError::Cancelled(_)) if ctx.state(|s| s.work.cancel.is_some()) => {
                set_status(ctx, TaskState::Canceled, None, None).await?;
                return Ok(Flow::End);
            }
            Err(ActivityExecutionError::Cancelled(_)) if ctx.state(|s| s.work.control.is_some()) => {
                return super::dispatch::complete(ctx).await;
            }
            Err(e) => {
                let why = failure_text(&e);
                let message_id = format!("{}:failure:{turn}", ctx.state(|s| s.head.id.clone()));
                let message = Some(Message::agent_text(message_id, format!("the model failed: {why}")));
                // A conversation reports the failure and parks: the next message is a new turn
                // (a run recorded before FAILURE_PARKS failed the task, and replays so).
                let conversation = !item.direct && ctx.state(|s| s.input.lifecycle) == Lifecycle::Conversation;
                if conversation && (ctx.state(|s| s.log.run_patches) || ctx.patched(FAILURE_PARKS)) {
                    set_status(ctx, TaskState::InputRequired, message, Some(AWAITING_NEXT_MESSAGE)).await?;
                    return Ok(Flow::Next);
                }
                set_status(ctx, TaskState::Failed, message, None).await?;
                return Ok(Flow::End);
            }
        }
    }
}

/// One round of tool calls (issue 29): a WORKING status update per call, every call an
/// `invoke_tool` activity of its own, run together, then a WORKING status update per result,
/// in the order of the calls. A tool declared idempotent is retried; any other is attempted
/// once, so a call a crash interrupted is never run twice: its result is an error that says
/// so. `Err` when a cancel or a control cut the round.
async fn tool_round(
    ctx: &WorkflowContext<TaskWorkflow>,
    turn: u32,
    calls: &[crate::ToolCall],
    trace: Option<&str>,
) -> WorkflowResult<Result<Vec<crate::ToolResult>, Cut>> {
    for call in calls {
        let mark = serde_json::json!({"callId": call.id, "name": call.name, "phase": "call"});
        tool_status(ctx, mark).await?;
    }
    let (task_id, context_id, timeout) =
        ctx.state(|s| (s.head.id.clone(), s.head.context_id.clone(), s.input.tools.timeout_secs));
    // The built-ins the workflow runs itself wait for the tools that run as activities.
    let builtins: Vec<bool> = calls.iter().map(|c| ctx.state(|s| builtin::is_builtin(s, c))).collect();
    let started = ctx.workflow_time();
    let running =
        crate::join::JoinCancellable::new(calls.iter().zip(&builtins).filter(|(_, b)| !**b).map(|(call, _)| {
            let attempts = if call.idempotent { 3 } else { 1 };
            let invocation = crate::ToolInvocation {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                turn,
                call: call.clone(),
                trace: trace.map(String::from),
            };
            ctx.execute_activity(
                activity::InvokeTool,
                invocation,
                ActivityOptions::with_start_to_close_timeout(Duration::from_secs(timeout.max(1)))
                    .heartbeat_timeout(Duration::from_secs(10))
                    .retry_policy(temporalio_common::RetryPolicy::builder().maximum_attempts(attempts).build())
                    .build(),
            )
        }));
    let outcomes = match during_turn(ctx, running).await? {
        Ok(Ok(outcomes)) => outcomes,
        Ok(Err(_)) => Vec::new(),
        Err(cut) => return Ok(Err(cut)),
    };
    let elapsed = super::emit::millis_since(ctx, started);
    let mut outcomes = outcomes.into_iter();
    let mut results = Vec::with_capacity(calls.len());
    for (call, is_builtin) in calls.iter().zip(builtins) {
        let result = if is_builtin {
            match builtin::run(ctx, turn, call, trace).await? {
                Ok(result) => result,
                Err(cut) => return Ok(Err(cut)),
            }
        } else {
            match outcomes.next() {
                Some(Ok(result)) => result,
                Some(Err(e)) => not_run(call, &failure_text(&e), elapsed),
                None => not_run(call, "it never started", elapsed),
            }
        };
        let mark = serde_json::json!({
            "callId": result.call_id, "name": result.name, "phase": "result", "arguments": result.summary,
            "outcome": if result.is_error { "error" } else { "ok" }, "durationMs": result.duration_ms,
        });
        tool_status(ctx, mark).await?;
        results.push(result);
    }
    Ok(Ok(results))
}

/// The error result of a call whose activity failed (`why`): retries ran out for an
/// idempotent tool; any other was not run again.
fn not_run(call: &crate::ToolCall, why: &str, elapsed: u64) -> crate::ToolResult {
    crate::ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: if call.idempotent {
            format!("the tool `{}` failed and its retries ran out: {why}", call.name)
        } else {
            format!(
                "the call of `{}` was interrupted ({why}) and was not run again: the tool is not idempotent, and a \
                 second run could repeat its effect",
                call.name
            )
        },
        is_error: true,
        summary: String::new(),
        duration_ms: elapsed,
    }
}

/// A WORKING status update in substate `calling-tools` naming a tool call (issue 29).
async fn tool_status(ctx: &WorkflowContext<TaskWorkflow>, mark: serde_json::Value) -> WorkflowResult<()> {
    let extra = a2a_types::Struct::from_iter([(crate::tool_ext_key(), mark)]);
    super::emit::set_status_with(ctx, TaskState::Working, None, Some(crate::CALLING_TOOLS), Some(extra)).await
}

/// Calls the model: a local activity for an instant provider, a regular one (heartbeating,
/// retried, cancellable) for any other; `Err` when a cancel or a control cut it.
async fn call_model(
    ctx: &WorkflowContext<TaskWorkflow>,
    model_turn: ModelTurn,
) -> WorkflowResult<Result<Result<ModelReply, ActivityExecutionError>, Cut>> {
    if ctx.state(|s| s.input.instant_model) {
        let planned = model_turn.end.is_some();
        let call = ctx.execute_local_activity(
            activity::CallModel,
            Json(model_turn),
            LocalActivityOptions::builder().start_to_close_timeout(Duration::from_secs(60)).build(),
        );
        // A call that may store the turn's end is not cut, and nothing else is appended while
        // it runs (it is instant): what it stored is known before the task goes on.
        if planned {
            return Ok(unwrapped(Ok(call.await)));
        }
        Ok(unwrapped(during_turn(ctx, call).await?))
    } else {
        let call = ctx.execute_activity(
            activity::CallModel,
            Json(model_turn),
            ActivityOptions::with_start_to_close_timeout(Duration::from_secs(600))
                .heartbeat_timeout(Duration::from_secs(10))
                .retry_policy(temporalio_common::RetryPolicy::builder().maximum_attempts(3).build())
                .build(),
        );
        Ok(unwrapped(during_turn(ctx, call).await?))
    }
}

/// The model call's outcome with its reply out of the payload's wrapper.
fn unwrapped<E>(outcome: Result<Result<Json<ModelReply>, E>, Cut>) -> Result<Result<ModelReply, E>, Cut> {
    match outcome {
        Ok(Ok(Json(reply))) => Ok(Ok(reply)),
        Ok(Err(e)) => Ok(Err(e)),
        Err(cut) => Err(cut),
    }
}

/// Takes the reply into the task and ends the turn: as the provider decided, else parked
/// (conversation) or completed (one-shot, or a `direct` reply), unless more messages wait.
async fn end_turn(
    ctx: &mut WorkflowContext<TaskWorkflow>,
    turn: u32,
    artifact_id: String,
    reply: ModelReply,
    item: &InboxItem,
) -> WorkflowResult<Flow> {
    let direct = item.direct;
    let finish = reply.finish.as_ref().map(|f| f.state);
    let answers = item.message.message_id.as_str();
    let reply_message = ctx.state_mut(|s| s.take_reply(turn, artifact_id, reply, answers));
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
    // More messages wait, or a control that ends the task: no park between.
    if ctx.state(|s| !s.work.mailbox.is_empty() || s.work.control.is_some()) {
        return Ok(Flow::Next);
    }
    // A direct reply's client tracks no task: nothing would ever continue it.
    let lifecycle = if direct { Lifecycle::OneShot } else { ctx.state(|s| s.input.lifecycle) };
    // A one-shot with an open sub-task does not end before its result (issue 19): it parks
    // awaiting-subtasks, and its next message takes the result into a turn.
    let waits = ctx.state(|s| !s.open_sub_tasks().is_empty());
    match lifecycle {
        Lifecycle::OneShot if waits => {
            set_status(ctx, TaskState::InputRequired, reply_message, Some(crate::AWAITING_SUBTASKS)).await?;
            Ok(Flow::Next)
        }
        Lifecycle::OneShot => {
            set_status(ctx, TaskState::Completed, reply_message, None).await?;
            Ok(Flow::End)
        }
        Lifecycle::Conversation => {
            let substate = ctx.state(|s| s.parked_substate());
            set_status(ctx, TaskState::InputRequired, reply_message, Some(substate)).await?;
            Ok(Flow::Next)
        }
    }
}

impl TaskWorkflow {
    /// The end of the running turn as the model call may store it with its last chunks
    /// ([`crate::PlannedEnd`], issue 31), when it can be told before the call: an instant
    /// provider's turn for a message of a conversation that parks after it (no message,
    /// control, cancel or side work waits), with nothing pending that the call does not carry
    /// (`carried`: the messages and artifacts its handed events carry). The end's status is
    /// the one [`end_turn`] sets for a plain reply. A run recorded before [`super::FINAL_WITH_REPLY`]
    /// never plans.
    fn plan_end(
        &mut self,
        item: &InboxItem,
        artifact_id: &str,
        carried: (usize, usize),
        now: Option<std::time::SystemTime>,
    ) -> Option<crate::PlannedEnd> {
        let plans = self.log.final_with_reply
            && self.log.by_row
            && self.input.instant_model
            && !item.direct
            && self.input.lifecycle == Lifecycle::Conversation
            && self.work.mailbox.is_empty()
            && self.work.control.is_none()
            && self.work.cancel.is_none()
            && self.work.side.is_empty()
            && self.log.held.is_empty()
            && self.log.changed_participants.is_none()
            && self.log.pending_history.len() == carried.0
            && self.log.pending_artifacts.len() == carried.1;
        if !plans {
            return None;
        }
        self.log.next_key += 1;
        let history_from = (self.log.stored_history + carried.0) as u32;
        let artifact_index = (self.log.stored_artifacts + carried.1) as u32;
        Some(crate::PlannedEnd {
            key: format!("wf-{}", self.log.next_key),
            head: self.head.clone(),
            state: TaskState::InputRequired,
            timestamp: timestamp(now),
            status: Some(serde_json::json!({ "substate": self.parked_substate() })),
            reply_id: crate::reply_id(&self.head.id, self.work.turn),
            answers: item.message.message_id.clone(),
            artifact_id: artifact_id.to_string(),
            history_from,
            artifact_index,
            stored_before: Some((history_from, artifact_index)),
            turn: self.work.turn_mark.clone(),
        })
    }

    /// The model call stored the turn's planned end (at `seq`) for its reply of `text`: the
    /// task is as [`end_turn`] would have left it. A message accepted while the call ran
    /// (only when its workflow task outlived the call's first heartbeat) took the reply's
    /// place in the history meanwhile; it moves one place on, as the store has it.
    fn planned_end_stored(&mut self, plan: &crate::PlannedEnd, text: &str, seq: i64) {
        let input = plan.input(&self.input.task_queue, text);
        if !input.history.is_empty() {
            let at = plan.history_from as usize;
            for (position, _) in self.work.mailbox.iter_mut().filter(|(p, _)| *p >= at) {
                *position += 1;
            }
            self.log.stored_history = at + 1;
        }
        if let Some((index, _)) = input.artifacts.first() {
            self.log.stored_artifacts = self.log.stored_artifacts.max(*index as usize + 1);
        }
        if let Some(head) = input.snapshot {
            self.head = head;
        }
        self.log.last_seq = self.log.last_seq.max(seq);
        self.work.turn_mark = None;
        self.work.in_turn = false;
    }

    /// Whether the step after the Task's is the first message's turn, which begins with an
    /// append (its WORKING, or an instant provider's model call) that the Task can wait for:
    /// no cancel, control or assignee, not opened by a brief alone, and no side work but
    /// echoes (whose appends would take it too). A run recorded before [`super::TASK_WITH_TURN`]
    /// never holds the Task.
    fn turn_follows_open(&self) -> bool {
        self.log.task_with_turn
            && self.input.assignee.is_none()
            && !self.work.brief_only
            && self.work.cancel.is_none()
            && self.work.control.is_none()
            && self.work.side.iter().all(|side| matches!(side, super::Side::Echo { .. }))
            && self.work.mailbox.front().is_some_and(|(_, item)| !item.skip_working)
    }

    /// Something for the run loop: a message, a cancel, a control or side work.
    fn has_work(&self) -> bool {
        !self.work.mailbox.is_empty()
            || self.work.cancel.is_some()
            || self.work.control.is_some()
            || !self.work.side.is_empty()
    }

    /// The conversation up to this turn's message, from what the store does not have:
    /// `call_model` reads the messages before that from the store.
    fn model_turn(&self, position: usize, turn: u32) -> ModelTurn {
        let upto = position + 1;
        let from = self.log.stored_history.min(upto);
        // The messages from `from` to the turn's own are pending (none when it is stored).
        let given = &self.log.pending_history[..upto - from];
        ModelTurn {
            task_id: self.input.task_id.clone(),
            context_id: self.input.context_id.clone(),
            task_queue: self.input.task_queue.clone(),
            model: self.input.model.clone(),
            turn,
            artifact_id: format!("reply-{turn}"),
            history: given.to_vec(),
            history_from: from as u32,
            reasoning_effort: self.input.reasoning_effort.clone(),
            round: 0,
            exchanges: Vec::new(),
            trace: None,
            before: Vec::new(),
            end: None,
        }
    }

    /// Adds a reply's artifacts and its message to the task; returns the status message
    /// the turn ends with (the provider's finishing text, else the reply's).
    fn take_reply(&mut self, turn: u32, artifact_id: String, reply: ModelReply, answers: &str) -> Option<Message> {
        let status_text = reply.finish.as_ref().and_then(|f| f.message.clone()).unwrap_or(reply.text.clone());
        let mut reply_message = (!status_text.is_empty())
            .then(|| crate::reply_message(&self.head, crate::reply_id(&self.head.id, turn), status_text, answers));
        if let Some(used) = reply.usage {
            // The turn's usage on its reply, the task's sum on the task.
            let key = crate::usage_ext_key();
            let total = self.usage().unwrap_or_default().plus(used);
            let md = self.head.metadata.get_or_insert_with(Default::default);
            md.insert(key.clone(), serde_json::to_value(total).unwrap_or_default());
            if let Some(m) = reply_message.as_mut() {
                m.metadata
                    .get_or_insert_with(Default::default)
                    .insert(key, serde_json::to_value(used).unwrap_or_default());
            }
        }
        if !reply.text.is_empty() {
            self.add_artifact(crate::reply_artifact(artifact_id, reply.text.clone()));
        }
        for artifact in reply.artifacts {
            self.add_artifact(artifact);
        }
        if let Some(m) = &reply_message {
            self.log.pending_history.push(m.clone());
        }
        reply_message
    }

    /// An artifact for the next event: at the next index, or in the place of a pending one
    /// with its id. (The store keeps a stored artifact's place when one replaces it.)
    pub(super) fn add_artifact(&mut self, artifact: Artifact) {
        match self.log.pending_artifacts.iter_mut().find(|(_, a)| a.artifact_id == artifact.artifact_id) {
            Some((_, existing)) => *existing = artifact,
            None => {
                let idx = (self.log.stored_artifacts + self.log.pending_artifacts.len()) as u32;
                self.log.pending_artifacts.push((idx, artifact));
            }
        }
    }

    /// The remembered `messageId`s the next run takes over ([`newest_within`]).
    fn carried_accepted(&self) -> Vec<(String, i64)> {
        newest_within(&self.accepted.order, &self.accepted.ids, MAX_CARRIED_IDS_BYTES)
    }

    /// The next run's input: this one's, with the state it needs to go on (and no first
    /// message: the task is open).
    fn next_run_input(&self) -> Box<TaskInput> {
        let carried = Carried {
            head: self.head.clone(),
            last_seq: self.log.last_seq,
            next_key: self.log.next_key,
            turn: self.work.turn,
            stored_history: self.log.stored_history as u32,
            stored_artifacts: self.log.stored_artifacts as u32,
            pending_history: self.log.pending_history.clone(),
            mailbox: self.work.mailbox.iter().map(|(i, item)| (*i as u32, item.clone())).collect(),
            accepted: self.carried_accepted(),
            cancel: self.work.cancel.clone(),
            runs: self.run.runs + 1,
            sub_tasks: self.delegation.sub_tasks.clone(),
            ui: self.ui.clone(),
        };
        Box::new(TaskInput { first: None, carried: Some(Box::new(carried)), ..self.input.clone() })
    }
}

/// Runs a turn's activity until it ends, doing the side work that comes meanwhile (echoes,
/// commands: S9, S12), or until a cancel or a control cuts it (`Err`): the worker is told
/// to stop it, and the store's terminal fence refuses its late chunks (D1).
async fn during_turn<T>(
    ctx: &WorkflowContext<TaskWorkflow>,
    call: impl CancellableFuture<Output = Result<T, ActivityExecutionError>>,
) -> WorkflowResult<Result<Result<T, ActivityExecutionError>, Cut>> {
    let mut call = std::pin::pin!(call);
    loop {
        let next = temporalio_sdk::workflows::select! {
            r = &mut call => Some(Ok(r)),
            _ = ctx.wait_condition(|s| s.work.cancel.is_some() || s.work.control.is_some()) => Some(Err(())),
            _ = ctx.wait_condition(|s| !s.work.side.is_empty()) => None,
        };
        match next {
            Some(Ok(r)) => return Ok(Ok(r)),
            Some(Err(())) => {
                call.cancel();
                let _ = call.await;
                let cut = Cut::now(ctx);
                return Ok(Err(cut));
            }
            None => super::dispatch::side_work(ctx).await?,
        }
    }
}

/// The newest of `order`'s ids (oldest first, with their cursors) whose lengths (and a fixed
/// cost each) add up to at most `budget` bytes: however long the ids a client sends, the next
/// run's input stays small enough to be sent.
fn newest_within(
    order: &std::collections::VecDeque<String>,
    cursors: &std::collections::HashMap<String, i64>,
    budget: usize,
) -> Vec<(String, i64)> {
    let mut left = budget;
    let mut newest = Vec::new();
    for id in order.iter().rev() {
        let Some(rest) = left.checked_sub(id.len() + 16) else { break };
        left = rest;
        newest.push((id.clone(), cursors.get(id).copied().unwrap_or_default()));
    }
    newest.reverse();
    newest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ItemKind;
    use a2a_types::{Task, TaskStatus};

    /// A conversation on an instant provider, `stored` messages and one artifact stored,
    /// in turn 2 (its WORKING stored).
    fn in_turn(stored: usize) -> TaskWorkflow {
        TaskWorkflow {
            input: TaskInput {
                task_id: "t".into(),
                context_id: "c".into(),
                task_queue: "q".into(),
                instant_model: true,
                lifecycle: Lifecycle::Conversation,
                ..Default::default()
            },
            head: Task {
                id: "t".into(),
                context_id: "c".into(),
                status: TaskStatus { state: TaskState::Working, message: None, timestamp: None },
                ..Default::default()
            },
            log: super::super::LogState {
                by_row: true,
                final_with_reply: true,
                stored_history: stored,
                stored_artifacts: 1,
                next_key: 7,
                last_seq: 10,
                ..Default::default()
            },
            work: super::super::Work { turn: 2, in_turn: true, ..Default::default() },
            accepted: Default::default(),
            run: Default::default(),
            delegation: Default::default(),
            ui: Default::default(),
        }
    }

    fn message(id: &str, text: &str) -> InboxItem {
        let mut m = Message::agent_text(id, text);
        m.role = a2a_types::Role::User;
        InboxItem { message: m, ..Default::default() }
    }

    /// Issue 31: a turn plans its end only when nothing else can come first (a message, a
    /// control or side work waiting, a one-shot or direct reply, a run from before the patch).
    #[test]
    fn a_turn_plans_its_end_only_when_a_plain_reply_parks_the_conversation() {
        let item = message("m-2", "hi");
        let plan = in_turn(4).plan_end(&item, "reply-2", (0, 0), None).expect("planned");
        assert_eq!((plan.key.as_str(), plan.history_from, plan.artifact_index), ("wf-8", 4, 1));
        assert_eq!((plan.reply_id.as_str(), plan.answers.as_str()), ("t:reply:2", "m-2"));
        assert_eq!(plan.state, TaskState::InputRequired);
        assert_eq!(plan.status, Some(serde_json::json!({"substate": AWAITING_NEXT_MESSAGE})));

        let refused = |change: &dyn Fn(&mut TaskWorkflow, &mut InboxItem)| {
            let (mut wf, mut item) = (in_turn(4), message("m-2", "hi"));
            change(&mut wf, &mut item);
            let key = wf.log.next_key;
            let plan = wf.plan_end(&item, "reply-2", (0, 0), None);
            plan.is_none() && wf.log.next_key == key
        };
        assert!(refused(&|wf, _| wf.take(message("m-3", "next"))), "a message waits");
        assert!(refused(&|wf, _| wf.take(InboxItem { kind: ItemKind::Control, ..message("m-3", "done") })));
        assert!(refused(&|wf, _| wf.input.lifecycle = Lifecycle::OneShot), "a one-shot completes");
        assert!(refused(&|_, item| item.direct = true), "a direct reply completes");
        assert!(refused(&|wf, _| wf.input.instant_model = false), "a provider that takes time");
        assert!(refused(&|wf, _| wf.log.final_with_reply = false), "a run recorded before");
        assert!(refused(&|wf, _| wf.log.pending_history.push(Message::agent_text("x", "x"))), "not carried");
    }

    /// Issue 31: what the call stored as the turn's end is the task's state after it; a
    /// message accepted while the call ran (its workflow task outlived the call's first
    /// heartbeat) had taken the reply's place in the history and moves one place on, so that
    /// the next event stores it after the reply.
    #[test]
    fn a_message_accepted_during_a_call_that_stored_the_end_comes_after_the_reply() {
        let mut wf = in_turn(4);
        let plan = wf.plan_end(&message("m-2", "hi"), "reply-2", (0, 0), None).unwrap();
        wf.take(message("m-3", "next"));
        assert_eq!(wf.work.mailbox[0].0, 4, "accepted at the reply's place");

        wf.planned_end_stored(&plan, "echo: hi", 12);
        assert_eq!(wf.work.mailbox[0].0, 5, "after the reply");
        assert_eq!((wf.log.stored_history, wf.log.stored_artifacts, wf.log.last_seq), (5, 2, 12));
        assert_eq!(wf.log.pending_history.iter().map(|m| m.message_id.as_str()).collect::<Vec<_>>(), ["m-3"]);
        assert!(!wf.work.in_turn && wf.work.turn_mark.is_none());
        assert_eq!(wf.head.status.state, TaskState::InputRequired);
        assert_eq!(wf.head.status.message.as_ref().map(Message::text).as_deref(), Some("echo: hi"));
        let stored = plan.input("q", "echo: hi");
        assert_eq!((stored.history_from, stored.stored_before), (4, Some((4, 1))));
        assert_eq!(stored.snapshot.as_ref(), Some(&wf.head));

        let next = wf.emit_input("wf-9".into(), stored.event, None, &mut (0, 0));
        assert_eq!((next.history_from, next.stored_before), (5, Some((5, 2))));
        assert_eq!(next.history.iter().map(|m| m.message_id.as_str()).collect::<Vec<_>>(), ["m-3"]);
    }

    /// An empty plain reply ends the turn with no message and no artifact.
    #[test]
    fn an_empty_reply_ends_the_planned_turn_without_a_message() {
        let mut wf = in_turn(4);
        let plan = wf.plan_end(&message("m-2", "hi"), "reply-2", (0, 0), None).unwrap();
        let stored = plan.input("q", "");
        assert!(stored.history.is_empty() && stored.artifacts.is_empty());
        wf.planned_end_stored(&plan, "", 11);
        assert_eq!((wf.log.stored_history, wf.log.stored_artifacts), (4, 1));
        assert_eq!(wf.head.status.message, None);
    }

    /// Issue 15: the ids a run hands the next are its newest, oldest first, within the budget.
    #[test]
    fn a_run_hands_over_its_newest_message_ids_within_the_budget() {
        let order: std::collections::VecDeque<String> = ["a".repeat(40), "b".repeat(40), "c".repeat(40)].into();
        let cursors = order.iter().enumerate().map(|(i, id)| (id.clone(), i as i64)).collect();
        let all = newest_within(&order, &cursors, 1024);
        assert_eq!(all.iter().map(|(_, c)| *c).collect::<Vec<_>>(), [0, 1, 2]);
        let two = newest_within(&order, &cursors, 2 * 56 + 10);
        assert_eq!(two, vec![(order[1].clone(), 1), (order[2].clone(), 2)], "the oldest goes first");
        assert!(newest_within(&order, &cursors, 10).is_empty());
    }
}
