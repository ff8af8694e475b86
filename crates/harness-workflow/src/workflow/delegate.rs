//! Delegation (issue 19, S9's `delegate`, S15): `/delegate <agent> <brief>` starts a
//! sub-task, a stand-in `TaskWorkflow` (a child workflow on this queue) that sends the brief
//! to the remote agent and mirrors the remote task into its own log, followed by push (the
//! `remote_push` update) or, with the push route off or an agent that does not push, by
//! subscribing. When the remote task reaches a final state the stand-in ends and signals its
//! parent (`sub_task_done`), whose history then records the result for its model's next
//! turn. Cancelling a parent cancels its open sub-tasks, and each cancels its remote task.

use super::TaskWorkflow;
use super::emit::{emit, set_status, set_status_with, timestamp};
use crate::activity;
use crate::{
    AWAITING_NEXT_MESSAGE, AWAITING_SUBTASKS, CancelRequest, InboxItem, Observation, RemoteCancel, RemoteLook,
    RemoteSend, RemoteStarted, SUMMARY_CHARS, StandIn, SubTask, SubTaskResult, TaskInput,
};
use a2a_types::{Artifact, Message, Role, StreamResponse, Struct, TaskState};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_sdk::{
    ActivityOptions, CancellableFuture, ChildWorkflowOptions, ParentClosePolicy, WorkflowContext, WorkflowResult,
};

/// How often a stand-in followed by push reads its remote task anyway: a push lost while
/// this harness was down is made up for within this time.
const PUSH_POLL: Duration = Duration::from_secs(30);

/// Metadata key of a stand-in's remote task on its events (`{"agent", "task_id"}`) and of a
/// sub-task's result in its parent's history (`{"task_id", "agent", "remote_task_id",
/// "state"}`).
pub fn sub_task_ext_key() -> String {
    format!("{}/sub_task", crate::EXT_NS)
}

/// `/delegate <agent> <brief>`: starts the stand-in and answers with its `task_ref`; the
/// parent waits `awaiting-subtasks` while it is parked.
pub(super) async fn delegate(ctx: &WorkflowContext<TaskWorkflow>, item: InboxItem, args: String) -> WorkflowResult<()> {
    let (agent, brief) = crate::delegate_args(&args);
    let (agent, brief) = (agent.to_string(), brief.to_string());
    let started = start_sub_task(ctx, &agent, &brief, item.sender.clone(), item.trace.clone()).await?;
    let (text, extra, task_ref) = match &started {
        Ok(id) => {
            let tag =
                [("command".to_string(), serde_json::json!("delegate")), ("task_ref".into(), serde_json::json!(id))];
            (format!("delegated to `{agent}` as sub-task {id}"), Struct::from_iter(tag), Some(id.as_str()))
        }
        Err(why) => (
            format!("/delegate failed: {why}"),
            Struct::from_iter([("command".to_string(), serde_json::json!("delegate"))]),
            None,
        ),
    };
    // The reply names the sub-task too (S9), so a blocking answer (a Task, without the
    // event's metadata) does.
    let marks = super::emit::command_marks("delegate", &item, task_ref);
    let message = ctx.state_mut(|s| s.agent_message("command", text, marks));
    let state = ctx.state(|s| s.head.status.state);
    if matches!(state, TaskState::Submitted | TaskState::InputRequired) {
        let substate = ctx.state(|s| s.parked_substate());
        return set_status_with(ctx, TaskState::InputRequired, Some(message), Some(substate), Some(extra)).await;
    }
    super::emit::emit_unchanged(ctx, message, extra.into_iter().collect(), true).await
}

