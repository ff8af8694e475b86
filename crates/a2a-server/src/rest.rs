//! The HTTP+JSON binding: REST routes relative to the interface URL, each also under a
//! leading `/{tenant}` segment (CHEATSHEET §3, §11). Errors are `google.rpc.Status` bodies
//! with their HTTP status; streams are SSE of bare `StreamResponse`s. GET and DELETE take
//! their other fields from the query string (camelCase names, the last value wins).

use crate::sse::{self, Framing};
use crate::{AppState, CallContext, Op, admit, parse_params};
use a2a_types::{
    A2AError, CancelTaskRequest, ErrorKind, GetTaskRequest, ListTaskPushNotificationConfigsRequest, ListTasksRequest,
    StreamResponse, SubscribeToTaskRequest, TaskPushNotificationConfig, TaskPushNotificationConfigRef,
};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value};
use std::collections::HashMap;

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
    use axum::routing::post;
    Router::new()
        .route("/message:send", post(send))
        .route("/message:stream", post(stream))
        .route("/tasks", get(list_tasks))
        .route("/tasks/{task}", get(task_get).post(task_post))
        .route("/tasks/{task}/pushNotificationConfigs", post(push_create).get(push_list))
        .route("/tasks/{task}/pushNotificationConfigs/{id}", get(push_get).delete(push_delete))
        .route("/extendedAgentCard", get(extended_card))
        .route("/{tenant}/message:send", post(send))
        .route("/{tenant}/message:stream", post(stream))
        .route("/{tenant}/tasks", get(list_tasks))
        .route("/{tenant}/tasks/{task}", get(task_get).post(task_post))
        .route("/{tenant}/tasks/{task}/pushNotificationConfigs", post(push_create).get(push_list))
        .route("/{tenant}/tasks/{task}/pushNotificationConfigs/{id}", get(push_get).delete(push_delete))
        .route("/{tenant}/extendedAgentCard", get(extended_card))
}

/// A JSON response with the REST content type.
fn ok(v: impl serde::Serialize) -> Response {
    match serde_json::to_string(&v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => error(A2AError::internal(e.to_string())),
    }
}

fn error(e: A2AError) -> Response {
    // v1.0.1 maps ContentTypeNotSupported to 400; 415 says the same thing in HTTP's own
    // words and is what v1.0.0 (and its TCK) expects.
    let status = if e.kind == ErrorKind::ContentTypeNotSupported {
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    } else {
        StatusCode::from_u16(e.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    };
    (status, [(header::CONTENT_TYPE, "application/json")], e.to_rest().to_string()).into_response()
}

/// The request body as a JSON object (an empty body is `{}`).
fn body_object(headers: &HeaderMap, body: &Bytes) -> Result<Value, A2AError> {
    if body.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    crate::body_json(headers, body)
}

/// Path parameters: `task`, `id` and `tenant`, whichever the route has (none for `/tasks`).
struct Params(HashMap<String, String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Params {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        let p = <Path<HashMap<String, String>> as axum::extract::OptionalFromRequestParts<S>>::from_request_parts(
            parts, state,
        )
        .await
        .map_err(|e: axum::extract::rejection::PathRejection| {
            error(A2AError::invalid_params(format!("invalid params: the path does not parse ({e})")))
        })?;
        Ok(Self(p.map(|Path(m)| m).unwrap_or_default()))
    }
}

fn param(p: &HashMap<String, String>, name: &str) -> String {
    p.get(name).cloned().unwrap_or_default()
}

/// The query string as a JSON object for the request message: camelCase names, the last
/// value wins, `int_fields` parsed as integers and `bool_fields` as booleans, with an
/// error naming the parameter when one does not parse.
fn query_object(query: Option<&str>, int_fields: &[&str], bool_fields: &[&str]) -> Result<Value, A2AError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|e| A2AError::invalid_params(format!("invalid params: the query string does not parse ({e})")))?;
    let mut out = Map::new();
    for (k, v) in pairs {
        if k.eq_ignore_ascii_case("A2A-Version") {
            continue;
        }
        let value = if int_fields.contains(&k.as_str()) {
            let n: i64 = v.parse().map_err(|_| {
                A2AError::invalid_params(format!("invalid params: {k} `{v}` is not an integer"))
                    .with("field", k.as_str())
            })?;
            Value::from(n)
        } else if bool_fields.contains(&k.as_str()) {
            match v.as_str() {
                "true" | "1" => Value::Bool(true),
                "false" | "0" => Value::Bool(false),
                _ => {
                    return Err(A2AError::invalid_params(format!("invalid params: {k} `{v}` is not true or false"))
                        .with("field", k.as_str()));
                }
            }
        } else {
            Value::String(v)
        };
        out.insert(k, value);
    }
    Ok(Value::Object(out))
}

/// Runs a call, answering its error as a REST error.
async fn answer(run: impl Future<Output = Result<Response, A2AError>>) -> Response {
    run.await.unwrap_or_else(error)
}

