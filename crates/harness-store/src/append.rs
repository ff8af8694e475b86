//! The append protocol of the event log: `(task_id, seq)` rows appended idempotently on an event key, with the
//! seq allocated by the store under a per-task row lock (D1; see docs/event-log.md).
//!
//! Why the store allocates: model output is produced inside the `call_model` activity
//! while the workflow may be emitting (a cancel, a control). Allocating under the task
//! row's lock keeps the log gap-free and in commit order whoever writes, and the
//! terminal fence guarantees nothing lands after CANCELED/COMPLETED.

use crate::conn::{Arg, Conn};
use crate::history::Changes;
use crate::reads::TaskHead;
use crate::sql::{OPEN_STATE, TERMINAL_STATES};
use crate::{Store, StoreError, now};
use a2a_types::{Artifact, Message, StreamResponse, Task, TaskState};
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
/// it knows); `$tail` takes its own parameters from $9.
macro_rules! update_row {
    ($($tail:tt)+) => {
        concat!(
            "UPDATE tasks SET state = CASE WHEN $2 = '' THEN state ELSE $2 END, updated_at = $3, ",
            "status = CASE WHEN $4 = '' THEN status ELSE $4 END, ",
            "status_ts = CASE WHEN $5 = '' THEN status_ts ELSE $5 END, ",
            "snapshot = CASE WHEN $6 = '' THEN snapshot ELSE $6 END, ",
            "context_id = CASE WHEN $7 = '' THEN context_id ELSE $7 END, ",
            "status_md = CASE WHEN $8 = '' THEN status_md ELSE $8 END, ",
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
/// state, [`OPEN_STATE`]) whose log lacks the key $9, setting first what `$set` sets.
macro_rules! fast_update {
    ($($set:literal)?) => {
        concat!(
            update_row!($($set,)? "last_seq = last_seq + 1 WHERE task_id = $1 AND {} "),
            "AND NOT EXISTS (SELECT 1 FROM events WHERE task_id = $1 AND event_key = $9)"
        )
    };
}
/// [`fast_update`] on SQLite, which returns nothing: SQLite runs a RETURNING statement into
/// a temporary b-tree, built for each run (issue 31). Whether it took the seq is its count
/// of changed rows, and [`SEQ_AND_PUSHES`] reads what it would have returned.
static FAST_UPDATE: LazyLock<String> = LazyLock::new(|| format!(fast_update!(), *OPEN_STATE));
/// What [`FAST_UPDATE`] set (the task $1's seq) and how many push configs the task has.
const SEQ_AND_PUSHES: &str = concat!("SELECT last_seq, ", pushes!(), " FROM tasks WHERE task_id = $1");
/// [`FAST_UPDATE`] on Postgres, which also counts $11 more of the task's senders' messages
/// (ones this transaction wrote before, [`append`]) and returns its seq and push configs.
static FAST_UPDATE_PG: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(fast_update!("user_messages = user_messages + $11, "), " RETURNING last_seq, ", pushes!()),
        *OPEN_STATE
    )
});
/// [`FAST_UPDATE_PG`] and the event's row in one statement, on Postgres (one round trip
/// instead of two, issue 31): the row takes the seq the update returned, its body is $10
/// and its time the update's ($3). SQLite has no data-modifying CTE: it runs the two.
///
/// `changes`: with the event's history and artifact rows, the JSON arrays $12 and $13
/// (`Changes::as_json_arrays`), written only when the event is (one statement for what was
/// two). Its third column, the senders' messages it wrote, cannot be counted on the task's
/// row in the same statement (a statement updates a row once): the next update of the row
/// counts them ($11), or the end of the transaction.
///
/// `announce`: the last of a task's appends in a batch also announces its seq to the other
/// processes ([`crate::listen`]), on the channel and with the payload's head in the two
/// parameters after the others: the `pg_notify` that was a statement of its own.
fn fast_append_pg(changes: bool, announce: bool) -> String {
    let mut ctes = format!(
        "t AS ({}), e AS (INSERT INTO events (task_id, seq, event_key, body, created_at) \
         SELECT $1, last_seq, $9, $10, $3 FROM t)",
        *FAST_UPDATE_PG
    );
    let mut columns = "last_seq, pushes, ".to_string();
    let mut next = 12;
    if changes {
        ctes += &format!(
            ", {}",
            crate::history::changes_ctes("$12", "$13", "(SELECT last_seq FROM t)", "EXISTS (SELECT 1 FROM t)")
        );
        columns += crate::history::USERS_WRITTEN;
        next = 14;
    } else {
        columns += "0";
    }
    if announce {
        ctes += &format!(", n AS (SELECT pg_notify(${next}, ${} || ' ' || last_seq || ' ' || $1) FROM t)", next + 1);
        columns += ", (SELECT COUNT(*) FROM n)";
    }
    format!("WITH {ctes} SELECT {columns} FROM t")
}