/// Starts a sub-task: the stand-in of `brief` for `agent` (a child workflow), listed in the
/// task's sub-tasks; its id, or why it could not start.
pub(super) async fn start_sub_task(
    ctx: &WorkflowContext<TaskWorkflow>,
    agent: &str,
    brief: &str,
    requested_by: Option<String>,
    trace: Option<String>,
) -> WorkflowResult<Result<String, String>> {
    let input = ctx.state(|s| s.stand_in_input(agent, brief, requested_by, trace));
    let id = input.task_id.clone();
    let options =
        ChildWorkflowOptions::builder().workflow_id(id.clone()).parent_close_policy(ParentClosePolicy::Abandon).build();
    match ctx.start_child_workflow(TaskWorkflow::run, input, options).await {
        Ok(_) => {
            ctx.state_mut(|s| s.add_sub_task(&id, agent));
            Ok(Ok(id))
        }
        Err(e) => Ok(Err(format!("the sub-task could not start: {e}"))),
    }
}

/// A sub-task's result into the parent's history (for its model's next turn), as a status
/// update; a parked parent whose last sub-task ended waits for its next message again.
pub(super) async fn sub_result(ctx: &WorkflowContext<TaskWorkflow>, result: SubTaskResult) -> WorkflowResult<()> {
    let text = format!("[sub-task {} · agent {} · {}] {}", result.task_id, result.agent, result.state, result.summary);
    let mark = serde_json::json!({
        "task_id": result.task_id, "agent": result.agent,
        "remote_task_id": result.remote_task_id, "state": result.state,
    });
    let message = ctx.state_mut(|s| {
        let mut m = s.agent_message("sub-task", text, [(sub_task_ext_key(), mark.clone())]);
        // The result comes to this agent: its model reads it as input.
        m.role = Role::User;
        if let Some(last) = s.log.pending_history.last_mut() {
            last.role = Role::User;
        }
        m
    });
    if ctx.state(|s| s.head.status.state == TaskState::InputRequired) {
        let substate = ctx.state(|s| s.parked_substate());
        let extra = Struct::from_iter([(sub_task_ext_key(), mark)]);
        return set_status_with(ctx, TaskState::InputRequired, Some(message), Some(substate), Some(extra)).await;
    }
    super::emit::emit_unchanged(ctx, message, vec![(sub_task_ext_key(), mark)], true).await
}

/// A parent that ended cancels its open sub-tasks (each cancels its remote task).
pub(super) async fn cancel_children(ctx: &WorkflowContext<TaskWorkflow>) {
    let open = ctx.state(|s| s.open_sub_tasks());
    for id in open {
        let reason = CancelRequest { reason: "its parent task ended".into() };
        let signal = ctx.external_workflow(id, None).signal(TaskWorkflow::cancel, reason, Default::default());
        // A stand-in that ended meanwhile cannot be signalled: nothing to cancel.
        let _ = signal.await;
    }
}

