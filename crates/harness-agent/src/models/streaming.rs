//! What the HTTP providers (`openai`, `anthropic`) share: one POST answered with a
//! server-sent event stream, attempts with backoff, error bodies read for the endpoint's own
//! words, the key cut out of every message, and the conversation as the model reads it.
//!
//! Failures (docs/configuration.md, "The openai provider"; the anthropic kind the same):
//! - 429, 5xx (529 included), 408, a connection failure, a stream that stalls longer than the
//!   request timeout, and a stream cut before its end are retried, at most `max_attempts` in
//!   all, after a backoff that honours `Retry-After`. A retry after output was streamed first
//!   says [`ModelEvent::Restart`], so the turn's log marks the void output.
//! - Any other status and a malformed stream end the turn at once, with a message naming
//!   the model, the endpoint, the HTTP status and the endpoint's own error text. The key is
//!   never in it: it is cut out of whatever the endpoint sends back.

use super::{DeltaStream, ModelError, ModelEvent};
use a2a_types::{Message, Role};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Why an attempt failed.
pub(super) enum Failure {
    /// Worth another attempt, after at least this long when the endpoint said.
    Retry { why: String, after: Option<Duration> },
    /// Ends the turn.
    Fatal(String),
}

/// What one event of the stream meant.
pub(super) enum Step {
    /// Events to pass on; the stream goes on.
    More(Vec<ModelEvent>),
    /// The stream's end marker: these events, then the attempt is done.
    Done(Vec<ModelEvent>),
}

/// Reads one attempt's events (a fresh decoder per attempt: a retry starts over).
pub(super) trait Decoder: Send + 'static {
    fn event(&mut self, event: &eventsource_stream::Event) -> Result<Step, Failure>;
    /// What ends a whole stream, for the message of one that ended without it.
    fn end_marker(&self) -> &'static str;
}

/// One attempt's outcome as the stream sees it.
enum Piece {
    Event(ModelEvent),
    Failed(Failure),
    Done,
}

/// An endpoint of a provider: where requests go, with what headers, and how hard to try.
pub(super) struct Endpoint {
    /// What a message about the model starts with (`openai model `gpt` at https://...`).
    pub who: String,
    /// The model's config name, for the log.
    pub name: String,
    pub url: String,
    pub http: reqwest::Client,
    /// The headers each request carries besides the configured ones (the key's).
    pub auth: reqwest::header::HeaderMap,
    /// The key, cut out of whatever the endpoint says.
    pub secret: Option<String>,
    pub timeout: Duration,
    pub max_attempts: u32,
}

impl Endpoint {
    /// The endpoint `{base_url}{path}` of the `kind` model `name`, its requests carrying the
    /// configured extra `headers`; the error names the model's table and the header that is
    /// not one.
    pub fn new(
        kind: &str,
        name: &str,
        base_url: &str,
        path: &str,
        headers: &[(String, String)],
        timeout: Duration,
        max_attempts: u32,
    ) -> Result<Self, String> {
        let map = crate::header_map(headers, |key, is_name| match is_name {
            true => format!("`models.{name}.headers`: `{key}` is not a header name"),
            false => format!("`models.{name}.headers.{key}`: not a header value"),
        })?;
        let http = reqwest::Client::builder()
            .default_headers(map)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| format!("`models.{name}`: cannot build the HTTP client: {e}"))?;
        Ok(Self {
            who: format!("{kind} model `{name}` at {base_url}"),
            name: name.into(),
            url: format!("{}{path}", base_url.trim_end_matches('/')),
            http,
            auth: reqwest::header::HeaderMap::new(),
            secret: None,
            timeout,
            max_attempts,
        })
    }

    /// This endpoint sending `header: value` with each request; a `secret` value (the key)
    /// is also cut out of whatever the endpoint says.
    pub fn header(mut self, header: &'static str, value: &str, secret: Option<&str>) -> Result<Self, String> {
        let v = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| format!("`models.{}`: the value of `{header}` is not a header value", self.name))?;
        self.auth.insert(header, v);
        if let Some(secret) = secret {
            self.secret = Some(secret.to_string());
        }
        Ok(self)
    }
}

