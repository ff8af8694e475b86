//! Issue 32: OpenTelemetry traces and JSON logs, seen from the tools an operator runs. The
//! `tiny-harness serve` binary exports to an OTLP receiver that decodes the real protobuf
//! (`contract_tests::otlp`: HTTP/protobuf and the collector's gRPC service), configured by
//! the standard `OTEL_*` variables or `[observability]`; the `openai` provider against the
//! local wire-format endpoint, a tool of a real MCP server (the official Python SDK), the
//! test dev server, real HTTP.

use contract_tests::openai_mock::MockOpenAi;
use contract_tests::otlp::{self, Span};
use contract_tests::{HarnessOptions, HarnessProcess};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The interop venv's Python (`cargo xtask test` builds it; TINY_HARNESS_INTEROP_PYTHON).
fn python() -> PathBuf {
    std::env::var("TINY_HARNESS_INTEROP_PYTHON")
        .map(Into::into)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python"))
}

const API_KEY: &str = "sk-trace-4f1e9a0c7b";
const COLLECTOR_KEY: &str = "otlp-key-2c9d51";
const SECRET: &str = "hunter2-trace-8d3b";
const TRACE: &str = "5bf4a1c3d2e6f7081928374655a6b7c8";
const PARENT: &str = "a1b2c3d4e5f60718";

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one span `{name}`: {spans:#?}");
    found[0]
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// One trace from the client's `traceparent` through the request, Temporal and the worker to
/// the turn, and under it both model calls (GenAI attributes: provider, model, tokens, finish
/// reason, time to first token) and both tool calls, the MCP server reading the call's own
/// context; the message's text on the model's span redacted (record_content on); no secret
/// anywhere in what was exported or logged; the collector's key (OTEL_EXPORTER_OTLP_HEADERS)
/// sent to it; and JSON log lines carrying the trace's ids.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_with_a_model_and_a_tool_call_is_one_trace_over_otlp_http_with_no_secret_in_it() {
    let mock = MockOpenAi::start().await;
    let (otlp_url, received) = otlp::http_receiver().await;
    let server =
        serde_json::to_string(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/mcp_server.py")).unwrap();
    let h = HarnessProcess::start(HarnessOptions {
        agent_extra: "model = \"gpt\"\n".into(),
        secrets: vec![SECRET.into()],
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\napi_key_env = \"TEST_TRACE_KEY\"\n\n\
             [[mcp]]\nid = \"notes\"\ncommand = {}\nargs = [{server}]\n\n\
             [observability]\nrecord_content = true\nlog_format = \"json\"\n",
            mock.base_url,
            json!(python().display().to_string()),
        ),
        env: vec![
            ("TEST_TRACE_KEY".into(), API_KEY.into()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), otlp_url),
            ("OTEL_SERVICE_NAME".into(), "traces-test".into()),
            ("OTEL_EXPORTER_OTLP_HEADERS".into(), format!("authorization=Bearer {COLLECTOR_KEY}")),
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
            // tower-http's request lines are logged inside the request's span.
            ("RUST_LOG".into(), "warn,tiny_harness=info,tower_http=debug".into()),
        ],
        ..Default::default()
    })
    .await;

    let text = format!(
        "Where is the tea? My password is {SECRET}.\n@call notes__lookup {{\"key\": \"tea\"}}\n@call notes__traceparent {{}}"
    );
    let answer = send_traced(&h.base_url, None, &text, &format!("00-{TRACE}-{PARENT}-01")).await;
    let task = answer["id"].as_str().unwrap_or_else(|| panic!("{answer:#}")).to_string();
    assert_eq!(answer["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{answer:#}");

    let spans = received
        .until("the request, two model calls and a tool call", |spans| {
            named(spans, "SendMessage").len() == 1
                && named(spans, "chat m").len() == 2
                && named(spans, "execute_tool notes__lookup").len() == 1
                && named(spans, "execute_tool notes__traceparent").len() == 1
                && named(spans, "turn").len() == 1
        })
        .await;
    let ours: Vec<&Span> = spans.iter().filter(|s| s.trace_id == TRACE).collect();
    assert!(ours.len() >= 4, "the spans of the client's trace: {spans:#?}");

    // The request: a server span under the client's, naming the operation and its task.
    let request = one(&spans, "SendMessage");
    assert_eq!(request.trace_id, TRACE, "the incoming traceparent is honoured");
    assert_eq!(request.parent_span_id, PARENT);
    assert_eq!(request.kind, "Server");
    assert_eq!(request.service, "traces-test", "OTEL_SERVICE_NAME");
    assert_eq!(request.attr("a2a.operation"), Some("SendMessage"));
    assert_eq!(request.attr("a2a.binding"), Some("jsonrpc"));
    assert_eq!(request.attr("a2a.outcome"), Some("ok"));
    assert_eq!(request.attr("task_id"), Some(task.as_str()));

    // The turn the message started, under the request (through Temporal and the worker).
    let turn = one(&spans, "turn");
    assert_eq!((turn.trace_id.as_str(), turn.parent_span_id.as_str()), (TRACE, request.span_id.as_str()));
    assert_eq!(turn.attr("turn.outcome"), Some("input_required"));
    assert_eq!(turn.attr("turn"), Some("1"));
    assert_eq!(turn.attr("task_id"), Some(task.as_str()));

    // Both model calls: client spans under the turn.
    let chats = named(&spans, "chat m");
    for chat in &chats {
        assert_eq!((chat.trace_id.as_str(), chat.parent_span_id.as_str()), (TRACE, turn.span_id.as_str()));
        assert_eq!(chat.kind, "Client");
        assert_eq!(chat.attr("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.attr("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.attr("gen_ai.system"), Some("openai"));
        assert_eq!(chat.attr("gen_ai.request.model"), Some("m"));
        assert_eq!(chat.attr("gen_ai.usage.input_tokens"), Some("12"), "the endpoint's usage");
        assert_eq!(chat.attr("gen_ai.usage.output_tokens"), Some("4"));
        assert_eq!(chat.attr("task_id"), Some(task.as_str()));
        let input = chat.attr("gen_ai.input.messages").unwrap_or_default();
        assert!(
            input.contains("Where is the tea?") && input.contains("[REDACTED]"),
            "record_content, redacted: {input}"
        );
    }
    let finishes: Vec<(&str, &str)> = chats
        .iter()
        .map(|c| (c.attr("round").unwrap_or_default(), c.attr("gen_ai.response.finish_reasons").unwrap_or_default()))
        .collect();
    assert!(finishes.contains(&("0", "tool_calls")) && finishes.contains(&("1", "stop")), "{finishes:?}");
    let answering = chats.iter().find(|c| c.attr("round") == Some("1")).unwrap();
    let ttft: f64 = answering.attr("gen_ai.server.time_to_first_token").unwrap_or_default().parse().unwrap();
    assert!(ttft > 0.0 && ttft < 30.0, "time to first token, in seconds: {ttft}");
    let said = answering.attr("gen_ai.output.messages").unwrap_or_default();
    assert!(said.starts_with("Tools said: tea is on the top shelf | traceparent 00-"), "{answering:#?}");

    // The tool calls, under the turn too; the MCP server got each call's own context.
    let tool = one(&spans, "execute_tool notes__lookup");
    assert_eq!((tool.trace_id.as_str(), tool.parent_span_id.as_str()), (TRACE, turn.span_id.as_str()));
    assert_eq!(tool.attr("gen_ai.tool.name"), Some("notes__lookup"));
    assert_eq!(tool.attr("tool.outcome"), Some("ok"));
    assert!(tool.attr("gen_ai.tool.call.id").is_some_and(|id| id.starts_with("call_0_")), "{tool:#?}");
    let asked = one(&spans, "execute_tool notes__traceparent");
    assert_eq!(asked.parent_span_id, turn.span_id);
    assert!(
        said.ends_with(&format!("traceparent 00-{TRACE}-{}-01", asked.span_id)),
        "the MCP server read the tool call's traceparent in `_meta`: {said}"
    );

    // Nothing secret was exported: neither the configured secret nor the model's key.
    let raw = String::from_utf8_lossy(&received.raw()).to_string();
    assert!(!raw.contains(SECRET), "a redaction value reached the trace backend");
    assert!(!raw.contains(API_KEY), "the model's API key reached the trace backend");

    // JSON log lines: every line an object; the request's lines carry its trace and span ids.
    let log = h.log();
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty(), "{log}");
    let traced: Vec<&Value> = lines.iter().filter(|l| l["trace_id"] == TRACE).collect();
    assert!(
        traced.iter().any(|l| l["span_id"] == json!(request.span_id) && l["span"] == "request"),
        "a line of the request's span carries its ids: {log}"
    );
    for line in &lines {
        assert!(line["timestamp"].is_string() && line["level"].is_string() && line["target"].is_string(), "{line}");
    }
    assert!(!log.contains(SECRET) && !log.contains(API_KEY) && !log.contains(COLLECTOR_KEY), "{log}");
    // OTEL_EXPORTER_OTLP_HEADERS reach the collector (its key), and only the collector.
    assert!(received.authorizations().iter().all(|a| a == &format!("Bearer {COLLECTOR_KEY}")));
    assert!(!received.authorizations().is_empty());
}

