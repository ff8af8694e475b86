//! The [`Harness`]: starts the store, Temporal (embedded or remote), the worker and the
//! request handler, serves the A2A router, and stops all of it cleanly.

use crate::config::{Config, TemporalMode};
use crate::handler::{HarnessHandler, ParticipantResolver};
use crate::hosting::RouteOptions;
use crate::temporal_dev::{EmbeddedTemporal, TemporalCliError, find_or_provision_cli};
use harness_agent::Activities;
use harness_agent::commands::{CommandInfo, CommandRegistry};
use harness_agent::mcp::McpSource;
use harness_agent::models::{ModelRegistry, ProviderContext, ProviderFactory, ProviderKinds, ScriptedModel};
use harness_agent::redaction::Redactor;
use harness_agent::tools::{ask_participant_spec, delegate_spec, emit_ui_spec};
use harness_push::{DeliveryPolicy, Pusher};
use harness_store::Store;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::Client;

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

/// The model registry a config asks for (D6): the built-in models, and each
/// `[models.<name>]` built by its kind's factory.
fn models(config: &Config, kinds: &ProviderKinds) -> Result<ModelRegistry, crate::ConfigError> {
    let mut registry = ModelRegistry::with_echo();
    if let Some(file) = &config.models.scripted.file {
        let model = ScriptedModel::from_file(file).map_err(crate::ConfigError)?;
        registry.register("scripted", Arc::new(model));
    }
    for (name, table) in &config.models.named {
        let context = ProviderContext { name, instructions: config.agent.instructions.as_deref() };
        registry.register(name, kinds.build(table, &context).map_err(crate::ConfigError)?);
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

/// How long a start waits for each MCP source to list its tools.
const MCP_START: std::time::Duration = std::time::Duration::from_secs(20);

/// The parts that exist only while the harness runs.
struct Running {
    worker: Option<crate::supervise::SupervisedWorker>,
    embedded: Option<crate::supervise::Supervisor>,
    probe: Option<tokio::task::JoinHandle<()>>,
    store: Store,
    monitor_task: Option<tokio::task::JoinHandle<()>>,
    push_sweeper: Option<tokio::task::JoinHandle<()>>,
    reconciler: Option<tokio::task::JoinHandle<()>>,
}

/// The agent, embeddable (S17): [`Harness::router`] exists from construction and answers
/// 503 until [`Harness::start`]; `start`/`stop` bring the store, Temporal, the worker and
/// the request handler up and down.
#[derive(Clone)]
pub struct Harness {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) options: RouteOptions,
    pub(crate) prefix: String,
    pub(crate) public_url: String,
    pub(crate) card: Arc<a2a_types::AgentCard>,
    pub(crate) extended_card: Option<a2a_types::AgentCard>,
    pub(crate) resolver: Option<Arc<dyn ParticipantResolver>>,
    /// The request handler while running; `None` before start and after stop.
    pub(crate) handler: Arc<a2a_server::HandlerSlot<HarnessHandler>>,
    pub(crate) limiter: crate::hosting::RateLimiter,
    /// `server.trusted_proxies`: whose `X-Forwarded-For` names the client.
    pub(crate) proxies: crate::peer::Proxies,
    pub(crate) monitor: crate::hosting::MonitorSnapshot,
    running: tokio::sync::Mutex<Option<Running>>,
    /// The model providers, built (and checked) once with the harness.
    models: ModelRegistry,
    /// The provider kinds the models were built by (their secrets are redacted).
    kinds: ProviderKinds,
    /// The tools the model may call (issue 29), frozen at build.
    tools: harness_agent::tools::ToolRegistry,
    /// The slash commands, frozen when the harness was built (S9).
    commands: CommandRegistry,
    policy: Option<Arc<dyn crate::handler::Policy>>,
}

/// Builds a [`Harness`] with what only a host can give: route options and a participant
/// resolver.
pub struct HarnessBuilder {
    config: Config,
    options: RouteOptions,
    resolver: Option<Arc<dyn ParticipantResolver>>,
    commands: harness_agent::commands::CommandRegistryBuilder,
    policy: Option<Arc<dyn crate::handler::Policy>>,
    kinds: ProviderKinds,
    tools: harness_agent::tools::ToolRegistryBuilder,
}

impl HarnessBuilder {
    /// Turns routes and layers off one by one (S18).
    pub fn route_options(mut self, options: RouteOptions) -> Self {
        self.options = options;
        self
    }

    /// The only source of the caller's participant id when given (S17).
    pub fn participant_resolver(mut self, resolver: Arc<dyn ParticipantResolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Registers a slash command (S9): `/<name> <args>` runs `handler` with the task's
    /// context and the arguments, and its text is the reply. The registry is frozen by
    /// [`HarnessBuilder::build`] and published on the card; a bad, built-in or repeated name
    /// is the build's error.
    pub fn command(
        mut self,
        name: &str,
        description: &str,
        usage: &str,
        handler: impl harness_agent::commands::CommandHandler,
    ) -> Self {
        let info = CommandInfo { name: name.into(), description: description.into(), usage: usage.into() };
        self.commands = self.commands.register(info, handler);
        self
    }

    /// Registers a host tool the model may call (issue 29): `name` (1 to 64 of `a-z A-Z 0-9
    /// _ -`), what it does, a JSON Schema of its arguments object, and the handler, which
    /// gets the call's context and arguments that passed the schema and answers the text the
    /// model reads (`Err`: the tool's error, which the model reads too). A tool registered
    /// with [`HarnessBuilder::idempotent_tool`] is retried after a failure or a crash; this
    /// one is attempted once. A bad or repeated name or a schema that does not compile is
    /// the build's error. The handler runs on the runtime the harness was started on, beside
    /// its HTTP (issue 31): work that blocks a thread belongs in `tokio::task::spawn_blocking`.
    pub fn tool(
        self,
        name: &str,
        description: &str,
        input_schema: serde_json::Value,
        handler: impl harness_agent::tools::ToolHandler,
    ) -> Self {
        self.add_tool(name, description, input_schema, false, handler)
    }

    /// [`HarnessBuilder::tool`] for a tool that may run more than once for one call (a
    /// read, or a write keyed by the call): it is retried.
    pub fn idempotent_tool(
        self,
        name: &str,
        description: &str,
        input_schema: serde_json::Value,
        handler: impl harness_agent::tools::ToolHandler,
    ) -> Self {
        self.add_tool(name, description, input_schema, true, handler)
    }

    fn add_tool(
        mut self,
        name: &str,
        description: &str,
        input_schema: serde_json::Value,
        idempotent: bool,
        handler: impl harness_agent::tools::ToolHandler,
    ) -> Self {
        let spec = harness_agent::tools::ToolSpec { name: name.into(), description: description.into(), input_schema };
        let tool = harness_agent::tools::HostTool::new(spec, idempotent, handler);
        self.tools = self.tools.register(Arc::new(tool));
        self
    }

    /// Adds a model provider kind: each `[models.<name>]` with `kind = "<its kind>"` is
    /// built by `factory` (D6). The built-in kinds (`openai`) are there already; a factory of
    /// the same kind replaces one.
    pub fn model_kind(mut self, factory: Arc<dyn ProviderFactory>) -> Self {
        self.kinds.register(factory);
        self
    }

    /// The host's policy points (S9): `request.received`, `command.invoked` and, before each
    /// tool call the model asks for, `tool.invoked` (issue 29).
    pub fn policy(mut self, policy: Arc<dyn crate::handler::Policy>) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Checks the configuration and builds the card; opens nothing.
    pub fn build(self) -> Result<Harness, crate::ConfigError> {
        let config = self.config;
        let models = models(&config, &self.kinds)?;
        let tools = self.tools.try_build().map_err(crate::ConfigError)?;
        // `agent.tools = false`: the model is offered none.
        let sources = crate::config::check_mcp(&config.mcp)?.into_iter().map(McpSource::new).collect();
        crate::config::check_agents(&config.agents)?;
        let limits = config.tool_limits()?;
        let mut tools = if config.agent.tools { tools.with_sources(sources) } else { Default::default() };
        // The built-ins the workflow runs are offered beside them (docs/tools.md).
        if limits.ask_participant {
            tools = tools.with_builtin(ask_participant_spec());
        }
        if !limits.delegates.is_empty() {
            tools = tools.with_builtin(delegate_spec(&limits.delegates));
        }
        if limits.emit_ui {
            tools = tools.with_builtin(emit_ui_spec());
        }
        if config.temporal.mode == crate::config::TemporalMode::Remote {
            config.temporal.auth()?;
        }
        let delegates = config.agents.iter().map(|a| a.id.clone()).collect();
        let commands = self.commands.delegation(delegates).try_build().map_err(crate::ConfigError)?;
        config.agent.run_limits()?;
        let prefix = config.prefix();
        let public_url = config.public_url()?;
        let card = crate::card::build(
            &config.card,
            &crate::card::CardInputs {
                base_url: &public_url,
                push_notifications: config.push_configured(),
                commands: &commands.list(),
                a2ui: limits.emit_ui,
            },
        );
        let extended_card = crate::card::build_extended(&config.card, &card);
        let limiter = crate::hosting::RateLimiter::new(config.server.rate_limit_per_minute);
        let proxies = crate::peer::Proxies::parse(&config.server.trusted_proxies).map_err(crate::ConfigError)?;
        Ok(Harness {
            inner: Arc::new(Inner {
                // S18: the config can turn the push route off too.
                options: RouteOptions {
                    push_route: self.options.push_route && config.server.push_route,
                    metrics: self.options.metrics && config.server.metrics,
                    ..self.options
                },
                prefix,
                public_url,
                card: Arc::new(card),
                extended_card,
                resolver: self.resolver,
                handler: Arc::default(),
                limiter,
                proxies,
                monitor: Default::default(),
                running: tokio::sync::Mutex::new(None),
                models,
                kinds: self.kinds,
                tools,
                commands,
                policy: self.policy,
                config,
            }),
        })
    }
}

impl Harness {
    /// A harness over a configuration; nothing runs until [`Harness::start`].
    pub fn new(config: Config) -> Result<Self, crate::ConfigError> {
        Self::builder(config).build()
    }

    pub fn builder(config: Config) -> HarnessBuilder {
        HarnessBuilder {
            config,
            options: RouteOptions::default(),
            resolver: None,
            commands: CommandRegistry::builder(),
            policy: None,
            kinds: ProviderKinds::built_in(),
            tools: harness_agent::tools::ToolRegistry::builder(),
        }
    }

    /// `base_url` + prefix: what the card and push callbacks carry (S18).
    pub fn public_url(&self) -> &str {
        &self.inner.public_url
    }

    /// The configured mount prefix (`""` or `/a/b`).
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// The configuration this harness was built from.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The agent card.
    pub fn card(&self) -> Arc<a2a_types::AgentCard> {
        self.inner.card.clone()
    }

    /// Whether the harness is started.
    pub fn is_running(&self) -> bool {
        self.inner.handler.get().is_some()
    }

    /// The request handler while running.
    pub fn handler(&self) -> Option<Arc<HarnessHandler>> {
        self.inner.handler.get()
    }

    /// The store while running.
    pub async fn store(&self) -> Option<Store> {
        self.inner.running.lock().await.as_ref().map(|r| r.store.clone())
    }

    /// Ends the running Temporal worker the way a fatal SDK error does (its run returns
    /// without the worker's shutdown), for tests of what follows: the harness starts a new
    /// worker within seconds. Returns whether there was a worker to end.
    #[doc(hidden)]
    pub async fn end_worker_abruptly(&self) -> bool {
        let running = self.inner.running.lock().await;
        let worker = running.as_ref().and_then(|r| r.worker.as_ref());
        worker.inspect(|w| w.end_abruptly()).is_some()
    }

    /// Starts everything: store, Temporal (provisioned and started when embedded), worker,
    /// then opens the gate. Starting a started harness does nothing.
    pub async fn start(&self) -> Result<(), HarnessError> {
        let mut running = self.inner.running.lock().await;
        if running.is_some() {
            return Ok(());
        }
        let config = &self.inner.config;
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            crate::ConfigError(format!("cannot create the data dir {}: {e}", config.data_dir.display()))
        })?;
        // A malformed push key stops the start before anything is opened.
        let push_key = config.push_key()?;
        let store = Store::connect(&config.store_url()).await?;

        let health = Arc::new(crate::supervise::Health::default());
        let (embedded, client) = temporal(config, health.clone()).await?;
        let probe = crate::supervise::spawn_probe(client.clone(), health.clone());

        if push_key.is_none() {
            tracing::warn!(
                "push notifications are off: set {} (or `push.key_file`) to turn them on",
                harness_push::KEY_ENV
            );
        }
        let hosts = harness_push::HostPolicy { allow_private: config.push.allow_private_hosts };
        let policy = DeliveryPolicy { hosts, ..DeliveryPolicy::default() };
        let pusher = push_key.map(|key| Pusher::new(store.clone(), key, policy));
        // S14: deliveries a stopped or killed process left in the outbox.
        // Its first sweep waits for the reconciler (at most a minute): what a crashed workflow
        // task put in the outbox may be cut from it first.
        let (reconciled, reconciled_rx) = tokio::sync::oneshot::channel::<()>();
        let push_sweeper = pusher.as_ref().map(|p| {
            let first = async move {
                let _ = tokio::time::timeout(Duration::from_secs(60), reconciled_rx).await;
            };
            p.spawn_sweeper(config.temporal.task_queue.clone(), first)
        });
        // MCP sources connect and list their tools before the worker takes a turn; one that
        // is down leaves its tools answering errors and is tried again on a call.
        for source in self.inner.tools.sources() {
            match tokio::time::timeout(MCP_START, source.start()).await {
                Ok(Ok(n)) => tracing::info!(source = source.id(), tools = n, "MCP source listed its tools"),
                Ok(Err(why)) => tracing::warn!(source = source.id(), "MCP source is down: {why}"),
                Err(_) => tracing::warn!(source = source.id(), "MCP source did not answer within {MCP_START:?}"),
            }
        }
        let redactor = Arc::new(Redactor::new(config.secret_values_with(&self.inner.kinds)));
        // The host's policy is asked before each tool call (`tool.invoked`).
        let tools = match &self.inner.policy {
            Some(policy) => self
                .inner
                .tools
                .clone()
                .with_gate(Arc::new(crate::handler::PolicyGate { policy: policy.clone(), redactor: redactor.clone() })),
            None => self.inner.tools.clone(),
        };
        let activities = Activities::new(store.clone(), self.inner.models.clone(), pusher.clone())
            .with_commands(self.inner.commands.clone())
            .with_tools(tools, redactor, config.agent.max_tool_result_bytes)
            .with_recorded_content(config.observability.record_content);
        let activities = match self.remotes() {
            Some(remotes) => {
                let check = remotes.clone();
                tokio::spawn(async move { check.check_cards().await });
                activities.with_remotes(remotes)
            }
            None => activities,
        };
        let worker = if config.temporal.worker {
            let queue = config.temporal.task_queue.clone();
            let cached = config.temporal.max_cached_workflows;
            let options = move || crate::worker::task_worker_options(queue.clone(), activities.clone(), cached);
            Some(crate::supervise::SupervisedWorker::start(client.clone(), options).await?)
        } else {
            None
        };

        let handler = Arc::new(self.request_handler(client, store.clone(), pusher, health));
        let monitor_task = self.inner.options.monitor.then(|| {
            crate::hosting::spawn_monitor(
                handler.clone(),
                self.inner.monitor.clone(),
                Duration::from_secs(config.server.monitor_interval_secs.max(1)),
            )
        });
        // After a crash: the store says what Temporal committed (docs/event-log.md).
        let reconciler = if config.temporal.worker {
            Some(crate::reconcile::spawn(handler.clone(), reconciled))
        } else {
            let _ = reconciled.send(());
            None
        };
        self.inner.handler.replace(Some(handler));
        *running =
            Some(Running { worker, embedded, probe: Some(probe), store, monitor_task, push_sweeper, reconciler });
        Ok(())
    }

    /// The configured remote agents (issue 19), with the push callback when the push route
    /// is served; `None` when no agent is configured.
    fn remotes(&self) -> Option<Arc<harness_agent::activities::remote::Remotes>> {
        let config = &self.inner.config;
        if config.agents.is_empty() {
            return None;
        }
        let agents = config
            .agents
            .iter()
            .map(|a| harness_agent::activities::remote::RemoteAgent {
                id: a.id.clone(),
                card_url: a.url.clone(),
                headers: a.resolve().unwrap_or_default(),
            })
            .collect();
        let callback = self.inner.options.push_route.then(|| format!("{}/a2a/push", self.inner.public_url));
        Some(Arc::new(harness_agent::activities::remote::Remotes::new(agents, callback, config.agent.id.clone())))
    }

    /// The request handler over a started store and Temporal client.
    fn request_handler(
        &self,
        client: Client,
        store: Store,
        pusher: Option<Arc<Pusher>>,
        health: Arc<crate::supervise::Health>,
    ) -> HarnessHandler {
        let config = &self.inner.config;
        let provider = self.inner.models.get(&config.agent.model);
        HarnessHandler {
            temporal: crate::handler::TaskClient {
                client,
                task_queue: config.temporal.task_queue.clone(),
                timeout: Duration::from_secs(config.temporal.request_timeout_secs.max(1)),
            },
            store,
            redactor: Redactor::new(config.secret_values_with(&self.inner.kinds)),
            settings: crate::handler::TaskSettings {
                // A provider may need a lifecycle of its own (the conformance profile).
                lifecycle: provider.as_ref().and_then(|p| p.lifecycle()).unwrap_or(config.agent.lifecycle),
                model: config.agent.model.clone(),
                linger_secs: config.agent.terminal_linger_secs,
                instant_model: provider.as_ref().is_some_and(|m| m.is_instant()),
                max_message_bytes: config.agent.max_message_bytes,
                max_message_parts: config.agent.max_message_parts,
                max_push_configs: config.push.max_configs_per_task,
                answer_window: config.agent.answer_window,
                // Checked by HarnessBuilder::build.
                run_limits: config.agent.run_limits().unwrap_or_default(),
                tool_limits: config.tool_limits().unwrap_or_default(),
                agent_id: config.agent.id.clone(),
                provider,
                models: self.inner.models.clone(),
                delegators: config.server.delegators.clone(),
                backstop: Duration::from_millis(config.store.backstop_ms.max(10)),
            },
            extended_card: self.inner.extended_card.clone(),
            pusher,
            resolver: self.inner.resolver.clone(),
            owners: Default::default(),
            closed: Default::default(),
            health,
            commands: self.inner.commands.clone(),
            policy: self.inner.policy.clone(),
        }
    }

    /// Closes the gate (every request is 503 again), stops the worker (letting running
    /// activities finish for a few seconds), then the embedded Temporal server.
    pub async fn stop(&self) {
        let handler = self.inner.handler.replace(None);
        let Some(mut running) = self.inner.running.lock().await.take() else { return };
        let tasks =
            [running.monitor_task.take(), running.push_sweeper.take(), running.reconciler.take(), running.probe.take()];
        for task in tasks.into_iter().flatten() {
            task.abort();
        }
        if let Some(worker) = running.worker.take() {
            worker.stop().await;
        }
        for source in self.inner.tools.sources() {
            source.stop().await;
        }
        // Pushes not posted yet stay in the outbox for the next start (S14).
        if let Some(pusher) = handler.as_ref().and_then(|h| h.pusher.as_ref()) {
            pusher.stop();
        }
        if let Some(server) = running.embedded.take() {
            server.stop().await;
        }
    }

    /// The harness's routes, to be mounted at its prefix (`Router::nest(prefix, ..)`, or as
    /// the whole app when the prefix is empty): the A2A routes, the card, `/openapi.json`,
    /// `/_monitor` and `/ui`, behind the mount check, the 503 gate, CORS and the limits.
    pub fn router(&self) -> axum::Router {
        crate::hosting::router(self, crate::hosting::Mount::AtPrefix)
    }

    /// Runs the harness behind its own server on `listener` (root path = the prefix):
    /// starts it, serves until `shutdown` resolves, then stops it.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HarnessError> {
        self.start().await?;
        let app = if self.inner.prefix.is_empty() {
            self.router()
        } else {
            axum::Router::new().nest(&self.inner.prefix, self.router())
        };
        let server = &self.inner.config.server;
        let caps = crate::accept::ConnectionCaps {
            max: server.max_connections.max(1),
            header_read_timeout: Duration::from_secs(server.header_read_timeout_secs.max(1)),
            per_client: server.max_connections_per_client,
            proxies: self.inner.proxies.clone(),
        };
        // The accept loop runs as a task of the runtime, not on the thread that awaits
        // `serve` (the CLI's main thread): a connection's task then starts on the worker
        // thread that accepted it, with no wake-up of another thread per connection
        // (issue 31, docs/performance.md). Dropping this future still ends the loop.
        let accepting = tokio::spawn(crate::accept::serve_connections(listener, app, caps, shutdown));
        let abort = accepting.abort_handle();
        let _abort_if_dropped = crate::worker::OnDrop(Some(move || abort.abort()));
        let served = match accepting.await {
            Ok(served) => served.map_err(|e| format!("the server failed: {e}")),
            Err(e) => Err(format!("the server's accept loop ended: {e}")),
        };
        self.stop().await;
        served.map_err(HarnessError::Worker)
    }
}

