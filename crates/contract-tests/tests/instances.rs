//! Issue 20: many instances, one agent. Harness processes on one task queue share one
//! Postgres store and one Temporal server; clients alternate between them while reads
//! (GetTask, the monitor) cross the messages on the other instance.

use contract_tests::{HarnessOptions, HarnessProcess, rpc_as, user_text};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `n` instances on one queue and one fresh Postgres database; `workers[i]` says whether
/// instance `i` runs a worker, `extra` is TOML added to each config.
async fn instances_with(workers: &[bool], extra: &str) -> (Vec<HarnessProcess>, String) {
    let url = harness_store::testing::fresh_postgres_database().await.unwrap();
    let queue = format!("scale-{}", contract_tests::uuid_like());
    let mut all = Vec::new();
    for &worker in workers {
        all.push(
            HarnessProcess::start(HarnessOptions {
                store_url: None,
                worker,
                task_queue: Some(queue.clone()),
                server_extra: "monitor_interval_secs = 1\n".into(),
                // The default: Temporal hands a dead instance's workflow task on after 10 s.
                request_timeout_secs: 30,
                extra_config: format!("[store]\nurl = \"{url}\"\n{extra}\n"),
                ..Default::default()
            })
            .await,
        );
    }
    (all, url)
}

async fn instances(n: usize) -> Vec<HarnessProcess> {
    instances_with(&vec![true; n], "").await.0
}