/// `[observability]` alone, over gRPC to the collector's `TraceService`: a request without a
/// `traceparent` starts its own trace, and the turn it delivered (and the turn's model call)
/// are in it; a failed request's span says so.
#[tokio::test(flavor = "multi_thread")]
async fn the_config_section_exports_over_grpc_and_a_request_without_traceparent_starts_a_trace() {
    let (otlp_url, received) = otlp::grpc_receiver().await;
    let h = HarnessProcess::start(HarnessOptions {
        extra_config: format!(
            "[observability]\notlp_endpoint = \"{otlp_url}\"\notlp_protocol = \"grpc\"\nservice_name = \"from-config\"\n"
        ),
        env: vec![("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into())],
        ..Default::default()
    })
    .await;
    let client = h.client();
    let answer = client.send(contract_tests::user_text("hello"), json!({"returnImmediately": false})).await;
    let task = answer["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{answer:#}")).to_string();
    let missing = client.rpc("GetTask", json!({"id": "no-such-task"})).await;
    assert!(missing.get("error").is_some(), "{missing:#}");

    let spans = received
        .until("the two requests and the echo turn", |spans| {
            named(spans, "SendMessage").len() == 1
                && named(spans, "GetTask").len() == 1
                && !named(spans, "chat").is_empty()
                && !named(spans, "turn").is_empty()
        })
        .await;
    let request = one(&spans, "SendMessage");
    assert_eq!(request.parent_span_id, "", "no traceparent came in: a root span");
    assert_eq!(request.service, "from-config", "`observability.service_name`");
    assert_eq!(request.attr("task_id"), Some(task.as_str()));
    let turn = one(&spans, "turn");
    assert_eq!(
        (turn.trace_id.as_str(), turn.parent_span_id.as_str()),
        (request.trace_id.as_str(), request.span_id.as_str())
    );
    let chat = one(&spans, "chat");
    assert_eq!((chat.trace_id.as_str(), chat.parent_span_id.as_str()), (turn.trace_id.as_str(), turn.span_id.as_str()));
    assert_eq!(chat.attr("gen_ai.provider.name"), Some("tiny-harness"), "echo is the harness's own");
    assert_eq!(chat.attr("gen_ai.input.messages"), None, "record_content is off by default");
    let failed = one(&spans, "GetTask");
    assert_eq!(failed.attr("a2a.outcome"), Some("TASK_NOT_FOUND"));
    assert_eq!(failed.status, "Error");
    assert_ne!(failed.trace_id, request.trace_id, "each request its own trace");
}

/// A blocking SendMessage of `text` (to `task`, when given) carrying `traceparent`; the
/// answer's task.
async fn send_traced(base: &str, task: Option<&str>, text: &str, traceparent: &str) -> Value {
    let message = contract_tests::message_from(None, task, json!([{"text": text}]));
    let answer =
        contract_tests::rpc_as(base, Some(("traceparent", traceparent)), "SendMessage", json!({"message": message}))
            .await;
    answer["result"]["task"].clone()
}

/// A harness `agent-<me>` on `port` whose `[[agents]]` names `peer` (its id and port),
/// exporting its spans to `otlp` as service `agent-<me>`.
async fn agent_exporting(me: &str, port: u16, peer: (&str, u16), otlp: &str) -> HarnessProcess {
    HarnessProcess::start(HarnessOptions {
        port: Some(port),
        agent_extra: format!("id = \"agent-{me}\"\n"),
        extra_config: format!(
            "[[agents]]\nid = \"{}\"\nurl = \"http://127.0.0.1:{}/.well-known/agent-card.json\"\n\n",
            peer.0, peer.1
        ),
        env: vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), otlp.to_string()),
            ("OTEL_SERVICE_NAME".into(), format!("agent-{me}")),
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
        ],
        ..Default::default()
    })
    .await
}

