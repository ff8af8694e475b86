//! The SQL store (D1, D2): the durable event log of every task, the task snapshots it
//! folds into, and the inbox audit (S5).
//!
//! Owns: the schema (one migration set for SQLite and Postgres), the per-task sequence
//! allocation that keeps the log gap-free, and the in-process wake-ups of stream readers.
//! Must never: talk to Temporal, or decide anything about a task's lifecycle beyond the
//! fence that refuses events after a terminal one.

mod event_log;
mod inbox;
mod notifier;
mod participants;
mod push;
pub mod testing;

pub use event_log::{Appended, LoggedEvent, NewEvent, TaskHead, TaskPage, TaskQuery, TaskRow};
pub use inbox::{InboxOutcome, InboxRow};
pub use notifier::Notifier;
pub use push::PushRow;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};
use std::time::Duration;

/// Store errors; each says what failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("store migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored JSON is invalid: {0}")]
    Json(#[from] serde_json::Error),
    /// The log already ended with a terminal event; nothing more is appended.
    #[error("the task is in a terminal state ({0})")]
    Closed(a2a_types::TaskState),
    #[error("unsupported store URL `{0}`: use sqlite://PATH or postgres://...")]
    Url(String),
}

/// The store: a connection pool plus the in-process notifier.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    notifier: Notifier,
    kind: Backend,
}

/// Which database is behind the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Store {
    /// Connects (creating an SQLite file when missing) and runs the migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        install_default_drivers();
        let kind = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StoreError::Url(url.to_string()));
        };
        let url = match kind {
            Backend::Sqlite if !url.contains("mode=") => {
                format!("{url}{}mode=rwc", if url.contains('?') { "&" } else { "?" })
            }
            _ => url.to_string(),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(if kind == Backend::Sqlite { 4 } else { 16 })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if kind == Backend::Sqlite {
                        conn.execute(
                            "PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
                        )
                        .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        if kind == Backend::Sqlite {
            pool.execute("PRAGMA journal_mode = WAL;").await?;
        }
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Self { pool, notifier: Notifier::default(), kind })
    }

    /// The database behind this store.
    pub fn backend(&self) -> Backend {
        self.kind
    }

    /// The in-process notifier that wakes stream readers of a task.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}

pub(crate) fn now() -> String {
    a2a_types::now_timestamp()
}
