//! MCP tool sources (issue 29), with the official Rust SDK (`rmcp`): a server started as a
//! child process speaking stdio, or one reached over streamable HTTP. Its tools are listed
//! when the harness starts and again on `notifications/tools/list_changed`; the model sees
//! each as `<id>__<tool>` (at most 64 characters; a longer one is left out, with a warning).
//! A source that is down makes its tools answer an error result, never hangs a turn: a call
//! that finds it closed reconnects (a stdio server is started again), at most once per
//! backoff window (1 s doubling to 30 s).

use crate::tools::{Tool, ToolContext, ToolSpec};
use futures::future::BoxFuture;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a source is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum McpTransport {
    /// A child process speaking MCP on stdio; `env` holds the values already read.
    Stdio { command: String, args: Vec<String>, env: Vec<(String, String)> },
    /// A streamable HTTP endpoint; `headers` hold the values already read.
    Http { url: String, headers: Vec<(String, String)> },
}

/// One `[[mcp]]` entry, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct McpSettings {
    pub id: String,
    pub transport: McpTransport,
    /// Only these tools (all when empty).
    pub tools: Vec<String>,
    /// Never these.
    pub exclude: Vec<String>,
    /// Every tool of the source may be retried (whatever its annotations say).
    pub idempotent: bool,
}

/// The separator between a source's id and its tool's name, as the model sees them.
pub const SEPARATOR: &str = "__";

struct Listed {
    spec: ToolSpec,
    /// The server's own name of the tool.
    name: String,
    idempotent: bool,
}

#[derive(Default)]
struct State {
    service: Option<RunningService<RoleClient, Handler>>,
    tools: BTreeMap<String, Arc<Listed>>,
    /// Why the source is down, when it is.
    down: Option<String>,
    /// When a reconnect was last tried, and the wait before the next.
    tried: Option<Instant>,
    backoff: Duration,
}

/// A running MCP source.
pub struct McpSource {
    settings: McpSettings,
    state: tokio::sync::Mutex<State>,
    /// The tools as the registry reads them (a snapshot refreshed on every listing).
    listed: Mutex<Vec<Arc<Listed>>>,
}

/// The client side's handler: a `tools/list_changed` notification re-lists the tools.
#[derive(Clone)]
struct Handler {
    source: std::sync::Weak<McpSource>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let source = self.source.clone();
        async move {
            if let Some(source) = source.upgrade() {
                // Listing asks the server, which is answering this notification's stream:
                // it runs apart.
                tokio::spawn(async move { source.relist().await });
            }
        }
    }
}

impl McpSource {
    pub fn new(settings: McpSettings) -> Arc<Self> {
        Arc::new(Self { settings, state: Default::default(), listed: Mutex::new(Vec::new()) })
    }

    pub fn id(&self) -> &str {
        &self.settings.id
    }

    /// Connects and lists the tools; a failure leaves the source down (its tools answer
    /// errors) and is returned for the log.
    pub async fn start(self: &Arc<Self>) -> Result<usize, String> {
        let mut state = self.state.lock().await;
        self.connect(&mut state).await
    }

