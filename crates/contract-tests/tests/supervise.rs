//! Issue 13, findings 4 and 5: Temporal supervised (an embedded server that dies comes back
//! on the same database, never two at once; while Temporal does not answer, requests fail
//! fast and cleanly, reads and subscriptions come from the store, `/_monitor` and `/_ready`
//! say so), and the caps a peer meets (unfinished request heads and bodies are cut off,
//! connections are capped). And a Temporal worker that dies is replaced.

use contract_tests::{A2AClient, HarnessOptions, HarnessProcess, OwnTemporal, state, temporal_address, user_text};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

async fn get(url: &str) -> (u16, Value) {
    let r = reqwest::Client::new().get(url).timeout(Duration::from_secs(10)).send().await.expect("get");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Polls `/_ready` until its status is `want`, or panics after `secs`.
async fn ready_becomes(h: &HarnessProcess, want: u16, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (status, body) = get(&format!("{}/_ready", h.base_url)).await;
        if status == want {
            return body;
        }
        assert!(Instant::now() < deadline, "/_ready stayed {status} ({body}), wanted {want}\n{}", h.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The pids of `temporal` processes whose command line names `db`.
fn servers_on(db: &std::path::Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("start-dev") && cmd.contains(&*db.to_string_lossy()) {
            pids.push(pid);
        }
    }
    pids
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a process this test started (through the harness).
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// The error text of a JSON-RPC answer, checked to be a clean `Unavailable`.
fn clean_unavailable(answer: &Value) -> String {
    let text = answer["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(text.contains("Temporal is unreachable"), "{answer}");
    for internal in ["tonic", "transport", "127.0.0.1", "Status {"] {
        assert!(!text.contains(internal), "the error shows `{internal}`: {text}");
    }
    text
}

#[tokio::test]
async fn an_embedded_temporal_that_dies_is_restarted_on_its_database_and_its_tasks_go_on() {
    let h = HarnessProcess::start(HarnessOptions { embedded: true, ..Default::default() }).await;
    let db = h.data_dir.path().join("temporal.db");
    let c = h.client();
    let a = c.send(user_text("before"), json!({})).await;
    let task_id = a["result"]["task"]["id"].as_str().unwrap().to_string();
    let first = servers_on(&db);
    assert_eq!(first.len(), 1, "one server on the database: {first:?}");
    signal(first[0], libc::SIGKILL);
    // Restarted within seconds, on the same database: the task goes on.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut next = user_text("after");
    next["taskId"] = json!(task_id);
    let answer = loop {
        let r = c.send(next.clone(), json!({})).await;
        if r["result"].is_object() {
            break r;
        }
        // Meanwhile a send fails cleanly, and the same messageId is retried.
        clean_unavailable(&r);
        assert!(Instant::now() < deadline, "the server did not come back:\n{}", h.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(answer["result"]["task"]["status"]["message"]["parts"][0]["text"], "echo: after", "{answer}");
    ready_becomes(&h, 200, 30).await;
    let now = servers_on(&db);
    assert_eq!(now.len(), 1, "one server on the database: {now:?}");
    assert_ne!(now, first, "a new server");
    assert!(h.log().contains("restarted the embedded Temporal server"), "{}", h.log());
}

/// A server that stops answering (SIGSTOP) and comes back (SIGCONT), and one that is killed
/// and started again at the same address: sends and cancels fail fast and cleanly, GetTask
/// and SubscribeToTask answer from the store (the subscriber then sees live events), the
/// monitor and `/_ready` say Temporal is down, and everything works again afterwards.
#[tokio::test]
async fn while_temporal_does_not_answer_requests_fail_fast_reads_come_from_the_store_and_it_recovers() {
    let h = HarnessProcess::start(HarnessOptions {
        embedded: true,
        server_extra: "monitor_interval_secs = 1".into(),
        ..Default::default()
    })
    .await;
    let db = h.data_dir.path().join("temporal.db");
    let c = h.client();
    let a = c.send(user_text("hello"), json!({})).await;
    let task_id = a["result"]["task"]["id"].as_str().unwrap().to_string();
    let server = servers_on(&db)[0];
    signal(server, libc::SIGSTOP);
    let down = ready_becomes(&h, 503, 30).await;
    assert_eq!(down["temporal"]["up"], false, "{down}");

    let mut next = user_text("while down");
    next["taskId"] = json!(task_id);
    let refused = c.send(next.clone(), json!({})).await;
    clean_unavailable(&refused);
    let fresh = c.send(user_text("a new task"), json!({})).await;
    clean_unavailable(&fresh);
    let cancel = c.rpc("CancelTask", json!({"id": task_id})).await;
    clean_unavailable(&cancel);
    let got = c.rpc("GetTask", json!({"id": task_id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{got}");
    let mut sub = c.open_stream(&format!("/tasks/{task_id}:subscribe"), None, json!({})).await;
    assert_eq!(sub.status, 200, "the subscriber gets its headers");
    let replayed = sub.next().await.expect("the replay from the store");
    assert!(replayed["task"].is_object(), "{replayed}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let monitor = loop {
        let (_, m) = get(&format!("{}/_monitor", h.base_url)).await;
        if m["temporal"]["up"] == false || Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(monitor["temporal"]["up"], false, "{monitor}");
    let row = monitor["running"].as_array().unwrap().iter().find(|r| r["task_id"] == task_id.as_str()).cloned();
    assert_eq!(row.unwrap_or_default()["state"], "TASK_STATE_INPUT_REQUIRED", "{monitor}");

    signal(server, libc::SIGCONT);
    ready_becomes(&h, 200, 30).await;
    // The refused message is retried (same messageId) and answered; the subscriber, still
    // attached, sees it live.
    let answer = c.send(next.clone(), json!({})).await;
    assert_eq!(answer["result"]["task"]["status"]["message"]["parts"][0]["text"], "echo: while down", "{answer}");
    // (After the rest of the replay: the first turn.)
    loop {
        let e = sub.next().await.expect("a live event");
        if state(&e) == Some("TASK_STATE_INPUT_REQUIRED") && e.to_string().contains("echo: while down") {
            break;
        }
    }
}

/// Finding 5: a peer that opens connections and never finishes a request head, or never
/// sends the body it announced, is cut off; connections are capped, and a well-behaved
/// client gets through once a slot frees.
#[tokio::test]
async fn unfinished_requests_are_cut_off_and_connections_are_capped() {
    let h = HarnessProcess::start(HarnessOptions {
        server_extra: "max_connections = 4\nheader_read_timeout_secs = 1\nbody_read_timeout_secs = 1".into(),
        ..Default::default()
    })
    .await;
    let addr = format!("127.0.0.1:{}", h.port);
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.write_all(b"POST /a2a/jsonrpc HTTP/1.1\r\nHost: x\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        slow.push(s);
    }
    // A fifth client waits for a slot, and gets its answer once the slow ones are cut off.
    let (status, card) = get(&format!("{}/.well-known/agent-card.json", h.base_url)).await;
    assert_eq!(status, 200, "{card}");
    for mut s in slow {
        let mut buf = Vec::new();
        // The server answers (408) or closes; either way the read ends, it does not hang.
        let read = s.read_to_end(&mut buf);
        assert!(read.is_ok(), "the unfinished head was not cut off: {read:?}");
    }
    // A body that never comes.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"POST /a2a/jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    let read = s.read_to_end(&mut buf);
    assert!(read.is_ok(), "the unfinished body was not cut off: {read:?}");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 4"), "{text}");
}

/// `serve` on a remote Temporal that goes away and comes back at the same address: `/_ready`
/// says so, sends fail cleanly meanwhile, and the harness (never restarted) reconnects.
#[tokio::test]
async fn serve_reconnects_to_a_remote_temporal_that_comes_back() {
    let mut temporal = OwnTemporal::start().await;
    let h = HarnessProcess::start(HarnessOptions { temporal: Some(temporal.address()), ..Default::default() }).await;
    let c = h.client();
    let a = c.send(user_text("before"), json!({})).await;
    let task_id = a["result"]["task"]["id"].as_str().unwrap().to_string();
    temporal.kill().await;
    let down = ready_becomes(&h, 503, 30).await;
    assert_eq!(down["temporal"]["up"], false, "{down}");
    let mut next = user_text("after");
    next["taskId"] = json!(task_id);
    clean_unavailable(&c.send(next.clone(), json!({})).await);
    temporal.start_again().await;
    ready_becomes(&h, 200, 30).await;
    let answer = c.send(next, json!({})).await;
    assert_eq!(answer["result"]["task"]["status"]["message"]["parts"][0]["text"], "echo: after", "{answer}");
}

/// An in-process harness's config: data in `dir`, the test dev server, a task queue of
/// its own (`queue` and this process), any free port.
fn in_process_config(dir: &std::path::Path, queue: &str) -> tiny_harness::Config {
    let mut c = tiny_harness::Config::with_data_dir(dir);
    c.temporal.mode = tiny_harness::TemporalMode::Remote;
    c.temporal.address = temporal_address().to_string();
    c.temporal.task_queue = format!("{queue}-{}", std::process::id());
    c.server.port = 0;
    c
}

/// A worker whose run ends without its shutdown (as a fatal SDK error ends it, or a panic in
/// the SDK's workflow thread) is replaced within seconds, and the conversation goes on: the
/// next message of the open task and a new task's first are answered. Before the worker left
/// the client's registry with its thread, the new worker could not be created ("overlapping
/// worker task types") and the harness stayed without one until restarted.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_that_dies_is_replaced_and_the_next_messages_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let c = in_process_config(dir.path(), "worker-dies");
    let running = tiny_harness::running_harness(c).await.unwrap();
    let client = A2AClient::new(&running.address);
    let first = client.send(user_text("before"), json!({})).await;
    let task_id = first["result"]["task"]["id"].as_str().expect("a task").to_string();
    for death in 0..2 {
        assert!(running.harness.end_worker_abruptly().await, "a worker to end");
        let mut next = user_text(&format!("after death {death}"));
        next["taskId"] = json!(task_id);
        let answer = client.send(next, json!({})).await;
        assert_eq!(answer["result"]["task"]["id"], task_id.as_str(), "{answer}");
        let history = answer["result"]["task"]["history"].as_array().expect("history");
        assert!(
            history
                .iter()
                .any(|m| m["role"] == "ROLE_AGENT" && m["parts"].to_string().contains(&format!("after death {death}"))),
            "the message after the worker died is answered: {answer}"
        );
        let fresh = client.send(user_text(&format!("a new task after death {death}")), json!({})).await;
        assert!(fresh["result"]["task"]["id"].is_string(), "{fresh}");
    }
    running.stop().await.unwrap();
}

/// An embedder's harness dropped without `stop()` (a test that fails half way, a host that
/// returns early) stops its Temporal worker: the runtime it ran on shuts down instead of
/// waiting forever on the worker's thread, and the process can end.
#[test]
fn a_harness_dropped_without_stop_lets_its_runtime_shut_down() {
    let (done, ended) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let c = in_process_config(dir.path(), "dropped");
            // Served by the host's own server, as an embedder mounts `Harness::router`.
            let harness = tiny_harness::Harness::new(c).unwrap();
            harness.start().await.unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = format!("http://{}", listener.local_addr().unwrap());
            let app = harness.router();
            tokio::spawn(async move { axum::serve(listener, app).await });
            let answer = A2AClient::new(&address).send(user_text("hello"), json!({})).await;
            assert!(answer["result"]["task"]["id"].is_string(), "{answer}");
            // No stop: the harness and its worker are left to the drop.
            drop(harness);
        });
        drop(runtime);
        let _ = done.send(());
    });
    assert!(
        ended.recv_timeout(Duration::from_secs(60)).is_ok(),
        "the runtime of a harness dropped without stop() did not shut down within 60 s: its worker thread still runs"
    );
}
