//! Request metrics (issue 32): every A2A call counted by operation, binding and outcome, and
//! its latency, through the `metrics` facade. Nothing is recorded unless the host installed
//! a recorder (tiny-harness serves them at `GET /metrics`); a call is a registry lookup and an
//! atomic add, or nothing without a recorder.

use a2a_types::A2AError;
use std::time::Instant;

/// Requests answered, by `operation`, `binding` and `outcome` (`ok` or the error's reason).
pub const REQUESTS: &str = "a2a_requests_total";
/// Seconds from a request's arrival to its answer (a stream: to its first event).
pub const REQUEST_SECONDS: &str = "a2a_request_duration_seconds";

/// Counts one answered request and its latency, and names the operation, binding and
/// outcome on the request's span. `operation` is the JSON-RPC method (`unknown` for a method
/// no operation has, so a client cannot add labels). `error` is what the request was
/// answered with, if it failed.
pub(crate) fn record(operation: &'static str, binding: &'static str, began: Instant, error: Option<&A2AError>) {
    let outcome = error.map_or("ok", |e| e.kind.reason());
    // The request's span (the host's, when it made one): what the trace shows of it.
    let span = tracing::Span::current();
    span.record("a2a.operation", operation);
    {
        // A span exported over OpenTelemetry is named by its operation (the request's line
        // did not say which, for JSON-RPC); nothing without the OpenTelemetry layer.
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let cx = span.context();
        if cx.has_active_span() {
            cx.span().update_name(operation);
        }
    }
    span.record("a2a.binding", binding);
    span.record("a2a.outcome", outcome);
    if error.is_some() {
        span.record("otel.status_code", "error");
    }
    let labels = [("operation", operation), ("binding", binding), ("outcome", outcome)];
    metrics::counter!(REQUESTS, &labels).increment(1);
    metrics::histogram!(REQUEST_SECONDS, &labels[..2]).record(began.elapsed().as_secs_f64());
}