/// Temporal for a start: the embedded dev server (provisioned, started and supervised) or
/// the remote cluster, and a client connected to it.
async fn temporal(
    config: &Config,
    health: Arc<crate::supervise::Health>,
) -> Result<(Option<crate::supervise::Supervisor>, Client), HarnessError> {
    let (embedded, address) = match config.temporal.mode {
        TemporalMode::Embedded => {
            let cli = find_or_provision_cli(config.temporal.cli.as_deref()).await?;
            let db = config.data_dir.join("temporal.db");
            let server = EmbeddedTemporal::start(&cli, &db).await?;
            let address = server.address.clone();
            // A dev server that dies is started again on the same database and port.
            (Some(crate::supervise::Supervisor::spawn(cli, db, server, health)), address)
        }
        TemporalMode::Remote => (None, config.temporal.address.clone()),
    };
    let compression = config.temporal.compression(&address);
    // The embedded dev server speaks plain gRPC on loopback; TLS and an API key are for a
    // remote cluster (issue 20).
    let auth = match config.temporal.mode {
        TemporalMode::Embedded => crate::config::TemporalAuth::default(),
        TemporalMode::Remote => config.temporal.auth()?,
    };
    match crate::worker::connect_with(&address, &config.temporal.namespace, compression, &auth).await {
        Ok(client) => Ok((embedded, client)),
        Err(e) => {
            if let Some(server) = embedded {
                server.stop().await;
            }
            Err(e)
        }
    }
}

