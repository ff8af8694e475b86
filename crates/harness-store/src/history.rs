//! A task's history and artifacts: one row per message (`task_history`, by index) and one
//! per artifact (`task_artifacts`, by id, in the order the artifacts first appeared). An
//! event carries only what changed since the event before it, so storing a turn costs the
//! same in a long conversation as in a short one; reads put the task back together from its
//! row's snapshot (the task's head) and these rows (docs/event-log.md).

use crate::NewEvent;
use crate::conn::Conn;
use crate::{Store, StoreError};
use a2a_types::{Artifact, Message, Task};
use sqlx::Row;
use std::collections::HashMap;

/// What an event adds to its task's history and artifacts, serialised before the writer
/// is taken.
#[derive(Default)]
pub(crate) struct Changes {
    /// (index, message JSON, sent by a user)
    messages: Vec<(i64, String, bool)>,
    /// (index, artifact id, artifact JSON)
    artifacts: Vec<(i64, String, String)>,
}

impl Changes {
    /// Nothing to write: no message, no artifact.
    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.artifacts.is_empty()
    }

    /// The event's changes; a snapshot that still carries a history or artifacts (a whole
    /// task) counts them as changes from index 0.
    pub(crate) fn of(e: &NewEvent) -> Result<Self, StoreError> {
        let mut changes = Self::default();
        if let Some(task) = &e.snapshot {
            changes.add_task(task)?;
        }
        changes.add(e.history_from, e.history.iter(), e.artifacts.iter().map(|(i, a)| (*i, a)))?;
        Ok(changes)
    }

    fn add_task(&mut self, task: &Task) -> Result<(), StoreError> {
        self.add(0, task.history.iter().map(|m| &**m), task.artifacts.iter().enumerate().map(|(i, a)| (i as i64, &**a)))
    }

    /// Messages from index `from` on, and artifacts with their places.
    fn add<'a>(
        &mut self,
        from: i64,
        messages: impl Iterator<Item = &'a Message>,
        artifacts: impl Iterator<Item = (i64, &'a Artifact)>,
    ) -> Result<(), StoreError> {
        for (i, m) in messages.enumerate() {
            self.messages.push((from + i as i64, serde_json::to_string(m)?, m.role == a2a_types::Role::User));
        }
        for (idx, a) in artifacts {
            self.artifacts.push((idx, a.artifact_id.clone(), serde_json::to_string(a)?));
        }
        Ok(())
    }

    /// Writes the changes inside the event's transaction. A message is written once (a
    /// retried event finds it there); an artifact replaces the one with its id, keeps that
    /// one's place and takes the event's `seq` (what an answer's tail reads after, tails.rs).
    pub(crate) async fn write(&self, conn: &mut Conn<'_>, task_id: &str, seq: i64) -> Result<(), StoreError> {
        if self.is_empty() {
            return Ok(());
        }
        if let Conn::Any(_) = conn
            && let Some((messages, artifacts)) = self.as_json_arrays()?
        {
            // On Postgres, where each statement is a round trip, all of them in one (issue 31).
            conn.execute(&CHANGES_PG, args![task_id, messages.as_str(), artifacts.as_str(), seq]).await?;
            return Ok(());
        }
        let mut from_users = 0i64;
        for (idx, message, from_user) in &self.messages {
            let written = conn
                .execute(
                    "INSERT INTO task_history (task_id, idx, message) VALUES ($1, $2, $3) \
                     ON CONFLICT (task_id, idx) DO NOTHING",
                    args![task_id, *idx, message],
                )
                .await?;
            if *from_user && written == 1 {
                from_users += 1;
            }
        }
        if from_users > 0 {
            conn.execute(
                "UPDATE tasks SET user_messages = user_messages + $2 WHERE task_id = $1",
                args![task_id, from_users],
            )
            .await?;
        }
        for (idx, artifact_id, body) in &self.artifacts {
            conn.execute(
                "INSERT INTO task_artifacts (task_id, artifact_id, idx, body, seq) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (task_id, artifact_id) DO UPDATE SET body = excluded.body, seq = excluded.seq",
                args![task_id, artifact_id, *idx, body, seq],
            )
            .await?;
        }
        Ok(())
    }
}