/// The reply text a blocking SendMessage answered with.
fn reply_of(r: &Value) -> String {
    r["result"]["task"]["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// A JSON-RPC call that tells a dead or starting instance (no connection, no JSON-RPC
/// answer: `Err`) from an answer, error or not (`Ok`).
async fn call(base: &str, method: &str, params: Value) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let sent = reqwest::Client::new()
        .post(format!("{base}/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        // Identified, so a retried first message finds its task on any instance (issue 28).
        .header("X-Participant-Id", "chaos-client")
        .timeout(Duration::from_secs(120))
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = sent.status();
    let text = sent.text().await.map_err(|e| e.to_string())?;
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.get("result").is_some() || v.get("error").is_some() => Ok(v),
        _ => Err(format!("HTTP {status}: {text}")),
    }
}

/// What a long run is told by `cargo xtask chaos` (`TINY_HARNESS_CHAOS_MINUTES`); the short
/// run of `cargo xtask test` kills one instance once.
fn chaos_minutes() -> Option<f64> {
    std::env::var("TINY_HARNESS_CHAOS_MINUTES").ok().and_then(|v| v.parse().ok())
}

/// Issue 20, point 1: conversations alternate between three instances while GetTask and
/// `/_monitor` on the other instances cross every message, and an instance is SIGKILLed and
/// started again (once here; every 20-40 s under `cargo xtask chaos`). A client whose
/// instance died under its request sends the same message (same `messageId`) to the next
/// one, as docs/deploying.md tells clients to, and so does one answered UNAVAILABLE (the
/// request timeout ran out while Temporal retried the task's workflow task after a kill).
/// Then: no message failed on a living instance (UNAVAILABLE three times in a row is a
/// failure), no read failed, each message was answered with its own reply, and each is in
/// its conversation's history once, in order.
#[tokio::test(flavor = "multi_thread")]
async fn chaos_three_instances_lose_and_cross_nothing_while_reads_cross_them_and_one_is_killed() {
    let mut hs = instances(3).await;
    let bases: Arc<Vec<String>> = Arc::new(hs.iter().map(|h| h.base_url.clone()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let unavailable = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let long = chaos_minutes();
    let conversations: usize = if long.is_some() {
        std::env::var("TINY_HARNESS_CHAOS_CONVERSATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
    } else {
        8
    };
    let until = long.map(|m| std::time::Instant::now() + Duration::from_secs_f64(m * 60.0));
    // TINY_HARNESS_INSTANCE_MESSAGES sets a longer short run.
    let messages: usize =
        std::env::var("TINY_HARNESS_INSTANCE_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let mut work = Vec::new();
    for c in 0..conversations {
        let (bases, stop, sent, unavailable) = (bases.clone(), stop.clone(), sent.clone(), unavailable.clone());
        work.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut texts = Vec::new();
            let mut task: Option<String> = None;
            let reader = Arc::new(tokio::sync::Mutex::new(None::<String>));
            // GetTask on the instances the next message does not go to, as fast as they answer.
            let reads = {
                let (bases, stop, reader) = (bases.clone(), stop.clone(), reader.clone());
                tokio::spawn(async move {
                    let mut i = c;
                    let mut failed = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let id = reader.lock().await.clone();
                        if let Some(id) = id {
                            i += 1;
                            if let Ok(r) = call(&bases[i % 3], "GetTask", json!({"id": id})).await
                                && r.get("error").is_some()
                            {
                                failed.push(r.to_string());
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    failed
                })
            };
            let mut m = 0usize;
            loop {
                let done = match until {
                    Some(t) => std::time::Instant::now() >= t,
                    None => m >= messages,
                };
                if done {
                    break;
                }
                let text = format!("c{c}-m{m}");
                let mut message = user_text(&text);
                if let Some(id) = &task {
                    message["taskId"] = json!(id);
                }
                // A dead instance's client tries the next one, with the same message. So does
                // one answered UNAVAILABLE: Temporal did not answer within the request timeout
                // (a workflow task retried after a kill), and the message may still be
                // delivered, so the same `messageId` is sent again to learn its outcome
                // (docs/deploying.md, "Timeouts and errors"); counted in `unavailable`.
                // Three such answers in a row (90 s) are a failure.
                let mut answer = None;
                let mut unanswered = 0;
                for attempt in 0..30 {
                    match call(&bases[(c + m + attempt) % 3], "SendMessage", json!({"message": message})).await {
                        Ok(r) if r["error"]["data"][0]["reason"] == "UNAVAILABLE" && unanswered < 2 => {
                            eprintln!("{text}: answered UNAVAILABLE, sent again: {}", r["error"]["message"]);
                            unavailable.fetch_add(1, Ordering::Relaxed);
                            unanswered += 1;
                        }
                        Ok(r) => {
                            answer = Some(r);
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                    }
                }
                m += 1;
                let Some(r) = answer else {
                    failures.push(format!("{text}: no instance answered"));
                    continue;
                };
                if r.get("error").is_some() {
                    failures.push(format!("{text}: {r}"));
                    continue;
                }
                texts.push(text.clone());
                sent.fetch_add(1, Ordering::Relaxed);
                if reply_of(&r) != format!("echo: {text}") {
                    failures.push(format!("sent {text}, reply {:?}", reply_of(&r)));
                }
                if task.is_none() {
                    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();
                    *reader.lock().await = Some(id.clone());
                    task = Some(id);
                }
            }
            (c, task, texts, failures, reads)
        }));
    }
    // The monitor of every instance, read in a loop (its own refresh runs every second too).
    let monitor = {
        let (bases, stop) = (bases.clone(), stop.clone());
        tokio::spawn(async move {
            let mut reads = 0usize;
            while !stop.load(Ordering::Relaxed) {
                for base in bases.iter() {
                    if let Ok(r) = reqwest::get(format!("{base}/_monitor")).await
                        && r.status().is_success()
                    {
                        reads += 1;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            reads
        })
    };
    // Kill an instance once a share of the messages is answered; under chaos, again and again.
    let mut kills = 0usize;
    let mut victim = 2usize;
    loop {
        let finished = work.iter().all(|w| w.is_finished());
        if finished {
            break;
        }
        let due = match until {
            None => kills == 0 && sent.load(Ordering::Relaxed) >= conversations * messages / 3,
            Some(_) => true,
        };
        if due {
            if until.is_some() {
                let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
                let wait = 20_000 + u64::from(nanos) % 20_000;
                tokio::time::sleep(Duration::from_millis(wait)).await;
                if work.iter().all(|w| w.is_finished()) {
                    break;
                }
            }
            hs[victim].kill9();
            tokio::time::sleep(Duration::from_millis(1500)).await;
            hs[victim].restart().await;
            kills += 1;
            victim = (victim + 1) % 3;
            eprintln!(
                "killed and restarted an instance ({kills} so far, {} messages answered)",
                sent.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut results = Vec::new();
    for w in work {
        results.push(w.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    assert!(kills >= 1, "an instance was killed");
    assert!(monitor.await.unwrap() > 0, "the monitors answered");
    let mut all_failures = Vec::new();
    for (c, task, texts, failures, reads) in results {
        all_failures.extend(failures);
        all_failures.extend(reads.await.unwrap().into_iter().map(|r| format!("GetTask of c{c}: {r}")));
        let id = task.expect("the conversation opened");
        let t = rpc_as(&bases[0], None, "GetTask", json!({"id": id})).await;
        let users: Vec<String> = t["result"]["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "ROLE_USER")
            .map(|m| m["parts"][0]["text"].as_str().unwrap().to_string())
            .collect();
        if users != texts {
            all_failures.push(format!("c{c}: history {users:?}, acknowledged {texts:?}"));
        }
    }
    let total = sent.load(Ordering::Relaxed);
    let unavailable = unavailable.load(Ordering::Relaxed);
    eprintln!("{total} messages answered, {kills} kills, {unavailable} answers UNAVAILABLE sent again");
    assert!(all_failures.is_empty(), "{} failures:\n{}", all_failures.len(), all_failures.join("\n"));
}

/// Issue 20, point 2 (D1): a reader on an instance that does not run the task's workflow is
/// woken by LISTEN/NOTIFY. Instance B runs no worker, so every event of its tasks is appended
/// by instance A; both wait up to two minutes without a wake-up (`store.backstop_ms`), so
/// only a cross-process wake-up can end B's answers and B's subscription in time.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_that_runs_no_workflow_is_woken_by_the_others_appends() {
    let (hs, _) = instances_with(&[true, false], "backstop_ms = 120000").await;
    let (a, b) = (&hs[0].base_url, &hs[1].base_url);
    let within = |what: &'static str, secs: u64, f: futures::future::BoxFuture<'static, Value>| async move {
        tokio::time::timeout(Duration::from_secs(secs), f).await.unwrap_or_else(|_| panic!("{what} within {secs} s"))
    };
    let opened = within(
        "the first answer from B",
        20,
        Box::pin(rpc_owned(b.clone(), "SendMessage", json!({"message": user_text("hello")}))),
    )
    .await;
    assert_eq!(reply_of(&opened), "echo: hello", "{opened}");
    let id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    // A subscriber on B while the messages go through A and through B.
    let mut events =
        contract_tests::A2AClient::new(b).open_stream(&format!("/tasks/{id}:subscribe"), None, json!({})).await;
    for (i, base) in [a, b, a, b].into_iter().enumerate() {
        let text = format!("turn {i}");
        let mut message = user_text(&text);
        message["taskId"] = json!(id);
        let r = within("an answer", 20, Box::pin(rpc_owned(base.clone(), "SendMessage", json!({"message": message}))))
            .await;
        assert_eq!(reply_of(&r), format!("echo: {text}"), "{r}");
        // B's subscriber sees this turn's reply.
        let seen = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let e = events.next().await.expect("the subscription stays open");
                let status = &e["statusUpdate"]["status"];
                if status["state"] == "TASK_STATE_INPUT_REQUIRED"
                    && status["message"]["parts"][0]["text"] == format!("echo: {text}")
                {
                    return;
                }
            }
        })
        .await;
        assert!(seen.is_ok(), "B's subscriber saw the reply to {text:?}");
    }
}

async fn rpc_owned(base: String, method: &'static str, params: Value) -> Value {
    rpc_as(&base, None, method, params).await
}

/// Issue 20: every SSE event of the log carries `id: <seq>` on both bindings, and a client
/// that reconnects to another instance with `Last-Event-ID` gets exactly the events after
/// it, then the live ones: no gap, no repeat, through the task's end. Bad ids are refused
/// naming the header.
#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_resumes_exactly_after_its_last_event_on_any_instance_on_both_bindings() {
    let (hs, url) = instances_with(&[true, true], "").await;
    let (a, b) = (contract_tests::A2AClient::new(&hs[0].base_url), contract_tests::A2AClient::new(&hs[1].base_url));
    let store = harness_store::Store::connect(&url).await.unwrap();
    let opened = a.send(user_text("first"), json!({})).await;
    let id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    let send = |client: &contract_tests::A2AClient, text: &str| {
        let mut m = user_text(text);
        m["taskId"] = json!(id);
        let client = client.clone();
        async move { client.send(m, json!({})).await }
    };
    send(&a, "second").await;
    let seqs = |store: harness_store::Store, id: String| async move {
        store.events_after(&id, 0, 10_000).await.unwrap().iter().map(|e| e.seq).collect::<Vec<i64>>()
    };
    let path = format!("/tasks/{id}:subscribe");
    let body = json!({"id": id});
    let mut n = 0;
    for rpc in [None, Some("SubscribeToTask")] {
        n += 1;
        let log = seqs(store.clone(), id.clone()).await;
        let mut first = a.open_stream(&path, rpc, body.clone()).await;
        let mut got = Vec::new();
        for _ in 0..3 {
            first.next().await.expect("an event");
            got.push(first.last_id.clone().expect("every log event has an id").parse::<i64>().unwrap());
        }
        assert_eq!(got, log[..3], "the ids are the log's seqs");
        drop(first);
        let last = got[2].to_string();
        let mut resumed = b.open_stream_with(&path, rpc, body.clone(), &[("Last-Event-ID", &last)]).await;
        assert_eq!((resumed.status, resumed.content_type.as_str()), (200, "text/event-stream"));
        let mut rest = Vec::new();
        while rest.len() < log.len() - 3 {
            resumed.next().await.expect("the rest of the log");
            rest.push(resumed.last_id.clone().unwrap().parse::<i64>().unwrap());
        }
        assert_eq!(rest, log[3..], "resumed exactly after event {last}");
        // Live events follow on the resumed stream, sent through the other instance.
        send(&a, &format!("live {n}")).await;
        let now = seqs(store.clone(), id.clone()).await;
        while rest.len() < now.len() - 3 {
            resumed.next().await.expect("the live events");
            rest.push(resumed.last_id.clone().unwrap().parse::<i64>().unwrap());
        }
        assert_eq!(rest, now[3..], "no gap and no repeat into the live events");
    }
    // An ended task resumes up to its last event, and no further.
    b.rpc("CancelTask", json!({"id": id})).await;
    let log = seqs(store.clone(), id.clone()).await;
    let before_end = (log[log.len() - 1] - 1).to_string();
    let mut tail = b.open_stream_with(&path, None, body.clone(), &[("Last-Event-ID", &before_end)]).await;
    let end = tail.next().await.expect("the terminal event");
    assert_eq!(end["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED", "{end}");
    assert!(tail.next().await.is_none(), "the stream ends at the terminal event");
    let http = reqwest::Client::new();
    let raw = |binding: &str, value: String| {
        let (url, body) = match binding {
            "rest" => (format!("{}/a2a/rest{path}", b.base), json!({"id": id})),
            _ => (
                format!("{}/a2a/jsonrpc", b.base),
                json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": id}}),
            ),
        };
        let r = http.post(url).header("A2A-Version", "1.0").header("Last-Event-ID", value).json(&body).send();
        async move {
            let r = r.await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let last = log[log.len() - 1].to_string();
    for binding in ["rest", "jsonrpc"] {
        let (status, answer) = raw(binding, last.clone()).await;
        let error = &answer["error"];
        assert!(error["message"].as_str().unwrap().contains("every event up to its last"), "{status} {answer}");
        for bad in ["abc", "-3"] {
            let (status, answer) = raw(binding, bad.into()).await;
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(&format!("Last-Event-ID `{bad}`")), "{binding} {status} {answer}");
            if binding == "rest" {
                assert_eq!(status, 400);
            } else {
                assert_eq!(answer["error"]["code"], -32602);
            }
        }
    }
}

/// Issue 20, point 4: behind a trusted proxy the rate limit counts each client its
/// `X-Forwarded-For` names; from an untrusted peer the header changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn the_rate_limit_counts_the_client_a_trusted_proxy_names_and_ignores_the_header_otherwise() {
    let statuses = |h: &HarnessProcess, client: &'static str| {
        // ListTasks: counted (the card and `/_ready` are not, issue 34).
        let url = format!("{}/a2a/rest/tasks", h.base_url);
        async move {
            let http = reqwest::Client::new();
            let mut out = Vec::new();
            for _ in 0..3 {
                let r = http.get(&url).header("A2A-Version", "1.0").header("X-Forwarded-For", client).send();
                out.push(r.await.unwrap().status().as_u16());
            }
            out
        }
    };
    let behind = HarnessProcess::start(HarnessOptions {
        server_extra: "rate_limit_per_minute = 2\ntrusted_proxies = [\"127.0.0.0/8\"]\n".into(),
        ..Default::default()
    })
    .await;
    assert_eq!(statuses(&behind, "203.0.113.1").await, [200, 200, 429]);
    assert_eq!(statuses(&behind, "203.0.113.2").await, [200, 200, 429], "another client has its own window");
    let open = HarnessProcess::start(HarnessOptions {
        server_extra: "rate_limit_per_minute = 2\n".into(),
        ..Default::default()
    })
    .await;
    // Every request shares the peer's window (the start's readiness probes are not counted).
    assert_eq!(statuses(&open, "203.0.113.1").await, [200, 200, 429]);
    assert_eq!(statuses(&open, "203.0.113.2").await, [429, 429, 429], "an untrusted peer's header is ignored");
}