/// Delegation crosses harnesses in one trace: `/delegate` on harness A (under the client's
/// `traceparent`) sends the brief to harness B with the W3C `traceparent` of A's client span,
/// and B's request span is that span's child.
#[tokio::test(flavor = "multi_thread")]
async fn a_delegated_brief_carries_the_trace_to_the_remote_agent() {
    let (otlp_url, received) = otlp::http_receiver().await;
    let (pa, pb) = (tiny_harness::temporal_dev::free_port(), tiny_harness::temporal_dev::free_port());
    let _b = agent_exporting("b", pb, ("a", pa), &otlp_url).await;
    let a = agent_exporting("a", pa, ("b", pb), &otlp_url).await;
    let parent = send_traced(&a.base_url, None, "plan the trip", &format!("00-{TRACE}-{PARENT}-01")).await;
    let parent_id = parent["id"].as_str().unwrap_or_else(|| panic!("{parent:#}")).to_string();
    let other = "0af7651916cd43dd8448eb211c80319c";
    let reply =
        send_traced(&a.base_url, Some(&parent_id), "/delegate b book the train", &format!("00-{other}-{PARENT}-01"))
            .await;
    assert!(reply["status"]["message"]["metadata"]["task_ref"].is_string(), "{reply:#}");

    let spans = received
        .until("the brief's client span on A and its request span on B", |spans| {
            spans.iter().any(|s| s.name == "A2A SendMessage b")
                && spans.iter().any(|s| s.service == "agent-b" && s.name == "SendMessage")
        })
        .await;
    let out = one(&spans, "A2A SendMessage b");
    assert_eq!((out.service.as_str(), out.kind.as_str()), ("agent-a", "Client"));
    let delegating = spans
        .iter()
        .find(|s| s.service == "agent-a" && s.name == "SendMessage" && s.trace_id == other)
        .unwrap_or_else(|| panic!("the /delegate request's span on A: {spans:#?}"));
    assert_eq!(
        (out.trace_id.as_str(), out.parent_span_id.as_str()),
        (other, delegating.span_id.as_str()),
        "the brief is sent under the message that delegated, not the one that opened the task"
    );
    let remote = spans.iter().find(|s| s.service == "agent-b" && s.name == "SendMessage").unwrap();
    assert_eq!(
        (remote.trace_id.as_str(), remote.parent_span_id.as_str()),
        (other, out.span_id.as_str()),
        "B honours the traceparent A sent"
    );
}