impl Changes {
    /// The changes as the JSON arrays the Postgres statements take ([`changes_ctes`]): the
    /// messages (`[index, message, sent by a user]`) and the artifacts (`[index, id,
    /// artifact]`). `None` when there are none, or when an artifact id comes twice (one
    /// statement cannot write a row twice: those go row by row).
    pub(crate) fn as_json_arrays(&self) -> Result<Option<(String, String)>, StoreError> {
        let ids: std::collections::HashSet<&str> = self.artifacts.iter().map(|(_, id, _)| id.as_str()).collect();
        if self.is_empty() || ids.len() != self.artifacts.len() {
            return Ok(None);
        }
        Ok(Some((serde_json::to_string(&self.messages)?, serde_json::to_string(&self.artifacts)?)))
    }
}

/// The changes of a run of a task's events, in order, as the JSON arrays of one statement
/// ([`changes_ctes`], issue 31): the messages as [`Changes::as_json_arrays`] gives them, each
/// index once (the first, as a message is written once), and the artifacts as `[index, id,
/// artifact, event]`, each id once: the place it first had, and the body it last had with
/// the number of the event (from 1) that gave it (as the run's events one by one would
/// leave the row).
pub(crate) fn run_json_arrays<'a>(run: impl Iterator<Item = &'a Changes>) -> Result<(String, String), StoreError> {
    let (mut messages, mut indexes) = (Vec::new(), std::collections::HashSet::new());
    let (mut artifacts, mut places) = (Vec::<(i64, &str, &str, i64)>::new(), HashMap::new());
    for (event, changes) in (1i64..).zip(run) {
        messages.extend(changes.messages.iter().filter(|(idx, ..)| indexes.insert(*idx)));
        for (idx, id, body) in &changes.artifacts {
            match places.get(id.as_str()) {
                Some(&at) => {
                    let known: &mut (i64, &str, &str, i64) = &mut artifacts[at];
                    (known.2, known.3) = (body, event);
                }
                None => {
                    places.insert(id.as_str(), artifacts.len());
                    artifacts.push((*idx, id, body, event));
                }
            }
        }
    }
    Ok((serde_json::to_string(&messages)?, serde_json::to_string(&artifacts)?))
}

/// The common table expressions that write a task's changes on Postgres, from the JSON
/// arrays `messages` and `artifacts` ([`Changes::as_json_arrays`]) of the task $1, when
/// `only_if` holds: `m` and `a` the rows, `h` the indexes of the messages written (a message
/// is written once), `w` the artifacts written (each replaces the one with its id, keeps that
/// one's place and takes the seq `seq`, an expression of the artifact's JSON `v`).
pub(crate) fn changes_ctes(messages: &str, artifacts: &str, seq: &str, only_if: &str) -> String {
    format!(
        "m AS (SELECT (v->>0)::bigint AS idx, v->>1 AS message, (v->>2)::boolean AS from_user \
         FROM json_array_elements({messages}::json) AS v WHERE {only_if}), \
         a AS (SELECT (v->>0)::bigint AS idx, v->>1 AS artifact_id, v->>2 AS body, {seq} AS seq \
         FROM json_array_elements({artifacts}::json) AS v WHERE {only_if}), \
         h AS (INSERT INTO task_history (task_id, idx, message) SELECT $1, idx, message FROM m \
         ON CONFLICT (task_id, idx) DO NOTHING RETURNING idx), \
         w AS (INSERT INTO task_artifacts (task_id, artifact_id, idx, body, seq) \
         SELECT $1, artifact_id, idx, body, seq FROM a \
         ON CONFLICT (task_id, artifact_id) DO UPDATE SET body = excluded.body, seq = excluded.seq)"
    )
}

