//! A local endpoint that speaks Anthropic's Messages API wire format, streamed (issue 29):
//! `POST /v1/messages` answered with typed SSE events (`message_start`,
//! `content_block_start`, `ping`, `content_block_delta` with `text_delta` or
//! `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`), or an error
//! body `{"type":"error","error":{...}}` with its status. It checks what the API checks that a
//! provider could get wrong: `anthropic-version` present, `max_tokens` set,
//! roles alternating from a user message, every `tool_result` answering a `tool_use` of the
//! message before (a 400 naming the problem otherwise).
//!
//! What it does is chosen by the newest user text:
//!
//! | text | answer |
//! |---|---|
//! | (none of below) | "Hello", " from", " claude" |
//! | `overloaded` | 529 `overloaded_error` the first time, then the default |
//! | `unauthorized` | 401 whose error text quotes the key it was given |
//! | lines `@call <tool> <json>` | first round: the calls as `tool_use` blocks (after a text block, each input in three `input_json_delta` pieces), stop reason `tool_use`; a later round: `Tools said: ` and the newest `tool_result` contents joined by ` | ` (an error result prefixed `error: `) |

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// One request the endpoint got.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    /// `x-api-key`, else the bearer token of `authorization`.
    pub api_key: Option<String>,
    pub version: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    seen: Mutex<Vec<SeenRequest>>,
    overloaded: Mutex<std::collections::HashSet<String>>,
}

/// A running mock endpoint.
#[derive(Clone)]
pub struct MockAnthropic {
    /// The base URL as the official SDKs take it (no `/v1`).
    pub base_url: String,
    shared: Arc<Shared>,
}

impl MockAnthropic {
    /// Starts the endpoint on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new().route("/v1/messages", axum::routing::post(messages)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base_url: format!("http://{addr}"), shared }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.shared.seen.lock().unwrap().clone()
    }
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

/// A message's blocks (a string content is one text block).
fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

/// What the real API refuses that a provider could get wrong; `None` when the request is
/// well formed.
fn refusal(headers: &HeaderMap, body: &Value) -> Option<String> {
    if headers.get("anthropic-version").is_none() {
        return Some("anthropic-version: header is required".into());
    }
    if !body["max_tokens"].is_u64() {
        return Some("max_tokens: Field required".into());
    }
    let messages = body["messages"].as_array()?;
    if messages.first().is_none_or(|m| m["role"] != "user") {
        return Some("messages: the first message must use the \"user\" role".into());
    }
    for (i, pair) in messages.windows(2).enumerate() {
        if pair[0]["role"] == pair[1]["role"] {
            return Some(format!("messages.{}: roles must alternate between \"user\" and \"assistant\"", i + 1));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let asked: Vec<Value> = if i == 0 {
            Vec::new()
        } else {
            blocks(&messages[i - 1]).into_iter().filter(|b| b["type"] == "tool_use").map(|b| b["id"].clone()).collect()
        };
        for b in blocks(m) {
            if b["type"] == "tool_result" && !asked.contains(&b["tool_use_id"]) {
                return Some(format!(
                    "messages.{i}: tool_result block(s) provided when previous message does not contain tool_use {}",
                    b["tool_use_id"]
                ));
            }
            if b["type"] == "text" && b["text"].as_str().is_none_or(str::is_empty) {
                return Some(format!("messages.{i}: text content blocks must be non-empty"));
            }
        }
    }
    None
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A streamed answer of these blocks (text, or tool_use with its input text).
fn answer(texts: &[&str], calls: &[(String, String, String)], stop_reason: &str) -> String {
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_mock", "type": "message", "role": "assistant",
            "model": "claude-mock", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 30, "output_tokens": 1}}}),
    );
    out.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    out.push_str(&event("ping", json!({"type": "ping"})));
    for t in texts {
        out.push_str(&event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        ));
    }
    out.push_str(&event("content_block_stop", json!({"type": "content_block_stop", "index": 0})));
    for (i, (id, name, input)) in calls.iter().enumerate() {
        let index = i + 1;
        out.push_str(&event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        let chars: Vec<char> = input.chars().collect();
        for piece in chars.chunks(chars.len().div_ceil(3).max(1)) {
            let piece: String = piece.iter().collect();
            out.push_str(&event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        out.push_str(&event("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    out.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 7}}),
    ));
    out.push_str(&event("message_stop", json!({"type": "message_stop"})));
    out
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(String::from);
    // The key as `x-api-key` (the API's documented header), or as a bearer token (what the
    // official Python SDK 2.x sends).
    let bearer = header("authorization").and_then(|a| a.strip_prefix("Bearer ").map(String::from));
    let api_key = header("x-api-key").or(bearer);
    shared.seen.lock().unwrap().push(SeenRequest {
        api_key: api_key.clone(),
        version: header("anthropic-version"),
        body: body.clone(),
    });
    if let Some(why) = refusal(&headers, &body) {
        return error(400, "invalid_request_error", &why);
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    // The newest user text, and the rounds of tool use since it.
    let user_text_at = messages
        .iter()
        .rposition(|m| m["role"] == "user" && blocks(m).iter().any(|b| b["type"] == "text"))
        .unwrap_or(0);
    let last_user: String = blocks(&messages[user_text_at])
        .iter()
        .filter_map(|b| b["text"].as_str().map(String::from))
        .collect::<Vec<_>>()
        .join("\n");
    let rounds = messages[user_text_at..]
        .iter()
        .filter(|m| m["role"] == "assistant" && blocks(m).iter().any(|b| b["type"] == "tool_use"))
        .count();
    if last_user.contains("unauthorized") {
        let key = api_key.unwrap_or_default();
        return error(401, "authentication_error", &format!("invalid x-api-key: {key}"));
    }
    if last_user.contains("overloaded") && shared.overloaded.lock().unwrap().insert(last_user.clone()) {
        return error(529, "overloaded_error", "Overloaded");
    }
    let text = if body.get("tools").is_some() && last_user.contains("@call") && rounds == 0 {
        let calls: Vec<(String, String, String)> = last_user
            .lines()
            .filter_map(|l| l.trim().strip_prefix("@call "))
            .filter_map(|l| l.split_once(' '))
            .enumerate()
            .map(|(i, (name, input))| (format!("toolu_{i}"), name.to_string(), input.trim().to_string()))
            .collect();
        answer(&["Let me check."], &calls, "tool_use")
    } else if rounds > 0 {
        let results = blocks(messages.last().unwrap_or(&Value::Null));
        let said: Vec<String> = results
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                let content = match &b["content"] {
                    Value::String(s) => s.clone(),
                    other => blocks(&json!({"content": other})).iter().filter_map(|x| x["text"].as_str()).collect(),
                };
                if b["is_error"] == true { format!("error: {content}") } else { content }
            })
            .collect();
        answer(&["Tools said: ", &said.join(" | ")], &[], "end_turn")
    } else {
        answer(&["Hello", " from", " claude"], &[], "end_turn")
    };
    let mut r = Response::new(axum::body::Body::from(text));
    r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    r
}
