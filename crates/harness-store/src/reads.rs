//! Reads of the task rows and the log: a task's head, its stored row, its events from a
//! cursor, and the queries of `/_monitor` and the reconciler.

use crate::sql::TERMINAL_STATES;
use crate::{Artifacts, Store, StoreError};
use a2a_types::{StreamResponse, Task, TaskState};
use sqlx::Row;
use std::sync::LazyLock;

/// An event read back from the log.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedEvent {
    pub seq: i64,
    pub event: StreamResponse,
}

/// The small part of a task's row: enough to check it exists and may take a message.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskHead {
    pub state: TaskState,
    pub context_id: String,
    pub last_seq: i64,
    /// The task queue that owns the task (S19).
    pub task_queue: String,
    /// How often the log was cut back (a reconciler compares it before cutting).
    pub rewrites: i64,
}

/// An open task as `/_monitor` shows it from the store.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenTask {
    pub task_id: String,
    pub state: TaskState,
    pub substate: Option<String>,
    /// Messages its senders sent.
    pub turns: u32,
    /// The tokens its turns used (the head's usage metadata), when its provider counts them.
    pub usage: Option<serde_json::Value>,
}

/// The stored row of a task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub task: Task,
    pub state: TaskState,
    pub last_seq: i64,
    pub task_queue: String,
}

impl Store {
    /// Events of a task with `seq > after`, in order, at most `limit`.
    pub async fn events_after(&self, task_id: &str, after: i64, limit: i64) -> Result<Vec<LoggedEvent>, StoreError> {
        let rows = sqlx::query("SELECT seq, body FROM events WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3")
            .bind(task_id)
            .bind(after)
            .bind(limit)
            .fetch_all(self.reads())
            .await?;
        rows.iter()
            .map(|r| {
                let body: String = r.try_get("body")?;
                Ok(LoggedEvent { seq: r.try_get("seq")?, event: serde_json::from_str(&body)? })
            })
            .collect()
    }

    /// State, context and newest seq of a task whose log has begun (no snapshot parsing).
    pub async fn task_head(&self, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        let Some(r) = sqlx::query(
            "SELECT state, context_id, last_seq, task_queue, rewrites FROM tasks WHERE task_id = $1 AND snapshot <> ''",
        )
        .bind(task_id)
        .fetch_optional(self.reads())
        .await?
        else {
            return Ok(None);
        };
        let state: String = r.try_get("state")?;
        Ok(Some(TaskHead {
            state: state.parse().unwrap_or_default(),
            context_id: r.try_get("context_id")?,
            last_seq: r.try_get("last_seq")?,
            task_queue: r.try_get("task_queue")?,
            rewrites: r.try_get("rewrites")?,
        }))
    }

    /// The stored row of a task, when its log has begun and a snapshot was written: its
    /// head with all its artifacts and the newest `history_length` messages of its history
    /// (all of them when `None`, none for `Some(0)`).
    pub async fn task(&self, task_id: &str, history_length: Option<i32>) -> Result<Option<TaskRow>, StoreError> {
        self.task_with(task_id, history_length, Artifacts::All).await
    }

    /// [`Store::task`] with the artifacts asked for: what an answer to one message carries
    /// of a long conversation stays the same size however long it grows (issue 15).
    pub async fn task_with(
        &self,
        task_id: &str,
        history_length: Option<i32>,
        artifacts: Artifacts,
    ) -> Result<Option<TaskRow>, StoreError> {
        let Some(r) = sqlx::query("SELECT snapshot, state, last_seq, task_queue FROM tasks WHERE task_id = $1")
            .bind(task_id)
            .fetch_optional(self.reads())
            .await?
        else {
            return Ok(None);
        };
        let snapshot: String = r.try_get("snapshot")?;
        if snapshot.is_empty() {
            return Ok(None);
        }
        let state: String = r.try_get("state")?;
        let mut task: Task = serde_json::from_str(&snapshot)?;
        let state: TaskState = state.parse().unwrap_or_default();
        // The snapshot is written with status events; a later event may have moved the state.
        task.status.state = state;
        self.fill_one(&mut task, history_length, artifacts).await?;
        Ok(Some(TaskRow { task, state, last_seq: r.try_get("last_seq")?, task_queue: r.try_get("task_queue")? }))
    }
    /// The task queue that owns a task, when its log has begun (S19).
    pub async fn task_queue_of(&self, task_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT task_queue FROM tasks WHERE task_id = $1")
            .bind(task_id)
            .fetch_optional(self.reads())
            .await?;
        row.map(|r| r.try_get("task_queue")).transpose().map_err(Into::into)
    }

