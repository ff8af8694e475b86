//! Everything between the network and the request handler (S16, S17, S18, S20): the
//! routes over the harness's handler slot, the 503 gate, the mount check, the limits, CORS, the
//! OpenAPI document, `/_monitor` and `/ui`.
//!
//! Layers, outermost first: the request trace (a span per request with its task id, never a
//! body), mount check (500 naming both paths), gate (503 before start and after stop), CORS,
//! limits (429, 413, 408: tower-http's body limit and body timeout behind our per-peer rate),
//! then the routes.

use crate::handler::HarnessHandler;
use crate::harness::{Harness, Inner};
use axum::Router;
use axum::extract::{ConnectInfo, OriginalUri, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::TraceLayer;

/// Routes and layers a host can turn off one by one (S18). All on by default.
#[derive(Clone, Debug)]
pub struct RouteOptions {
    /// The limits layer (S16).
    pub limits: bool,
    /// CORS for `server.cors_origins` (S20).
    pub cors: bool,
    /// `GET /_monitor` (S20).
    pub monitor: bool,
    /// The push receiver route `POST /a2a/push/{task_id}` (S15).
    pub push_route: bool,
    /// The web UI at `/ui` (S20): the embedded one (issue 30), or `server.ui_dir`'s files.
    pub ui: bool,
    /// `GET /metrics` in the Prometheus text format (issue 32). Off, the harness installs no
    /// metrics recorder and counts nothing.
    pub metrics: bool,
}

impl Default for RouteOptions {
    fn default() -> Self {
        Self { limits: true, cors: true, monitor: true, push_route: true, ui: true, metrics: true }
    }
}

/// Where a router expects to be mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mount {
    /// [`Harness::router`]: nested at the configured prefix.
    AtPrefix,
    /// [`harness_router`]: the routes carry the prefix; merged at the host's root.
    AtRoot,
}

/// A JSON error in the REST shape (`google.rpc.Status`), for answers made before routing.
fn status_error(status: StatusCode, reason: &str, message: String) -> Response {
    let body = serde_json::json!({"error": {
        "code": status.as_u16(),
        "status": reason,
        "message": message,
    }});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// A request no route serves: a `google.rpc.Status` 404 naming it.
async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    status_error(StatusCode::NOT_FOUND, "NOT_FOUND", format!("no route: {method} {}", uri.path()))
}

/// The routes of a harness for a mount (see [`Harness::router`] and [`harness_router`]).
pub(crate) fn router(harness: &Harness, mount: Mount) -> Router {
    let inner = harness.inner.clone();
    let options = &inner.options;
    let config = &inner.config;
    let mut routes = a2a_server::router(inner.card.clone(), inner.handler.clone()).route(
        OPENAPI_PATH,
        axum::routing::get({
            let doc = crate::openapi::document(harness, mount);
            move || async move { ([(header::CONTENT_TYPE, "application/json")], doc.clone()).into_response() }
        }),
    );
    if options.push_route {
        routes = routes.route(PUSH_PATH, axum::routing::post(push_receiver).with_state(inner.clone()));
    }
    routes = routes.route(READY_PATH, axum::routing::get(ready).with_state(inner.clone()));
    if options.monitor {
        routes = routes.route(MONITOR_PATH, axum::routing::get(monitor).with_state(inner.clone()));
    }
    if options.metrics {
        // Installed with the first router that serves it: a harness without the route counts nothing.
        crate::metrics::install();
        routes = routes.route(crate::metrics::METRICS_PATH, axum::routing::get(scrape).with_state(inner.clone()));
    }
    let ui_dir = config.server.ui_dir.clone().filter(|_| options.ui);
    if options.ui && ui_dir.is_none() && mount == Mount::AtPrefix {
        // The embedded web UI (issue 30), unless `ui_dir` serves other files.
        routes = routes.nest_service(UI_PATH, crate::ui::router());
    }
    if let Some(dir) = &ui_dir {
        if mount == Mount::AtRoot {
            tracing::warn!(dir = %dir.display(), "`server.ui_dir` is set but a host-mounted router does not serve /ui");
        } else {
            // Its own routes, registered here, so no A2A REST path can shadow them.
            let root = Arc::new(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()));
            let ui = Router::new()
                .fallback_service(tower_http::services::ServeDir::new(dir))
                .layer(middleware::from_fn_with_state(root, ui_guard));
            routes = routes.nest_service(UI_PATH, ui);
        }
    }
    if mount == Mount::AtPrefix {
        // Issue 16: a path no route serves is a JSON 404 too (a host merging the routes at
        // its root keeps its own fallback; axum allows one per router).
        routes = routes.fallback(no_route);
    }
    let cors = !config.server.cors_origins.is_empty() && options.cors;
    if cors && mount == Mount::AtRoot {
        tracing::warn!(origins = ?config.server.cors_origins, "`server.cors_origins` is set but a host-mounted router does not answer CORS; the host's own layers decide");
    }
    // Inside the mount: the 503 gate, then CORS, then the limits (S16: a peer over its rate
    // is 429, a body over `server.max_request_bytes` 413, a body that arrives too slowly
    // 408), all before any route and so before any Temporal call. axum's `layer` wraps
    // what is there, so they are added innermost first.
    let mut routes = routes;
    if options.limits {
        routes = routes.layer(limits(inner.clone()));
    }
    if cors && mount == Mount::AtPrefix {
        routes = routes.layer(cors_layer(&config.server.cors_origins));
    }
    let routes = routes.layer(middleware::from_fn_with_state(inner.clone(), gate));
    let (routes, expected) = match mount {
        Mount::AtRoot if !inner.prefix.is_empty() => (Router::new().nest(&inner.prefix, routes), String::new()),
        Mount::AtRoot => (routes, String::new()),
        Mount::AtPrefix => (routes, inner.prefix.clone()),
    };
    // Around the mount, outermost first: the request's trace span, then the mount check.
    routes.layer(
        ServiceBuilder::new()
            .layer(TraceLayer::new_for_http().make_span_with(request_span))
            .layer(middleware::from_fn_with_state(Arc::new((expected, inner.prefix.clone())), mount_check)),
    )
}

