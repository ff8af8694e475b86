//! The A2A client of delegation (issue 19): the configured remote agents, their cards
//! (fetched, checked, cached with their ETag) and the calls a stand-in makes on a remote
//! task over either binding: SendMessage, GetTask, SubscribeToTask, CancelTask.
//!
//! Only configured agents are ever reached: an agent is named by its configured id, and no
//! URL that comes in a message is fetched.

use crate::{Observation, RemoteCancel, RemoteLook, RemoteSend, RemoteStarted};
use a2a_types::{AgentCard, Message, Part, StreamResponse, Task, TaskState};
use futures::StreamExt;
use sha2::Digest;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// A remote A2A agent this harness may delegate to (`[[agents]]`).
#[derive(Clone, Debug, Default)]
pub struct RemoteAgent {
    pub id: String,
    /// Its agent card's URL.
    pub card_url: String,
    /// Headers every request to it carries (values read from the environment at start).
    pub headers: Vec<(String, String)>,
}

/// The configured remote agents and what this harness knows of them.
pub struct Remotes {
    agents: HashMap<String, RemoteAgent>,
    http: reqwest::Client,
    cards: Mutex<HashMap<String, CachedCard>>,
    /// `public_url + /a2a/push`: where remote agents push; `None` with the push route off,
    /// then remote tasks are followed by subscribing.
    callback_base: Option<String>,
    /// This agent's id: the sender of every brief.
    agent_id: String,
}

#[derive(Clone)]
struct CachedCard {
    etag: Option<String>,
    card: AgentCard,
}

