//! An A2A 1.0 server transport on axum: the JSON-RPC binding (`POST /a2a/jsonrpc`), the
//! HTTP+JSON binding (`/a2a/rest/...`), SSE framing for both, and the agent card route.
//!
//! Owns: parsing, the `A2A-Version` check, error mapping onto each binding, stream framing.
//! Must never: know how a task runs. Everything behind the wire is a [`RequestHandler`].

mod jsonrpc;
mod rest;
mod sse;

use a2a_types::{
    A2AError, AgentCard, CancelTaskRequest, ErrorKind, GetTaskRequest, ListTasksRequest, ListTasksResponse,
    SendMessageRequest, SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task,
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
pub type EventStream = BoxStream<'static, Result<StreamResponse, A2AError>>;

/// What the transport knows about a call.
#[derive(Clone, Debug, Default)]
pub struct CallContext {
    /// Extension URIs from `A2A-Extensions`.
    pub requested_extensions: Vec<String>,
}

/// The server side of every A2A operation.
#[async_trait::async_trait]
pub trait RequestHandler: Send + Sync + 'static {
    async fn send_message(&self, ctx: &CallContext, req: SendMessageRequest) -> Result<SendMessageResponse, A2AError>;
    async fn send_streaming_message(&self, ctx: &CallContext, req: SendMessageRequest)
    -> Result<EventStream, A2AError>;
    async fn get_task(&self, ctx: &CallContext, req: GetTaskRequest) -> Result<Task, A2AError>;
    async fn cancel_task(&self, ctx: &CallContext, req: CancelTaskRequest) -> Result<Task, A2AError>;
    async fn subscribe_to_task(&self, ctx: &CallContext, req: SubscribeToTaskRequest) -> Result<EventStream, A2AError>;
    async fn list_tasks(&self, _ctx: &CallContext, _req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        Err(A2AError::unsupported("ListTasks is not supported by this server"))
    }
    /// The public agent card.
    fn agent_card(&self) -> AgentCard;
}

/// Shared state of the routes.
#[derive(Clone)]
pub(crate) struct AppState {
    pub handler: Arc<dyn RequestHandler>,
}

/// All A2A routes over a handler: JSON-RPC, HTTP+JSON and the card.
pub fn router(handler: Arc<dyn RequestHandler>) -> Router {
    let state = AppState { handler };
    Router::new()
        .route(CARD_PATH, axum::routing::get(card))
        .route(JSONRPC_PATH, axum::routing::post(jsonrpc::handle))
        .nest(REST_PATH, rest::routes())
        .with_state(state)
}

async fn card(axum::extract::State(state): axum::extract::State<AppState>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let card = state.handler.agent_card();
    ([(axum::http::header::CONTENT_TYPE, "application/json")], serde_json::to_string(&card).unwrap_or_default())
        .into_response()
}

/// Reads `A2A-Version` (header, else `A2A-Version` query parameter). Missing or empty
/// means 0.3, which this 1.0 server refuses; only the major version is compared.
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
    let major = version.split('.').next().unwrap_or("");
    if major != "1" {
        return Err(A2AError::new(
            ErrorKind::VersionNotSupported,
            format!("A2A-Version {version} is not supported; this server speaks 1.0"),
        )
        .with("requestedVersion", version)
        .with("supportedVersions", "1.0"));
    }
    Ok(())
}

/// Admits a request: `A2A-Version` (1.x only), then `A2A-Extensions` (S3: naming an
/// extension the card does not advertise is UnsupportedOperation, before any work), then the
/// call context.
pub(crate) fn admit(state: &AppState, headers: &HeaderMap, query: Option<&str>) -> Result<CallContext, A2AError> {
    check_version(headers, query)?;
    let ctx = call_context(headers);
    if ctx.requested_extensions.is_empty() {
        return Ok(ctx);
    }
    let card = state.handler.agent_card();
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
    CallContext { requested_extensions }
}

/// Parses a request body into a request message; errors name what was wrong.
pub(crate) fn parse_params<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, A2AError> {
    serde_json::from_value(value).map_err(|e| A2AError::invalid_params(format!("invalid params: {e}")))
}