/// The limits (S16), outermost first: the per-peer rate, then tower-http's body limit (its
/// 413s answered as a `google.rpc.Status` naming the setting) and body read timeout.
fn limits(
    inner: Arc<Inner>,
) -> impl tower::Layer<
    axum::routing::Route,
    Service: tower::Service<Request, Response = Response, Error = std::convert::Infallible, Future: Send>
                 + Clone
                 + Send
                 + Sync
                 + 'static,
> + Clone {
    let max = inner.config.server.max_request_bytes;
    let read_timeout = Duration::from_secs(inner.config.server.body_read_timeout_secs.max(1));
    let deadline = Duration::from_secs(inner.config.server.body_deadline_secs.max(1));
    ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(inner, rate_limit))
        .map_response(move |r: axum::http::Response<_>| too_large_as_status(r.map(axum::body::Body::new), max))
        .layer(RequestBodyLimitLayer::new(max))
        .layer(RequestBodyTimeoutLayer::new(read_timeout))
        .map_request(|r: axum::http::Request<_>| r.map(axum::body::Body::new))
        .layer(middleware::from_fn_with_state(Arc::new((deadline, max)), body_deadline))
}

/// The whole request body within `server.body_deadline_secs` (issue 34): the read timeout
/// restarts with every frame, so a body that trickles a byte at a time would hold its
/// connection for ever. Bodies are at most `server.max_request_bytes` and every handler
/// reads its body whole, so reading it here first costs nothing more.
async fn body_deadline(State(limits): State<Arc<(Duration, usize)>>, req: Request, next: Next) -> Response {
    let (deadline, max) = *limits;
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(deadline, axum::body::to_bytes(body, usize::MAX)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            // The body limit's error (`length limit exceeded`) somewhere in the chain.
            let mut cause: Option<&dyn std::error::Error> = Some(&e);
            let mut too_large = false;
            while let Some(c) = cause {
                too_large |= c.to_string().contains("length limit");
                cause = c.source();
            }
            return if too_large {
                too_large_as_status(StatusCode::PAYLOAD_TOO_LARGE.into_response(), max)
            } else {
                status_error(StatusCode::REQUEST_TIMEOUT, "DEADLINE_EXCEEDED", format!("the request body failed: {e}"))
            };
        }
        Err(_) => {
            return status_error(
                StatusCode::REQUEST_TIMEOUT,
                "DEADLINE_EXCEEDED",
                format!(
                    "the request body did not arrive within {} s (`server.body_deadline_secs`)",
                    deadline.as_secs()
                ),
            );
        }
    };
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

