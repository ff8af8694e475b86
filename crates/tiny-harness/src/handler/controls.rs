//! What a message is before it reaches the workflow (S8, S9): the control envelope, a
//! registered slash command, or an ordinary message; and the host's policy points
//! (`request.received`, `command.invoked`) that may refuse it.

use super::access::Caller;
use a2a_types::{A2AError, Message};
use harness_agent::commands::CommandRegistry;
use harness_workflow::ItemKind;

use super::envelope::{self, Envelope, invalid_envelope};
use crate::card::EVENT_MEDIA_TYPE;

/// Where the policy is asked (S9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyPoint {
    /// An ordinary message, before it is recorded.
    RequestReceived,
    /// A slash command or a control (which skip `request.received`).
    CommandInvoked,
    /// A tool call the model asked for, before it runs (issue 29): `tool` names it and `args`
    /// holds its arguments (JSON, redacted); `message` is empty. A refusal (or the policy's
    /// error) becomes the call's error result, which the model reads; the task goes on.
    ToolInvoked,
}

impl PolicyPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestReceived => "request.received",
            Self::CommandInvoked => "command.invoked",
            Self::ToolInvoked => "tool.invoked",
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
    /// A command's arguments; at `tool.invoked`, the tool's (JSON, redacted).
    pub args: String,
    /// At `tool.invoked`: the tool's name as the model called it.
    pub tool: Option<String>,
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

/// The host's policy at `tool.invoked`, as the tool registry asks it.
pub(crate) struct PolicyGate {
    pub policy: std::sync::Arc<dyn Policy>,
    pub redactor: std::sync::Arc<harness_agent::redaction::Redactor>,
}

#[async_trait::async_trait]
impl harness_agent::tools::ToolGate for PolicyGate {
    async fn refusal(
        &self,
        ctx: &harness_agent::tools::ToolContext,
        name: &str,
        arguments: &serde_json::Value,
    ) -> Option<String> {
        let request = PolicyRequest {
            point: PolicyPoint::ToolInvoked,
            task_id: Some(ctx.task_id.clone()),
            sender: None,
            message: Message::default(),
            command: None,
            args: self.redactor.text(&arguments.to_string()),
            tool: Some(name.to_string()),
        };
        match self.policy.check(&request).await {
            Ok(PolicyDecision::Allow) => None,
            Ok(PolicyDecision::Refuse { code, message }) => {
                tracing::info!(task = %ctx.task_id, tool = name, %code, "the policy refused a tool call");
                Some(format!("the policy refused it ({code}: {message})"))
            }
            Err(why) => {
                tracing::warn!(task = %ctx.task_id, tool = name, error = %why, "the policy failed at tool.invoked");
                Some(format!("the policy could not decide ({why}), so the call was not run"))
            }
        }
    }
}

/// A host's policy (S9), given to the `Harness` builder. An `Err` fails the request (an
/// internal error), never the task.
#[async_trait::async_trait]
pub trait Policy: Send + Sync + 'static {
    async fn check(&self, request: &PolicyRequest) -> Result<PolicyDecision, String>;
}

/// What admission made of a message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Classified {
    pub kind: ItemKind,
    /// A task envelope on a message that opens a task: the brief (S21), taken out of the
    /// message.
    pub brief: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Classified {
    fn of(kind: ItemKind) -> Self {
        Self { kind, brief: None }
    }
}

/// Fields a task envelope never changes on an existing task (S11, S21).
const FIXED_FIELDS: &[&str] = &["goal", "type", "parent_tasks", "sub_tasks", "lifecycle", "model", "reasoning_effort"];

/// What `message` is: a control (one data part `{"kind":"control","action":"complete"}`),
/// a task envelope (a brief on a new task, an update on an existing one), an event envelope
/// to record, a registered command (its whole text `/<name> <args>`), or an ordinary
/// message. A bad envelope is refused with why. A brief is taken out of the message; an
/// event envelope's part becomes the text that frames it.
pub(crate) fn classify(message: &mut Message, commands: &CommandRegistry) -> Result<Classified, A2AError> {
    let classified = classify_envelope(message, commands)?;
    if let ItemKind::Command { name, args } = &classified.kind
        && name == "delegate"
    {
        // Issue 19: a `/delegate` that names no configured agent or no brief starts nothing.
        commands.check_delegate(args).map_err(|why| A2AError::invalid_params(why).with("field", "message.parts"))?;
    }
    Ok(classified)
}

