//! ListTasks over the stored tasks of one queue (S13, S19): filters, keyset paging on
//! `(status_ts, task_id)`, the total before paging.
//!
//! The WHERE clause is built by [`Filter`], which numbers its `$n` placeholders as it binds.
//! sqlx's `QueryBuilder` would be the library's way, but over the `Any` driver it writes `?`
//! placeholders (sqlx-core 0.8 `Arguments::format_placeholder`), which Postgres rejects.

use crate::{Store, StoreError};
use a2a_types::{Task, TaskState};
use sqlx::Row;

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

/// A WHERE clause and its values, each condition's `?` numbered `$n` as it is added.
#[derive(Clone)]
struct Filter {
    sql: String,
    values: Vec<String>,
}

impl Filter {
    fn new(first: &str, value: &str) -> Self {
        Self { sql: first.replace('?', "$1"), values: vec![value.to_string()] }
    }

    /// Adds `AND condition`, binding `values` to its `?`s in order.
    fn and(&mut self, condition: &str, values: &[&str]) {
        let mut parts = condition.split('?');
        self.sql.push_str(" AND ");
        self.sql.push_str(parts.next().unwrap_or(""));
        for (part, value) in parts.zip(values) {
            self.values.push(value.to_string());
            self.sql.push_str(&format!("${}{part}", self.values.len()));
        }
    }

    fn query<'q>(&'q self, sql: &'q str) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        self.values.iter().fold(sqlx::query(sql), |q, v| q.bind(v.as_str()))
    }
}

impl Store {
    /// Tasks of a queue matching the filters, newest status timestamp first (ties by id,
    /// descending), with the current status from the status column.
    pub async fn list_tasks(&self, q: &TaskQuery) -> Result<TaskPage, StoreError> {
        let mut filter = Filter::new("task_queue = ? AND snapshot <> ''", &q.task_queue);
        if !q.context_id.is_empty() {
            filter.and("context_id = ?", &[&q.context_id]);
        }
        if let Some(state) = q.state {
            filter.and("state = ?", &[state.as_str()]);
        }
        if let Some(since) = &q.since {
            filter.and("status_ts >= ?", &[since]);
        }
        if let Some(p) = &q.participant {
            filter.and(
                "EXISTS (SELECT 1 FROM task_participants p WHERE p.task_id = tasks.task_id AND p.participant_id = ?)",
                &[p],
            );
        }
        let count_sql = format!("SELECT COUNT(*) AS n FROM tasks WHERE {}", filter.sql);
        let total: i64 = filter.query(&count_sql).fetch_one(self.reads()).await?.try_get("n")?;
        let mut page = filter.clone();
        if let Some((ts, id)) = &q.after {
            page.and("(status_ts < ? OR (status_ts = ? AND task_id < ?))", &[ts, ts, id]);
        }
        let page_sql = format!(
            "SELECT task_id, snapshot, status, status_ts, state FROM tasks WHERE {} \
             ORDER BY status_ts DESC, task_id DESC LIMIT {}",
            page.sql,
            q.limit + 1
        );
        let rows = page.query(&page_sql).fetch_all(self.reads()).await?;
        let mut tasks = Vec::new();
        let mut next = None;
        for (i, r) in rows.iter().enumerate().take(usize::try_from(q.limit).unwrap_or(0)) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(list_tasks_pages_newest_first_filters_and_shows_the_current_status, list_tasks_paging);

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
}
