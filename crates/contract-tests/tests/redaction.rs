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
