//! Issue 34: a hostile client meets bounds, over real HTTP against the real binary.

use a2a_types::StreamResponse;
use contract_tests::{HarnessOptions, HarnessProcess, user_text};
use serde_json::json;

/// Point 4: one message of 80,000 words (under `agent.max_message_bytes`) to the echo model
/// once wrote an event per word. A turn now streams its first chunks delta by delta and
/// coalesces the rest, so the log stays a few hundred events and the reply is whole.
#[tokio::test]
async fn a_huge_message_to_the_echo_model_writes_a_bounded_number_of_events_and_the_whole_reply() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let text = "ab ".repeat(80_000);
    let answer = h.client().send(user_text(&text), json!({})).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{}", &answer.to_string()[..300]);
    let reply = format!("echo: {text}");
    assert_eq!(task["status"]["message"]["parts"][0]["text"].as_str(), Some(reply.as_str()), "the whole reply");
    let store = h.store().await;
    let events = store.events_after(task["id"].as_str().unwrap(), 0, 100_000).await.unwrap();
    assert!(events.len() < 300, "a bounded log: {} events for one message", events.len());
    let chunks: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            StreamResponse::ArtifactUpdate(u) => u.artifact.parts.first().and_then(|p| p.text.clone()),
            _ => None,
        })
        .collect();
    assert!(chunks.len() > 128, "the first chunks still stream word by word: {}", chunks.len());
    assert!(chunks[..128].iter().all(|c| c.len() <= "echo: ".len().max(3)), "word by word at first");
    assert_eq!(chunks.concat(), reply, "the chunks join to the reply");
}

/// Point 6: `Retry-After` is rounded up (a client that waits that long is admitted, not
/// refused again), and `/_ready` and the card answer a peer over its rate.
#[tokio::test]
async fn a_peer_over_its_rate_is_told_a_wait_rounded_up_and_readiness_and_the_card_still_answer() {
    let h = HarnessProcess::start(HarnessOptions {
        server_extra: "rate_limit_per_minute = 3".into(),
        ..Default::default()
    })
    .await;
    let http = reqwest::Client::new();
    let get_task = || {
        http.post(format!("{}/a2a/jsonrpc", h.base_url))
            .header("A2A-Version", "1.0")
            .body(json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}).to_string())
            .send()
    };
    let started = std::time::Instant::now();
    // The harness's own start-up probes may have counted: fill the window whatever they took.
    let mut refused = None;
    for _ in 0..4 {
        let r = get_task().await.unwrap();
        if r.status() == 429 {
            refused = Some(r);
            break;
        }
    }
    let refused = refused.expect("the fourth request of a minute is refused");
    let wait: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    let window_left = 60.0 - started.elapsed().as_secs_f64();
    assert!(wait as f64 >= window_left, "Retry-After {wait} s is shorter than the {window_left:.2} s left");
    assert!(wait <= 60, "{wait}");
    for path in ["/_ready", "/.well-known/agent-card.json"] {
        let r = http.get(format!("{}{path}", h.base_url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path} answers a peer over its rate");
    }
    assert_eq!(get_task().await.unwrap().status(), 429, "A2A calls are still counted");
}

