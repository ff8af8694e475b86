//! Push configs of tasks and the outbox of their deliveries (S14). The token and
//! credentials arrive sealed (encrypted by harness-push); the store keeps them opaque.
//!
//! The outbox makes delivery at-least-once across a crash: an append puts its pushed event
//! there for every config of the task in the same transaction, the process delivering it
//! holds it under a lease, and it goes only once posted or given up. A process that finds
//! rows whose lease ran out (or, as an SQLite store's only process, any row when it
//! starts) takes them over.

use crate::{Backend, Store, StoreError, now};
use sqlx::AnyConnection;
use sqlx::Row;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the process that took a push delivery has it before another may take it over.
pub const PUSH_LEASE: Duration = Duration::from_secs(120);

fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The end of a lease taken now (epoch ms).
fn lease_from_now() -> i64 {
    epoch_ms(SystemTime::now() + PUSH_LEASE)
}

/// Puts the event `seq` of `task_id` in the outbox for every config of the task, inside
/// the append's transaction, leased to the appending process.
pub(crate) async fn to_outbox(conn: &mut AnyConnection, task_id: &str, seq: i64) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO push_outbox (task_id, config_id, seq, claim, claimed_until) \
         SELECT task_id, config_id, $2, '', $3 FROM push_configs WHERE task_id = $1",
    )
    .bind(task_id)
    .bind(seq)
    .bind(lease_from_now())
    .execute(conn)
    .await?;
    Ok(())
}

/// A delivery the outbox holds: a pushed event not yet posted to one config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingPush {
    pub task_id: String,
    pub config_id: String,
    pub seq: i64,
    pub url: String,
    /// The sealed token and authentication.
    pub sealed: String,
    /// The event, as the log holds it (`StreamResponse` JSON).
    pub body: String,
}

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

    /// Takes over the outbox's deliveries for the tasks of `task_queue` whose lease ran out
    /// (every one when this process is an SQLite store's only user, just started:
    /// `starting`), leases them anew and returns them in task, config and seq order.
    /// Deleting a config deletes its deliveries, so each has its config.
    pub async fn claim_pushes(&self, task_queue: &str, starting: bool) -> Result<Vec<PendingPush>, StoreError> {
        let claim = uuid::Uuid::new_v4().to_string();
        let take_all = i64::from(starting && self.backend() == Backend::Sqlite);
        let (queue, mine, now_ms, lease) =
            (task_queue.to_string(), claim.clone(), epoch_ms(SystemTime::now()), lease_from_now());
        self.write(Box::new(move |conn| {
            Box::pin(async move {
                sqlx::query(
                    "UPDATE push_outbox SET claim = $1, claimed_until = $2 \
                     WHERE (claimed_until < $3 OR $4 = 1) \
                     AND task_id IN (SELECT task_id FROM tasks WHERE task_queue = $5)",
                )
                .bind(mine)
                .bind(lease)
                .bind(now_ms)
                .bind(take_all)
                .bind(queue)
                .execute(conn)
                .await?;
                Ok(())
            })
        }))
        .await?;
        let rows = sqlx::query(
            "SELECT o.task_id, o.config_id, o.seq, c.url, c.sealed, e.body FROM push_outbox o \
             JOIN push_configs c ON c.task_id = o.task_id AND c.config_id = o.config_id \
             JOIN events e ON e.task_id = o.task_id AND e.seq = o.seq \
             WHERE o.claim = $1 ORDER BY o.task_id, o.config_id, o.seq",
        )
        .bind(claim)
        .fetch_all(self.reads())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(PendingPush {
                    task_id: r.try_get("task_id")?,
                    config_id: r.try_get("config_id")?,
                    seq: r.try_get("seq")?,
                    url: r.try_get("url")?,
                    sealed: r.try_get("sealed")?,
                    body: r.try_get("body")?,
                })
            })
            .collect()
    }

    /// A delivery is over (posted, or given up): it leaves the outbox.
    pub async fn push_done(&self, task_id: &str, config_id: &str, seq: i64) -> Result<(), StoreError> {
        let (task_id, config_id) = (task_id.to_string(), config_id.to_string());
        self.write(Box::new(move |conn| {
            Box::pin(async move {
                sqlx::query("DELETE FROM push_outbox WHERE task_id = $1 AND config_id = $2 AND seq = $3")
                    .bind(task_id)
                    .bind(config_id)
                    .bind(seq)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        }))
        .await
    }

    /// How many deliveries the outbox holds; for operators and tests.
    pub async fn pending_pushes(&self) -> Result<i64, StoreError> {
        let r = sqlx::query("SELECT COUNT(*) AS n FROM push_outbox").fetch_one(self.reads()).await?;
        Ok(r.try_get("n")?)
    }

    /// Deletes a config; deleting a missing one is not an error. True when a row went.
    pub async fn delete_push_config(&self, task_id: &str, config_id: &str) -> Result<bool, StoreError> {
        let (task_id, config_id) = (task_id.to_string(), config_id.to_string());
        let deleted = self
            .write(Box::new(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query("DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2")
                        .bind(task_id.as_str())
                        .bind(config_id.as_str())
                        .execute(&mut *conn)
                        .await?;
                    sqlx::query("DELETE FROM push_outbox WHERE task_id = $1 AND config_id = $2")
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
