//! The event log: `(task_id, seq)` rows appended idempotently on an event key, with the
//! seq allocated by the store under a per-task row lock (D1; see docs/event-log.md).
//!
//! Why the store allocates: model output is produced inside the `call_model` activity
//! while the workflow may be emitting (a cancel, a control). Allocating under the task
//! row's lock keeps the log gap-free and in commit order whoever writes, and the
//! terminal fence guarantees nothing lands after CANCELED/COMPLETED.

use crate::history::Changes;
use crate::{Store, StoreError, now};
use a2a_types::{Artifact, Message, StreamResponse, Task, TaskState};
use sqlx::{AnyConnection, Row};

/// An event to append.
#[derive(Clone, Debug)]
pub struct NewEvent {
    pub task_id: String,
    /// Idempotency key, unique per task (a retried append returns the first seq).
    pub key: String,
    pub event: StreamResponse,
    /// The task after this event, stored for reads once the workflow is gone: its head
    /// (id, context, status, metadata) in the task's row; a history or artifacts it carries
    /// are stored as if given below (the history from index 0).
    pub snapshot: Option<Task>,
    /// Messages added to the task's history since the event before, the first at index
    /// `history_from`.
    pub history: Vec<Message>,
    pub history_from: i64,
    /// Artifacts added or changed since the event before, each with its place in the task.
    pub artifacts: Vec<(i64, Artifact)>,
    /// The task queue that owns the task (S19).
    pub task_queue: String,
    /// What the writer knows the store held before this event (the workflow's own events;
    /// `None` for model chunks). When this event replaces an uncommitted one (its key is
    /// there with other content), the history and artifact rows past these counts were
    /// written by events the workflow never committed, and go with them.
    pub stored_before: Option<Stored>,
}

/// How much of a task's history and artifacts the store holds (counts from index 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    pub history: i64,
    pub artifacts: i64,
}

impl NewEvent {
    /// An event that changes nothing but the log (and the status it carries).
    pub fn new(
        task_id: impl Into<String>,
        key: impl Into<String>,
        event: StreamResponse,
        task_queue: impl Into<String>,
    ) -> Self {
        Self {
            task_id: task_id.into(),
            key: key.into(),
            event,
            snapshot: None,
            history: Vec::new(),
            history_from: 0,
            artifacts: Vec::new(),
            task_queue: task_queue.into(),
            stored_before: None,
        }
    }
}

/// The result of an append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub seq: i64,
    /// False when the key was already in the log (a retry).
    pub new: bool,
    /// Whether this event went to the push outbox: a Task or status event of a task that
    /// had push configs when it was appended (read in the append's transaction), so push
    /// delivery reads them only then (S14). False for a retry.
    pub pushes: bool,
    /// The key was there with other content: the log was cut back to before it and this
    /// event took its place (docs/event-log.md).
    pub rewrote: bool,
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
}

/// The stored row of a task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub task: Task,
    pub state: TaskState,
    pub last_seq: i64,
    pub task_queue: String,
}

/// The task row's update by an appended event, then `$tail`: parameters $2..$7 are
/// [`Fields`] in order, and an empty value keeps the stored one (an event updates only what
/// it knows).
macro_rules! update_row {
    ($($tail:tt)+) => {
        concat!(
            "UPDATE tasks SET state = CASE WHEN $2 = '' THEN state ELSE $2 END, updated_at = $3, ",
            "status = CASE WHEN $4 = '' THEN status ELSE $4 END, ",
            "status_ts = CASE WHEN $5 = '' THEN status_ts ELSE $5 END, ",
            "snapshot = CASE WHEN $6 = '' THEN snapshot ELSE $6 END, ",
            "context_id = CASE WHEN $7 = '' THEN context_id ELSE $7 END, ",
            $($tail)+
        )
    };
}

/// The terminal states (`TaskState::is_terminal`) as an SQL list, for `concat!`.
macro_rules! terminal_states {
    () => {
        "'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'"
    };
}

/// How many push configs the task $1 has, as `pushes` (a RETURNING column).
macro_rules! pushes {
    () => {
        "(SELECT COUNT(*) FROM push_configs WHERE push_configs.task_id = $1) AS pushes"
    };
}

/// Takes the next seq of an open task (the fence: nothing is appended after a terminal
/// state) whose log lacks the key $8.
const FAST_UPDATE: &str = update_row!(
    "last_seq = last_seq + 1 WHERE task_id = $1 \
     AND state NOT IN (",
    terminal_states!(),
    ") \
     AND NOT EXISTS (SELECT 1 FROM events WHERE task_id = $1 AND event_key = $8) RETURNING last_seq, ",
    pushes!()
);
/// Sets the seq $8.
const SET_SEQ: &str = update_row!("last_seq = $8 WHERE task_id = $1");

/// What an event writes, serialised before the writer is taken.
struct Fields {
    body: String,
    /// The event's state, or "" when it carries none (an artifact).
    state: &'static str,
    ts: String,
    /// The status of a status event (or of the Task event), kept apart from the snapshot
    /// so reads between snapshots (ListTasks) show the current status.
    status: String,
    status_ts: String,
    /// The snapshot's head (no history, no artifacts: those are `changes`).
    snapshot: String,
    context_id: String,
    changes: Changes,
    /// The Task or a status event: it goes to the task's push configs (S14).
    pushed: bool,
    stored_before: Option<Stored>,
}

impl Fields {
    fn of(e: &NewEvent) -> Result<Self, StoreError> {
        let ts = now();
        let status = match &e.event {
            StreamResponse::Task(t) => Some(&t.status),
            StreamResponse::StatusUpdate(u) => Some(&u.status),
            _ => None,
        };
        let (status, status_ts) = match status {
            Some(st) => (serde_json::to_string(st)?, st.timestamp.clone().unwrap_or_else(|| ts.clone())),
            None => (String::new(), String::new()),
        };
        Ok(Self {
            body: serde_json::to_string(&e.event)?,
            state: e.event.state().map(|s| s.as_str()).unwrap_or(""),
            ts,
            status,
            status_ts,
            snapshot: e.snapshot.as_ref().map(|t| serde_json::to_string(&t.head())).transpose()?.unwrap_or_default(),
            context_id: e.snapshot.as_ref().map(|t| t.context_id.clone()).unwrap_or_default(),
            changes: Changes::of(e)?,
            pushed: matches!(e.event, StreamResponse::Task(_) | StreamResponse::StatusUpdate(_)),
            stored_before: e.stored_before,
        })
    }

