//! GetTask, CancelTask and SubscribeToTask, and the reads behind them and `/_monitor`: the
//! workflow's view while it runs, the store's once it has ended or while Temporal is down.

use super::access::Access;
use super::stream::StopAt;
use super::{HarnessHandler, store_error};
use a2a_server::{CallContext, EventStream, StreamItem};
use a2a_types::{
    A2AError, CancelTaskRequest, ErrorKind, GetTaskRequest, SubscribeToTaskRequest, Task, TaskState, validate,
};
use futures::StreamExt;
use harness_workflow::{LiveTask, terminal_refusal};

impl HarnessHandler {
    /// GetTask (S13).
    pub(super) async fn get(&self, ctx: &CallContext, req: GetTaskRequest) -> Result<Task, A2AError> {
        validate::task_id(&req.id, "id")?;
        if let Some(h) = req.history_length {
            validate::history_length(h, "historyLength")?;
        }
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, &req.id, Access::Read).await?;
        Ok(self.current_task(&req.id, req.history_length).await?.with_history_length(req.history_length))
    }

    /// CancelTask (S7): signal, then wait for the terminal event.
    pub(super) async fn cancel(&self, ctx: &CallContext, req: CancelTaskRequest) -> Result<Task, A2AError> {
        validate::task_id(&req.id, "id")?;
        let caller = self.caller(ctx, &[req.metadata.as_ref()]).await?;
        self.check_access(&caller, &req.id, Access::Cancel).await?;
        let task = self.current_task(&req.id, None).await?;
        let not_cancelable = |state: TaskState| {
            A2AError::new(ErrorKind::TaskNotCancelable, terminal_refusal(state))
                .with("taskId", &req.id)
                .with("state", state.as_str())
        };
        if task.status.state.is_terminal() {
            return Err(not_cancelable(task.status.state));
        }
        if !self.health.is_up() {
            return Err(self.health.unavailable("the cancel"));
        }
        let after = self.store.task_head(&req.id).await.map_err(store_error)?.map_or(0, |h| h.last_seq);
        if let Err(e) = self.temporal.cancel(&req.id).await {
            // A refused signal may mean the task ended meanwhile; a timeout is the answer.
            if e.kind != ErrorKind::Unavailable
                && let Some(row) = self.store.task_head(&req.id).await.map_err(store_error)?
                && row.state.is_terminal()
            {
                return Err(not_cancelable(row.state));
            }
            return Err(e);
        }
        let log = self.log_stream(req.id.clone(), after, StopAt::Terminal);
        self.temporal.bounded("the cancellation", self.task_at_end(&req.id, log, None)).await?
    }

    /// SubscribeToTask (S10).
    pub(super) async fn subscribe(
        &self,
        ctx: &CallContext,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2AError> {
        validate::task_id(&req.id, "id")?;
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, &req.id, Access::Read).await?;
        if let Some(after) = last_event_id(ctx)? {
            return self.resume(req.id, after).await;
        }
        let task = self.current_task(&req.id, Some(0)).await?;
        if task.status.state.is_terminal() {
            return Err(A2AError::unsupported(format!(
                "{}; subscribing needs a task that has not ended",
                terminal_refusal(task.status.state)
            ))
            .with("taskId", &req.id));
        }
        // S10: replay from seq 1, then stay attached until a terminal state.
        Ok(self.log_stream(req.id, 0, StopAt::Terminal))
    }

    /// Every task of this queue that has not ended (S20): read from the store, and only the
    /// tasks a turn runs on (WORKING or SUBMITTED, as many as run at once) are asked for
    /// their mailbox and turn; none while Temporal does not answer.
    pub(crate) async fn monitor_rows(&self) -> Result<Vec<harness_workflow::MonitorRow>, A2AError> {
        let open = self.store.open_task_states(self.task_queue()).await.map_err(store_error)?;
        let mut rows = Vec::new();
        for row in open {
            // A task waiting for its sub-tasks is asked too: its children are in the workflow.
            let busy = matches!(row.state, TaskState::Working | TaskState::Submitted)
                || row.substate.as_deref() == Some(harness_workflow::AWAITING_SUBTASKS);
            if busy
                && self.health.is_up()
                && let Some(r) = self.temporal.monitor(&row.task_id).await
            {
                rows.push(r);
                continue;
            }
            rows.push(harness_workflow::MonitorRow {
                task_id: row.task_id,
                state: row.state,
                substate: row.substate,
                mailbox_depth: 0,
                turn: row.turns,
                children: Vec::new(),
                remote: None,
                usage: row.usage.and_then(|u| serde_json::from_value(u).ok()),
            });
        }
        // Issue 19: each open child shows its remote task's state as its stand-in sees it.
        let remotes: std::collections::HashMap<String, harness_workflow::ChildRow> =
            rows.iter().filter_map(|r| r.remote.clone().map(|c| (r.task_id.clone(), c))).collect();
        for row in &mut rows {
            for child in &mut row.children {
                if let Some(remote) = remotes.get(&child.task_id).filter(|_| child.state.is_none()) {
                    child.state = remote.state;
                    child.remote_task_id = remote.remote_task_id.clone();
                }
            }
        }
        Ok(rows)
    }

    /// The task as its workflow sees it, or the store's copy once the workflow is gone
    /// (with the newest `history_length` messages).
    async fn current_task(&self, task_id: &str, history_length: Option<i32>) -> Result<Task, A2AError> {
        // The head says whether the store's copy is the answer; the whole row (with its
        // history) is read only when it is.
        let head = self.store.task_head(task_id).await.map_err(store_error)?;
        let stored = || async {
            Ok::<_, A2AError>(if head.is_some() {
                self.row(task_id, history_length).await?.map(|r| r.task)
            } else {
                None
            })
        };
        if head.as_ref().is_some_and(|h| h.state.is_terminal()) {
            return stored().await?.ok_or_else(|| A2AError::task_not_found(task_id));
        }
        if !self.health.is_up() {
            // Temporal does not answer: the store's copy, as of its newest event.
            return stored().await?.ok_or_else(|| self.health.unavailable("reading the task"));
        }
        match self.temporal.live(task_id).await {
            Ok(Some(live)) => self.with_stored_conversation(live, history_length).await,
            Ok(None) => stored().await?.ok_or_else(|| A2AError::task_not_found(task_id)),
            Err(e) => stored().await?.ok_or(e),
        }
    }

    /// The workflow's live view with the conversation the store has (S13): the head
    /// (status, metadata) is the workflow's; the history is the store's first
    /// `stored_history` messages then the workflow's pending ones, the newest
    /// `history_length` of them; the artifacts are the store's with the workflow's pending
    /// ones over them by id (docs/event-log.md, "Where GetTask's fields come from").
    async fn with_stored_conversation(&self, live: LiveTask, history_length: Option<i32>) -> Result<Task, A2AError> {
        let mut task = live.task;
        let pending = std::mem::take(&mut task.history);
        let wanted = history_length.map(|n| n.max(0) as usize);
        let from_store = wanted.map(|n| n.saturating_sub(pending.len()));
        if from_store != Some(0) && live.stored_history > 0 {
            task.history =
                self.store.history(&task.id, i64::from(live.stored_history), from_store).await.map_err(store_error)?;
        }
        task.history.extend(pending);
        let pending_artifacts = std::mem::take(&mut task.artifacts);
        if let Some(row) = self.store.task(&task.id, Some(0)).await.map_err(store_error)? {
            task.artifacts = row.task.artifacts;
        }
        for artifact in pending_artifacts {
            match task.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
                Some(existing) => *existing = artifact,
                None => task.artifacts.push(artifact),
            }
        }
        Ok(task)
    }
}