/// A harness running behind its own server (S17), stopped with [`RunningHarness::stop`].
pub struct RunningHarness {
    pub harness: Harness,
    /// Where the server listens, e.g. `http://127.0.0.1:8080` (without the prefix).
    pub address: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), HarnessError>>,
}

impl RunningHarness {
    /// Stops the server and the harness.
    pub async fn stop(mut self) -> Result<(), HarnessError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.map_err(|e| HarnessError::Worker(e.to_string()))?
    }
}

/// Binds `server.host:server.port` (port 0 picks a free one, and the public URL follows
/// it unless `server.base_url` is set), starts the harness and serves it until stopped.
pub async fn running_harness(mut config: Config) -> Result<RunningHarness, HarnessError> {
    let addr = format!("{}:{}", config.server.host, config.server.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| crate::ConfigError(format!("cannot listen on {addr} (`server.port`): {e}")))?;
    let local = listener.local_addr().map_err(|e| crate::ConfigError(e.to_string()))?;
    config.server.port = local.port();
    let harness = Harness::new(config)?;
    harness.start().await?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let served = harness.clone();
    let task = tokio::spawn(async move {
        served
            .serve(listener, async move {
                let _ = rx.await;
            })
            .await
    });
    Ok(RunningHarness { harness, address: format!("http://{local}"), stop: Some(tx), task })
}