/// The span of a request: its method and path and, once known, the A2A operation, binding
/// and outcome (a2a-server records them) and the task id ([`record_task_id`]). Never a
/// header or a body: a message or a push token would be logged with it. With traces on
/// (issue 32) it is the request's server span, the child of an incoming W3C `traceparent`.
fn request_span(req: &Request) -> tracing::Span {
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        path = %req.uri().path(),
        task_id = tracing::field::Empty,
        "a2a.operation" = tracing::field::Empty,
        "a2a.binding" = tracing::field::Empty,
        "a2a.outcome" = tracing::field::Empty,
        "otel.kind" = "server",
        "otel.status_code" = tracing::field::Empty,
    );
    if req.headers().contains_key("traceparent") {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(req.headers())));
        let _ = span.set_parent(parent);
    }
    span
}

/// Names the task a request is about in its trace span.
pub(crate) fn record_task_id(task_id: &str) {
    tracing::Span::current().record("task_id", tracing::field::display(task_id));
}

/// A request's headers as the propagator reads them.
struct Headers<'a>(&'a axum::http::HeaderMap);

impl opentelemetry::propagation::Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// A 413 from the body limit (plain text from the library, or from a route reading a
/// chunked body past it) answered as every other error: a `google.rpc.Status` naming the
/// setting. A route's own JSON answer is left as it is.
fn too_large_as_status(r: Response, max: usize) -> Response {
    let json = r.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if r.status() != StatusCode::PAYLOAD_TOO_LARGE || json {
        return r;
    }
    status_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "INVALID_ARGUMENT",
        format!("the request body is over {max} bytes (`server.max_request_bytes`)"),
    )
}

/// A router for a host to merge at its root (S17): the routes carry the prefix, their
/// OpenAPI operations are tagged `A2A: <agent id>`, the gate, mount check and limits are
/// its layers, and CORS and `/ui` are not served (a warning names each when configured).
pub fn harness_router(harness: &Harness) -> Router {
    router(harness, Mount::AtRoot)
}

/// The OpenAPI document, relative to the prefix.
pub const OPENAPI_PATH: &str = "/openapi.json";
/// The monitor snapshot, relative to the prefix.
pub const MONITOR_PATH: &str = "/_monitor";
/// Readiness for a load balancer (issue 13), relative to the prefix: 200 while the harness
/// runs, Temporal answers and the store reads; 503 naming what does not otherwise.
pub const READY_PATH: &str = "/_ready";
/// The push receiver (S15), relative to the prefix.
pub const PUSH_PATH: &str = "/a2a/push/{task_id}";
/// The largest push body the receiver reads (S15).
pub const PUSH_MAX_BYTES: usize = 64 * 1024;

/// `POST /a2a/push/{task_id}` (S15): a remote agent's push for the local stand-in of a
/// delegated sub-task. Over 64 KiB: 413; not a StreamResponse: 400; then every refusal
/// (missing or wrong token, no such stand-in, an ended one, one on another task queue, a
/// body naming another remote task) is the same 401, so the answer tells nothing about
/// which. A push the stand-in's `remote_push` validator takes is 204. The token goes to the
/// workflow only as its SHA-256 digest; the body is never logged (it can carry a token).
async fn push_receiver(
    State(inner): State<Arc<Inner>>,
    axum::extract::Path(task_id): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if body.len() > PUSH_MAX_BYTES {
        return status_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "INVALID_ARGUMENT",
            format!("a push body is at most {PUSH_MAX_BYTES} bytes"),
        );
    }
    let Ok(event) = serde_json::from_slice::<a2a_types::StreamResponse>(&body) else {
        return status_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "the body is not an A2A StreamResponse".into(),
        );
    };
    // Every refusal answers at the same moment (issue 34): no token (at once), an id that is
    // no stand-in (a store read) and a wrong token (a Temporal call) cannot be told apart by
    // how long they take, as long as none takes longer than the floor.
    let floor = tokio::time::Instant::now() + PUSH_REFUSAL_FLOOR;
    let refused = || async move {
        tokio::time::sleep_until(floor).await;
        status_error(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", "push refused".into())
    };
    let token = headers.get("x-a2a-notification-token").and_then(|v| v.to_str().ok()).filter(|t| !t.is_empty());
    let (Some(token), Some(handler)) = (token, inner.handler.get()) else { return refused().await };
    // S19: a stand-in on another agent's queue is not ours to wake.
    if !matches!(handler.owned(&task_id).await, Ok(true)) {
        return refused().await;
    }
    let push = harness_workflow::RemotePush { token_digest: harness_agent::activities::remote::digest(token), event };
    if handler.temporal.remote_push(&task_id, push).await {
        StatusCode::NO_CONTENT.into_response()
    } else {
        refused().await
    }
}

