//! The README's run command: `tiny-harness dev` on embedded defaults (D3) starts its own
//! Temporal dev server in the data dir, serves on the given port, stops cleanly on SIGTERM,
//! and a second start on the same data dir resumes every task.

use contract_tests::{A2AClient, harness_binary, user_text};
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn start_dev(data_dir: &std::path::Path, port: u16) -> Child {
    start_dev_with(data_dir, port, &[])
}

/// `dev` with more arguments (e.g. `--config FILE`).
fn start_dev_with(data_dir: &std::path::Path, port: u16, more: &[&std::ffi::OsStr]) -> Child {
    Command::new(harness_binary())
        .args(["dev", "--port", &port.to_string(), "--data-dir"])
        .arg(data_dir)
        .args(more)
        .env_remove("TINY_HARNESS_PUSH_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(data_dir.join("harness.err")).unwrap())
        .spawn()
        .expect("spawn dev")
}

async fn wait_ready(base: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while reqwest::get(format!("{base}/.well-known/agent-card.json")).await.map(|r| r.status().is_success()).ok()
        != Some(true)
    {
        assert!(child.try_wait().unwrap().is_none(), "dev exited early");
        assert!(Instant::now() < deadline, "dev did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn sigterm_and_wait(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "dev did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last lines the harness (both starts) and its dev server logged, for a failure's message.
fn logs(dir: &std::path::Path) -> String {
    let tail = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    format!("--- harness stderr ---\n{}\n--- temporal.log ---\n{}", tail("harness.err"), tail("temporal.log"))
}

/// Processes whose command line mentions this data dir (the embedded dev server).
fn processes_using(dir: &std::path::Path) -> usize {
    let needle = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|cmd| String::from_utf8_lossy(cmd).contains(&needle))
        .count()
}

#[tokio::test]
async fn dev_runs_on_embedded_defaults_stops_on_sigterm_and_resumes_tasks_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = tiny_harness::temporal_dev::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut dev = start_dev(dir.path(), port);
    wait_ready(&base, &mut dev).await;
    assert!(dir.path().join("temporal.db").exists(), "the dev server's database lives in the data dir");
    assert!(dir.path().join("harness.db").exists(), "the store lives in the data dir");

    let c = A2AClient::new(&base);
    let r = c.send(user_text("before the restart"), json!({})).await;
    let task =
        r["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("a task: {r}\n{}", logs(dir.path()))).to_string();
    assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    // S14: with no key given, dev creates one in the data dir, private to the user.
    let key = dir.path().join("push.key");
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).expect("push.key").permissions().mode() & 0o777, 0o600);
    }
    let hook = json!({"taskId": task, "url": "https://hooks.example.com/a2a", "token": "kept-across-restarts"});
    let created = c.rpc("CreateTaskPushNotificationConfig", hook).await;
    let config_id = created["result"]["id"].as_str().expect("a push config id").to_string();

    let status = sigterm_and_wait(&mut dev);
    assert!(status.success(), "a clean stop exits 0, got {status}");
    let mut out = String::new();
    std::io::Read::read_to_string(dev.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(out.contains(&base), "dev prints its URL: {out}");
    assert_eq!(processes_using(dir.path()), 0, "the dev server stopped with the harness");

    let mut dev = start_dev(dir.path(), port);
    wait_ready(&base, &mut dev).await;
    let mut next = user_text("after the restart");
    next["taskId"] = json!(task);
    let r = c.send(next, json!({})).await;
    assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}\n{}", logs(dir.path()));
    assert_eq!(r["result"]["task"]["history"].as_array().unwrap().len(), 4, "the conversation went on: {r}");
    // The same key is used again, so the sealed token still opens: a read opens it (for the
    // scheme) and fails on a config it cannot open; the token itself is never returned.
    let got = c.rpc("GetTaskPushNotificationConfig", json!({"taskId": task, "id": config_id})).await;
    assert_eq!(got["result"]["url"], "https://hooks.example.com/a2a", "{got}");
    assert!(got["result"].get("token").is_none(), "write-only: {got}");
    assert!(sigterm_and_wait(&mut dev).success());
}

