//! The JSON-RPC binding: one `POST` endpoint, method dispatch, errors as JSON-RPC error
//! objects with HTTP 200, streams as SSE whose events are complete JSON-RPC responses.

use crate::sse::{self, Framing};
use crate::{AppState, Op, admit, body_json, parse_params};
use a2a_types::jsonrpc::{RpcRequest, failure, success};
use a2a_types::{A2AError, ErrorKind, StreamResponse};
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

struct RpcFraming {
    id: Value,
}

impl Framing for RpcFraming {
    fn event(&self, e: &StreamResponse) -> Value {
        success(&self.id, serde_json::to_value(e).unwrap_or_default())
    }
    fn error(&self, e: &A2AError) -> Value {
        failure(&self.id, e)
    }
}

fn json(body: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

pub(crate) async fn handle(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let value: Value = match body_json(&headers, &body) {
        Ok(v) => v,
        Err(err) => return json(failure(&Value::Null, &err)),
    };
    let req = match RpcRequest::from_value(value) {
        Ok(r) => r,
        Err((id, err)) => return json(failure(&id, &err)),
    };
    let id = req.id.clone();
    match dispatch(&state, &headers, query.as_deref(), req).await {
        Ok(Reply::Value(v)) => json(success(&id, v)),
        Ok(Reply::Stream(r)) => r,
        Err(e) => json(failure(&id, &e)),
    }
}

enum Reply {
    Value(Value),
    Stream(Response),
}

fn to_value<T: serde::Serialize>(v: T) -> Result<Reply, A2AError> {
    serde_json::to_value(v).map(Reply::Value).map_err(|e| A2AError::internal(e.to_string()))
}

async fn dispatch(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    req: RpcRequest,
) -> Result<Reply, A2AError> {
    if !a2a_types::jsonrpc::METHODS.contains(&req.method.as_str()) {
        return Err(A2AError::new(ErrorKind::MethodNotFound, format!("method not found: `{}`", req.method))
            .with("method", req.method));
    }
    let op = match req.method.as_str() {
        "SendStreamingMessage" | "SubscribeToTask" => Op::Streaming,
        "GetExtendedAgentCard" => Op::ExtendedCard,
        m if m.contains("PushNotificationConfig") => Op::Push,
        _ => Op::Other,
    };
    let ctx = admit(state, headers, query, op)?;
    let h = &state.handler;
    match req.method.as_str() {
        "SendMessage" => to_value(h.send_message(&ctx, parse_params(req.params)?).await?),
        "SendStreamingMessage" => {
            let stream = h.send_streaming_message(&ctx, parse_params(req.params)?).await?;
            Ok(Reply::Stream(sse::respond(stream, RpcFraming { id: req.id }).await?))
        }
        "GetTask" => to_value(h.get_task(&ctx, parse_params(req.params)?).await?),
        "ListTasks" => to_value(h.list_tasks(&ctx, parse_params(req.params)?).await?),
        "CancelTask" => to_value(h.cancel_task(&ctx, parse_params(req.params)?).await?),
        "SubscribeToTask" => {
            let stream = h.subscribe_to_task(&ctx, parse_params(req.params)?).await?;
            Ok(Reply::Stream(sse::respond(stream, RpcFraming { id: req.id }).await?))
        }
        "CreateTaskPushNotificationConfig" => to_value(h.create_push_config(&ctx, parse_params(req.params)?).await?),
        "GetTaskPushNotificationConfig" => to_value(h.get_push_config(&ctx, parse_params(req.params)?).await?),
        "ListTaskPushNotificationConfigs" => to_value(h.list_push_configs(&ctx, parse_params(req.params)?).await?),
        "DeleteTaskPushNotificationConfig" => {
            h.delete_push_config(&ctx, parse_params(req.params)?).await?;
            Ok(Reply::Value(Value::Null))
        }
        "GetExtendedAgentCard" => to_value(h.extended_agent_card(&ctx).await?),
        other => Err(A2AError::new(ErrorKind::MethodNotFound, format!("method not found: `{other}`"))),
    }
}