async fn send(State(s): State<AppState>, RawQuery(q): RawQuery, headers: HeaderMap, body: Bytes) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Other)?;
        let req = parse_params(body_object(&headers, &body)?)?;
        Ok(ok(s.handler.send_message(&ctx, req).await?))
    })
    .await
}

async fn stream(State(s): State<AppState>, RawQuery(q): RawQuery, headers: HeaderMap, body: Bytes) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Streaming)?;
        let req = parse_params(body_object(&headers, &body)?)?;
        let events = s.handler.send_streaming_message(&ctx, req).await?;
        sse::respond(events, RestFraming).await
    })
    .await
}

async fn list_tasks(
    State(s): State<AppState>,
    Params(p): Params,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Other)?;
        let mut req: ListTasksRequest = parse_params(query_object(
            q.as_deref(),
            &["pageSize", "historyLength", "page_size", "history_length"],
            &["includeArtifacts", "include_artifacts"],
        )?)?;
        req.tenant = param(&p, "tenant");
        Ok(ok(s.handler.list_tasks(&ctx, req).await?))
    })
    .await
}

/// `GET /tasks/{id}` (GetTask) and `GET /tasks/{id}:subscribe`.
async fn task_get(State(s): State<AppState>, Params(p): Params, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    let task = param(&p, "task");
    answer(async {
        if let Some(id) = task.strip_suffix(":subscribe") {
            let ctx = admit(&s, &headers, q.as_deref(), Op::Streaming)?;
            return subscribe(&s, &ctx, id, &p).await;
        }
        let ctx = admit(&s, &headers, q.as_deref(), Op::Other)?;
        let mut req: GetTaskRequest =
            parse_params(query_object(q.as_deref(), &["historyLength", "history_length"], &[])?)?;
        req.id = task;
        req.tenant = param(&p, "tenant");
        Ok(ok(s.handler.get_task(&ctx, req).await?))
    })
    .await
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
async fn task_post(
    State(s): State<AppState>,
    Params(p): Params,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let task = param(&p, "task");
    answer(async {
        if let Some(id) = task.strip_suffix(":cancel") {
            let ctx = admit(&s, &headers, q.as_deref(), Op::Other)?;
            let mut req: CancelTaskRequest = parse_params(body_object(&headers, &body)?)?;
            req.id = id.to_string();
            req.tenant = param(&p, "tenant");
            return Ok(ok(s.handler.cancel_task(&ctx, req).await?));
        }
        if let Some(id) = task.strip_suffix(":subscribe") {
            let ctx = admit(&s, &headers, q.as_deref(), Op::Streaming)?;
            return subscribe(&s, &ctx, id, &p).await;
        }
        Err(A2AError::new(ErrorKind::MethodNotFound, format!("no such operation: POST /tasks/{task}")))
    })
    .await
}

/// SubscribeToTask, served on both `GET` and `POST /tasks/{id}:subscribe` (CHEATSHEET §13.1).
async fn subscribe(
    s: &AppState,
    ctx: &CallContext,
    id: &str,
    p: &HashMap<String, String>,
) -> Result<Response, A2AError> {
    let req = SubscribeToTaskRequest { id: id.to_string(), tenant: param(p, "tenant") };
    let events = s.handler.subscribe_to_task(ctx, req).await?;
    sse::respond(events, RestFraming).await
}

async fn push_create(
    State(s): State<AppState>,
    Params(p): Params,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Push)?;
        let mut config: TaskPushNotificationConfig = parse_params(body_object(&headers, &body)?)?;
        config.task_id = param(&p, "task");
        config.tenant = param(&p, "tenant");
        Ok(ok(s.handler.create_push_config(&ctx, config).await?))
    })
    .await
}

async fn push_list(
    State(s): State<AppState>,
    Params(p): Params,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Push)?;
        let mut req: ListTaskPushNotificationConfigsRequest =
            parse_params(query_object(q.as_deref(), &["pageSize", "page_size"], &[])?)?;
        req.task_id = param(&p, "task");
        req.tenant = param(&p, "tenant");
        Ok(ok(s.handler.list_push_configs(&ctx, req).await?))
    })
    .await
}

fn push_ref(p: &HashMap<String, String>) -> TaskPushNotificationConfigRef {
    TaskPushNotificationConfigRef { tenant: param(p, "tenant"), task_id: param(p, "task"), id: param(p, "id") }
}

async fn push_get(State(s): State<AppState>, Params(p): Params, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Push)?;
        Ok(ok(s.handler.get_push_config(&ctx, push_ref(&p)).await?))
    })
    .await
}

async fn push_delete(
    State(s): State<AppState>,
    Params(p): Params,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::Push)?;
        s.handler.delete_push_config(&ctx, push_ref(&p)).await?;
        Ok(ok(Map::new()))
    })
    .await
}

async fn extended_card(State(s): State<AppState>, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    answer(async {
        let ctx = admit(&s, &headers, q.as_deref(), Op::ExtendedCard)?;
        Ok(ok(s.handler.extended_agent_card(&ctx).await?))
    })
    .await
}
