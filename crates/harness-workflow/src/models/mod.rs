//! Model providers (D6) behind one trait: `echo` (built in, the default), `scripted`
//! (replies from a file), `conformance` (what A2A conformance kits expect) and `openai`
//! (any OpenAI-compatible Chat Completions endpoint, streaming).
//!
//! A provider streams [`ModelEvent`]s (text deltas, artifacts of its own, how the turn
//! ends); `call_model` appends each to the event log as it arrives, so output reaches
//! subscribers while it is produced (S12).

pub mod conformance;
mod echo;
pub mod openai;
mod scripted;

pub use conformance::ConformanceModel;
pub use echo::EchoModel;
pub use openai::{OpenAiModel, OpenAiSettings};
pub use scripted::{ScriptedModel, ScriptedReply};

use a2a_types::{Artifact, Message, TaskState};
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
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
}

/// A provider failure; its text becomes the failed task's status message.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub message: String,
    /// Worth retrying (a network error), or not (a scripted failure, a refused request).
    pub retryable: bool,
}

/// How a turn ends when the provider says so; otherwise the task's lifecycle decides
/// (INPUT_REQUIRED for a conversation, COMPLETED for one-shot).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finish {
    /// COMPLETED, INPUT_REQUIRED, REJECTED or FAILED.
    pub state: TaskState,
    /// The final status message; the reply text when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
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
}

/// Token usage of a turn (or, summed, of a task).
/// camelCase on the wire (issue 28); histories and stores from before it spell the keys in
/// snake_case, which are still read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    #[serde(alias = "prompt_tokens")]
    pub prompt_tokens: u64,
    #[serde(alias = "completion_tokens")]
    pub completion_tokens: u64,
    /// Of the completion tokens, those spent reasoning, where the endpoint says.
    #[serde(default, alias = "reasoning_tokens")]
    pub reasoning_tokens: u64,
}

impl TokenUsage {
    /// This usage with `other` added.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            reasoning_tokens: self.reasoning_tokens + other.reasoning_tokens,
        }
    }
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

/// The newest user message of a conversation.
pub fn last_user_message(history: &[Message]) -> Option<&Message> {
    history.iter().rev().find(|m| m.role == a2a_types::Role::User)
}

/// The text of the newest user message of a conversation.
pub fn last_user_text(history: &[Message]) -> String {
    history.iter().rev().find(|m| m.role == a2a_types::Role::User).map(|m| m.text()).unwrap_or_default()
}
