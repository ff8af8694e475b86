//! `openai`: any endpoint that speaks the OpenAI Chat Completions API with streaming
//! (OpenAI, vLLM, Ollama, llama.cpp's server, LiteLLM, gateways). The SSE stream is decoded
//! by `eventsource-stream`; each `choices[0].delta.content` is a text delta.
//!
//! Failures (docs/configuration.md, "The openai provider"):
//! - 429, 5xx, 408, a connection failure, a stream that stalls longer than the request
//!   timeout, and a stream cut before `[DONE]` are retried, at most `max_attempts` in all,
//!   after a backoff that honours `Retry-After`. A retry after output was streamed first
//!   says [`ModelEvent::Restart`], so the turn's log marks the void output.
//! - Any other status and a malformed stream end the turn at once, with a message naming
//!   the model, the endpoint, the HTTP status and the endpoint's own error text. The key is
//!   never in it: it is cut out of whatever the endpoint sends back.

use super::{DeltaStream, ModelError, ModelEvent, ModelProvider, ModelRequest, TokenUsage};
use a2a_types::{Message, Role};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How one `[models.<name>]` of kind `openai` is set up (checked by the config).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiSettings {
    /// The config name, for messages.
    pub name: String,
    /// e.g. `https://api.openai.com/v1`; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// The key (from the environment); `None` for a keyless endpoint.
    pub api_key: Option<String>,
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    /// Bounds the wait for the response head and for each piece of the stream.
    pub request_timeout: Duration,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Requests per turn at most, the first included.
    pub max_attempts: u32,
    /// The conversation the model sees: at most this many newest messages...
    pub history_messages: usize,
    /// ...and about this many tokens of them (4 characters a token), the newest kept.
    pub history_tokens: usize,
    /// The system prompt (`[agent] instructions`).
    pub instructions: Option<String>,
}

/// The provider (cheap to clone: its settings are shared, and so is the HTTP client's pool).
#[derive(Clone)]
pub struct OpenAiModel {
    settings: Arc<OpenAiSettings>,
    http: reqwest::Client,
}

