//! An A2A 1.0 server transport on axum: the JSON-RPC binding (`POST /a2a/jsonrpc`), the
//! HTTP+JSON binding (`/a2a/rest/...`), SSE framing for both, and the agent card route.
//!
//! Owns: parsing, the `A2A-Version` check, error mapping onto each binding, stream framing.
//! Must never: know how a task runs. Everything behind the wire is a [`RequestHandler`].

mod jsonrpc;
pub mod metrics;
mod ops;
mod rest;
mod sse;

pub use ops::{Capability, OPERATIONS, Operation};

mod card;

use a2a_types::{
    A2AError, AgentCard, CancelTaskRequest, ErrorKind, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
    TaskPushNotificationConfigRef,
};
use axum::Router;
use axum::http::HeaderMap;
use futures::stream::BoxStream;
use std::sync::Arc;

/// Path of the JSON-RPC interface.
pub const JSONRPC_PATH: &str = "/a2a/jsonrpc";
/// Base path of the HTTP+JSON interface.
pub const REST_PATH: &str = "/a2a/rest";
/// The agent card.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// A stream of events; an `Err` after the first event ends the stream with an error event.
pub type EventStream = BoxStream<'static, Result<StreamItem, A2AError>>;

/// One item of a stream.
// A comment starts at most one response per stream: boxing every event for it buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum StreamItem {
    /// An event, with its place in the task's log when it has one: the SSE `id` (opaque
    /// here), which a client that reconnects sends back as `Last-Event-ID`.
    Event { id: Option<String>, event: StreamResponse },
    /// An SSE comment (`: text`): starts a response that has no event to send yet.
    Comment(String),
}

impl StreamItem {
    /// The event, when this item is one.
    pub fn into_event(self) -> Option<StreamResponse> {
        match self {
            Self::Event { event, .. } => Some(event),
            Self::Comment(_) => None,
        }
    }
}

impl From<StreamResponse> for StreamItem {
    fn from(event: StreamResponse) -> Self {
        Self::Event { id: None, event }
    }
}

/// GetTask's answer: a task, or a task's JSON the handler keeps already written (issue 31:
/// an ended task's answer is served as the same bytes until it changes). The bytes must be
/// a `Task` as serde writes it; the transport sends them as they are.
#[derive(Clone, Debug)]
pub enum TaskAnswer {
    Task(Box<Task>),
    Json(axum::body::Bytes),
}

impl From<Task> for TaskAnswer {
    fn from(task: Task) -> Self {
        Self::Task(Box::new(task))
    }
}

/// What the transport knows about a call.
#[derive(Clone, Debug, Default)]
pub struct CallContext {
    /// Extension URIs from `A2A-Extensions`.
    pub requested_extensions: Vec<String>,
    /// The request headers, for the handler's own policies (participants, S13).
    pub headers: HeaderMap,
}

/// The server side of every A2A operation.
///
/// The transport gates each call on the card's capabilities before calling a method
/// (CHEATSHEET §5, capability gating; each operation's [`Capability`] is in [`OPERATIONS`]).
/// The defaults below answer what a server without the capability would.
#[async_trait::async_trait]
pub trait RequestHandler: Send + Sync + 'static {
    async fn send_message(&self, ctx: &CallContext, req: SendMessageRequest) -> Result<SendMessageResponse, A2AError>;
    async fn send_streaming_message(&self, ctx: &CallContext, req: SendMessageRequest)
    -> Result<EventStream, A2AError>;
    async fn get_task(&self, ctx: &CallContext, req: GetTaskRequest) -> Result<TaskAnswer, A2AError>;
    async fn cancel_task(&self, ctx: &CallContext, req: CancelTaskRequest) -> Result<Task, A2AError>;
    async fn subscribe_to_task(&self, ctx: &CallContext, req: SubscribeToTaskRequest) -> Result<EventStream, A2AError>;
    async fn list_tasks(&self, _ctx: &CallContext, _req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        Err(A2AError::unsupported("ListTasks is not supported by this server"))
    }
    async fn create_push_config(
        &self,
        _ctx: &CallContext,
        _req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        Err(push_not_supported())
    }
    async fn get_push_config(
        &self,
        _ctx: &CallContext,
        _req: TaskPushNotificationConfigRef,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        Err(push_not_supported())
    }
    async fn list_push_configs(
        &self,
        _ctx: &CallContext,
        _req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        Err(push_not_supported())
    }
    async fn delete_push_config(
        &self,
        _ctx: &CallContext,
        _req: TaskPushNotificationConfigRef,
    ) -> Result<(), A2AError> {
        Err(push_not_supported())
    }
    /// The extended card, for a server whose public card declares `extendedAgentCard`.
    async fn extended_agent_card(&self, _ctx: &CallContext) -> Result<AgentCard, A2AError> {
        Err(A2AError::new(
            ErrorKind::ExtendedAgentCardNotConfigured,
            "the extended agent card is declared but not configured",
        ))
    }
}

