//! Issue 17: the `openai` provider against an OpenAI-compatible server this project did not
//! write, running offline: LiteLLM's proxy (pinned in `interop/requirements.txt`) with a
//! configured mock response and a master key. Its stream, usage chunk and error bodies are
//! LiteLLM's own.

use contract_tests::{HarnessOptions, HarnessProcess, kind, state, user_text};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const MASTER_KEY: &str = "sk-litellm-test-5d1e0c7b";

/// The `litellm` of the interop venv.
fn litellm() -> PathBuf {
    let python = std::env::var("TINY_HARNESS_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python"));
    let bin = python.parent().expect("the venv's bin").join("litellm");
    assert!(bin.exists(), "{} is missing: run `cargo xtask test` (it builds the interop venv)", bin.display());
    bin
}

/// A LiteLLM proxy on a free port; killed when dropped.
struct Proxy {
    child: std::process::Child,
    base_url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn proxy() -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("litellm.yaml");
    std::fs::write(
        &config,
        format!(
            "model_list:\n  - model_name: mock-gpt\n    litellm_params:\n      model: openai/mock-gpt\n      \
             api_key: not-used\n      mock_response: \"Hello from LiteLLM\"\ngeneral_settings:\n  master_key: {MASTER_KEY}\n"
        ),
    )
    .unwrap();
    let port = tiny_harness::temporal_dev::free_port();
    let log = std::fs::File::create(dir.path().join("litellm.log")).unwrap();
    let child = std::process::Command::new(litellm())
        .args(["--config", config.to_str().unwrap(), "--host", "127.0.0.1", "--port", &port.to_string()])
        // Offline: the model cost map from the package, no telemetry.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_TELEMETRY", "False")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start litellm");
    let proxy = Proxy { child, base_url: format!("http://127.0.0.1:{port}/v1"), _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(90);
    let health = format!("http://127.0.0.1:{port}/health/liveliness");
    while !reqwest::get(&health).await.is_ok_and(|r| r.status().is_success()) {
        let log = std::fs::read_to_string(proxy._dir.path().join("litellm.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "litellm did not start:\n{log}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    proxy
}

fn texts(v: &serde_json::Value) -> String {
    v["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_streams_from_litellms_proxy_and_its_errors_are_named() {
    let proxy = proxy().await;
    let start = |key: &str| {
        HarnessProcess::start(HarnessOptions {
            agent_extra: "model = \"lite\"\n".into(),
            extra_config: format!(
                "[models.lite]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-gpt\"\napi_key_env = \"LITE_KEY\"\n",
                proxy.base_url
            ),
            env: vec![("LITE_KEY".into(), key.into())],
            ..Default::default()
        })
    };
    let h = start(MASTER_KEY).await;
    let events = h.client().stream_message(user_text("hello litellm")).await;
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:?}");
    let reply = &last["statusUpdate"]["status"]["message"];
    assert_eq!(texts(reply), "Hello from LiteLLM", "{last}");
    let chunks = events.iter().filter(|e| kind(e) == "artifactUpdate").count();
    assert!(chunks > 1, "LiteLLM streams its mock reply in pieces, each a chunk: {events:?}");
    let usage = &reply["metadata"]["io.github.madarauchiha-314.tiny-harness/usage"];
    assert!(
        usage["promptTokens"].as_u64().unwrap_or(0) > 0 && usage["completionTokens"].as_u64().unwrap_or(0) > 0,
        "{reply}"
    );
    drop(h);

    // A key LiteLLM does not take: the turn ends naming the endpoint, its status and words.
    let h = start("sk-wrong-key-0000").await;
    let answer = h.client().send(user_text("hello again"), json!({})).await;
    let text = texts(&answer["result"]["task"]["status"]["message"]);
    assert!(
        text.contains(&format!("openai model `lite` at {}", proxy.base_url)) && text.contains("HTTP 4"),
        "{answer}"
    );
    assert!(!text.contains("sk-wrong-key-0000"), "{text}");
}
