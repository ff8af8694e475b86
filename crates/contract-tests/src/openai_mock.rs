//! A local OpenAI-compatible Chat Completions endpoint for tests and the bench (issue 17).
//! It speaks the real wire format: `POST /v1/chat/completions` answered with SSE `data:`
//! chunks carrying `choices[].delta.content`, a usage chunk and `data: [DONE]`, or an error
//! body with its status. What it does is chosen by a word in the newest user message:
//!
//! | word | answer |
//! |---|---|
//! | (none) | "Hello", " from", " the", " mock" then usage and `[DONE]` |
//! | `gated` | the first chunk, then waits for [`MockOpenAi::release`] before the rest |
//! | `slow` | ten chunks "w0 ".."w9 " 300 ms apart |
//! | `forever` | a chunk every 100 ms for a minute (a cancel must cut it) |
//! | `rate-limited` | 429 with `Retry-After: 1` the first time, then the default |
//! | `flaky` | 500 the first time, then the default |
//! | `cut` | two chunks then the connection closes (no `[DONE]`) the first time, then the default |
//! | `stall` | one chunk then nothing for 30 s the first time, then the default |
//! | `always-500` | 500 every time |
//! | `unauthorized` | 401 whose error text quotes the key it was given |
//! | `bad-request` | 400 with an OpenAI error body |
//! | `malformed` | a chunk that is not JSON |
//!
//! Tool calls (issue 29): a request that offers `tools` whose newest user message has lines
//! `@call <tool> <json arguments>` (framed with a sender, `[alice] @call ...`, too) is answered, in its first round, with those calls streamed
//! as `tool_calls` deltas (all in one response, each call's arguments split across three
//! chunks, ids `call_<round>_<n>`, finish reason `tool_calls`); with `@loop` in the message
//! every round calls them again. A later round answers the text `Tools said: ` and the
//! contents of the newest round's `tool` messages joined by ` | `.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the endpoint got.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    pub at: Instant,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    seen: Mutex<Vec<SeenRequest>>,
    /// Requests per trigger word, for "the first time".
    counts: Mutex<HashMap<String, u32>>,
    release: tokio::sync::Notify,
    /// When a streamed answer's client went away, with the chunks sent by then.
    dropped: Mutex<Vec<(Instant, u32)>>,
    /// When each answer wrote its first chunk (the bench's endpoint side).
    first_bytes: Mutex<Vec<(Instant, Instant)>>,
    /// Delay before the first chunk of a default answer.
    first_delay: Mutex<Duration>,
}

/// A running mock endpoint.
#[derive(Clone)]
pub struct MockOpenAi {
    pub base_url: String,
    shared: Arc<Shared>,
}

impl MockOpenAi {
    /// An in-process harness's config whose model `gpt` is this endpoint (the `openai`
    /// provider, keyless), on the test dev server under a task queue of its own, port 0.
    pub fn harness_config(&self, dir: &std::path::Path, queue: &str) -> tiny_harness::Config {
        let mut c = tiny_harness::Config::with_data_dir(dir);
        c.temporal.mode = tiny_harness::TemporalMode::Remote;
        c.temporal.address = crate::temporal_address().to_string();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        c.temporal.task_queue = format!("{queue}-{nanos:x}");
        c.server.port = 0;
        let table: toml::Table = toml::from_str(&format!(
            "kind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
            self.base_url
        ))
        .expect("the model's table");
        c.models.named.insert("gpt".into(), table);
        c.agent.model = "gpt".into();
        c
    }

    /// Starts the endpoint on a free port of 127.0.0.1 (its base URL ends in `/v1`).
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(completions))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base_url: format!("http://{addr}/v1"), shared }
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Lets a `gated` answer go on.
    pub fn release(&self) {
        // Wakes the answers that wait now; no permit is left for a later one.
        self.shared.release.notify_waiters();
    }

    /// When streamed answers found their client gone, with the chunks sent by then.
    pub fn dropped(&self) -> Vec<(Instant, u32)> {
        self.shared.dropped.lock().unwrap().clone()
    }

    /// For each answer: when its request arrived and when it wrote its first chunk.
    pub fn first_bytes(&self) -> Vec<(Instant, Instant)> {
        self.shared.first_bytes.lock().unwrap().clone()
    }

    /// Waits this long before the first chunk of a default answer (the endpoint's own time
    /// to first byte).
    pub fn set_first_delay(&self, delay: Duration) {
        *self.shared.first_delay.lock().unwrap() = delay;
    }
}

