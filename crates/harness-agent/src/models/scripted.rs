//! `scripted`: replies read from a TOML file, for tests and demos. Each reply can match a
//! substring of the user's message, stream several chunks with delays, or fail.
//!
//! ```toml
//! [[reply]]
//! when = "weather"            # optional: used when the user's text contains this
//! chunks = ["It is ", "sunny."]
//! delay_ms = 50               # optional: pause before each chunk
//!
//! [[reply]]                   # replies without `when` are used in turn order
//! chunks = ["Thinking...", " done."]
//!
//! [[reply]]
//! when = "explode"
//! fail = "the scripted model failed"
//!
//! [[reply]]
//! when = "quick"
//! chunks = ["A direct reply."]
//! direct = true               # answered with the reply Message, not the task (needs `when`)
//!
//! [[reply]]                   # shows an A2UI surface through the built-in `emit_ui` (issue 30)
//! when = "form"
//! chunks = ["Here is a form."]  # optional: said before the surface
//! ui = '''[{"createSurface": {"surfaceId": "s1", "catalogId": "..."}}, ...]'''
//! after = ["Shown."]          # optional: said once it is shown (default: the tool's result)
//! ```
//!
//! A `ui` reply is a tool call of `emit_ui` with those messages, so the workflow checks and
//! shows them exactly as a real model's call; the round after it says `after`.

use super::{DeltaStream, ModelError, ModelEvent, ModelProvider, ModelRequest, last_user_text};
use futures::StreamExt;
use harness_workflow::a2ui::EMIT_UI;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// One scripted reply.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptedReply {
    #[serde(default)]
    pub when: Option<String>,
    #[serde(default)]
    pub chunks: Vec<String>,
    #[serde(default)]
    pub delay_ms: u64,
    #[serde(default)]
    pub fail: Option<String>,
    /// A direct reply ([`ModelProvider::replies_directly`]): decided from the message's text
    /// when it is admitted, so only a reply with `when` can be one.
    #[serde(default)]
    pub direct: bool,
    /// A2UI messages (a JSON array, as text) shown with `emit_ui`.
    #[serde(default)]
    pub ui: Option<String>,
    /// What the round after `ui` says (default: the tool's result).
    #[serde(default)]
    pub after: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    reply: Vec<ScriptedReply>,
}

/// The scripted model.
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    replies: Vec<ScriptedReply>,
}

impl ScriptedModel {
    /// Reads a script; the error names the file and what is wrong with it.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read scripted model file {}: {e}", path.display()))?;
        Self::from_toml(&text).map_err(|e| format!("scripted model file {}: {e}", path.display()))
    }

    pub fn from_toml(text: &str) -> Result<Self, String> {
        let file: ScriptFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.reply.is_empty() {
            return Err("no [[reply]] entries".into());
        }
        for (i, r) in file.reply.iter().enumerate() {
            if r.chunks.is_empty() && r.fail.is_none() && r.ui.is_none() {
                return Err(format!("reply {} has none of `chunks`, `ui` and `fail`", i + 1));
            }
            if let Some(ui) = &r.ui {
                let messages: serde_json::Value =
                    serde_json::from_str(ui).map_err(|e| format!("reply {}: `ui` is not JSON ({e})", i + 1))?;
                if !messages.is_array() {
                    return Err(format!("reply {}: `ui` is a JSON array of A2UI messages", i + 1));
                }
            }
            if r.ui.is_some() && r.direct {
                return Err(format!("reply {} has `ui` and `direct = true`: a direct reply shows no surface", i + 1));
            }
            if r.direct && r.when.is_none() {
                return Err(format!(
                    "reply {} has `direct = true` without `when`: a direct reply is decided from the message's text \
                     when it arrives",
                    i + 1
                ));
            }
        }
        Ok(Self { replies: file.reply })
    }

    /// The reply for a turn: the first whose `when` the user's text contains, else the
    /// replies without `when` in turn order.
    fn pick(&self, request: &ModelRequest) -> ScriptedReply {
        let text = last_user_text(&request.history);
        if let Some(r) = self.matching(&text) {
            return r.clone();
        }
        let plain: Vec<&ScriptedReply> = self.replies.iter().filter(|r| r.when.is_none()).collect();
        if plain.is_empty() {
            return ScriptedReply { chunks: vec![format!("(no scripted reply for: {text})")], ..Default::default() };
        }
        plain[(request.turn.max(1) as usize - 1) % plain.len()].clone()
    }

    /// The first reply whose `when` the text contains.
    fn matching(&self, text: &str) -> Option<&ScriptedReply> {
        self.replies.iter().find(|r| r.when.as_deref().is_some_and(|w| text.contains(w)))
    }
}