/// [`fast_append_pg`]'s four statements, by `[changes][announce]`.
static FAST_APPEND_PG: LazyLock<[[String; 2]; 2]> =
    LazyLock::new(|| [false, true].map(|changes| [false, true].map(|announce| fast_append_pg(changes, announce))));
/// A run of a task's events that change nothing but the log (a model's streamed chunks), in
/// one statement on Postgres (issue 31): the task $1, open and lacking every key, takes the
/// next $3 seqs and the time $2, and each event of $4 (a JSON array of `[key, body, time]`)
/// is written at its seq in order. No row: some key is there, the task is closed or has no
/// row yet, and the events go one by one.
static CHUNKS_APPEND_PG: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH k AS (SELECT v->>0 AS event_key, v->>1 AS body, v->>2 AS created_at, ord \
         FROM json_array_elements($4::json) WITH ORDINALITY AS a(v, ord)), \
         t AS (UPDATE tasks SET updated_at = $2, last_seq = last_seq + $3 WHERE task_id = $1 AND {} \
         AND NOT EXISTS (SELECT 1 FROM events e JOIN k ON e.event_key = k.event_key WHERE e.task_id = $1) \
         RETURNING last_seq), \
         e AS (INSERT INTO events (task_id, seq, event_key, body, created_at) \
         SELECT $1, t.last_seq - $3 + k.ord, k.event_key, k.body, k.created_at FROM t, k) \
         SELECT last_seq - $3 + 1 FROM t",
        *OPEN_STATE
    )
});
/// A run of one task's events in one statement on Postgres, with no transaction around it
/// (a message's turn, issue 31: five round trips, BEGIN, three appends and COMMIT, become
/// one). The task $1, open and lacking every key, takes the next $9 seqs, the run's last
/// value of each field of [`update_row!`] ($2..$8, folded by [`Run::fold`]) and the senders'
/// messages among $11 it does not hold yet; each event of $10 (a JSON array of `[key, body,
/// time, pushed]`) is written at its seq in order, with the run's history and artifact rows
/// ($11 and $12, [`crate::history::run_json_arrays`]) and, for each pushed event, its outbox
/// rows, leased until $13, when the task has push configs. With `announce`, the run's last
/// seq is announced to the other processes (the channel and payload's head are $14 and $15).
/// No row: a key is there, the task is closed or has no row yet, and nothing was written.
///
/// The senders' messages are counted by the row's update (a statement updates a row once),
/// as those of $11 the task's history lacks; the history's insert writes the same ones, since
/// a task's appends take its row's lock first, and a retry that raced this one holds one of
/// its keys, which the unique `(task_id, event_key)` refuses with the whole statement.
fn run_append_pg(announce: bool) -> String {
    let update = format!(
        concat!(
            update_row!(
                "user_messages = user_messages + (SELECT COUNT(*) FROM json_array_elements($11::json) AS v \
                 WHERE (v->>2)::boolean AND NOT EXISTS (SELECT 1 FROM task_history x \
                 WHERE x.task_id = $1 AND x.idx = (v->>0)::bigint)), ",
                "last_seq = last_seq + $9 WHERE task_id = $1 AND {} ",
                "AND NOT EXISTS (SELECT 1 FROM events x JOIN ev ON x.event_key = ev.event_key WHERE x.task_id = $1) "
            ),
            "RETURNING last_seq, ",
            pushes!()
        ),
        *OPEN_STATE
    );
    let changes = crate::history::changes_ctes(
        "$11",
        "$12",
        "(SELECT last_seq FROM t) - $9 + (v->>3)::bigint",
        "EXISTS (SELECT 1 FROM t)",
    );
    let (mut ctes, mut columns) = (
        format!(
            "ev AS (SELECT v->>0 AS event_key, v->>1 AS body, v->>2 AS created_at, (v->>3)::boolean AS pushed, ord \
             FROM json_array_elements($10::json) WITH ORDINALITY AS x(v, ord)), \
             t AS ({update}), \
             e AS (INSERT INTO events (task_id, seq, event_key, body, created_at) \
             SELECT $1, t.last_seq - $9 + ev.ord, ev.event_key, ev.body, ev.created_at FROM t, ev), \
             {changes}, \
             o AS (INSERT INTO push_outbox (task_id, config_id, seq, claim, claimed_until) \
             SELECT $1, c.config_id, t.last_seq - $9 + ev.ord, '', $13 FROM t, ev, push_configs c \
             WHERE c.task_id = $1 AND ev.pushed)"
        ),
        "last_seq, pushes".to_string(),
    );
    if announce {
        ctes += ", n AS (SELECT pg_notify($14, $15 || ' ' || last_seq || ' ' || $1) FROM t)";
        columns += ", (SELECT COUNT(*) FROM n)";
    }
    format!("WITH {ctes} SELECT {columns} FROM t")
}

