//! Black-box test fixtures: a real Temporal dev server (shared when `cargo xtask test`
//! started one, else one per test process), the real `tiny-harness` binary as a child
//! process on a free port, and a small A2A client over real HTTP (both bindings, SSE).

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub mod anthropic_mock;
mod client;
pub mod openai_mock;
pub mod otlp;
pub mod webhook;
pub use client::{A2AClient, Answer, SseEvents, kind, message_from, rpc_as, state, task_id, user_text};

/// The A2UI surface the tests and the bench show (issue 30): surface `s1` in the basic
/// catalog, a title "Ready?" and a button `go` labelled "Go" whose action is `go` with
/// context `{"n": 1}`; the messages say `v0.9`, which the server writes `v0.9.1`.
pub fn button_surface() -> serde_json::Value {
    json!([
        {"version": "v0.9", "createSurface": {"surfaceId": "s1",
            "catalogId": "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}},
        {"version": "v0.9", "updateComponents": {"surfaceId": "s1", "components": [
            {"id": "root", "component": "Column", "children": ["title", "go"]},
            {"id": "title", "component": "Text", "text": "Ready?"},
            {"id": "go", "component": "Button", "child": "label",
             "action": {"event": {"name": "go", "context": {"n": 1}}}},
            {"id": "label", "component": "Text", "text": "Go"}
        ]}}
    ])
}

/// Environment variable naming an already running dev server (`host:port`).
pub const SHARED_TEMPORAL_ENV: &str = "TINY_HARNESS_TEST_TEMPORAL";

/// The address (`http://127.0.0.1:port`) of a running dev server.
pub fn temporal_address() -> &'static str {
    static ADDRESS: OnceLock<String> = OnceLock::new();
    ADDRESS.get_or_init(|| {
        if let Ok(addr) = std::env::var(SHARED_TEMPORAL_ENV)
            && !addr.is_empty()
        {
            return addr;
        }
        start_private_dev_server()
    })
}

/// Starts a dev server owned by this test process, from a thread that lives as long as
/// the process (the child gets SIGTERM when that thread's process dies).
fn start_private_dev_server() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let cli = rt.block_on(tiny_harness::temporal_dev::find_or_provision_cli(None)).expect("temporal CLI");
        let dir = tempfile::tempdir().expect("tempdir");
        let server = rt
            .block_on(tiny_harness::temporal_dev::EmbeddedTemporal::start(&cli, &dir.path().join("temporal.db")))
            .expect("dev server");
        tx.send(server.address.clone()).expect("send");
        // Keep the server (and its directory) for the life of the process.
        let _keep = (server, dir);
        loop {
            std::thread::park();
        }
    });
    rx.recv_timeout(Duration::from_secs(120)).expect("the dev server did not start")
}

/// The `tiny-harness` binary built next to this test (or `TINY_HARNESS_BIN`, e.g. a copy
/// a long chaos run uses while the tree is rebuilt).
pub fn harness_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("TINY_HARNESS_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("tiny-harness");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p harness-cli` first (cargo xtask test does)",
        bin.display()
    );
    bin
}

/// How to run a harness under test.
#[derive(Clone, Debug)]
pub struct HarnessOptions {
    pub lifecycle: &'static str,
    /// A scripted model file's content (TOML); `None` runs the echo model.
    pub script: Option<String>,
    /// Run a worker in the harness process.
    pub worker: bool,
    pub request_timeout_secs: u64,
    pub linger_secs: u64,
    /// Literal secret values to redact.
    pub secrets: Vec<String>,
    /// A model by name (`conformance`...), when not scripted.
    pub model: Option<&'static str>,
    /// TOML appended to the generated config (start it with a section header).
    pub extra_config: String,
    /// Run with a push key (TINY_HARNESS_PUSH_KEY), so push notifications are on.
    pub push: bool,
    /// The store URL (default: SQLite in the data dir).
    pub store_url: Option<String>,
    /// Extra environment of the process (fault injection, e.g.
    /// `TINY_HARNESS_FAULT_EMIT_DELAY_MS`).
    pub env: Vec<(String, String)>,
    /// A Temporal server of the test's own (`http://host:port`), e.g. one it kills; default:
    /// the shared dev server.
    pub temporal: Option<String>,
    /// Run on an embedded Temporal dev server of the harness's own (`mode = "embedded"`).
    pub embedded: bool,
    /// TOML lines added to the `[server]` section (e.g. `max_connections = 8`).
    pub server_extra: String,
    /// TOML lines added to the `[agent]` section (e.g. `run_max_events = 200`).
    pub agent_extra: String,
    /// The port to serve on (default: a free one), e.g. one another harness's config names.
    pub port: Option<u16>,
    /// The task queue (default: one of its own), e.g. one another instance serves too.
    pub task_queue: Option<String>,
    /// TOML lines added to the `[temporal]` section (e.g. `tls_ca_file = "..."`).
    pub temporal_extra: String,
    /// Arguments after `serve --config .. --data-dir ..` (e.g. `--log-format json`).
    pub args: Vec<String>,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        Self {
            lifecycle: "conversation",
            script: None,
            worker: true,
            request_timeout_secs: 10,
            linger_secs: 2,
            secrets: Vec::new(),
            model: None,
            extra_config: String::new(),
            push: true,
            store_url: None,
            env: Vec::new(),
            temporal: None,
            embedded: false,
            server_extra: String::new(),
            agent_extra: String::new(),
            port: None,
            task_queue: None,
            temporal_extra: String::new(),
            args: Vec::new(),
        }
    }
}

