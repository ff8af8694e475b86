//! Where writes run. Every write of the store is a function of one connection that runs
//! inside a transaction ([`Store::write`]).
//!
//! SQLite has one writer at a time, so its writes go to one connection, which runs the
//! writes waiting at that moment in one transaction (group commit): one BEGIN and one
//! COMMIT for the lot instead of one each (docs/performance.md). Nobody hears back before
//! the COMMIT. A write that fails with anything but a refusal that wrote nothing
//! ([`StoreError::Closed`]) rolls the batch back, and every write of it gets the error.
//!
//! The connection is SQLite's own, called without sqlx (conn.rs), and it has no thread of
//! its own: a caller that finds it free takes it and runs, on its own thread, the writes
//! waiting at that moment, its own among them; a caller that finds it taken leaves its
//! write to the one that has it and waits for its answer. A write costs no thread hop when
//! the connection is free, and a busy one still groups the writes that queued meanwhile
//! (issue 31: the writer's thread spent about a third of its time being switched in and
//! out, one hop there and one back per write). The WAL is checkpointed by a thread of its
//! own between two batches, so no caller's thread is held by the checkpoint's fsync. The
//! read that admits each message runs on this connection too when it is free
//! ([`Writer::read_if_free`]): its pages are warm there.
//!
//! Postgres takes each write on one of the store's connections in a transaction of its
//! own, or, for a write of one statement (`statement!`), with none around it: the
//! statement is atomic.

use crate::StoreError;
use crate::conn::Conn;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use sqlx::Executor as _;
use std::sync::{Mutex, PoisonError};
use tokio::sync::oneshot;

/// A write: statements on a connection already inside a transaction.
pub(crate) type WriteFn<T> = Box<dyn for<'c> FnOnce(&'c mut Conn<'c>) -> BoxFuture<'c, Result<T, StoreError>> + Send>;

/// How many waiting writes one transaction takes at most.
const BATCH: usize = 64;
/// How many commits go between checkpoints of the WAL (about SQLite's own 1,000 pages at
/// 15 pages a commit).
const CHECKPOINT_EVERY: u32 = 64;

/// Tells a write's caller how its batch ended: `None` when it committed.
type Reply = Box<dyn FnOnce(Option<&str>) + Send>;
/// A queued write: runs (or, given no connection, does not), then says whether it spoiled
/// the batch and how to reply.
type Job = Box<dyn for<'c> FnOnce(Option<&'c mut Conn<'c>>) -> BoxFuture<'c, (bool, Reply)> + Send>;

#[derive(Clone)]
pub(crate) enum Writes {
    /// Postgres: each write on a connection of its own, in a transaction or one statement.
    Pg(std::sync::Arc<crate::conn::PgConns>),
    /// SQLite: the one writing connection and the writes waiting for it.
    Sqlite(std::sync::Arc<Writer>),
}

/// SQLite's writing connection, taken by whichever caller finds it free.
pub(crate) struct Writer {
    conn: Mutex<Held>,
    waiting: Mutex<Vec<Job>>,
}

struct Held {
    conn: rusqlite::Connection,
    commits: u32,
    /// Asks the checkpoint thread for a checkpoint; it ends when this is dropped.
    checkpoint: std::sync::mpsc::SyncSender<()>,
}

impl Writes {
    /// SQLite's writer on `conn`, and the thread that checkpoints its WAL.
    pub(crate) fn sqlite(conn: rusqlite::Connection) -> Result<Self, StoreError> {
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0;")?;
        let (checkpoint, asked) = std::sync::mpsc::sync_channel::<()>(1);
        let held = Held { conn, commits: 0, checkpoint };
        let writer = std::sync::Arc::new(Writer { conn: Mutex::new(held), waiting: Mutex::new(Vec::new()) });
        let weak = std::sync::Arc::downgrade(&writer);
        std::thread::Builder::new().name("store-checkpoint".into()).spawn(move || {
            while asked.recv().is_ok() {
                let Some(writer) = weak.upgrade() else { return };
                writer.checkpoint();
            }
        })?;
        Ok(Self::Sqlite(writer))
    }

