//! Issue 29: the `anthropic` provider kind (Anthropic's Messages API, streamed) over real
//! HTTP against a local endpoint that speaks the real wire format
//! (`contract_tests::anthropic_mock`), whose stream the official Anthropic Python SDK reads
//! (pinned in `interop/requirements.txt`); the `tiny-harness serve` binary with an MCP tool
//! source written with the official Python `mcp` SDK, the test dev server.

use contract_tests::anthropic_mock::MockAnthropic;
use contract_tests::{HarnessOptions, HarnessProcess, state, user_text};
use serde_json::{Value, json};
use std::path::PathBuf;

const KEY: &str = "sk-ant-test-0b9e7c5a3d1f";
const USAGE: &str = "io.github.madarauchiha-314.tiny-harness/usage";

fn python() -> PathBuf {
    std::env::var("TINY_HARNESS_INTEROP_PYTHON")
        .map(Into::into)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python"))
}

fn interop(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop").join(file).display().to_string()
}

async fn harness(mock: &MockAnthropic) -> HarnessProcess {
    let mcp = format!(
        "[[mcp]]\nid = \"notes\"\ncommand = {}\nargs = [{}]\n",
        json!(python().display().to_string()),
        json!(interop("mcp_server.py"))
    );
    HarnessProcess::start(HarnessOptions {
        agent_extra: "model = \"claude\"\ninstructions = \"You are a test agent.\"\n".into(),
        extra_config: format!(
            "[models.claude]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-mock\"\napi_key_env = \
             \"TEST_ANTHROPIC_KEY\"\nmax_output_tokens = 300\nmax_attempts = 3\n\n{mcp}",
            mock.base_url
        ),
        env: vec![("TEST_ANTHROPIC_KEY".into(), KEY.into())],
        ..Default::default()
    })
    .await
}

fn texts(message: &Value) -> String {
    message["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default()
}

/// The endpoint's stream is what the official SDK reads: it assembles the text deltas and
/// a tool_use block whose input came in pieces.
#[test]
fn the_official_anthropic_sdk_reads_the_endpoints_stream() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockAnthropic::start());
    let read = |prompt: &str| -> Value {
        let out = std::process::Command::new(python())
            .args([interop("anthropic_stream.py"), mock.base_url.clone(), KEY.into(), prompt.into()])
            .output()
            .expect("run the SDK");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let plain = read("hi");
    assert_eq!(plain["texts"], json!(["Hello", " from", " claude"]));
    assert_eq!(plain["message"]["stop_reason"], "end_turn");
    let tools = read("@call lookup {\"key\": \"tea\"}");
    let content = &tools["message"]["content"];
    assert_eq!(content[0], json!({"type": "text", "text": "Let me check.", "citations": null}));
    assert_eq!((content[1]["type"].as_str(), content[1]["input"].clone()), (Some("tool_use"), json!({"key": "tea"})));
    assert_eq!(tools["message"]["stop_reason"], "tool_use");
    assert_eq!(tools["message"]["usage"]["output_tokens"], 7);
    assert_eq!(mock.seen()[0].api_key.as_deref(), Some(KEY));
}

/// A turn on the anthropic provider: the model calls two MCP tools in one answer (one fails),
/// reads both results as tool_result blocks answering its tool_use blocks, and answers; the
/// key goes as `x-api-key`, the instructions as `system`, the tools with their input schema;
/// the usage of both rounds is recorded on the reply and the task.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_on_the_anthropic_provider_calls_tools_and_reads_their_results() {
    let mock = MockAnthropic::start().await;
    let h = harness(&mock).await;
    let c = h.client();
    let events = c.stream_message(user_text("@call notes__lookup {\"key\": \"tea\"}\n@call notes__broken {}")).await;
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:#?}");
    let answer = texts(&last["statusUpdate"]["status"]["message"]);
    let said: Vec<&str> = answer.strip_prefix("Tools said: ").expect(&answer).split(" | ").collect();
    assert_eq!(said[0], "tea is on the top shelf");
    assert!(
        said[1].starts_with("error: the tool `notes__broken` failed:") && said[1].contains("collapsed"),
        "{said:?}"
    );

    let seen = mock.seen();
    assert_eq!(seen.len(), 2, "one round of tools, then the answer");
    assert_eq!((seen[0].api_key.as_deref(), seen[0].version.as_deref()), (Some(KEY), Some("2023-06-01")));
    let first = &seen[0].body;
    assert_eq!((first["system"].as_str(), first["max_tokens"].as_u64()), (Some("You are a test agent."), Some(300)));
    let lookup = first["tools"].as_array().unwrap().iter().find(|t| t["name"] == "notes__lookup").expect("offered");
    assert_eq!(lookup["input_schema"]["required"], json!(["key"]), "{lookup}");
    let messages = seen[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    let used: Vec<&Value> =
        messages[1]["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_use").collect();
    assert_eq!(used[0]["input"], json!({"key": "tea"}));
    let results = messages[2]["content"].as_array().unwrap();
    let answered: Vec<(&str, bool)> =
        results.iter().map(|b| (b["tool_use_id"].as_str().unwrap(), b["is_error"] == true)).collect();
    assert_eq!(answered, [("toolu_0", false), ("toolu_1", true)]);

    let task_id = events[0]["task"]["id"].as_str().unwrap();
    let task = c.rpc("GetTask", json!({"id": task_id})).await["result"].clone();
    assert_eq!(task["metadata"][USAGE], json!({"promptTokens": 60, "completionTokens": 14, "reasoningTokens": 0}));
}

/// An overloaded endpoint (529) is retried and the turn answers; a refused key ends the turn
/// with a message that names the model, the endpoint and the status, never the key.
#[tokio::test(flavor = "multi_thread")]
async fn an_overloaded_endpoint_is_retried_and_a_refusal_is_named_without_the_key() {
    let mock = MockAnthropic::start().await;
    let h = harness(&mock).await;
    let c = h.client();
    let events = c.stream_message(user_text("are you overloaded?")).await;
    let last = events.last().unwrap();
    assert_eq!(texts(&last["statusUpdate"]["status"]["message"]), "Hello from claude", "{events:#?}");
    assert_eq!(mock.seen().len(), 2, "the 529 was retried once");

    let events = c.stream_message(user_text("unauthorized")).await;
    let last = events.last().unwrap();
    let why = texts(&last["statusUpdate"]["status"]["message"]);
    assert!(why.starts_with("the model failed: anthropic model `claude` at http://127.0.0.1:"), "{why}");
    assert!(why.contains("HTTP 401 Unauthorized: invalid x-api-key: [REDACTED]"), "{why}");
    let task = c.rpc("GetTask", json!({"id": events[0]["task"]["id"]})).await;
    assert!(!task.to_string().contains(KEY) && !events.iter().any(|e| e.to_string().contains(KEY)));
}