/// How many of the messages [`changes_ctes`] wrote were a sender's (a retry writes none).
pub(crate) const USERS_WRITTEN: &str = "(SELECT COUNT(*) FROM h JOIN m USING (idx) WHERE m.from_user)";

/// [`Changes::write`] on Postgres in one statement: the messages $2 and the artifacts $3 of
/// the event at seq $4, the senders' messages among those written counted on the task.
static CHANGES_PG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH {} UPDATE tasks SET user_messages = user_messages + {USERS_WRITTEN} \
         WHERE task_id = $1 AND {USERS_WRITTEN} > 0",
        changes_ctes("$2", "$3", "$4::bigint", "true")
    )
});

/// Which artifacts a read puts back into its tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Artifacts {
    All,
    /// The newest `n` (by their place in the task).
    Newest(i64),
}

/// `$first, $first+1, ...` for `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

impl Store {
    /// Puts the history (the newest `history_length` messages; all of them when `None`, none
    /// for `Some(0)`) and, when asked, the artifacts back into tasks read from their rows.
    pub(crate) async fn fill(
        &self,
        tasks: &mut [Task],
        history_length: Option<i32>,
        artifacts: bool,
    ) -> Result<(), StoreError> {
        if tasks.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
        let at: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        let listed = placeholders(1, ids.len());
        if history_length != Some(0) {
            let newest = history_length.map(|n| i64::from(n.max(0)));
            let sql = match newest {
                None => format!(
                    "SELECT task_id, message AS body FROM task_history WHERE task_id IN ({listed}) \
                     ORDER BY task_id, idx"
                ),
                Some(_) => format!(
                    "SELECT task_id, message AS body FROM (SELECT task_id, idx, message, \
                     ROW_NUMBER() OVER (PARTITION BY task_id ORDER BY idx DESC) AS newest \
                     FROM task_history WHERE task_id IN ({listed})) h WHERE newest <= ${} ORDER BY task_id, idx",
                    ids.len() + 1
                ),
            };
            tasks.iter_mut().for_each(|t| t.history.clear());
            for (task_id, body) in self.bodies_by_task(&sql, &ids, newest).await? {
                if let Some(&i) = at.get(task_id.as_str()) {
                    tasks[i].history.push(serde_json::from_str(&body)?);
                }
            }
        }
        if artifacts {
            let sql =
                format!("SELECT task_id, body FROM task_artifacts WHERE task_id IN ({listed}) ORDER BY task_id, idx");
            tasks.iter_mut().for_each(|t| t.artifacts.clear());
            for (task_id, body) in self.bodies_by_task(&sql, &ids, None).await? {
                if let Some(&i) = at.get(task_id.as_str()) {
                    tasks[i].artifacts.push(serde_json::from_str(&body)?);
                }
            }
        }
        Ok(())
    }

    /// `(task_id, body)` rows of a query over the tasks `ids` (then `extra`, when given).
    async fn bodies_by_task(
        &self,
        sql: &str,
        ids: &[String],
        extra: Option<i64>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut query = sqlx::query(sql);
        for id in ids {
            query = query.bind(id.as_str());
        }
        if let Some(v) = extra {
            query = query.bind(v);
        }
        let rows = query.fetch_all(self.reads()).await?;
        rows.iter().map(|r| Ok((r.try_get("task_id")?, r.try_get("body")?))).collect()
    }

    /// The first `before` messages of a task's history, at most the newest `last` of them
    /// (all when `None`), oldest first: what a model turn reads of the conversation.
    pub async fn history(&self, task_id: &str, before: i64, last: Option<usize>) -> Result<Vec<Message>, StoreError> {
        let limit = last.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let rows = self
            .read_rows(
                "SELECT message FROM task_history WHERE task_id = $1 AND idx < $2 ORDER BY idx DESC LIMIT $3",
                args![task_id, before, limit],
            )
            .await?;
        let mut messages = rows
            .iter()
            .map(|r| Ok(serde_json::from_str(&r.text(0)?)?))
            .collect::<Result<Vec<Message>, StoreError>>()?;
        messages.reverse();
        Ok(messages)
    }

