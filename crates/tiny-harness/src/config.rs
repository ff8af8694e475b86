//! Configuration: a TOML file (every key optional) over built-in defaults. Errors name
//! the key and the file.
//!
//! ```toml
//! [server]
//! host = "127.0.0.1"
//! port = 8080
//!
//! [temporal]
//! mode = "embedded"            # or "remote"
//! address = "http://127.0.0.1:7233"   # remote only
//! namespace = "default"
//! task_queue = "tiny-harness"
//! cli = "/path/to/temporal"    # optional; else PATH, else the cache dir, else pip
//! request_timeout_secs = 30    # bound on every client call to Temporal
//! worker = true                # false: serve only; workers run in other processes
//! grpc_compression = "gzip"    # or "none"; default: none on a loopback address, else gzip
//!
//! [store]
//! url = "sqlite://.tiny-harness/harness.db"   # default: harness.db in the data dir
//!
//! [agent]
//! lifecycle = "conversation"   # or "one-shot"
//! model = "echo"               # or "scripted"
//! terminal_linger_secs = 2     # the run stays open this long after its terminal event
//!
//! instructions = "You are ..."  # the system prompt of `openai` models
//!
//! [models.scripted]
//! file = "replies.toml"
//!
//! [models.gpt]                 # any name: `agent.model = "gpt"` picks it
//! kind = "openai"              # an OpenAI-compatible Chat Completions endpoint
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o-mini"
//! api_key_env = "OPENAI_API_KEY"   # the key comes from the environment only
//!
//! [redaction]
//! values = ["literal-secret"]  # redacted wherever they appear
//! env = ["OPENAI_API_KEY"]     # the values of these variables too
//!
//! [card]                       # the agent card (S2); every key has a default
//! name = "tiny-harness"
//! description = "..."
//! version = "0.1.0"
//! documentation_url = "https://example.com/docs"
//! [[card.skills]]
//! id = "conversation"
//! name = "Conversation"
//! description = "..."
//! tags = ["chat"]
//! examples = ["hello"]
//! [card.extended]              # present: the card declares an extended card (GetExtendedAgentCard)
//! description = "..."          # replaces the public description in the extended card
//! [[card.extended.skills]]     # added to the public skills in the extended card
//! id = "internal"
//! name = "Internal"
//! description = "..."
//!
//! [push]
//! key_file = "push.key"        # else TINY_HARNESS_PUSH_KEY; `dev` creates push.key in the data dir
//! ```

use harness_workflow::Lifecycle;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A configuration problem; the message names the key and the file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    pub host: String,
    pub port: u16,
    /// The path the harness is mounted at (`""` = the root), e.g. `/agents/helper`.
    pub prefix: String,
    /// Where clients reach the server, e.g. `https://agents.example.com`; default
    /// `http://<host>:<port>`. Its path, when it has one, must equal `prefix`.
    pub base_url: Option<String>,
    /// S16: a larger request body is 413.
    pub max_request_bytes: usize,
    /// S16: more requests per minute from one peer are 429 (0 = no limit).
    pub rate_limit_per_minute: u32,
    /// S20: origins allowed by CORS (for a dev renderer); empty = no CORS.
    pub cors_origins: Vec<String>,
    /// S20: a built web renderer served under `/ui`.
    pub ui_dir: Option<PathBuf>,
    /// S20: how often `/_monitor`'s snapshot is refreshed.
    pub monitor_interval_secs: u64,
    /// Connections served at once by `serve`/`dev`; more wait in the listen backlog.
    pub max_connections: usize,
    /// Connections one client address may hold at once (issue 34; 0: no cap); a trusted
    /// proxy's are not capped. One more is closed at once.
    pub max_connections_per_client: usize,
    /// A request body must arrive whole within this many seconds however it trickles
    /// (issue 34): past it, 408.
    pub body_deadline_secs: u64,
    /// A connection that has not sent a whole request head this long after it opened (or
    /// after its previous response: an idle keep-alive connection too) is closed.
    pub header_read_timeout_secs: u64,
    /// A request body that sends nothing for this long is cut off (408-like 400).
    pub body_read_timeout_secs: u64,
    /// S21: the participant ids besides this agent's own trusted to set a new task's
    /// `lifecycle`, `model` and `reasoning_effort` in its brief.
    pub delegators: Vec<String>,
    /// Proxies (addresses or CIDR ranges, e.g. `10.0.0.0/8`) whose `X-Forwarded-For` names
    /// the client (issue 20): the rate limit then counts the client, not the proxy. From any
    /// other peer the header is ignored.
    pub trusted_proxies: Vec<String>,
    /// Serve the push receiver (S15). Off (a harness remote agents cannot call back), a
    /// stand-in follows its remote task by subscribing (S18).
    pub push_route: bool,
    /// Serve `GET /metrics` in the Prometheus text format (issue 32). Off, nothing is
    /// counted (no metrics recorder is installed).
    pub metrics: bool,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8080,
            prefix: String::new(),
            base_url: None,
            max_request_bytes: 1024 * 1024,
            rate_limit_per_minute: 6000,
            cors_origins: Vec::new(),
            ui_dir: None,
            monitor_interval_secs: 5,
            max_connections: 1024,
            max_connections_per_client: 64,
            body_deadline_secs: 60,
            header_read_timeout_secs: 30,
            body_read_timeout_secs: 30,
            delegators: Vec::new(),
            push_route: true,
            metrics: true,
            trusted_proxies: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    pub url: Option<String>,
    /// How long a stream reader that has read the whole log waits for a wake-up before it
    /// reads again anyway. Appends wake readers at once, in this process and (on Postgres,
    /// by LISTEN/NOTIFY) in every other: this wait only makes up for a lost wake-up.
    pub backstop_ms: u64,
}

