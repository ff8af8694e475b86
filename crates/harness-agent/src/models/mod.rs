//! Model providers (D6) behind one trait: `echo` (built in, the default), `scripted`
//! (replies from a file), `conformance` (what A2A conformance kits expect), `openai` (any
//! OpenAI-compatible Chat Completions endpoint, streaming) and `anthropic` (the Messages
//! API, streaming).
//!
//! A provider streams [`ModelEvent`]s (text deltas, artifacts of its own, how the turn
//! ends); `call_model` appends each to the event log as it arrives, so output reaches
//! subscribers while it is produced (S12).

mod anthropic;
mod anthropic_kind;
pub mod conformance;
mod echo;
pub mod openai;
mod openai_kind;
mod scripted;
mod streaming;

pub use anthropic::{AnthropicModel, AnthropicSettings};
pub use anthropic_kind::{AnthropicKind, AnthropicSection};
pub use conformance::ConformanceModel;
pub use echo::EchoModel;
pub use openai::{OpenAiModel, OpenAiSettings};
pub use openai_kind::{OpenAiKind, OpenAiSection};
pub use scripted::{ScriptedModel, ScriptedReply};

use a2a_types::{Artifact, Message};
use futures::stream::BoxStream;
pub use harness_workflow::{Finish, TokenUsage};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What a provider is asked: one turn of a conversation.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    /// The conversation up to this turn's message (the last), at most the provider's
    /// [`ModelProvider::history_window`] of it.
    pub history: Vec<Message>,
    /// The turn number (1 for the first), stable across retries of the same turn.
    pub turn: u32,
    /// The task's reasoning effort (its brief's, S21), over the provider's own setting.
    pub reasoning_effort: Option<String>,
    /// The tools the model may call (issue 29); none when tool calling is off.
    pub tools: Vec<crate::tools::ToolSpec>,
    /// This turn's earlier rounds of tool calls and their results, in order: the model
    /// reads them after the conversation.
    pub exchanges: Vec<harness_workflow::ToolRound>,
}

/// A provider failure; its text becomes the failed task's status message.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub message: String,
    /// Worth retrying (a network error), or not (a scripted failure, a refused request).
    pub retryable: bool,
}

/// What a provider produces.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelEvent {
    /// Reply text, streamed as chunks of the turn's `reply-<turn>` artifact.
    Text(String),
    /// An artifact update of the provider's own (file, data, chunked text...).
    Artifact { artifact: Artifact, append: bool, last_chunk: bool },
    /// How the turn ends.
    Finish(Finish),
    /// What the turn's output so far is void: the provider starts again (a retried request
    /// after the endpoint failed mid-reply). The reply artifact is closed and marked with the
    /// reason, and the next text starts it afresh (docs/configuration.md, "Failures").
    Restart { reason: String },
    /// Tokens the turn used, as the endpoint counted them.
    Usage(TokenUsage),
    /// A tool the model asks to call (issue 29), whole (a streamed call's pieces joined).
    ToolCall(harness_workflow::ToolCall),
}

/// A stream of model events.
pub type DeltaStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A model provider.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync {
    /// Starts a reply; the stream yields text deltas as they are produced.
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError>;

    /// A provider that answers in microseconds without I/O (echo) is run as a local
    /// activity: a round trip through the Temporal server would buy nothing. Providers that
    /// talk to a network or take time are regular activities, which a cancel can reach at
    /// once (TEMPORAL-RUST.md item 8).
    fn is_instant(&self) -> bool {
        false
    }

    /// What a model call's span names (issue 32, the GenAI semantic conventions): the
    /// provider (`gen_ai.provider.name`) and the model it asks (`gen_ai.request.model`).
    /// Providers of this harness's own (echo, scripted, conformance) are `tiny-harness`.
    fn gen_ai(&self) -> (&str, &str) {
        ("tiny-harness", "")
    }

    /// How many of the conversation's newest messages the provider reads (`None`: all of
    /// them). Echo, scripted and the conformance profile answer the turn's message alone.
    fn history_window(&self) -> Option<usize> {
        None
    }

    /// The lifecycle every task of this provider runs, when it needs one (the conformance
    /// profile runs one-shot); `None`: the agent's `agent.lifecycle`.
    fn lifecycle(&self) -> Option<crate::Lifecycle> {
        None
    }

    /// Whether a turn on `message` shows WORKING before its final state (the default). Asked
    /// when the message is admitted; the answer travels with it to the workflow.
    fn shows_working(&self, _message: &Message) -> bool {
        true
    }

    /// Whether the turn on `message` is a direct reply: SendMessage answers with the turn's
    /// reply Message instead of the Task, and a stream is that one Message (A2A's
    /// "Message-only stream"). Asked when a message that opens a task is admitted (a message
    /// to a task the client already tracks is always answered with the task), because the
    /// choice must be made before a stream's first event; the answer travels with the
    /// message to the workflow. The task is still durable: it runs, stores both messages and
    /// completes after the turn (docs/conformance.md, "Direct replies").
    fn replies_directly(&self, _message: &Message) -> bool {
        false
    }
}

/// The providers this worker can call, by name.
#[derive(Clone, Default)]
pub struct ModelRegistry {
    providers: HashMap<String, Arc<dyn ModelProvider>>,
}

