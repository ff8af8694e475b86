//! The HTTP+JSON binding: REST routes relative to the interface URL, each also under a
//! leading `/{tenant}` segment. Errors are `google.rpc.Status` bodies with their HTTP
//! status; streams are SSE of bare `StreamResponse`s.

use crate::sse::{self, Framing};
use crate::{AppState, admit, parse_params};
use a2a_types::{A2AError, CancelTaskRequest, ErrorKind, GetTaskRequest, StreamResponse, SubscribeToTaskRequest};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

struct RestFraming;

impl Framing for RestFraming {
    fn event(&self, e: &StreamResponse) -> Value {
        serde_json::to_value(e).unwrap_or_default()
    }
    fn error(&self, e: &A2AError) -> Value {
        e.to_rest()
    }
}

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/message:send", post(send))
        .route("/message:stream", post(stream))
        .route("/tasks/{task}", get(task_get).post(task_post))
        .route("/{tenant}/message:send", post(send))
        .route("/{tenant}/message:stream", post(stream))
        .route("/{tenant}/tasks/{task}", get(task_get_tenant).post(task_post_tenant))
}

/// A JSON response with the REST content type.
fn ok(v: impl serde::Serialize) -> Response {
    match serde_json::to_string(&v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => error(A2AError::internal(e.to_string())),
    }
}

fn error(e: A2AError) -> Response {
    let status = StatusCode::from_u16(e.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], e.to_rest().to_string()).into_response()
}

fn body_json(body: &Bytes) -> Result<Value, A2AError> {
    if body.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(body)
        .map_err(|e| A2AError::new(ErrorKind::ParseError, format!("parse error: the body is not valid JSON ({e})")))
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .next_back()
}

async fn send(State(s): State<AppState>, RawQuery(q): RawQuery, headers: HeaderMap, body: Bytes) -> Response {
    let run = async {
        let ctx = admit(&s, &headers, q.as_deref())?;
        let req = parse_params(body_json(&body)?)?;
        s.handler.send_message(&ctx, req).await
    };
    run.await.map_or_else(error, ok)
}

async fn stream(State(s): State<AppState>, RawQuery(q): RawQuery, headers: HeaderMap, body: Bytes) -> Response {
    let run = async {
        let ctx = admit(&s, &headers, q.as_deref())?;
        let req = parse_params(body_json(&body)?)?;
        let events = s.handler.send_streaming_message(&ctx, req).await?;
        sse::respond(events, RestFraming).await
    };
    run.await.unwrap_or_else(error)
}

/// `GET /tasks/{id}`, the `{id}` segment possibly carrying `:subscribe`.
async fn task_get(state: State<AppState>, Path(task): Path<String>, q: RawQuery, headers: HeaderMap) -> Response {
    task_get_inner(state, task, q, headers).await
}

async fn task_get_tenant(
    state: State<AppState>,
    Path((_tenant, task)): Path<(String, String)>,
    q: RawQuery,
    headers: HeaderMap,
) -> Response {
    task_get_inner(state, task, q, headers).await
}

async fn task_get_inner(
    State(s): State<AppState>,
    task: String,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let run = async {
        let ctx = admit(&s, &headers, q.as_deref())?;
        if let Some(id) = task.strip_suffix(":subscribe") {
            return subscribe(&s, &ctx, id).await;
        }
        let history_length = match query_param(q.as_deref(), "historyLength") {
            Some(v) => Some(v.parse::<i32>().map_err(|_| {
                A2AError::invalid_params(format!("invalid params: historyLength `{v}` is not an integer"))
            })?),
            None => None,
        };
        let t = s.handler.get_task(&ctx, GetTaskRequest { id: task, history_length, ..Default::default() }).await?;
        Ok(ok(t))
    };
    run.await.unwrap_or_else(error)
}

async fn task_post(
    state: State<AppState>,
    Path(task): Path<String>,
    q: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    task_post_inner(state, task, q, headers, body).await
}

async fn task_post_tenant(
    state: State<AppState>,
    Path((_t, task)): Path<(String, String)>,
    q: RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    task_post_inner(state, task, q, headers, body).await
}

/// `SubscribeToTask`, served on both `GET` and `POST /tasks/{id}:subscribe` (CHEATSHEET §13.1).
async fn subscribe(s: &AppState, ctx: &crate::CallContext, id: &str) -> Result<Response, A2AError> {
    let events =
        s.handler.subscribe_to_task(ctx, SubscribeToTaskRequest { id: id.to_string(), ..Default::default() }).await?;
    sse::respond(events, RestFraming).await
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
async fn task_post_inner(
    State(s): State<AppState>,
    task: String,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let run = async {
        let ctx = admit(&s, &headers, q.as_deref())?;
        if let Some(id) = task.strip_suffix(":cancel") {
            let mut req: CancelTaskRequest = parse_params(body_json(&body)?)?;
            req.id = id.to_string();
            return Ok(ok(s.handler.cancel_task(&ctx, req).await?));
        }
        if let Some(id) = task.strip_suffix(":subscribe") {
            return subscribe(&s, &ctx, id).await;
        }
        Err(A2AError::new(ErrorKind::MethodNotFound, format!("no such operation: POST /tasks/{task}")))
    };
    run.await.unwrap_or_else(error)
}
