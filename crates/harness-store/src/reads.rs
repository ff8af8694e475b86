//! Reads of the task rows and the log: a task's head, its stored row, its events from a
//! cursor, and the queries of `/_monitor` and the reconciler.

use crate::sql::TERMINAL_STATES;
use crate::{Artifacts, Store, StoreError};
use a2a_types::{Artifact, Message, Shared, StreamResponse, Struct, Task, TaskState};
use sqlx::Row;
use std::sync::LazyLock;

/// How many of a task's newest accepted messages [`Store::unstored_messages`] looks at: more
/// than a turn has queued behind it in any use seen.
const UNSTORED_LOOK: i64 = 64;
/// How many events one read of a task's log takes at most.
pub const LOG_PAGE: i64 = 256;

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
    /// How often the log was cut back (a reconciler compares it before cutting): the log's
    /// epoch, which SSE ids carry (issue 34).
    pub rewrites: i64,
    /// The seq the newest cut started at (0: never cut): events from it on were rewritten.
    pub rewrote_from: i64,
}

/// An open task as `/_monitor` shows it from the store.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenTask {
    pub task_id: String,
    pub state: TaskState,
    /// Messages its senders sent.
    pub turns: u32,
    /// The stored snapshot's metadata (as of the newest final status).
    pub metadata: Option<Struct>,
    /// The newest status event's metadata; `None` for a row written before it was kept.
    pub status_md: Option<Struct>,
}

/// The stored row of a task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    /// The snapshot with the newest status (the status column's) and the history and
    /// artifacts asked for.
    pub task: Task,
    pub state: TaskState,
    pub last_seq: i64,
    pub task_queue: String,
    /// The newest status event's metadata; `None` for a row written before it was kept.
    pub status_md: Option<Struct>,
}

/// A task's row as [`Store::task_row`] read it.
struct ReadRow {
    row: TaskRow,
    /// The task's count of the log's cuts.
    rewrites: i64,
    /// The history index of the oldest message read (`None`: none was).
    history_from: Option<i64>,
    /// The history index of the task's newest message (-1: it has none).
    history_to: i64,
    /// The JSON of the messages read, in bytes.
    history_bytes: usize,
    /// The artifacts read, with their places (`task.artifacts` is left empty).
    placed: Vec<(i64, Shared<Artifact>)>,
    /// Their JSON, in bytes.
    artifacts_bytes: usize,
}

/// Artifacts read whole (the newest `limit` by place) as a tail holds them.
fn placed_artifacts(
    artifacts: Vec<(i64, Shared<Artifact>)>,
    bytes: usize,
    seq: i64,
    limit: i64,
) -> crate::tails::PlacedArtifacts {
    crate::tails::PlacedArtifacts { seq, limit, artifacts, bytes, reads: 0 }
}

/// The metadata of the newest status event as stored ("" before it was kept).
fn status_md(text: &str) -> Result<Option<Struct>, StoreError> {
    if text.is_empty() { Ok(None) } else { Ok(Some(serde_json::from_str(text)?)) }
}

/// The items of a JSON array the database wrote without its brackets (`None`: no rows).
fn items<T: serde::de::DeserializeOwned>(joined: Option<&str>) -> Result<Vec<T>, StoreError> {
    match joined {
        None => Ok(Vec::new()),
        Some(joined) => {
            let mut array = String::with_capacity(joined.len() + 2);
            array.push('[');
            array.push_str(joined);
            array.push(']');
            Ok(serde_json::from_str(&array)?)
        }
    }
}

/// Events the database wrote as `[seq, event]` items, in the log's order.
fn logged(joined: Option<&str>) -> Result<Vec<LoggedEvent>, StoreError> {
    let placed = in_place_order(items::<(i64, StreamResponse)>(joined)?);
    Ok(placed.into_iter().map(|(seq, event)| LoggedEvent { seq, event }).collect())
}

/// Items read with their places, ordered by place.
fn in_place_order<T>(mut placed: Vec<(i64, T)>) -> Vec<(i64, T)> {
    placed.sort_unstable_by_key(|(place, _)| *place);
    placed
}

