//! The [`Harness`]: starts the store, Temporal (embedded or remote), the worker and the
//! request handler, serves the A2A router, and stops all of it cleanly.

use crate::config::{Config, TemporalMode};
use crate::handler::HarnessHandler;
use crate::temporal_dev::{EmbeddedTemporal, TemporalCliError, find_or_provision_cli};
use harness_push::{DeliveryPolicy, Pusher};
use harness_store::Store;
use harness_workflow::models::{ModelRegistry, ScriptedModel};
use harness_workflow::redaction::Redactor;
use harness_workflow::{Activities, TaskWorkflow};
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

/// Why the harness could not start.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error(transparent)]
    TemporalCli(#[from] TemporalCliError),
    #[error("cannot open the store: {0}")]
    Store(#[from] harness_store::StoreError),
    #[error("cannot connect to Temporal at {address}: {why}")]
    Connect { address: String, why: String },
    #[error("cannot start the Temporal worker: {0}")]
    Worker(String),
}

/// A running harness.
pub struct Harness {
    handler: Arc<HarnessHandler>,
    worker_shutdown: Option<Box<dyn Fn() + Send + Sync>>,
    worker_task: Option<std::thread::JoinHandle<()>>,
    embedded: Option<EmbeddedTemporal>,
    store: Store,
}

/// The model registry a config asks for (D6).
fn models(config: &Config) -> Result<ModelRegistry, crate::ConfigError> {
    let mut registry = ModelRegistry::with_echo();
    if let Some(file) = &config.models.scripted.file {
        let model = ScriptedModel::from_file(file).map_err(crate::ConfigError)?;
        registry.register("scripted", Arc::new(model));
    }
    if registry.get(&config.agent.model).is_none() {
        let hint = if config.agent.model == "scripted" { " (set `[models.scripted] file`)" } else { "" };
        return Err(crate::ConfigError(format!(
            "`agent.model` = `{}` is not available{hint}; available: {}",
            config.agent.model,
            registry.names().join(", ")
        )));
    }
    Ok(registry)
}

impl Harness {
    /// Starts everything: store, Temporal (provisioned and started when embedded),
    /// worker. `base_url` is where clients reach the server (for the card).
    pub async fn start(config: &Config, base_url: &str) -> Result<Self, HarnessError> {
        let models = models(config)?;
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            crate::ConfigError(format!("cannot create the data dir {}: {e}", config.data_dir.display()))
        })?;
        // A malformed push key stops the start before anything is opened.
        let push_key = config.push_key()?;
        let store = Store::connect(&config.store_url()).await?;

        let (embedded, address) = match config.temporal.mode {
            TemporalMode::Embedded => {
                let cli = find_or_provision_cli(config.temporal.cli.as_deref()).await?;
                let server = EmbeddedTemporal::start(&cli, &config.data_dir.join("temporal.db")).await?;
                let address = server.address.clone();
                (Some(server), address)
            }
            TemporalMode::Remote => (None, config.temporal.address.clone()),
        };
        let client = connect(&address, &config.temporal.namespace).await?;

        let instant_model = models.get(&config.agent.model).is_some_and(|m| m.is_instant());
        if push_key.is_none() {
            tracing::warn!(
                "push notifications are off: set {} (or `push.key_file`) to turn them on",
                harness_push::KEY_ENV
            );
        }
        let pusher = push_key.map(|key| Pusher::new(store.clone(), key, DeliveryPolicy::default()));
        let activities = Activities { store: store.clone(), models, pusher: pusher.clone() };
        let (worker_shutdown, worker_task) = if config.temporal.worker {
            let queue = config.temporal.task_queue.clone();
            let (shutdown, thread) =
                spawn_worker_thread(client.clone(), move || task_worker_options(queue, activities)).await?;
            (Some(shutdown), Some(thread))
        } else {
            (None, None)
        };

        let card = crate::card::build(
            &config.card,
            &crate::card::CardInputs { base_url, push_notifications: pusher.is_some(), commands: &[] },
        );
        let handler = Arc::new(HarnessHandler {
            client,
            store: store.clone(),
            redactor: Redactor::new(config.secret_values()),
            task_queue: config.temporal.task_queue.clone(),
            // The conformance profile runs every task one-shot (docs/conformance.md).
            lifecycle: if config.agent.model == "conformance" {
                harness_workflow::Lifecycle::OneShot
            } else {
                config.agent.lifecycle
            },
            model: config.agent.model.clone(),
            linger_secs: config.agent.terminal_linger_secs,
            instant_model,
            timeout: Duration::from_secs(config.temporal.request_timeout_secs.max(1)),
            card: Arc::new(card.clone()),
            extended_card: crate::card::build_extended(&config.card, &card),
            pusher,
        });
        Ok(Self { handler, worker_shutdown, worker_task, embedded, store })
    }

    /// The A2A routes (JSON-RPC, HTTP+JSON, card).
    pub fn router(&self) -> axum::Router {
        a2a_server::router(self.handler.clone())
    }

    /// The request handler.
    pub fn handler(&self) -> Arc<HarnessHandler> {
        self.handler.clone()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Stops the worker (letting running activities finish for a few seconds), then the
    /// embedded Temporal server.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.worker_shutdown.take() {
            shutdown();
        }
        if let Some(thread) = self.worker_task.take() {
            let joined = tokio::task::spawn_blocking(move || thread.join());
            let _ = tokio::time::timeout(Duration::from_secs(10), joined).await;
        }
        if let Some(mut server) = self.embedded.take() {
            server.stop().await;
        }
    }
}