    async fn connect(self: &Arc<Self>, state: &mut State) -> Result<usize, String> {
        state.tried = Some(Instant::now());
        if let Some(old) = state.service.take() {
            let _ = old.cancel().await;
        }
        let handler = Handler { source: Arc::downgrade(self) };
        let id = &self.settings.id;
        let service = match &self.settings.transport {
            McpTransport::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env.iter().cloned()).kill_on_drop(true);
                let transport = rmcp::transport::TokioChildProcess::new(cmd)
                    .map_err(|e| format!("MCP source `{id}`: cannot start `{command}`: {e}"))?;
                handler.serve(transport).await.map_err(|e| format!("MCP source `{id}`: {e}"))
            }
            McpTransport::Http { url, headers } => {
                let map = crate::header_map(headers, |k, is_name| match is_name {
                    true => format!("MCP source `{id}`: `{k}` is not a header name"),
                    false => format!("MCP source `{id}`: the value of header `{k}` is not one"),
                })?;
                let client = reqwest::Client::builder()
                    .default_headers(map)
                    .build()
                    .map_err(|e| format!("MCP source `{id}`: {e}"))?;
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                );
                let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
                handler.serve(transport).await.map_err(|e| format!("MCP source `{id}` at {url}: {e}"))
            }
        };
        let service = match service {
            Ok(s) => s,
            Err(why) => {
                state.down = Some(why.clone());
                state.backoff = (state.backoff * 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
                return Err(why);
            }
        };
        let listed = service.peer().list_all_tools().await;
        state.service = Some(service);
        match listed {
            Ok(tools) => {
                state.down = None;
                state.backoff = Duration::ZERO;
                Ok(self.take_listing(state, tools))
            }
            Err(e) => {
                let why = format!("MCP source `{id}`: tools/list failed: {e}");
                state.down = Some(why.clone());
                Err(why)
            }
        }
    }

    /// Lists the tools again (after `tools/list_changed`).
    async fn relist(self: Arc<Self>) {
        let mut state = self.state.lock().await;
        let Some(peer) = state.service.as_ref().map(|s| s.peer().clone()) else { return };
        match peer.list_all_tools().await {
            Ok(tools) => {
                let n = self.take_listing(&mut state, tools);
                tracing::info!(source = %self.settings.id, tools = n, "MCP tools listed again (tools/list_changed)");
            }
            Err(e) => tracing::warn!(source = %self.settings.id, error = %e, "MCP tools/list failed"),
        }
    }

    /// Keeps the tools the entry allows, named as the model sees them.
    fn take_listing(&self, state: &mut State, tools: Vec<rmcp::model::Tool>) -> usize {
        let s = &self.settings;
        let mut kept = BTreeMap::new();
        for tool in tools {
            let name = tool.name.to_string();
            if (!s.tools.is_empty() && !s.tools.contains(&name)) || s.exclude.contains(&name) {
                continue;
            }
            let seen = format!("{}{SEPARATOR}{name}", s.id);
            if crate::tools::check_name(&seen).is_err() {
                tracing::warn!(source = %s.id, tool = %name, "MCP tool left out: `{seen}` is not a name every provider takes");
                continue;
            }
            let hints = tool.annotations.as_ref();
            let idempotent = s.idempotent
                || hints.is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true));
            let spec = ToolSpec {
                name: seen.clone(),
                description: tool.description.as_deref().unwrap_or_default().to_string(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            };
            kept.insert(seen, Arc::new(Listed { spec, name, idempotent }));
        }
        let n = kept.len();
        *self.listed.lock().unwrap() = kept.values().cloned().collect();
        state.tools = kept;
        n
    }

    /// The tools as the model sees them now.
    pub fn specs(&self) -> Vec<(ToolSpec, bool)> {
        self.listed.lock().unwrap().iter().map(|l| (l.spec.clone(), l.idempotent)).collect()
    }

    /// Whether this source lists a tool of that name.
    pub fn lists(&self, name: &str) -> bool {
        self.listed.lock().unwrap().iter().any(|l| l.spec.name == name)
    }

    /// The tool the model names, as a [`Tool`] that calls this source.
    pub fn tool(self: &Arc<Self>, name: &str) -> Option<Arc<dyn Tool>> {
        let listed = self.listed.lock().unwrap().iter().find(|l| l.spec.name == name).cloned()?;
        Some(Arc::new(McpTool { source: self.clone(), listed }))
    }

    /// Calls a tool; a source that is down (or closes) is reconnected once per backoff
    /// window, else the call answers why it is down.
    async fn call(self: Arc<Self>, name: String, arguments: Value) -> Result<String, String> {
        let peer = {
            let mut state = self.state.lock().await;
            let closed = state.service.as_ref().is_none_or(|s| s.is_transport_closed());
            if closed {
                let wait = state.backoff;
                let due = state.tried.is_none_or(|t| t.elapsed() >= wait);
                if !due {
                    let why = state.down.clone().unwrap_or_else(|| "it closed".into());
                    return Err(format!("the MCP source `{}` is down ({why})", self.settings.id));
                }
                if state.service.is_some() {
                    state.down = Some("its connection closed".into());
                }
                self.connect(&mut state).await.map_err(|why| format!("the MCP source is down: {why}"))?;
            }
            state.service.as_ref().map(|s| s.peer().clone()).ok_or("the MCP source is down")?
        };
        // The call's trace context, as MCP carries it (`params._meta.traceparent`), over stdio and
        // HTTP alike: the server's spans can join the harness's trace (issue 32).
        let meta = crate::current_traceparent().map(|tp| {
            let mut meta = rmcp::model::Meta::new();
            meta.0.insert("traceparent".into(), tp.into());
            meta
        });
        let params =
            CallToolRequestParams { meta, name: name.into(), arguments: arguments.as_object().cloned(), task: None };
        let result = match peer.call_tool(params).await {
            Ok(result) => result,
            // The server answered with an error: the connection is fine.
            Err(rmcp::ServiceError::McpError(e)) => return Err(format!("MCP tools/call failed: {}", e.message)),
            // The connection broke (a server that restarted forgets an HTTP session): the next
            // call connects again.
            Err(e) => {
                let why = format!("MCP tools/call failed: {e}");
                let mut state = self.state.lock().await;
                if let Some(old) = state.service.take() {
                    tokio::spawn(async move { drop(old.cancel().await) });
                }
                state.down = Some(why.clone());
                return Err(format!("{why} (the source `{}` will be connected again)", self.settings.id));
            }
        };
        let mut text: Vec<String> = result
            .content
            .iter()
            .map(|c| match c.raw.as_text() {
                Some(t) => t.text.clone(),
                None => serde_json::to_string(&c.raw).unwrap_or_default(),
            })
            .collect();
        if text.is_empty()
            && let Some(structured) = &result.structured_content
        {
            text.push(structured.to_string());
        }
        let text = text.join("\n");
        if result.is_error == Some(true) { Err(text) } else { Ok(text) }
    }

    /// Stops the source (a stdio server's process ends).
    pub async fn stop(&self) {
        if let Some(service) = self.state.lock().await.service.take() {
            let _ = service.cancel().await;
        }
    }
}

struct McpTool {
    source: Arc<McpSource>,
    listed: Arc<Listed>,
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.listed.spec
    }
    fn idempotent(&self) -> bool {
        self.listed.idempotent
    }
    fn call(&self, _ctx: ToolContext, arguments: Value) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(self.source.clone().call(self.listed.name.clone(), arguments))
    }
}
