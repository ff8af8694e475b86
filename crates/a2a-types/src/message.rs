//! `Message` and `Part`: what a client or the agent says.

use crate::{Role, Struct, is_false};
use serde::{Deserialize, Serialize};

/// One piece of content: exactly one of `text`, `raw` (base64), `url` or `data`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Bytes as base64 (ProtoJSON `bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub filename: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "media_type")]
    pub media_type: String,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..Self::default() }
    }

    /// A data part with a media type.
    pub fn data(data: serde_json::Value, media_type: impl Into<String>) -> Self {
        Self { data: Some(data), media_type: media_type.into(), ..Self::default() }
    }

    /// How many of the oneof members are set (a valid part has exactly one).
    pub fn content_count(&self) -> usize {
        [self.text.is_some(), self.raw.is_some(), self.url.is_some(), self.data.is_some()]
            .into_iter()
            .filter(|b| *b)
            .count()
    }
}

/// A message between a client and the agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "context_id")]
    pub context_id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "task_id")]
    pub task_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", alias = "reference_task_ids")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// An agent message made of one text part.
    pub fn agent_text(message_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self { message_id: message_id.into(), role: Role::Agent, parts: vec![Part::text(text)], ..Self::default() }
    }

    /// The text parts joined by newlines.
    pub fn text(&self) -> String {
        self.parts.iter().filter_map(|p| p.text.as_deref()).collect::<Vec<_>>().join("\n")
    }
}

/// A result or output of a task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Artifact {
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// Used by `TaskArtifactUpdateEvent` flags.
pub(crate) fn skip_false(b: &bool) -> bool {
    is_false(b)
}
