//! Event envelopes (`application/vnd.tiny-harness.event+json`, EXTENSIONS.md): one data
//! part of a message, validated against the schema this project publishes
//! (docs/schemas/event-envelope.schema.json) with the refusal texts of EXTENSIONS.md.

use a2a_types::A2AError;
use serde_json::{Value, json};
use std::sync::LazyLock;

/// The published schema (docs/schemas/event-envelope.schema.json), compiled in.
pub const ENVELOPE_SCHEMA: &str = include_str!("../../../../docs/schemas/event-envelope.schema.json");

/// An envelope that passed its schema.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Envelope {
    /// `{"kind":"control","action":"complete"}` (S8).
    Control,
    /// Task data, whole or partial (S11, S21).
    Task(serde_json::Map<String, Value>),
    /// A status or artifact update event's JSON, to record (S11): its kind and payload.
    Update { kind: String, payload: Value },
}

/// One compiled validator per envelope kind, each against the published `$defs`.
struct Schemas {
    kinds: Vec<(&'static str, jsonschema::Validator)>,
}

static SCHEMAS: LazyLock<Schemas> = LazyLock::new(|| {
    let doc: Value = serde_json::from_str(ENVELOPE_SCHEMA).expect("the envelope schema is JSON");
    let def = |name: &str| {
        let schema = json!({"$defs": doc["$defs"].clone(), "$ref": format!("#/$defs/{name}")});
        jsonschema::validator_for(&schema).expect("the envelope schema compiles")
    };
    Schemas {
        kinds: vec![
            ("task", def("TaskEnvelope")),
            ("status_update", def("StatusUpdateEnvelope")),
            ("artifact_update", def("ArtifactUpdateEnvelope")),
            ("control", def("ControlEnvelope")),
        ],
    }
});

/// `invalid event envelope: <why>` (InvalidParams).
pub(crate) fn invalid_envelope(why: impl std::fmt::Display) -> A2AError {
    A2AError::invalid_params(format!("invalid event envelope: {why}")).with("field", "message.parts")
}

/// One schema error as a line: where, and what (an unknown key by name).
fn error_line(e: &jsonschema::ValidationError<'_>) -> String {
    let what = match e.kind() {
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
            let keys: Vec<String> = unexpected.iter().map(|k| format!("`{k}`")).collect();
            format!("unknown key {}", keys.join(", "))
        }
        _ => e.to_string(),
    };
    let at = e.instance_path().as_str();
    if at.is_empty() { what } else { format!("at {at}: {what}") }
}

/// Validates an envelope's JSON: a bad shape is `invalid event envelope: <why>`, bad task
/// data `invalid task extension: <n> error(s)` with every error in the error's data.
pub(crate) fn parse(data: &Value) -> Result<Envelope, A2AError> {
    let Some(fields) = data.as_object() else { return Err(invalid_envelope("an envelope is a JSON object")) };
    let kind = match fields.get("kind") {
        Some(Value::String(k)) => k.as_str(),
        _ => {
            return Err(invalid_envelope(
                "an envelope needs `kind` (`task`, `status_update`, `artifact_update` or `control`)",
            ));
        }
    };
    let Some((_, validator)) = SCHEMAS.kinds.iter().find(|(k, _)| *k == kind) else {
        return Err(invalid_envelope(format!("unknown kind `{kind}`")));
    };
    let in_payload = |e: &jsonschema::ValidationError<'_>| {
        let at = e.instance_path().as_str();
        kind == "task" && (at == "/payload" || at.starts_with("/payload/"))
    };
    let errors: Vec<_> = validator.iter_errors(data).collect();
    if let Some(first) = errors.iter().find(|e| !in_payload(e)) {
        return Err(invalid_envelope(error_line(first)));
    }
    if !errors.is_empty() {
        let mut error = A2AError::invalid_params(format!("invalid task extension: {} error(s)", errors.len()))
            .with("field", "message.parts");
        error.field_violations = errors
            .iter()
            .map(|e| (format!("message.parts.data{}", e.instance_path().as_str()), error_line(e)))
            .collect();
        return Err(error);
    }
    Ok(match kind {
        "control" => Envelope::Control,
        "task" => Envelope::Task(fields["payload"].as_object().cloned().unwrap_or_default()),
        _ => Envelope::Update { kind: kind.to_string(), payload: fields["payload"].clone() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(v: Value) -> String {
        parse(&v).unwrap_err().message
    }

    #[test]
    fn each_kind_parses_and_bad_shapes_are_refused_with_the_texts_of_extensions_md() {
        assert_eq!(parse(&json!({"kind": "control", "action": "complete"})).unwrap(), Envelope::Control);
        let task = parse(&json!({"kind": "task", "payload": {"name": "n"}})).unwrap();
        assert_eq!(task, Envelope::Task(json!({"name": "n"}).as_object().cloned().unwrap()));
        let update = json!({"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}});
        assert!(matches!(parse(&json!({"kind": "status_update", "payload": update})), Ok(Envelope::Update { .. })));

        assert_eq!(
            why(json!({"kind": "control", "action": "complete", "x": 1})),
            "invalid event envelope: unknown key `x`"
        );
        assert!(why(json!({"kind": "control", "action": "pause"})).starts_with("invalid event envelope: at /action: "));
        assert_eq!(why(json!({"kind": "poke"})), "invalid event envelope: unknown kind `poke`");
        assert!(why(json!({"payload": {}})).contains("needs `kind`"));
        assert!(why(json!([1])).contains("a JSON object"));
        assert!(why(json!({"kind": "status_update", "payload": {"taskId": "t"}})).contains("at /payload: "));
    }

    #[test]
    fn bad_task_data_counts_its_errors_and_names_each() {
        let e = parse(&json!({"kind": "task", "payload": {"name": "", "colour": "red",
            "participants": [{"id": "a", "kind": "human", "role": "boss"}]}}))
        .unwrap_err();
        assert_eq!(e.message, "invalid task extension: 3 error(s)");
        let errors = format!("{:?}", e.field_violations);
        for part in ["unknown key `colour`", "/payload/name", "/payload/participants/0/role"] {
            assert!(errors.contains(part), "{errors}");
        }
    }
}
