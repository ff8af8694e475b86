//! The JSON-RPC binding: one `POST` endpoint, method dispatch, errors as JSON-RPC error
//! objects with HTTP 200, streams as SSE whose events are complete JSON-RPC responses.

use crate::ops::{self, Reply};
use crate::sse::{self, Framing};
use crate::{AppState, admit, body_json, json_body};
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
    fn event(&self, e: &StreamResponse) -> String {
        match serde_json::to_string(e) {
            Ok(result) => String::from_utf8(envelope(&self.id, result.as_bytes())).unwrap_or_default(),
            Err(err) => self.error(&A2AError::from_fault(err)),
        }
    }
    fn error(&self, e: &A2AError) -> String {
        failure(&self.id, e).to_string()
    }
}

fn json(body: Value) -> Response {
    json_body(body.to_string())
}

/// A success response's bytes around a result already written as JSON.
/// Sized exactly: one byte short, the closing brace made the whole answer be copied into a
/// buffer twice its size (issue 31).
fn envelope(id: &Value, result: &[u8]) -> Vec<u8> {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    const RESULT: &[u8] = br#","result":"#;
    let id = serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec());
    let mut body = Vec::with_capacity(HEAD.len() + id.len() + RESULT.len() + result.len() + 1);
    body.extend_from_slice(HEAD);
    body.extend_from_slice(&id);
    body.extend_from_slice(RESULT);
    body.extend_from_slice(result);
    body.push(b'}');
    debug_assert_eq!(body.len(), body.capacity());
    body
}

/// Anything but POST at the JSON-RPC URL: a JSON-RPC error saying how to call it (405).
pub(crate) async fn not_posted(method: axum::http::Method) -> Response {
    let err = A2AError::new(
        ErrorKind::InvalidRequest,
        format!("{method} is not a JSON-RPC call: POST a JSON-RPC 2.0 request to {}", crate::JSONRPC_PATH),
    );
    let mut response = json(failure(&Value::Null, &err));
    *response.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
    response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST"));
    response
}

/// A path below the JSON-RPC URL: no endpoint there (404, as a JSON-RPC error).
pub(crate) async fn no_endpoint(uri: axum::http::Uri) -> Response {
    let err = A2AError::new(
        ErrorKind::MethodNotFound,
        format!("no JSON-RPC endpoint at {}: POST to {}", uri.path(), crate::JSONRPC_PATH),
    );
    let mut response = json(failure(&Value::Null, &err));
    *response.status_mut() = axum::http::StatusCode::NOT_FOUND;
    response
}

pub(crate) async fn handle(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let began = std::time::Instant::now();
    let value: Value = match body_json(&headers, &body) {
        Ok(v) => v,
        Err(err) => {
            crate::metrics::record("unknown", "jsonrpc", began, Some(&err));
            return json(failure(&Value::Null, &err));
        }
    };
    // A request object without an `id` member is a notification: JSON-RPC 2.0 runs it and
    // never replies, not even with an error (issue 34). An envelope that is not a request at
    // all is still answered (`id` null). Over HTTP the empty reply is 204.
    let notification = value.as_object().is_some_and(|o| !o.contains_key("id"));
    let req = match RpcRequest::from_value(value) {
        Ok(r) => r,
        Err((id, err)) => {
            crate::metrics::record("unknown", "jsonrpc", began, Some(&err));
            return json(failure(&id, &err));
        }
    };
    let id = req.id.clone();
    let op = ops::by_method(&req.method);
    let answer = dispatch(&state, &headers, query.as_deref(), op, req).await;
    crate::metrics::record(op.map_or("unknown", |op| op.method), "jsonrpc", began, answer.as_ref().err());
    if notification {
        // A stream's events go nowhere; the call itself (a message's delivery) has run.
        drop(answer);
        return axum::http::StatusCode::NO_CONTENT.into_response();
    }
    answer.unwrap_or_else(|e| json(failure(&id, &e)))
}

async fn dispatch(
    state: &AppState,
    headers: &HeaderMap,
    query: Option<&str>,
    op: Option<&'static ops::Operation>,
    req: RpcRequest,
) -> Result<Response, A2AError> {
    let Some(op) = op else {
        return Err(A2AError::new(ErrorKind::MethodNotFound, format!("method not found: `{}`", req.method))
            .with("method", req.method));
    };
    let ctx = admit(state, headers, query, op)?;
    match (op.call)(state.handler()?, ctx, req.params).await? {
        Reply::Json(result) => Ok(json_body(envelope(&req.id, &result))),
        Reply::Empty => Ok(json(success(&req.id, Value::Null))),
        Reply::Stream(events) => sse::respond(events, RpcFraming { id: req.id }).await,
    }
}
