//! The HTTP+JSON binding: the routes of [`OPERATIONS`] relative to the interface URL, each
//! also under a leading `/{tenant}` segment (CHEATSHEET §3, §11). Path fields go into the
//! request under their own names and win over the body's. Errors are `google.rpc.Status` bodies
//! with their HTTP status; streams are SSE of bare `StreamResponse`s. GET and DELETE take
//! their other fields from the query string (camelCase names, the last value wins).

use crate::ops::{Input, OPERATIONS, Operation, Reply};
use crate::sse::{self, Framing};
use crate::{AppState, admit, json_body};
use a2a_types::{A2AError, ErrorKind, StreamResponse};
use axum::body::Bytes;
use axum::extract::{RawPathParams, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value};

struct RestFraming;

impl Framing for RestFraming {
    fn event(&self, e: &StreamResponse) -> String {
        serde_json::to_string(e).unwrap_or_else(|err| self.error(&A2AError::from_fault(err)))
    }
    fn error(&self, e: &A2AError) -> String {
        e.to_rest().to_string()
    }
}

/// A JSON response with the REST content type.
fn ok(v: impl serde::Serialize) -> Response {
    match serde_json::to_string(&v) {
        Ok(body) => json_body(body),
        Err(e) => error(A2AError::from_fault(e)),
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
    let mut response = json_body(e.to_rest().to_string());
    *response.status_mut() = status;
    response
}

/// The request body as a JSON object (an empty body is `{}`).
fn body_object(headers: &HeaderMap, body: &Bytes) -> Result<Value, A2AError> {
    if body.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    crate::body_json(headers, body)
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

/// The operation a request's method and path name, and the request fields its path binds.
struct Found {
    op: &'static Operation,
    fields: Map<String, Value>,
}

/// Binds a route pattern to path segments: the fields it binds and how specific it is
/// (literal segments count most, then `{name}:verb` segments), or `None`.
fn bind(pattern: &str, segments: &[String]) -> Option<(usize, Map<String, Value>)> {
    let parts: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    if parts.len() != segments.len() {
        return None;
    }
    let (mut score, mut fields) = (0, Map::new());
    for (part, segment) in parts.iter().zip(segments) {
        let Some(param) = part.strip_prefix('{') else {
            if part != segment {
                return None;
            }
            score += 2;
            continue;
        };
        let (name, verb) = param.split_once('}')?;
        let value = match verb {
            "" => segment.as_str(),
            verb => {
                score += 1;
                segment.strip_suffix(verb)?
            }
        };
        if value.is_empty() {
            return None;
        }
        fields.insert(name.to_string(), Value::String(value.to_string()));
    }
    Some((score, fields))
}

/// Finds the operation for a method and path (segments already percent-decoded): the
/// path as it is, else its first segment as the tenant (CHEATSHEET §11). A path that
/// names an operation under another method is 405 with `Allow`; any other is 404.
fn find(verb: &Method, segments: &[String]) -> Result<Found, Box<Response>> {
    let readings = [(None, segments), (segments.first(), segments.get(1..).unwrap_or_default())];
    let mut allowed: Vec<&str> = Vec::new();
    for (tenant, rest) in readings {
        let mut best: Option<(usize, Found)> = None;
        for op in OPERATIONS {
            for (method, pattern) in op.rest {
                let Some((score, fields)) = bind(pattern, rest) else { continue };
                if *method != verb.as_str() {
                    allowed.push(method);
                } else if best.as_ref().is_none_or(|(s, _)| score > *s) {
                    best = Some((score, Found { op, fields }));
                }
            }
        }
        if let Some((_, mut found)) = best {
            if let Some(tenant) = tenant {
                found.fields.insert("tenant".into(), Value::String(tenant.clone()));
            }
            return Ok(found);
        }
    }
    let path = format!("/{}", segments.join("/"));
    if allowed.is_empty() {
        return Err(Box::new(error(A2AError::new(
            ErrorKind::MethodNotFound,
            format!("no such operation: {verb} {path}"),
        ))));
    }
    allowed.sort_unstable();
    allowed.dedup();
    let allow = allowed.join(", ");
    let err = A2AError::new(ErrorKind::MethodNotFound, format!("{verb} is not allowed on {path}: use {allow}"));
    let mut response = error(err);
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    if let Ok(v) = header::HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, v);
    }
    Err(Box::new(response))
}

/// The path after the REST base, split into percent-decoded segments.
fn segments(raw: &RawPathParams) -> Result<Vec<String>, A2AError> {
    let path = raw.iter().find(|(name, _)| *name == "path").map(|(_, v)| v).unwrap_or("");
    // A trailing slash names the same resource (`/tasks/t1/` is `/tasks/t1`).
    let path = path.strip_suffix('/').unwrap_or(path);
    path.split('/')
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|e| A2AError::invalid_params(format!("invalid params: the path does not parse ({e})")))
        })
        .collect()
}

/// Every HTTP+JSON request: route by the operations table, admit, read the request from
/// the body or the query plus the path, call, answer.
pub(crate) async fn handle(
    State(s): State<AppState>,
    verb: Method,
    raw: RawPathParams,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let found = match segments(&raw) {
        Ok(segments) => find(&verb, &segments),
        Err(e) => Err(Box::new(error(e))),
    };
    let Found { op, fields } = match found {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let began = std::time::Instant::now();
    let run = async {
        let ctx = admit(&s, &headers, q.as_deref(), op)?;
        let mut params = match op.input {
            Input::Body => body_object(&headers, &body)?,
            Input::Query { ints, bools } => query_object(q.as_deref(), ints, bools)?,
            Input::Path => Value::Object(Map::new()),
        };
        if let Value::Object(object) = &mut params {
            object.extend(fields);
        }
        match (op.call)(s.handler()?, ctx, params).await? {
            Reply::Json(body) => Ok(json_body(body)),
            Reply::Empty => Ok(ok(Map::new())),
            Reply::Stream(events) => sse::respond(events, RestFraming).await,
        }
    };
    let answer = run.await;
    crate::metrics::record(op.method, "rest", began, answer.as_ref().err());
    answer.unwrap_or_else(error)
}