/// A `tiny-harness serve` child process on a free port, joined to the test dev server.
pub struct HarnessProcess {
    child: Option<Child>,
    pub base_url: String,
    pub port: u16,
    pub task_queue: String,
    pub data_dir: tempfile::TempDir,
    config_path: PathBuf,
    log_path: PathBuf,
    push: bool,
    store_url: Option<String>,
    env: Vec<(String, String)>,
    temporal: String,
    args: Vec<String>,
}

/// A fixed push key for test harnesses (32 bytes, base64).
pub const TEST_PUSH_KEY: &str = "dGlueS1oYXJuZXNzLXRlc3Qta2V5LTMyLWJ5dGVzISE=";

impl HarnessProcess {
    pub async fn start(opts: HarnessOptions) -> Self {
        let data_dir = tempfile::tempdir().expect("tempdir");
        let port = opts.port.unwrap_or_else(tiny_harness::temporal_dev::free_port);
        let task_queue = opts.task_queue.clone().unwrap_or_else(|| format!("test-{}", uuid_like()));
        let temporal_at = if opts.embedded {
            "mode = \"embedded\"".to_string()
        } else {
            format!(
                "mode = \"remote\"\naddress = \"{}\"",
                opts.temporal.as_deref().unwrap_or_else(|| temporal_address())
            )
        };
        let mut config = format!(
            "[server]\nport = {port}\n{}\n\n[temporal]\n{temporal_at}\n{}task_queue = \"{task_queue}\"\nworker = {}\nrequest_timeout_secs = {}\n\n[agent]\nlifecycle = \"{}\"\nterminal_linger_secs = {}\n{}\n",
            opts.server_extra,
            opts.temporal_extra,
            opts.worker,
            opts.request_timeout_secs,
            opts.lifecycle,
            opts.linger_secs,
            opts.agent_extra,
        );
        if let Some(model) = opts.model {
            config.push_str(&format!("model = \"{model}\"\n"));
        }
        if let Some(script) = &opts.script {
            std::fs::write(data_dir.path().join("script.toml"), script).expect("script");
            config.push_str("model = \"scripted\"\n\n[models.scripted]\nfile = \"script.toml\"\n");
        }
        if !opts.secrets.is_empty() {
            config.push_str(&format!("\n[redaction]\nvalues = {}\n", json!(opts.secrets)));
        }
        config.push('\n');
        if let Some(url) = &opts.store_url {
            config.push_str(&format!("[store]\nurl = \"{url}\"\n\n"));
        }
        config.push_str(&opts.extra_config);
        let config_path = data_dir.path().join("harness.toml");
        std::fs::write(&config_path, config).expect("config");
        let log_path = data_dir.path().join("harness.log");
        let mut h = Self {
            child: None,
            base_url: format!("http://127.0.0.1:{port}"),
            port,
            task_queue,
            config_path,
            log_path,
            data_dir,
            push: opts.push,
            store_url: opts.store_url.clone(),
            env: opts.env.clone(),
            temporal: opts.temporal.clone().unwrap_or_else(|| temporal_address().to_string()),
            args: opts.args.clone(),
        };
        h.spawn().await;
        h
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log_path).expect("log");
        let mut command = Command::new(harness_binary());
        if self.push {
            command.env("TINY_HARNESS_PUSH_KEY", TEST_PUSH_KEY);
        } else {
            command.env_remove("TINY_HARNESS_PUSH_KEY");
        }
        command.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let child = command
            .arg("serve")
            .arg("--config")
            .arg(&self.config_path)
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn tiny-harness");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest::Client::new();
        loop {
            if let Ok(r) = client.get(format!("{}/.well-known/agent-card.json", self.base_url)).send().await
                && r.status().is_success()
            {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("tiny-harness exited with {status}:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "tiny-harness did not start:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The harness's combined output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process id of the running harness.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process with SIGKILL (no chance to clean up).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the process again with the same config, data dir and port.
    pub async fn restart(&mut self) {
        self.kill9();
        self.spawn().await;
    }

    /// Starts the process again with another extra environment (after a kill).
    pub async fn restart_with_env(&mut self, env: Vec<(String, String)>) {
        self.kill9();
        self.env = env;
        self.spawn().await;
    }

    /// The store URL of this harness (SQLite in its data dir).
    pub fn store_url(&self) -> String {
        if let Some(url) = &self.store_url {
            return url.clone();
        }
        format!("sqlite://{}", self.data_dir.path().join("harness.db").display())
    }

    /// Opens the harness's store (a second connection to the same file).
    pub async fn store(&self) -> harness_store::Store {
        harness_store::Store::connect(&self.store_url()).await.expect("store")
    }

    /// A Temporal client on the test server.
    pub async fn temporal(&self) -> temporalio_client::Client {
        tiny_harness::connect_temporal(
            &self.temporal,
            "default",
            tiny_harness::GrpcCompression::for_address(&self.temporal),
        )
        .await
        .expect("temporal client")
    }

    /// The history of a task's workflow (its current run), as JSON.
    pub async fn workflow_history(&self, task_id: &str) -> serde_json::Value {
        let raw = self
            .temporal()
            .await
            .get_workflow_handle::<harness_workflow::TaskWorkflow>(task_id)
            .fetch_history(temporalio_client::WorkflowFetchHistoryOptions::default())
            .to_json()
            .await
            .expect("the workflow's history");
        serde_json::from_slice(&raw).expect("a history in JSON")
    }

    pub fn client(&self) -> A2AClient {
        A2AClient::new(&self.base_url)
    }
}

impl Drop for HarnessProcess {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            // SAFETY: signalling our own child.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if c.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn uuid_like() -> String {
    format!("{:x}{:x}", std::process::id(), Instant::now().elapsed().as_nanos() ^ rand_seed())
}

fn rand_seed() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// A Temporal dev server of the test's own, which it kills (SIGKILL) and starts again on
/// the same database and port, as `dev` does when the harness dies with it.
pub struct OwnTemporal {
    cli: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    server: tiny_harness::temporal_dev::EmbeddedTemporal,
}

impl OwnTemporal {
    pub async fn start() -> Self {
        let cli = tiny_harness::temporal_dev::find_or_provision_cli(None).await.expect("temporal CLI");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = tiny_harness::temporal_dev::free_port();
        let server = tiny_harness::temporal_dev::EmbeddedTemporal::start_on(&cli, &dir.path().join("t.db"), port)
            .await
            .expect("dev server");
        Self { cli, dir, port, server }
    }

    pub fn address(&self) -> String {
        self.server.address.clone()
    }

    /// What the server wrote to its log (warnings and errors), all its starts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("t.log")).unwrap_or_default()
    }

    /// SIGKILL, and nothing more.
    pub async fn kill(&mut self) {
        self.server.kill().await;
    }

    /// A new server on the same database and port (after [`OwnTemporal::kill`]).
    pub async fn start_again(&mut self) {
        self.server =
            tiny_harness::temporal_dev::EmbeddedTemporal::start_on(&self.cli, &self.dir.path().join("t.db"), self.port)
                .await
                .expect("dev server");
    }

    /// SIGKILL, then a new server on the same database and port.
    pub async fn crash_and_restart(&mut self) {
        self.kill().await;
        self.start_again().await;
    }
}

/// Every run of a task's workflow, oldest first: a run that continued as new and the runs
/// after it (issue 15).
pub async fn runs_of(client: &temporalio_client::Client, task_id: &str) -> Vec<temporalio_client::WorkflowExecution> {
    use futures::StreamExt;
    let mut runs: Vec<_> = client
        .list_workflows(format!("WorkflowId = \"{task_id}\""), Default::default())
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(|r| r.expect("list the task's runs"))
        .collect();
    runs.sort_by_key(|r| r.start_time());
    runs
}

/// A handle on one run of a task's workflow.
pub fn run_handle(
    client: &temporalio_client::Client,
    task_id: &str,
    run_id: &str,
) -> temporalio_client::UntypedWorkflowHandle<temporalio_client::Client> {
    temporalio_client::WorkflowExecutionInfo::builder()
        .namespace("default")
        .workflow_id(task_id)
        .run_id(run_id.to_string())
        .build()
        .bind_untyped(client.clone())
}
