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

/// A part has exactly one of text, raw, url, data; `raw` is base64.
pub fn part_content(part: &Part, field: &str) -> Result<(), A2AError> {
    match part.content_count() {
        1 => {}
        0 => return Err(A2AError::missing_field(field, "the part has none of text, raw, url, data")),
        _ => return Err(A2AError::missing_field(field, "the part has more than one of text, raw, url, data")),
    }
    if let Some(raw) = &part.raw
        && let Err(why) = base64_shape(raw)
    {
        return Err(A2AError::invalid_params(format!("invalid params: {field}.raw is not base64: {why}"))
            .with("field", format!("{field}.raw")));
    }
    Ok(())
}

/// Whether `text` is base64 as ProtoJSON reads `bytes`: the standard or the URL-safe
/// alphabet, with or without padding (issue 33). Says what is wrong when it is not.
pub fn base64_shape(text: &str) -> Result<(), String> {
    let body = text.trim_end_matches('=');
    let padding = text.len() - body.len();
    if let Some((i, c)) = body.char_indices().find(|(_, c)| !(c.is_ascii_alphanumeric() || "+/-_".contains(*c))) {
        return Err(format!("{c:?} at byte {i} is not in the base64 alphabet"));
    }
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) {
        return Err(format!("{padding} padding character(s) after {} characters is not valid padding", body.len()));
    }
    if body.len() % 4 == 1 {
        return Err(format!("{} characters cannot encode whole bytes", body.len()));
    }
    Ok(())
}

/// The host of an absolute `http`/`https` URL (without userinfo and port, brackets kept off an
/// IPv6 literal), `None` when the URL is not one.
pub fn push_url_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        &v6[..v6.find(']')?]
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    (!host.is_empty()).then_some(host)
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

/// A push config: `url` is an absolute http(s) URL with a host and no control character or
/// space (a CR/LF in a URL is a header or log injection waiting to happen, issue 33).
pub fn push_config(config: &crate::TaskPushNotificationConfig) -> Result<(), A2AError> {
    if config.url.is_empty() {
        return Err(A2AError::missing_field("url", "the push notification config has no url"));
    }
    let bad_url = |why: &str| {
        // The URL is quoted escaped: it may hold the very characters refused.
        A2AError::invalid_params(format!("invalid params: url {:?} {why}", config.url)).with("field", "url")
    };
    if let Some(c) = config.url.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad_url(&format!("holds the character {c:?}; a URL has no control character or space")));
    }
    if push_url_host(&config.url).is_none() {
        return Err(bad_url("is not an absolute http(s) URL with a host"));
    }
    if let Some(auth) = &config.authentication
        && auth.scheme.is_empty()
    {
        return Err(A2AError::missing_field("authentication.scheme", "the authentication has no scheme"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_in_either_alphabet_with_or_without_padding_is_taken_and_anything_else_is_named() {
        for ok in ["", "aGk=", "aGk", "aGVsbG8gd29ybGQ=", "-_-_", "+/+/", "YQ==", "YQ"] {
            assert_eq!(base64_shape(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("aGk*", "'*' at byte 3"),
            ("YQ===", "3 padding"),
            ("Y", "1 characters"),
            ("aG k=", "' ' at byte 2"),
            ("YQ=", "padding"),
        ] {
            let why = base64_shape(bad).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
    }

    #[test]
    fn a_push_url_needs_a_scheme_and_a_host_and_no_control_character() {
        let config = |url: &str| crate::TaskPushNotificationConfig { url: url.into(), ..Default::default() };
        for ok in ["https://h.example.com/x", "http://127.0.0.1:9/hook?a=1", "http://[::1]:8080/", "https://u:p@h.io"] {
            assert!(push_config(&config(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://h/x",
            "https:///x",
            "http://",
            "https://h.example.com/x\r\nX-Evil: 1",
            "http://h/ x",
            "h.example.com",
        ] {
            let e = push_config(&config(bad)).unwrap_err();
            assert!(e.message.contains("url"), "{bad}: {}", e.message);
            assert!(!e.message.contains('\r') && !e.message.contains('\n'), "the refusal is one line: {}", e.message);
        }
        assert_eq!(push_url_host("http://[fe80::1]:80/x"), Some("fe80::1"));
        assert_eq!(push_url_host("https://user@169.254.169.254/latest"), Some("169.254.169.254"));
    }
}
