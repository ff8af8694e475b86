//! `anthropic`: Anthropic's Messages API (`POST {base_url}/v1/messages`, `x-api-key`,
//! `anthropic-version`), streamed: `message_start`, `content_block_start` /
//! `content_block_delta` / `content_block_stop` (text as `text_delta`, a `tool_use` block's
//! input as `input_json_delta` pieces), `message_delta` (stop reason, output tokens) and
//! `message_stop`; `ping` and event types this build does not know are skipped, as the API
//! asks. The turn's tool rounds go back as `tool_use` blocks and `tool_result` blocks.
//! Attempts, retries and error texts are [`super::streaming`]'s (an `overloaded_error` in
//! the stream is retried like a 529).

use super::streaming::{self, Decoder, Endpoint, Failure, Step};
use super::{DeltaStream, ModelError, ModelEvent, ModelProvider, ModelRequest, TokenUsage};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How one `[models.<name>]` of kind `anthropic` is set up (checked by the config).
#[derive(Clone, Debug, PartialEq)]
pub struct AnthropicSettings {
    /// The config name, for messages.
    pub name: String,
    /// e.g. `https://api.anthropic.com`; requests go to `{base_url}/v1/messages`.
    pub base_url: String,
    pub model: String,
    /// The key (from the environment); `None` for a keyless gateway.
    pub api_key: Option<String>,
    /// `anthropic-version`.
    pub version: String,
    pub temperature: Option<f64>,
    /// `max_tokens`.
    pub max_output_tokens: u32,
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

/// The provider (cheap to clone).
#[derive(Clone)]
pub struct AnthropicModel {
    settings: Arc<AnthropicSettings>,
    endpoint: Arc<Endpoint>,
}

impl AnthropicModel {
    /// A provider for `settings`; the error names what is wrong (a header that is not one).
    pub fn new(settings: AnthropicSettings) -> Result<Self, String> {
        let mut endpoint = Endpoint::new(
            "anthropic",
            &settings.name,
            &settings.base_url,
            "/v1/messages",
            &settings.headers,
            settings.request_timeout,
            settings.max_attempts,
        )?
        .header("anthropic-version", &settings.version, None)?;
        if let Some(key) = &settings.api_key {
            endpoint = endpoint.header("x-api-key", key, Some(key))?;
        }
        Ok(Self { settings: Arc::new(settings), endpoint: Arc::new(endpoint) })
    }

    /// The request body for a turn: the conversation (roles alternating, as the API wants:
    /// a run of one role's messages is one message of several text blocks), then the turn's
    /// tool rounds, and the tools the model may call.
    fn body(&self, request: &ModelRequest) -> Value {
        let s = &self.settings;
        let mut messages: Vec<(bool, Vec<Value>)> = Vec::new();
        let mut add = |agent: bool, block: Value| match messages.last_mut() {
            Some((last, blocks)) if *last == agent => blocks.push(block),
            // The first message is the user's: the agent's words before any are left out.
            None if agent => {}
            _ => messages.push((agent, vec![block])),
        };
        for (agent, text) in streaming::said(&request.history, s.history_tokens) {
            if !text.is_empty() {
                add(agent, json!({"type": "text", "text": text}));
            }
        }
        for round in &request.exchanges {
            if !round.text.is_empty() {
                add(true, json!({"type": "text", "text": round.text}));
            }
            for c in &round.calls {
                // The arguments as the model wrote them; text that is not a JSON object (which
                // the call was refused for) goes back as an empty input.
                let input = serde_json::from_str::<Value>(&c.arguments).ok().filter(Value::is_object);
                add(true, json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input.unwrap_or(json!({}))}));
            }
            for r in &round.results {
                let result = json!({"type": "tool_result", "tool_use_id": r.call_id, "content": r.content,
                    "is_error": r.is_error});
                add(false, result);
            }
        }
        let messages: Vec<Value> = messages
            .into_iter()
            .map(|(agent, content)| json!({"role": if agent { "assistant" } else { "user" }, "content": content}))
            .collect();
        let mut body = json!({
            "model": s.model,
            "max_tokens": s.max_output_tokens,
            "messages": messages,
            "stream": true,
        });
        if let Some(system) = s.instructions.as_deref().filter(|i| !i.is_empty()) {
            body["system"] = json!(system);
        }
        if let Some(t) = s.temperature {
            body["temperature"] = json!(t);
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
                .collect();
            body["tools"] = json!(tools);
        }
        body
    }
}

/// The decoder of one attempt's stream: typed events until `message_stop`.
#[derive(Default)]
struct Events {
    /// `tool_use` blocks being streamed, by their index.
    calls: BTreeMap<u64, harness_workflow::ToolCall>,
    usage: TokenUsage,
}