    /// Runs a write and waits for its commit; the wait is the store's write latency
    /// ([`crate::WRITE_SECONDS`], issue 32). `transaction`: on Postgres, in a transaction
    /// of its own; else the write is one statement, which commits by itself.
    pub(crate) async fn run<T: Send + 'static>(&self, write: WriteFn<T>, transaction: bool) -> Result<T, StoreError> {
        let began = std::time::Instant::now();
        let written = self.run_once(write, transaction).await;
        metrics::histogram!(crate::WRITE_SECONDS).record(began.elapsed().as_secs_f64());
        written
    }

    async fn run_once<T: Send + 'static>(&self, write: WriteFn<T>, transaction: bool) -> Result<T, StoreError> {
        match self {
            Self::Pg(conns) if !transaction => {
                let mut taken = conns.take().await?;
                let written = write(&mut Conn::Any(&mut taken.conn)).await;
                // It may have run, so it does not run again; the idle connections are closed
                // with the dead one, and the next write gets a new one.
                taken.done_after(&written);
                written
            }
            Self::Pg(conns) => {
                // A BEGIN that finds its connection dead has run nothing: once more on a new one.
                let mut taken = conns.take().await?;
                let began = match taken.conn.execute("BEGIN").await {
                    Err(e) if crate::conn::is_dead(&e) => {
                        drop(taken);
                        conns.forget_idle();
                        taken = conns.take().await?;
                        taken.conn.execute("BEGIN").await
                    }
                    began => began,
                };
                began?;
                // A connection whose ROLLBACK failed is closed (dropped), not reused; one found
                // dead is closed with the idle ones.
                let written = match write(&mut Conn::Any(&mut taken.conn)).await {
                    Ok(value) => taken.conn.execute("COMMIT").await.map(|_| value).map_err(StoreError::from),
                    Err(e) => match taken.conn.execute("ROLLBACK").await {
                        Ok(_) => Err(e),
                        Err(_) => return Err(e),
                    },
                };
                taken.done_after(&written);
                written
            }
            Self::Sqlite(writer) => {
                let (answer, answered) = oneshot::channel::<Result<T, StoreError>>();
                let job: Job = Box::new(move |conn| {
                    Box::pin(async move {
                        let result = match conn {
                            Some(conn) => Some(write(conn).await),
                            None => None,
                        };
                        let spoils = matches!(&result, Some(Err(e)) if !matches!(e, StoreError::Closed(_)));
                        let reply: Reply = Box::new(move |failed: Option<&str>| {
                            let _ = answer.send(match (result, failed) {
                                (Some(Err(e)), _) => Err(e),
                                (_, Some(why)) => Err(StoreError::Batch(why.to_string())),
                                (Some(Ok(value)), None) => Ok(value),
                                (None, None) => Err(StoreError::Batch("the write did not run".into())),
                            });
                        });
                        (spoils, reply)
                    })
                });
                writer.waiting.lock().unwrap_or_else(PoisonError::into_inner).push(job);
                writer.run_waiting();
                answered.await.map_err(|_| StoreError::WriteLost)?
            }
        }
    }
}

