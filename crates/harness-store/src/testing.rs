//! Test support (D2: the store's tests run on SQLite and on Postgres): a fresh, empty
//! database on the Postgres server named by `TINY_HARNESS_TEST_POSTGRES`, which
//! `cargo xtask test` starts and sets.

use crate::StoreError;
use sqlx::Connection;

/// The variable naming the test Postgres server (an admin URL, e.g.
/// `postgres://postgres@127.0.0.1:5432/postgres`).
pub const TEST_POSTGRES_ENV: &str = "TINY_HARNESS_TEST_POSTGRES";

/// The test server's admin URL; panics with what to do when it is not set.
pub fn test_postgres_url() -> String {
    std::env::var(TEST_POSTGRES_ENV).ok().filter(|u| !u.is_empty()).unwrap_or_else(|| {
        panic!("{TEST_POSTGRES_ENV} is not set: run `cargo xtask test` (it starts a private Postgres) or set it to a server URL")
    })
}

/// Creates an empty database with a unique name on the test server; returns its URL.
pub async fn fresh_postgres_database() -> Result<String, StoreError> {
    sqlx::any::install_default_drivers();
    let admin = test_postgres_url();
    let name = format!(
        "th_{}_{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    let mut conn = sqlx::AnyConnection::connect(&admin).await?;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await?;
    conn.close().await?;
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b).to_string();
    Ok(format!("{base}/{name}"))
}
