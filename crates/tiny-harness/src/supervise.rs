//! Whether Temporal answers, and keeping the embedded dev server alive (issue 13).
//!
//! - [`Health`] is what every request checks before it calls Temporal: while Temporal does
//!   not answer, a send or a cancel fails at once with `Unavailable` and a text that names no
//!   transport internals, reads fall back to the store, `/_monitor` and `/_ready` say so.
//! - [`spawn_probe`] asks Temporal a cheap question every second while it answers (two
//!   misses in a row, of 3 s each at most, mean down), and backs off (0.25 s doubling to 4 s)
//!   while it does not; the SDK's channel reconnects by itself.
//! - [`Supervisor`] restarts an embedded dev server that died, on the same database and port,
//!   within about a second; its file lock (`temporal.lock`, held by the server process)
//!   keeps a second server off the same database.
//! - [`SupervisedWorker`] starts a new worker when the running one stops without being asked
//!   to (temporalio-sdk-core 0.10.1 can panic in its workflow processing thread when a
//!   query-only task crosses a new workflow task; a debug build then loses its worker). The
//!   worker that ended leaves the client's registry of workers with its thread, or the new
//!   one could not be created (see `worker::start_worker_thread`).

use crate::temporal_dev::EmbeddedTemporal;
use a2a_types::{A2AError, ErrorKind};
use harness_workflow::TaskWorkflow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use temporalio_client::{Client, WorkflowDescribeOptions};

/// Whether Temporal answers, and why not.
#[derive(Debug)]
pub struct Health {
    up: AtomicBool,
    why: Mutex<String>,
}

impl Default for Health {
    fn default() -> Self {
        Self { up: AtomicBool::new(true), why: Mutex::new(String::new()) }
    }
}

impl Health {
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Why Temporal is down (empty while it is up).
    pub fn why(&self) -> String {
        self.why.lock().expect("health").clone()
    }

    pub(crate) fn set_down(&self, why: impl Into<String>) {
        let why = why.into();
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::error!(why = %why, "Temporal is unreachable: sends fail fast, reads come from the store");
        }
        *self.why.lock().expect("health") = why;
    }

    pub(crate) fn set_up(&self) {
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::warn!("Temporal answers again");
        }
        self.why.lock().expect("health").clear();
    }

    /// The error of a request that needs Temporal while it is down: `Unavailable`, naming
    /// what to do, never a transport error.
    pub fn unavailable(&self, what: &str) -> A2AError {
        let why = self.why();
        let why = if why.is_empty() { "it does not answer".to_string() } else { why };
        A2AError::new(
            ErrorKind::Unavailable,
            format!("Temporal is unreachable ({why}): {what} was not done; retry in a few seconds"),
        )
    }

    /// What `/_monitor` and `/_ready` say of Temporal.
    pub fn to_json(&self) -> serde_json::Value {
        if self.is_up() { serde_json::json!({"up": true}) } else { serde_json::json!({"up": false, "why": self.why()}) }
    }
}

/// Whether an error of a Temporal call says the server could not be reached (as opposed to
/// an answer from it).
/// Found by type in the error's source chain: a gRPC status `UNAVAILABLE`, a transport
/// error of the gRPC client, or an I/O error. An error Temporal answered with is none of them.
pub(crate) fn is_transport_error(err: &(dyn std::error::Error + 'static)) -> bool {
    use temporalio_client::tonic;
    let mut next = Some(err);
    while let Some(e) = next {
        if e.downcast_ref::<tonic::Status>().is_some_and(|s| s.code() == tonic::Code::Unavailable)
            || e.downcast_ref::<tonic::transport::Error>().is_some()
            || e.downcast_ref::<std::io::Error>().is_some()
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// Asks Temporal a cheap question (describing a workflow that does not exist) until stopped:
/// every second while it answers, with a growing pause after a miss.
pub(crate) fn spawn_probe(client: Client, health: Arc<Health>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut pause = Duration::from_millis(250);
        // One slow answer on a busy machine is not an outage: two misses in a row are.
        let mut missed = 0;
        loop {
            let handle = client.get_workflow_handle::<TaskWorkflow>("tiny-harness-health-probe");
            let answer =
                tokio::time::timeout(Duration::from_secs(3), handle.describe(WorkflowDescribeOptions::default())).await;
            let miss = match answer {
                Ok(Ok(_)) => None,
                Ok(Err(e)) if !is_transport_error(&e) => None,
                Ok(Err(_)) => Some("no connection to the server"),
                Err(_) => Some("no answer within 3 s"),
            };
            match miss {
                None => {
                    missed = 0;
                    health.set_up();
                }
                Some(why) => {
                    missed += 1;
                    if missed >= 2 {
                        health.set_down(why);
                    }
                }
            }
            if health.is_up() {
                pause = Duration::from_millis(250);
                tokio::time::sleep(Duration::from_secs(1)).await;
            } else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(4));
            }
        }
    })
}