impl OpenAiModel {
    /// A provider for `settings`; the error names what is wrong (a header that is not one).
    pub fn new(settings: OpenAiSettings) -> Result<Self, String> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &settings.headers {
            let n = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`models.{}.headers`: `{name}` is not a header name", settings.name))?;
            let v = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("`models.{}.headers.{name}`: not a header value", settings.name))?;
            headers.insert(n, v);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(settings.request_timeout)
            .build()
            .map_err(|e| format!("`models.{}`: cannot build the HTTP client: {e}", settings.name))?;
        Ok(Self { settings: Arc::new(settings), http })
    }

    /// The request body for a turn: the conversation, then the turn's tool rounds, and the
    /// tools the model may call.
    fn body(&self, request: &ModelRequest) -> Value {
        let mut body = self.conversation_body(&request.history, request.reasoning_effort.as_deref());
        if let Some(messages) = body["messages"].as_array_mut() {
            for round in &request.exchanges {
                let calls: Vec<Value> = round
                    .calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect();
                let content = if round.text.is_empty() { Value::Null } else { json!(round.text) };
                messages.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
                for r in &round.results {
                    messages.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}));
                }
            }
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.input_schema,
                    }})
                })
                .collect();
            body["tools"] = json!(tools);
        }
        body
    }

    /// The request body for a conversation.
    fn conversation_body(&self, history: &[Message], reasoning_effort: Option<&str>) -> Value {
        let s = &self.settings;
        let mut messages = Vec::new();
        if let Some(system) = s.instructions.as_deref().filter(|i| !i.is_empty()) {
            messages.push(json!({"role": "system", "content": system}));
        }
        let seen = window(history, s.history_tokens);
        // With more than one participant speaking, each user message is framed with its
        // sender's id, so the model can tell them apart.
        let senders: std::collections::BTreeSet<&str> = seen.iter().filter_map(sender).collect();
        messages.extend(seen.iter().map(|m| match (m.role, sender(m)) {
            (Role::Agent, _) => json!({"role": "assistant", "content": m.text()}),
            (_, Some(id)) if senders.len() > 1 => json!({"role": "user", "content": format!("[{id}] {}", m.text())}),
            _ => json!({"role": "user", "content": m.text()}),
        }));
        let mut body = json!({
            "model": s.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(t) = s.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = s.max_output_tokens {
            body["max_completion_tokens"] = json!(n);
        }
        if let Some(e) = reasoning_effort.or(s.reasoning_effort.as_deref()) {
            body["reasoning_effort"] = json!(e);
        }
        body
    }
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

/// Why an attempt failed.
enum Failure {
    /// Worth another attempt, after at least this long when the endpoint said.
    Retry { why: String, after: Option<Duration> },
    /// Ends the turn.
    Fatal(String),
}

/// One attempt's outcome as the stream sees it.
enum Piece {
    Event(ModelEvent),
    Failed(Failure),
    Done,
}

impl OpenAiModel {
    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.settings.base_url.trim_end_matches('/'))
    }

    /// `text` with the key cut out, and at most 500 characters of it.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.trim().to_string();
        if let Some(key) = self.settings.api_key.as_deref().filter(|k| !k.is_empty()) {
            text = text.replace(key, "[REDACTED]");
        }
        if text.chars().count() > 500 {
            text = text.chars().take(500).collect::<String>() + "...";
        }
        text
    }

    /// What a message about this model starts with.
    fn who(&self) -> String {
        format!("openai model `{}` at {}", self.settings.name, self.settings.base_url)
    }

    /// Sends the request; the response when it is a stream.
    async fn open(&self, body: &Value) -> Result<reqwest::Response, Failure> {
        let mut request = self.http.post(self.endpoint()).header("accept", "text/event-stream").json(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key);
        }
        let timeout = self.settings.request_timeout;
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
    fn attempt(self: Arc<Self>, body: Arc<Value>) -> impl futures::Stream<Item = Piece> + Send {
        async_stream::stream! {
            let response = match self.open(&body).await {
                Ok(r) => r,
                Err(f) => {
                    yield Piece::Failed(f);
                    return;
                }
            };
            let timeout = self.settings.request_timeout;
            let mut events = response.bytes_stream().eventsource();
            let mut calls = ToolCalls::new();
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
                        let why = "the stream ended before [DONE]".to_string();
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
                if event.data.trim() == "[DONE]" {
                    // The calls the stream assembled, whole, in the order of their indexes.
                    for call in std::mem::take(&mut calls).into_values() {
                        yield Piece::Event(ModelEvent::ToolCall(call));
                    }
                    yield Piece::Done;
                    return;
                }
                match chunk_events(&event.data, &mut calls) {
                    Ok(out) => {
                        for e in out {
                            yield Piece::Event(e);
                        }
                    }
                    Err(why) => {
                        yield Piece::Failed(Failure::Fatal(self.scrub(&why)));
                        return;
                    }
                }
            }
        }
    }
}

/// Tool calls being streamed, by `index`: the first delta of a call names its id and
/// function, later ones add pieces of its arguments.
type ToolCalls = std::collections::BTreeMap<u64, harness_workflow::ToolCall>;

/// The events of one `data:` chunk: its text delta and its usage, if any; its tool call
/// deltas go into `calls`.
fn chunk_events(data: &str, calls: &mut ToolCalls) -> Result<Vec<ModelEvent>, String> {
    let chunk: Value = serde_json::from_str(data)
        .map_err(|e| format!("a malformed stream: a chunk that is not JSON ({e}): {data}"))?;
    if let Some(error) = chunk.get("error") {
        return Err(format!("the stream reported an error: {}", error_text(&error.to_string())));
    }
    let mut out = Vec::new();
    let choices = chunk.get("choices").and_then(Value::as_array);
    if let Some(content) = choices.and_then(|c| c.first()).and_then(|c| c["delta"]["content"].as_str())
        && !content.is_empty()
    {
        out.push(ModelEvent::Text(content.to_string()));
    }
    let deltas = choices.and_then(|c| c.first()).and_then(|c| c["delta"]["tool_calls"].as_array());
    for delta in deltas.into_iter().flatten() {
        let index = delta["index"].as_u64().unwrap_or(calls.len() as u64);
        let call = calls.entry(index).or_default();
        if let Some(id) = delta["id"].as_str().filter(|id| !id.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) = delta["function"]["name"].as_str() {
            call.name.push_str(name);
        }
        if let Some(piece) = delta["function"]["arguments"].as_str() {
            call.arguments.push_str(piece);
        }
        if call.id.is_empty() {
            call.id = format!("call-{index}");
        }
    }
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        out.push(ModelEvent::Usage(TokenUsage {
            prompt_tokens: n(&usage["prompt_tokens"]),
            completion_tokens: n(&usage["completion_tokens"]),
            reasoning_tokens: n(&usage["completion_tokens_details"]["reasoning_tokens"]),
        }));
    }
    if choices.is_none() && out.is_empty() {
        return Err(format!("a malformed stream: a chunk with neither `choices` nor `usage`: {data}"));
    }
    Ok(out)
}