/// [`run_append_pg`]'s two statements, by `announce`.
static RUN_APPEND_PG: LazyLock<[String; 2]> = LazyLock::new(|| [false, true].map(run_append_pg));

/// Sets the seq $9.
const SET_SEQ: &str = update_row!("last_seq = $9 WHERE task_id = $1");

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
    /// The metadata of a status event (`{}` when it has none), or "" for any other event:
    /// what a read from the store shows of the newest status between snapshots.
    status_md: String,
    /// The snapshot's head (no history, no artifacts: those are `changes`).
    snapshot: String,
    context_id: String,
    changes: Changes,
    /// The Task or a status event: it goes to the task's push configs (S14).
    pushed: bool,
    /// The Task: the first event of a task, whose row does not exist yet.
    opens: bool,
    stored_before: Option<Stored>,
}

/// A status's metadata as its row keeps it: the object, `{}` when there is none (written
/// without a copy of it).
fn metadata_json(metadata: Option<&a2a_types::Struct>) -> Result<String, StoreError> {
    Ok(match metadata {
        Some(m) => serde_json::to_string(m)?,
        None => "{}".to_string(),
    })
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
        let status_md = match &e.event {
            StreamResponse::StatusUpdate(u) => metadata_json(u.metadata.as_ref())?,
            StreamResponse::Task(_) => "{}".to_string(),
            _ => String::new(),
        };
        Ok(Self {
            body: serde_json::to_string(&e.event)?,
            state: e.event.state().map(|s| s.as_str()).unwrap_or(""),
            ts,
            status,
            status_ts,
            status_md,
            snapshot: e.snapshot.as_ref().map(|t| serde_json::to_string(&t.head())).transpose()?.unwrap_or_default(),
            context_id: e.snapshot.as_ref().map(|t| t.context_id.clone()).unwrap_or_default(),
            changes: Changes::of(e)?,
            // The Task, every status, and every artifact the workflow writes whole (an A2UI
            // surface, a sub-task's artifact): not a model's streamed chunks, which the
            // final status carries whole (issue 30).
            pushed: match e.event {
                StreamResponse::Task(_) | StreamResponse::StatusUpdate(_) => true,
                StreamResponse::ArtifactUpdate(_) => e.stored_before.is_some(),
                _ => false,
            },
            opens: matches!(e.event, StreamResponse::Task(_)),
            stored_before: e.stored_before,
        })
    }

    /// The event changes nothing but the log: no state, status, snapshot or context, no
    /// history or artifact row, and it is not pushed (a model's streamed chunk).
    fn log_only(&self) -> bool {
        self.state.is_empty()
            && self.status.is_empty()
            && self.status_md.is_empty()
            && self.snapshot.is_empty()
            && self.context_id.is_empty()
            && !self.pushed
            && self.changes.is_empty()
    }

    /// What an appended event writes after its own row: the history and artifact rows it
    /// carries (unless its row's statement wrote them: `changes_written`), and its push
    /// outbox rows when it is pushed and the task has `configs` (S14).
    async fn write_rest(
        &self,
        conn: &mut Conn<'_>,
        task_id: &str,
        seq: i64,
        configs: i64,
        changes_written: bool,
    ) -> Result<Appended, StoreError> {
        if !changes_written {
            self.changes.write(conn, task_id, seq).await?;
        }
        let pushes = configs > 0 && self.pushed;
        if pushes {
            crate::push::to_outbox(conn, task_id, seq).await?;
        }
        Ok(Appended { seq, new: true, pushes, rewrote: false })
    }
}