/// The embedded dev server under watch: restarted when it dies, stopped on request.
pub(crate) struct Supervisor {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Supervisor {
    /// Watches `server` (started from `cli` on `db`).
    pub(crate) fn spawn(cli: PathBuf, db: PathBuf, mut server: EmbeddedTemporal, health: Arc<Health>) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                let status = tokio::select! {
                    status = server.wait() => status,
                    _ = &mut stopped => {
                        server.stop().await;
                        return;
                    }
                };
                health.set_down(format!("the embedded Temporal server exited ({status}); restarting it"));
                let mut pause = Duration::from_millis(200);
                server = loop {
                    match EmbeddedTemporal::start_on(&cli, &db, server.port()).await {
                        Ok(s) => break s,
                        Err(e) => {
                            health.set_down(format!("the embedded Temporal server does not start again: {e}"));
                            tokio::select! {
                                _ = tokio::time::sleep(pause) => {}
                                _ = &mut stopped => return,
                            }
                            pause = (pause * 2).min(Duration::from_secs(5));
                        }
                    }
                };
                tracing::warn!(address = %server.address, "restarted the embedded Temporal server on the same database");
            }
        });
        Self { stop: Some(stop), task }
    }

    /// Stops the server (SIGTERM, then SIGKILL after 10 s) and the watch.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(15), &mut self.task).await;
    }
}

/// The Temporal worker of this process, started again when it stops without being asked to.
pub(crate) struct SupervisedWorker {
    stopping: Arc<AtomicBool>,
    end_abruptly: Arc<tokio::sync::Notify>,
    current: Arc<Mutex<Option<crate::Shutdown>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SupervisedWorker {
    /// Starts a worker built by `options` (called again for each new worker).
    pub(crate) async fn start(
        client: Client,
        options: impl Fn() -> Result<temporalio_sdk::WorkerOptions, String> + Send + Sync + 'static,
    ) -> Result<Self, crate::HarnessError> {
        let options = Arc::new(options);
        let build = {
            let options = options.clone();
            move || options()
        };
        let end_abruptly = Arc::new(tokio::sync::Notify::new());
        let (shutdown, thread) =
            crate::worker::start_worker_thread(client.clone(), build, end_abruptly.clone()).await?;
        let stopping = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(Some(shutdown)));
        let task = tokio::spawn({
            let (stopping, current, end_abruptly) = (stopping.clone(), current.clone(), end_abruptly.clone());
            async move {
                let mut thread = Some(thread);
                loop {
                    if let Some(t) = thread.take() {
                        let _ = tokio::task::spawn_blocking(move || t.join()).await;
                    }
                    if stopping.load(Ordering::Relaxed) {
                        return;
                    }
                    tracing::error!("the Temporal worker stopped without being asked to; starting a new one");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    if stopping.load(Ordering::Relaxed) {
                        return;
                    }
                    let build = {
                        let options = options.clone();
                        move || options()
                    };
                    match crate::worker::start_worker_thread(client.clone(), build, end_abruptly.clone()).await {
                        Ok((shutdown, t)) => {
                            *current.lock().expect("worker") = Some(shutdown);
                            thread = Some(t);
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "could not start a new Temporal worker; trying again");
                            tokio::time::sleep(Duration::from_secs(4)).await;
                        }
                    }
                }
            }
        });
        Ok(Self { stopping, end_abruptly, current, task })
    }

    /// Ends the running worker the way a fatal SDK error does (its run returns without the
    /// worker's shutdown); the watch then starts a new one.
    pub(crate) fn end_abruptly(&self) {
        self.end_abruptly.notify_one();
    }

    /// Stops the worker (letting running activities finish for a few seconds) and the watch.
    pub(crate) async fn stop(mut self) {
        self.begin_stop();
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
    }

    /// Tells the watch not to start another worker and the running one to shut down.
    fn begin_stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let shutdown = self.current.lock().expect("worker").take();
        if let Some(shutdown) = shutdown {
            shutdown();
        }
    }
}

/// A harness dropped without `stop()` (a host that returns early, a test that fails half
/// way) still ends its worker: the watch's wait for the worker's thread runs on the blocking
/// pool, and a runtime being dropped waits for that pool, so a worker left running would
/// keep its runtime from shutting down forever.
impl Drop for SupervisedWorker {
    fn drop(&mut self) {
        self.begin_stop();
    }
}
