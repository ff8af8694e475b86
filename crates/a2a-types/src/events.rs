//! Stream events: status and artifact updates and the `StreamResponse` oneof.

use crate::{Artifact, Message, Struct, Task, TaskState, TaskStatus, message::skip_false};
use serde::{Deserialize, Serialize};

/// A change of a task's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskStatusUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// A new artifact or a chunk of one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(skip_serializing_if = "skip_false")]
    pub append: bool,
    #[serde(skip_serializing_if = "skip_false", alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// One event of a stream (SSE `data:`), exactly one member set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    #[serde(alias = "status_update")]
    StatusUpdate(TaskStatusUpdateEvent),
    #[serde(alias = "artifact_update")]
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// The state this event puts the task in, when it carries one.
    pub fn state(&self) -> Option<TaskState> {
        match self {
            Self::Task(t) => Some(t.status.state),
            Self::StatusUpdate(u) => Some(u.status.state),
            _ => None,
        }
    }

    /// A stream of a SendMessage ends after this event (terminal or interrupted state).
    pub fn is_final(&self) -> bool {
        self.state().is_some_and(|s| s.is_final())
    }

    /// The event ends every stream (terminal state).
    pub fn is_terminal(&self) -> bool {
        self.state().is_some_and(|s| s.is_terminal())
    }
}

/// The result of SendMessage: the task, or a direct message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}
