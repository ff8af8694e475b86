//! Long-lived tasks (issue 15): one conversation past every per-run limit Temporal has
//! (2,000 updates, 51,200 events, 50 MB of history), its runs continuing as new between
//! turns, with nothing lost, reordered or answered by another message's reply; and a
//! harness killed while a run hands over to the next.

use a2a_types::Role;
use contract_tests::{HarnessOptions, HarnessProcess};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use temporalio_client::{Client, WorkflowExecutionStatus};

/// The bounds the long conversation runs under (`[agent] run_max_*`).
const MAX_EVENTS: i64 = 2_000;
const MAX_BYTES: i64 = 2 * 1024 * 1024;

/// Each run of a task's workflow, oldest first: (run id, status, history events, history bytes).
async fn runs_of(client: &Client, task_id: &str) -> Vec<(String, WorkflowExecutionStatus, i64, i64)> {
    let mut runs = Vec::new();
    for run in contract_tests::runs_of(client, task_id).await {
        let d = contract_tests::run_handle(client, task_id, run.run_id())
            .describe(Default::default())
            .await
            .expect("describe run");
        let status = d.status();
        let raw = d.raw_description.workflow_execution_info.expect("execution info");
        runs.push((run.run_id().to_string(), status, raw.history_length, raw.history_size_bytes));
    }
    runs
}

fn text_of(message: &Value) -> String {
    message["parts"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// A message's text: its sender, its number in that sender's sequence and a long word (one
/// echo chunk; the history passes 50 MB well before the end).
fn numbered(sender: usize, i: usize) -> String {
    format!("s{sender}-{i:05}-{}", "x".repeat(2_000))
}

/// Issue 15: 10,000 messages (`TINY_HARNESS_LONG_MESSAGES` to change it) to one
/// conversation, one after the other; meanwhile GetTask is asked over and over. Every message is answered by its own reply and stored once in its sender's
/// order; no run's history passes the configured bounds, yet the conversation passes every
/// per-run limit of Temporal; SubscribeToTask replays the whole log from seq 1 without a gap.
#[tokio::test]
async fn ten_thousand_messages_to_one_conversation_cross_every_run_limit_and_lose_nothing() {
    let total: usize = std::env::var("TINY_HARNESS_LONG_MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    // One sender, each message after the answer to the one before: a message sent while
    // another's turn runs is answered with the turn that ends the queue (D5), not its own.
    let senders = 1;
    let h = HarnessProcess::start(HarnessOptions {
        agent_extra: format!("run_max_events = {MAX_EVENTS}\nrun_max_bytes = {MAX_BYTES}\n"),
        request_timeout_secs: 30,
        ..Default::default()
    })
    .await;
    let c = h.client();
    let opened =
        c.send(json!({"messageId": "open", "role": "ROLE_USER", "parts": [{"text": "open"}]}), json!({})).await;
    let task_id = opened["result"]["task"]["id"].as_str().expect("task id").to_string();

    // GetTask throughout: every answer is the task, never an error.
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let poller = {
        let (c, id, done, reads) = (c.clone(), task_id.clone(), done.clone(), reads.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let r = c.rpc("GetTask", json!({"id": id, "historyLength": 2})).await;
                assert_eq!(r["result"]["id"], json!(id), "GetTask failed during the conversation: {r}");
                reads.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2000)).await;
            }
        })
    };

    let started = Instant::now();
    let mut sending = Vec::new();
    for sender in 0..senders {
        let (c, id) = (c.clone(), task_id.clone());
        sending.push(tokio::spawn(async move {
            let mut took = Vec::new();
            for i in (sender..total).step_by(senders) {
                let t = Instant::now();
                let text = numbered(sender, i);
                let message = json!({"messageId": format!("m-{i}"), "taskId": id, "role": "ROLE_USER",
                    "parts": [{"text": text}]});
                let r = c.send(message, json!({})).await;
                let status = &r["result"]["task"]["status"];
                assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "message {i}: {r}");
                assert_eq!(text_of(&status["message"]), format!("echo: {text}"), "message {i} got another reply");
                took.push(t.elapsed());
            }
            took
        }));
    }
    for s in sending {
        let took = s.await.expect("a sender failed");
        let n = took.len().min(100);
        let p50 = |d: &mut [Duration]| {
            d.sort();
            d[d.len() / 2]
        };
        let (first, last) = (p50(&mut took[..n].to_vec()), p50(&mut took[took.len() - n..].to_vec()));
        eprintln!("p50 of the first {n} messages {first:.1?}, of the last {n} {last:.1?}");
    }
    done.store(true, Ordering::Relaxed);
    poller.await.expect("GetTask failed");
    eprintln!("{total} messages in {:.0?}, {} GetTask answers", started.elapsed(), reads.load(Ordering::Relaxed));
    assert!(reads.load(Ordering::Relaxed) > 0);

    // The store: every message once, each sender's in its order, and the reply of turn k
    // (`<task>:reply:<k>`) answers the k-th message (messages queue while a turn runs, so a
    // reply need not follow its message at once).
    let store = h.store().await;
    let history = store.history(&task_id, i64::MAX, None).await.unwrap();
    assert_eq!(history.len(), 2 * (total + 1), "the history holds every message and reply once");
    let asked: Vec<String> = history.iter().filter(|m| m.role == Role::User).map(|m| m.text()).collect();
    assert_eq!(asked.len(), total + 1);
    let mut next: HashMap<usize, usize> = (0..senders).map(|s| (s, s)).collect();
    for text in &asked[1..] {
        let sender: usize = text[1..text.find('-').unwrap()].parse().unwrap();
        let expected = next.get_mut(&sender).unwrap();
        assert_eq!(text, &numbered(sender, *expected), "sender {sender}'s messages are out of order");
        *expected += senders;
    }
    for reply in history.iter().filter(|m| m.role != Role::User) {
        let turn: usize = reply.message_id.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(reply.text(), format!("echo: {}", asked[turn - 1]), "reply {turn} answers another message");
    }

    // The runs: each within the bounds, together past every per-run limit of Temporal.
    let runs = runs_of(&h.temporal().await, &task_id).await;
    let (events, bytes): (i64, i64) = runs.iter().fold((0, 0), |(e, b), r| (e + r.2, b + r.3));
    eprintln!("{} runs, {events} events, {bytes} bytes of history", runs.len());
    for (run, status, events, bytes) in &runs {
        assert!(*events <= MAX_EVENTS, "run {run} has {events} events (bound {MAX_EVENTS})");
        assert!(*bytes <= MAX_BYTES, "run {run} has {bytes} bytes of history (bound {MAX_BYTES})");
        let last = run == &runs.last().unwrap().0;
        let want = if last { WorkflowExecutionStatus::Running } else { WorkflowExecutionStatus::ContinuedAsNew };
        assert_eq!(*status, want, "run {run}");
    }
    if total >= 10_000 {
        assert!(events > 51_200 && bytes > 50 * 1024 * 1024, "the conversation stayed under Temporal's per-run caps");
    }

    // SubscribeToTask replays every event from seq 1, in the store's order, without a gap.
    let logged = store.events_after(&task_id, 0, i64::MAX).await.unwrap();
    assert!(logged.iter().enumerate().all(|(i, e)| e.seq == i as i64 + 1), "the stored log has a gap");
    let mut stream = c.open_stream("", Some("SubscribeToTask"), json!({"id": task_id})).await;
    for (i, stored) in logged.iter().enumerate() {
        let event = stream.next().await.unwrap_or_else(|| panic!("the subscription ended at event {i}"));
        assert_eq!(event, serde_json::to_value(&stored.event).unwrap(), "event {} differs from the log", i + 1);
    }
}

