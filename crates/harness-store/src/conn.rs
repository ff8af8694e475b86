//! The connections the store drives itself (issue 31): a write runs on a [`Conn`], on
//! Postgres one of the store's sqlx connections ([`PgConns`]), on SQLite the writer's own
//! connection, driven on the thread of the caller that holds it (writer.rs); a message's
//! reads run on SQLite on the caller's thread ([`SqliteReads`]).
//!
//! sqlx runs each SQLite connection on a thread of its own and every statement is a
//! message to that thread and an answer back: two thread hops per statement (and, for a
//! pooled read, a check of the connection before it, two more), about twenty statements per
//! message. Here SQLite's C library (rusqlite) is called on the thread that wants the
//! answer, so a statement costs no hop (docs/performance.md, "SQLite without sqlx's
//! threads"). Each write is written once, against [`Conn`], and runs on both databases.

use crate::StoreError;
use rusqlite::types::Value;
use sqlx::{AnyConnection, Connection as _, Row as _};
use std::borrow::Cow;

/// What every SQLite connection of the store runs first, sqlx's and the store's own.
pub(crate) const SQLITE_PRAGMAS: &str =
    "PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;";

/// A SQLite connection the store drives itself: the store's pragmas, then `pragmas`, and a
/// statement cache of `statements`.
pub(crate) fn open_sqlite(
    path: &std::path::Path,
    create: bool,
    pragmas: &str,
    statements: usize,
) -> Result<rusqlite::Connection, StoreError> {
    use rusqlite::OpenFlags;
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = rusqlite::Connection::open_with_flags(path, flags)?;
    conn.execute_batch(SQLITE_PRAGMAS)?;
    conn.execute_batch(pragmas)?;
    conn.set_prepared_statement_cache_capacity(statements);
    Ok(conn)
}

/// A bound parameter. Its kind is the one the column takes, so Postgres, which types a
/// parameter from its value, sees what it saw before (a NULL of a bigint column is an
/// [`Arg::Int`] of `None`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Self::Text(Some(v))
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Self::Text(Some(v))
    }
}
impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Self::Text(v)
    }
}
impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Self::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Self::Int(v)
    }
}

/// The parameters of a statement, `$1` first.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        &[$(crate::conn::Arg::from($arg)),*]
    };
}

/// A row a write read back (a RETURNING list or a SELECT), its columns by position.
pub(crate) enum Row {
    Any(sqlx::any::AnyRow),
    Sqlite(Vec<Value>),
}

impl Row {
    pub(crate) fn int(&self, column: usize) -> Result<i64, StoreError> {
        match self {
            Self::Any(r) => Ok(r.try_get(column)?),
            Self::Sqlite(values) => match values.get(column) {
                Some(Value::Integer(n)) => Ok(*n),
                other => Err(not_a(column, "an integer", other)),
            },
        }
    }

    pub(crate) fn opt_int(&self, column: usize) -> Result<Option<i64>, StoreError> {
        match self {
            Self::Any(r) => Ok(r.try_get(column)?),
            Self::Sqlite(values) => match values.get(column) {
                Some(Value::Null) => Ok(None),
                _ => self.int(column).map(Some),
            },
        }
    }

    /// A text column: borrowed from an SQLite row, copied out of sqlx's.
    pub(crate) fn opt_text(&self, column: usize) -> Result<Option<Cow<'_, str>>, StoreError> {
        match self {
            Self::Any(r) => Ok(r.try_get::<Option<String>, _>(column)?.map(Cow::Owned)),
            Self::Sqlite(values) => match values.get(column) {
                Some(Value::Null) => Ok(None),
                _ => self.text(column).map(Some),
            },
        }
    }

    /// As [`Row::opt_text`], and NULL is an error.
    pub(crate) fn text(&self, column: usize) -> Result<Cow<'_, str>, StoreError> {
        match self {
            Self::Any(r) => Ok(Cow::Owned(r.try_get(column)?)),
            Self::Sqlite(values) => match values.get(column) {
                Some(Value::Text(s)) => Ok(Cow::Borrowed(s)),
                other => Err(not_a(column, "text", other)),
            },
        }
    }
}

