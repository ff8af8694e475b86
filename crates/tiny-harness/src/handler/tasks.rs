//! GetTask, CancelTask and SubscribeToTask, and the reads behind them and `/_monitor`, all
//! from the store: no read asks a workflow (issue 20).

use super::access::Access;
use super::stream::StopAt;
use super::{HarnessHandler, store_error};
use a2a_server::{CallContext, EventStream, StreamItem, TaskAnswer};
use a2a_types::{
    A2AError, CancelTaskRequest, ErrorKind, GetTaskRequest, SubscribeToTaskRequest, Task, TaskState, validate,
};
use axum::body::Bytes;
use futures::StreamExt;
use harness_store::TaskRow;
use harness_workflow::terminal_refusal;

impl HarnessHandler {
    /// GetTask (S13).
    pub(super) async fn get(&self, ctx: &CallContext, req: GetTaskRequest) -> Result<TaskAnswer, A2AError> {
        validate::task_id(&req.id, "id")?;
        if let Some(h) = req.history_length {
            validate::history_length(h, "historyLength")?;
        }
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, &req.id, Access::Read).await?;
        // An ended task's whole answer is kept, written, until its log changes (issue 31).
        if let Some(json) = self.closed.get(&req.id) {
            let Some(length) = req.history_length else { return Ok(TaskAnswer::Json(json)) };
            let task: Task = serde_json::from_slice(&json).map_err(A2AError::from_fault)?;
            return Ok(task.with_history_length(Some(length)).into());
        }
        // Only a whole answer is kept; the watch is taken before the read.
        let changes = req.history_length.is_none().then(|| self.store.notifier().subscribe(&req.id));
        let task = self.current_task(&req.id, req.history_length).await?;
        if let Some(changes) = changes
            && task.status.state.is_terminal()
        {
            let json = Bytes::from(serde_json::to_vec(&task).map_err(A2AError::from_fault)?);
            self.closed.put(&req.id, json.clone(), changes);
            return Ok(TaskAnswer::Json(json));
        }
        Ok(task.with_history_length(req.history_length).into())
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
        let log = self.log_to_answer(req.id.clone(), after, StopAt::Terminal);
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