    /// Runs the chores the migrations left (`store_chores`), each once.
    pub(crate) async fn run_chores(&self) -> Result<(), StoreError> {
        let chores = sqlx::query("SELECT chore FROM store_chores").fetch_all(self.reads()).await?;
        for r in chores {
            let chore: String = r.try_get("chore")?;
            match chore.as_str() {
                "split-snapshots" => transaction!(self, move |conn| { split_snapshots(conn).await }).await?,
                other => tracing::warn!(chore = other, "unknown store chore left as it is"),
            }
        }
        Ok(())
    }
}

/// Moves the history and artifacts of snapshots written before `task_history` existed into
/// their rows, leaving each snapshot its head. Safe beside a running harness: a snapshot
/// is only replaced if it is still the one read.
async fn split_snapshots(conn: &mut Conn<'_>) -> Result<(), StoreError> {
    let rows = conn.fetch_all("SELECT task_id, snapshot FROM tasks WHERE snapshot <> ''", &[]).await?;
    for r in rows {
        let (task_id, snapshot) = (r.text(0)?, r.text(1)?);
        let task: Task = serde_json::from_str(&snapshot).map_err(|e| {
            StoreError::Batch(format!("the stored snapshot of task {task_id} is not a task ({e}); nothing was split"))
        })?;
        if task.history.is_empty() && task.artifacts.is_empty() {
            continue;
        }
        let mut changes = Changes::default();
        changes.add_task(&task)?;
        // Written before any answer's tail was kept (seq 0): these rows predate the process.
        changes.write(conn, &task_id, 0).await?;
        let head = serde_json::to_string(&task.head())?;
        conn.execute(
            "UPDATE tasks SET snapshot = $2 WHERE task_id = $1 AND snapshot = $3",
            args![&*task_id, &head, &*snapshot],
        )
        .await?;
    }
    conn.execute("DELETE FROM store_chores WHERE chore = 'split-snapshots'", &[]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(history_and_artifacts_are_stored_one_row_each_and_read_back_whole, history_rows);
    on_both!(snapshots_stored_whole_by_an_older_version_are_split_once, split_chore);

    async fn history_rows(store: Store) {
        // The Task event carries a whole task: its one message counts from index 0.
        let mut open = opened("t", "c", "2026-01-01T00:00:01.000Z", "q");
        open.snapshot.as_mut().unwrap().history.push(message("m0").into());
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
        assert_eq!(
            whole.artifacts,
            [artifact("a", "one, then more"), artifact("b", "two")].map(a2a_types::Shared::new)
        );
        assert_eq!(ids(&store.task("t", Some(2)).await.unwrap().unwrap().task.history), ["m2", "m3"]);
        assert!(store.task("t", Some(0)).await.unwrap().unwrap().task.history.is_empty());
        let raw = raw_snapshot(&store, "t").await;
        assert!(!raw.contains("m0") && !raw.contains("one"), "the row keeps the task's head only: {raw}");
        // What a model turn reads of the conversation before index 3.
        assert_eq!(ids(&store.history("t", 3, None).await.unwrap()), ["m0", "m1", "m2"]);
        assert_eq!(ids(&store.history("t", 3, Some(1)).await.unwrap()), ["m2"]);

        let mut other = opened("u", "c", "2026-01-01T00:00:00.000Z", "q");
        other.snapshot.as_mut().unwrap().history.push(message("u0").into());
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
            history: vec![message("m0").into(), message("m1").into()],
            artifacts: vec![artifact("reply-1", "hello").into()],
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

    async fn raw_snapshot(store: &Store, task_id: &str) -> String {
        sqlx::query("SELECT snapshot FROM tasks WHERE task_id = $1")
            .bind(task_id)
            .fetch_one(store.reads())
            .await
            .unwrap()
            .try_get("snapshot")
            .unwrap()
    }
}