    /// The tasks of a queue whose log has not ended, newest status first (at most 1000), with
    /// their state, substate (the status extension's, from the stored head) and how many
    /// messages their senders sent (turns taken, for a parked task): what `/_monitor` shows
    /// without asking Temporal.
    pub async fn open_task_states(&self, task_queue: &str) -> Result<Vec<OpenTask>, StoreError> {
        static OPEN: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT t.task_id, t.state, t.snapshot, t.user_messages AS turns FROM tasks t WHERE t.task_queue = \
                 $1 AND t.snapshot <> '' AND t.state NOT IN ({}) ORDER BY t.status_ts DESC LIMIT 1000",
                *TERMINAL_STATES
            )
        });
        let rows = sqlx::query(&OPEN).bind(task_queue).fetch_all(self.reads()).await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state")?;
                let snapshot: String = r.try_get("snapshot")?;
                let head: Task = serde_json::from_str(&snapshot)?;
                let ext = |name: &str| {
                    let suffix = format!("/{name}");
                    head.metadata.as_ref().and_then(|m| m.iter().find(|(k, _)| k.ends_with(&suffix)).map(|(_, v)| v))
                };
                let substate = ext("status").and_then(|v| v.get("substate")).and_then(|v| v.as_str()).map(String::from);
                let usage = ext("usage").cloned();
                let turns: i64 = r.try_get("turns")?;
                Ok(OpenTask {
                    task_id: r.try_get("task_id")?,
                    state: state.parse().unwrap_or_default(),
                    substate,
                    turns: u32::try_from(turns).unwrap_or(u32::MAX),
                    usage,
                })
            })
            .collect()
    }

    /// Open tasks of a queue whose row changed within `window` before the queue's newest
    /// change (at most 1000, newest first): the only ones a crash can have left an
    /// uncommitted tail on, since a workflow task appends only while it runs (the reconciler,
    /// docs/event-log.md).
    pub async fn recently_changed_open_tasks(
        &self,
        task_queue: &str,
        window: std::time::Duration,
    ) -> Result<Vec<String>, StoreError> {
        let newest = sqlx::query("SELECT MAX(updated_at) AS newest FROM tasks WHERE task_queue = $1")
            .bind(task_queue)
            .fetch_one(self.reads())
            .await?;
        let Some(newest) = newest.try_get::<Option<String>, _>("newest")? else { return Ok(Vec::new()) };
        let since = chrono::DateTime::parse_from_rfc3339(&newest)
            .map(|t| t.with_timezone(&chrono::Utc) - chrono::Duration::from_std(window).unwrap_or_default())
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default();
        static RECENT: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT task_id FROM tasks WHERE task_queue = $1 AND updated_at >= $2 AND snapshot <> '' AND state NOT \
                 IN ({}) ORDER BY updated_at DESC LIMIT 1000",
                *TERMINAL_STATES
            )
        });
        let rows = sqlx::query(&RECENT).bind(task_queue).bind(since).fetch_all(self.reads()).await?;
        rows.iter().map(|r| Ok(r.try_get("task_id")?)).collect()
    }

    /// Ids of every task whose log has begun.
    pub async fn task_ids(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT task_id FROM tasks ORDER BY task_id").fetch_all(self.reads()).await?;
        rows.iter().map(|r| Ok(r.try_get("task_id")?)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(the_reconciler_looks_at_open_tasks_that_changed_last, recently_changed);

    async fn recently_changed(store: Store) {
        let opened = |t: &str| {
            let mut e = new(t, "wf-1", status(t, TaskState::InputRequired));
            e.snapshot = Some(Task { id: t.into(), context_id: "c".into(), ..Default::default() });
            e
        };
        assert!(store.recently_changed_open_tasks("q", Duration::from_secs(60)).await.unwrap().is_empty());
        store.append(&opened("old")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        store.append(&opened("ended")).await.unwrap();
        store.append(&new("ended", "wf-2", status("ended", TaskState::Completed))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        store.append(&opened("new")).await.unwrap();
        let recent = |secs| store.recently_changed_open_tasks("q", Duration::from_secs(secs));
        assert_eq!(recent(0).await.unwrap(), vec!["new"]);
        assert_eq!(recent(60).await.unwrap(), vec!["new", "old"], "an ended task is not looked at");
        assert!(store.recently_changed_open_tasks("other", Duration::from_secs(60)).await.unwrap().is_empty());
    }
}