    /// What an appended event writes after its own row: the history and artifact rows it
    /// carries, and its push outbox rows when it is pushed and the task has `configs` (S14).
    async fn write_rest(
        &self,
        conn: &mut AnyConnection,
        task_id: &str,
        seq: i64,
        configs: i64,
    ) -> Result<Appended, StoreError> {
        self.changes.write(conn, task_id).await?;
        let pushes = configs > 0 && self.pushed;
        if pushes {
            crate::push::to_outbox(conn, task_id, seq).await?;
        }
        Ok(Appended { seq, new: true, pushes, rewrote: false })
    }
}

/// The append on a connection inside a transaction. The task's row is updated first, so
/// Postgres holds the row's lock (SQLite its write lock) from there to the commit: appends
/// of one task are serialised and the log stays gap-free.
async fn append(
    conn: &mut AnyConnection,
    task_id: String,
    key: String,
    task_queue: String,
    fields: Fields,
) -> Result<Appended, StoreError> {
    let update_row = |sql: &'static str| {
        sqlx::query(sql)
            .bind(task_id.as_str())
            .bind(fields.state)
            .bind(fields.ts.as_str())
            .bind(fields.status.as_str())
            .bind(fields.status_ts.as_str())
            .bind(fields.snapshot.as_str())
            .bind(fields.context_id.as_str())
    };
    let insert_event = |seq: i64| {
        sqlx::query("INSERT INTO events (task_id, seq, event_key, body, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(task_id.as_str())
            .bind(seq)
            .bind(key.as_str())
            .bind(fields.body.as_str())
            .bind(fields.ts.as_str())
    };
    // The common case in two statements: an open task whose log lacks this key takes the
    // next seq and what this event knows (parameter $8 is the key).
    let taken = update_row(FAST_UPDATE).bind(key.as_str()).fetch_optional(&mut *conn).await?;
    if let Some(row) = taken {
        let seq: i64 = row.try_get("last_seq")?;
        let configs: i64 = row.try_get("pushes")?;
        insert_event(seq).execute(&mut *conn).await?;
        return fields.write_rest(conn, &task_id, seq, configs).await;
    }
    // Otherwise nothing was written yet: a task's first event, a retried key, or a closed task.
    sqlx::query(
        "INSERT INTO tasks (task_id, task_queue, updated_at) VALUES ($1, $2, $3) ON CONFLICT (task_id) DO NOTHING",
    )
    .bind(task_id.as_str())
    .bind(task_queue.as_str())
    .bind(fields.ts.as_str())
    .execute(&mut *conn)
    .await?;
    let row = sqlx::query(concat!(
        "UPDATE tasks SET last_seq = last_seq WHERE task_id = $1 RETURNING last_seq, state, ",
        pushes!()
    ))
    .bind(task_id.as_str())
    .fetch_one(&mut *conn)
    .await?;
    let last_seq: i64 = row.try_get("last_seq")?;
    let state: String = row.try_get("state")?;
    let configs: i64 = row.try_get("pushes")?;
    if let Some(existing) = sqlx::query("SELECT seq, body FROM events WHERE task_id = $1 AND event_key = $2")
        .bind(task_id.as_str())
        .bind(key.as_str())
        .fetch_optional(&mut *conn)
        .await?
    {
        let seq: i64 = existing.try_get("seq")?;
        let body: String = existing.try_get("body")?;
        if body == fields.body {
            // A retried append: the first one's seq, nothing written twice.
            return Ok(Appended { seq, new: false, pushes: false, rewrote: false });
        }
        // The key is there with other content: the event at `seq` and everything after it
        // were written by a workflow task that never committed (its retry decided
        // otherwise), or by a model call that was retried. This event takes its place.
        rewind(conn, &task_id, seq, fields.stored_before).await?;
        insert_event(seq).execute(&mut *conn).await?;
        update_row(SET_SEQ).bind(seq).execute(&mut *conn).await?;
        if fields.state.is_empty() {
            // A model chunk replaced: the turn is running, whatever the cut-off tail said.
            sqlx::query(concat!(
                "UPDATE tasks SET state = 'TASK_STATE_WORKING' WHERE task_id = $1 AND state IN (",
                terminal_states!(),
                ")"
            ))
            .bind(task_id.as_str())
            .execute(&mut *conn)
            .await?;
        }
        let appended = fields.write_rest(conn, &task_id, seq, configs).await?;
        return Ok(Appended { rewrote: true, ..appended });
    }
    let state: TaskState = state.parse().unwrap_or_default();
    if state.is_terminal() {
        return Err(StoreError::Closed(state));
    }
    let seq = last_seq + 1;
    insert_event(seq).execute(&mut *conn).await?;
    update_row(SET_SEQ).bind(seq).execute(&mut *conn).await?;
    fields.write_rest(conn, &task_id, seq, configs).await
}

