//! Where writes run. Every write of the store is a function of one connection that runs
//! inside a transaction ([`Store::write`]).
//!
//! SQLite has one writer at a time, so its writes go to one connection on a thread of its
//! own, which runs the writes waiting at that moment in one transaction (group commit):
//! one BEGIN and one COMMIT for the lot instead of one each, and no wait for a busy
//! runtime between a write's statements (docs/performance.md). Nobody hears back before
//! the COMMIT. A write that fails with anything but a refusal that wrote nothing
//! ([`StoreError::Closed`]) rolls the batch back, and every write of it gets the error.
//!
//! The writer's connection is SQLite's own, called on that thread without sqlx (conn.rs):
//! a batch's statements cost no thread hop each.
//!
//! Postgres takes each write on a pooled connection in a transaction of its own, or, for a
//! write of one statement (`statement!`), with none around it: the statement is atomic.

use crate::StoreError;
use crate::conn::Conn;
use futures::future::BoxFuture;
use sqlx::Executor as _;
use tokio::sync::{mpsc, oneshot};

/// A write: statements on a connection already inside a transaction.
pub(crate) type WriteFn<T> = Box<dyn for<'c> FnOnce(&'c mut Conn<'c>) -> BoxFuture<'c, Result<T, StoreError>> + Send>;

/// How many waiting writes one transaction takes at most.
const BATCH: usize = 64;
/// How many writes may wait for the writer thread before callers wait to hand theirs over.
const QUEUE: usize = 1024;

/// Tells a write's caller how its batch ended: `None` when it committed.
type Reply = Box<dyn FnOnce(Option<&str>) + Send>;
/// A queued write: runs (or, given no connection, does not), then says whether it spoiled
/// the batch and how to reply.
type Job = Box<dyn for<'c> FnOnce(Option<&'c mut Conn<'c>>) -> BoxFuture<'c, (bool, Reply)> + Send>;

#[derive(Clone)]
pub(crate) enum Writes {
    /// Postgres: each write on a connection of its own, in a transaction or one statement.
    Pg(std::sync::Arc<crate::conn::PgConns>),
    Batched(mpsc::Sender<Job>),
}

impl Writes {
    /// SQLite's writer thread, owning `conn` until the last sender is dropped.
    pub(crate) fn batched(conn: rusqlite::Connection) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || runtime.block_on(run_batches(conn, rx)))?;
        Ok(Self::Batched(tx))
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
                if !matches!(&written, Err(StoreError::Sql(e)) if crate::conn::is_dead(e)) {
                    taken.done();
                }
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
                // A connection whose COMMIT or ROLLBACK failed is closed (dropped), not reused.
                let written = match write(&mut Conn::Any(&mut taken.conn)).await {
                    Ok(value) => taken.conn.execute("COMMIT").await.map(|_| value).map_err(StoreError::from),
                    Err(e) => match taken.conn.execute("ROLLBACK").await {
                        Ok(_) => Err(e),
                        Err(_) => return Err(e),
                    },
                };
                if written.is_ok() || !matches!(&written, Err(StoreError::Sql(e)) if crate::conn::is_dead(e)) {
                    taken.done();
                }
                written
            }
            Self::Batched(queue) => {
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
                queue.send(job).await.map_err(|_| StoreError::WriterGone)?;
                answered.await.map_err(|_| StoreError::WriterGone)?
            }
        }
    }
}

async fn run_batches(mut conn: rusqlite::Connection, mut queue: mpsc::Receiver<Job>) {
    let mut jobs = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut jobs, BATCH).await > 0 {
        let mut replies = Vec::with_capacity(jobs.len());
        let mut failed = match conn.execute_batch("BEGIN") {
            Ok(_) => None,
            Err(e) => Some(format!("could not begin a transaction: {e}")),
        };
        for job in jobs.drain(..) {
            // After a failure the rest do not run: their callers hear why the batch failed.
            let mut on = Conn::Sqlite(&mut conn);
            let (spoils, reply) = job(failed.is_none().then_some(&mut on)).await;
            if spoils {
                failed = Some("a write of its batch failed; nothing of the batch was written".into());
            }
            replies.push(reply);
        }
        let failed = match failed {
            None => conn.execute_batch("COMMIT").err().map(|e| format!("the commit failed: {e}")),
            Some(why) => Some(why),
        };
        if failed.is_some()
            && let Err(e) = conn.execute_batch("ROLLBACK")
        {
            tracing::error!(error = %e, "store: rolling back a failed write batch failed");
        }
        for reply in replies {
            reply(failed.as_deref());
        }
    }
}