/// A batch of appends that [`RUN_APPEND_PG`] can write as one statement: a run of one task's
/// events with distinct keys, of which only the last may end the task (an event after one
/// that ends it is refused, and that refusal is the other path's to give), and which does
/// not open its task (a Task first: the task has no row for the statement to take yet).
struct Run {
    task_id: String,
    /// The task row's fields after the run, in [`update_row!`]'s order ($2..$8): each the
    /// last value an event of the run gave it ("" when none did).
    row: [String; 7],
    events: String,
    messages: String,
    artifacts: String,
}

impl Run {
    fn of(writes: &[(String, String, String, Fields)]) -> Result<Option<Self>, StoreError> {
        let (Some((task_id, ..)), Some((_, before_last))) = (writes.first(), writes.split_last()) else {
            return Ok(None);
        };
        let keys: std::collections::HashSet<&str> = writes.iter().map(|(_, key, ..)| key.as_str()).collect();
        let ends = |f: &Fields| f.state.parse::<TaskState>().is_ok_and(|s| s.is_terminal());
        if keys.len() != writes.len()
            || writes[0].3.opens
            || writes.iter().any(|(t, ..)| t != task_id)
            || before_last.iter().any(|(.., f)| ends(f))
        {
            return Ok(None);
        }
        let (messages, artifacts) = crate::history::run_json_arrays(writes.iter().map(|(.., f)| &f.changes))?;
        let events: Vec<(&str, &str, &str, bool)> =
            writes.iter().map(|(_, key, _, f)| (key.as_str(), f.body.as_str(), f.ts.as_str(), f.pushed)).collect();
        Ok(Some(Self {
            task_id: task_id.clone(),
            row: Self::fold(writes.iter().map(|(.., f)| f)),
            events: serde_json::to_string(&events)?,
            messages,
            artifacts,
        }))
    }

    /// What the row's update by each event in turn would leave: for each field the last
    /// event's value that is not "" (an empty value keeps the stored one), and the last
    /// event's time.
    fn fold<'a>(fields: impl Iterator<Item = &'a Fields>) -> [String; 7] {
        let mut row: [String; 7] = Default::default();
        for f in fields {
            let values = [f.state, &f.ts, &f.status, &f.status_ts, &f.snapshot, &f.context_id, &f.status_md];
            for (kept, value) in row.iter_mut().zip(values) {
                if !value.is_empty() {
                    *kept = value.to_string();
                }
            }
        }
        row
    }
}

/// The statements of one append, with their binds.
struct Statements<'a> {
    task_id: &'a str,
    key: &'a str,
    fields: &'a Fields,
}

impl<'a> Statements<'a> {
    /// The parameters of an [`update_row!`]: $1..$8, then `ninth`.
    fn update_row(&self, ninth: Arg<'a>) -> [Arg<'a>; 9] {
        let f = self.fields;
        [
            self.task_id.into(),
            f.state.into(),
            f.ts.as_str().into(),
            f.status.as_str().into(),
            f.status_ts.as_str().into(),
            f.snapshot.as_str().into(),
            f.context_id.as_str().into(),
            f.status_md.as_str().into(),
            ninth,
        ]
    }

    async fn insert_event(&self, conn: &mut Conn<'_>, seq: i64) -> Result<(), StoreError> {
        conn.execute(
            "INSERT INTO events (task_id, seq, event_key, body, created_at) VALUES ($1, $2, $3, $4, $5)",
            args![self.task_id, seq, self.key, self.fields.body.as_str(), self.fields.ts.as_str()],
        )
        .await?;
        Ok(())
    }

    /// Writes the event at `seq` and sets the task's row to it, then the rest it carries.
    async fn write_at(&self, conn: &mut Conn<'_>, seq: i64, configs: i64) -> Result<Appended, StoreError> {
        self.insert_event(conn, seq).await?;
        conn.execute(SET_SEQ, &self.update_row(seq.into())).await?;
        self.fields.write_rest(conn, self.task_id, seq, configs, false).await
    }
}

