//! Redaction (S4): secrets are replaced by `[REDACTED]` before a message reaches the
//! workflow, the store or the model. By shape (bearer tokens, `sk-...` keys,
//! `password=...` and similar assignments, cloud and forge tokens, private keys, JWTs,
//! credentials in URLs) and by value (every configured secret).

use a2a_types::Message;
use regex::{Captures, Regex};
use serde_json::Value;
use std::sync::LazyLock;

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

struct Shape {
    re: Regex,
    /// Capture group kept in front of the redaction (the key of `password=...`), if any.
    keep: Option<usize>,
}

static SHAPES: LazyLock<Vec<Shape>> = LazyLock::new(|| {
    let shape = |re: &str, keep: Option<usize>| Shape { re: Regex::new(re).expect("redaction pattern"), keep };
    vec![
        shape(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----", None),
        shape(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*", Some(1)),
        shape(r"(?i)(\bbasic\s+)[A-Za-z0-9+/]{8,}=*", Some(1)),
        shape(r"\bsk-[A-Za-z0-9_\-]{8,}", None),
        shape(r"\bAKIA[0-9A-Z]{16}\b", None),
        shape(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b", None),
        shape(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b", None),
        shape(r"\bxox[abprs]-[A-Za-z0-9-]{10,}", None),
        shape(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}", None),
        shape(
            r#"(?i)(\b(?:password|passwd|pwd|secret|client[_-]?secret|api[_-]?key|access[_-]?key|secret[_-]?key|auth[_-]?token|access[_-]?token|token)\b["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;&"']+)"#,
            Some(1),
        ),
        shape(r"(://[^/\s:@]+:)[^@/\s]+(@)", Some(1)),
    ]
});

/// Replaces secrets by shape and by configured value.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// A redactor that also removes each of `secret_values` wherever it appears. Values
    /// shorter than 4 characters are ignored (they would redact ordinary words).
    pub fn new(secret_values: impl IntoIterator<Item = String>) -> Self {
        let mut values: Vec<String> = secret_values.into_iter().filter(|v| v.len() >= 4).collect();
        // Longest first, so a secret that contains another is removed whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    /// Redacts one string.
    pub fn text(&self, input: &str) -> String {
        let mut out = input.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), REDACTED);
            }
        }
        for shape in SHAPES.iter() {
            if shape.re.is_match(&out) {
                out = shape
                    .re
                    .replace_all(&out, |c: &Captures| {
                        let kept = shape.keep.and_then(|i| c.get(i)).map_or("", |m| m.as_str());
                        // The URL shape keeps the `@` after the password too.
                        let tail =
                            if c.len() > 2 && shape.keep == Some(1) && c.get(2).is_some_and(|m| m.as_str() == "@") {
                                "@"
                            } else {
                                ""
                            };
                        format!("{kept}{REDACTED}{tail}")
                    })
                    .into_owned();
            }
        }
        out
    }

    /// Redacts every string inside a JSON value.
    pub fn json(&self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.json(v)),
            _ => {}
        }
    }

    /// Redacts a message: text, url and data of every part, and all metadata.
    pub fn message(&self, message: &mut Message) {
        for part in &mut message.parts {
            if let Some(t) = part.text.as_mut() {
                *t = self.text(t);
            }
            if let Some(u) = part.url.as_mut() {
                *u = self.text(u);
            }
            if let Some(d) = part.data.as_mut() {
                self.json(d);
            }
            if let Some(m) = part.metadata.as_mut() {
                m.values_mut().for_each(|v| self.json(v));
            }
        }
        if let Some(m) = message.metadata.as_mut() {
            m.values_mut().for_each(|v| self.json(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_by_shape() {
        let r = Redactor::default();
        let cases = [
            ("my key is sk-proj-abcdef1234567890", "my key is [REDACTED]"),
            ("Authorization: Bearer abc.def-ghi_12345", "Authorization: Bearer [REDACTED]"),
            ("login with password=hunter2 please", "login with password=[REDACTED] please"),
            ("api_key: \"q1w2e3r4\"", "api_key: [REDACTED]"),
            ("aws AKIAABCDEFGHIJKLMNOP", "aws [REDACTED]"),
            ("gh ghp_abcdefghijklmnopqrstuvwxyz0123", "gh [REDACTED]"),
            ("postgres://app:s3cret@db/x", "postgres://app:[REDACTED]@db/x"),
        ];
        for (input, want) in cases {
            assert_eq!(r.text(input), want, "input: {input}");
        }
    }

    #[test]
    fn configured_values_are_redacted_wherever_they_appear() {
        let r = Redactor::new(["correct-horse-battery".to_string(), "abc".to_string()]);
        assert_eq!(r.text("x correct-horse-battery y abc"), "x [REDACTED] y abc");
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let r = Redactor::default();
        let text = "The password policy says tokens expire; ask-me anything about sk-8 skis.";
        assert_eq!(r.text(text), text);
    }

    #[test]
    fn a_message_is_redacted_in_every_part_and_its_metadata() {
        let r = Redactor::default();
        let mut m: Message = serde_json::from_value(serde_json::json!({
            "messageId": "m", "role": "ROLE_USER",
            "parts": [{"text": "sk-abcdefghijkl"}, {"data": {"k": ["password=x1y2z3"]}}],
            "metadata": {"note": "Bearer abcdefghijkl"}
        }))
        .unwrap();
        r.message(&mut m);
        let s = serde_json::to_string(&m).unwrap();
        assert!(!s.contains("abcdefghijkl") && !s.contains("x1y2z3"), "{s}");
        assert_eq!(s.matches(REDACTED).count(), 3, "{s}");
    }
}