/// The stand-in's run: send the brief, follow the remote task to a final state, mirror it,
/// end and tell the parent.
pub(super) async fn stand_in(ctx: &mut WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    let opened_at = timestamp(ctx.workflow_time());
    let task = ctx.state_mut(|s| {
        s.head.status.timestamp = opened_at;
        // The store's access list: the parent's participants may read and cancel it (S13).
        s.log.changed_participants = Some(s.participants().into_iter().map(|p| (p.id, p.role)).collect());
        s.live_task()
    });
    let head = task.head();
    emit(ctx, StreamResponse::Task(task), Some(head)).await?;
    let send = ctx.state(|s| {
        let si = s.input.stand_in.clone().unwrap_or_default();
        RemoteSend { agent: si.agent, stand_in: s.head.id.clone(), brief: si.brief, push: true, trace: si.trace }
    });
    let call = ctx.execute_activity(
        activity::RemoteSendBrief,
        send,
        ActivityOptions::with_start_to_close_timeout(Duration::from_secs(60))
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_attempts(5)
                    .initial_interval(Duration::from_secs(1))
                    .maximum_interval(Duration::from_secs(30))
                    .build(),
            )
            .build(),
    );
    let started = match until_cancel(ctx, call).await {
        None => return end(ctx, TaskState::Canceled, "canceled before the remote agent took the brief".into()).await,
        Some(Ok(started)) => started,
        Some(Err(e)) => {
            let why = super::emit::failure_text(&e);
            return end(ctx, TaskState::Failed, format!("delegation failed: {why}")).await;
        }
    };
    let by_push = started.token_digest.is_some();
    let seen = started.seen.clone();
    ctx.state_mut(|s| {
        let mark = serde_json::json!({"agent": s.stand_in().agent, "task_id": started.remote_task_id});
        s.head.metadata.get_or_insert_with(Default::default).insert(sub_task_ext_key(), mark);
        s.delegation.following = Some(RemoteStarted { seen: Observation::default(), ..started });
    });
    mirror(ctx, seen).await?;
    if by_push && !ctx.state(|s| s.seen().state.is_final()) {
        // A push sent before this workflow knew its token was refused: read once now.
        match look(ctx, false).await? {
            Some(Ok(seen)) => mirror(ctx, seen).await?,
            Some(Err(_)) => {}
            None => return cancel_remote(ctx).await,
        }
    }
    while !ctx.state(|s| s.seen().state.is_final()) {
        let next = if by_push { pushed_or_polled(ctx).await? } else { look(ctx, true).await? };
        match next {
            None => return cancel_remote(ctx).await,
            Some(Ok(seen)) => mirror(ctx, seen).await?,
            Some(Err(e)) => {
                let why = super::emit::failure_text(&e);
                return end(ctx, TaskState::Failed, format!("following the remote task failed: {why}")).await;
            }
        }
    }
    if by_push {
        // A push carries a status, not the artifacts: the task is read once at its end.
        if let Some(Ok(seen)) = look(ctx, false).await? {
            mirror(ctx, seen).await?;
        }
    }
    let seen = ctx.state(|s| s.seen());
    let state = if seen.state.is_terminal() { seen.state } else { TaskState::Completed };
    end(ctx, state, seen.answer_text()).await
}

/// The stand-in's TaskInput fields and state accessors.
impl TaskWorkflow {
    fn stand_in(&self) -> StandIn {
        self.input.stand_in.clone().unwrap_or_default()
    }

    /// The remote task as last mirrored (nothing before the remote agent took the brief).
    fn seen(&self) -> Observation {
        self.delegation.following.as_ref().map(|f| f.seen.clone()).unwrap_or_default()
    }

    /// The remote task's id (empty before the remote agent took the brief).
    fn remote_task_id(&self) -> String {
        self.delegation.following.as_ref().map(|f| f.remote_task_id.clone()).unwrap_or_default()
    }

    /// The stand-in of a new sub-task: a one-shot on this queue with the parent's context,
    /// its task data naming the parent, the remote agent as assignee and this task's
    /// participants (so they can read it).
    fn stand_in_input(
        &self,
        agent: &str,
        brief: &str,
        requested_by: Option<String>,
        trace: Option<String>,
    ) -> TaskInput {
        let id = format!("{}-sub-{}", self.head.id, self.delegation.sub_tasks.len() + 1);
        let first_line = brief.lines().next().unwrap_or_default();
        let name: String = format!("{agent}: {first_line}").chars().take(60).collect();
        let mut participants: Vec<serde_json::Value> = self
            .participants()
            .into_iter()
            .filter(|p| p.role != "assignee")
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect();
        participants.push(serde_json::json!({"id": agent, "kind": "agent", "role": "assignee"}));
        let data = serde_json::json!({
            "name": name,
            "goal": brief,
            "participants": participants,
            "parent_tasks": [{"task_id": self.head.id, "agent": null}],
        });
        TaskInput {
            task_id: id,
            context_id: self.head.context_id.clone(),
            task_queue: self.input.task_queue.clone(),
            lifecycle: crate::Lifecycle::OneShot,
            model: self.input.model.clone(),
            linger_secs: self.input.linger_secs,
            metadata: Some(Struct::from_iter([(crate::task_ext_key(), data)])),
            stand_in: Some(StandIn {
                agent: agent.to_string(),
                parent: self.head.id.clone(),
                brief: brief.to_string(),
                requested_by,
                trace,
            }),
            ..Default::default()
        }
    }