/// The `Last-Event-ID` a reconnecting client sent (the SSE `id` of the last event it got, a
/// seq of the task's log), on either binding; a value that is no seq is refused naming it.
fn last_event_id(ctx: &CallContext) -> Result<Option<i64>, A2AError> {
    let Some(value) = ctx.headers.get("last-event-id") else { return Ok(None) };
    let text = value.to_str().unwrap_or_default().trim();
    match text.parse::<i64>() {
        Ok(seq) if seq >= 0 => Ok(Some(seq)),
        _ => Err(A2AError::invalid_params(format!(
            "Last-Event-ID `{text}` is not an event id of this server (the `id` of an event it sent: a number)"
        ))
        .with("field", "Last-Event-ID")),
    }
}

impl HarnessHandler {
    /// SubscribeToTask resumed after the event `after` (issue 20): exactly the events that
    /// follow it in the log, on any instance, until a terminal one; a task that ended is
    /// resumable until its last event was delivered. The response starts at once (an SSE
    /// comment) when nothing follows yet.
    async fn resume(&self, task_id: String, after: i64) -> Result<EventStream, A2AError> {
        let head = self.store.task_head(&task_id).await.map_err(store_error)?;
        let Some(head) = head else { return Err(A2AError::task_not_found(&task_id)) };
        if after > head.last_seq && !head.state.is_terminal() {
            return Err(A2AError::invalid_params(format!(
                "Last-Event-ID {after} is past the end of task {task_id}'s log (its newest event is {})",
                head.last_seq
            ))
            .with("field", "Last-Event-ID"));
        }
        if head.state.is_terminal() && after >= head.last_seq {
            return Err(A2AError::unsupported(format!(
                "{}; every event up to its last ({}) was delivered",
                terminal_refusal(head.state),
                head.last_seq
            ))
            .with("taskId", &task_id));
        }
        let log = self.log_stream(task_id, after, StopAt::Terminal);
        let start = StreamItem::Comment(format!("resumed after event {after}"));
        Ok(futures::stream::once(async move { Ok(start) }).chain(log).boxed())
    }
}