/// Point 6: a JSON-RPC notification (a request without `id`) is run and never answered:
/// 204 with no body, and its message reaches the task.
#[tokio::test]
async fn a_json_rpc_notification_is_run_and_never_answered() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let http = reqwest::Client::new();
    for (method, text) in [("SendMessage", "told, not asked"), ("SendStreamingMessage", "streamed to no one")] {
        let body = json!({"jsonrpc": "2.0", "method": method, "params": {"message": user_text(text)}});
        let r = http
            .post(format!("{}/a2a/jsonrpc", h.base_url))
            .header("A2A-Version", "1.0")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204, "{method}");
        assert_eq!(r.text().await.unwrap(), "", "{method}: no reply");
    }
    // Not even an error is answered to a notification.
    let bad = json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "nope"}});
    let r = http.post(format!("{}/a2a/jsonrpc", h.base_url)).header("A2A-Version", "1.0").body(bad.to_string());
    let r = r.send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.text().await.unwrap()), (204, String::new()));
    // The messages were delivered: their tasks hold them.
    let store = h.store().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let mut texts = Vec::new();
        for id in store.task_ids().await.unwrap() {
            texts.extend(store.history(&id, i64::MAX, None).await.unwrap().iter().map(|m| m.text()));
        }
        if ["told, not asked", "streamed to no one"].iter().all(|t| texts.iter().any(|x| x == t)) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the notifications' messages were not delivered: {texts:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A webhook that takes connections and never answers; counts the connections it holds
/// now and at most.
async fn silent_webhook() -> (String, std::sync::Arc<(std::sync::atomic::AtomicUsize, std::sync::atomic::AtomicUsize)>)
{
    use std::sync::atomic::Ordering;
    let counts = std::sync::Arc::new((std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let held = counts.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let held = held.clone();
            let now = held.0.fetch_add(1, Ordering::SeqCst) + 1;
            held.1.fetch_max(now, Ordering::SeqCst);
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = [0u8; 4096];
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                held.0.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (url, counts)
}

/// Point 2: push fan-out is bounded. A task takes at most `push.max_configs_per_task` (32)
/// configs; 1,024 configs over 32 tasks to a webhook that never answers get their events
/// posted through at most 8 connections to that host at once, and meanwhile `/_ready` and a
/// new conversation are answered.
#[tokio::test]
async fn a_thousand_push_configs_to_a_silent_webhook_hold_a_bounded_number_of_sockets_and_the_server_answers() {
    use std::sync::atomic::Ordering;
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let (url, counts) = silent_webhook().await;
    let mut tasks = Vec::new();
    for i in 0..32 {
        let task = c.send(user_text(&format!("task {i}")), json!({})).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        for k in 0..32 {
            let config = json!({"taskId": task, "url": format!("{url}/t{i}/c{k}"), "token": "t"});
            let r = c.rpc("CreateTaskPushNotificationConfig", config).await;
            assert!(r["result"]["id"].is_string(), "config {k} of task {i}: {r}");
        }
        tasks.push(task);
    }
    let one_more =
        c.rpc("CreateTaskPushNotificationConfig", json!({"taskId": tasks[0], "url": format!("{url}/x")})).await;
    assert_eq!(one_more["error"]["code"], -32602, "{one_more}");
    assert!(one_more["error"]["message"].as_str().unwrap().contains("push.max_configs_per_task"), "{one_more}");
    // Every task's next turn pushes its events to its 32 configs.
    for task in &tasks {
        let mut next = user_text("and now?");
        next["taskId"] = json!(task);
        let r = c.send(next, json!({"returnImmediately": true})).await;
        assert!(r.get("error").is_none(), "{r}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while counts.0.load(Ordering::SeqCst) < 8 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for round in 0..5 {
        let ready = reqwest::get(format!("{}/_ready", h.base_url)).await.unwrap();
        assert_eq!(ready.status(), 200, "round {round}");
        let fresh = c.send(user_text("still there?"), json!({})).await;
        assert_eq!(fresh["result"]["task"]["status"]["message"]["parts"][0]["text"], "echo: still there?", "{fresh}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let (now, most) = (counts.0.load(Ordering::SeqCst), counts.1.load(Ordering::SeqCst));
    assert!(most >= 1, "the webhook was posted to");
    assert!(most <= 8, "at most 8 posts in flight to one host: {most} (now {now})");
}

/// Point 3: after a crash cut a task's log back (here the reconciler's own cut, done on the
/// store), a resume whose `Last-Event-ID` names an event at or past the cut is refused, on
/// both bindings, telling the client to read the log from the start; one before the cut
/// resumes; and every id sent after the cut carries the log's epoch (`<seq>.1`).
#[tokio::test]
async fn a_resume_into_a_rewritten_range_is_refused_and_ids_after_a_rewrite_carry_the_epoch() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let mut stream = c.open_stream("/message:stream", None, json!({"message": user_text("one two three")})).await;
    let mut ids = Vec::new();
    let mut task = String::new();
    while let Some(event) = stream.next().await {
        if let Some(id) = event["task"]["id"].as_str() {
            task = id.to_string();
        }
        ids.push(stream.last_id.clone().expect("every log event has an id"));
    }
    assert!(ids.len() >= 4, "{ids:?}");
    assert!(ids.iter().all(|id| id.parse::<i64>().is_ok()), "a log never cut has plain seqs: {ids:?}");
    let store = h.store().await;
    let head = store.task_head(&task).await.unwrap().unwrap();
    let keep_through = head.last_seq - 2;
    let row = store.task(&task, None).await.unwrap().unwrap();
    let kept = harness_store::Stored { history: i64::MAX, artifacts: i64::MAX };
    assert!(store.cut_back(&task, &head, keep_through, kept, &row.task).await.unwrap(), "the cut happened");

    let path = format!("/tasks/{task}:subscribe");
    let http = reqwest::Client::new();
    for binding in ["rest", "jsonrpc"] {
        let (url, body) = match binding {
            "rest" => (format!("{}/a2a/rest{path}", h.base_url), json!({"id": task})),
            _ => (
                format!("{}/a2a/jsonrpc", h.base_url),
                json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task}}),
            ),
        };
        let last = ids.last().unwrap().as_str();
        let r = http.post(&url).header("A2A-Version", "1.0").header("Last-Event-ID", last).json(&body).send();
        let r = r.await.unwrap();
        let status = r.status().as_u16();
        let answer: serde_json::Value = r.json().await.unwrap();
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("rewrote") && message.contains(last), "{binding} {status}: {answer}");
        match binding {
            "rest" => assert_eq!(status, 400),
            _ => assert_eq!(answer["error"]["code"], -32602),
        }
        let before = keep_through.to_string();
        let r = http.post(&url).header("A2A-Version", "1.0").header("Last-Event-ID", &before).json(&body).send();
        let r = r.await.unwrap();
        assert_eq!(r.status(), 200, "{binding}: an id before the cut resumes");
        let content_type = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(content_type.starts_with("text/event-stream"), "{binding}: {content_type}");
    }
    // A new subscriber reads the log as it is now: every id carries the epoch.
    let mut again = c.open_stream(&path, None, json!({"id": task})).await;
    let first = again.next().await.expect("the Task");
    assert_eq!(first["task"]["id"], task.as_str());
    assert_eq!(again.last_id.as_deref(), Some("1.1"), "ids after a cut carry the epoch");
}