fn push_not_supported() -> A2AError {
    A2AError::new(ErrorKind::PushNotificationNotSupported, "push notifications are not supported by this agent")
}

/// The handler behind the routes, swapped in when it starts and out when it stops: the
/// routes exist before there is a handler (S17); a call made while the slot is empty is
/// `Unavailable`.
pub struct HandlerSlot<H: RequestHandler> {
    handler: std::sync::RwLock<Option<Arc<H>>>,
}

impl<H: RequestHandler> Default for HandlerSlot<H> {
    fn default() -> Self {
        Self { handler: std::sync::RwLock::new(None) }
    }
}

impl<H: RequestHandler> HandlerSlot<H> {
    /// Puts a handler in the slot (`None` empties it); returns the one it held.
    pub fn replace(&self, handler: Option<Arc<H>>) -> Option<Arc<H>> {
        std::mem::replace(&mut *self.handler.write().expect("handler slot"), handler)
    }
    /// The handler in the slot, if any.
    pub fn get(&self) -> Option<Arc<H>> {
        self.handler.read().expect("handler slot").clone()
    }
}

/// A slot whatever its handler type, for the routes.
trait Slot: Send + Sync {
    fn current(&self) -> Result<Arc<dyn RequestHandler>, A2AError>;
}

impl<H: RequestHandler> Slot for HandlerSlot<H> {
    fn current(&self) -> Result<Arc<dyn RequestHandler>, A2AError> {
        match self.get() {
            Some(h) => Ok(h),
            None => Err(A2AError::new(ErrorKind::Unavailable, "the agent is not started")),
        }
    }
}

/// Shared state of the routes.
#[derive(Clone)]
pub(crate) struct AppState {
    slot: Arc<dyn Slot>,
    pub agent_card: Arc<AgentCard>,
    pub card: Arc<card::CardResponder>,
}

impl AppState {
    /// The handler in the slot, or `Unavailable`.
    pub(crate) fn handler(&self) -> Result<Arc<dyn RequestHandler>, A2AError> {
        self.slot.current()
    }
}

/// All A2A routes over a card and a handler slot: JSON-RPC, HTTP+JSON and the card.
pub fn router<H: RequestHandler>(agent_card: Arc<AgentCard>, slot: Arc<HandlerSlot<H>>) -> Router {
    let card = Arc::new(card::CardResponder::new(&agent_card));
    let state = AppState { slot, agent_card, card };
    // Issue 16: the JSON-RPC URL answers with and without a trailing slash (clients join
    // the interface URL and "/"), and so does the REST base; a request that reaches none of
    // the operations gets the binding's own error body, never an empty 404 or 405.
    let rpc = || axum::routing::post(jsonrpc::handle).fallback(jsonrpc::not_posted);
    Router::new()
        .route(CARD_PATH, axum::routing::get(card::serve))
        .route(JSONRPC_PATH, rpc())
        .route(&format!("{JSONRPC_PATH}/"), rpc())
        .route(&format!("{JSONRPC_PATH}/{{*rest}}"), axum::routing::any(jsonrpc::no_endpoint))
        .route(REST_PATH, axum::routing::any(rest::handle))
        .route(&format!("{REST_PATH}/{{*path}}"), axum::routing::any(rest::handle))
        .with_state(state)
}