/// The interface of a remote agent's card this harness speaks.
#[derive(Clone, Debug, PartialEq)]
struct Endpoint {
    url: String,
    binding: Binding,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Binding {
    JsonRpc,
    Rest,
}

/// How long one look at a remote task by subscribing lasts before the workflow is
/// answered "nothing new" (and looks again): a bound on an activity's run.
const SUBSCRIBE_FOR: Duration = Duration::from_secs(60);
/// How often a look by subscribing heartbeats.
const HEARTBEAT: Duration = Duration::from_secs(3);
/// How often a remote task that can be neither pushed nor subscribed to is read.
const POLL_EVERY: Duration = Duration::from_secs(2);
/// How long a subscription waits for more of a burst of events before it reads the task.
const BURST: Duration = Duration::from_millis(100);
/// One request to a remote agent.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Remotes {
    pub fn new(agents: Vec<RemoteAgent>, callback_base: Option<String>, agent_id: String) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self {
            agents: agents.into_iter().map(|a| (a.id.clone(), a)).collect(),
            http,
            cards: Mutex::new(HashMap::new()),
            callback_base,
            agent_id,
        }
    }

    /// Fetches and checks every agent's card once (at start): a warning names each agent
    /// whose card cannot be read or offers no interface this harness speaks.
    pub async fn check_cards(&self) {
        for id in self.ids() {
            let Some(agent) = self.agents.get(&id) else { continue };
            match self.card(agent).await {
                Ok(card) => tracing::info!(agent = %id, name = %card.name, "remote agent's card checked"),
                Err(e) => {
                    tracing::warn!(agent = %id, url = %agent.card_url, why = ?e, "remote agent's card not usable (yet): /delegate to it fails until it is")
                }
            }
        }
    }

    /// The configured agent ids, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.agents.keys().cloned().collect();
        ids.sort();
        ids
    }

    fn agent(&self, id: &str) -> Result<&RemoteAgent, ActivityError> {
        self.agents.get(id).ok_or_else(|| {
            fatal(format!("no remote agent `{id}` is configured (configured: {})", self.ids().join(", ")))
        })
    }

    /// The agent's card: fetched with `If-None-Match` when one is cached (a 304 keeps it),
    /// checked to be A2A 1.0 with an interface this harness speaks.
    async fn card(&self, agent: &RemoteAgent) -> Result<AgentCard, ActivityError> {
        let cached = self.cards.lock().expect("cards").get(&agent.id).cloned();
        let mut request = self.request(agent, self.http.get(&agent.card_url));
        if let Some(etag) = cached.as_ref().and_then(|c| c.etag.clone()) {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        let response = request.send().await.map_err(|e| retry(format!("agent `{}`: card: {e}", agent.id)))?;
        if response.status() == reqwest::StatusCode::NOT_MODIFIED
            && let Some(cached) = cached
        {
            return Ok(cached.card);
        }
        if !response.status().is_success() {
            return Err(retry(format!(
                "agent `{}`: its card at {} answered HTTP {}",
                agent.id,
                agent.card_url,
                response.status()
            )));
        }
        let etag = response.headers().get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(String::from);
        let body = response.bytes().await.map_err(|e| retry(format!("agent `{}`: card: {e}", agent.id)))?;
        let card: AgentCard = serde_json::from_slice(&body).map_err(|e| {
            fatal(format!("agent `{}`: the card at {} is not an A2A agent card: {e}", agent.id, agent.card_url))
        })?;
        endpoint(&agent.id, &card)?;
        self.cards.lock().expect("cards").insert(agent.id.clone(), CachedCard { etag, card: card.clone() });
        Ok(card)
    }

    fn request(&self, agent: &RemoteAgent, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (name, value) in &agent.headers {
            request = request.header(name, value);
        }
        // The W3C trace context of the span this runs in (the brief's, when traces are on).
        if let Some(traceparent) = crate::current_traceparent() {
            request = request.header("traceparent", traceparent);
        }
        request.header("A2A-Version", "1.0")
    }

    /// One A2A call; `Ok(Err(error))` is the agent's own A2A error (`{code, message}`).
    async fn call(
        &self,
        agent: &RemoteAgent,
        endpoint: &Endpoint,
        method: &str,
        params: serde_json::Value,
    ) -> Result<Result<serde_json::Value, RemoteError>, ActivityError> {
        let request = match endpoint.binding {
            Binding::JsonRpc => self.http.post(&endpoint.url).json(&serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": method, "params": params,
            })),
            Binding::Rest => {
                let base = endpoint.url.trim_end_matches('/');
                let (verb, path) = a2a_server::Operation::named(method)
                    .and_then(|op| op.rest_request(&params))
                    .ok_or_else(|| fatal(format!("no REST request for {method} with these params")))?;
                match verb {
                    "GET" => self.http.get(format!("{base}{path}")),
                    _ => self.http.post(format!("{base}{path}")).json(&params),
                }
            }
        };
        let response = self
            .request(agent, request)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| retry(format!("agent `{}`: {method}: {e}", agent.id)))?;
        let status = response.status();
        let body: serde_json::Value = response.json().await.unwrap_or(serde_json::Value::Null);
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(retry(format!("agent `{}`: {method}: HTTP {status}", agent.id)));
        }
        Ok(match endpoint.binding {
            Binding::JsonRpc => match (body.get("result"), body.get("error")) {
                (Some(result), _) => Ok(result.clone()),
                (_, Some(error)) => Err(RemoteError::from_json(error)),
                _ => Err(RemoteError { code: 0, message: format!("HTTP {status}: not a JSON-RPC response") }),
            },
            Binding::Rest if status.is_success() => Ok(body),
            Binding::Rest => Err(RemoteError::from_json(body.get("error").unwrap_or(&body))),
        })
    }

    /// `remote_send`: the brief to the agent as a new task's first message (returning at
    /// once), with a push config when the task is followed by push; the remote task as it
    /// is now.
    pub async fn send(&self, input: RemoteSend) -> Result<RemoteStarted, ActivityError> {
        let agent = self.agent(&input.agent)?;
        let card = self.card(agent).await?;
        let endpoint = endpoint(&agent.id, &card)?;
        let pushes = card.capabilities.push_notifications == Some(true);
        let push = match (&self.callback_base, input.push && pushes) {
            (Some(base), true) => Some((format!("{base}/{}", input.stand_in), fresh_token())),
            _ => None,
        };
        let mut message = Message {
            message_id: format!("{}:brief", input.stand_in),
            role: a2a_types::Role::User,
            parts: vec![Part::text(input.brief.clone())],
            ..Default::default()
        };
        message.metadata =
            Some(a2a_types::Struct::from_iter([("participant_id".to_string(), serde_json::json!(self.agent_id))]));
        let mut configuration = serde_json::json!({"returnImmediately": true});
        if let Some((url, token)) = &push {
            configuration["taskPushNotificationConfig"] = serde_json::json!({"url": url, "token": token});
        }
        let params = serde_json::json!({"message": message, "configuration": configuration});
        let result = self
            .call(agent, &endpoint, "SendMessage", params)
            .await?
            .map_err(|e| fatal(format!("agent `{}` refused the brief: {}", agent.id, e.message)))?;
        let (remote_task_id, seen) = match serde_json::from_value::<StreamResponse>(result.clone()) {
            Ok(StreamResponse::Task(task)) => (task.id.clone(), Observation::of(&task)),
            // An agent that answers with a message has answered: the sub-task is done.
            Ok(StreamResponse::Message(m)) => (
                m.task_id.clone(),
                Observation { state: TaskState::Completed, message: Some(m), artifacts: Vec::new() },
            ),
            _ => match serde_json::from_value::<Task>(result) {
                Ok(task) => (task.id.clone(), Observation::of(&task)),
                Err(e) => {
                    return Err(fatal(format!(
                        "agent `{}` answered the brief with neither task nor message: {e}",
                        agent.id
                    )));
                }
            },
        };
        Ok(RemoteStarted {
            remote_task_id,
            agent_url: agent.card_url.clone(),
            token_digest: push.map(|(_, token)| digest(&token)),
            seen,
        })
    }

    /// `remote_observe`: the remote task read once, or (subscribing) the first state that
    /// differs from `seen`, or `seen` again when nothing changed within [`SUBSCRIBE_FOR`].
    pub async fn look(&self, ctx: &ActivityContext, input: RemoteLook) -> Result<Observation, ActivityError> {
        let agent = self.agent(&input.agent)?;
        let card = self.card(agent).await?;
        let endpoint = endpoint(&agent.id, &card)?;
        if input.subscribe && card.capabilities.streaming != Some(false) {
            // `None`: refused (a task that ended is not subscribable): read it.
            if let Some(seen) = self.subscribe(ctx, agent, &endpoint, &input).await? {
                return Ok(seen);
            }
        }
        let mut now = self.get(agent, &endpoint, &input.remote_task_id).await?;
        if input.subscribe {
            // An agent that neither pushes nor streams (or refused the subscription) is read
            // every POLL_EVERY until it changes.
            let deadline = tokio::time::Instant::now() + SUBSCRIBE_FOR;
            while !input.seen.changed(&now) && tokio::time::Instant::now() < deadline {
                tokio::select! {
                    _ = tokio::time::sleep(POLL_EVERY) => {}
                    _ = ctx.cancelled() => return Err(ActivityError::cancelled()),
                }
                let _ = ctx.record_heartbeat(0u32).await;
                now = self.get(agent, &endpoint, &input.remote_task_id).await?;
            }
        }
        Ok(now)
    }

    async fn get(&self, agent: &RemoteAgent, endpoint: &Endpoint, id: &str) -> Result<Observation, ActivityError> {
        let params = serde_json::json!({"id": id});
        let result = self
            .call(agent, endpoint, "GetTask", params)
            .await?
            .map_err(|e| fatal(format!("agent `{}`: GetTask {id}: {}", agent.id, e.message)))?;
        let task: Task = serde_json::from_value(result)
            .map_err(|e| fatal(format!("agent `{}`: GetTask {id} answered no task: {e}", agent.id)))?;
        Ok(Observation::of(&task))
    }

    /// Reads the task, and while it is as `seen`, subscribes: each burst of events wakes a
    /// read, until one differs. (Events only wake: a server may replay its log from the
    /// start, as this harness does, or send the task first; a read is the truth either way.)
    /// `None` when the agent refused the subscription.
    async fn subscribe(
        &self,
        ctx: &ActivityContext,
        agent: &RemoteAgent,
        endpoint: &Endpoint,
        input: &RemoteLook,
    ) -> Result<Option<Observation>, ActivityError> {
        let id = &input.remote_task_id;
        let now = self.get(agent, endpoint, id).await?;
        if input.seen.changed(&now) {
            return Ok(Some(now));
        }
        let request = match endpoint.binding {
            Binding::JsonRpc => self.http.post(&endpoint.url).json(&serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": id},
            })),
            Binding::Rest => {
                let (_, path) = a2a_server::Operation::named("SubscribeToTask")
                    .and_then(|op| op.rest_request(&serde_json::json!({"id": id})))
                    .ok_or_else(|| fatal("no REST request for SubscribeToTask".into()))?;
                self.http.get(format!("{}{path}", endpoint.url.trim_end_matches('/')))
            }
        };
        let response = self
            .request(agent, request)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| retry(format!("agent `{}`: SubscribeToTask: {e}", agent.id)))?;
        let status = response.status();
        if status.is_server_error() {
            return Err(retry(format!("agent `{}`: SubscribeToTask: HTTP {status}", agent.id)));
        }
        let sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !sse {
            return Ok(None);
        }
        let mut events = eventsource_stream::EventStream::new(response.bytes_stream());
        let deadline = tokio::time::Instant::now() + SUBSCRIBE_FOR;
        let mut beat = tokio::time::interval(HEARTBEAT);
        loop {
            let next = tokio::select! {
                next = events.next() => next,
                _ = beat.tick() => {
                    let _ = ctx.record_heartbeat(0u32).await;
                    if tokio::time::Instant::now() >= deadline {
                        return Ok(Some(now));
                    }
                    continue;
                }
                _ = ctx.cancelled() => return Err(ActivityError::cancelled()),
            };
            let Some(event) = next else {
                // A dropped connection: looked at again (the activity is retried).
                return Err(retry(format!("agent `{}`: the subscription to {id} ended", agent.id)));
            };
            let event = event.map_err(|e| retry(format!("agent `{}`: SubscribeToTask: {e}", agent.id)))?;
            if endpoint.binding == Binding::JsonRpc
                && serde_json::from_str::<serde_json::Value>(&event.data).is_ok_and(|v| v.get("error").is_some())
            {
                return Ok(None);
            }
            // The rest of the burst, then one read.
            while let Ok(Some(Ok(_))) = tokio::time::timeout(BURST, events.next()).await {}
            let now = self.get(agent, endpoint, id).await?;
            if input.seen.changed(&now) {
                return Ok(Some(now));
            }
        }
    }

    /// `remote_cancel`: CancelTask; an agent's refusal (the task ended already) is fine.
    pub async fn cancel(&self, input: RemoteCancel) -> Result<(), ActivityError> {
        let agent = self.agent(&input.agent)?;
        let card = self.card(agent).await?;
        let endpoint = endpoint(&agent.id, &card)?;
        let params = serde_json::json!({"id": input.remote_task_id});
        if let Err(e) = self.call(agent, &endpoint, "CancelTask", params).await? {
            tracing::info!(agent = %agent.id, task = %input.remote_task_id, why = %e.message, "remote cancel refused");
        }
        Ok(())
    }
}

