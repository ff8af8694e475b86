//! Issue 32: what an operator's tools read. `GET /metrics` (Prometheus text format) before
//! and after a conversation with a model call and a tool call: the embeddable `Harness` in
//! this process with a host tool, the `openai` provider against the local endpoint that
//! speaks the real wire format, the test dev server, real HTTP.

use contract_tests::openai_mock::MockOpenAi;
use contract_tests::{A2AClient, HarnessOptions, HarnessProcess, user_text};
use serde_json::{Value, json};
use tiny_harness::Harness;

/// The sum of the samples of `name` whose labels include every one of `labels` (0 when
/// there is none), read from a Prometheus text exposition.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            (metric == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

async fn scrape(base: &str) -> String {
    let r = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(r.status(), 200);
    let kind = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    r.text().await.unwrap()
}

/// A message whose model calls a tool moves the counters an operator graphs: the request by
/// operation, binding and outcome (and its latency), the message accepted, two model calls
/// (the call, then the answer) with their tokens, the turn by outcome and its duration, the
/// tool call by name and outcome, store writes; a refused message counts under its reason;
/// the open task shows under its state and Temporal as up.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_move_with_a_message_its_model_and_tool_calls_and_a_refusal() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let c = mock.harness_config(dir.path(), "metrics");
    let city = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let harness = Harness::builder(c)
        .idempotent_tool("weather", "The weather of a city", city, |_ctx, args: Value| async move {
            Ok(format!("Sunny in {}", args["city"].as_str().unwrap_or("?")))
        })
        .build()
        .unwrap();
    harness.start().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = harness.router();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await;
    });

    let before = scrape(&base).await;
    let client = A2AClient::new(&base);
    let answer = client.send(user_text("@call weather {\"city\": \"Oslo\"}"), json!({})).await;
    let task = &answer["result"]["task"];
    let text = task["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Sunny in Oslo"), "the model read the tool's result: {answer}");
    let state = task["status"]["state"].as_str().unwrap().to_string();
    let refused = client
        .send(
            json!({"messageId": "x", "role": "ROLE_USER", "taskId": "no-such-task",
        "parts": [{"text": "hi"}]}),
            json!({}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32001, "{refused}");
    let read = reqwest::Client::new()
        .get(format!("{base}/a2a/rest/tasks/{}", task["id"].as_str().unwrap()))
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let after = scrape(&base).await;

    let moved = |name: &str, labels: &[(&str, &str)]| sample(&after, name, labels) - sample(&before, name, labels);
    let send_ok = [("operation", "SendMessage"), ("binding", "jsonrpc"), ("outcome", "ok")];
    assert_eq!(moved("a2a_requests_total", &send_ok), 1.0, "{after}");
    let send_refused = [("operation", "SendMessage"), ("binding", "jsonrpc"), ("outcome", "TASK_NOT_FOUND")];
    assert_eq!(moved("a2a_requests_total", &send_refused), 1.0, "{after}");
    let get_rest = [("operation", "GetTask"), ("binding", "rest"), ("outcome", "ok")];
    assert_eq!(moved("a2a_requests_total", &get_rest), 1.0, "{after}");
    let latency = [("operation", "SendMessage"), ("binding", "jsonrpc")];
    assert_eq!(moved("a2a_request_duration_seconds_count", &latency), 2.0, "{after}");
    assert!(sample(&after, "a2a_request_duration_seconds_bucket", &[("le", "+Inf")]) >= 3.0, "{after}");
    assert_eq!(moved("harness_messages_total", &[("outcome", "accepted")]), 1.0, "{after}");
    assert_eq!(moved("harness_messages_total", &[("outcome", "TASK_NOT_FOUND")]), 1.0, "{after}");
    assert_eq!(moved("harness_model_calls_total", &[("model", "gpt"), ("outcome", "ok")]), 2.0, "{after}");
    assert!(moved("harness_model_tokens_total", &[("model", "gpt"), ("kind", "input")]) > 0.0, "{after}");
    assert!(moved("harness_model_tokens_total", &[("model", "gpt"), ("kind", "output")]) > 0.0, "{after}");
    assert_eq!(moved("harness_turns_total", &[("outcome", "input_required")]), 1.0, "one turn, parked: {after}");
    assert_eq!(moved("harness_turn_duration_seconds_count", &[]), 1.0, "{after}");
    assert_eq!(moved("harness_tool_calls_total", &[("tool", "weather"), ("outcome", "ok")]), 1.0, "{after}");
    assert_eq!(moved("harness_tool_call_duration_seconds_count", &[("tool", "weather")]), 1.0, "{after}");
    assert!(moved("harness_store_write_duration_seconds_count", &[]) >= 3.0, "{after}");
    assert_eq!(sample(&after, "harness_open_tasks", &[("state", &state)]), 1.0, "{after}");
    assert_eq!(sample(&after, "harness_temporal_up", &[]), 1.0, "{after}");
    assert!(after.contains("# HELP harness_messages_total"), "metrics are described: {after}");
    harness.stop().await;
}

/// `[server] metrics = false` serves no `/metrics` (a JSON 404 like any unknown path).
#[tokio::test]
async fn metrics_can_be_turned_off_in_the_config() {
    let h =
        HarnessProcess::start(HarnessOptions { server_extra: "metrics = false".into(), ..Default::default() }).await;
    let r = reqwest::get(format!("{}/metrics", h.base_url)).await.unwrap();
    assert_eq!(r.status(), 404);
    let on = HarnessProcess::start(HarnessOptions::default()).await;
    let text = reqwest::get(format!("{}/metrics", on.base_url)).await.unwrap().text().await.unwrap();
    assert_eq!(sample(&text, "harness_temporal_up", &[]), 1.0, "{text}");
}