/// Connects a Temporal client, retrying for up to 30 s while the server is still coming up
/// (a fresh dev server opens its port before its frontend is healthy).
pub async fn connect(address: &str, namespace: &str) -> Result<Client, HarnessError> {
    let fail = |why: String| HarnessError::Connect { address: address.to_string(), why };
    let url: url::Url = address.parse().map_err(|e: url::ParseError| fail(e.to_string()))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(10),
            Connection::connect(ConnectionOptions::new(url.clone()).build()),
        )
        .await;
        let why = match attempt {
            Ok(Ok(connection)) => {
                return Client::new(connection, ClientOptions::new(namespace.to_string()).build())
                    .map_err(|e| fail(e.to_string()));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer within 10 s".to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(fail(why));
        }
        tracing::debug!(address, why, "Temporal is not ready yet; retrying");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Stops a worker started by [`spawn_worker_thread`].
pub type Shutdown = Box<dyn Fn() + Send + Sync>;

fn task_worker_options(task_queue: String, activities: Activities) -> Result<WorkerOptions, String> {
    Ok(WorkerOptions::new(task_queue)
        .register_workflow::<TaskWorkflow>()
        .map_err(|e| e.to_string())?
        .register_activities(activities)
        .graceful_shutdown_period(Duration::from_secs(5))
        .build())
}

/// Runs a Temporal worker on a thread of its own: `Worker::run` is not `Send`, so it is
/// driven by `block_on` there, while activities run on that runtime's pool. Returns once
/// the worker exists, with its shutdown handle and thread.
pub async fn spawn_worker_thread(
    client: Client,
    options: impl FnOnce() -> Result<WorkerOptions, String> + Send + 'static,
) -> Result<(Shutdown, std::thread::JoinHandle<()>), HarnessError> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<Shutdown, HarnessError>>();
    let thread = std::thread::Builder::new()
        .name("temporal-worker".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("harness-activity")
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(HarnessError::Worker(e.to_string())));
                    return;
                }
            };
            rt.block_on(async move {
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
                let _ = tx.send(Ok(Box::new(worker.shutdown_handle())));
                if let Err(e) = worker.run().await {
                    tracing::error!(error = %e, "the Temporal worker stopped");
                }
            });
        })
        .map_err(|e| HarnessError::Worker(e.to_string()))?;
    let shutdown = rx.await.map_err(|_| HarnessError::Worker("the worker thread ended before it started".into()))??;
    Ok((shutdown, thread))
}