impl ModelRegistry {
    /// A registry with the built-in providers: `echo` and `conformance`.
    pub fn with_echo() -> Self {
        let mut r = Self::default();
        r.register("echo", Arc::new(EchoModel));
        r.register("conformance", Arc::new(ConformanceModel));
        r
    }

    pub fn register(&mut self, name: &str, provider: Arc<dyn ModelProvider>) {
        self.providers.insert(name.to_string(), provider);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn ModelProvider>> {
        self.providers.get(name).cloned()
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut n: Vec<String> = self.providers.keys().cloned().collect();
        n.sort();
        n
    }
}

/// What a [`ProviderFactory`] knows besides its table.
#[derive(Clone, Copy, Debug)]
pub struct ProviderContext<'a> {
    /// The model's name (`[models.<name>]`), for messages.
    pub name: &'a str,
    /// The agent's system prompt (`[agent] instructions`).
    pub instructions: Option<&'a str>,
}

/// Builds the providers of one `kind`: a `[models.<name>]` table with `kind = "<kind>"`
/// becomes a provider registered under `<name>`. Adding a provider kind is one factory
/// (registered in [`ProviderKinds::built_in`], or by a host through the harness builder);
/// neither the config nor the harness names providers.
pub trait ProviderFactory: Send + Sync {
    /// The `kind` this factory builds.
    fn kind(&self) -> &'static str;

    /// Checks the table and builds the provider; the error names `models.<name>` and the
    /// key that is wrong.
    fn build(&self, table: &toml::Table, ctx: &ProviderContext<'_>) -> Result<Arc<dyn ModelProvider>, String>;

    /// Checks the table's keys and values without reading the environment or building
    /// anything (a config file is checked when it is read; a missing API key is an error of
    /// [`ProviderFactory::build`]).
    fn check(&self, _name: &str, _table: &toml::Table) -> Result<(), String> {
        Ok(())
    }

    /// The secret values the table leads to (an API key read from the environment): they
    /// are redacted wherever they would appear (S4).
    fn secrets(&self, _name: &str, _table: &toml::Table) -> Vec<String> {
        Vec::new()
    }
}

/// The provider kinds a harness builds models of, by `kind`.
#[derive(Clone)]
pub struct ProviderKinds {
    factories: BTreeMap<&'static str, Arc<dyn ProviderFactory>>,
}

impl ProviderKinds {
    /// The kinds this crate ships: `openai` and `anthropic`.
    pub fn built_in() -> Self {
        let mut kinds = Self { factories: BTreeMap::new() };
        kinds.register(Arc::new(OpenAiKind));
        kinds.register(Arc::new(AnthropicKind));
        kinds
    }

    /// Adds a kind (or replaces the factory of one).
    pub fn register(&mut self, factory: Arc<dyn ProviderFactory>) {
        self.factories.insert(factory.kind(), factory);
    }

    pub fn get(&self, kind: &str) -> Option<&Arc<dyn ProviderFactory>> {
        self.factories.get(kind)
    }

    /// The kinds, sorted.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.factories.keys().copied().collect()
    }

    /// The provider a `[models.<name>]` table asks for; the error names the table and, for
    /// an unknown kind, the kinds there are.
    pub fn build(&self, table: &toml::Table, ctx: &ProviderContext<'_>) -> Result<Arc<dyn ModelProvider>, String> {
        let kind = table_kind(ctx.name, table)?;
        let factory = self.get(kind).ok_or_else(|| {
            let known = self.kinds().iter().map(|k| format!("\"{k}\"")).collect::<Vec<_>>().join(", ");
            format!("`models.{}.kind` = \"{kind}\" is not a kind this harness has (expected one of {known})", ctx.name)
        })?;
        factory.build(table, ctx)
    }

    /// Checks a table of a kind this registry has ([`ProviderFactory::check`]); a kind it
    /// does not have is left for [`ProviderKinds::build`] (a host may add it).
    pub fn check(&self, name: &str, table: &toml::Table) -> Result<(), String> {
        match self.get(table_kind(name, table)?) {
            Some(factory) => factory.check(name, table),
            None => Ok(()),
        }
    }

    /// The secret values every table of `models` leads to.
    pub fn secrets<'a>(&self, models: impl IntoIterator<Item = (&'a String, &'a toml::Table)>) -> Vec<String> {
        models
            .into_iter()
            .filter_map(|(name, table)| {
                let kind = table_kind(name, table).ok()?;
                Some(self.get(kind)?.secrets(name, table))
            })
            .flatten()
            .collect()
    }
}

/// A table's `kind`; the error names the table.
fn table_kind<'t>(name: &str, table: &'t toml::Table) -> Result<&'t str, String> {
    match table.get("kind") {
        Some(toml::Value::String(kind)) => Ok(kind),
        Some(_) => Err(format!("`models.{name}.kind` must be a string")),
        None => Err(format!("`models.{name}` needs `kind`")),
    }
}

/// The newest user message of a conversation.
pub fn last_user_message(history: &[Message]) -> Option<&Message> {
    history.iter().rev().find(|m| m.role == a2a_types::Role::User)
}

/// The text of the newest user message of a conversation.
pub fn last_user_text(history: &[Message]) -> String {
    history.iter().rev().find(|m| m.role == a2a_types::Role::User).map(|m| m.text()).unwrap_or_default()
}