const WORDS: &[&str] = &[
    "gated",
    "slow",
    "forever",
    "rate-limited",
    "flaky",
    "cut",
    "stall",
    "always-500",
    "unauthorized",
    "bad-request",
    "malformed",
];

fn chunk(text: &str) -> String {
    let c = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    format!("data: {c}\n\n")
}

fn usage() -> String {
    let c = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock", "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
                  "completion_tokens_details": {"reasoning_tokens": 1}}});
    format!("data: {c}\n\ndata: [DONE]\n\n")
}

/// The answer to a request that offers tools (see the module's table).
fn tool_answer(body: &Value, last_user: &str) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let since_user = messages.iter().rposition(|m| m["role"] == "user").map_or(0, |i| i + 1);
    let rounds = messages[since_user..].iter().filter(|m| m["tool_calls"].is_array()).count();
    let frame = |delta: Value, finish: Value| {
        let c = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": "mock",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    if rounds == 0 || last_user.contains("@loop") {
        let calls: Vec<(String, String)> = last_user
            .lines()
            // A line may be framed with its sender (`[alice] @call ...`).
            .filter_map(|l| {
                let l = l.trim();
                let l = l.strip_prefix('[').and_then(|r| r.split_once("] ")).map_or(l, |(_, rest)| rest);
                l.strip_prefix("@call ")
            })
            .filter_map(|l| l.split_once(' ').map(|(n, a)| (n.to_string(), a.trim().to_string())))
            .collect();
        let mut out = frame(json!({"role": "assistant", "content": null}), Value::Null);
        for (i, (name, _)) in calls.iter().enumerate() {
            let head = json!({"index": i, "id": format!("call_{rounds}_{i}"), "type": "function",
                "function": {"name": name, "arguments": ""}});
            out.push_str(&frame(json!({"tool_calls": [head]}), Value::Null));
        }
        // The arguments in three pieces each, the calls' pieces interleaved.
        let pieces = |a: &str| {
            let chars: Vec<char> = a.chars().collect();
            let third = chars.len().div_ceil(3).max(1);
            chars.chunks(third).map(|c| c.iter().collect::<String>()).collect::<Vec<_>>()
        };
        let split: Vec<Vec<String>> = calls.iter().map(|(_, a)| pieces(a)).collect();
        for k in 0..3 {
            for (i, p) in split.iter().enumerate() {
                if let Some(piece) = p.get(k) {
                    let d = json!({"index": i, "function": {"arguments": piece}});
                    out.push_str(&frame(json!({"tool_calls": [d]}), Value::Null));
                }
            }
        }
        out.push_str(&frame(json!({}), json!("tool_calls")));
        out.push_str(&usage());
        return out;
    }
    let last_round = messages.iter().rposition(|m| m["tool_calls"].is_array()).unwrap_or(0);
    let said: Vec<&str> =
        messages[last_round..].iter().filter(|m| m["role"] == "tool").filter_map(|m| m["content"].as_str()).collect();
    let mut out = chunk("Tools said: ");
    out.push_str(&chunk(&said.join(" | ")));
    out.push_str(&usage());
    out
}