impl Store {
    /// Events of a task with `seq > after`, in order, at most `limit`.
    pub async fn events_after(&self, task_id: &str, after: i64, limit: i64) -> Result<Vec<LoggedEvent>, StoreError> {
        let rows = self
            .read_rows(
                "SELECT seq, body FROM events WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                args![task_id, after, limit],
            )
            .await?;
        rows.iter().map(|r| Ok(LoggedEvent { seq: r.int(0)?, event: serde_json::from_str(&r.text(1)?)? })).collect()
    }

    /// [`Store::events_after`] and, in the same read, how often the task's log was cut back
    /// (its epoch, which a streamed event's id carries; 0 while its log has not begun): a
    /// stream's first read (issue 31: one read less per streamed message).
    pub async fn events_after_in_epoch(
        &self,
        task_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<(Vec<LoggedEvent>, i64), StoreError> {
        let rows = self
            .read_rows(
                "SELECT CASE WHEN t.snapshot <> '' THEN t.rewrites ELSE 0 END, \
                 (SELECT string_agg('[' || e.seq || ',' || e.body || ']', ',') FROM (SELECT seq, body FROM events \
                   WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) e) \
                 FROM tasks t WHERE t.task_id = $1",
                args![task_id, after, limit],
            )
            .await?;
        let Some(r) = rows.first() else { return Ok((Vec::new(), 0)) };
        Ok((logged(r.opt_text(1)?.as_deref())?, r.int(0)?))
    }

    /// State, context and newest seq of a task whose log has begun (no snapshot parsing).
    pub async fn task_head(&self, task_id: &str) -> Result<Option<TaskHead>, StoreError> {
        let rows = self
            .read_rows(
                "SELECT state, context_id, last_seq, task_queue, rewrites, rewrote_from FROM tasks \
                 WHERE task_id = $1 AND snapshot <> ''",
                args![task_id],
            )
            .await?;
        rows.first().map(head_of).transpose()
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
        Ok(self.log_and_task(task_id, None, history_length, artifacts).await?.1)
    }

    /// The events of a task after seq `after` (at most [`LOG_PAGE`], as
    /// [`Store::events_after`] reads them) and its row as [`Store::task_with`] reads it, in
    /// one statement when `after` is given: a blocking SendMessage's answer is the log
    /// from its receipt to the final event and the row, and with an instant model the
    /// final event is there when the message is accepted (issue 31: one read less per
    /// message). The row is read in the same snapshot as the events, or after it.
    pub async fn log_and_task(
        &self,
        task_id: &str,
        after: Option<i64>,
        history_length: Option<i32>,
        artifacts: Artifacts,
    ) -> Result<(Vec<LoggedEvent>, Option<TaskRow>), StoreError> {
        self.log_and_task_after(task_id, after, history_length, artifacts, None).await
    }

    /// Records that the workflow accepted the audited message `request_id` with its receipt
    /// at `cursor` (as [`Store::set_inbox_outcome`]), then reads the log after `cursor` and
    /// the task's row (as [`Store::log_and_task`]): what a blocking SendMessage does once its
    /// message is accepted. On Postgres the write and the read are one statement; on SQLite
    /// they run on the writing connection, in one transaction, whose page cache no commit
    /// empties (issue 31).
    pub async fn accepted_then_log_and_task(
        &self,
        request_id: &str,
        task_id: &str,
        cursor: i64,
        history_length: Option<i32>,
        artifacts: Artifacts,
    ) -> Result<(Vec<LoggedEvent>, Option<TaskRow>), StoreError> {
        self.log_and_task_after(task_id, Some(cursor), history_length, artifacts, Some(request_id)).await
    }

    /// [`Store::log_and_task`], writing first, in the same statement (Postgres) or
    /// transaction (SQLite), the outcome of an accepted message (`accepted`, its audit row's
    /// request id; with `after`).
    async fn log_and_task_after(
        &self,
        task_id: &str,
        after: Option<i64>,
        history_length: Option<i32>,
        artifacts: Artifacts,
        accepted: Option<&str>,
    ) -> Result<(Vec<LoggedEvent>, Option<TaskRow>), StoreError> {
        let history_limit = match history_length {
            None => i64::MAX,
            Some(n) => i64::from(n.max(0)),
        };
        let artifacts_limit = match artifacts {
            Artifacts::All => i64::MAX,
            Artifacts::Newest(n) => n,
        };
        // The tail of the task's history kept from an earlier answer: then only the messages
        // after it are read, and the artifacts written since it (tails.rs). An answer of all
        // the history, or of more than a tail holds, reads them all.
        let tail = match history_limit {
            1..=crate::tails::MOST_MESSAGES => self.tails.get(task_id),
            _ => None,
        }
        .filter(|tail| tail.messages.len() as i64 >= history_limit || tail.first == 0);
        let Some(tail) = tail else {
            return self.task_with_whole_window(task_id, history_limit, artifacts_limit, after, accepted).await;
        };
        let held = tail.artifacts.as_ref().filter(|a| a.limit == artifacts_limit && a.fresh());
        let (events, read) = self
            .task_row(task_id, history_limit, artifacts_limit, tail.last(), held.map(|a| a.seq), after, accepted)
            .await?;
        let Some(mut read) = read else {
            self.tails.forget(task_id);
            return Ok((events, None));
        };
        let added = std::mem::take(&mut read.row.task.history);
        // The tail holds when no cut came since (the rows it holds are still there) and the
        // messages read follow it without a gap, or are all the answer needs.
        let holds = tail.rewrites == read.rewrites
            && read.history_to >= tail.last()
            && (added.len() as i64 >= history_limit || read.history_from.is_none_or(|from| from == tail.last() + 1));
        let Some((kept, bytes)) =
            holds.then(|| tail.extended(added, read.history_bytes, history_limit as usize)).flatten()
        else {
            // Read again whole: later than the events, as a row read after them would be.
            let (_, row) = self.task_with_whole_window(task_id, history_limit, artifacts_limit, None, None).await?;
            return Ok((events, row));
        };
        let answered = kept.len().saturating_sub(history_limit as usize);
        read.row.task.history = kept[answered..].to_vec();
        let placed = std::mem::take(&mut read.placed);
        let artifacts = match held {
            // Only those written since were read: the same cut check holds for them.
            Some(held) => held.with(placed, read.artifacts_bytes, read.row.last_seq),
            None => placed_artifacts(placed, read.artifacts_bytes, read.row.last_seq, artifacts_limit),
        };
        read.row.task.artifacts = artifacts.answer();
        let first = read.history_to - kept.len() as i64 + 1;
        let tail =
            crate::tails::Tail { rewrites: read.rewrites, first, messages: kept, bytes, artifacts: Some(artifacts) };
        self.tails.put(task_id, tail);
        Ok((events, Some(read.row)))
    }

    /// [`Store::log_and_task_after`] read without a tail: the whole window, kept as the task's
    /// tail.
    async fn task_with_whole_window(
        &self,
        task_id: &str,
        history_limit: i64,
        artifacts_limit: i64,
        after: Option<i64>,
        accepted: Option<&str>,
    ) -> Result<(Vec<LoggedEvent>, Option<TaskRow>), StoreError> {
        let (events, read) = self.task_row(task_id, history_limit, artifacts_limit, -1, None, after, accepted).await?;
        let Some(read) = read else {
            self.tails.forget(task_id);
            return Ok((events, None));
        };
        Ok((events, Some(self.keep_tail(task_id, history_limit, artifacts_limit, read))))
    }

    /// Keeps the history and artifacts of an answer read whole, with a window a tail can
    /// hold, as the task's tail; the answer's row.
    fn keep_tail(&self, task_id: &str, history_limit: i64, artifacts_limit: i64, mut read: ReadRow) -> TaskRow {
        if !(1..=crate::tails::MOST_MESSAGES).contains(&history_limit) {
            read.row.task.artifacts = read.placed.into_iter().map(|(_, a)| a).collect();
            return read.row;
        }
        let history = &read.row.task.history;
        let first = read.history_to - history.len() as i64 + 1;
        let messages = history.clone();
        let artifacts = placed_artifacts(read.placed, read.artifacts_bytes, read.row.last_seq, artifacts_limit);
        read.row.task.artifacts = artifacts.answer();
        let tail = crate::tails::Tail {
            rewrites: read.rewrites,
            first,
            messages,
            bytes: read.history_bytes,
            artifacts: Some(artifacts),
        };
        self.tails.put(task_id, tail);
        read.row
    }

    /// The task's row with the newest `history_limit` of its messages after index `after`
    /// (all: -1), and its newest `artifacts_limit` artifacts by place, or when
    /// `artifacts_after` is given every artifact written by an event after that seq, in
    /// one statement; with `events_after`, the log's events after that seq too, and with
    /// `accepted`, first the audit row's outcome of that request, accepted at
    /// `events_after`.
    #[allow(clippy::too_many_arguments)]
    async fn task_row(
        &self,
        task_id: &str,
        history_limit: i64,
        artifacts_limit: i64,
        after: i64,
        artifacts_after: Option<i64>,
        events_after: Option<i64>,
        accepted: Option<&str>,
    ) -> Result<(Vec<LoggedEvent>, Option<ReadRow>), StoreError> {
        // One statement (issue 31): the row, with its newest history and artifacts written
        // into it as JSON arrays' items by the database (each as `[place, item]`, in no
        // order: an aggregate with an ORDER BY costs SQLite a temporary b-tree on every run,
        // and the places order them here), each read through an index from the newest
        // (`task_artifacts_by_place`) or from a seq (`task_artifacts_by_seq`), so the cost is
        // what is read; and the first and last index of the messages read, and the count of
        // the log's cuts, which say whether a tail kept from before still holds (tails.rs).
        // $3 is the artifacts' limit, or the seq they were written after. With the log, its
        // events after $5 (at most $6) as `[seq, event]` items, from the events' table
        // outside the task's row: a task with no row yet reads none. With an outcome, the
        // audit row $7 takes outcome $8 and cursor $5 first (Postgres runs a data-modifying
        // WITH once, whatever the query reads of it).
        fn row(artifacts: &str, events: bool, accepted: bool) -> String {
            let (events, accepted) = match (events, accepted) {
                (false, _) => ("NULL", ""),
                (true, accepted) => (
                    "(SELECT string_agg('[' || e.seq || ',' || e.body || ']', ',') FROM (SELECT seq, body FROM events \
                     WHERE task_id = $1 AND seq > $5 ORDER BY seq LIMIT $6) e)",
                    if accepted {
                        "WITH o AS (UPDATE inbox SET outcome = $8, receipt_cursor = $5 WHERE request_id = $7) "
                    } else {
                        ""
                    },
                ),
            };
            format!(
                "{accepted}SELECT t.snapshot, t.state, t.status, t.status_md, t.last_seq, t.task_queue, \
                 (SELECT string_agg('[' || h.idx || ',' || h.message || ']', ',') FROM (SELECT idx, message \
                   FROM task_history WHERE task_id = $1 AND idx > $4 ORDER BY idx DESC LIMIT $2) h) AS history, \
                 (SELECT string_agg('[' || a.idx || ',' || a.body || ']', ',') FROM {artifacts} a) AS artifacts, \
                 t.rewrites, \
                 (SELECT MIN(h.idx) FROM (SELECT idx FROM task_history \
                   WHERE task_id = $1 AND idx > $4 ORDER BY idx DESC LIMIT $2) h) AS history_from, \
                 (SELECT MAX(idx) FROM task_history WHERE task_id = $1) AS history_to, \
                 {events} AS events \
                 FROM tasks t WHERE t.task_id = $1"
            )
        }
        // By [artifacts newest, written after][nothing more, the log, the log after an outcome].
        static SQL: LazyLock<[[String; 3]; 2]> = LazyLock::new(|| {
            let newest = "(SELECT idx, body FROM task_artifacts WHERE task_id = $1 ORDER BY idx DESC LIMIT $3)";
            let written_after = "(SELECT idx, body FROM task_artifacts WHERE task_id = $1 AND seq > $3)";
            [newest, written_after].map(|a| [row(a, false, false), row(a, true, false), row(a, true, true)])
        });
        let (artifacts, third) = match artifacts_after {
            None => (0, artifacts_limit),
            Some(seq) => (1, seq),
        };
        let rows = match (events_after, accepted) {
            (None, _) => self.read_rows(&SQL[artifacts][0], args![task_id, history_limit, third, after]).await?,
            (Some(seq), None) => {
                self.read_rows(&SQL[artifacts][1], args![task_id, history_limit, third, after, seq, LOG_PAGE]).await?
            }
            (Some(seq), Some(request_id)) if matches!(self.writes, crate::Writes::Sqlite(_)) => {
                // SQLite: the outcome's write and the read on the writing connection, in its
                // transaction: its pages are in that connection's cache, which no commit
                // empties, where a read connection's is emptied by every commit (issue 31).
                // The rows are answered once the transaction has committed. A read that fails
                // leaves the batch's writes alone: its error is this caller's only.
                let sql: &'static str = &SQL[artifacts][1];
                let (task_id, request_id) = (task_id.to_string(), request_id.to_string());
                let outcome = crate::InboxOutcome::Accepted(seq).as_text();
                statement!(self, move |conn| {
                    conn.execute(crate::inbox::SET_OUTCOME, args![&request_id, &outcome, Some(seq)]).await?;
                    Ok(conn.fetch_all(sql, args![&task_id, history_limit, third, after, seq, LOG_PAGE]).await)
                })
                .await??
            }
            (Some(seq), Some(request_id)) => {
                let outcome = crate::InboxOutcome::Accepted(seq).as_text();
                let args = args![task_id, history_limit, third, after, seq, LOG_PAGE, request_id, &outcome];
                self.read_rows(&SQL[artifacts][2], args).await?
            }
        };
        let Some(r) = rows.first() else {
            return Ok((Vec::new(), None));
        };
        let events = logged(r.opt_text(11)?.as_deref())?;
        let snapshot = r.text(0)?;
        if snapshot.is_empty() {
            return Ok((events, None));
        }
        let mut task: Task = serde_json::from_str(&snapshot)?;
        let state: TaskState = r.text(1)?.parse().unwrap_or_default();
        // The snapshot is written with final statuses; a later event (a WORKING status) may
        // have moved the status on.
        let status = r.text(2)?;
        if !status.is_empty() {
            task.status = serde_json::from_str(&status)?;
        }
        task.status.state = state;
        let history = r.opt_text(6)?;
        task.history = in_place_order(items(history.as_deref())?).into_iter().map(|(_, m)| m).collect();
        let artifacts = r.opt_text(7)?;
        let read = ReadRow {
            history_bytes: history.map_or(0, |h| h.len()),
            placed: in_place_order(items(artifacts.as_deref())?),
            artifacts_bytes: artifacts.map_or(0, |a| a.len()),
            row: TaskRow {
                task,
                state,
                last_seq: r.int(4)?,
                task_queue: r.text(5)?.into_owned(),
                status_md: status_md(&r.text(3)?)?,
            },
            rewrites: r.int(8)?,
            history_from: r.opt_int(9)?,
            history_to: r.opt_int(10)?.unwrap_or(-1),
        };
        Ok((events, Some(read)))
    }

    /// The task queue that owns a task, when its log has begun (S19).
    pub async fn task_queue_of(&self, task_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT task_queue FROM tasks WHERE task_id = $1")
            .bind(task_id)
            .fetch_optional(self.reads())
            .await?;
        row.map(|r| r.try_get("task_queue")).transpose().map_err(Into::into)
    }

    /// How many tasks of a queue are open (their log has begun and not ended), by state:
    /// what `GET /metrics` reports (issue 32), one grouped read of the queue's index.
    pub async fn open_task_counts(&self, task_queue: &str) -> Result<Vec<(TaskState, i64)>, StoreError> {
        static COUNTS: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT state, COUNT(*) AS n FROM tasks WHERE task_queue = $1 AND snapshot <> '' AND state NOT IN ({}) \
                 GROUP BY state",
                *TERMINAL_STATES
            )
        });
        let rows = sqlx::query(&COUNTS).bind(task_queue).fetch_all(self.reads()).await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<String, _>("state")?.parse().unwrap_or_default(), r.try_get("n")?)))
            .collect()
    }

    /// The tasks of a queue whose log has not ended, newest status first (at most 1000), with
    /// their state, substate (the status extension's, from the stored head) and how many
    /// messages their senders sent (turns taken, for a parked task): what `/_monitor` shows
    /// without asking Temporal.
    pub async fn open_task_states(&self, task_queue: &str) -> Result<Vec<OpenTask>, StoreError> {
        static OPEN: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT t.task_id, t.state, t.snapshot, t.status_md, t.user_messages AS turns FROM tasks t \
                 WHERE t.task_queue = $1 AND t.snapshot <> '' AND t.state NOT IN ({}) ORDER BY t.status_ts DESC LIMIT 1000",
                *TERMINAL_STATES
            )
        });
        let rows = sqlx::query(&OPEN).bind(task_queue).fetch_all(self.reads()).await?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state")?;
                let snapshot: String = r.try_get("snapshot")?;
                let head: Task = serde_json::from_str(&snapshot)?;
                let turns: i64 = r.try_get("turns")?;
                Ok(OpenTask {
                    task_id: r.try_get("task_id")?,
                    state: state.parse().unwrap_or_default(),
                    turns: u32::try_from(turns).unwrap_or(u32::MAX),
                    metadata: head.metadata,
                    status_md: status_md(&r.try_get::<String, _>("status_md")?)?,
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

    /// The messages its workflow accepted that the task's stored history does not hold yet,
    /// in the order they were accepted (issue 20): a message queued behind a running turn is
    /// stored with the turn's next event, so a read from the store alone takes it from its
    /// accepted audit row meanwhile. The newest `UNSTORED_LOOK` accepted rows are checked
    /// by id against the newest stored messages (a turn's streamed chunks move the log on
    /// without storing anything, so the log's seq cannot bound them). Only a running task
    /// can have any: a final status stores every message its workflow took.
    pub async fn unstored_messages(&self, task_id: &str) -> Result<Vec<Message>, StoreError> {
        let rows = sqlx::query(
            "SELECT body FROM inbox WHERE task_id = $1 AND outcome = 'accepted' \
             ORDER BY receipt_cursor DESC, received_at DESC, request_id DESC LIMIT $2",
        )
        .bind(task_id)
        .bind(UNSTORED_LOOK)
        .fetch_all(self.reads())
        .await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut accepted = rows
            .iter()
            .map(|r| Ok(serde_json::from_str::<Message>(&r.try_get::<String, _>("body")?)?))
            .collect::<Result<Vec<_>, StoreError>>()?;
        accepted.reverse();
        // Where those are if stored: among the newest rows, with the replies between them.
        let tail = sqlx::query("SELECT message FROM task_history WHERE task_id = $1 ORDER BY idx DESC LIMIT $2")
            .bind(task_id)
            .bind(4 * accepted.len() as i64 + 16)
            .fetch_all(self.reads())
            .await?;
        #[derive(serde::Deserialize)]
        struct Id {
            #[serde(rename = "messageId", default)]
            message_id: String,
        }
        let mut stored = std::collections::HashSet::new();
        for r in &tail {
            stored.insert(serde_json::from_str::<Id>(&r.try_get::<String, _>("message")?)?.message_id);
        }
        let mut seen = std::collections::HashSet::new();
        // A message with no parts is a brief alone (S22): the workflow records nothing of it.
        Ok(accepted
            .into_iter()
            .filter(|m| !m.parts.is_empty() && !stored.contains(&m.message_id) && seen.insert(m.message_id.clone()))
            .collect())
    }

    /// Ids of every task whose log has begun.
    pub async fn task_ids(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT task_id FROM tasks ORDER BY task_id").fetch_all(self.reads()).await?;
        rows.iter().map(|r| Ok(r.try_get("task_id")?)).collect()
    }
}

/// A task's head from the first six columns of `r`: state, context, last seq, task queue,
/// and the log's cuts (count and where the last began).
pub(crate) fn head_of(r: &crate::conn::Row) -> Result<TaskHead, StoreError> {
    Ok(TaskHead {
        state: r.text(0)?.parse().unwrap_or_default(),
        context_id: r.text(1)?.into_owned(),
        last_seq: r.int(2)?,
        task_queue: r.text(3)?.into_owned(),
        rewrites: r.int(4)?,
        rewrote_from: r.int(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(the_reconciler_looks_at_open_tasks_that_changed_last, recently_changed);
    on_both!(a_read_from_the_store_alone_has_the_newest_status_and_the_accepted_messages, store_alone);

    fn user(id: &str) -> a2a_types::Message {
        a2a_types::Message { role: a2a_types::Role::User, task_id: "t".into(), context_id: "c".into(), ..message(id) }
    }

    /// Issue 20: GetTask and the monitor read the store only. Between snapshots the row
    /// shows the newest status and its metadata; a message the workflow accepted and no
    /// event stored yet comes from its audit row, once, until an event stores it.
    async fn store_alone(store: Store) {
        let substate = serde_json::json!({"ns/status": {"substate": "awaiting-next-message"}});
        let md = |v: &serde_json::Value| v.as_object().unwrap().clone().into_iter().collect::<Struct>();
        let mut parked = new("t", "wf-1", status("t", TaskState::InputRequired));
        parked.snapshot =
            Some(Task { id: "t".into(), context_id: "c".into(), metadata: Some(md(&substate)), ..Default::default() });
        parked.history = vec![user("m1")];
        store.append(&parked).await.unwrap();
        let row = store.task("t", None).await.unwrap().unwrap();
        assert_eq!(row.status_md, Some(Struct::new()), "a status without metadata keeps an empty one");
        assert_eq!(row.task.metadata, Some(md(&substate)));

        let mark = serde_json::json!({"ns/sub_task": {"agent": "b", "task_id": "r-1"}});
        let mut working = status("t", TaskState::Working);
        if let StreamResponse::StatusUpdate(u) = &mut working {
            u.status.message = Some(message("progress"));
            u.metadata = Some(md(&mark));
        }
        let at = store.append(&new("t", "wf-2", working)).await.unwrap().seq;
        let row = store.task("t", None).await.unwrap().unwrap();
        assert_eq!(row.task.status.state, TaskState::Working);
        assert_eq!(
            row.task.status.message.as_ref().map(|m| m.message_id.as_str()),
            Some("progress"),
            "the newest status"
        );
        assert_eq!(row.status_md, Some(md(&mark)), "and its metadata");
        let open = store.open_task_states("q").await.unwrap();
        assert_eq!(open[0].status_md, Some(md(&mark)));
        // What GET /metrics reports (issue 32): the queue's open tasks by their newest state.
        assert_eq!(store.open_task_counts("q").await.unwrap(), [(TaskState::Working, 1)]);
        assert!(store.open_task_counts("other").await.unwrap().is_empty());

        // Accepted behind the running turn: m2 (twice: a redelivery), not m3 (refused) or
        // m4 (not answered yet).
        for (req, id, outcome) in [
            ("r2", "m2", crate::InboxOutcome::Accepted(at)),
            ("r2b", "m2", crate::InboxOutcome::Accepted(at)),
            ("r3", "m3", crate::InboxOutcome::Refused("no".into())),
            ("r4", "m4", crate::InboxOutcome::Received),
        ] {
            store.record_inbox(req, "t", &user(id), crate::InboxOutcome::Received, "").await.unwrap();
            store.set_inbox_outcome(req, outcome).await.unwrap();
        }
        assert_eq!(ids(&store.unstored_messages("t").await.unwrap()), ["m2"]);
        // m1 was accepted long before and is stored: not repeated.
        store.record_inbox("r1", "t", &user("m1"), crate::InboxOutcome::Accepted(0), "").await.unwrap();
        store.set_inbox_outcome("r1", crate::InboxOutcome::Accepted(0)).await.unwrap();
        assert_eq!(ids(&store.unstored_messages("t").await.unwrap()), ["m2"]);

        let mut stored = new("t", "wf-3", status("t", TaskState::InputRequired));
        stored.history = vec![user("m2"), message("reply")];
        stored.history_from = 1;
        store.append(&stored).await.unwrap();
        assert!(store.unstored_messages("t").await.unwrap().is_empty(), "stored by the next event");
        assert!(store.unstored_messages("other").await.unwrap().is_empty());
        assert_eq!(store.open_task_counts("q").await.unwrap(), [(TaskState::InputRequired, 1)]);
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