/// Reads `A2A-Version` (header, else `A2A-Version` query parameter). Missing or empty
/// means 0.3, which this 1.0 server refuses. Major.Minor must be 1.0 (a patch part is
/// ignored); a malformed version is refused as unsupported, naming it (issue 33).
fn check_version(headers: &HeaderMap, query: Option<&str>) -> Result<(), A2AError> {
    let from_query = query.and_then(|q| {
        q.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            k.eq_ignore_ascii_case("A2A-Version").then(|| v.to_string())
        })
    });
    let version = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or(from_query.filter(|s| !s.is_empty()));
    let Some(version) = version else {
        return Err(A2AError::new(
            ErrorKind::VersionNotSupported,
            "A2A-Version is missing (which means 0.3); this server speaks A2A 1.0: send `A2A-Version: 1.0`",
        )
        .with("supportedVersions", "1.0"));
    };
    match major_minor(&version) {
        Some((1, 0)) => Ok(()),
        Some(_) => Err(A2AError::new(
            ErrorKind::VersionNotSupported,
            format!("A2A-Version {version:?} is not supported; this server speaks 1.0"),
        )
        .with("requestedVersion", version)
        .with("supportedVersions", "1.0")),
        None => Err(A2AError::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A-Version {version:?} is not a version: it is `Major.Minor` (a patch part is ignored); this server \
                 speaks 1.0"
            ),
        )
        .with("requestedVersion", version)
        .with("supportedVersions", "1.0")),
    }
}

/// `Major.Minor` of a version `Major.Minor[.Patch]` of decimal numbers (CHEATSHEET: compare
/// Major.Minor, ignore the patch); `None` for anything else (`1.banana`, `1`, `1.0.x`).
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut numbers = version.split('.');
    let mut number = || {
        numbers.next().filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).and_then(|n| n.parse().ok())
    };
    let (major, minor) = (number()?, number()?);
    let patch = numbers.next();
    if patch.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) || numbers.next().is_some() {
        return None;
    }
    Some((major, minor))
}

/// Admits a request: `A2A-Version` (1.x only), then the operation's capability, then
/// `A2A-Extensions` (S3: naming an
/// extension the card does not advertise is UnsupportedOperation, before any work), then the
/// call context.
pub(crate) fn admit(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    op: &ops::Operation,
) -> Result<CallContext, A2AError> {
    check_version(headers, query)?;
    let ctx = call_context(headers);
    let card = &state.agent_card;
    op.capability.check(card)?;
    if ctx.requested_extensions.is_empty() {
        return Ok(ctx);
    }
    let advertised: Vec<&str> = card.capabilities.extensions.iter().map(|e| e.uri.as_str()).collect();
    if let Some(unknown) = ctx.requested_extensions.iter().find(|uri| !advertised.contains(&uri.as_str())) {
        return Err(A2AError::unsupported(format!("extension not supported by this agent: {unknown}"))
            .with("extension", unknown.as_str()));
    }
    Ok(ctx)
}

/// The call context from the request headers.
fn call_context(headers: &HeaderMap) -> CallContext {
    let requested_extensions = headers
        .get_all("a2a-extensions")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    CallContext { requested_extensions, headers: headers.clone() }
}

/// A response whose body is JSON already written (the one place the JSON content type is set).
pub(crate) fn json_body(body: impl Into<axum::body::Body>) -> axum::response::Response {
    let mut response = axum::response::Response::new(body.into());
    response
        .headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    response
}

/// Parses a request body as JSON. A body that is not JSON is a parse error, or, when the
/// request declared a non-JSON `Content-Type`, ContentTypeNotSupported naming that type
/// (a JSON body is accepted whatever its declared type, as the Python SDK does).
pub(crate) fn body_json(headers: &HeaderMap, body: &[u8]) -> Result<serde_json::Value, A2AError> {
    serde_json::from_slice(body).map_err(|e| {
        let declared = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !declared.is_empty() && !declared.to_ascii_lowercase().contains("json") {
            A2AError::new(
                ErrorKind::ContentTypeNotSupported,
                format!("content type `{declared}` is not supported: send the request as application/json"),
            )
            .with("contentType", declared)
        } else {
            A2AError::new(ErrorKind::ParseError, format!("parse error: the body is not valid JSON ({e})"))
        }
    })
}

/// Parses a request body into a request message; errors name what was wrong.
pub(crate) fn parse_params<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, A2AError> {
    serde_json::from_value(value).map_err(|e| A2AError::invalid_params(format!("invalid params: {e}")))
}

/// Every route this server mounts, for API documents: (HTTP method, path relative to the
/// router, operation). REST routes are also served under a leading `/{tenant}` segment.
pub fn routes() -> Vec<(&'static str, String, &'static str)> {
    let mut out = vec![("GET", CARD_PATH.to_string(), "AgentCard"), ("POST", JSONRPC_PATH.to_string(), "JSON-RPC")];
    for op in OPERATIONS {
        out.extend(op.rest.iter().map(|(verb, path)| (*verb, format!("{REST_PATH}{path}"), op.method)));
    }
    out
}
