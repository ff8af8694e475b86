//! `Task` and `TaskStatus`, plus the fold that applies stream events to a task snapshot.

use crate::{Artifact, Message, Shared, Struct, TaskState, events::StreamResponse};
use serde::{Deserialize, Serialize};

/// The status of a task at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// A unit of work the agent performs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Task {
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    /// Each artifact and message is shared: a task's copies (an answer from the store's
    /// kept tail, a stream's snapshot) hold the same ones without copying them, and each is
    /// written as JSON once (issue 31).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Shared<Artifact>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Shared<Message>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

impl Task {
    /// Applies one stream event to this snapshot: a `task` replaces it, a status update sets
    /// the status, an artifact update adds or extends an artifact (`append`).
    pub fn apply(&mut self, event: &StreamResponse) {
        match event {
            StreamResponse::Task(t) => *self = t.clone(),
            StreamResponse::Message(m) => self.history.push(m.clone().into()),
            StreamResponse::StatusUpdate(u) => self.status = u.status.clone(),
            StreamResponse::ArtifactUpdate(u) => {
                match self.artifacts.iter_mut().find(|a| a.artifact_id == u.artifact.artifact_id) {
                    Some(existing) if u.append => {
                        Shared::make_mut(existing).parts.extend(u.artifact.parts.iter().cloned())
                    }
                    Some(existing) => *existing = u.artifact.clone().into(),
                    None => self.artifacts.push(u.artifact.clone().into()),
                }
            }
        }
    }

    /// This task without its history and artifacts: what the store keeps in a task's row
    /// (the two grow with the conversation and are stored one row each).
    pub fn head(&self) -> Task {
        Task {
            id: self.id.clone(),
            context_id: self.context_id.clone(),
            status: self.status.clone(),
            artifacts: Vec::new(),
            history: Vec::new(),
            metadata: self.metadata.clone(),
        }
    }

    /// Applies `historyLength` (CHEATSHEET §5): `None` keeps everything, `0` drops the
    /// history, `n` keeps the `n` most recent messages.
    pub fn with_history_length(mut self, history_length: Option<i32>) -> Self {
        if let Some(n) = history_length {
            let n = n.max(0) as usize;
            if self.history.len() > n {
                self.history.drain(..self.history.len() - n);
            }
        }
        self
    }
}