/// An A2A error a remote agent answered.
#[derive(Debug)]
struct RemoteError {
    #[allow(dead_code)]
    code: i64,
    message: String,
}

impl RemoteError {
    fn from_json(v: &serde_json::Value) -> Self {
        Self {
            code: v.get("code").and_then(|c| c.as_i64()).unwrap_or_default(),
            message: v.get("message").and_then(|m| m.as_str()).unwrap_or("(no message)").to_string(),
        }
    }
}

/// The interface of `card` this harness speaks: A2A 1.x over JSON-RPC (preferred) or
/// HTTP+JSON.
fn endpoint(agent: &str, card: &AgentCard) -> Result<Endpoint, ActivityError> {
    let v1 = |i: &&a2a_types::AgentInterface| i.protocol_version.starts_with("1.") || i.protocol_version == "1";
    let pick = |binding: &str| {
        card.supported_interfaces.iter().filter(v1).find(|i| i.protocol_binding.eq_ignore_ascii_case(binding))
    };
    let (interface, binding) = match (pick("JSONRPC"), pick("HTTP+JSON")) {
        (Some(i), _) => (i, Binding::JsonRpc),
        (None, Some(i)) => (i, Binding::Rest),
        (None, None) => {
            let offered: Vec<String> = card
                .supported_interfaces
                .iter()
                .map(|i| format!("{} {}", i.protocol_binding, i.protocol_version))
                .collect();
            return Err(fatal(format!(
                "agent `{agent}`'s card offers no A2A 1.0 interface over JSONRPC or HTTP+JSON (it offers: {})",
                if offered.is_empty() { "none".to_string() } else { offered.join(", ") }
            )));
        }
    };
    Ok(Endpoint { url: interface.url.clone(), binding })
}