    /// Every task of this queue that has not ended (S20), from the store alone (issue 20):
    /// no workflow is asked, so the monitor of any instance never crosses a message. A task
    /// a turn runs on shows as its mailbox the messages accepted behind the turn.
    pub(crate) async fn monitor_rows(&self) -> Result<Vec<harness_workflow::MonitorRow>, A2AError> {
        let open = self.store.open_task_states(self.task_queue()).await.map_err(store_error)?;
        let open_ids: std::collections::HashSet<String> = open.iter().map(|r| r.task_id.clone()).collect();
        let mut rows = Vec::new();
        for row in open {
            let metadata = current_metadata(row.metadata, row.status_md.as_ref());
            // As GetTask: only a task whose turn runs can have messages queued behind it.
            let mailbox_depth = if !row.state.is_final() {
                self.store.unstored_messages(&row.task_id).await.map_err(store_error)?.len() as u32
            } else {
                0
            };
            let mut children = Vec::new();
            for (task_id, agent) in sub_tasks_of(metadata.as_ref()) {
                // An open child takes its state from its own row below; an ended one's is final.
                let state = if open_ids.contains(&task_id) {
                    None
                } else {
                    self.store.task_head(&task_id).await.map_err(store_error)?.map(|h| h.state)
                };
                children.push(harness_workflow::ChildRow { task_id, agent, state, remote_task_id: None });
            }
            let ext = |key: String| metadata.as_ref().and_then(|m| m.get(&key)).cloned();
            let remote = ext(harness_workflow::sub_task_ext_key()).map(|mark| harness_workflow::ChildRow {
                task_id: row.task_id.clone(),
                agent: mark.get("agent").and_then(|a| a.as_str()).unwrap_or_default().to_string(),
                state: Some(row.state),
                remote_task_id: mark.get("task_id").and_then(|t| t.as_str()).map(String::from),
            });
            rows.push(harness_workflow::MonitorRow {
                task_id: row.task_id,
                state: row.state,
                substate: substate_of(metadata.as_ref()),
                mailbox_depth,
                turn: row.turns,
                children,
                remote,
                usage: ext(harness_workflow::usage_ext_key()).and_then(|u| serde_json::from_value(u).ok()),
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

    /// The task as the store has it, with the newest `history_length` messages (S13), on
    /// any instance and without asking its workflow (issue 20, docs/event-log.md "Where
    /// GetTask's fields come from"): the store is at most one event behind the workflow,
    /// and the messages it accepted that no event stored yet come from their audit rows.
    async fn current_task(&self, task_id: &str, history_length: Option<i32>) -> Result<Task, A2AError> {
        let row = match self.row(task_id, history_length).await? {
            Some(row) => row,
            None => {
                // Accepted, and its workflow has not stored the opening Task yet.
                let history = self.store.unstored_messages(task_id).await.map_err(store_error)?;
                if let Some(first) = history.first() {
                    return Ok(Task {
                        id: task_id.to_string(),
                        context_id: first.context_id.clone(),
                        status: a2a_types::TaskStatus { state: TaskState::Submitted, message: None, timestamp: None },
                        history: history.into_iter().map(Into::into).collect(),
                        ..Default::default()
                    });
                }
                self.first_row(task_id, history_length).await?
            }
        };
        let mut task = row.task;
        task.metadata = current_metadata(task.metadata.take(), row.status_md.as_ref());
        // A final status stored every message its workflow took; a running turn may have
        // some queued behind it.
        if !row.state.is_final() {
            task.history
                .extend(self.store.unstored_messages(task_id).await.map_err(store_error)?.into_iter().map(Into::into));
        }
        Ok(task.with_history_length(history_length))
    }
}

/// How long a read waits for the first event of a task Temporal runs on this queue.
const FIRST_EVENT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl HarnessHandler {
    /// The row of a task whose workflow runs on this queue (the caller's access check found
    /// it in Temporal) but has no stored event yet and took no message through the inbox: a
    /// stand-in a moment after `/delegate` named it. Its first event is waited for, briefly
    /// (woken by its append, on any instance with Postgres); not found after that.
    async fn first_row(&self, task_id: &str, history_length: Option<i32>) -> Result<TaskRow, A2AError> {
        let mut wake = self.store.notifier().subscribe(task_id);
        let deadline = tokio::time::Instant::now() + FIRST_EVENT_WAIT;
        loop {
            if let Some(row) = self.row(task_id, history_length).await? {
                return Ok(row);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(A2AError::task_not_found(task_id));
            }
            let pause = (deadline - now).min(std::time::Duration::from_millis(100));
            let _ = tokio::time::timeout(pause, wake.changed()).await;
        }
    }
}

/// A task's head metadata now: the stored snapshot's (as of its newest final status) with
/// what the newest status event says over it (`status_md`): its substate (a WORKING status
/// has none) and, on a stand-in, the remote task it follows (`{"agent", "task_id"}`; a
/// parent's sub-task result on its status names a `state`, and is no part of its head). A
/// row written before the status's metadata was kept (`None`) shows the snapshot's.
fn current_metadata(
    snapshot: Option<a2a_types::Struct>,
    status_md: Option<&a2a_types::Struct>,
) -> Option<a2a_types::Struct> {
    let Some(newest) = status_md else { return snapshot };
    let mut md = snapshot.unwrap_or_default();
    let status = harness_workflow::status_ext_key();
    md.remove(&status);
    if let Some(v) = newest.get(&status) {
        md.insert(status, v.clone());
    }
    let sub_task = harness_workflow::sub_task_ext_key();
    if let Some(v) = newest.get(&sub_task).filter(|v| v.get("state").is_none()) {
        md.insert(sub_task, v.clone());
    }
    (!md.is_empty()).then_some(md)
}

/// The substate a task's head metadata carries.
fn substate_of(metadata: Option<&a2a_types::Struct>) -> Option<String> {
    let status = metadata?.get(&harness_workflow::status_ext_key())?;
    status.get("substate")?.as_str().map(String::from)
}

/// The sub-tasks a parent's task data lists (`sub_tasks`: `{task_id, agent}`).
fn sub_tasks_of(metadata: Option<&a2a_types::Struct>) -> Vec<(String, String)> {
    let list = metadata.and_then(|m| m.get(&harness_workflow::task_ext_key())).and_then(|d| d.get("sub_tasks"));
    let Some(list) = list.and_then(|l| l.as_array()) else { return Vec::new() };
    list.iter()
        .filter_map(|t| {
            let field = |k: &str| t.get(k).and_then(|v| v.as_str()).map(String::from);
            Some((field("task_id")?, field("agent").unwrap_or_default()))
        })
        .collect()
}

/// The `Last-Event-ID` a reconnecting client sent (the SSE `id` of the last event it got, a
/// seq of the task's log), on either binding; a value that is no seq is refused naming it.
fn last_event_id(ctx: &CallContext) -> Result<Option<(i64, i64)>, A2AError> {
    let Some(value) = ctx.headers.get("last-event-id") else { return Ok(None) };
    let text = value.to_str().unwrap_or_default().trim();
    match super::stream::parse_event_id(text) {
        Some(id) => Ok(Some(id)),
        None => Err(A2AError::invalid_params(format!(
            "Last-Event-ID `{text}` is not an event id of this server (the `id` of an event it sent: a number, with \
             `.<epoch>` after a crash rewrote the log)"
        ))
        .with("field", "Last-Event-ID")),
    }
}

impl HarnessHandler {
    /// SubscribeToTask resumed after the event `after` (issue 20): exactly the events that
    /// follow it in the log, on any instance, until a terminal one; a task that ended is
    /// resumable until its last event was delivered. The response starts at once (an SSE
    /// comment) when nothing follows yet.
    async fn resume(&self, task_id: String, (after, epoch): (i64, i64)) -> Result<EventStream, A2AError> {
        let head = self.store.task_head(&task_id).await.map_err(store_error)?;
        let Some(head) = head else { return Err(A2AError::task_not_found(&task_id)) };
        // Issue 34: ids from before a cut may name events whose bodies were rewritten. One cut
        // since the id: only ids at or past where it started; more: any (only the newest
        // cut's start is kept). Such a resume would skip what the client never saw.
        let rewritten = epoch < head.rewrites && (head.rewrites - epoch > 1 || after >= head.rewrote_from);
        if epoch > head.rewrites || rewritten {
            let why = if rewritten {
                "names an event a crash rewrote since it was sent (the log was cut back and written again from \
                 there): subscribe again without it to read the log from the start"
            } else {
                "is not an event id of this task's log"
            };
            let id = super::stream::event_id(after, epoch);
            return Err(A2AError::invalid_params(format!("Last-Event-ID `{id}` {why}"))
                .with("field", "Last-Event-ID")
                .with("taskId", &task_id));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn md(v: serde_json::Value) -> a2a_types::Struct {
        v.as_object().unwrap().clone().into_iter().collect()
    }

    /// Issue 20: the head a read from the store shows between snapshots.
    #[test]
    fn the_newest_status_sets_the_substate_and_a_stand_ins_remote_task_over_the_snapshot() {
        let (status, sub_task, task) = (
            harness_workflow::status_ext_key(),
            harness_workflow::sub_task_ext_key(),
            harness_workflow::task_ext_key(),
        );
        let parked = md(json!({&status: {"substate": "awaiting-next-message"}, &task: {"goal": "g"}}));
        // A WORKING status: no substate, the task data kept.
        let head = current_metadata(Some(parked.clone()), Some(&md(json!({})))).unwrap();
        assert_eq!(head, md(json!({&task: {"goal": "g"}})));
        assert_eq!(substate_of(Some(&head)), None);
        // A stand-in's mirrored status names its remote task; a parent's sub-task result
        // (with a state) and a command's mark stay on the event.
        let following = md(json!({&sub_task: {"agent": "b", "task_id": "r"}, "command": "x"}));
        let head = current_metadata(Some(parked.clone()), Some(&following)).unwrap();
        assert_eq!(head[&sub_task], json!({"agent": "b", "task_id": "r"}));
        assert!(!head.contains_key("command"));
        let result = md(json!({&status: {"substate": "awaiting-subtasks"}, &sub_task: {"task_id": "s", "state": "x"}}));
        let head = current_metadata(Some(parked.clone()), Some(&result)).unwrap();
        assert!(!head.contains_key(&sub_task));
        assert_eq!(substate_of(Some(&head)).as_deref(), Some("awaiting-subtasks"));
        // A row from before the column: the snapshot's.
        assert_eq!(current_metadata(Some(parked.clone()), None), Some(parked));
        let parent = md(json!({&task: {"sub_tasks": [{"task_id": "s1", "agent": "b"}, {"agent": "no id"}]}}));
        assert_eq!(sub_tasks_of(Some(&parent)), [("s1".to_string(), "b".to_string())]);
    }
}
