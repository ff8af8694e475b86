//! Prometheus metrics at `GET /metrics` (issue 32), through the `metrics` facade and its
//! Prometheus exporter. The first harness built with the route (RouteOptions `metrics`, on
//! by default) installs the process's recorder; without it every count is a no-op.
//!
//! What is counted where: requests (a2a-server), messages accepted and refused (here, at
//! admission), model and tool calls (harness-agent's activities), pushes (harness-push),
//! store writes (harness-store). Open tasks by state and whether Temporal answers are read
//! when scraped. docs/observability.md lists them.

use a2a_types::{A2AError, TaskState};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// The route, relative to the prefix.
pub const METRICS_PATH: &str = "/metrics";

/// Messages (SendMessage and SendStreamingMessage) by `outcome`: `accepted`, or the
/// refusal's reason (`TASK_NOT_FOUND`, `INVALID_PARAMS`, `UNAVAILABLE`, ...).
pub const MESSAGES: &str = "harness_messages_total";
/// Open tasks of this agent's queue by `state`, read from the store when scraped.
pub const OPEN_TASKS: &str = "harness_open_tasks";
/// 1 while Temporal answers this harness, else 0.
pub const TEMPORAL_UP: &str = "harness_temporal_up";

/// Histogram buckets of every `_seconds` metric: 1 ms to 2 min.
const BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process's recorder, installed by the first call. `None` when the host installed
/// another recorder first (the harness's metrics then go to the host's).
pub(crate) fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
                .expect("the buckets are not empty");
            match builder.install_recorder() {
                Ok(handle) => {
                    describe();
                    // Histogram samples wait in the recorder until drained: drained every
                    // 5 s here, so a harness nobody scrapes holds no more than 5 s of them.
                    let drained = handle.clone();
                    let upkeep = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || {
                        loop {
                            std::thread::sleep(std::time::Duration::from_secs(5));
                            drained.run_upkeep();
                        }
                    });
                    if let Err(e) = upkeep {
                        tracing::warn!(error = %e, "metrics: the upkeep thread did not start");
                    }
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "GET /metrics serves nothing: a metrics recorder was installed before the harness's");
                    None
                }
            }
        })
        .as_ref()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(a2a_server::metrics::REQUESTS, "A2A requests answered, by operation, binding and outcome");
    describe_histogram!(
        a2a_server::metrics::REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "A2A request latency to the answer (a stream: to its first event)"
    );
    describe_counter!(MESSAGES, "Messages accepted, or refused by reason");
    describe_gauge!(OPEN_TASKS, "Open tasks of this agent's queue by state");
    describe_gauge!(TEMPORAL_UP, "1 while Temporal answers, else 0");
    describe_counter!(harness_agent::metrics::MODEL_CALLS, "Model calls by model and outcome");
    describe_histogram!(harness_agent::metrics::MODEL_CALL_SECONDS, metrics::Unit::Seconds, "Model call duration");
    describe_counter!(harness_agent::metrics::MODEL_TOKENS, "Model tokens by model and kind");
    describe_counter!(harness_agent::metrics::TURNS, "Model turns ended, by the state they ended in");
    describe_histogram!(
        harness_agent::metrics::TURN_SECONDS,
        metrics::Unit::Seconds,
        "Turn duration, start to final status"
    );
    describe_counter!(harness_agent::metrics::TOOL_CALLS, "Tool calls by tool and outcome");
    describe_histogram!(harness_agent::metrics::TOOL_CALL_SECONDS, metrics::Unit::Seconds, "Tool call duration");
    describe_counter!(harness_push::PUSH_DELIVERIES, "Push posts by outcome");
    describe_counter!(harness_push::PUSH_RETRIES, "Push posts tried again");
    describe_histogram!(
        harness_store::WRITE_SECONDS,
        metrics::Unit::Seconds,
        "Store write latency, from hand-over to commit"
    );
}

/// Counts a message's delivery to its workflow: `accepted`, or the reason Temporal's answer
/// refused it.
pub(crate) fn delivered(error: Option<&A2AError>) {
    metrics::counter!(MESSAGES, "outcome" => error.map_or("accepted", |e| e.kind.reason())).increment(1);
}

/// Counts a message refused before its delivery (checks, limits, an unknown task); one
/// delivered is counted by [`delivered`].
pub(crate) fn refusal<T>(result: Result<T, A2AError>) -> Result<T, A2AError> {
    if let Err(e) = &result {
        metrics::counter!(MESSAGES, "outcome" => e.kind.reason()).increment(1);
    }
    result
}

/// Sets the gauges read when scraped: Temporal's health and the open tasks by state (each
/// open state, 0 for none, so a state that empties shows 0 rather than its last count).
pub(crate) fn set_gauges(temporal_up: bool, open: &[(TaskState, i64)]) {
    metrics::gauge!(TEMPORAL_UP).set(if temporal_up { 1.0 } else { 0.0 });
    let states = TaskState::ALL.iter().filter(|s| !s.is_terminal() && **s != TaskState::Unspecified);
    for state in states {
        let n = open.iter().filter(|(s, _)| s == state).map(|(_, n)| *n).sum::<i64>();
        metrics::gauge!(OPEN_TASKS, "state" => state.as_str()).set(n as f64);
    }
}
