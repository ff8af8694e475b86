//! Model providers (D6) behind one trait: `echo` (built in, the default), `scripted`
//! (replies from a file). A real provider (OpenAI-compatible) implements the same trait.
//!
//! A provider streams text deltas; `call_model` appends each to the event log as it
//! arrives, so output reaches subscribers while it is produced (S12).

mod echo;
mod scripted;

pub use echo::EchoModel;
pub use scripted::{ScriptedModel, ScriptedReply};

use a2a_types::Message;
use futures::stream::BoxStream;
use std::collections::HashMap;
use std::sync::Arc;

/// What a provider is asked: one turn of a conversation.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    /// The conversation so far, the newest user message last.
    pub history: Vec<Message>,
    /// The turn number (1 for the first), stable across retries of the same turn.
    pub turn: u32,
}

/// A provider failure; its text becomes the failed task's status message.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub message: String,
    /// Worth retrying (a network error), or not (a scripted failure, a refused request).
    pub retryable: bool,
}

/// A stream of reply text deltas.
pub type DeltaStream = BoxStream<'static, Result<String, ModelError>>;

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
}

/// The providers this worker can call, by name.
#[derive(Clone, Default)]
pub struct ModelRegistry {
    providers: HashMap<String, Arc<dyn ModelProvider>>,
}

impl ModelRegistry {
    /// A registry with `echo` only.
    pub fn with_echo() -> Self {
        let mut r = Self::default();
        r.register("echo", Arc::new(EchoModel));
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

/// The text of the newest user message of a conversation.
pub fn last_user_text(history: &[Message]) -> String {
    history.iter().rev().find(|m| m.role == a2a_types::Role::User).map(|m| m.text()).unwrap_or_default()
}