impl Default for StoreSection {
    fn default() -> Self {
        Self { url: None, backstop_ms: 1000 }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSection {
    /// The agent's id: names its operations in OpenAPI (`A2A: <id>`).
    pub id: String,
    pub lifecycle: Lifecycle,
    pub model: String,
    /// Seconds a task's run stays open after its terminal event (late messages then meet
    /// the workflow's own refusal).
    pub terminal_linger_secs: u64,
    /// The largest message (its JSON, after redaction) a task takes. A message travels
    /// through Temporal in the update, the workflow's state and the turn's activities, whose
    /// payloads Temporal caps at 2 MB (warning at 256 KB); a larger one is refused up front,
    /// naming this key, instead of wedging its task.
    pub max_message_bytes: usize,
    /// The most parts a message may have (issue 33): a message with more is refused up front,
    /// naming this key, before anything is written.
    pub max_message_parts: usize,
    /// A task's run continues as new once its history passes this many events, estimated
    /// bytes or messages (issue 15; docs/event-log.md, "The run boundary"): Temporal caps
    /// one run at 51,200 events, 50 MB and 2,000 updates.
    pub run_max_events: u32,
    pub run_max_bytes: u64,
    pub run_max_messages: u32,
    /// How much of a task an answer to one message carries when the client set no
    /// `historyLength`: the newest this many messages, and the newest this many artifacts
    /// (SendMessage, the Task that opens a stream, CancelTask). GetTask and ListTasks
    /// answer in full; A2A lets a server return fewer messages than the whole history.
    pub answer_window: u32,
    /// The system prompt of the `openai` models.
    pub instructions: Option<String>,
    /// Whether the model is offered tools (issue 29; docs/tools.md). `false` offers none.
    pub tools: bool,
    /// Rounds of tool calls one turn may take; past them the turn ends saying so.
    pub max_tool_rounds: u32,
    /// How long one tool call may run.
    pub tool_timeout_secs: u64,
    /// A tool's result longer than this is cut (the cut marked) before the model reads it.
    pub max_tool_result_bytes: usize,
    /// The built-in tools the model is offered (docs/tools.md): `emit_ui` (the default: it
    /// only shows the user a surface, which the card's A2UI extension promises),
    /// `ask_participant` and `delegate` (off by default: each changes what the model may do
    /// to a task).
    pub builtin_tools: Vec<String>,
}

impl AgentSection {
    /// The run limits a new task's workflow gets, checked against Temporal's own caps (and
    /// `answer_window`, which must be positive).
    pub fn run_limits(&self) -> Result<harness_workflow::RunLimits, ConfigError> {
        let over = |key: &str, value: u64, cap: u64, what: &str| {
            if value == 0 || value > cap {
                Err(ConfigError(format!(
                    "`agent.{key}` = {value} must be between 1 and {cap} (Temporal ends a run past {cap} {what})"
                )))
            } else {
                Ok(())
            }
        };
        over("run_max_events", u64::from(self.run_max_events), 51_200, "history events")?;
        over("run_max_bytes", self.run_max_bytes, 50 * 1024 * 1024, "bytes of history")?;
        over("run_max_messages", u64::from(self.run_max_messages), 2_000, "updates")?;
        if self.max_message_parts == 0 {
            return Err(ConfigError(
                "`agent.max_message_parts` = 0: a message has at least one part (1 or more)".into(),
            ));
        }
        if self.answer_window == 0 {
            return Err(ConfigError(
                "`agent.answer_window` = 0: an answer must carry at least the newest message (1 or more)".into(),
            ));
        }
        Ok(harness_workflow::RunLimits {
            events: self.run_max_events,
            bytes: self.run_max_bytes,
            messages: self.run_max_messages,
        })
    }

    /// How turns use tools (issue 29), checked.
    pub fn tool_limits(&self) -> Result<harness_workflow::ToolLimits, ConfigError> {
        if !(1..=100).contains(&self.max_tool_rounds) {
            return Err(ConfigError(format!(
                "`agent.max_tool_rounds` = {} must be between 1 and 100 (set `agent.tools = false` to offer no tools)",
                self.max_tool_rounds
            )));
        }
        if !(1..=86_400).contains(&self.tool_timeout_secs) {
            return Err(ConfigError(format!(
                "`agent.tool_timeout_secs` = {} must be between 1 and 86400",
                self.tool_timeout_secs
            )));
        }
        if !(256..=1024 * 1024).contains(&self.max_tool_result_bytes) {
            return Err(ConfigError(format!(
                "`agent.max_tool_result_bytes` = {} must be between 256 and 1048576 (a result travels through Temporal)",
                self.max_tool_result_bytes
            )));
        }
        if let Some(unknown) = self.builtin_tools.iter().find(|t| !BUILTIN_TOOLS.contains(&t.as_str())) {
            return Err(ConfigError(format!(
                "`agent.builtin_tools`: `{unknown}` is not a built-in tool (expected one of {})",
                BUILTIN_TOOLS.join(", ")
            )));
        }
        Ok(harness_workflow::ToolLimits {
            max_rounds: self.max_tool_rounds,
            timeout_secs: self.tool_timeout_secs,
            ask_participant: self.tools && self.builtin_tools.iter().any(|t| t == harness_workflow::ASK_PARTICIPANT),
            // Set by `Config::tool_limits`, which knows the `[[agents]]`.
            delegates: Vec::new(),
            emit_ui: self.tools && self.builtin_tools.iter().any(|t| t == harness_workflow::a2ui::EMIT_UI),
        })
    }
}

/// The built-in tools `[agent] builtin_tools` may name.
pub const BUILTIN_TOOLS: &[&str] =
    &[harness_workflow::ASK_PARTICIPANT, harness_workflow::DELEGATE, harness_workflow::a2ui::EMIT_UI];

impl Default for AgentSection {
    fn default() -> Self {
        Self {
            id: "tiny-harness".into(),
            lifecycle: Lifecycle::Conversation,
            model: "echo".into(),
            terminal_linger_secs: 2,
            max_message_bytes: 256 * 1024,
            max_message_parts: 64,
            run_max_events: harness_workflow::RunLimits::default().events,
            run_max_bytes: harness_workflow::RunLimits::default().bytes,
            run_max_messages: harness_workflow::RunLimits::default().messages,
            answer_window: 50,
            instructions: None,
            tools: true,
            max_tool_rounds: harness_workflow::ToolLimits::default().max_rounds,
            tool_timeout_secs: harness_workflow::ToolLimits::default().timeout_secs,
            max_tool_result_bytes: 16 * 1024,
            builtin_tools: vec![harness_workflow::a2ui::EMIT_UI.to_string()],
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedactionSection {
    pub values: Vec<String>,
    pub env: Vec<String>,
}

/// A skill on the card.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SkillConfig {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub examples: Vec<String>,
}

/// What the extended card adds to the public one.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ExtendedCardSection {
    pub description: Option<String>,
    pub skills: Vec<SkillConfig>,
}

/// The `[card]` section (S2); unset keys take the built-in defaults.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CardSection {
    pub name: Option<String>,
    pub description: Option<String>,
    pub version: Option<String>,
    pub documentation_url: Option<String>,
    pub skills: Vec<SkillConfig>,
    pub extended: Option<ExtendedCardSection>,
}

/// The `[push]` section (S14).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PushSection {
    /// A file holding the key (base64 of 32 bytes); `TINY_HARNESS_PUSH_KEY` wins over it.
    pub key_file: Option<PathBuf>,
    /// Create `push.key` in the data dir (mode 0600) when no key is given (`dev` sets this).
    #[serde(skip)]
    pub generate_key: bool,
    /// Push URLs may name loopback and private-range hosts (issue 33, SSRF; default true,
    /// for a harness on one machine): `false` for a server on a shared network. Link-local
    /// and metadata addresses are refused either way (`harness_push::HostPolicy`).
    pub allow_private_hosts: bool,
    /// The most push configs one task may have (issue 34): one more is refused naming this
    /// key, so a task's fan-out is bounded.
    pub max_configs_per_task: usize,
}

impl Default for PushSection {
    fn default() -> Self {
        Self { key_file: None, generate_key: false, allow_private_hosts: true, max_configs_per_task: 32 }
    }
}

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerSection,
    pub temporal: TemporalSection,
    pub store: StoreSection,
    pub agent: AgentSection,
    pub models: ModelsSection,
    pub redaction: RedactionSection,
    pub card: CardSection,
    pub push: PushSection,
    /// The remote agents `/delegate` may hand work to (issue 19).
    pub agents: Vec<AgentConfig>,
    /// The MCP servers whose tools the model may call (issue 29).
    pub mcp: Vec<McpSection>,
    /// Traces and log lines (issue 32).
    pub observability: crate::telemetry::ObservabilitySection,
    /// Where the embedded dev server's database, the SQLite store and generated files live.
    #[serde(skip)]
    pub data_dir: PathBuf,
}