/// The append on a connection inside a transaction. The task's row is updated first, so
/// Postgres holds the row's lock (SQLite its write lock) from there to the commit: appends
/// of one task are serialised and the log stays gap-free.
///
/// `uncounted`: on Postgres, the task's senders' messages this transaction wrote that its
/// row does not count yet; this append counts them, and leaves those it wrote itself with
/// its history rows ([`fast_append_pg`]) for the next one ([`count_users`]).
///
/// `announce`: on Postgres, the head of the announcement of this append's seq
/// ([`crate::listen::payload_head`]), made by the append's own statement when it takes the
/// common path; returned is whether it did.
async fn append(
    conn: &mut Conn<'_>,
    task_id: String,
    key: String,
    task_queue: String,
    fields: Fields,
    uncounted: &mut i64,
    announce: Option<&str>,
) -> Result<(Appended, bool), StoreError> {
    let at = Statements { task_id: &task_id, key: &key, fields: &fields };
    // The common case in two statements (one on Postgres, with the event's history and
    // artifact rows and its announcement): an open task whose log lacks this key takes the
    // next seq and what this event knows (parameter $9 is the key), and the event is written
    // at it.
    if let Conn::Any(_) = conn {
        let counting = std::mem::take(uncounted);
        let [a1, a2, a3, a4, a5, a6, a7, a8, a9] = at.update_row(key.as_str().into());
        let mut binds = vec![a1, a2, a3, a4, a5, a6, a7, a8, a9, fields.body.as_str().into(), counting.into()];
        let arrays = fields.changes.as_json_arrays()?;
        if let Some((messages, artifacts)) = &arrays {
            binds.extend([Arg::from(messages), Arg::from(artifacts)]);
        }
        if let Some(head) = announce {
            binds.extend([Arg::from(crate::listen::CHANNEL), Arg::from(head)]);
        }
        let sql = &FAST_APPEND_PG[usize::from(arrays.is_some())][usize::from(announce.is_some())];
        match conn.fetch_optional(sql, &binds).await? {
            Some(row) => {
                let (seq, configs) = (row.int(0)?, row.int(1)?);
                if arrays.is_some() {
                    *uncounted = row.int(2)?;
                }
                let appended = fields.write_rest(conn, &task_id, seq, configs, arrays.is_some()).await?;
                return Ok((appended, announce.is_some()));
            }
            // Nothing written: the row counts what it owes before the other path, which may
            // count the history again from its rows (a cut).
            None => count_users(conn, &task_id, counting).await?,
        }
    } else if conn.execute(FAST_UPDATE.as_str(), &at.update_row(key.as_str().into())).await? == 1 {
        let row = conn.fetch_one(SEQ_AND_PUSHES, args![task_id.as_str()]).await?;
        let (seq, configs) = (row.int(0)?, row.int(1)?);
        at.insert_event(conn, seq).await?;
        return Ok((fields.write_rest(conn, &task_id, seq, configs, false).await?, false));
    }
    Ok((append_otherwise(conn, &at, &task_queue).await?, false))
}

/// Counts `n` more of the task's senders' messages on its row (Postgres: what
/// [`fast_append_pg`] wrote and no later update of the row counted).
async fn count_users(conn: &mut Conn<'_>, task_id: &str, n: i64) -> Result<(), StoreError> {
    if n > 0 {
        conn.execute("UPDATE tasks SET user_messages = user_messages + $2 WHERE task_id = $1", args![task_id, n])
            .await?;
    }
    Ok(())
}

/// Appends a run of `task_id`'s [`Fields::log_only`] events in one statement on Postgres
/// ([`CHUNKS_APPEND_PG`]); the seq of the first, or `None` when the run must go one by one
/// (nothing written).
async fn append_log_only(
    conn: &mut Conn<'_>,
    task_id: &str,
    run: &[(String, String, Fields)],
) -> Result<Option<i64>, StoreError> {
    let events: Vec<(&str, &str, &str)> =
        run.iter().map(|(key, _, f)| (key.as_str(), f.body.as_str(), f.ts.as_str())).collect();
    let events = serde_json::to_string(&events)?;
    let last_ts = run.last().map_or("", |(_, _, f)| f.ts.as_str());
    let row = conn
        .fetch_optional(CHUNKS_APPEND_PG.as_str(), args![task_id, last_ts, run.len() as i64, events.as_str()])
        .await?;
    row.map(|row| row.int(0)).transpose()
}

