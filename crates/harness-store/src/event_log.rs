//! The event log: `(task_id, seq)` rows appended idempotently on an event key, with the
//! seq allocated by the store under a per-task row lock (D1; see docs/event-log.md).
//!
//! Why the store allocates: model output is produced inside the `call_model` activity
//! while the workflow may be emitting (a cancel, a control). Allocating under the task
//! row's lock keeps the log gap-free and in commit order whoever writes, and the
//! terminal fence guarantees nothing lands after CANCELED/COMPLETED.

use crate::{Store, StoreError, now};
use a2a_types::{StreamResponse, Task, TaskState};
use sqlx::Row;

/// An event to append.
#[derive(Clone, Debug)]
pub struct NewEvent {
    pub task_id: String,
    /// Idempotency key, unique per task (a retried append returns the first seq).
    pub key: String,
    pub event: StreamResponse,
    /// The task snapshot after this event, stored for reads once the workflow is gone.
    pub snapshot: Option<Task>,
    /// The task queue that owns the task (S19).
    pub task_queue: String,
}

/// The result of an append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub seq: i64,
    /// False when the key was already in the log (a retry).
    pub new: bool,
}

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
    /// Appends an event (D1). Idempotent on `(task_id, key)`; refused with
    /// [`StoreError::Closed`] once the log holds a terminal event.
    pub async fn append(&self, e: &NewEvent) -> Result<Appended, StoreError> {
        let body = serde_json::to_string(&e.event)?;
        let mut tx = self.pool().begin().await?;
        // The first statement writes, so SQLite takes its write lock at once and Postgres
        // locks the task row: appends of one task are serialised from here on.
        sqlx::query(
            "INSERT INTO tasks (task_id, task_queue, updated_at) VALUES ($1, $2, $3) ON CONFLICT (task_id) DO NOTHING",
        )
        .bind(&e.task_id)
        .bind(&e.task_queue)
        .bind(now())
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query("UPDATE tasks SET last_seq = last_seq WHERE task_id = $1 RETURNING last_seq, state")
            .bind(&e.task_id)
            .fetch_one(&mut *tx)
            .await?;
        let last_seq: i64 = row.try_get("last_seq")?;
        let state: String = row.try_get("state")?;
        if let Some(existing) = sqlx::query("SELECT seq FROM events WHERE task_id = $1 AND event_key = $2")
            .bind(&e.task_id)
            .bind(&e.key)
            .fetch_optional(&mut *tx)
            .await?
        {
            tx.commit().await?;
            return Ok(Appended { seq: existing.try_get("seq")?, new: false });
        }
        let state: TaskState = state.parse().unwrap_or_default();
        if state.is_terminal() {
            return Err(StoreError::Closed(state));
        }
        let seq = last_seq + 1;
        let ts = now();
        sqlx::query("INSERT INTO events (task_id, seq, event_key, body, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(&e.task_id)
            .bind(seq)
            .bind(&e.key)
            .bind(&body)
            .bind(&ts)
            .execute(&mut *tx)
            .await?;
        let new_state = e.event.state().unwrap_or(state);
        match &e.snapshot {
            Some(task) => {
                sqlx::query(
                    "UPDATE tasks SET last_seq = $2, state = $3, context_id = $4, status_ts = $5, snapshot = $6, updated_at = $7 WHERE task_id = $1",
                )
                .bind(&e.task_id)
                .bind(seq)
                .bind(new_state.as_str())
                .bind(&task.context_id)
                .bind(task.status.timestamp.clone().unwrap_or_default())
                .bind(serde_json::to_string(task)?)
                .bind(&ts)
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query("UPDATE tasks SET last_seq = $2, state = $3, updated_at = $4 WHERE task_id = $1")
                    .bind(&e.task_id)
                    .bind(seq)
                    .bind(new_state.as_str())
                    .bind(&ts)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        self.notifier().notify(&e.task_id, seq);
        Ok(Appended { seq, new: true })
    }

    /// Events of a task with `seq > after`, in order, at most `limit`.
    pub async fn events_after(&self, task_id: &str, after: i64, limit: i64) -> Result<Vec<LoggedEvent>, StoreError> {
        let rows = sqlx::query("SELECT seq, body FROM events WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3")
            .bind(task_id)
            .bind(after)
            .bind(limit)
            .fetch_all(self.pool())
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
        let Some(r) =
            sqlx::query("SELECT state, context_id, last_seq FROM tasks WHERE task_id = $1 AND snapshot <> ''")
                .bind(task_id)
                .fetch_optional(self.pool())
                .await?
        else {
            return Ok(None);
        };
        let state: String = r.try_get("state")?;
        Ok(Some(TaskHead {
            state: state.parse().unwrap_or_default(),
            context_id: r.try_get("context_id")?,
            last_seq: r.try_get("last_seq")?,
        }))
    }

    /// The stored row of a task, when its log has begun and a snapshot was written.
    pub async fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        let Some(r) = sqlx::query("SELECT snapshot, state, last_seq, task_queue FROM tasks WHERE task_id = $1")
            .bind(task_id)
            .fetch_optional(self.pool())
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
        Ok(Some(TaskRow { task, state, last_seq: r.try_get("last_seq")?, task_queue: r.try_get("task_queue")? }))
    }
}

impl Store {
    /// Ids of every task whose log has begun.
    pub async fn task_ids(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT task_id FROM tasks ORDER BY task_id").fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok(r.try_get("task_id")?)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::{TaskStatus, TaskStatusUpdateEvent};

    fn status(task_id: &str, state: TaskState) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task_id.into(),
            context_id: "c".into(),
            status: TaskStatus { state, ..Default::default() },
            metadata: None,
        })
    }

    fn new(task_id: &str, key: &str, event: StreamResponse) -> NewEvent {
        NewEvent { task_id: task_id.into(), key: key.into(), event, snapshot: None, task_queue: "q".into() }
    }

    async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        (Store::connect(&url).await.unwrap(), dir)
    }

    #[tokio::test]
    async fn appends_are_gap_free_idempotent_and_fenced_after_a_terminal_event() {
        let (store, _dir) = store().await;
        let a = store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap();
        let b = store.append(&new("t", "k2", status("t", TaskState::Working))).await.unwrap();
        let again = store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap();
        assert_eq!((a.seq, b.seq), (1, 2));
        assert_eq!(again, Appended { seq: 1, new: false });
        store.append(&new("t", "k3", status("t", TaskState::Canceled))).await.unwrap();
        let refused = store.append(&new("t", "k4", status("t", TaskState::Working))).await.unwrap_err();
        assert_eq!(refused.to_string(), "the task is in a terminal state (TASK_STATE_CANCELED)");
        let seqs: Vec<i64> = store.events_after("t", 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn concurrent_writers_of_one_task_never_leave_a_gap() {
        let (store, _dir) = store().await;
        let mut handles = Vec::new();
        for w in 0..4 {
            let store = store.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..25 {
                    store.append(&new("t", &format!("w{w}-{i}"), status("t", TaskState::Working))).await.unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let seqs: Vec<i64> = store.events_after("t", 0, 1000).await.unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
    }
}
