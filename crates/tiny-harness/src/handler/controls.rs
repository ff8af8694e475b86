//! What a message is before it reaches the workflow (S8, S9): the control envelope, a
//! registered slash command, or an ordinary message; and the host's policy points
//! (`request.received`, `command.invoked`) that may refuse it.

use super::access::Caller;
use a2a_types::{A2AError, Message};
use harness_workflow::ItemKind;
use harness_workflow::commands::CommandRegistry;

/// The media type of an envelope (EXTENSIONS.md).
pub(crate) use crate::card::EVENT_MEDIA_TYPE;

/// Where the policy is asked (S9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyPoint {
    /// An ordinary message, before it is recorded.
    RequestReceived,
    /// A slash command or a control (which skip `request.received`).
    CommandInvoked,
}

impl PolicyPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestReceived => "request.received",
            Self::CommandInvoked => "command.invoked",
        }
    }
}

/// What the policy is asked about.
#[derive(Clone, Debug)]
pub struct PolicyRequest {
    pub point: PolicyPoint,
    /// The task the message goes to; `None` when it opens one.
    pub task_id: Option<String>,
    /// The sender, when known (D4).
    pub sender: Option<String>,
    /// The message (redacted).
    pub message: Message,
    /// At `command.invoked`: the command's name, or `control` for the control envelope.
    pub command: Option<String>,
    /// A command's arguments.
    pub args: String,
}

/// The policy's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyDecision {
    Allow,
    /// The sender gets an InvalidParams error carrying both; the audit row records
    /// `refused: <code>: <message>`; the task is unchanged.
    Refuse {
        code: String,
        message: String,
    },
}

/// A host's policy (S9), given to the `Harness` builder. An `Err` fails the request (an
/// internal error), never the task.
#[async_trait::async_trait]
pub trait Policy: Send + Sync + 'static {
    async fn check(&self, request: &PolicyRequest) -> Result<PolicyDecision, String>;
}

/// An envelope's refusal (EXTENSIONS.md): `invalid event envelope: <why>`.
fn invalid_envelope(why: impl std::fmt::Display) -> A2AError {
    A2AError::invalid_params(format!("invalid event envelope: {why}")).with("field", "message.parts")
}

/// What `message` is: a control (one data part `{"kind":"control","action":"complete"}`),
/// a registered command (its whole text `/<name> <args>`), or an ordinary message. A bad
/// envelope is refused with why.
pub(crate) fn classify(message: &Message, commands: &CommandRegistry) -> Result<ItemKind, A2AError> {
    let envelopes: Vec<&serde_json::Value> = message
        .parts
        .iter()
        .filter_map(|p| {
            let data = p.data.as_ref()?;
            let control = data.get("kind").and_then(|k| k.as_str()) == Some("control");
            (p.media_type == EVENT_MEDIA_TYPE || (p.media_type.is_empty() && control)).then_some(data)
        })
        .collect();
    match envelopes.as_slice() {
        [] => {}
        [envelope] => return envelope_kind(envelope, message.parts.len()),
        _ => return Err(invalid_envelope("a message carries at most one envelope")),
    }
    let text_only = message.parts.len() == 1 && message.parts[0].text.is_some();
    if text_only && let Some((name, args)) = commands.parse(&message.text()) {
        return Ok(ItemKind::Command { name, args });
    }
    Ok(ItemKind::Message)
}

/// The kind of a message's one envelope.
fn envelope_kind(envelope: &serde_json::Value, parts: usize) -> Result<ItemKind, A2AError> {
    let Some(fields) = envelope.as_object() else { return Err(invalid_envelope("an envelope is a JSON object")) };
    let kind = fields.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    match kind {
        "control" => {
            if let Some(key) = fields.keys().find(|k| !["kind", "action"].contains(&k.as_str())) {
                return Err(invalid_envelope(format!("unknown key `{key}` in a control")));
            }
            match fields.get("action").and_then(|a| a.as_str()) {
                Some("complete") => {}
                Some(other) => {
                    return Err(invalid_envelope(format!("unknown control action `{other}` (expected `complete`)")));
                }
                None => return Err(invalid_envelope("a control needs `action` (`complete`)")),
            }
            if parts != 1 {
                return Err(invalid_envelope("a control must be the message's only part"));
            }
            Ok(ItemKind::Control)
        }
        "task" | "status_update" | "artifact_update" => {
            Err(invalid_envelope(format!("`{kind}` envelopes are not taken by this build yet (only `control` is)")))
        }
        "" => {
            Err(invalid_envelope("an envelope needs `kind` (`task`, `status_update`, `artifact_update` or `control`)"))
        }
        other => Err(invalid_envelope(format!("unknown kind `{other}`"))),
    }
}