impl Writer {
    /// The connection when no one holds it (one a panic left poisoned included).
    fn take_if_free(&self) -> Option<std::sync::MutexGuard<'_, Held>> {
        match self.conn.try_lock() {
            Ok(held) => Some(held),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Runs the waiting writes, a batch at a time, while the connection is free and writes
    /// wait. A caller that finds it taken returns: whoever has it looks for waiting writes
    /// again each time it lets go of it, so a write queued meanwhile is never left behind.
    fn run_waiting(&self) {
        loop {
            let Some(mut held) = self.take_if_free() else { return };
            let jobs = {
                let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
                let n = waiting.len().min(BATCH);
                waiting.drain(..n).collect::<Vec<_>>()
            };
            if !jobs.is_empty() {
                held.run_batch(jobs);
            }
            drop(held);
            if self.waiting.lock().unwrap_or_else(PoisonError::into_inner).is_empty() {
                return;
            }
        }
    }

    /// A read on the writing connection when no batch or checkpoint holds it; `None` when
    /// one does (or it is inside a transaction). Its pages stay in that connection's cache,
    /// which its own commits do not empty; a read connection's cache is emptied by every
    /// commit since its last read, so each of its reads fetches its pages again (issue 31).
    /// The connection is between transactions when free, so the read sees every committed
    /// write. A write queued while the read held the connection found it taken and left its
    /// write to the holder, so the waiting writes run next, on this thread, as after a
    /// checkpoint.
    pub(crate) fn read_if_free(
        &self,
        sql: &str,
        args: &[crate::conn::Arg<'_>],
    ) -> Option<Result<Vec<Vec<rusqlite::types::Value>>, StoreError>> {
        let held = self.take_if_free()?;
        // Never inside a transaction (a batch that panicked past its rollback): the read
        // would see writes that were not committed.
        if !held.conn.is_autocommit() {
            return None;
        }
        let rows = crate::conn::sqlite_rows(&held.conn, sql, args);
        drop(held);
        self.run_waiting();
        Some(rows)
    }

    /// Checkpoints the WAL on the writer's connection, between two batches (on the checkpoint
    /// thread, which waits for the connection): with no write under way it copies the whole
    /// WAL back, so the next write starts the WAL over. (A checkpoint beside a stream of
    /// writes never catches up with them, and the WAL would only grow.) The writes that
    /// queued meanwhile run next, on this thread.
    fn checkpoint(&self) {
        {
            let held = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(e) = held.conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);") {
                tracing::warn!(error = %e, "store: a checkpoint of the WAL failed; the next one tries again");
            }
        }
        self.run_waiting();
    }
}