/// Cuts a task's log back to before `from`: its events from `from` on, their push
/// deliveries, and (when the writer said what it knew stored) the history and artifact rows
/// past those counts. Counts the cut, so readers past it can tell (docs/event-log.md).
async fn rewind(conn: &mut AnyConnection, task_id: &str, from: i64, kept: Option<Stored>) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM events WHERE task_id = $1 AND seq >= $2",
        "DELETE FROM push_outbox WHERE task_id = $1 AND seq >= $2",
    ] {
        sqlx::query(sql).bind(task_id).bind(from).execute(&mut *conn).await?;
    }
    if let Some(kept) = kept {
        for (sql, n) in [
            ("DELETE FROM task_history WHERE task_id = $1 AND idx >= $2", kept.history),
            ("DELETE FROM task_artifacts WHERE task_id = $1 AND idx >= $2", kept.artifacts),
        ] {
            sqlx::query(sql).bind(task_id).bind(n).execute(&mut *conn).await?;
        }
    }
    sqlx::query("UPDATE tasks SET last_seq = $2 - 1, rewrites = rewrites + 1, rewrote_from = $2 WHERE task_id = $1")
        .bind(task_id)
        .bind(from)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl Store {
    /// Appends an event (D1). Idempotent on `(task_id, key)`; refused with
    /// [`StoreError::Closed`] once the log holds a terminal event. Readers are woken once
    /// it is committed.
    pub async fn append(&self, e: &NewEvent) -> Result<Appended, StoreError> {
        let fields = Fields::of(e)?;
        let (task_id, key, task_queue) = (e.task_id.clone(), e.key.clone(), e.task_queue.clone());
        let appended =
            self.write(Box::new(move |conn| Box::pin(append(conn, task_id, key, task_queue, fields)))).await?;
        if appended.rewrote {
            self.notifier().rewound(&e.task_id, appended.seq);
        } else if appended.new {
            self.notifier().notify(&e.task_id, appended.seq);
        }
        Ok(appended)
    }

    /// Cuts a task's log back to what its workflow committed (the reconciler after a crash,
    /// docs/event-log.md): the events past `keep_through`, the history and artifact rows past
    /// `kept`, and the head (state, status, snapshot) set to `head`, the workflow's own.
    /// Only when the log is still as the caller read it (`last_seq` and `rewrites` of
    /// `seen`): an append since then (which replaces what it finds in its way itself) wins.
    /// Returns whether it cut.
    pub async fn cut_back(
        &self,
        task_id: &str,
        seen: &TaskHead,
        keep_through: i64,
        kept: Stored,
        head: &Task,
    ) -> Result<bool, StoreError> {
        let (task_id, last_seq, rewrites) = (task_id.to_string(), seen.last_seq, seen.rewrites);
        let status = serde_json::to_string(&head.status)?;
        let status_ts = head.status.timestamp.clone().unwrap_or_default();
        let snapshot = serde_json::to_string(&head.head())?;
        let state = head.status.state.as_str();
        let notify_id = task_id.clone();
        let cut = self
            .write(Box::new(move |conn| {
                Box::pin(async move {
                    let still = sqlx::query(
                        "UPDATE tasks SET updated_at = updated_at WHERE task_id = $1 AND last_seq = $2 AND rewrites = $3",
                    )
                    .bind(task_id.as_str())
                    .bind(last_seq)
                    .bind(rewrites)
                    .execute(&mut *conn)
                    .await?;
                    if still.rows_affected() == 0 || last_seq <= keep_through {
                        return Ok(false);
                    }
                    rewind(conn, &task_id, keep_through + 1, Some(kept)).await?;
                    sqlx::query(
                        "UPDATE tasks SET state = $2, status = $3, status_ts = CASE WHEN $4 = '' THEN status_ts ELSE $4 END, \
                         snapshot = $5 WHERE task_id = $1",
                    )
                    .bind(task_id.as_str())
                    .bind(state)
                    .bind(status)
                    .bind(status_ts)
                    .bind(snapshot)
                    .execute(&mut *conn)
                    .await?;
                    Ok(true)
                })
            }))
            .await?;
        if cut {
            self.notifier().rewound(&notify_id, keep_through + 1);
        }
        Ok(cut)
    }

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
        self.fill(std::slice::from_mut(&mut task), history_length, true).await?;
        Ok(Some(TaskRow { task, state, last_seq: r.try_get("last_seq")?, task_queue: r.try_get("task_queue")? }))
    }
}

/// A ListTasks query over the stored tasks of one task queue (S13, S19).
#[derive(Clone, Debug, Default)]
pub struct TaskQuery {
    pub task_queue: String,
    /// Only this context, when not empty.
    pub context_id: String,
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this (normalised RFC 3339).
    pub since: Option<String>,
    /// Resume after this `(status_ts, task_id)`: the previous page's last row.
    pub after: Option<(String, String)>,
    /// Only tasks this participant is on, when given (S13).
    pub participant: Option<String>,
    pub limit: i64,
    /// The newest messages of each task's history to include (all when `None`).
    pub history_length: Option<i32>,
    pub include_artifacts: bool,
}

/// One page of tasks, newest status first.
#[derive(Clone, Debug, Default)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    /// Matches before paging.
    pub total: i64,
    /// Where the next page starts, when there is one.
    pub next: Option<(String, String)>,
}

impl Store {
    /// Tasks of a queue matching the filters, newest status timestamp first (ties by id,
    /// descending), with the current status from the status column.
    pub async fn list_tasks(&self, q: &TaskQuery) -> Result<TaskPage, StoreError> {
        let mut filter = String::from("task_queue = $1 AND snapshot <> ''");
        let mut binds: Vec<String> = vec![q.task_queue.clone()];
        let mut push = |cond: &str, values: &[&str], filter: &mut String| {
            let mut c = cond.to_string();
            for v in values {
                binds.push(v.to_string());
                c = c.replacen('?', &format!("${}", binds.len()), 1);
            }
            filter.push_str(" AND ");
            filter.push_str(&c);
        };
        if !q.context_id.is_empty() {
            push("context_id = ?", &[&q.context_id], &mut filter);
        }
        if let Some(state) = q.state {
            push("state = ?", &[state.as_str()], &mut filter);
        }
        if let Some(since) = &q.since {
            push("status_ts >= ?", &[since], &mut filter);
        }
        if let Some(p) = &q.participant {
            push(
                "EXISTS (SELECT 1 FROM task_participants p WHERE p.task_id = tasks.task_id AND p.participant_id = ?)",
                &[p],
                &mut filter,
            );
        }
        let count_sql = format!("SELECT COUNT(*) AS n FROM tasks WHERE {filter}");
        let mut page_filter = filter.clone();
        if let Some((ts, id)) = &q.after {
            push("(status_ts < ? OR (status_ts = ? AND task_id < ?))", &[ts, ts, id], &mut page_filter);
        }
        let page_sql = format!(
            "SELECT task_id, snapshot, status, status_ts, state FROM tasks WHERE {page_filter} \
             ORDER BY status_ts DESC, task_id DESC LIMIT {}",
            q.limit + 1
        );
        let count_binds = binds.len() - if q.after.is_some() { 3 } else { 0 };
        let mut count = sqlx::query(&count_sql);
        for b in &binds[..count_binds] {
            count = count.bind(b);
        }
        let total: i64 = count.fetch_one(self.reads()).await?.try_get("n")?;
        let mut page = sqlx::query(&page_sql);
        for b in &binds {
            page = page.bind(b);
        }
        let rows = page.fetch_all(self.reads()).await?;
        let mut tasks = Vec::new();
        let mut next = None;
        for (i, r) in rows.iter().enumerate() {
            if i as i64 == q.limit {
                break;
            }
            let snapshot: String = r.try_get("snapshot")?;
            let status: String = r.try_get("status")?;
            let state: String = r.try_get("state")?;
            let mut task: Task = serde_json::from_str(&snapshot)?;
            if !status.is_empty() {
                task.status = serde_json::from_str(&status)?;
            }
            task.status.state = state.parse().unwrap_or(task.status.state);
            if i as i64 == q.limit - 1 && rows.len() as i64 > q.limit {
                next = Some((r.try_get("status_ts")?, r.try_get("task_id")?));
            }
            tasks.push(task);
        }
        self.fill(&mut tasks, q.history_length, q.include_artifacts).await?;
        Ok(TaskPage { tasks, total, next })
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
        let rows = sqlx::query(concat!(
            "SELECT t.task_id, t.state, t.snapshot, (SELECT COUNT(*) FROM task_history h WHERE h.task_id = t.task_id \
             AND h.message LIKE '%\"role\":\"ROLE_USER\"%') AS turns FROM tasks t WHERE t.task_queue = $1 AND t.snapshot <> '' \
             AND t.state NOT IN (",
            terminal_states!(),
            ") ORDER BY t.status_ts DESC LIMIT 1000"
        ))
        .bind(task_queue)
        .fetch_all(self.reads())
        .await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state")?;
                let snapshot: String = r.try_get("snapshot")?;
                let head: Task = serde_json::from_str(&snapshot)?;
                let substate = head
                    .metadata
                    .as_ref()
                    .and_then(|m| m.iter().find(|(k, _)| k.ends_with("/status")).map(|(_, v)| v))
                    .and_then(|v| v.get("substate"))
                    .and_then(|v| v.as_str())
                    .map(String::from);
                let turns: i64 = r.try_get("turns")?;
                Ok(OpenTask {
                    task_id: r.try_get("task_id")?,
                    state: state.parse().unwrap_or_default(),
                    substate,
                    turns: u32::try_from(turns).unwrap_or(u32::MAX),
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
        let rows = sqlx::query(concat!(
            "SELECT task_id FROM tasks WHERE task_queue = $1 AND updated_at >= $2 AND snapshot <> '' AND state NOT IN (",
            terminal_states!(),
            ") ORDER BY updated_at DESC LIMIT 1000"
        ))
        .bind(task_queue)
        .bind(since)
        .fetch_all(self.reads())
        .await?;
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
    use a2a_types::{TaskStatus, TaskStatusUpdateEvent};
    use std::time::Duration;

    fn status(task_id: &str, state: TaskState) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task_id.into(),
            context_id: "c".into(),
            status: TaskStatus { state, ..Default::default() },
            metadata: None,
        })
    }