impl Decoder for Events {
    fn event(&mut self, event: &eventsource_stream::Event) -> Result<Step, Failure> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            Failure::Fatal(format!(
                "a malformed stream: a `{}` event that is not JSON ({e}): {}",
                event.event, event.data
            ))
        })?;
        let kind = data["type"].as_str().unwrap_or(&event.event);
        let index = data["index"].as_u64().unwrap_or_default();
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let u = &data["message"]["usage"];
                let n = |k: &str| u[k].as_u64().unwrap_or(0);
                self.usage.prompt_tokens =
                    n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens");
                self.usage.completion_tokens = n("output_tokens");
            }
            "content_block_start" => {
                let block = &data["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        let call = harness_workflow::ToolCall {
                            id: block["id"].as_str().map_or_else(|| format!("toolu-{index}"), String::from),
                            name: block["name"].as_str().unwrap_or_default().to_string(),
                            ..Default::default()
                        };
                        self.calls.insert(index, call);
                    }
                    Some("text") => out.extend(text(&block["text"])),
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => out.extend(text(&delta["text"])),
                    Some("input_json_delta") => {
                        let piece = delta["partial_json"].as_str().unwrap_or_default();
                        match self.calls.get_mut(&index) {
                            Some(call) => call.arguments.push_str(piece),
                            None => {
                                return Err(Failure::Fatal(format!(
                                    "a malformed stream: an input_json_delta for block {index}, which is no tool_use"
                                )));
                            }
                        }
                    }
                    // Thinking and its signature are the model's own: not part of the reply.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(n) = data["usage"]["output_tokens"].as_u64() {
                    self.usage.completion_tokens = n;
                }
            }
            "message_stop" => {
                let calls = std::mem::take(&mut self.calls).into_values().map(|mut call| {
                    if call.arguments.trim().is_empty() {
                        call.arguments = "{}".into();
                    }
                    ModelEvent::ToolCall(call)
                });
                let mut done: Vec<ModelEvent> = calls.collect();
                done.push(ModelEvent::Usage(self.usage));
                return Ok(Step::Done(done));
            }
            "error" => {
                let why = format!("the stream reported an error: {}", streaming::error_text(&data.to_string()));
                // Overloaded or an API error of the server's: worth another attempt.
                let retry = matches!(data["error"]["type"].as_str(), Some("overloaded_error" | "api_error"));
                return Err(if retry { Failure::Retry { why, after: None } } else { Failure::Fatal(why) });
            }
            // `ping`, `content_block_stop`, and what a later API version adds.
            _ => {}
        }
        Ok(Step::More(out))
    }

    fn end_marker(&self) -> &'static str {
        "message_stop"
    }
}

/// A text delta, unless empty.
fn text(value: &Value) -> Option<ModelEvent> {
    value.as_str().filter(|t| !t.is_empty()).map(|t| ModelEvent::Text(t.to_string()))
}

#[async_trait::async_trait]
impl ModelProvider for AnthropicModel {
    fn gen_ai(&self) -> (&str, &str) {
        ("anthropic", &self.settings.model)
    }

    fn history_window(&self) -> Option<usize> {
        Some(self.settings.history_messages.max(1))
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        Ok(self.endpoint.clone().stream(self.body(&request), || Box::new(Events::default())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::{Message, Role};

    fn settings() -> AnthropicSettings {
        AnthropicSettings {
            name: "claude".into(),
            base_url: "http://127.0.0.1:1".into(),
            model: "claude-test".into(),
            api_key: Some("sk-ant-secret".into()),
            version: "2023-06-01".into(),
            temperature: Some(0.5),
            max_output_tokens: 512,
            request_timeout: Duration::from_secs(5),
            headers: vec![],
            max_attempts: 1,
            history_messages: 50,
            history_tokens: 8000,
            instructions: Some("Be brief.".into()),
        }
    }

    fn decode(events: &[(&str, Value)]) -> Result<(Vec<ModelEvent>, bool), String> {
        let mut d = Events::default();
        let mut out = Vec::new();
        for (name, data) in events {
            let e = eventsource_stream::Event { event: name.to_string(), data: data.to_string(), ..Default::default() };
            match d.event(&e) {
                Ok(Step::More(o)) => out.extend(o),
                Ok(Step::Done(o)) => {
                    out.extend(o);
                    return Ok((out, true));
                }
                Err(Failure::Fatal(why)) => return Err(format!("fatal: {why}")),
                Err(Failure::Retry { why, .. }) => return Err(format!("retry: {why}")),
            }
        }
        Ok((out, false))
    }

    /// Text deltas, a tool_use block whose input comes in pieces, a second with no input,
    /// the usage of message_start and message_delta; pings and unknown events skipped.
    #[test]
    fn a_stream_gives_text_tool_calls_and_usage() {
        let (events, done) = decode(&[
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "usage": {"input_tokens": 20, "cache_read_input_tokens": 5,
                "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "Let me look."}}),
            ),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_a", "name": "weather", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "\"Oslo\"}"}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_b", "name": "clock", "input": {}}}),
            ),
            ("future_event", json!({"type": "future_event"})),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 42}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ])
        .unwrap();
        assert!(done);
        let call = |id: &str, name: &str, arguments: &str| {
            ModelEvent::ToolCall(harness_workflow::ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
                ..Default::default()
            })
        };
        assert_eq!(
            events,
            [
                ModelEvent::Text("Let me look.".into()),
                call("toolu_a", "weather", r#"{"city": "Oslo"}"#),
                call("toolu_b", "clock", "{}"),
                ModelEvent::Usage(TokenUsage { prompt_tokens: 25, completion_tokens: 42, reasoning_tokens: 0 }),
            ]
        );
    }