impl Held {
    fn run_batch(&mut self, jobs: Vec<Job>) {
        let mut replies = Vec::with_capacity(jobs.len());
        let mut failed = match self.conn.execute_batch("BEGIN") {
            Ok(_) => None,
            Err(e) => Some(format!("could not begin a transaction: {e}")),
        };
        for job in jobs {
            // After a failure the rest do not run: their callers hear why the batch failed.
            let mut on = Conn::Sqlite(&mut self.conn);
            // A write's statements are SQLite's, run as they are called: its future is ready
            // when first polled. One that is not (it waited on something else), or that
            // panicked, spoils the batch; its caller hears that its write was lost.
            let ran =
                std::panic::AssertUnwindSafe(job(failed.is_none().then_some(&mut on))).catch_unwind().now_or_never();
            match ran {
                Some(Ok((spoils, reply))) => {
                    if spoils {
                        failed = Some("a write of its batch failed; nothing of the batch was written".into());
                    }
                    replies.push(reply);
                }
                _ => {
                    failed =
                        Some("a write of its batch did not run to its end; nothing of the batch was written".into())
                }
            }
        }
        let failed = match failed {
            None => self.conn.execute_batch("COMMIT").err().map(|e| format!("the commit failed: {e}")),
            Some(why) => Some(why),
        };
        if failed.is_some()
            && let Err(e) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::error!(error = %e, "store: rolling back a failed write batch failed");
        }
        if failed.is_none() {
            self.commits = self.commits.wrapping_add(1);
            if self.commits.is_multiple_of(CHECKPOINT_EVERY) {
                let _ = self.checkpoint.try_send(());
            }
        }
        for reply in replies {
            reply(failed.as_deref());
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::StoreError;
    use crate::test_support::*;

    /// Writes from many threads at once each commit once and each hears back: a write queued
    /// while another caller holds the connection is run by that caller (or the next), never
    /// left waiting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn writes_from_many_threads_at_once_each_commit_and_each_hears_back() {
        let (store, _dir) = sqlite().await;
        store.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        let writes = (0..400).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let key = format!("k{i}");
                store.append(&new("t", &key, status("t", TaskState::Working))).await
            })
        });
        let all = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(writes))
            .await
            .expect("every write heard back");
        let mut seqs: Vec<i64> = all.into_iter().map(|r| r.unwrap().unwrap().seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (2..=401).collect::<Vec<_>>(), "each write took one seq, none twice, no gap");
        assert_eq!(store.task_head("t").await.unwrap().unwrap().last_seq, 401);
    }

    /// Admission's reads run on the writing connection when it is free, beside writes from
    /// many threads: every write still commits and hears back (one queued while a read held
    /// the connection runs right after that read), and a read after a write's answer finds it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn reads_on_the_writing_connection_leave_no_write_waiting_and_see_each_commit() {
        let (store, _dir) = sqlite().await;
        store.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        let super::Writes::Sqlite(writer) = &store.writes else { unreachable!() };
        let on_it = writer.read_if_free("SELECT last_seq FROM tasks WHERE task_id = $1", args!["t"]);
        assert_eq!(on_it.expect("free").unwrap(), vec![vec![rusqlite::types::Value::Integer(1)]]);
        // Rounds of one write among reads: a write left waiting is not rescued by a later one.
        for round in 0..400 {
            let reads: Vec<_> = (0..6)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        for _ in 0..5 {
                            store.head_and_prior("t", "m").await.unwrap();
                        }
                    })
                })
                .collect();
            let write = {
                let store = store.clone();
                tokio::spawn(async move {
                    store.append(&new("t", &format!("k{round}"), status("t", TaskState::Working))).await.unwrap().seq
                })
            };
            let seq = tokio::time::timeout(Duration::from_secs(10), write)
                .await
                .unwrap_or_else(|_| panic!("round {round}: the write heard back"))
                .unwrap();
            let (head, _) = store.head_and_prior("t", "m").await.unwrap();
            assert_eq!(head.unwrap().last_seq, seq, "a read after write {seq}'s answer finds it");
            for read in reads {
                read.await.unwrap();
            }
        }
        assert_eq!(store.task_head("t").await.unwrap().unwrap().last_seq, 401, "each write committed once");
    }

    /// A write that waits on something inside the writer, or panics there, loses its batch:
    /// its caller hears so, nothing of it is written, and the next writes work.
    #[tokio::test]
    async fn a_write_that_waits_or_panics_inside_the_writer_is_lost_and_the_next_ones_work() {
        let (store, _dir) = sqlite().await;
        store.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        let waits = store
            .write::<()>(Box::new(|conn| {
                Box::pin(async move {
                    conn.execute("UPDATE tasks SET context_id = 'changed' WHERE task_id = 't'", &[]).await?;
                    tokio::task::yield_now().await;
                    Ok(())
                })
            }))
            .await;
        assert!(matches!(waits, Err(StoreError::WriteLost)), "{waits:?}");
        let panics = store.write::<()>(Box::new(|_| Box::pin(async move { panic!("a write that panics") }))).await;
        assert!(matches!(panics, Err(StoreError::WriteLost)), "{panics:?}");
        let next = store.append(&new("t", "after", status("t", TaskState::Working))).await.unwrap();
        assert_eq!(next.seq, 2);
        let context: String = sqlx::query_scalar("SELECT context_id FROM tasks WHERE task_id = 't'")
            .fetch_one(store.reads())
            .await
            .unwrap();
        assert_eq!(context, "c", "nothing of the lost write's batch was written");
    }

    /// The WAL is checkpointed as writes go on (by the checkpoint thread, the writer's own
    /// checkpoints being off): a thousand commits one after another leave it small.
    #[tokio::test]
    async fn the_wal_stays_small_over_many_commits() {
        let (store, dir) = sqlite().await;
        store.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        for i in 0..1000 {
            store.append(&new("t", &format!("k{i}"), status("t", TaskState::Working))).await.unwrap();
        }
        let wal = std::fs::metadata(dir.path().join("s.db-wal")).unwrap().len();
        assert!(wal < 4 << 20, "the WAL is {wal} bytes after 1,000 commits");
    }
}