#[async_trait::async_trait]
impl ModelProvider for ScriptedModel {
    /// It answers the turn's message alone.
    fn history_window(&self) -> Option<usize> {
        Some(1)
    }

    /// A message whose text picks a reply with `direct = true`.
    fn replies_directly(&self, message: &a2a_types::Message) -> bool {
        self.matching(&message.text()).is_some_and(|r| r.direct)
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let reply = self.pick(&request);
        if let Some(message) = reply.fail {
            return Err(ModelError { message, retryable: false });
        }
        let delay = Duration::from_millis(reply.delay_ms);
        let mut events: Vec<ModelEvent> = Vec::new();
        match (&reply.ui, request.exchanges.last()) {
            // The round after the surface: what the reply says then.
            (Some(_), Some(round)) => {
                let said = match (reply.after.is_empty(), round.results.first()) {
                    (false, _) => reply.after.clone(),
                    (true, Some(result)) => vec![result.content.clone()],
                    (true, None) => Vec::new(),
                };
                events.extend(said.into_iter().map(ModelEvent::Text));
            }
            (Some(ui), None) => {
                if !request.tools.iter().any(|t| t.name == EMIT_UI) {
                    return Err(ModelError {
                        message: format!(
                            "the scripted reply shows a surface, but `{EMIT_UI}` is not offered (`agent.builtin_tools`)"
                        ),
                        retryable: false,
                    });
                }
                events.extend(reply.chunks.into_iter().map(ModelEvent::Text));
                let messages: serde_json::Value = serde_json::from_str(ui).unwrap_or_default();
                events.push(ModelEvent::ToolCall(harness_workflow::ToolCall {
                    id: format!("scripted-{}", request.turn),
                    name: EMIT_UI.into(),
                    arguments: serde_json::json!({ "messages": messages }).to_string(),
                    idempotent: false,
                }));
            }
            (None, _) => events.extend(reply.chunks.into_iter().map(ModelEvent::Text)),
        }
        Ok(futures::stream::iter(events)
            .then(move |event| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok(event)
            })
            .boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::{Message, Part, Role};

    fn req(text: &str, turn: u32) -> ModelRequest {
        let m =
            Message { message_id: "m".into(), role: Role::User, parts: vec![Part::text(text)], ..Default::default() };
        ModelRequest { history: vec![m], turn, reasoning_effort: None, tools: Vec::new(), exchanges: Vec::new() }
    }

    #[tokio::test]
    async fn replies_match_then_rotate_by_turn_and_can_fail() {
        let model = ScriptedModel::from_toml(
            "[[reply]]\nwhen = \"weather\"\nchunks = [\"sunny\"]\n[[reply]]\nchunks = [\"a\", \"b\"]\n[[reply]]\nchunks = [\"c\"]\n[[reply]]\nwhen = \"boom\"\nfail = \"scripted failure\"\n",
        )
        .unwrap();
        let collect = |r| async {
            model.stream(r).await.map(|s| {
                s.map(|d| match d.unwrap() {
                    ModelEvent::Text(t) => t,
                    other => panic!("scripted replies are text, got {other:?}"),
                })
                .collect::<Vec<_>>()
            })
        };
        assert_eq!(collect(req("the weather?", 1)).await.unwrap().await, vec!["sunny"]);
        assert_eq!(collect(req("hi", 1)).await.unwrap().await, vec!["a", "b"]);
        assert_eq!(collect(req("hi", 2)).await.unwrap().await, vec!["c"]);
        assert_eq!(collect(req("boom", 3)).await.err().unwrap().message, "scripted failure");
    }

    #[test]
    fn a_bad_script_is_refused_naming_the_problem() {
        let err = ScriptedModel::from_toml("[[reply]]\nwhen = \"x\"\n").unwrap_err();
        assert_eq!(err, "reply 1 has none of `chunks`, `ui` and `fail`");
        let err = ScriptedModel::from_toml("[[reply]]\nui = \"{not json\"\n").unwrap_err();
        assert!(err.starts_with("reply 1: `ui` is not JSON"), "{err}");
        let err = ScriptedModel::from_toml("[[reply]]\nchunk = [\"x\"]\n").unwrap_err();
        assert!(err.contains("unknown field `chunk`"), "{err}");
        let err = ScriptedModel::from_toml("[[reply]]\nchunks = [\"x\"]\ndirect = true\n").unwrap_err();
        assert!(err.starts_with("reply 1 has `direct = true` without `when`"), "{err}");
    }
}
