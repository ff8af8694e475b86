//! Push configs of tasks (S14). The token and credentials arrive sealed (encrypted by
//! harness-push); the store keeps them opaque.

use crate::{Store, StoreError, now};
use sqlx::Row;

/// A stored push config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushRow {
    pub task_id: String,
    pub config_id: String,
    pub url: String,
    /// The sealed token and authentication.
    pub sealed: String,
}

impl Store {
    /// Creates or replaces the config `(task_id, config_id)`.
    pub async fn put_push_config(&self, row: &PushRow) -> Result<(), StoreError> {
        let (row, created) = (row.clone(), now());
        self.write(Box::new(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO push_configs (task_id, config_id, url, sealed, created_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (task_id, config_id) DO UPDATE SET url = excluded.url, sealed = excluded.sealed",
                )
                .bind(row.task_id)
                .bind(row.config_id)
                .bind(row.url)
                .bind(row.sealed)
                .bind(created)
                .execute(conn)
                .await?;
                Ok(())
            })
        }))
        .await
    }

    /// The configs of a task, oldest first.
    pub async fn push_configs(&self, task_id: &str) -> Result<Vec<PushRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT task_id, config_id, url, sealed FROM push_configs WHERE task_id = $1 ORDER BY created_at, config_id",
        )
        .bind(task_id)
        .fetch_all(self.reads())
        .await?;
        rows.iter().map(row).collect()
    }

    /// One config, if it exists.
    pub async fn push_config(&self, task_id: &str, config_id: &str) -> Result<Option<PushRow>, StoreError> {
        let r = sqlx::query(
            "SELECT task_id, config_id, url, sealed FROM push_configs WHERE task_id = $1 AND config_id = $2",
        )
        .bind(task_id)
        .bind(config_id)
        .fetch_optional(self.reads())
        .await?;
        r.as_ref().map(row).transpose()
    }

    /// Deletes a config; deleting a missing one is not an error. True when a row went.
    pub async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError> {
        let (task_id, config_id) = (task_id.to_string(), config_id.to_string());
        let deleted = self
            .write(Box::new(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2")
                        .bind(task_id)
                        .bind(config_id)
                        .execute(conn)
                        .await?;
                    Ok(done.rows_affected())
                })
            }))
            .await?;
        Ok(deleted > 0)
    }
}

fn row(r: &sqlx::any::AnyRow) -> Result<PushRow, StoreError> {
    Ok(PushRow {
        task_id: r.try_get("task_id")?,
        config_id: r.try_get("config_id")?,
        url: r.try_get("url")?,
        sealed: r.try_get("sealed")?,
    })
}