/// `--log-format json` (the flag, traces off): every line a JSON object with its time, level,
/// target and fields, the request's lines naming their span (no trace ids without traces);
/// a format the harness does not know is refused naming the flag and the formats.
#[tokio::test(flavor = "multi_thread")]
async fn log_format_json_writes_one_object_per_line_and_an_unknown_format_is_refused() {
    let h = HarnessProcess::start(HarnessOptions {
        args: vec!["--log-format".into(), "json".into()],
        env: vec![("RUST_LOG".into(), "warn,tiny_harness=info,tower_http=debug".into())],
        ..Default::default()
    })
    .await;
    let answer = h.client().send(contract_tests::user_text("hello"), json!({})).await;
    assert!(answer["result"]["task"]["id"].is_string(), "{answer:#}");
    let log = h.log();
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("tiny-harness is serving") && !l.starts_with("  "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}\n{log}")))
        .collect();
    let request = lines
        .iter()
        .find(|l| l["target"] == "tower_http::trace::on_response" && l["span"] == "request")
        .unwrap_or_else(|| panic!("the request's response line: {log}"));
    assert!(request["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')), "{request}");
    assert_eq!(request["level"], "DEBUG");
    assert!(request.get("trace_id").is_none(), "no trace ids with traces off: {request}");

    let refused = std::process::Command::new(contract_tests::harness_binary())
        .args(["serve", "--log-format", "yaml"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--log-format") && said.contains("`yaml` is not a log format: `text` or `json`"), "{said}");
}
