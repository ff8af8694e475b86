//! Push configs of tasks and the outbox of their deliveries (S14). The token and
//! credentials arrive sealed (encrypted by harness-push); the store keeps them opaque.
//!
//! The outbox makes delivery at-least-once across a crash: an append puts its pushed event
//! there for every config of the task in the same transaction, the process delivering it
//! holds it under a lease, and it goes only once posted or given up. A process that finds
//! rows whose lease ran out (or, as an SQLite store's only process, any row when it
//! starts) takes them over.

use crate::conn::Conn;
use crate::{Backend, Store, StoreError, now};
use sqlx::Row;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the process that took a push delivery has it before another may take it over.
pub const PUSH_LEASE: Duration = Duration::from_secs(120);

fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The end of a lease taken now (epoch ms).
pub(crate) fn lease_from_now() -> i64 {
    epoch_ms(SystemTime::now() + PUSH_LEASE)
}

/// Puts the event `seq` of `task_id` in the outbox for every config of the task, inside
/// the append's transaction, leased to the appending process.
pub(crate) async fn to_outbox(conn: &mut Conn<'_>, task_id: &str, seq: i64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO push_outbox (task_id, config_id, seq, claim, claimed_until) \
         SELECT task_id, config_id, $2, '', $3 FROM push_configs WHERE task_id = $1",
        args![task_id, seq, lease_from_now()],
    )
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
        statement!(self, move |conn| {
            conn.execute(
                "INSERT INTO push_configs (task_id, config_id, url, sealed, created_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (task_id, config_id) DO UPDATE SET url = excluded.url, sealed = excluded.sealed",
                args![&row.task_id, &row.config_id, &row.url, &row.sealed, &created],
            )
            .await?;
            Ok(())
        })
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
        statement!(self, move |conn| {
            conn.execute(
                "UPDATE push_outbox SET claim = $1, claimed_until = $2 \
                     WHERE (claimed_until < $3 OR $4 = 1) \
                     AND task_id IN (SELECT task_id FROM tasks WHERE task_queue = $5)",
                args![&mine, lease, now_ms, take_all, &queue],
            )
            .await?;
            Ok(())
        })
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
        statement!(self, move |conn| {
            conn.execute(
                "DELETE FROM push_outbox WHERE task_id = $1 AND config_id = $2 AND seq = $3",
                args![&task_id, &config_id, seq],
            )
            .await?;
            Ok(())
        })
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
        let deleted = transaction!(self, move |conn| {
            let done = conn
                .execute("DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2", args![&task_id, &config_id])
                .await?;
            conn.execute("DELETE FROM push_outbox WHERE task_id = $1 AND config_id = $2", args![&task_id, &config_id])
                .await?;
            Ok(done)
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(push_configs_and_participants_round_trip, push_and_participants);
    on_both!(an_append_says_whether_the_task_has_push_configs, append_reports_push_configs);
    on_both!(pushed_events_wait_in_the_outbox_until_done_and_an_unheld_one_is_taken_over, push_outbox);

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

        // An artifact the workflow writes whole (an A2UI surface, issue 30) is pushed.
        let surface = StreamResponse::ArtifactUpdate(a2a_types::TaskArtifactUpdateEvent {
            task_id: "t".into(),
            artifact: artifact("a2ui:1", "surface"),
            last_chunk: true,
            ..Default::default()
        });
        let whole =
            NewEvent { stored_before: Some(crate::Stored { history: 0, artifacts: 0 }), ..new("t", "k4", surface) };
        assert!(store.append(&whole).await.unwrap().pushes, "a whole artifact of the workflow is pushed");
        assert_eq!(store.pending_pushes().await.unwrap(), 2);
    }
}
