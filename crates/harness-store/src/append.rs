//! The append protocol of the event log: `(task_id, seq)` rows appended idempotently on an event key, with the
//! seq allocated by the store under a per-task row lock (D1; see docs/event-log.md).
//!
//! Why the store allocates: model output is produced inside the `call_model` activity
//! while the workflow may be emitting (a cancel, a control). Allocating under the task
//! row's lock keeps the log gap-free and in commit order whoever writes, and the
//! terminal fence guarantees nothing lands after CANCELED/COMPLETED.

use crate::history::Changes;
use crate::reads::TaskHead;
use crate::sql::TERMINAL_STATES;
use crate::{Store, StoreError, now};
use a2a_types::{Artifact, Message, StreamResponse, Task, TaskState};
use sqlx::{AnyConnection, Row};
use std::sync::LazyLock;

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

/// How many push configs the task $1 has, as `pushes` (a RETURNING column).
macro_rules! pushes {
    () => {
        "(SELECT COUNT(*) FROM push_configs WHERE push_configs.task_id = $1) AS pushes"
    };
}

/// Takes the next seq of an open task (the fence: nothing is appended after a terminal
/// state) whose log lacks the key $8.
static FAST_UPDATE: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            update_row!("last_seq = last_seq + 1 WHERE task_id = $1 AND state NOT IN ({}) "),
            "AND NOT EXISTS (SELECT 1 FROM events WHERE task_id = $1 AND event_key = $8) RETURNING last_seq, ",
            pushes!()
        ),
        *TERMINAL_STATES
    )
});
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
    let taken = update_row(FAST_UPDATE.as_str()).bind(key.as_str()).fetch_optional(&mut *conn).await?;
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
            static REOPEN: LazyLock<String> = LazyLock::new(|| {
                format!(
                    "UPDATE tasks SET state = 'TASK_STATE_WORKING' WHERE task_id = $1 AND state IN ({})",
                    *TERMINAL_STATES
                )
            });
            sqlx::query(&REOPEN).bind(task_id.as_str()).execute(&mut *conn).await?;
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
        let appended = transaction!(self, move |conn| { append(conn, task_id, key, task_queue, fields).await }).await?;
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
        let cut = transaction!(self, move |conn| {
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
        .await?;
        if cut {
            self.notifier().rewound(&notify_id, keep_through + 1);
        }
        Ok(cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(appends_are_gap_free_idempotent_and_fenced_after_a_terminal_event, gap_free_idempotent_fenced);
    on_both!(concurrent_writers_of_one_task_never_leave_a_gap, concurrent_writers);
    on_both!(every_terminal_state_fences_the_log_and_a_retried_key_still_answers, terminal_fences);
    on_both!(a_failed_write_is_reported_and_the_writer_goes_on, failed_write);
    on_both!(an_event_that_replaces_an_uncommitted_one_cuts_the_log_and_its_rows_back, replaces_uncommitted);
    on_both!(a_reconciler_cuts_back_only_a_log_still_as_it_read_it, cut_back_when_unchanged);

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
}