/// D4: an anonymous caller can never send a control.
pub(crate) fn check_control_sender(kind: &ItemKind, caller: &Caller) -> Result<(), A2AError> {
    if *kind == ItemKind::Control && *caller == Caller::Anonymous {
        return Err(A2AError::invalid_params(
            "invalid params: a control needs a known sender: name the participant (X-Participant-Id or \
             metadata.participant_id); an anonymous caller cannot complete a task",
        )
        .with("field", "message.parts"));
    }
    Ok(())
}

/// Asks the policy about a message at its point; a refusal or a failure is the request's
/// error.
pub(crate) async fn ask(policy: &dyn Policy, request: PolicyRequest) -> Result<(), A2AError> {
    let point = request.point.as_str();
    match policy.check(&request).await {
        Ok(PolicyDecision::Allow) => Ok(()),
        Ok(PolicyDecision::Refuse { code, message }) => Err(A2AError::invalid_params(format!("{code}: {message}"))
            .with("code", code)
            .with("reason", message)
            .with("policyPoint", point)),
        Err(e) => Err(A2AError::internal(format!("the policy failed at {point}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::Part;
    use serde_json::json;

    fn message(parts: Vec<Part>) -> Message {
        Message { message_id: "m".into(), role: a2a_types::Role::User, parts, ..Default::default() }
    }

    fn control() -> Part {
        Part::data(json!({"kind": "control", "action": "complete"}), EVENT_MEDIA_TYPE)
    }

    #[test]
    fn a_control_is_one_data_part_with_or_without_the_envelope_media_type() {
        let r = CommandRegistry::default();
        assert_eq!(classify(&message(vec![control()]), &r).unwrap(), ItemKind::Control);
        let bare = Part::data(json!({"kind": "control", "action": "complete"}), "");
        assert_eq!(classify(&message(vec![bare]), &r).unwrap(), ItemKind::Control);
        let other_data = Part::data(json!({"kind": "control"}), "application/json");
        assert_eq!(classify(&message(vec![other_data]), &r).unwrap(), ItemKind::Message, "not an envelope");
    }

    #[test]
    fn a_bad_envelope_is_refused_saying_why() {
        let r = CommandRegistry::default();
        let why = |parts: Vec<Part>| classify(&message(parts), &r).unwrap_err().message;
        assert!(why(vec![control(), Part::text("and this")]).contains("a control must be the message's only part"));
        assert!(why(vec![control(), control()]).contains("at most one envelope"));
        let unknown_key = Part::data(json!({"kind": "control", "action": "complete", "x": 1}), EVENT_MEDIA_TYPE);
        assert!(why(vec![unknown_key]).contains("unknown key `x`"));
        let action = Part::data(json!({"kind": "control", "action": "pause"}), EVENT_MEDIA_TYPE);
        assert!(why(vec![action]).contains("unknown control action `pause`"));
        let kind = Part::data(json!({"kind": "poke"}), EVENT_MEDIA_TYPE);
        assert!(why(vec![kind]).contains("unknown kind `poke`"));
        assert!(why(vec![kind_less()]).starts_with("invalid event envelope: "));
    }

    fn kind_less() -> Part {
        Part::data(json!({"payload": {}}), EVENT_MEDIA_TYPE)
    }

    #[test]
    fn a_command_is_a_whole_text_naming_a_registered_one() {
        let r = CommandRegistry::default();
        let kind = |text: &str| classify(&message(vec![Part::text(text)]), &r).unwrap();
        assert_eq!(kind("/status"), ItemKind::Command { name: "status".into(), args: String::new() });
        assert_eq!(kind("/nope"), ItemKind::Message);
        assert_eq!(kind("hello /help"), ItemKind::Message);
        let two = message(vec![Part::text("/help"), Part::text("more")]);
        assert_eq!(classify(&two, &r).unwrap(), ItemKind::Message);
    }
}