fn classify_envelope(message: &mut Message, commands: &CommandRegistry) -> Result<Classified, A2AError> {
    let envelopes: Vec<usize> = (0..message.parts.len())
        .filter(|&i| {
            let p = &message.parts[i];
            let control = p.data.as_ref().and_then(|d| d.get("kind")).and_then(|k| k.as_str()) == Some("control");
            p.data.is_some() && (p.media_type == EVENT_MEDIA_TYPE || (p.media_type.is_empty() && control))
        })
        .collect();
    let at = match envelopes.as_slice() {
        [] => return Ok(Classified::of(plain_kind(message, commands))),
        [at] => *at,
        _ => return Err(invalid_envelope("a message carries at most one envelope")),
    };
    let data = message.parts[at].data.clone().unwrap_or_default();
    match envelope::parse(&data)? {
        Envelope::Control if message.parts.len() != 1 => {
            Err(invalid_envelope("a control must be the message's only part"))
        }
        Envelope::Control => Ok(Classified::of(ItemKind::Control)),
        Envelope::Task(fields) if message.task_id.is_empty() => {
            message.parts.remove(at);
            let kind = if message.parts.is_empty() { ItemKind::BriefOnly } else { plain_kind(message, commands) };
            Ok(Classified { kind, brief: Some(fields) })
        }
        Envelope::Task(fields) => {
            let fixed: Vec<&str> = FIXED_FIELDS.iter().copied().filter(|f| fields.contains_key(*f)).collect();
            if !fixed.is_empty() {
                return Err(A2AError::invalid_params(format!("task envelope cannot change {}", fixed.join(", ")))
                    .with("field", "message.parts"));
            }
            if fields.is_empty() {
                return Err(invalid_envelope("a task envelope on an existing task needs a field to change"));
            }
            Ok(Classified::of(ItemKind::TaskUpdate { fields }))
        }
        Envelope::Update { kind, payload } => {
            message.parts[at] = a2a_types::Part::text(framed(&kind, &payload));
            let mark = serde_json::json!({"kind": kind, "payload": payload});
            message.metadata.get_or_insert_with(Default::default).insert(harness_workflow::event_ext_key(), mark);
            Ok(Classified::of(ItemKind::Record { event: kind }))
        }
    }
}

/// A message without an envelope: a registered command or an ordinary message.
fn plain_kind(message: &Message, commands: &CommandRegistry) -> ItemKind {
    let text_only = message.parts.len() == 1 && message.parts[0].text.is_some();
    match commands.parse(&message.text()).filter(|_| text_only) {
        Some((name, args)) => ItemKind::Command { name, args },
        None => ItemKind::Message,
    }
}

/// How a recorded event reads in the history (and to the model): `[<kind>] task <id>: ...`.
fn framed(kind: &str, payload: &serde_json::Value) -> String {
    let task = payload["taskId"].as_str().unwrap_or("?");
    let (what, parts) = if kind == "status_update" {
        (payload["status"]["state"].as_str().unwrap_or("?").to_string(), &payload["status"]["message"]["parts"])
    } else {
        let artifact = &payload["artifact"];
        let name = artifact["name"].as_str().filter(|n| !n.is_empty()).or(artifact["artifactId"].as_str());
        (format!("artifact {}", name.unwrap_or("?")), &artifact["parts"])
    };
    let text: String =
        parts.as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default();
    let text = if text.is_empty() { String::new() } else { format!(": {text}") };
    format!("[{kind}] task {task}: {what}{text}")
}