#[test]
fn a_configuration_error_names_the_key_and_the_file_and_exits_with_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("broken.toml");
    std::fs::write(&config, "[agent]\nlifecycle = \"sometimes\"\n").unwrap();
    let out = Command::new(harness_binary())
        .args(["dev", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("broken.toml") && err.contains("agent.lifecycle") && err.contains("sometimes"), "{err}");
}

#[test]
fn without_the_temporal_cli_and_without_python_dev_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(harness_binary())
        .args(["dev", "--port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("PATH", dir.path().join("empty-path"))
        .env("TINY_HARNESS_CACHE", dir.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`temporal` CLI was not found") && err.contains("`python3` is missing"), "{err}");
}

/// Issue 16 item 4: `dev --config FILE` with `[card.extended]` declares
/// `capabilities.extendedAgentCard` and answers GetExtendedAgentCard on both bindings with
/// the extended description and skills.
#[tokio::test]
async fn dev_with_an_extended_card_in_its_config_declares_and_serves_it_on_both_bindings() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("harness.toml");
    std::fs::write(
        &config,
        "[card.extended]\ndescription = \"for callers who asked\"\n\n[[card.extended.skills]]\nid = \"deep\"\nname = \"Deep skill\"\n",
    )
    .unwrap();
    let port = tiny_harness::temporal_dev::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut dev = start_dev_with(dir.path(), port, &["--config".as_ref(), config.as_os_str()]);
    wait_ready(&base, &mut dev).await;
    let card: serde_json::Value =
        reqwest::get(format!("{base}/.well-known/agent-card.json")).await.unwrap().json().await.unwrap();
    assert_eq!(card["capabilities"]["extendedAgentCard"], json!(true), "{card}");
    let c = A2AClient::new(&base);
    let rpc = c.rpc("GetExtendedAgentCard", json!({})).await;
    let rest = c.rest(reqwest::Method::GET, "/extendedAgentCard", None).await;
    for extended in [&rpc["result"], &rest.body] {
        assert_eq!(extended["description"], "for callers who asked", "{extended}");
        assert!(extended["skills"].as_array().unwrap().iter().any(|s| s["id"] == "deep"), "{extended}");
    }
    let status = sigterm_and_wait(&mut dev);
    assert!(status.success(), "dev did not stop cleanly: {status}\n{}", logs(dir.path()));
}

/// Issue 17: `dev --model openai:<model>` reads `OPENAI_BASE_URL` and `OPENAI_API_KEY` as the
/// official SDKs do (an endpoint named without a key is keyless); with neither, it refuses
/// to start, naming the variable.
#[tokio::test]
async fn dev_with_an_openai_model_reads_the_sdk_variables_and_names_a_missing_key() {
    let dir = tempfile::tempdir().unwrap();
    let refused = Command::new(harness_binary())
        .args(["dev", "--port", "0", "--model", "openai:gpt-4o-mini", "--data-dir"])
        .arg(dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .expect("run dev");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`OPENAI_API_KEY` is not set"), "{stderr}");

    let mock = contract_tests::openai_mock::MockOpenAi::start().await;
    let port = tiny_harness::temporal_dev::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut dev = Command::new(harness_binary())
        .args(["dev", "--port", &port.to_string(), "--model", "openai:local-model", "--data-dir"])
        .arg(dir.path())
        .env_remove("OPENAI_API_KEY")
        .env("OPENAI_BASE_URL", &mock.base_url)
        .env_remove("TINY_HARNESS_PUSH_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("harness.err")).unwrap())
        .spawn()
        .expect("spawn dev");
    wait_ready(&base, &mut dev).await;
    let answer = A2AClient::new(&base).send(user_text("hello local model"), json!({})).await;
    let reply = &answer["result"]["task"]["status"]["message"]["parts"][0]["text"];
    assert_eq!(reply, "Hello from the mock", "{answer}\n{}", logs(dir.path()));
    let seen = mock.seen();
    assert_eq!(seen[0].body["model"], "local-model");
    assert_eq!(seen[0].authorization, None, "a keyless endpoint gets no key");
    assert!(sigterm_and_wait(&mut dev).success());
}