/// Issue 15 item 3: a task that was mid-conversation on the code before this change (the
/// binary `TINY_HARNESS_OLD_BIN`; `cargo xtask old-run [REV]` builds it and runs this) is
/// taken over by this code after a SIGKILL: its old run replays, takes more messages, and
/// then continues as new like any run (the old run's input has no limits: the defaults).
#[tokio::test]
#[ignore = "needs the old binary: cargo xtask old-run [REV]"]
async fn a_task_mid_conversation_on_the_old_code_continues_on_this_one() {
    let old = std::env::var("TINY_HARNESS_OLD_BIN").expect("TINY_HARNESS_OLD_BIN names the old binary");
    let new = contract_tests::harness_binary();
    // SAFETY: set before any other thread of this test reads the environment.
    unsafe { std::env::set_var("TINY_HARNESS_BIN", &old) };
    let mut h = HarnessProcess::start(HarnessOptions { request_timeout_secs: 30, ..Default::default() }).await;
    let c = h.client();
    let opened =
        c.send(json!({"messageId": "old-0", "role": "ROLE_USER", "parts": [{"text": "old 0"}]}), json!({})).await;
    let task_id = opened["result"]["task"]["id"].as_str().expect("task id").to_string();
    let send = |c: contract_tests::A2AClient, id: String, i: usize| async move {
        let text = format!("message {i}");
        let m = json!({"messageId": format!("m-{i}"), "taskId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
        let r = c.send(m, json!({})).await;
        assert_eq!(text_of(&r["result"]["task"]["status"]["message"]), format!("echo: {text}"), "message {i}: {r}");
    };
    for i in 1..3 {
        send(c.clone(), task_id.clone(), i).await;
    }
    h.kill9();
    // SAFETY: the old harness is gone; nothing else reads the environment now.
    unsafe { std::env::set_var("TINY_HARNESS_BIN", &new) };
    h.restart().await;
    // Past nine tenths of the default 4,000 events (about eight a message).
    let total = 480;
    for i in 3..total {
        send(c.clone(), task_id.clone(), i).await;
    }
    let history = h.store().await.history(&task_id, i64::MAX, None).await.unwrap();
    let asked: Vec<String> = history.iter().filter(|m| m.role == Role::User).map(|m| m.text()).collect();
    let want: Vec<String> =
        std::iter::once("old 0".to_string()).chain((1..total).map(|i| format!("message {i}"))).collect();
    assert_eq!(asked, want, "every message once, in order");
    let runs = runs_of(&h.temporal().await, &task_id).await;
    assert!(runs.len() >= 2, "the old run never continued as new: {runs:?}");
    assert_eq!(runs[0].1, WorkflowExecutionStatus::ContinuedAsNew, "{runs:?}");
}