impl Config {
    /// How turns use tools (issue 29), checked: `[agent]`'s limits and built-ins, with the
    /// remote agents the built-in `delegate` may name (every `[[agents]]` entry).
    pub fn tool_limits(&self) -> Result<harness_workflow::ToolLimits, ConfigError> {
        let mut limits = self.agent.tool_limits()?;
        if self.agent.tools && self.agent.builtin_tools.iter().any(|t| t == harness_workflow::DELEGATE) {
            if self.agents.is_empty() {
                return Err(ConfigError(
                    "`agent.builtin_tools` names `delegate`, but no `[[agents]]` entry names a remote agent to \
                     delegate to"
                        .into(),
                ));
            }
            limits.delegates = self.agents.iter().map(|a| a.id.clone()).collect();
        }
        Ok(limits)
    }

    /// Defaults with the given data dir.
    pub fn with_data_dir(data_dir: impl Into<PathBuf>) -> Self {
        Self { data_dir: data_dir.into(), ..Self::default() }
    }

    /// Reads a TOML file over the defaults.
    pub fn from_file(path: &Path, data_dir: impl Into<PathBuf>) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        let mut config: Config = toml::from_str(&text).map_err(|e| {
            let at = e.span().and_then(|s| key_at(&text, s.start)).map(|k| format!(" at `{k}`")).unwrap_or_default();
            ConfigError(format!("config file {}{at}: {}", path.display(), e.message().trim()))
        })?;
        config.data_dir = data_dir.into();
        let kinds = harness_agent::models::ProviderKinds::built_in();
        for (name, table) in &config.models.named {
            kinds.check(name, table).map_err(|why| ConfigError(format!("config file {}: {why}", path.display())))?;
        }
        // Files named in the config are relative to the config file.
        let base = path.parent().unwrap_or(Path::new("."));
        for file in [
            &mut config.models.scripted.file,
            &mut config.push.key_file,
            &mut config.server.ui_dir,
            &mut config.temporal.tls_ca_file,
            &mut config.temporal.tls_cert_file,
            &mut config.temporal.tls_key_file,
        ] {
            if let Some(f) = file.as_mut().filter(|f| f.is_relative()) {
                *f = base.join(&*f);
            }
        }
        for (i, skill) in
            config.card.skills.iter().chain(config.card.extended.iter().flat_map(|e| &e.skills)).enumerate()
        {
            if skill.id.is_empty() || skill.name.is_empty() {
                return Err(ConfigError(format!(
                    "config file {}: skill #{} in `card.skills` (or `card.extended.skills`) needs an `id` and a `name`",
                    path.display(),
                    i + 1
                )));
            }
        }
        Ok(config)
    }

    /// The store URL: configured, or `harness.db` in the data dir.
    pub fn store_url(&self) -> String {
        self.store.url.clone().unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("harness.db").display()))
    }

    /// Whether a push key is configured (checked when the harness starts).
    pub fn push_configured(&self) -> bool {
        std::env::var(harness_push::KEY_ENV).is_ok_and(|v| !v.trim().is_empty())
            || self.push.key_file.is_some()
            || self.push.generate_key
    }

    /// The push key (S14): `TINY_HARNESS_PUSH_KEY`, else `push.key_file`, else (when
    /// `push.generate_key`) `push.key` in the data dir, created on first use. `None`: push
    /// notifications are off. A malformed key is an error naming where it came from.
    pub fn push_key(&self) -> Result<Option<harness_push::PushKey>, ConfigError> {
        let err = |e: harness_push::KeyError| ConfigError(format!("push key: {e}"));
        if let Some(key) = harness_push::PushKey::from_env().map_err(err)? {
            return Ok(Some(key));
        }
        if let Some(file) = &self.push.key_file {
            let text = std::fs::read_to_string(file)
                .map_err(|e| ConfigError(format!("`push.key_file` {}: {e}", file.display())))?;
            let source = format!("`push.key_file` {}", file.display());
            return harness_push::PushKey::from_base64(&text, &source).map(Some).map_err(err);
        }
        if self.push.generate_key {
            return harness_push::PushKey::load_or_create(&self.data_dir.join("push.key")).map(Some).map_err(err);
        }
        Ok(None)
    }

    /// The mount prefix, normalised: `""` or `/a/b` (leading slash, no trailing one).
    pub fn prefix(&self) -> String {
        let p = self.server.prefix.trim().trim_end_matches('/');
        if p.is_empty() {
            String::new()
        } else if p.starts_with('/') {
            p.to_string()
        } else {
            format!("/{p}")
        }
    }

    /// S18: the URL clients use, `base_url` + prefix. A `base_url` with a path must have
    /// the prefix as that path; otherwise it is a configuration error naming both.
    pub fn public_url(&self) -> Result<String, ConfigError> {
        let prefix = self.prefix();
        let base = match &self.server.base_url {
            Some(b) => b.trim_end_matches('/').to_string(),
            None => format!("http://{}:{}", self.server.host, self.server.port),
        };
        let url: url::Url =
            base.parse().map_err(|e| ConfigError(format!("`server.base_url` = `{base}` is not a URL: {e}")))?;
        let path = url.path().trim_end_matches('/');
        if path.is_empty() {
            return Ok(format!("{base}{prefix}"));
        }
        if path == prefix {
            return Ok(base);
        }
        Err(ConfigError(format!(
            "`server.base_url` = `{base}` has the path `{path}` but `server.prefix` is `{prefix}`: they must agree \
             (give base_url without a path, or with the prefix as its path)"
        )))
    }

    /// Every configured secret value (literal values and the values of named variables),
    /// the models' as the built-in provider kinds read them.
    pub fn secret_values(&self) -> Vec<String> {
        self.secret_values_with(&harness_agent::models::ProviderKinds::built_in())
    }

    /// Every configured secret value, the models' as `kinds` read them.
    pub fn secret_values_with(&self, kinds: &harness_agent::models::ProviderKinds) -> Vec<String> {
        let mut v = self.redaction.values.clone();
        v.extend(self.redaction.env.iter().filter_map(|name| std::env::var(name).ok()));
        // The models' keys, whatever `redaction` says.
        v.extend(kinds.secrets(&self.models.named));
        // The Temporal API key.
        v.extend(self.temporal.auth().ok().and_then(|a| a.api_key));
        // What MCP servers are given.
        v.extend(self.mcp.iter().flat_map(McpSection::secrets));
        // The credentials of remote agents.
        v.extend(self.agents.iter().flat_map(|a| a.resolve().unwrap_or_default()).map(|(_, value)| value));
        v
    }
}

/// The dotted key (`section.key`) of the line holding byte `offset` of a TOML text.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let before = &text[..offset.min(text.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let section = before[..line_start].lines().rev().find_map(|l| {
        l.trim()
            .strip_prefix('[')
            .and_then(|l| l.trim_end_matches(']').split(']').next())
            .map(|s| s.trim_matches('[').to_string())
    });
    let line = line.trim();
    if line.starts_with('[') {
        return Some(line.trim_matches(['[', ']']).to_string());
    }
    let key = line.split('=').next()?.trim();
    if key.is_empty() {
        return section;
    }
    Some(match section {
        Some(sec) => format!("{sec}.{key}"),
        None => key.to_string(),
    })
}

mod agents;
pub use agents::{AgentConfig, check as check_agents};
mod mcp;
pub use mcp::{McpSection, check as check_mcp};
mod temporal;
pub use temporal::{GrpcCompression, TemporalAuth, TemporalMode, TemporalSection};
mod models;
pub use harness_agent::models::{AnthropicSection, OpenAiSection};
pub use models::{ModelsSection, ScriptedSection};

#[cfg(test)]
mod tests;