/// The moment every refusal of the push receiver waits for, from the request's start: past
/// the slowest refusal (a Temporal update's round trip) on a healthy deployment.
pub const PUSH_REFUSAL_FLOOR: Duration = Duration::from_millis(150);

/// The web renderer, relative to the prefix.
pub const UI_PATH: &str = "/ui";

/// Around `ui_dir`'s files (issue 34): a path that resolves outside the directory (a
/// symlink pointing out of it) is a 404, and a directory's redirect to its `/` form keeps
/// the prefix and `/ui` (the file service only sees the path below them).
async fn ui_guard(State(root): State<Arc<PathBuf>>, req: Request, next: Next) -> Response {
    let current = req.uri().path().to_string();
    let decoded = percent_encoding::percent_decode_str(&current).decode_utf8_lossy().into_owned();
    if let Ok(real) = std::fs::canonicalize(root.join(decoded.trim_start_matches('/')))
        && !real.starts_with(root.as_path())
    {
        return no_route(req.method().clone(), req.uri().clone()).await;
    }
    let original = req.extensions().get::<OriginalUri>().map(|u| u.path().to_string()).unwrap_or_default();
    let mounted = original.strip_suffix(current.as_str()).unwrap_or("").to_string();
    let mut response = next.run(req).await;
    if response.status().is_redirection()
        && let Some(location) = response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok())
        && location.starts_with('/')
        && !mounted.is_empty()
        && let Ok(full) = HeaderValue::from_str(&format!("{mounted}{location}"))
    {
        response.headers_mut().insert(header::LOCATION, full);
    }
    response
}

/// 500 when the router is mounted elsewhere than its prefix, naming both paths.
async fn mount_check(State(paths): State<Arc<(String, String)>>, req: Request, next: Next) -> Response {
    let (expected, prefix) = paths.as_ref();
    let current = req.uri().path().to_string();
    let original = req.extensions().get::<OriginalUri>().map(|u| u.path().to_string()).unwrap_or(current.clone());
    let mounted = original.strip_suffix(current.as_str()).unwrap_or("").trim_end_matches('/');
    if mounted != expected.trim_end_matches('/') {
        let shown = if mounted.is_empty() { "/" } else { mounted };
        let configured = if prefix.is_empty() { "/" } else { prefix.as_str() };
        return status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            format!(
                "the harness is mounted at `{shown}` but its configured prefix (`server.prefix`) is `{configured}`: \
                 mount it at the prefix or change the prefix"
            ),
        );
    }
    next.run(req).await
}

/// 503 while the harness is not started; no route is reached.
async fn gate(State(inner): State<Arc<Inner>>, req: Request, next: Next) -> Response {
    if inner.handler.get().is_none() {
        let mut r = status_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "UNAVAILABLE",
            "the harness is not started (or has stopped)".into(),
        );
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    }
    next.run(req).await
}