fn error(status: StatusCode, message: &str, headers: &[(&'static str, &str)]) -> Response {
    let body = json!({"error": {"message": message, "type": "invalid_request_error", "code": null}});
    let mut r = (status, axum::Json(body)).into_response();
    for (k, v) in headers {
        r.headers_mut().insert(*k, v.parse().unwrap());
    }
    r
}

/// What the answer sends: chunks with a pause before each, then whether it ends properly.
enum Script {
    Chunks { chunks: Vec<(Duration, String)>, end: End },
    Gated,
}

enum End {
    Done,
    Cut,
    Stall,
}

async fn completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let at = Instant::now();
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(String::from);
    shared.seen.lock().unwrap().push(SeenRequest { at, authorization: authorization.clone(), body: body.clone() });
    let last_user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    if body.get("tools").is_some() && last_user.contains("@call") {
        return sse(Body::from(tool_answer(&body, &last_user)));
    }
    let word = WORDS.iter().copied().find(|w| last_user.contains(w)).unwrap_or("");
    let first = {
        let mut counts = shared.counts.lock().unwrap();
        let n = counts.entry(format!("{word}:{last_user}")).or_default();
        *n += 1;
        *n == 1
    };
    let first_delay = *shared.first_delay.lock().unwrap();
    match script(word, first, first_delay, authorization.as_deref()) {
        Ok(script) => sse(Body::from_stream(tokio_stream_of(play(shared, at, script)))),
        Err(answer) => *answer,
    }
}

/// What to answer for a trigger word (`first`: its first request): a script to stream, or
/// an answer at once.
fn script(
    word: &str,
    first: bool,
    first_delay: Duration,
    authorization: Option<&str>,
) -> Result<Script, Box<Response>> {
    let ms = Duration::from_millis;
    Ok(match word {
        "rate-limited" if first => {
            return Err(Box::new(error(StatusCode::TOO_MANY_REQUESTS, "Rate limit reached", &[("retry-after", "1")])));
        }
        "flaky" if first => {
            return Err(Box::new(error(StatusCode::INTERNAL_SERVER_ERROR, "The server had an error", &[])));
        }
        "always-500" => return Err(Box::new(error(StatusCode::INTERNAL_SERVER_ERROR, "The server is down", &[]))),
        "unauthorized" => {
            let key = authorization.unwrap_or("").trim_start_matches("Bearer ");
            return Err(Box::new(error(StatusCode::UNAUTHORIZED, &format!("Incorrect API key provided: {key}"), &[])));
        }
        "bad-request" => {
            return Err(Box::new(error(StatusCode::BAD_REQUEST, "Invalid value for 'model': no such model", &[])));
        }
        "malformed" => return Err(Box::new(sse(Body::from(format!("{}data: {{this is not json\n\n", chunk("Hel")))))),
        "gated" => Script::Gated,
        "slow" => Script::Chunks { chunks: (0..10).map(|i| (ms(300), format!("w{i} "))).collect(), end: End::Done },
        "forever" => Script::Chunks { chunks: (0..600).map(|i| (ms(100), format!("f{i} "))).collect(), end: End::Done },
        "cut" if first => {
            Script::Chunks { chunks: vec![(ms(5), "Half ".into()), (ms(5), "a reply".into())], end: End::Cut }
        }
        "stall" if first => Script::Chunks { chunks: vec![(ms(5), "Stalled ".into())], end: End::Stall },
        _ => {
            let words = ["Hello", " from", " the", " mock"];
            let chunks =
                words.iter().enumerate().map(|(i, w)| (if i == 0 { first_delay } else { ms(5) }, w.to_string()));
            Script::Chunks { chunks: chunks.collect(), end: End::Done }
        }
    })
}

/// Plays a script into a body channel, noting when the first chunk went out and when the
/// client went away.
fn play(
    shared: Arc<Shared>,
    at: Instant,
    script: Script,
) -> tokio::sync::mpsc::Receiver<Result<String, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(4);
    tokio::spawn(async move {
        let send = |text: String| {
            let tx = tx.clone();
            async move { tx.send(Ok(text)).await.is_ok() }
        };
        let gone = |sent: u32| shared.dropped.lock().unwrap().push((Instant::now(), sent));
        let (chunks, end, mut sent) = match script {
            Script::Gated => {
                let released = shared.release.notified();
                if !send(chunk("First words")).await {
                    return gone(0);
                }
                shared.first_bytes.lock().unwrap().push((at, Instant::now()));
                released.await;
                (vec![(Duration::ZERO, ", then the rest.".to_string())], End::Done, 1u32)
            }
            Script::Chunks { chunks, end } => (chunks, end, 0u32),
        };
        for (pause, text) in chunks {
            tokio::time::sleep(pause).await;
            if !send(chunk(&text)).await || tx.is_closed() {
                return gone(sent);
            }
            if sent == 0 {
                shared.first_bytes.lock().unwrap().push((at, Instant::now()));
            }
            sent += 1;
        }
        match end {
            End::Done => {
                let _ = send(usage()).await;
            }
            End::Cut => {
                // What was sent reaches the client before the connection breaks.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = tx.send(Err(std::io::Error::other("cut"))).await;
            }
            End::Stall => tokio::time::sleep(Duration::from_secs(30)).await,
        }
    });
    rx
}

fn sse(body: Body) -> Response {
    let mut r = Response::new(body);
    r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    r
}

/// The receiver as a stream of body pieces.
fn tokio_stream_of(
    rx: tokio::sync::mpsc::Receiver<Result<String, std::io::Error>>,
) -> impl futures::Stream<Item = Result<String, std::io::Error>> {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}