/// The endpoint's own words in an error body: `error.message` (OpenAI and most servers),
/// `error` as a string, `message` or `detail`; else the body itself.
fn error_text(body: &str) -> String {
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

#[async_trait::async_trait]
impl ModelProvider for OpenAiModel {
    fn history_window(&self) -> Option<usize> {
        Some(self.settings.history_messages.max(1))
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let body = Arc::new(self.body(&request));
        let me = Arc::new(self.clone());
        let max = self.settings.max_attempts.max(1);
        let stream = async_stream::stream! {
            let mut n = 1;
            loop {
                let mut streamed = false;
                let mut attempt = std::pin::pin!(me.clone().attempt(body.clone()));
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
                        yield Err(ModelError { message: format!("{}: {why}", me.who()), retryable: false });
                        return;
                    }
                    None => ("the stream ended before [DONE]".to_string(), None),
                };
                if n >= max {
                    let message = format!("{}: gave up after {n} attempts: {why}", me.who());
                    yield Err(ModelError { message, retryable: false });
                    return;
                }
                tracing::warn!(model = %me.settings.name, attempt = n, reason = %why, "retrying the model request");
                if streamed {
                    yield Ok(ModelEvent::Restart { reason: format!("attempt {n} failed: {why}") });
                }
                tokio::time::sleep(backoff(n, after)).await;
                n += 1;
            }
        };
        Ok(stream.boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(events: Vec<ModelEvent>) -> Vec<String> {
        events.into_iter().filter_map(|e| if let ModelEvent::Text(t) = e { Some(t) } else { None }).collect()
    }

    fn settings() -> OpenAiSettings {
        OpenAiSettings {
            name: "gpt".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "gpt-test".into(),
            api_key: None,
            temperature: None,
            max_output_tokens: None,
            reasoning_effort: None,
            request_timeout: Duration::from_secs(5),
            headers: vec![],
            max_attempts: 1,
            history_messages: 50,
            history_tokens: 8000,
            instructions: Some("Be brief.".into()),
        }
    }

    /// Issue 29: streamed tool calls are assembled by index, their arguments split across
    /// chunks, several calls in one response; an id the stream left out is made up.
    #[test]
    fn tool_call_deltas_are_assembled_by_index_across_chunks() {
        let mut calls = ToolCalls::new();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"clock","arguments":"{\"tz\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}},{"index":1,"function":{"arguments":"\"UTC\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"name":"noid","arguments":"{}"}}]}}]}"#,
        ];
        for c in chunks {
            assert!(chunk_events(c, &mut calls).unwrap().is_empty(), "a tool delta is no text");
        }
        let got: Vec<_> = calls.into_values().map(|c| (c.id, c.name, c.arguments)).collect();
        assert_eq!(
            got,
            [
                ("call_a".to_string(), "weather".to_string(), r#"{"city": "Oslo"}"#.to_string()),
                ("call_b".into(), "clock".into(), r#"{"tz":"UTC"}"#.into()),
                ("call-2".into(), "noid".into(), "{}".into()),
            ]
        );
    }

    /// Issue 29: the model gets the tools and, after the conversation, each round's calls
    /// and their results in order.
    #[test]
    fn the_body_offers_the_tools_and_replays_the_turns_tool_rounds() {
        let model = OpenAiModel::new(settings()).unwrap();
        let call = |id: &str| harness_workflow::ToolCall {
            id: id.into(),
            name: "weather".into(),
            arguments: r#"{"city":"Oslo"}"#.into(),
            idempotent: true,
        };
        let result = |id: &str, content: &str| harness_workflow::ToolResult {
            call_id: id.into(),
            name: "weather".into(),
            content: content.into(),
            ..Default::default()
        };
        let request = ModelRequest {
            history: vec![Message {
                role: Role::User,
                parts: vec![a2a_types::Part::text("weather?")],
                ..Default::default()
            }],
            turn: 1,
            reasoning_effort: None,
            tools: vec![crate::tools::ToolSpec {
                name: "weather".into(),
                description: "The weather of a city".into(),
                input_schema: json!({"type": "object"}),
            }],
            exchanges: vec![harness_workflow::ToolRound {
                text: String::new(),
                calls: vec![call("a"), call("b")],
                results: vec![result("a", "sun"), result("b", "rain")],
            }],
        };
        let body = model.body(&request);
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
        assert_eq!(messages[2]["tool_calls"][1]["id"], "b");
        assert_eq!(messages[2]["content"], Value::Null);
        assert_eq!((messages[3]["tool_call_id"].as_str(), messages[4]["content"].as_str()), (Some("a"), Some("rain")));
        assert_eq!(body["tools"][0]["function"]["name"], "weather");
        assert_eq!(body["tools"][0]["function"]["parameters"], json!({"type": "object"}));
        let plain = ModelRequest { tools: Vec::new(), exchanges: Vec::new(), ..request };
        assert!(model.body(&plain).get("tools").is_none(), "no tools, no `tools`");
    }

    #[test]
    fn a_chunk_gives_its_delta_and_its_usage_and_a_bad_one_is_named() {
        let delta = r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#;
        assert_eq!(text_of(chunk_events(delta, &mut ToolCalls::new()).unwrap()), ["Hel"]);
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":1}}}"#;
        assert_eq!(
            chunk_events(usage, &mut ToolCalls::new()).unwrap(),
            [ModelEvent::Usage(TokenUsage { prompt_tokens: 9, completion_tokens: 3, reasoning_tokens: 1 })]
        );
        let role_only = r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#;
        assert!(chunk_events(role_only, &mut ToolCalls::new()).unwrap().is_empty());
        assert!(
            chunk_events("{not json", &mut ToolCalls::new())
                .unwrap_err()
                .starts_with("a malformed stream: a chunk that is not JSON")
        );
        assert!(
            chunk_events(r#"{"object":"x"}"#, &mut ToolCalls::new())
                .unwrap_err()
                .contains("neither `choices` nor `usage`")
        );
    }

    #[test]
    fn error_bodies_give_the_endpoints_own_words() {
        assert_eq!(
            error_text(r#"{"error":{"message":"Invalid model","type":"invalid_request_error"}}"#),
            "Invalid model"
        );
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
    fn the_body_puts_the_instructions_first_and_maps_the_roles() {
        let settings = OpenAiSettings {
            name: "gpt".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "gpt-test".into(),
            api_key: Some("sk-secret".into()),
            temperature: Some(0.2),
            max_output_tokens: Some(64),
            reasoning_effort: None,
            request_timeout: Duration::from_secs(5),
            headers: vec![],
            max_attempts: 3,
            history_messages: 50,
            history_tokens: 8000,
            instructions: Some("Be brief.".into()),
        };
        let model = OpenAiModel::new(settings).unwrap();
        let user = Message { role: Role::User, parts: vec![a2a_types::Part::text("hi")], ..Default::default() };
        let body = model.conversation_body(&[user, Message::agent_text("r", "hello")], None);
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "Be brief."}));
        assert_eq!(body["messages"][1], json!({"role": "user", "content": "hi"}));
        assert_eq!(body["messages"][2], json!({"role": "assistant", "content": "hello"}));
        assert_eq!((body["stream"].clone(), body["max_completion_tokens"].clone()), (json!(true), json!(64)));
        assert_eq!(model.scrub("bad key sk-secret given"), "bad key [REDACTED] given");

        // Two participants: each user message is framed with its sender.
        let from = |id: &str, text: &str| {
            let mut m = Message { role: Role::User, parts: vec![a2a_types::Part::text(text)], ..Default::default() };
            let channel = json!({"channel_id": "t", "sender": id});
            m.metadata = Some([(crate::channel_ext_key(), channel)].into_iter().collect());
            m
        };
        let body = model.conversation_body(&[from("alice", "hi"), from("bob", "hello")], None);
        assert_eq!(body["messages"][1]["content"], "[alice] hi");
        assert_eq!(body["messages"][2]["content"], "[bob] hello");
        let body = model.conversation_body(&[from("alice", "hi"), from("alice", "again")], None);
        assert_eq!(body["messages"][2]["content"], "again", "one speaker: no framing");
    }
}
