//! The Temporal side of a running harness: the client connection, and the worker on a
//! thread of its own with the options every task worker runs with.

use crate::HarnessError;
use harness_agent::Activities;
use harness_workflow::TaskWorkflow;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

/// Connects a Temporal client, retrying for up to 30 s while the server is still coming up
/// (a fresh dev server opens its port before its frontend is healthy).
pub async fn connect(
    address: &str,
    namespace: &str,
    compression: crate::config::GrpcCompression,
) -> Result<Client, HarnessError> {
    connect_with(address, namespace, compression, &crate::config::TemporalAuth::default()).await
}

/// [`connect`] with TLS (a CA, a client certificate) and an API key (issue 20).
pub async fn connect_with(
    address: &str,
    namespace: &str,
    compression: crate::config::GrpcCompression,
    auth: &crate::config::TemporalAuth,
) -> Result<Client, HarnessError> {
    let fail = |why: String| HarnessError::Connect { address: address.to_string(), why };
    let url: url::Url = address.parse().map_err(|e: url::ParseError| fail(e.to_string()))?;
    let grpc_compression = match compression {
        crate::config::GrpcCompression::None => temporalio_client::GrpcCompression::None,
        crate::config::GrpcCompression::Gzip => temporalio_client::GrpcCompression::Gzip,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let attempt =
            tokio::time::timeout(Duration::from_secs(10), Connection::connect(options(&url, grpc_compression, auth)))
                .await;
        let why = match attempt {
            Ok(Ok(connection)) => {
                return Client::new(connection, ClientOptions::new(namespace.to_string()).build())
                    .map_err(|e| fail(e.to_string()));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 10 s".to_string(),
        };
        // A refused TLS handshake (a missing or untrusted certificate) does not heal by
        // waiting: no retry. (tonic gives only the text of rustls's alert.)
        let tls_refused = why.contains("fatal alert") || why.contains("invalid peer certificate");
        if tls_refused || tokio::time::Instant::now() >= deadline {
            return Err(fail(why));
        }
        tracing::debug!(address, why, "Temporal is not ready yet; retrying");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The connection options: TLS when `auth` turns it on, the API key when it has one.
fn options(
    url: &url::Url,
    compression: temporalio_client::GrpcCompression,
    auth: &crate::config::TemporalAuth,
) -> ConnectionOptions {
    let tls = auth.tls.then(|| {
        let client = auth.client.as_ref().map(|(cert, key)| {
            temporalio_client::ClientTlsOptions::builder()
                .client_cert(cert.clone())
                .client_private_key(key.clone())
                .build()
        });
        temporalio_client::TlsOptions::builder()
            .maybe_server_root_ca_cert(auth.ca.clone())
            .maybe_domain(auth.domain.clone())
            .maybe_client_tls_options(client)
            .build()
    });
    ConnectionOptions::new(url.clone())
        .grpc_compression(compression)
        .maybe_tls_options(tls)
        .maybe_api_key(auth.api_key.clone())
        .build()
}

/// How long a workflow task may wait on a worker's sticky queue before another worker may
/// take it: the stall a task sees after its worker was killed.
pub const STICKY_TIMEOUT: Duration = Duration::from_secs(3);

/// Stops a worker started by [`spawn_worker_thread`].
pub type Shutdown = Box<dyn Fn() + Send + Sync>;

pub(crate) fn task_worker_options(
    task_queue: String,
    activities: Activities,
    cached: usize,
) -> Result<WorkerOptions, String> {
    Ok(WorkerOptions::new(task_queue)
        .max_cached_workflows(cached.max(2))
        .register_workflow::<TaskWorkflow>()
        .map_err(|e| e.to_string())?
        .register_activities(activities)
        .graceful_shutdown_period(Duration::from_secs(5))
        // After a worker dies (SIGKILL), its tasks' next workflow task waits on the dead
        // worker's sticky queue this long before any worker may take it (SDK default 10 s).
        .sticky_queue_schedule_to_start_timeout(STICKY_TIMEOUT)
        .build())
}

/// Runs a Temporal worker on a thread of its own: `Worker::run` is not `Send`, so it is
/// driven by `block_on` there. Its activities and pollers run on the caller's runtime when
/// that runtime has a pool of workers (the harness's, which also serves HTTP and drives the
/// Temporal client's connection), else on a pool of two of the worker's own. Returns once
/// the worker exists, with its shutdown handle and thread.
pub async fn spawn_worker_thread(
    client: Client,
    options: impl FnOnce() -> Result<WorkerOptions, String> + Send + 'static,
) -> Result<(Shutdown, std::thread::JoinHandle<()>), HarnessError> {
    start_worker_thread(client, options, Arc::new(tokio::sync::Notify::new())).await
}

/// [`spawn_worker_thread`], whose run also ends at once, without the worker's shutdown, when
/// `end_abruptly` is notified: the way a fatal SDK error ends it (`Worker::run` returns
/// before the core worker's shutdown), for the supervisor's test.
///
/// However the run ends (a shutdown, an error, a panic), the worker leaves the client's
/// registry of workers when its thread does. The SDK removes it only in its shutdown, and
/// while a dead worker stays registered no new worker for the same task queue can be
/// created on that client ("Registration of multiple workers with overlapping worker task
/// types"): the supervisor could never replace it.
pub(crate) async fn start_worker_thread(
    client: Client,
    options: impl FnOnce() -> Result<WorkerOptions, String> + Send + 'static,
    end_abruptly: Arc<tokio::sync::Notify>,
) -> Result<(Shutdown, std::thread::JoinHandle<()>), HarnessError> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<Shutdown, HarnessError>>();
    // One pool for HTTP, the client's connection and the worker's tasks: a poll's answer, an
    // activity and the gRPC call that completes it no longer cross from one runtime's
    // threads to another's (issue 31: about a fifth fewer thread switches per message, and
    // less of the harness's CPU per message). A current-thread runtime runs its tasks only on
    // the thread that drives it, so under one the worker keeps a pool of its own.
    let caller = tokio::runtime::Handle::current();
    let shared = (caller.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread).then_some(caller);
    // Ends the run when the shared runtime shuts down (its tasks are dropped, this one's sender
    // with them) with the worker still running: its activities were dropped unfinished, so its
    // shutdown would wait for them forever, and the runtime's drop for this thread.
    let (runtime_gone, gone) = tokio::sync::oneshot::channel::<()>();
    let watch = shared.as_ref().map(|handle| {
        handle.spawn(async move {
            let _held = runtime_gone;
            std::future::pending::<()>().await
        })
    });
    let thread = std::thread::Builder::new()
        .name("temporal-worker".into())
        .spawn(move || {
            // The watch ends with this thread, however it ends.
            let watched = watch.is_some();
            let _unwatch = OnDrop(Some(move || {
                if let Some(watch) = watch {
                    watch.abort();
                }
            }));
            let (handle, _own) = match shared {
                Some(handle) => (handle, None),
                None => match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("harness-activity")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => (rt.handle().clone(), Some(rt)),
                    Err(e) => {
                        let _ = tx.send(Err(HarnessError::Worker(e.to_string())));
                        return;
                    }
                },
            };
            let workers = client.connection().workers();
            handle.block_on(async move {
                let built = Runtime::from_current_tokio(Default::default())
                    .map_err(|e| e.to_string())
                    .and_then(|runtime| Ok((runtime, options()?)))
                    .and_then(|(runtime, options)| {
                        Worker::new(&runtime, client, options).map(|w| (runtime, w)).map_err(|e| e.to_string())
                    });
                let (_runtime, mut worker) = match built {
                    Ok(w) => w,
                    Err(e) => {
                        let _ = tx.send(Err(HarnessError::Worker(e)));
                        return;
                    }
                };
                let key = worker.worker_instance_key();
                // Runs on every way out of this block, an unwinding panic included. After a
                // shutdown the SDK has already done it, and both calls fail harmlessly.
                let _unregister = OnDrop(Some(move || {
                    let _ = workers.unregister_slot_provider(key);
                    let _ = workers.finalize_unregister(key);
                }));
                let _ = tx.send(Ok(Box::new(worker.shutdown_handle())));
                // A run that ends without the worker's shutdown (an error, a panic, the runtime
                // gone) leaves the core worker's pollers running on the shared runtime (its own
                // runtime, dropped with this thread, used to end them): they would go on taking
                // the task queue's tasks for a worker that no longer runs them, and its
                // replacement would starve. Then the shutdown is started as this block ends.
                let mut stop_polling = OnDrop(Some(worker.shutdown_handle()));
                let ended_abruptly = tokio::select! {
                    biased;
                    _ = gone, if watched => {
                        tracing::warn!("the runtime of the Temporal worker shut down before the worker");
                        true
                    }
                    ran = worker.run() => ran.inspect_err(|e| {
                        tracing::error!(error = %e, "the Temporal worker stopped");
                    }).is_err(),
                    _ = end_abruptly.notified() => {
                        tracing::error!("the Temporal worker was ended without its shutdown");
                        true
                    }
                };
                if !ended_abruptly {
                    stop_polling.0 = None;
                }
            });
        })
        .map_err(|e| HarnessError::Worker(e.to_string()))?;
    let shutdown = rx.await.map_err(|_| HarnessError::Worker("the worker thread ended before it started".into()))??;
    Ok((shutdown, thread))
}

/// Calls its function when dropped.
pub(crate) struct OnDrop<F: FnOnce()>(pub(crate) Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