/// What the fast path did not take, with nothing written yet: a task's first event, a
/// retried key, a key to replace, or a closed task.
async fn append_otherwise(conn: &mut Conn<'_>, at: &Statements<'_>, task_queue: &str) -> Result<Appended, StoreError> {
    conn.execute(
        "INSERT INTO tasks (task_id, task_queue, updated_at) VALUES ($1, $2, $3) ON CONFLICT (task_id) DO NOTHING",
        args![at.task_id, task_queue, at.fields.ts.as_str()],
    )
    .await?;
    let row = conn
        .fetch_one(
            concat!("UPDATE tasks SET last_seq = last_seq WHERE task_id = $1 RETURNING last_seq, state, ", pushes!()),
            args![at.task_id],
        )
        .await?;
    let (last_seq, state, configs) = (row.int(0)?, row.text(1)?, row.int(2)?);
    if let Some(existing) = conn
        .fetch_optional("SELECT seq, body FROM events WHERE task_id = $1 AND event_key = $2", args![at.task_id, at.key])
        .await?
    {
        let (seq, body) = (existing.int(0)?, existing.text(1)?);
        if *body == at.fields.body {
            // A retried append: the first one's seq, nothing written twice.
            return Ok(Appended { seq, new: false, pushes: false, rewrote: false });
        }
        return replace(conn, at, seq, configs).await;
    }
    let state: TaskState = state.parse().unwrap_or_default();
    if state.is_terminal() {
        return Err(StoreError::Closed(state));
    }
    at.write_at(conn, last_seq + 1, configs).await
}

/// The key is there with other content: the event at `seq` and everything after it were
/// written by a workflow task that never committed (its retry decided otherwise), or by a
/// model call that was retried. This event takes its place.
async fn replace(conn: &mut Conn<'_>, at: &Statements<'_>, seq: i64, configs: i64) -> Result<Appended, StoreError> {
    rewind(conn, at.task_id, seq, at.fields.stored_before).await?;
    if at.fields.state.is_empty() {
        // A model chunk replaced: the turn is running, whatever the cut-off tail said.
        static REOPEN: LazyLock<String> = LazyLock::new(|| {
            format!(
                "UPDATE tasks SET state = 'TASK_STATE_WORKING' WHERE task_id = $1 AND state IN ({})",
                *TERMINAL_STATES
            )
        });
        conn.execute(&REOPEN, args![at.task_id]).await?;
    }
    let appended = at.write_at(conn, seq, configs).await?;
    Ok(Appended { rewrote: true, ..appended })
}

/// Cuts a task's log back to before `from`: its events from `from` on, their push
/// deliveries, and (when the writer said what it knew stored) the history and artifact rows
/// past those counts. Counts the cut, so readers past it can tell (docs/event-log.md).
async fn rewind(conn: &mut Conn<'_>, task_id: &str, from: i64, kept: Option<Stored>) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM events WHERE task_id = $1 AND seq >= $2",
        "DELETE FROM push_outbox WHERE task_id = $1 AND seq >= $2",
    ] {
        conn.execute(sql, args![task_id, from]).await?;
    }
    if let Some(kept) = kept {
        for (sql, n) in [
            ("DELETE FROM task_history WHERE task_id = $1 AND idx >= $2", kept.history),
            ("DELETE FROM task_artifacts WHERE task_id = $1 AND idx >= $2", kept.artifacts),
        ] {
            conn.execute(sql, args![task_id, n]).await?;
        }
        // A cut is rare (a crash): count the senders' messages that are left.
        conn.execute(
            "UPDATE tasks SET user_messages = (SELECT COUNT(*) FROM task_history h WHERE h.task_id = $1 \
             AND h.message LIKE '%\"role\":\"ROLE_USER\"%') WHERE task_id = $1",
            args![task_id],
        )
        .await?;
    }
    conn.execute(
        "UPDATE tasks SET last_seq = $2 - 1, rewrites = rewrites + 1, rewrote_from = $2 WHERE task_id = $1",
        args![task_id, from],
    )
    .await?;
    Ok(())
}

