//! `openai`: any endpoint that speaks the OpenAI Chat Completions API with streaming
//! (OpenAI, vLLM, Ollama, llama.cpp's server, LiteLLM, gateways). The SSE stream is decoded
//! by `eventsource-stream`; each `choices[0].delta.content` is a text delta, and
//! `tool_calls` deltas are assembled by index. Attempts, retries and error texts are
//! [`super::streaming`]'s.

use super::streaming::{self, Decoder, Endpoint, Failure, Step};
use super::{DeltaStream, ModelError, ModelEvent, ModelProvider, ModelRequest, TokenUsage};
use a2a_types::Message;
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
    endpoint: Arc<Endpoint>,
}

impl OpenAiModel {
    /// A provider for `settings`; the error names what is wrong (a header that is not one).
    pub fn new(settings: OpenAiSettings) -> Result<Self, String> {
        let mut endpoint = Endpoint::new(
            "openai",
            &settings.name,
            &settings.base_url,
            "/chat/completions",
            &settings.headers,
            settings.request_timeout,
            settings.max_attempts,
        )?;
        if let Some(key) = &settings.api_key {
            endpoint = endpoint.header("authorization", &format!("Bearer {key}"), Some(key))?;
        }
        Ok(Self { settings: Arc::new(settings), endpoint: Arc::new(endpoint) })
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
        messages.extend(
            streaming::said(history, s.history_tokens)
                .into_iter()
                .map(|(agent, text)| json!({"role": if agent { "assistant" } else { "user" }, "content": text})),
        );
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

/// The decoder of one attempt's stream: `data:` chunks until `data: [DONE]`.
#[derive(Default)]
struct Chunks {
    calls: ToolCalls,
}

impl Decoder for Chunks {
    fn event(&mut self, event: &eventsource_stream::Event) -> Result<Step, Failure> {
        if event.data.trim() == "[DONE]" {
            // The calls the stream assembled, whole, in the order of their indexes.
            let calls = std::mem::take(&mut self.calls).into_values().map(ModelEvent::ToolCall);
            return Ok(Step::Done(calls.collect()));
        }
        chunk_events(&event.data, &mut self.calls).map(Step::More).map_err(Failure::Fatal)
    }

    fn end_marker(&self) -> &'static str {
        "[DONE]"
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
        return Err(format!("the stream reported an error: {}", streaming::error_text(&error.to_string())));
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

#[async_trait::async_trait]
impl ModelProvider for OpenAiModel {
    fn gen_ai(&self) -> (&str, &str) {
        ("openai", &self.settings.model)
    }

    fn history_window(&self) -> Option<usize> {
        Some(self.settings.history_messages.max(1))
    }

    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        Ok(self.endpoint.clone().stream(self.body(&request), || Box::new(Chunks::default())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::Role;

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
        assert_eq!(model.endpoint.scrub("bad key sk-secret given"), "bad key [REDACTED] given");

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