    #[test]
    fn an_error_event_is_retried_when_overloaded_and_a_bad_event_is_named() {
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(decode(&[("error", overloaded)]).unwrap_err(), "retry: the stream reported an error: Overloaded");
        let invalid = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
        assert_eq!(decode(&[("error", invalid)]).unwrap_err(), "fatal: the stream reported an error: bad");
        let mut d = Events::default();
        let e = eventsource_stream::Event { event: "message_start".into(), data: "{nope".into(), ..Default::default() };
        let Err(Failure::Fatal(why)) = d.event(&e) else { panic!("not JSON is fatal") };
        assert!(why.starts_with("a malformed stream: a `message_start` event that is not JSON"), "{why}");
        let stray = json!({"type": "content_block_delta", "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": "{}"}});
        assert!(decode(&[("content_block_delta", stray)]).unwrap_err().contains("which is no tool_use"));
    }

    /// The body: system apart, roles alternating (the agent's words before the first user
    /// message left out, a run of one role merged), the tool round as tool_use blocks and the
    /// results as tool_result blocks in one user message, the tools with their input schema.
    #[test]
    fn the_body_alternates_roles_and_replays_the_turns_tool_rounds() {
        let model = AnthropicModel::new(settings()).unwrap();
        let user = |t: &str| Message { role: Role::User, parts: vec![a2a_types::Part::text(t)], ..Default::default() };
        let call = |id: &str, args: &str| harness_workflow::ToolCall {
            id: id.into(),
            name: "weather".into(),
            arguments: args.into(),
            idempotent: true,
        };
        let result = |id: &str, content: &str, is_error: bool| harness_workflow::ToolResult {
            call_id: id.into(),
            name: "weather".into(),
            content: content.into(),
            is_error,
            ..Default::default()
        };
        let request = ModelRequest {
            history: vec![Message::agent_text("g", "greeting"), user("hi"), user("weather?")],
            turn: 1,
            reasoning_effort: None,
            tools: vec![crate::tools::ToolSpec {
                name: "weather".into(),
                description: "The weather of a city".into(),
                input_schema: json!({"type": "object"}),
            }],
            exchanges: vec![harness_workflow::ToolRound {
                text: "Looking.".into(),
                calls: vec![call("a", r#"{"city":"Oslo"}"#), call("b", "{not json")],
                results: vec![result("a", "sun", false), result("b", "bad arguments", true)],
            }],
        };
        let body = model.body(&request);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!((body["max_tokens"].clone(), body["stream"].clone()), (json!(512), json!(true)));
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            messages[0]["content"],
            json!([{"type": "text", "text": "hi"}, {"type": "text", "text": "weather?"}])
        );
        assert_eq!(
            messages[1]["content"],
            json!([{"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "a", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "b", "name": "weather", "input": {}}])
        );
        assert_eq!(
            messages[2]["content"],
            json!([{"type": "tool_result", "tool_use_id": "a", "content": "sun", "is_error": false},
                {"type": "tool_result", "tool_use_id": "b", "content": "bad arguments", "is_error": true}])
        );
        assert_eq!(
            body["tools"],
            json!([{"name": "weather", "description": "The weather of a city", "input_schema": {"type": "object"}}])
        );
        let plain = ModelRequest { tools: Vec::new(), exchanges: Vec::new(), ..request };
        assert!(model.body(&plain).get("tools").is_none(), "no tools, no `tools`");
    }
}