/// Adds an append to what the other processes are told at the commit: a task's appends in a
/// row are one announcement, its newest seq; a cut is announced where it came.
fn tell(told: &mut Vec<(String, i64, bool)>, task_id: &str, one: Appended) {
    match told.last_mut() {
        Some((task, seq, false)) if one.new && !one.rewrote && task == task_id => *seq = one.seq,
        _ if one.new || one.rewrote => told.push((task_id.to_string(), one.seq, one.rewrote)),
        _ => {}
    }
}

impl Store {
    /// Appends an event (D1). Idempotent on `(task_id, key)`; refused with
    /// [`StoreError::Closed`] once the log holds a terminal event. Readers are woken once
    /// it is committed.
    pub async fn append(&self, e: &NewEvent) -> Result<Appended, StoreError> {
        let appended = self.append_all(std::slice::from_ref(e)).await?;
        Ok(appended[0])
    }

    /// Appends events in order in one transaction (one `emit_event` of the workflow's that
    /// carries more than one, issue 31): all of them or none, each as [`Store::append`]
    /// would. Returns what each append did, in order.
    pub async fn append_all(&self, events: &[NewEvent]) -> Result<Vec<Appended>, StoreError> {
        let writes = events
            .iter()
            .map(|e| Ok((e.task_id.clone(), e.key.clone(), e.task_queue.clone(), Fields::of(e)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let appended = match self.append_run(&writes).await? {
            Some(appended) => appended,
            None => self.append_in_transaction(writes).await?,
        };
        for (e, one) in events.iter().zip(&appended) {
            if one.rewrote {
                self.notifier().rewound(&e.task_id, one.seq);
            } else if one.new {
                self.notifier().notify(&e.task_id, one.seq);
            }
        }
        Ok(appended)
    }

    /// The batch as one statement ([`RUN_APPEND_PG`]) when the store is on Postgres and the
    /// batch is a [`Run`]; `None` when it is not, or when the statement wrote nothing (the
    /// transaction's path then gives each event what it must).
    async fn append_run(
        &self,
        writes: &[(String, String, String, Fields)],
    ) -> Result<Option<Vec<Appended>>, StoreError> {
        if !matches!(self.writes, crate::writer::Writes::Pg(_)) {
            return Ok(None);
        }
        let Some(run) = Run::of(writes)? else { return Ok(None) };
        let head = self.origin.as_deref().map(|o| crate::listen::payload_head(o, false));
        let n = writes.len() as i64;
        let taken = statement!(self, move |conn| {
            // $1, the row's fields $2..$8 in `update_row!`'s order, then $9..$13.
            let mut binds: Vec<Arg> =
                std::iter::once(Arg::from(&run.task_id)).chain(run.row.iter().map(Arg::from)).collect();
            binds.extend([
                Arg::from(n),
                Arg::from(&run.events),
                Arg::from(&run.messages),
                Arg::from(&run.artifacts),
                Arg::from(crate::push::lease_from_now()),
            ]);
            if let Some(head) = &head {
                binds.extend([Arg::from(crate::listen::CHANNEL), Arg::from(head)]);
            }
            let row = conn.fetch_optional(&RUN_APPEND_PG[usize::from(head.is_some())], &binds).await?;
            row.map(|row| Ok((row.int(0)?, row.int(1)?))).transpose()
        })
        .await?;
        let Some((last_seq, configs)) = taken else { return Ok(None) };
        let first = last_seq - n + 1;
        Ok(Some(
            (first..)
                .zip(writes)
                .map(|(seq, (.., f))| Appended { seq, new: true, pushes: configs > 0 && f.pushed, rewrote: false })
                .collect(),
        ))
    }

    /// The batch in one transaction, each event as [`Store::append`] would write it.
    async fn append_in_transaction(
        &self,
        writes: Vec<(String, String, String, Fields)>,
    ) -> Result<Vec<Appended>, StoreError> {
        let origin = self.origin.clone();
        transaction!(self, move |conn| {
            let mut appended = Vec::with_capacity(writes.len());
            // What the other processes are told at the commit: a task's appends in a row are
            // one announcement, its newest seq (a reader reads on from its cursor to it); a
            // cut is announced where it came.
            let mut told: Vec<(String, i64, bool)> = Vec::new();
            // On Postgres, a task's senders' messages written and not yet counted on its row
            // (`append`): counted by the task's next append, or before another task's.
            let mut uncounted: (String, i64) = (String::new(), 0);
            // How this store's announcements of appends begin (Postgres).
            let announce_head = origin.as_deref().map(|o| crate::listen::payload_head(o, false));
            let mut writes = writes.into_iter().peekable();
            while let Some((task_id, key, task_queue, fields)) = writes.next() {
                if uncounted.0 != task_id {
                    count_users(&mut *conn, &uncounted.0, uncounted.1).await?;
                    uncounted = (task_id.clone(), 0);
                }
                // A run of a task's chunks goes in one statement on Postgres, where each
                // statement is a round trip (issue 31).
                let mut run = vec![(key, task_queue, fields)];
                if matches!(conn, Conn::Any(_)) && run[0].2.log_only() {
                    while let Some((_, key, queue, fields)) =
                        writes.next_if(|(t, _, _, f)| *t == task_id && f.log_only())
                    {
                        run.push((key, queue, fields));
                    }
                }
                if run.len() > 1
                    && let Some(first) = append_log_only(&mut *conn, &task_id, &run).await?
                {
                    for seq in first..first + run.len() as i64 {
                        let one = Appended { seq, new: true, pushes: false, rewrote: false };
                        tell(&mut told, &task_id, one);
                        appended.push(one);
                    }
                    continue;
                }
                // The last of the task's appends in a row announces itself when it can: not
                // after a cut of this batch, whose announcement must reach the other processes
                // first (a reader past the cut would take the appends after it for cut ones).
                let last_of_task = writes.peek().is_none_or(|(t, ..)| *t != task_id);
                let last = run.len() - 1;
                for (i, (key, task_queue, fields)) in run.into_iter().enumerate() {
                    let announce = announce_head
                        .as_deref()
                        .filter(|_| last_of_task && i == last && !told.iter().any(|(_, _, rewound)| *rewound));
                    let result =
                        append(&mut *conn, task_id.clone(), key, task_queue, fields, &mut uncounted.1, announce).await;
                    let (one, announced) = match result {
                        // Refused after the events before it wrote: the whole batch goes back
                        // (a refusal that wrote nothing leaves the batch standing).
                        Err(e @ StoreError::Closed(_)) if appended.iter().any(|a: &Appended| a.new || a.rewrote) => {
                            return Err(StoreError::Batch(format!(
                                "{e}, after events of the same append that ended it; none of them was written"
                            )));
                        }
                        other => other?,
                    };
                    tell(&mut told, &task_id, one);
                    if announced {
                        // Its statement told the task's newest seq, all `tell` held for it.
                        told.pop();
                    }
                    appended.push(one);
                }
            }
            count_users(&mut *conn, &uncounted.0, uncounted.1).await?;
            for (task_id, seq, rewrote) in told {
                crate::listen::announce(conn, origin.as_deref(), &task_id, seq, rewrote).await?;
            }
            Ok(appended)
        })
        .await
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
        // The workflow's head stands for its newest status: its metadata is what that says.
        let status_md = metadata_json(head.metadata.as_ref())?;
        let state = head.status.state.as_str();
        let notify_id = task_id.clone();
        let origin = self.origin.clone();
        let cut = transaction!(self, move |conn| {
            let still = conn
                .execute(
                    "UPDATE tasks SET updated_at = updated_at WHERE task_id = $1 AND last_seq = $2 AND rewrites = $3",
                    args![task_id.as_str(), last_seq, rewrites],
                )
                .await?;
            if still == 0 || last_seq <= keep_through {
                return Ok(false);
            }
            rewind(conn, &task_id, keep_through + 1, Some(kept)).await?;
            conn.execute(
                "UPDATE tasks SET state = $2, status = $3, status_ts = CASE WHEN $4 = '' THEN status_ts ELSE $4 END, \
                         snapshot = $5, status_md = $6 WHERE task_id = $1",
                args![task_id.as_str(), state, &status, &status_ts, &snapshot, &status_md],
            )
            .await?;
            crate::listen::announce(conn, origin.as_deref(), &task_id, keep_through + 1, true).await?;
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
mod tests;
