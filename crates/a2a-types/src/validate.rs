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

/// ListTasks: `pageSize` in 1..=100, `historyLength` not negative, `statusTimestampAfter`
/// an RFC 3339 timestamp. Returns the timestamp normalised to the form this crate writes
/// (UTC, milliseconds, `Z`), so stored timestamps compare as strings.
pub fn list_tasks(req: &crate::ListTasksRequest) -> Result<Option<String>, A2AError> {
    if let Some(n) = req.page_size
        && !(1..=100).contains(&n)
    {
        return Err(A2AError::invalid_params(format!("invalid params: pageSize must be between 1 and 100 (got {n})"))
            .with("field", "pageSize"));
    }
    if let Some(h) = req.history_length {
        history_length(h, "historyLength")?;
    }
    match req.status_timestamp_after.as_deref().filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(ts) => chrono::DateTime::parse_from_rfc3339(ts)
            .map(|t| Some(crate::format_timestamp(t.with_timezone(&chrono::Utc).into())))
            .map_err(|e| {
                A2AError::invalid_params(format!(
                    "invalid params: statusTimestampAfter `{ts}` is not an RFC 3339 timestamp ({e})"
                ))
                .with("field", "statusTimestampAfter")
            }),
    }
}

/// A push config: `url` is an absolute http(s) URL.
pub fn push_config(config: &crate::TaskPushNotificationConfig) -> Result<(), A2AError> {
    if config.url.is_empty() {
        return Err(A2AError::missing_field("url", "the push notification config has no url"));
    }
    let scheme_ok = config.url.starts_with("http://") || config.url.starts_with("https://");
    let host = config.url.split("://").nth(1).unwrap_or("");
    if !scheme_ok || host.is_empty() || host.starts_with('/') {
        return Err(A2AError::invalid_params(format!(
            "invalid params: url `{}` is not an absolute http(s) URL",
            config.url
        ))
        .with("field", "url"));
    }
    if let Some(auth) = &config.authentication
        && auth.scheme.is_empty()
    {
        return Err(A2AError::missing_field("authentication.scheme", "the authentication has no scheme"));
    }
    Ok(())
}