    fn new(task_id: &str, key: &str, event: StreamResponse) -> NewEvent {
        NewEvent::new(task_id, key, event, "q")
    }

    async fn sqlite() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        (Store::connect(&url).await.unwrap(), dir)
    }

    async fn postgres() -> Store {
        let url = crate::testing::fresh_postgres_database().await.unwrap();
        let store = Store::connect(&url).await.unwrap();
        assert_eq!(store.backend(), crate::Backend::Postgres);
        store
    }

    /// Each test runs on both stores (D2).
    macro_rules! on_both {
        ($name:ident, $body:ident) => {
            mod $name {
                #[tokio::test]
                async fn on_sqlite() {
                    let (store, _dir) = super::sqlite().await;
                    super::$body(store).await;
                }
                #[tokio::test]
                async fn on_postgres() {
                    super::$body(super::postgres().await).await;
                }
            }
        };
    }

    on_both!(appends_are_gap_free_idempotent_and_fenced_after_a_terminal_event, gap_free_idempotent_fenced);
    on_both!(concurrent_writers_of_one_task_never_leave_a_gap, concurrent_writers);
    on_both!(every_terminal_state_fences_the_log_and_a_retried_key_still_answers, terminal_fences);
    on_both!(a_failed_write_is_reported_and_the_writer_goes_on, failed_write);
    on_both!(list_tasks_pages_newest_first_filters_and_shows_the_current_status, list_tasks_paging);
    on_both!(push_configs_and_participants_round_trip, push_and_participants);
    on_both!(a_new_tasks_audit_row_and_participants_are_written_together_or_not_at_all, new_task_inbox);
    on_both!(an_append_says_whether_the_task_has_push_configs, append_reports_push_configs);
    on_both!(pushed_events_wait_in_the_outbox_until_done_and_an_unheld_one_is_taken_over, push_outbox);
    on_both!(history_and_artifacts_are_stored_one_row_each_and_read_back_whole, history_rows);
    on_both!(snapshots_stored_whole_by_an_older_version_are_split_once, split_chore);
    on_both!(an_event_that_replaces_an_uncommitted_one_cuts_the_log_and_its_rows_back, replaces_uncommitted);
    on_both!(a_reconciler_cuts_back_only_a_log_still_as_it_read_it, cut_back_when_unchanged);
    on_both!(the_reconciler_looks_at_open_tasks_that_changed_last, recently_changed);
    on_both!(a_retried_first_message_finds_the_task_its_first_attempt_opened, retried_first_message);

    fn message(id: &str) -> a2a_types::Message {
        a2a_types::Message::agent_text(id, id)
    }

    fn artifact(id: &str, text: &str) -> Artifact {
        Artifact { artifact_id: id.into(), parts: vec![a2a_types::Part::text(text)], ..Default::default() }
    }

    fn ids(history: &[a2a_types::Message]) -> Vec<&str> {
        history.iter().map(|m| m.message_id.as_str()).collect()
    }

    async fn raw_snapshot(store: &Store, task_id: &str) -> String {
        sqlx::query("SELECT snapshot FROM tasks WHERE task_id = $1")
            .bind(task_id)
            .fetch_one(store.reads())
            .await
            .unwrap()
            .try_get("snapshot")
            .unwrap()
    }

    async fn history_rows(store: Store) {
        // The Task event carries a whole task: its one message counts from index 0.
        let mut open = opened("t", "c", "2026-01-01T00:00:01.000Z", "q");
        open.snapshot.as_mut().unwrap().history.push(message("m0"));
        store.append(&open).await.unwrap();
        let turn = |key: &str, from: i64, history: Vec<a2a_types::Message>, artifacts: Vec<(i64, Artifact)>| NewEvent {
            history,
            history_from: from,
            artifacts,
            ..new("t", key, status("t", TaskState::Working))
        };
        store.append(&turn("w1", 1, vec![message("m1")], vec![])).await.unwrap();
        store.append(&turn("f1", 2, vec![message("m2")], vec![(0, artifact("a", "one"))])).await.unwrap();
        // A retried event writes nothing twice; an artifact changed later keeps its place.
        let again = store.append(&turn("f1", 2, vec![message("m2")], vec![(0, artifact("a", "one"))])).await.unwrap();
        assert!(!again.new);
        let changed = vec![(1, artifact("b", "two")), (0, artifact("a", "one, then more"))];
        store.append(&turn("f2", 3, vec![message("m3")], changed)).await.unwrap();

        let whole = store.task("t", None).await.unwrap().unwrap().task;
        assert_eq!(ids(&whole.history), ["m0", "m1", "m2", "m3"]);
        assert_eq!(whole.artifacts, vec![artifact("a", "one, then more"), artifact("b", "two")]);
        assert_eq!(ids(&store.task("t", Some(2)).await.unwrap().unwrap().task.history), ["m2", "m3"]);
        assert!(store.task("t", Some(0)).await.unwrap().unwrap().task.history.is_empty());
        let raw = raw_snapshot(&store, "t").await;
        assert!(!raw.contains("m0") && !raw.contains("one"), "the row keeps the task's head only: {raw}");
        // What a model turn reads of the conversation before index 3.
        assert_eq!(ids(&store.history("t", 3, None).await.unwrap()), ["m0", "m1", "m2"]);
        assert_eq!(ids(&store.history("t", 3, Some(1)).await.unwrap()), ["m2"]);

        let mut other = opened("u", "c", "2026-01-01T00:00:00.000Z", "q");
        other.snapshot.as_mut().unwrap().history.push(message("u0"));
        store.append(&other).await.unwrap();
        let q = TaskQuery { task_queue: "q".into(), limit: 10, history_length: Some(1), ..Default::default() };
        let page = store.list_tasks(&q).await.unwrap();
        let listed: Vec<(&str, Vec<&str>, usize)> =
            page.tasks.iter().map(|t| (t.id.as_str(), ids(&t.history), t.artifacts.len())).collect();
        assert_eq!(listed, [("t", vec!["m3"], 0), ("u", vec!["u0"], 0)], "newest messages, no artifacts unless asked");
        let all = TaskQuery { history_length: None, include_artifacts: true, ..q };
        let page = store.list_tasks(&all).await.unwrap();
        assert_eq!((ids(&page.tasks[0].history).len(), page.tasks[0].artifacts.len()), (4, 2));
    }

    async fn split_chore(store: Store) {
        // A row as an older version stored it: the whole task in its snapshot.
        let task = Task {
            id: "old".into(),
            context_id: "c".into(),
            status: TaskStatus { state: TaskState::InputRequired, ..Default::default() },
            history: vec![message("m0"), message("m1")],
            artifacts: vec![artifact("reply-1", "hello")],
            metadata: None,
        };
        sqlx::query(
            "INSERT INTO tasks (task_id, context_id, state, task_queue, snapshot, last_seq) \
             VALUES ('old', 'c', 'TASK_STATE_INPUT_REQUIRED', 'q', $1, 3)",
        )
        .bind(serde_json::to_string(&task).unwrap())
        .execute(store.reads())
        .await
        .unwrap();
        sqlx::query("INSERT INTO store_chores (chore) VALUES ('split-snapshots')")
            .execute(store.reads())
            .await
            .unwrap();
        store.run_chores().await.unwrap();
        assert_eq!(store.task("old", None).await.unwrap().unwrap().task, task, "nothing was lost");
        assert_eq!(raw_snapshot(&store, "old").await, serde_json::to_string(&task.head()).unwrap());
        let left = sqlx::query("SELECT chore FROM store_chores").fetch_all(store.reads()).await.unwrap();
        assert!(left.is_empty(), "the chore runs once");
        // The next message goes on from index 2.
        let next = NewEvent {
            history: vec![message("m2")],
            history_from: 2,
            ..new("old", "w", status("old", TaskState::Working))
        };
        store.append(&next).await.unwrap();
        assert_eq!(ids(&store.task("old", None).await.unwrap().unwrap().task.history), ["m0", "m1", "m2"]);
    }

    async fn push_and_participants(store: Store) {
        let row =
            crate::PushRow { task_id: "t".into(), config_id: "c".into(), url: "https://h".into(), sealed: "s1".into() };
        store.put_push_config(&row).await.unwrap();
        store.put_push_config(&crate::PushRow { sealed: "s2".into(), ..row.clone() }).await.unwrap();
        assert_eq!(store.push_config("t", "c").await.unwrap().unwrap().sealed, "s2", "a put replaces");
        assert_eq!(store.push_configs("t").await.unwrap().len(), 1);
        assert!(store.delete_push_config("t", "c").await.unwrap());
        assert!(!store.delete_push_config("t", "c").await.unwrap(), "deleting again is not an error");
        store.add_participants("t", &[("alice".into(), "reporter".into())]).await.unwrap();
        store.add_participants("t", &[("alice".into(), "watcher".into())]).await.unwrap();
        assert_eq!(store.participant_role("t", "alice").await.unwrap().as_deref(), Some("reporter"));
        assert_eq!(store.participant_role("t", "bob").await.unwrap(), None);
    }

    async fn append_reports_push_configs(store: Store) {
        let config = |task: &str| crate::PushRow {
            task_id: task.into(),
            config_id: "c".into(),
            url: "https://hooks.example.com/a2a".into(),
            sealed: "s".into(),
        };
        // A task's first event (its row does not exist yet), without and with a config
        // stored before it (a config sent with the task's first message).
        let plain = store.append(&new("plain", "k1", status("plain", TaskState::Working))).await.unwrap();
        assert!(!plain.pushes, "a task without push configs");
        store.put_push_config(&config("early")).await.unwrap();
        let early = store.append(&new("early", "k1", status("early", TaskState::Working))).await.unwrap();
        assert!(early.pushes, "a config stored before the task's first event");
        // A later event sees a config added in between, and no longer once it is deleted.
        store.put_push_config(&config("plain")).await.unwrap();
        let later = store.append(&new("plain", "k2", status("plain", TaskState::Working))).await.unwrap();
        assert!(later.new && later.pushes, "a config added after the first event");
        let retry = store.append(&new("plain", "k2", status("plain", TaskState::Working))).await.unwrap();
        assert_eq!(
            retry,
            Appended { seq: 2, new: false, pushes: false, rewrote: false },
            "a retry is not pushed again"
        );
        store.delete_push_config("plain", "c").await.unwrap();
        let after = store.append(&new("plain", "k3", status("plain", TaskState::Working))).await.unwrap();
        assert!(!after.pushes, "the config was deleted");
    }

    async fn push_outbox(store: Store) {
        let config = |id: &str| crate::PushRow {
            task_id: "t".into(),
            config_id: id.into(),
            url: format!("https://hooks.example.com/{id}"),
            sealed: format!("sealed-{id}"),
        };
        store.put_push_config(&config("a")).await.unwrap();
        store.put_push_config(&config("b")).await.unwrap();
        let task = StreamResponse::Task(a2a_types::Task { id: "t".into(), ..Default::default() });
        assert!(store.append(&new("t", "k1", task)).await.unwrap().pushes, "the Task is pushed");
        let chunk = StreamResponse::ArtifactUpdate(a2a_types::TaskArtifactUpdateEvent {
            task_id: "t".into(),
            artifact: artifact("x", "chunk"),
            ..Default::default()
        });
        assert!(!store.append(&new("t", "k2", chunk)).await.unwrap().pushes, "an artifact chunk is not pushed");
        assert!(store.append(&new("t", "k3", status("t", TaskState::Working))).await.unwrap().pushes);
        assert_eq!(store.pending_pushes().await.unwrap(), 4, "two pushed events, each for two configs");

        // The appending process holds them: nobody takes them over while the lease runs.
        assert!(store.claim_pushes("q", false).await.unwrap().is_empty());
        // An SQLite store's only process, starting, takes them all: the one that appended
        // them is gone. A Postgres store may have other processes: it waits for the lease.
        let taken = store.claim_pushes("q", true).await.unwrap();
        if store.backend() == crate::Backend::Postgres {
            assert!(taken.is_empty(), "{taken:?}");
            sqlx::query("UPDATE push_outbox SET claimed_until = 0").execute(store.reads()).await.unwrap();
            assert!(store.claim_pushes("other-queue", false).await.unwrap().is_empty(), "another queue's tasks");
            let taken = store.claim_pushes("q", false).await.unwrap();
            assert_eq!(taken.len(), 4, "a run-out lease is taken over");
        } else {
            let order: Vec<(&str, i64)> = taken.iter().map(|p| (p.config_id.as_str(), p.seq)).collect();
            assert_eq!(order, [("a", 1), ("a", 3), ("b", 1), ("b", 3)], "per config, in log order");
            assert_eq!(taken[0].url, "https://hooks.example.com/a");
            assert_eq!(taken[0].sealed, "sealed-a");
            assert!(taken[1].body.contains("TASK_STATE_WORKING"), "the event as the log holds it");
        }
        assert!(store.claim_pushes("q", false).await.unwrap().is_empty(), "taken anew: held again");

        store.push_done("t", "a", 1).await.unwrap();
        assert_eq!(store.pending_pushes().await.unwrap(), 3, "a done delivery leaves");
        store.delete_push_config("t", "b").await.unwrap();
        assert_eq!(store.pending_pushes().await.unwrap(), 1, "a deleted config's deliveries go with it");
    }

    async fn new_task_inbox(store: Store) {
        let m = a2a_types::Message::agent_text("m1", "hi");
        let first = [("agent".to_string(), "assignee".to_string()), ("alice".to_string(), "reporter".to_string())];
        assert_eq!(store.record_new_task_inbox("r1", "t", &m, &first, "alice", "alice\nm1").await.unwrap(), None);
        let rows = store.inbox_of("t").await.unwrap();
        assert_eq!((rows.len(), rows[0].outcome.as_str()), (1, "received"));
        assert_eq!(store.participant_role("t", "alice").await.unwrap().as_deref(), Some("reporter"));
        assert_eq!(store.participant_role("t", "agent").await.unwrap().as_deref(), Some("assignee"));
        // A refused audit row (the request id is taken) takes its participants with it.
        let err =
            store.record_new_task_inbox("r1", "t", &m, &[("mallory".into(), "reporter".into())], "", "\nm1").await;
        let err = err.unwrap_err().to_string();
        assert!(err.contains("UNIQUE") || err.contains("unique") || err.contains("duplicate"), "{err}");
        assert_eq!(store.participant_role("t", "mallory").await.unwrap(), None);
        assert_eq!(store.inbox_of("t").await.unwrap().len(), 1);
    }

    async fn gap_free_idempotent_fenced(store: Store) {
        let a = store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap();
        let b = store.append(&new("t", "k2", status("t", TaskState::Working))).await.unwrap();
        let again = store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap();
        assert_eq!((a.seq, b.seq), (1, 2));
        assert_eq!(again, Appended { seq: 1, new: false, pushes: false, rewrote: false });
        store.append(&new("t", "k3", status("t", TaskState::Canceled))).await.unwrap();
        let refused = store.append(&new("t", "k4", status("t", TaskState::Working))).await.unwrap_err();
        assert_eq!(refused.to_string(), "the task is in a terminal state (TASK_STATE_CANCELED)");
        let seqs: Vec<i64> = store.events_after("t", 0, 100).await.unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }

    async fn terminal_fences(store: Store) {
        for state in [TaskState::Completed, TaskState::Failed, TaskState::Canceled, TaskState::Rejected] {
            let t = state.as_str();
            store.append(&new(t, "w", status(t, TaskState::Working))).await.unwrap();
            store.append(&new(t, "end", status(t, state))).await.unwrap();
            let refused = store.append(&new(t, "late", status(t, TaskState::Working))).await.unwrap_err();
            assert_eq!(refused.to_string(), format!("the task is in a terminal state ({t})"));
            let again = store.append(&new(t, "end", status(t, state))).await.unwrap();
            assert_eq!(
                again,
                Appended { seq: 2, new: false, pushes: false, rewrote: false },
                "a retry of the terminal event answers its seq"
            );
        }
        // A state that is not terminal does not fence.
        store.append(&new("ir", "a", status("ir", TaskState::InputRequired))).await.unwrap();
        assert_eq!(store.append(&new("ir", "b", status("ir", TaskState::Working))).await.unwrap().seq, 2);
    }

    async fn failed_write(store: Store) {
        let m = a2a_types::Message::agent_text("m1", "hi");
        store.record_inbox("r1", "t", &m, crate::InboxOutcome::Received, "").await.unwrap();
        let working = new("t", "k1", status("t", TaskState::Working));
        let (dup, append) =
            tokio::join!(store.record_inbox("r1", "t", &m, crate::InboxOutcome::Received, ""), store.append(&working));
        let dup = dup.unwrap_err().to_string();
        assert!(dup.contains("UNIQUE") || dup.contains("unique") || dup.contains("duplicate"), "{dup}");
        // The append shared the failed write's batch (and was not written) or it did not.
        let seq = match append {
            Ok(a) => a.seq,
            Err(e) => {
                assert!(e.to_string().contains("nothing of the batch was written"), "{e}");
                store.append(&new("t", "k1", status("t", TaskState::Working))).await.unwrap().seq
            }
        };
        assert_eq!(seq, 1);
        assert_eq!(store.inbox_count().await.unwrap(), 1);
        let seqs: Vec<i64> = store.events_after("t", 0, 10).await.unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1]);
    }

    async fn concurrent_writers(store: Store) {
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

    fn opened(task_id: &str, context: &str, ts: &str, queue: &str) -> NewEvent {
        let task = Task {
            id: task_id.into(),
            context_id: context.into(),
            status: TaskStatus { state: TaskState::Submitted, timestamp: Some(ts.into()), ..Default::default() },
            ..Default::default()
        };
        NewEvent { snapshot: Some(task.clone()), ..NewEvent::new(task_id, "open", StreamResponse::Task(task), queue) }
    }

    async fn list_tasks_paging(store: Store) {
        for (id, ctx, ts) in [
            ("a", "c1", "2026-01-01T00:00:01.000Z"),
            ("b", "c1", "2026-01-01T00:00:03.000Z"),
            ("c", "c2", "2026-01-01T00:00:02.000Z"),
            ("d", "c2", "2026-01-01T00:00:02.000Z"),
        ] {
            store.append(&opened(id, ctx, ts, "q")).await.unwrap();
        }
        store.append(&opened("other", "c1", "2026-01-01T00:00:09.000Z", "another-queue")).await.unwrap();
        let mut working = status("a", TaskState::Working);
        if let StreamResponse::StatusUpdate(u) = &mut working {
            u.status.timestamp = Some("2026-01-01T00:00:05.000Z".into());
        }
        store.append(&new("a", "w", working)).await.unwrap();

        let q = TaskQuery { task_queue: "q".into(), limit: 3, ..Default::default() };
        let first = store.list_tasks(&q).await.unwrap();
        let ids: Vec<&str> = first.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "d"], "newest status first, ties by id descending, other queues absent");
        assert_eq!(first.total, 4);
        assert_eq!(first.tasks[0].status.state, TaskState::Working, "the status after the snapshot is shown");
        let second = store.list_tasks(&TaskQuery { after: first.next.clone(), ..q.clone() }).await.unwrap();
        let ids: Vec<&str> = second.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!((ids, second.next, second.total), (vec!["c"], None, 4));

        let only_c2 = TaskQuery { context_id: "c2".into(), ..q.clone() };
        assert_eq!(store.list_tasks(&only_c2).await.unwrap().total, 2);
        let working = TaskQuery { state: Some(TaskState::Working), ..q.clone() };
        assert_eq!(store.list_tasks(&working).await.unwrap().tasks[0].id, "a");
        let since = TaskQuery { since: Some("2026-01-01T00:00:03.000Z".into()), ..q };
        assert_eq!(store.list_tasks(&since).await.unwrap().total, 2);
    }

    /// A turn as the workflow emits it: WORKING with the user's message at `at`, a chunk,
    /// then INPUT_REQUIRED with the reply and its artifact.
    async fn turn(store: &Store, t: &str, n: u32, text: &str, ts: &str, at: i64) -> Vec<Appended> {
        let keys = (2 * n, 2 * n + 1);
        let stamped = |state| {
            let mut e = status(t, state);
            if let StreamResponse::StatusUpdate(u) = &mut e {
                u.status.timestamp = Some(ts.to_string());
            }
            e
        };
        let mut working = new(t, &format!("wf-{}", keys.0), stamped(TaskState::Working));
        working.history = vec![Message::agent_text(format!("u{n}"), text)];
        working.history_from = at;
        working.stored_before = Some(Stored { history: at, artifacts: i64::from(n) - 1 });
        let chunk = new(
            t,
            &format!("turn-{n}-chunk-0"),
            StreamResponse::ArtifactUpdate(a2a_types::TaskArtifactUpdateEvent {
                task_id: t.into(),
                context_id: "c".into(),
                artifact: Artifact {
                    artifact_id: format!("reply-{n}"),
                    parts: vec![a2a_types::Part::text(format!("echo: {text}"))],
                    ..Default::default()
                },
                append: false,
                last_chunk: true,
                metadata: None,
            }),
        );
        let mut parked = new(t, &format!("wf-{}", keys.1), stamped(TaskState::InputRequired));
        parked.history = vec![Message::agent_text(format!("r{n}"), format!("echo: {text}"))];
        parked.history_from = at + 1;
        parked.artifacts =
            vec![(i64::from(n) - 1, Artifact { artifact_id: format!("reply-{n}"), ..Default::default() })];
        parked.stored_before = Some(Stored { history: at + 1, artifacts: i64::from(n) - 1 });
        let mut out = Vec::new();
        for e in [working, chunk, parked] {
            out.push(store.append(&e).await.unwrap());
        }
        out
    }

    async fn texts(store: &Store, t: &str) -> Vec<String> {
        store.history(t, i64::MAX, None).await.unwrap().iter().map(|m| m.text()).collect()
    }

    async fn replaces_uncommitted(store: Store) {
        let t = "t";
        store.append(&new(t, "wf-1", status(t, TaskState::Submitted))).await.unwrap();
        turn(&store, t, 1, "one", "2026-01-01T00:00:01Z", 0).await;
        // A workflow task appends turn 2 ("lost") and dies before it commits: Temporal never
        // accepted that message.
        turn(&store, t, 2, "lost", "2026-01-01T00:00:02Z", 2).await;
        assert_eq!(store.task_head(t).await.unwrap(), None, "no snapshot was written in this test");
        let mut wake = store.notifier().subscribe(t);
        // Its retry takes another message: the same keys with other content replace the
        // uncommitted tail, and the lost message's rows go with it.
        let again = turn(&store, t, 2, "new", "2026-01-01T00:00:09Z", 2).await;
        assert!(again[0].rewrote && again[0].new, "{again:?}");
        assert_eq!(again.iter().map(|a| a.seq).collect::<Vec<_>>(), vec![5, 6, 7]);
        assert!(!again[1].rewrote && !again[2].rewrote, "after the cut the rest is appended anew");
        assert_eq!(texts(&store, t).await, vec!["one", "echo: one", "new", "echo: new"]);
        let events = store.events_after(t, 0, 100).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=7).collect::<Vec<_>>(), "no gap");
        let chunk = serde_json::to_string(&events[5].event).unwrap();
        assert!(chunk.contains("echo: new") && !chunk.contains("lost"), "{chunk}");
        let woke = *wake.borrow_and_update();
        assert_eq!((woke.rewrites, woke.rewound_from), (1, 5), "readers are told where the cut began");
        // An identical retry of a replacing event is a plain retry.
        let retry = turn(&store, t, 2, "new", "2026-01-01T00:00:09Z", 2).await;
        assert!(retry.iter().all(|a| !a.new && !a.rewrote), "{retry:?}");

        // A cut-off tail that ended the task (an uncommitted cancel) does not fence its
        // replacement.
        let c = "c";
        store.append(&new(c, "wf-1", status(c, TaskState::Working))).await.unwrap();
        store.append(&new(c, "wf-2", status(c, TaskState::Canceled))).await.unwrap();
        let mut replacing = new(c, "wf-2", status(c, TaskState::InputRequired));
        replacing.stored_before = Some(Stored::default());
        assert_eq!(store.append(&replacing).await.unwrap().seq, 2);
        assert_eq!(store.append(&new(c, "wf-3", status(c, TaskState::Working))).await.unwrap().seq, 3);
    }

    async fn cut_back_when_unchanged(store: Store) {
        let t = "t";
        let mut open = new(t, "wf-1", status(t, TaskState::Submitted));
        open.snapshot = Some(Task { id: t.into(), context_id: "c".into(), ..Default::default() });
        store.append(&open).await.unwrap();
        turn(&store, t, 1, "one", "2026-01-01T00:00:01Z", 0).await;
        turn(&store, t, 2, "lost", "2026-01-01T00:00:02Z", 2).await;
        let seen = store.task_head(t).await.unwrap().unwrap();
        assert_eq!(seen.last_seq, 7);
        let mut head = Task { id: t.into(), context_id: "c".into(), ..Default::default() };
        head.status.state = TaskState::InputRequired;
        head.status.timestamp = Some("2026-01-01T00:00:01Z".into());
        let kept = Stored { history: 2, artifacts: 1 };
        // Something appended since the head was read: the cut is not made.
        let stale = TaskHead { last_seq: 6, ..seen.clone() };
        assert!(!store.cut_back(t, &stale, 4, kept, &head).await.unwrap());
        assert!(store.cut_back(t, &seen, 4, kept, &head).await.unwrap());
        assert_eq!(texts(&store, t).await, vec!["one", "echo: one"]);
        let row = store.task(t, None).await.unwrap().unwrap();
        assert_eq!((row.last_seq, row.state, row.task.artifacts.len()), (4, TaskState::InputRequired, 1));
        assert_eq!(store.events_after(t, 0, 100).await.unwrap().len(), 4);
        // The same head again: the count of cuts moved on, so a second cut is refused.
        assert!(!store.cut_back(t, &seen, 4, kept, &head).await.unwrap());
        // The next turn appends after the cut, gap-free.
        let next = turn(&store, t, 2, "two", "2026-01-01T00:00:03Z", 2).await;
        assert_eq!(next.iter().map(|a| a.seq).collect::<Vec<_>>(), vec![5, 6, 7]);
    }

    async fn retried_first_message(store: Store) {
        let m = Message::agent_text("m1", "hi");
        let agent = [("agent".to_string(), "assignee".to_string())];
        assert_eq!(store.record_new_task_inbox("r1", "t1", &m, &agent, "", "\nm1").await.unwrap(), None);
        // The same sender and id again (a retry, or a race with the first attempt): the row
        // of the first names its task, and nothing is written.
        let prior = store.record_new_task_inbox("r2", "t2", &m, &agent, "", "\nm1").await.unwrap().unwrap();
        assert_eq!((prior.task_id.as_str(), prior.accepted(), prior.cursor), ("t1", false, None));
        assert_eq!(store.participant_role("t2", "agent").await.unwrap(), None, "the retry opened nothing");
        // Another sender's message with the same id opens its own task.
        assert_eq!(store.record_new_task_inbox("r3", "t3", &m, &agent, "bob", "bob\nm1").await.unwrap(), None);
        store.set_inbox_outcome("r1", crate::InboxOutcome::Accepted(0)).await.unwrap();
        let prior = store.record_new_task_inbox("r4", "t4", &m, &agent, "", "\nm1").await.unwrap().unwrap();
        assert_eq!((prior.task_id.as_str(), prior.accepted(), prior.cursor), ("t1", true, Some(0)));
        // A follow-up's earlier delivery, the accepted one first.
        store
            .record_inbox("r5", "t1", &Message::agent_text("m2", "x"), crate::InboxOutcome::Received, "")
            .await
            .unwrap();
        store.set_inbox_outcome("r5", crate::InboxOutcome::Accepted(4)).await.unwrap();
        store
            .record_inbox("r6", "t1", &Message::agent_text("m2", "x"), crate::InboxOutcome::Received, "")
            .await
            .unwrap();
        let prior = store.prior_message("t1", "m2").await.unwrap().unwrap();
        assert_eq!((prior.accepted(), prior.cursor), (true, Some(4)));
        assert_eq!(store.prior_message("t1", "m9").await.unwrap(), None);
        // A refused body keeps an excerpt, its length and digest, not the whole of it.
        let big = Message::agent_text("m3", "x".repeat(100_000));
        store.record_inbox("r7", "t1", &big, crate::InboxOutcome::Refused("too big".into()), "").await.unwrap();
        let row = store.inbox_of("t1").await.unwrap().into_iter().find(|r| r.request_id == "r7").unwrap();
        let body: serde_json::Value = serde_json::from_str(&row.body).unwrap();
        assert!(row.body.len() < 2 * crate::REFUSED_EXCERPT, "{}", row.body.len());
        assert_eq!(body["bytes"].as_u64(), Some(serde_json::to_string(&big).unwrap().len() as u64));
        assert_eq!(body["sha256"].as_str().map(str::len), Some(64));
    }

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
