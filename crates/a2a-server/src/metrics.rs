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
    record_outcome(&span, operation, binding, outcome, error.is_some());
    let labels = [("operation", operation), ("binding", binding), ("outcome", outcome)];
    metrics::counter!(REQUESTS, &labels).increment(1);
    metrics::histogram!(REQUEST_SECONDS, &labels[..2]).record(began.elapsed().as_secs_f64());
}

/// Records the request's operation, binding and outcome (and `otel.status_code` when it
/// failed) on its span in one call where the span has all four fields (the host's request
/// span does): one `record` each had every log layer look the span up and add to its fields
/// once per field (issue 31). Else each field the span has is recorded alone.
fn record_outcome(span: &tracing::Span, operation: &str, binding: &str, outcome: &str, failed: bool) {
    let Some(fields) = span.metadata().map(|m| m.fields()) else { return };
    let error = "error";
    match ["a2a.operation", "a2a.binding", "a2a.outcome", "otel.status_code"].map(|name| fields.field(name)) {
        [Some(op), Some(bound), Some(out), Some(status)] => {
            let values: [(&tracing::field::Field, Option<&dyn tracing::Value>); 4] = [
                (&op, Some(&operation)),
                (&bound, Some(&binding)),
                (&out, Some(&outcome)),
                (&status, failed.then_some(&error as &dyn tracing::Value)),
            ];
            span.record_all(&fields.value_set(&values));
        }
        _ => {
            span.record("a2a.operation", operation);
            span.record("a2a.binding", binding);
            span.record("a2a.outcome", outcome);
            if failed {
                span.record("otel.status_code", error);
            }
        }
    }
}