impl Endpoint {
    /// `text` with the key cut out, and at most 500 characters of it.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.trim().to_string();
        if let Some(key) = self.secret.as_deref().filter(|k| !k.is_empty()) {
            text = text.replace(key, "[REDACTED]");
        }
        if text.chars().count() > 500 {
            text = text.chars().take(500).collect::<String>() + "...";
        }
        text
    }

    /// Sends the request; the response when it is a stream.
    async fn open(&self, body: &Value) -> Result<reqwest::Response, Failure> {
        let request =
            self.http.post(&self.url).header("accept", "text/event-stream").headers(self.auth.clone()).json(body);
        let timeout = self.timeout;
        let response = match tokio::time::timeout(timeout, request.send()).await {
            Err(_) => {
                let why = format!("no response within {} s", timeout.as_secs());
                return Err(Failure::Retry { why, after: None });
            }
            Ok(Err(e)) => {
                return Err(Failure::Retry {
                    why: format!("the request failed: {}", self.scrub(&e.to_string())),
                    after: None,
                });
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let after = retry_after(response.headers());
        let text = tokio::time::timeout(timeout, response.text()).await.ok().and_then(Result::ok).unwrap_or_default();
        let why = format!("HTTP {status}: {}", self.scrub(&error_text(&text)));
        if status.as_u16() == 429 || status.as_u16() == 408 || status.is_server_error() {
            Err(Failure::Retry { why, after })
        } else {
            Err(Failure::Fatal(why))
        }
    }

    /// One attempt: its events, then how it ended.
    fn attempt(
        self: Arc<Self>,
        body: Arc<Value>,
        mut decoder: Box<dyn Decoder>,
    ) -> impl futures::Stream<Item = Piece> + Send {
        async_stream::stream! {
            let response = match self.open(&body).await {
                Ok(r) => r,
                Err(f) => {
                    yield Piece::Failed(f);
                    return;
                }
            };
            let timeout = self.timeout;
            let mut events = response.bytes_stream().eventsource();
            loop {
                let next = match tokio::time::timeout(timeout, events.next()).await {
                    Err(_) => {
                        let why = format!("the stream stalled: nothing for {} s", timeout.as_secs());
                        yield Piece::Failed(Failure::Retry { why, after: None });
                        return;
                    }
                    Ok(next) => next,
                };
                let event = match next {
                    None => {
                        let why = format!("the stream ended before {}", decoder.end_marker());
                        yield Piece::Failed(Failure::Retry { why, after: None });
                        return;
                    }
                    Some(Err(e)) => {
                        let why = format!("the stream was cut: {}", self.scrub(&e.to_string()));
                        yield Piece::Failed(Failure::Retry { why, after: None });
                        return;
                    }
                    Some(Ok(event)) => event,
                };
                match decoder.event(&event) {
                    Ok(Step::More(out)) => {
                        for e in out {
                            yield Piece::Event(e);
                        }
                    }
                    Ok(Step::Done(out)) => {
                        for e in out {
                            yield Piece::Event(e);
                        }
                        yield Piece::Done;
                        return;
                    }
                    Err(Failure::Fatal(why)) => {
                        yield Piece::Failed(Failure::Fatal(self.scrub(&why)));
                        return;
                    }
                    Err(Failure::Retry { why, after }) => {
                        yield Piece::Failed(Failure::Retry { why: self.scrub(&why), after });
                        return;
                    }
                }
            }
        }
    }

    /// The model's events for `body`: attempts until one ends properly, a failure that is
    /// not worth another, or `max_attempts`; `decoder` makes each attempt's decoder.
    pub fn stream(self: Arc<Self>, body: Value, decoder: fn() -> Box<dyn Decoder>) -> DeltaStream {
        let body = Arc::new(body);
        let max = self.max_attempts.max(1);
        let stream = async_stream::stream! {
            let mut n = 1;
            loop {
                let mut streamed = false;
                let mut attempt = std::pin::pin!(self.clone().attempt(body.clone(), decoder()));
                let mut failure = None;
                while let Some(piece) = attempt.next().await {
                    match piece {
                        Piece::Event(e) => {
                            streamed |= matches!(e, ModelEvent::Text(_));
                            yield Ok(e);
                        }
                        Piece::Done => return,
                        Piece::Failed(f) => failure = Some(f),
                    }
                }
                let (why, after) = match failure {
                    Some(Failure::Retry { why, after }) => (why, after),
                    Some(Failure::Fatal(why)) => {
                        yield Err(ModelError { message: format!("{}: {why}", self.who), retryable: false });
                        return;
                    }
                    None => ("the stream ended too soon".to_string(), None),
                };
                if n >= max {
                    let message = format!("{}: gave up after {n} attempts: {why}", self.who);
                    yield Err(ModelError { message, retryable: false });
                    return;
                }
                tracing::warn!(model = %self.name, attempt = n, reason = %why, "retrying the model request");
                if streamed {
                    yield Ok(ModelEvent::Restart { reason: format!("attempt {n} failed: {why}") });
                }
                tokio::time::sleep(backoff(n, after)).await;
                n += 1;
            }
        };
        stream.boxed()
    }
}

/// The endpoint's own words in an error body: `error.message` (OpenAI, Anthropic and most
/// servers), `error` as a string, `message` or `detail`; else the body itself.
pub(super) fn error_text(body: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(body) else { return body.to_string() };
    let found = [&v["error"]["message"], &v["error"], &v["message"], &v["detail"]]
        .into_iter()
        .find_map(|f| f.as_str().map(String::from));
    found.unwrap_or_else(|| body.to_string())
}

/// `Retry-After` as seconds or an HTTP date, at most a minute.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().to_string();
    let wait = match value.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Duration::from_secs_f64(secs),
        _ => httpdate::parse_http_date(&value).ok()?.duration_since(std::time::SystemTime::now()).unwrap_or_default(),
    };
    Some(wait.min(Duration::from_secs(60)))
}