/// The address (`host:port`) of a harness's base URL.
fn address(h: &HarnessProcess) -> String {
    h.base_url.trim_start_matches("http://").to_string()
}

/// Whether the server closes `tcp` within `secs` (EOF or a reset), reading whatever it sends.
async fn closed_within(tcp: &mut tokio::net::TcpStream, secs: u64) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let read_to_end = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(secs), read_to_end).await.is_ok()
}

/// Point 1: an idle HTTP/2 (h2c, prior knowledge) connection is closed after the idle
/// timeout, as an idle HTTP/1 one is: idle connections cannot pile up to the cap.
#[tokio::test]
async fn an_idle_h2c_connection_is_closed() {
    use tokio::io::AsyncWriteExt;
    let h = HarnessProcess::start(HarnessOptions {
        server_extra: "header_read_timeout_secs = 1".into(),
        ..Default::default()
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(address(&h)).await.unwrap();
    // The client preface and an empty SETTINGS frame: a live HTTP/2 connection, no request.
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.unwrap();
    tcp.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    assert!(closed_within(&mut tcp, 15).await, "an idle h2c connection was left open");
    // The server still serves.
    assert_eq!(reqwest::get(format!("{}/_ready", h.base_url)).await.unwrap().status(), 200);
}

/// Point 1: a request body that trickles in (a byte every 300 ms, never idle long enough
/// for the read timeout) is cut at `server.body_deadline_secs` with 408.
#[tokio::test]
async fn a_body_that_trickles_in_is_cut_at_the_body_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = HarnessProcess::start(HarnessOptions {
        server_extra: "body_deadline_secs = 2\nbody_read_timeout_secs = 30".into(),
        ..Default::default()
    })
    .await;
    let tcp = tokio::net::TcpStream::connect(address(&h)).await.unwrap();
    let (mut read, mut write) = tcp.into_split();
    let head = "POST /a2a/jsonrpc HTTP/1.1\r\nHost: h\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n\
                Content-Length: 1000\r\n\r\n";
    write.write_all(head.as_bytes()).await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if write.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    });
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(std::time::Duration::from_secs(30), read.read(&mut answer))
        .await
        .expect("an answer long before the body would have been whole (300 s)")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("server.body_deadline_secs"), "{answer}");
    trickle.abort();
}