    /// Lists a new sub-task in the task data's `sub_tasks` and in the state.
    fn add_sub_task(&mut self, id: &str, agent: &str) {
        self.delegation.sub_tasks.push(SubTask { task_id: id.to_string(), agent: agent.to_string(), state: None });
        let md = self.head.metadata.get_or_insert_with(Default::default);
        let data = md.entry(crate::task_ext_key()).or_insert_with(|| serde_json::json!({}));
        if let Some(data) = data.as_object_mut() {
            let list = data.entry("sub_tasks").or_insert_with(|| serde_json::json!([]));
            if let Some(list) = list.as_array_mut() {
                list.push(serde_json::json!({"task_id": id, "agent": agent}));
            }
        }
    }

    /// The substate of a parked task: waiting for its sub-tasks while one is open.
    pub(super) fn parked_substate(&self) -> &'static str {
        if self.delegation.sub_tasks.iter().any(|t| t.state.is_none()) {
            AWAITING_SUBTASKS
        } else {
            AWAITING_NEXT_MESSAGE
        }
    }

    /// A result from a stand-in: its sub-task closes and the result waits to be recorded.
    pub(super) fn take_sub_result(&mut self, result: SubTaskResult) {
        let Some(sub) = self.delegation.sub_tasks.iter_mut().find(|t| t.task_id == result.task_id && t.state.is_none())
        else {
            return;
        };
        sub.state = Some(result.state);
        self.work.side.push_back(super::Side::SubResult(result));
    }
}

/// Runs `call` unless the stand-in is cancelled first (`None`).
async fn until_cancel<T>(
    ctx: &WorkflowContext<TaskWorkflow>,
    call: impl CancellableFuture<Output = Result<T, temporalio_sdk::ActivityExecutionError>>,
) -> Option<Result<T, temporalio_sdk::ActivityExecutionError>> {
    let mut call = std::pin::pin!(call);
    let r = temporalio_sdk::workflows::select! {
        r = &mut call => Some(r),
        _ = ctx.wait_condition(|s| s.work.cancel.is_some()) => None,
    };
    if r.is_none() {
        call.cancel();
        let _ = call.await;
    }
    r
}

/// One look at the remote task by `remote_observe`; `None` when cancelled meanwhile.
async fn look(
    ctx: &WorkflowContext<TaskWorkflow>,
    subscribe: bool,
) -> WorkflowResult<Option<Result<Observation, temporalio_sdk::ActivityExecutionError>>> {
    let input = ctx.state(|s| RemoteLook {
        agent: s.stand_in().agent,
        remote_task_id: s.remote_task_id(),
        subscribe,
        seen: s.seen(),
    });
    // A remote agent that is down is waited for (retried without end, backing off to
    // 10 s); one that refuses the task fails the sub-task.
    let call = ctx.execute_activity(
        activity::RemoteObserve,
        input,
        ActivityOptions::with_start_to_close_timeout(Duration::from_secs(90))
            .heartbeat_timeout(Duration::from_secs(15))
            .retry_policy(
                RetryPolicy::builder()
                    .initial_interval(Duration::from_millis(500))
                    .maximum_interval(Duration::from_secs(10))
                    .build(),
            )
            .build(),
    );
    Ok(until_cancel(ctx, call).await)
}

/// Followed by push: the pushes that came, or a read after [`PUSH_POLL`] without one.
async fn pushed_or_polled(
    ctx: &WorkflowContext<TaskWorkflow>,
) -> WorkflowResult<Option<Result<Observation, temporalio_sdk::ActivityExecutionError>>> {
    let pushed = {
        let poll = ctx.timer(PUSH_POLL);
        let mut poll = std::pin::pin!(poll);
        let pushed = temporalio_sdk::workflows::select! {
            _ = ctx.wait_condition(|s| !s.work.pushes.is_empty() || s.work.cancel.is_some()) => true,
            _ = &mut poll => false,
        };
        if pushed {
            poll.cancel();
        }
        pushed
    };
    if ctx.state(|s| s.work.cancel.is_some()) {
        return Ok(None);
    }
    if !pushed {
        return look(ctx, false).await;
    }
    Ok(Some(Ok(ctx.state_mut(|s| {
        let mut seen = s.seen();
        for event in s.work.pushes.drain(..) {
            seen.fold(event);
        }
        seen
    }))))
}

