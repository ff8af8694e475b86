//! A small A2A client over real HTTP: JSON-RPC and HTTP+JSON calls, and SSE streams.

use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;

use crate::uuid_like;

/// A JSON-RPC / HTTP+JSON client over real HTTP.
#[derive(Clone)]
pub struct A2AClient {
    http: reqwest::Client,
    pub base: String,
}

/// An HTTP answer: status, content type, JSON body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: Value,
}

/// A JSON-RPC call to the harness at `base` (`A2A-Version: 1.0`) with one extra header,
/// e.g. `("X-Participant-Id", "alice")`; returns the whole response object.
pub async fn rpc_as(base: &str, header: Option<(&str, &str)>, method: &str, params: Value) -> Value {
    let mut r = reqwest::Client::new().post(format!("{base}/a2a/jsonrpc")).header("A2A-Version", "1.0");
    if let Some((name, value)) = header {
        r = r.header(name, value);
    }
    r.body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
        .send()
        .await
        .expect("rpc")
        .json()
        .await
        .expect("a JSON-RPC response")
}

/// A user message with one text part.
/// A message from `who` (named in its metadata, `participant_id`) to `task` when given, with
/// these parts.
pub fn message_from(who: Option<&str>, task: Option<&str>, parts: Value) -> Value {
    let mut m = user_text("");
    m["parts"] = parts;
    if let Some(who) = who {
        m["metadata"] = serde_json::json!({"participant_id": who});
    }
    if let Some(task) = task {
        m["taskId"] = serde_json::json!(task);
    }
    m
}

pub fn user_text(text: &str) -> Value {
    json!({"messageId": format!("m-{}", uuid_like()), "role": "ROLE_USER", "parts": [{"text": text}]})
}

impl A2AClient {
    pub fn new(base: &str) -> Self {
        Self {
            http: reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client"),
            base: base.to_string(),
        }
    }

    async fn answer(r: reqwest::Response) -> Answer {
        let status = r.status().as_u16();
        let content_type = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let text = r.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer { status, content_type, body }
    }

    /// A JSON-RPC call with `A2A-Version: 1.0`; returns the whole response object.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.rpc_raw(body.to_string()).await.body
    }

    /// Posts a raw JSON-RPC body.
    pub async fn rpc_raw(&self, body: String) -> Answer {
        let r = self
            .http
            .post(format!("{}/a2a/jsonrpc", self.base))
            .header("A2A-Version", "1.0")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("rpc");
        Self::answer(r).await
    }

    /// A REST call with `A2A-Version: 1.0`.
    pub async fn rest(&self, method: reqwest::Method, path: &str, body: Option<String>) -> Answer {
        let mut req = self.http.request(method, format!("{}/a2a/rest{path}", self.base)).header("A2A-Version", "1.0");
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        Self::answer(req.send().await.expect("rest")).await
    }

    /// SendMessage over JSON-RPC, blocking unless `configuration` says otherwise.
    pub async fn send(&self, message: Value, configuration: Value) -> Value {
        self.rpc("SendMessage", json!({"message": message, "configuration": configuration})).await
    }

    /// Opens an SSE stream (REST when `rpc_method` is None, else JSON-RPC) and returns its
    /// events as they arrive; JSON-RPC events are unwrapped to their `result`.
    pub async fn open_stream(&self, rest_path: &str, rpc_method: Option<&str>, body: Value) -> SseEvents {
        self.open_stream_with(rest_path, rpc_method, body, &[]).await
    }

    /// [`Self::open_stream`] with extra request headers (e.g. `Last-Event-ID`).
    pub async fn open_stream_with(
        &self,
        rest_path: &str,
        rpc_method: Option<&str>,
        body: Value,
        headers: &[(&str, &str)],
    ) -> SseEvents {
        let mut req = match rpc_method {
            None => self.http.post(format!("{}/a2a/rest{rest_path}", self.base)).body(body.to_string()),
            Some(m) => self
                .http
                .post(format!("{}/a2a/jsonrpc", self.base))
                .body(json!({"jsonrpc": "2.0", "id": 7, "method": m, "params": body}).to_string()),
        };
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let r =
            req.header("A2A-Version", "1.0").header("content-type", "application/json").send().await.expect("stream");
        let status = r.status().as_u16();
        let content_type = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        SseEvents {
            status,
            content_type,
            rpc: rpc_method.is_some(),
            bytes: r.bytes_stream().map(|c| c.map(|b| b.to_vec())).boxed(),
            buffer: Vec::new(),
            last_id: None,
        }
    }

    /// Streams a message over REST and collects every event until the stream closes.
    pub async fn stream_message(&self, message: Value) -> Vec<Value> {
        let mut s = self.open_stream("/message:stream", None, json!({"message": message})).await;
        assert_eq!(s.status, 200, "stream refused");
        s.collect_all().await
    }
}

/// Events of an open SSE response.
pub struct SseEvents {
    pub status: u16,
    pub content_type: String,
    rpc: bool,
    bytes: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: Vec<u8>,
    /// The `id:` of the last event returned (`None` when it had none).
    pub last_id: Option<String>,
}

impl SseEvents {
    /// The next event (`data:` JSON), `None` when the stream closed. Panics after 30 s.
    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(Duration::from_secs(30), self.next_inner()).await.expect("no SSE event within 30 s")
    }

    async fn next_inner(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let frame = String::from_utf8_lossy(&self.buffer.drain(..end + 2).collect::<Vec<u8>>()).into_owned();
                let data: String = frame.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                if data.is_empty() {
                    continue;
                }
                self.last_id = frame.lines().find_map(|l| l.strip_prefix("id:")).map(|v| v.trim().to_string());
                let v: Value = serde_json::from_str(&data).expect("SSE data is JSON");
                if self.rpc {
                    return Some(v.get("result").cloned().unwrap_or(v));
                }
                return Some(v);
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// Every remaining event until the stream closes.
    pub async fn collect_all(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// The kind of a stream event (`task`, `statusUpdate`, ...).
pub fn kind(event: &Value) -> &str {
    event.as_object().and_then(|o| o.keys().next()).map(String::as_str).unwrap_or("")
}

/// The state a stream event carries, if any.
pub fn state(event: &Value) -> Option<&str> {
    event.get("task").or_else(|| event.get("statusUpdate")).and_then(|e| e["status"]["state"].as_str())
}

/// The task id of a stream's first (Task) event.
pub fn task_id(events: &[Value]) -> String {
    events[0]["task"]["id"].as_str().expect("first event is a Task").to_string()
}