/// Point 1: one client address holds at most `server.max_connections_per_client`; more are
/// closed at once, and another client's `/_ready` is answered meanwhile.
#[tokio::test]
async fn one_client_cannot_take_every_connection_and_readiness_answers_others() {
    let h = HarnessProcess::start(HarnessOptions {
        server_extra: "max_connections = 16\nmax_connections_per_client = 4\nheader_read_timeout_secs = 30".into(),
        ..Default::default()
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(tokio::net::TcpStream::connect(address(&h)).await.unwrap());
    }
    let mut closed = 0;
    for tcp in held.iter_mut() {
        if closed_within(tcp, 1).await {
            closed += 1;
        }
    }
    assert!(closed >= 16, "at most 4 connections kept from one address: {closed} of 20 closed");
    // Another address (127.0.0.2 is loopback too) is served while 127.0.0.1 holds its 4.
    let other = reqwest::Client::builder().local_address(std::net::IpAddr::from([127, 0, 0, 2])).build().unwrap();
    for _ in 0..3 {
        let r = other.get(format!("{}/_ready", h.base_url)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    drop(held);
}

/// Point 5: the push receiver's refusals are one answer at one moment. No token (answered at
/// once before), an id that names no stand-in (a store read) and a real task with a wrong
/// token (a Temporal call) each answer 401 with the same body, none before the floor.
#[tokio::test]
async fn every_push_receiver_refusal_is_the_same_answer_and_none_comes_before_the_floor() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let task = h.client().send(user_text("hi"), json!({})).await["result"]["task"]["id"].as_str().unwrap().to_string();
    let event =
        json!({"statusUpdate": {"taskId": "remote", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}});
    let http = reqwest::Client::new();
    let floor = tiny_harness::PUSH_REFUSAL_FLOOR;
    let mut bodies = std::collections::BTreeSet::new();
    for (what, id, token) in [
        ("no token", task.as_str(), None),
        ("no stand-in", "no-such-task", Some("t")),
        ("wrong token", task.as_str(), Some("t")),
    ] {
        for _ in 0..3 {
            let mut r = http.post(format!("{}/a2a/push/{id}", h.base_url)).body(event.to_string());
            if let Some(token) = token {
                r = r.header("X-A2A-Notification-Token", token);
            }
            let started = std::time::Instant::now();
            let r = r.send().await.unwrap();
            let took = started.elapsed();
            assert_eq!(r.status(), 401, "{what}");
            bodies.insert(r.text().await.unwrap());
            assert!(took >= floor, "{what}: answered after {took:?}, before the floor {floor:?}");
        }
    }
    assert_eq!(bodies.len(), 1, "one body for every refusal: {bodies:?}");
}