/// Mirrors what is new in `now` into the stand-in's log: a changed status as WORKING (the
/// final one is the stand-in's end), each new or changed artifact.
async fn mirror(ctx: &WorkflowContext<TaskWorkflow>, now: Observation) -> WorkflowResult<()> {
    let before = ctx.state(|s| s.seen());
    let changed: Vec<Artifact> = now.artifacts.iter().filter(|a| !before.artifacts.contains(a)).cloned().collect();
    for artifact in changed {
        super::emit::emit_artifact(ctx, artifact).await?;
    }
    let status_changed = now.state != before.state
        || now.message.as_ref().map(|m| &m.parts) != before.message.as_ref().map(|m| &m.parts);
    let working = !now.state.is_final();
    ctx.state_mut(|s| {
        if let Some(f) = s.delegation.following.as_mut() {
            f.seen = now.clone();
        }
    });
    if status_changed && working {
        let message = now.message.map(|m| ctx.state_mut(|s| s.remote_message(m)));
        // The event names the remote task, as the head does.
        let mark = ctx.state(|s| s.head.metadata.as_ref().and_then(|m| m.get(&sub_task_ext_key())).cloned());
        let extra = mark.map(|mark| Struct::from_iter([(sub_task_ext_key(), mark)]));
        set_status_with(ctx, TaskState::Working, message, None, extra).await?;
    }
    Ok(())
}

/// The stand-in was cancelled: CancelTask on the remote agent, then end CANCELED.
async fn cancel_remote(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    let input = ctx.state(|s| RemoteCancel { agent: s.stand_in().agent, remote_task_id: s.remote_task_id() });
    let _ = ctx
        .execute_activity(
            activity::RemoteCancelTask,
            input,
            ActivityOptions::with_start_to_close_timeout(Duration::from_secs(30))
                .retry_policy(RetryPolicy::builder().maximum_attempts(5).build())
                .build(),
        )
        .await;
    let why = ctx.state(|s| s.work.cancel.as_ref().map(|c| c.reason.clone()).unwrap_or_default());
    end(ctx, TaskState::Canceled, why).await
}

/// Ends the stand-in in `state` with `text` and tells the parent.
async fn end(ctx: &WorkflowContext<TaskWorkflow>, state: TaskState, text: String) -> WorkflowResult<()> {
    let message = (!text.is_empty()).then(|| {
        ctx.state_mut(|s| {
            let mut m = Message::agent_text(format!("{}:result", s.head.id), text.clone());
            m.task_id = s.head.id.clone();
            m.context_id = s.head.context_id.clone();
            s.log.pending_history.push(m.clone());
            m
        })
    });
    set_status(ctx, state, message, None).await?;
    let (parent, result) = ctx.state(|s| {
        let si = s.stand_in();
        let remote_state = s
            .delegation
            .following
            .as_ref()
            .map_or(state, |f| if f.seen.state.is_final() { f.seen.state } else { state });
        let result = SubTaskResult {
            task_id: s.head.id.clone(),
            agent: si.agent.clone(),
            remote_task_id: s.remote_task_id(),
            state: remote_state,
            summary: text.chars().take(SUMMARY_CHARS).collect(),
        };
        (si.parent, result)
    });
    // A parent that ended meanwhile cannot be told: nothing waits for the result.
    let _ = ctx.external_workflow(parent, None).signal(TaskWorkflow::sub_task_done, result, Default::default()).await;
    Ok(())
}

impl TaskWorkflow {
    /// A remote task's status message as the stand-in's own (ids of this task, agent role).
    fn remote_message(&mut self, remote: Message) -> Message {
        let n = self.history_len() + 1;
        let mut m = Message {
            message_id: format!("{}:remote:{n}", self.head.id),
            role: Role::Agent,
            task_id: self.head.id.clone(),
            context_id: self.head.context_id.clone(),
            parts: remote.parts,
            ..Default::default()
        };
        m.metadata = remote.metadata;
        self.log.pending_history.push(m.clone());
        m
    }
}
