//! Checks of REQUIRED fields (field_behavior) with errors that name the field.

use crate::{A2AError, Message, Part, Role, SendMessageRequest};

/// Checks a SendMessageRequest: `message` with a `messageId`, a role and at least one
/// well-formed part.
pub fn send_message(req: &SendMessageRequest) -> Result<&Message, A2AError> {
    let Some(message) = req.message.as_ref() else {
        return Err(A2AError::missing_field("message", "the request has no message"));
    };
    if message.message_id.is_empty() {
        return Err(A2AError::missing_field("message.messageId", "the message has no messageId"));
    }
    if message.role == Role::Unspecified {
        return Err(A2AError::missing_field("message.role", "the message has no role (ROLE_USER or ROLE_AGENT)"));
    }
    if message.parts.is_empty() {
        return Err(A2AError::missing_field("message.parts", "the message has no parts (at least one is required)"));
    }
    for (i, part) in message.parts.iter().enumerate() {
        part_content(part, &format!("message.parts[{i}]"))?;
    }
    if let Some(h) = req.configuration.as_ref().and_then(|c| c.history_length) {
        history_length(h, "configuration.historyLength")?;
    }
    Ok(message)
}

/// A part has exactly one of text, raw, url, data.
pub fn part_content(part: &Part, field: &str) -> Result<(), A2AError> {
    match part.content_count() {
        1 => Ok(()),
        0 => Err(A2AError::missing_field(field, "the part has none of text, raw, url, data")),
        _ => Err(A2AError::missing_field(field, "the part has more than one of text, raw, url, data")),
    }
}

/// `historyLength` must not be negative.
pub fn history_length(n: i32, field: &str) -> Result<(), A2AError> {
    if n < 0 {
        return Err(A2AError::invalid_params(format!("invalid params: {field} must not be negative (got {n})")));
    }
    Ok(())
}

/// A task id is present.
pub fn task_id(id: &str, field: &str) -> Result<(), A2AError> {
    if id.is_empty() {
        return Err(A2AError::missing_field(field, "the task id is missing"));
    }
    Ok(())
}