fn not_a(column: usize, wanted: &str, found: Option<&Value>) -> StoreError {
    let found = match found {
        None => "missing".to_string(),
        Some(v) => format!("{:?}", v.data_type()),
    };
    StoreError::Column(format!("column {column} of a row the store read is {found}, not {wanted}"))
}

/// A connection inside a write's transaction.
pub(crate) enum Conn<'c> {
    Any(&'c mut AnyConnection),
    Sqlite(&'c mut rusqlite::Connection),
}

impl Conn<'_> {
    /// Runs a statement that returns no rows; the number of rows it changed.
    pub(crate) async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, StoreError> {
        match self {
            Self::Any(conn) => Ok(any_query(sql, args).execute(&mut **conn).await?.rows_affected()),
            Self::Sqlite(conn) => Ok(sqlite_execute(conn, sql, args)?),
        }
    }

    /// Runs a statement and returns its rows.
    pub(crate) async fn fetch_all(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, StoreError> {
        match self {
            Self::Any(conn) => {
                Ok(any_query(sql, args).fetch_all(&mut **conn).await?.into_iter().map(Row::Any).collect())
            }
            Self::Sqlite(conn) => Ok(sqlite_rows(conn, sql, args)?.into_iter().map(Row::Sqlite).collect()),
        }
    }

    /// Runs a statement and returns its first row, if any (every row is read: a RETURNING
    /// statement has done all of its work once read to the end).
    pub(crate) async fn fetch_optional(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Option<Row>, StoreError> {
        Ok(self.fetch_all(sql, args).await?.into_iter().next())
    }

    /// As [`Conn::fetch_optional`], and no row is an error.
    pub(crate) async fn fetch_one(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Row, StoreError> {
        self.fetch_optional(sql, args).await?.ok_or(StoreError::Sql(sqlx::Error::RowNotFound))
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

pub(crate) fn any_query<'q>(sql: &'q str, args: &[Arg<'q>]) -> AnyQuery<'q> {
    args.iter().fold(sqlx::query(sql), |query, arg| match *arg {
        Arg::Text(v) => query.bind(v),
        Arg::Int(v) => query.bind(v),
    })
}

/// Prepares `sql` (from the connection's statement cache) and binds `args` by their
/// numbers: SQLite numbers `$N` parameters in the order they first appear, not by N.
fn sqlite_prepare<'c>(
    conn: &'c rusqlite::Connection,
    sql: &str,
    args: &[Arg<'_>],
) -> Result<rusqlite::CachedStatement<'c>, StoreError> {
    let mut statement = conn.prepare_cached(sql)?;
    for index in 1..=statement.parameter_count() {
        let name = statement.parameter_name(index).unwrap_or("?");
        let arg =
            name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()).and_then(|n| args.get(n.wrapping_sub(1)));
        match arg {
            Some(Arg::Text(v)) => statement.raw_bind_parameter(index, v)?,
            Some(Arg::Int(v)) => statement.raw_bind_parameter(index, v)?,
            None => {
                return Err(StoreError::Column(format!(
                    "the statement's parameter {name} has no value ({} given): {sql}",
                    args.len()
                )));
            }
        }
    }
    Ok(statement)
}

fn sqlite_execute(conn: &rusqlite::Connection, sql: &str, args: &[Arg<'_>]) -> Result<u64, StoreError> {
    Ok(sqlite_prepare(conn, sql, args)?.raw_execute()? as u64)
}

pub(crate) fn sqlite_rows(
    conn: &rusqlite::Connection,
    sql: &str,
    args: &[Arg<'_>],
) -> Result<Vec<Vec<Value>>, StoreError> {
    let mut statement = sqlite_prepare(conn, sql, args)?;
    let columns = statement.column_count();
    let mut rows = statement.raw_query();
    let mut read = Vec::new();
    while let Some(row) = rows.next()? {
        read.push((0..columns).map(|i| row.get::<_, Value>(i)).collect::<Result<_, _>>()?);
    }
    Ok(read)
}

/// SQLite connections for the reads a message makes (its task's head, its prior delivery,
/// the history a turn reads, the log from its receipt, the answer's row), each run on the
/// caller's thread: an indexed read is a few microseconds of SQLite, less than the hop to
/// a connection thread and back that sqlx makes of it (and of its pool's check before).
/// A connection is taken for one statement; at most [`SqliteReads::IDLE`] wait between.
pub(crate) struct SqliteReads {
    path: std::path::PathBuf,
    idle: std::sync::Mutex<Vec<rusqlite::Connection>>,
}

impl SqliteReads {
    const IDLE: usize = 4;

    pub(crate) fn new(path: std::path::PathBuf) -> Self {
        Self { path, idle: std::sync::Mutex::new(Vec::new()) }
    }

    /// The rows of a read (a connection that failed a statement stays usable).
    pub(crate) fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, StoreError> {
        let idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_sqlite(&self.path, false, "PRAGMA query_only = ON;", 32)?,
        };
        let rows = sqlite_rows(&conn, sql, args);
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < Self::IDLE {
            idle.push(conn);
        }
        Ok(rows?.into_iter().map(Row::Sqlite).collect())
    }
}

/// Postgres connections for the statements of a message (its reads and its writes), handed
/// out without the round trips sqlx's pool makes around each use (issue 31).
///
/// sqlx 0.8's pool checks a connection when it hands it out and again when it takes it back
/// (a Sync and its ReadyForQuery, each a round trip to the server): two hidden round trips
/// per use, about twelve per message beside its ten statements. Here a connection used
/// within the last [`PgConns::FRESH`] is handed out as it is, and one idle for longer is
/// checked first. A connection whose use failed, or was dropped half-way (a caller that
/// went away mid-statement), is closed, never handed out again. A read that finds its
/// connection dead (the server restarted or dropped it since its last use) runs again on a
/// new one, and so does a transaction whose BEGIN did (nothing of either has run). A write
/// of one statement does not, since it may have run: its caller gets the error. A
/// connection idle for longer than [`PgConns::IDLE_CLOSE`] is closed
/// ([`PgConns::close_idle_ones`]).
pub(crate) struct PgConns {
    url: String,
    permits: tokio::sync::Semaphore,
    idle: std::sync::Mutex<Vec<(AnyConnection, std::time::Instant)>>,
}

/// A connection taken from [`PgConns`]: back to it by [`PgConn::done`], closed if dropped.
pub(crate) struct PgConn<'p> {
    pub(crate) conn: AnyConnection,
    home: &'p PgConns,
    _permit: tokio::sync::SemaphorePermit<'p>,
}

impl PgConns {
    /// How many connections it holds at most (beside sqlx's pool for the other reads).
    const MAX: usize = 12;
    /// A connection idle for longer than this is checked before it is used.
    const FRESH: std::time::Duration = std::time::Duration::from_secs(1);
    /// How long a caller waits for a connection when all are in use (sqlx's pool's wait).
    const WAIT: std::time::Duration = std::time::Duration::from_secs(10);
    /// A connection idle for longer than this is closed (sqlx's pool's idle timeout), so a
    /// quiet harness does not hold its database's connections.
    pub(crate) const IDLE_CLOSE: std::time::Duration = std::time::Duration::from_secs(600);

    pub(crate) fn new(url: &str) -> Self {
        Self { url: url.to_string(), permits: tokio::sync::Semaphore::new(Self::MAX), idle: Default::default() }
    }

    /// A connection: the one used last, checked first when idle for a while, else a new one.
    pub(crate) async fn take(&self) -> Result<PgConn<'_>, StoreError> {
        let permit = tokio::time::timeout(Self::WAIT, self.permits.acquire())
            .await
            .map_err(|_| StoreError::Sql(sqlx::Error::PoolTimedOut))?
            .map_err(|_| StoreError::Sql(sqlx::Error::PoolClosed))?;
        loop {
            let idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
            let Some((mut conn, since)) = idle else {
                let conn = AnyConnection::connect(&self.url).await?;
                return Ok(PgConn { conn, home: self, _permit: permit });
            };
            if since.elapsed() < Self::FRESH || conn.ping().await.is_ok() {
                return Ok(PgConn { conn, home: self, _permit: permit });
            }
        }
    }

    /// Closes the idle connections: one was found dead, and what ended it (a restart of the
    /// server, a failover) ended the others too.
    pub(crate) fn forget_idle(&self) {
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// Closes, every `every`, the connections idle for longer than `limit`, for as long as
    /// the connections are in use (a task of the runtime the store connected on).
    pub(crate) fn close_idle_ones(
        conns: &std::sync::Arc<Self>,
        every: std::time::Duration,
        limit: std::time::Duration,
    ) {
        let conns = std::sync::Arc::downgrade(conns);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(conns) = conns.upgrade() else { return };
                let old: Vec<AnyConnection> = {
                    let mut idle = conns.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    // Given back in turn, so the oldest come first.
                    let fresh = idle.iter().position(|(_, since)| since.elapsed() <= limit).unwrap_or(idle.len());
                    idle.drain(..fresh).map(|(conn, _)| conn).collect()
                };
                drop(conns);
                // A clean goodbye to the server, not waited on for long (a server that no
                // longer answers: the socket is dropped anyway).
                for conn in old {
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.close()).await;
                }
            }
        });
    }

    /// How many connections wait for their next use.
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// The rows of a read; on a connection found dead, once more on a new one.
    pub(crate) async fn rows(&self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, StoreError> {
        let mut again = true;
        loop {
            let mut taken = self.take().await?;
            match Conn::Any(&mut taken.conn).fetch_all(sql, args).await {
                Ok(rows) => {
                    taken.done();
                    return Ok(rows);
                }
                Err(StoreError::Sql(e)) if again && is_dead(&e) => {
                    again = false;
                    self.forget_idle();
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl PgConn<'_> {
    /// Back to the connections after a write that ended with `written`, unless it found the
    /// connection dead: then it is closed, and the idle ones with it (what ended it, ended
    /// them too).
    pub(crate) fn done_after<T>(self, written: &Result<T, StoreError>) {
        match written {
            Err(StoreError::Sql(e)) if is_dead(e) => self.home.forget_idle(),
            _ => self.done(),
        }
    }

    /// Back to the connections, for the next caller.
    pub(crate) fn done(self) {
        let mut idle = self.home.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        idle.push((self.conn, std::time::Instant::now()));
    }
}

/// Whether `e` says the connection is gone (not that the statement was refused): it broke,
/// or the server ended it (admin shutdown, crash shutdown, or it cannot take connections).
pub(crate) fn is_dead(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(d) => matches!(d.code().as_deref(), Some("57P01" | "57P02" | "57P03")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite numbers `$N` parameters in the order they first appear; the store's statements
    /// (an append's row update begins with `$2`) bind each by its N, as sqlx did.
    #[test]
    fn parameters_bind_by_their_number_and_a_missing_one_is_named() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let rows = sqlite_rows(&conn, "SELECT $2 || '-' || $1, $3 + 1", args!["a", "b", 41]).unwrap();
        assert_eq!(rows, vec![vec![Value::Text("b-a".into()), Value::Integer(42)]]);

        let err = sqlite_rows(&conn, "SELECT $1, $3", args!["a", "b"]).unwrap_err().to_string();
        assert!(err.contains("parameter $3 has no value (2 given)"), "{err}");
        // The connection's statement cache holds nothing half-bound: the next statement works.
        assert_eq!(sqlite_execute(&conn, "CREATE TABLE t (x INTEGER)", &[]).unwrap(), 0);
    }

    /// A column of another type than asked is an error that says which and what it is.
    #[test]
    fn a_column_of_another_type_is_named() {
        let row = Row::Sqlite(vec![Value::Text("x".into()), Value::Null]);
        assert_eq!(row.opt_int(1).unwrap(), None);
        assert_eq!(row.opt_text(1).unwrap(), None);
        assert_eq!(row.text(0).unwrap(), "x");
        let err = row.int(0).unwrap_err().to_string();
        assert!(err.contains("column 0") && err.contains("Text") && err.contains("not an integer"), "{err}");
        assert!(row.text(2).unwrap_err().to_string().contains("missing"));
    }
}