/// A fresh random push token (32 bytes from the OS, hex).
fn fresh_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source");
    hex(&bytes)
}

/// The hex SHA-256 of a push token: all a stand-in keeps of it.
pub fn digest(token: &str) -> String {
    hex(&sha2::Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn retry(why: String) -> ActivityError {
    ActivityError::application(ApplicationFailure::new(why))
}

fn fatal(why: String) -> ActivityError {
    ActivityError::application(ApplicationFailure::non_retryable(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A card server over a raw socket: answers `card` with an ETag, and 304 to a request
    /// that names it; returns its URL and the requests' `If-None-Match` values.
    async fn card_server(card: serde_json::Value) -> (String, std::sync::Arc<Mutex<Vec<Option<String>>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/.well-known/agent-card.json", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 8192];
                let n = socket.read(&mut buf).await.unwrap();
                let head = String::from_utf8_lossy(&buf[..n]).to_lowercase();
                let tag = head.lines().find_map(|l| l.strip_prefix("if-none-match: ").map(|v| v.trim().to_string()));
                log.lock().unwrap().push(tag.clone());
                let body = card.to_string();
                let answer = if tag.as_deref() == Some("\"v1\"") {
                    "HTTP/1.1 304 Not Modified\r\netag: \"v1\"\r\nconnection: close\r\n\r\n".to_string()
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\netag: \"v1\"\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                socket.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        (url, seen)
    }

    fn remotes(url: &str) -> Remotes {
        let agent = RemoteAgent { id: "peer".into(), card_url: url.into(), headers: Vec::new() };
        Remotes::new(vec![agent], None, "me".into())
    }

    /// Issue 19: a card is fetched once and then revalidated with its ETag; a 304 keeps it.
    #[tokio::test]
    async fn a_card_is_cached_with_its_etag_and_revalidated() {
        let card = serde_json::json!({"name": "peer", "supportedInterfaces": [
            {"url": "http://x/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]});
        let (url, seen) = card_server(card).await;
        let r = remotes(&url);
        let agent = r.agent("peer").unwrap().clone();
        assert_eq!(r.card(&agent).await.unwrap().name, "peer");
        assert_eq!(r.card(&agent).await.unwrap().name, "peer", "the 304 answers with the cached card");
        assert_eq!(*seen.lock().unwrap(), vec![None, Some("\"v1\"".to_string())]);
        let endpoint = endpoint("peer", &r.card(&agent).await.unwrap()).unwrap();
        assert_eq!(endpoint, Endpoint { url: "http://x/a2a/rest".into(), binding: Binding::Rest });
    }

    /// Issue 19: a card with no A2A 1.0 interface this harness speaks is refused naming what
    /// it offers; an unconfigured agent is refused naming the configured ones.
    #[tokio::test]
    async fn a_card_without_a_1_0_interface_and_an_unknown_agent_are_refused_naming_why() {
        let card = serde_json::json!({"name": "old", "supportedInterfaces": [
            {"url": "http://x/", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://x/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]});
        let (url, _) = card_server(card).await;
        let r = remotes(&url);
        let agent = r.agent("peer").unwrap().clone();
        let why = format!("{:?}", r.card(&agent).await.unwrap_err());
        assert!(why.contains("offers no A2A 1.0 interface") && why.contains("GRPC 1.0, JSONRPC 0.3"), "{why}");
        let why = format!("{:?}", r.agent("zed").unwrap_err());
        assert!(why.contains("no remote agent `zed` is configured (configured: peer)"), "{why}");
    }
}
