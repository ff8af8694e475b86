//! A new task from its brief (S21, S22): the task envelope on a task's first message,
//! checked for what only a trusted delegator may set, with the sender as reporter and an
//! assignee; an assignee other than this agent puts the task in participant mode.

use super::HarnessHandler;
use super::access::{Caller, Role};
use a2a_types::A2AError;
use harness_workflow::Lifecycle;
use serde_json::{Map, Value, json};

/// Fields of a brief only a trusted delegator may set (S21).
const DELEGATOR_FIELDS: &[&str] = &["lifecycle", "model", "reasoning_effort"];

/// A checked brief: the task data and what it decides about the task.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Brief {
    /// The task data (EXTENSIONS.md, task), participants completed.
    pub data: Map<String, Value>,
    /// (id, role) for the store's access list.
    pub participants: Vec<(String, String)>,
    pub lifecycle: Option<Lifecycle>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    /// Participant mode (S22): the assignee, when it is not this agent.
    pub assignee: Option<String>,
}

impl HarnessHandler {
    /// Checks a brief and completes it: `name` and `goal` are required; `lifecycle`,
    /// `model` and `reasoning_effort` only from a trusted delegator (this agent itself, or
    /// an id of `server.delegators`), else the brief is refused whole; a model must be one
    /// this agent has. The sender becomes the reporter when not on it, this agent the
    /// assignee when it names none.
    pub(super) fn brief(&self, mut data: Map<String, Value>, caller: &Caller) -> Result<Brief, A2AError> {
        let missing: Vec<(String, String)> = ["name", "goal"]
            .iter()
            .filter(|f| !data.contains_key(**f))
            .map(|f| {
                (format!("message.parts.data/payload/{f}"), format!("`{f}` is required when a brief opens a task"))
            })
            .collect();
        if !missing.is_empty() {
            let mut e = A2AError::invalid_params(format!("invalid task extension: {} error(s)", missing.len()))
                .with("field", "message.parts");
            e.field_violations = missing;
            return Err(e);
        }
        let set: Vec<&str> =
            DELEGATOR_FIELDS.iter().copied().filter(|f| data.get(*f).is_some_and(|v| !v.is_null())).collect();
        let trusted =
            caller.id().is_some_and(|id| id == self.agent_id() || self.settings.delegators.iter().any(|d| d == id));
        if !set.is_empty() && !trusted {
            let fields: Vec<String> = set.iter().map(|f| format!("`{f}`")).collect();
            let verb = if set.len() == 1 { "is" } else { "are" };
            return Err(A2AError::invalid_params(format!(
                "{} {verb} accepted only from a trusted delegator",
                fields.join(", ")
            ))
            .with("field", "message.parts"));
        }
        let text = |f: &str| data.get(f).and_then(|v| v.as_str()).map(String::from);
        let model = text("model");
        if let Some(name) = &model
            && self.settings.models.get(name).is_none()
        {
            return Err(A2AError::invalid_params(format!(
                "unknown model `{name}` in the brief; this agent has: {}",
                self.settings.models.names().join(", ")
            ))
            .with("field", "message.parts"));
        }
        let lifecycle =
            text("lifecycle").map(|l| l.parse::<Lifecycle>()).transpose().map_err(A2AError::invalid_params)?;
        let reasoning_effort = text("reasoning_effort");
        let mut participants: Vec<Value> =
            data.get("participants").and_then(|p| p.as_array()).cloned().unwrap_or_default();
        let on = |participants: &[Value], id: &str| participants.iter().any(|p| p["id"] == id);
        if let Some(id) = caller.id()
            && !on(&participants, id)
        {
            participants.push(json!({"id": id, "kind": "human", "role": Role::Reporter.as_str()}));
        }
        let assignee =
            participants.iter().find(|p| p["role"] == "assignee").and_then(|p| p["id"].as_str()).map(String::from);
        if assignee.is_none() && !on(&participants, self.agent_id()) {
            participants.push(json!({"id": self.agent_id(), "kind": "agent", "role": Role::Assignee.as_str()}));
        }
        let access = participants
            .iter()
            .filter_map(|p| Some((p["id"].as_str()?.to_string(), p["role"].as_str()?.to_string())))
            .collect();
        data.insert("participants".into(), Value::Array(participants));
        Ok(Brief {
            data,
            participants: access,
            lifecycle,
            model,
            reasoning_effort,
            assignee: assignee.filter(|a| a != self.agent_id()),
        })
    }
}
