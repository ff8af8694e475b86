//! S4: a secret sent in a message never reaches the store, the workflow history or the
//! model; it is `[REDACTED]` before the message reaches the workflow.

use contract_tests::{HarnessOptions, HarnessProcess, user_text};
use serde_json::json;
use temporalio_client::WorkflowFetchHistoryOptions;

const SHAPED: &str = "sk-live-abcdefghijklmnop123456";
const CONFIGURED: &str = "correct-horse-battery-staple";
const ASSIGNED: &str = "hunter2hunter2";

#[tokio::test]
async fn a_key_sent_in_a_message_never_reaches_the_store_the_history_or_the_model() {
    let h = HarnessProcess::start(HarnessOptions {
        secrets: vec![CONFIGURED.into()],
        lifecycle: "one-shot",
        linger_secs: 0,
        ..Default::default()
    })
    .await;
    let text = format!("use {SHAPED} with {CONFIGURED} and password={ASSIGNED}");
    let r = h.client().send(user_text(&text), json!({})).await;
    let task = &r["result"]["task"];
    let reply = task["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    // What the model saw is what it echoed.
    assert_eq!(reply, "echo: use [REDACTED] with [REDACTED] and password=[REDACTED]", "{r}");
    let id = task["id"].as_str().unwrap();

    let mut stored = Vec::new();
    for entry in std::fs::read_dir(h.data_dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("harness.db") {
            stored.extend(std::fs::read(&path).unwrap());
        }
    }
    assert!(!stored.is_empty());
    let raw = h
        .temporal()
        .await
        .get_workflow_handle::<harness_workflow::TaskWorkflow>(id)
        .fetch_history(WorkflowFetchHistoryOptions::default())
        .to_json()
        .await
        .unwrap();
    // Payloads are base64 in the JSON history: decode every string that decodes.
    let mut history = raw.clone();
    decoded_strings(&serde_json::from_slice(&raw).unwrap(), &mut history);
    assert!(String::from_utf8_lossy(&history).contains("[REDACTED]"), "the history carries the redacted message");
    for secret in [SHAPED, CONFIGURED, ASSIGNED] {
        let needle = secret.as_bytes();
        assert!(!stored.windows(needle.len()).any(|w| w == needle), "{secret} reached the store");
        assert!(!history.windows(needle.len()).any(|w| w == needle), "{secret} reached the workflow history");
    }
}

fn decoded_strings(v: &serde_json::Value, out: &mut Vec<u8>) {
    use base64::Engine;
    match v {
        serde_json::Value::String(s) => {
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(s) {
                out.extend(bytes);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| decoded_strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| decoded_strings(x, out)),
        _ => {}
    }
}

/// Issue 14 item 6: every request has a trace span that names its task (REST path or
/// JSON-RPC body alike) and never carries a body: with tower-http's request events on, the
/// log names the task id and not one word of the message. Written to a pipe, the log has no
/// terminal colour codes.
#[tokio::test]
async fn request_spans_name_the_task_and_never_a_body() {
    let h = HarnessProcess::start(HarnessOptions {
        env: vec![("RUST_LOG".into(), "warn,tiny_harness=info,tower_http=debug".into())],
        ..Default::default()
    })
    .await;
    let c = h.client();
    let marker = "zebra-quartz-body-text-7731";
    let r = c.send(user_text(marker), json!({})).await;
    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();
    let got = c.rpc("GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["id"], id.as_str(), "{got}");
    // A log that goes to a file or a pipe, not a terminal, carries no colour codes.
    let log = h.log();
    assert!(!log.contains('\u{1b}'), "terminal colour codes in a log written to a pipe:\n{log:?}");
    let spans: Vec<&str> =
        log.lines().filter(|l| l.contains("request{") && l.contains("finished processing")).collect();
    assert!(spans.len() >= 2, "a span per request:\n{log}");
    let named = spans.iter().filter(|l| l.contains(&format!("task_id={id}"))).count();
    assert!(named >= 2, "the send and the read name their task:\n{log}");
    assert!(!log.contains(marker), "a message body was logged:\n{log}");
}