/// The wait before attempt `n + 1`: what the endpoint asked, else 0.5 s doubling to 8 s.
fn backoff(n: u32, asked: Option<Duration>) -> Duration {
    asked.unwrap_or_else(|| Duration::from_millis(500) * 2u32.pow(n.saturating_sub(1).min(4)))
}

/// The conversation as the model reads it: the newest messages whose text fits about
/// `tokens` tokens, each as (whether the agent said it, its text). With more than one
/// participant speaking, each user message is framed with its sender's id, so the model can
/// tell them apart.
pub(super) fn said(history: &[Message], tokens: usize) -> Vec<(bool, String)> {
    let seen = window(history, tokens);
    let senders: std::collections::BTreeSet<&str> = seen.iter().filter_map(sender).collect();
    seen.iter()
        .map(|m| match (m.role, sender(m)) {
            (Role::Agent, _) => (true, m.text()),
            (_, Some(id)) if senders.len() > 1 => (false, format!("[{id}] {}", m.text())),
            _ => (false, m.text()),
        })
        .collect()
}

/// Who sent a user message (the channel extension's `sender`, set when it was admitted).
fn sender(m: &Message) -> Option<&str> {
    (m.role == Role::User).then_some(())?;
    m.metadata.as_ref()?.get(&crate::channel_ext_key())?.get("sender")?.as_str()
}

/// The newest messages whose text fits about `tokens` tokens (4 characters each); the last
/// message always, however long.
fn window(history: &[Message], tokens: usize) -> &[Message] {
    let mut budget = tokens.saturating_mul(4);
    let mut from = history.len();
    for (i, m) in history.iter().enumerate().rev() {
        let cost = m.text().len();
        if from < history.len() && cost > budget {
            break;
        }
        budget = budget.saturating_sub(cost);
        from = i;
    }
    &history[from..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_bodies_give_the_endpoints_own_words() {
        assert_eq!(
            error_text(r#"{"error":{"message":"Invalid model","type":"invalid_request_error"}}"#),
            "Invalid model"
        );
        let anthropic = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_text(anthropic), "Overloaded");
        assert_eq!(error_text(r#"{"error":"model not found"}"#), "model not found");
        assert_eq!(error_text(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_text("Bad Gateway"), "Bad Gateway");
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_and_is_capped() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(reqwest::header::RETRY_AFTER, "3600".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(60)));
        let soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(30));
        h.insert(reqwest::header::RETRY_AFTER, soon.parse().unwrap());
        let d = retry_after(&h).unwrap();
        assert!(d > Duration::from_secs(25) && d <= Duration::from_secs(30), "{d:?}");
        assert_eq!(backoff(1, None), Duration::from_millis(500));
        assert_eq!(backoff(3, None), Duration::from_secs(2));
        assert_eq!(backoff(9, None), Duration::from_secs(8));
    }

    #[test]
    fn the_window_keeps_the_newest_messages_within_the_budget_and_always_the_last() {
        let m = |t: &str| Message::agent_text("m", t);
        let history = [m(&"a".repeat(40)), m(&"b".repeat(40)), m(&"c".repeat(40))];
        assert_eq!(window(&history, 20).len(), 2, "80 characters: the two newest");
        assert_eq!(window(&history, 1).len(), 1, "the last one, over the budget");
        assert_eq!(window(&history, 1000).len(), 3);
    }

    #[test]
    fn user_messages_are_framed_with_their_sender_only_when_several_speak() {
        let from = |id: &str, text: &str| {
            let mut m = Message { role: Role::User, parts: vec![a2a_types::Part::text(text)], ..Default::default() };
            let channel = json!({"channel_id": "t", "sender": id});
            m.metadata = Some([(crate::channel_ext_key(), channel)].into_iter().collect());
            m
        };
        let two = said(&[from("alice", "hi"), Message::agent_text("r", "hello"), from("bob", "yo")], 100);
        assert_eq!(two, [(false, "[alice] hi".into()), (true, "hello".into()), (false, "[bob] yo".into())]);
        let one = said(&[from("alice", "hi"), from("alice", "again")], 100);
        assert_eq!(one, [(false, "hi".to_string()), (false, "again".to_string())]);
    }
}