/// D4: an anonymous caller can never send a control or change a task.
pub(crate) fn check_anonymous(kind: &ItemKind, caller: &Caller) -> Result<(), A2AError> {
    let what = match kind {
        ItemKind::Control => "a control needs a known sender",
        ItemKind::TaskUpdate { .. } => "a task envelope on an existing task needs a known sender",
        _ => return Ok(()),
    };
    if caller.id().is_some() {
        return Ok(());
    }
    Err(A2AError::invalid_params(format!(
        "invalid params: {what}: name the participant (X-Participant-Id or metadata.participant_id); an anonymous \
         caller cannot complete or change a task"
    ))
    .with("field", "message.parts"))
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

    fn on_task(parts: Vec<Part>) -> Message {
        Message { task_id: "t".into(), ..message(parts) }
    }

    fn control() -> Part {
        Part::data(json!({"kind": "control", "action": "complete"}), EVENT_MEDIA_TYPE)
    }

    fn kind(mut m: Message) -> ItemKind {
        classify(&mut m, &CommandRegistry::default()).unwrap().kind
    }

    fn why(mut m: Message) -> String {
        classify(&mut m, &CommandRegistry::default()).unwrap_err().message
    }

    #[test]
    fn a_control_is_one_data_part_with_or_without_the_envelope_media_type() {
        assert_eq!(kind(on_task(vec![control()])), ItemKind::Control);
        let bare = Part::data(json!({"kind": "control", "action": "complete"}), "");
        assert_eq!(kind(on_task(vec![bare])), ItemKind::Control);
        let other_data = Part::data(json!({"kind": "control"}), "application/json");
        assert_eq!(kind(on_task(vec![other_data])), ItemKind::Message, "not an envelope");
        assert!(
            why(on_task(vec![control(), Part::text("and this")])).contains("a control must be the message's only part")
        );
        assert!(why(on_task(vec![control(), control()])).contains("at most one envelope"));
    }

    #[test]
    fn a_task_envelope_is_a_brief_on_a_new_task_and_an_update_on_an_existing_one() {
        let brief = || Part::data(json!({"kind": "task", "payload": {"name": "n", "goal": "g"}}), EVENT_MEDIA_TYPE);
        let mut m = message(vec![brief(), Part::text("go")]);
        let c = classify(&mut m, &CommandRegistry::default()).unwrap();
        assert_eq!((c.kind, m.parts.len()), (ItemKind::Message, 1), "the brief is taken out of the message");
        assert_eq!(c.brief.unwrap()["goal"], "g");
        assert_eq!(kind(message(vec![brief()])), ItemKind::BriefOnly);
        assert_eq!(why(on_task(vec![brief()])), "task envelope cannot change goal");
        let rename = Part::data(json!({"kind": "task", "payload": {"name": "renamed"}}), EVENT_MEDIA_TYPE);
        assert!(matches!(kind(on_task(vec![rename])), ItemKind::TaskUpdate { .. }));
        let fixed = Part::data(json!({"kind": "task", "payload": {"model": "m", "name": "x"}}), EVENT_MEDIA_TYPE);
        assert_eq!(why(on_task(vec![fixed])), "task envelope cannot change model");
    }

    #[test]
    fn an_event_envelope_is_recorded_framed_with_its_payload_kept() {
        let update = json!({"kind": "status_update", "payload": {"taskId": "sub-1",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {"parts": [{"text": "done"}]}}}});
        let mut m = on_task(vec![Part::data(update.clone(), EVENT_MEDIA_TYPE)]);
        let c = classify(&mut m, &CommandRegistry::default()).unwrap();
        assert_eq!(c.kind, ItemKind::Record { event: "status_update".into() });
        assert_eq!(m.text(), "[status_update] task sub-1: TASK_STATE_COMPLETED: done");
        assert_eq!(m.metadata.unwrap()[&harness_workflow::event_ext_key()]["payload"], update["payload"]);
    }

    #[test]
    fn a_command_is_a_whole_text_naming_a_registered_one() {
        let text = |t: &str| kind(on_task(vec![Part::text(t)]));
        assert_eq!(text("/status"), ItemKind::Command { name: "status".into(), args: String::new() });
        assert_eq!(text("/nope"), ItemKind::Message);
        assert_eq!(text("hello /help"), ItemKind::Message);
        assert_eq!(kind(on_task(vec![Part::text("/help"), Part::text("more")])), ItemKind::Message);
    }
}