fn cors_layer(origins: &[String]) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, Method};
    let origins: Vec<HeaderValue> = origins.iter().filter_map(|o| o.parse().ok()).collect();
    tower_http::cors::CorsLayer::new()
        .allow_origin(origins)
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers([
            header::CONTENT_TYPE,
            header::AUTHORIZATION,
            HeaderName::from_static("a2a-version"),
            HeaderName::from_static("a2a-extensions"),
            HeaderName::from_static("x-participant-id"),
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([HeaderName::from_static("a2a-extensions")])
}

/// Requests per peer in the current minute (S16): a fixed one-minute window per peer.
pub(crate) struct RateLimiter {
    per_minute: u32,
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

impl RateLimiter {
    pub(crate) fn new(per_minute: u32) -> Self {
        Self { per_minute, windows: Mutex::new(HashMap::new()) }
    }

    /// `Err(seconds to wait)` when the peer is over its limit.
    fn admit(&self, peer: &str) -> Result<(), u64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut windows = self.windows.lock().expect("rate windows");
        if windows.len() > 10_000 {
            windows.retain(|_, (start, _)| now.duration_since(*start) < Duration::from_secs(60));
        }
        let entry = windows.entry(peer.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= Duration::from_secs(60) {
            *entry = (now, 0);
        }
        if entry.1 >= self.per_minute {
            // Rounded up: a client that waits exactly this long is admitted (issue 34).
            let wait = Duration::from_secs(60).saturating_sub(now.duration_since(entry.0));
            return Err(wait.as_secs_f64().ceil().max(1.0) as u64);
        }
        entry.1 += 1;
        Ok(())
    }
}

/// A peer over `server.rate_limit_per_minute` is 429 with `Retry-After` (S16).
/// `/_ready` and the card are not counted (issue 34): a load balancer's probes and a client's
/// discovery must not take a peer's budget, nor be refused under it; both are cheap (the
/// card is cached, readiness reads two flags and pings the store). The push receiver is
/// counted: a refused push can cost a Temporal call, and a remote agent retries its pushes.
async fn rate_limit(State(inner): State<Arc<Inner>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == READY_PATH || path == a2a_server::CARD_PATH {
        return next.run(req).await;
    }
    // The peer is the TCP peer when the server gives it (or, behind a trusted proxy, the
    // client its X-Forwarded-For names); a host that mounts the router without connect info
    // shares one window among its callers. The window is this instance's (docs/deploying.md).
    let forwarded = req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok());
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or("unknown".to_string(), |c| inner.proxies.client(c.0.ip(), forwarded).to_string());
    if let Err(wait) = inner.limiter.admit(&peer) {
        let mut r = status_error(
            StatusCode::TOO_MANY_REQUESTS,
            "RESOURCE_EXHAUSTED",
            format!("too many requests: over {} per minute (`server.rate_limit_per_minute`)", inner.limiter.per_minute),
        );
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait));
        return r;
    }
    next.run(req).await
}

async fn ready(State(inner): State<Arc<Inner>>) -> Response {
    let handler = inner.handler.get();
    let Some(handler) = handler else {
        return status_error(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", "the harness is not started".into());
    };
    let temporal = handler.health().to_json();
    let store = match handler.store.ping().await {
        Ok(()) => serde_json::json!({"up": true}),
        Err(e) => serde_json::json!({"up": false, "why": e.to_string()}),
    };
    let ready = temporal["up"] == true && store["up"] == true;
    let body = serde_json::json!({"ready": ready, "temporal": temporal, "store": store}).to_string();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut r = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if !ready {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

/// `GET /metrics` (issue 32): the gauges read now (Temporal's health, open tasks by state),
/// then everything the process's recorder holds, in the Prometheus text format.
async fn scrape(State(inner): State<Arc<Inner>>) -> Response {
    let Some(handle) = crate::metrics::install() else {
        return status_error(StatusCode::NOT_FOUND, "NOT_FOUND", "metrics are not recorded by this harness".into());
    };
    if let Some(handler) = inner.handler.get() {
        match handler.store.open_task_counts(handler.task_queue()).await {
            Ok(open) => crate::metrics::set_gauges(handler.health().is_up(), &open),
            Err(e) => tracing::warn!(error = %e, "metrics: the open tasks were not counted"),
        }
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], handle.render()).into_response()
}

/// The latest monitor snapshot (S20), shared with the refresh task.
#[derive(Clone, Default)]
pub(crate) struct MonitorSnapshot(Arc<Mutex<serde_json::Value>>);

async fn monitor(State(inner): State<Arc<Inner>>) -> Response {
    let snapshot = inner.monitor.0.lock().expect("monitor").clone();
    let body = if snapshot.is_null() {
        serde_json::json!({"agent": inner.config.agent.id, "taken_at": null, "running": []})
    } else {
        snapshot
    };
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// Refreshes the monitor snapshot every `interval`: each task of this queue that has not
/// ended, as the store has it (no read asks a workflow, issue 20).
pub(crate) fn spawn_monitor(
    handler: Arc<HarnessHandler>,
    snapshot: MonitorSnapshot,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match handler.monitor_rows().await {
                Ok(rows) => {
                    let value = serde_json::json!({
                        "agent": handler.agent_id(),
                        "taken_at": a2a_types::now_timestamp(),
                        "temporal": handler.health().to_json(),
                        "running": rows,
                    });
                    *snapshot.0.lock().expect("monitor") = value;
                }
                Err(e) => tracing::warn!(error = %e, "monitor: the snapshot was not refreshed"),
            }
            tokio::time::sleep(interval).await;
        }
    })
}
