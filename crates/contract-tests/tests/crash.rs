//! Crash consistency (issue 13, S5, D1; docs/event-log.md "What a crash can leave"): the
//! harness is SIGKILLed at chosen and at random moments, clients retry as real clients do,
//! and afterwards every invariant a user relies on is checked against the store and the
//! workflow. `cargo xtask chaos --minutes N` runs the random part for N minutes.

use contract_tests::{HarnessOptions, HarnessProcess, OwnTemporal, user_text};
use harness_workflow::TaskWorkflow;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use temporalio_client::{WorkflowQueryOptions, WorkflowTerminateOptions};

const FAULT: &str = "TINY_HARNESS_FAULT_EMIT_DELAY_MS";

/// The participant the retrying clients of these tests name themselves as.
const CLIENT: &str = "crash-client";

/// A harness on a Temporal server of the test's own, each `emit_event` waiting `ms` after
/// its append, so a kill lands inside the workflow task that appended.
async fn slow_harness(ms: u64) -> (OwnTemporal, HarnessProcess) {
    slow_harness_with(ms, HarnessOptions::default()).await
}

/// The harness's decisions at info level (its reconciler's at debug), for a failing test's
/// output.
fn verbose() -> (String, String) {
    ("RUST_LOG".to_string(), "info,tiny_harness=debug".to_string())
}

/// [`slow_harness`] with options of the test's own.
async fn slow_harness_with(ms: u64, opts: HarnessOptions) -> (OwnTemporal, HarnessProcess) {
    let temporal = OwnTemporal::start().await;
    let env = vec![(FAULT.to_string(), ms.to_string()), verbose()];
    let h = HarnessProcess::start(HarnessOptions { env, temporal: Some(temporal.address()), ..opts }).await;
    (temporal, h)
}

/// The reply text of a blocking SendMessage answer.
fn reply_of(answer: &Value) -> String {
    answer["result"]["task"]["status"]["message"]["parts"][0]["text"].as_str().unwrap_or("").to_string()
}

/// One blocking SendMessage of `message` as the retrying clients' participant ([`CLIENT`]):
/// the answer's JSON, or what went wrong.
async fn post_as_client(http: &reqwest::Client, base: &str, message: &Value) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}});
    let sent = http
        .post(format!("{base}/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .header("X-Participant-Id", CLIENT)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    sent.json::<Value>().await.map_err(|e| e.to_string())
}

/// [`post_as_client`] sent while the test kills the harness: the connection cut is what it
/// expects (no answer, no panic).
async fn send_as_client(base: &str, message: Value) {
    let _ = post_as_client(&reqwest::Client::new(), base, &message).await;
}

/// Sends a message (blocking) until an answer with a task comes back, retrying the same
/// message (same messageId) through refused connections and errors, as a client that lost
/// its connection does. The client names itself (`X-Participant-Id`): only an identified
/// sender's first message is exactly-once (issue 28). Gives up at `deadline`.
async fn send_until_answered(base: &str, message: &Value, deadline: Instant) -> Option<Value> {
    // Longer than the harness's own bound on a Temporal call (30 s), so that an attempt the
    // harness gives up on is seen with the harness's answer, not cut at the same moment.
    let http = reqwest::Client::builder().timeout(Duration::from_secs(45)).build().unwrap();
    let started = Instant::now();
    while Instant::now() < deadline {
        let answer = post_as_client(&http, base, message).await;
        match answer {
            Ok(v) if v["result"]["task"]["id"].is_string() => return Some(v),
            // What each failed attempt got, for the test's output when it fails.
            Ok(v) => eprintln!("{:?} after the first attempt: {}", started.elapsed(), v["error"]),
            Err(e) => eprintln!("{:?} after the first attempt: {e}", started.elapsed()),
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    None
}

/// What one conversation's client saw acknowledged: (messageId, text, reply).
#[derive(Clone, Debug, Default)]
struct Conversation {
    task_id: Option<String>,
    acked: Vec<(String, String, String)>,
}

/// A client that keeps one conversation going until `stop`, each message retried until it
/// is answered. Returns what was acknowledged.
async fn converse(base: String, n: usize, stop: Arc<AtomicBool>, deadline: Instant) -> Conversation {
    let mut c = Conversation::default();
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let text = format!("conversation {n} message {i}");
        let mut message = user_text(&text);
        if let Some(id) = &c.task_id {
            message["taskId"] = json!(id);
        }
        let message_id = message["messageId"].as_str().unwrap().to_string();
        let Some(answer) = send_until_answered(&base, &message, deadline).await else { break };
        let task_id = answer["result"]["task"]["id"].as_str().unwrap().to_string();
        match &c.task_id {
            None => c.task_id = Some(task_id),
            Some(t) => assert_eq!(t, &task_id, "a follow-up was answered from another task"),
        }
        c.acked.push((message_id, text, reply_of(&answer)));
        i += 1;
    }
    c
}

/// Every invariant of a recovered task (issue 13), checked once the workflow is idle and
/// the store agrees with it (waiting for the reconciler at most `wait`). Returns a list of
/// violations (empty: all hold).
async fn check(h: &HarnessProcess, c: &Conversation, wait: Duration) -> Vec<String> {
    let Some(task_id) = &c.task_id else { return vec![] };
    let store = h.store().await;
    let temporal = h.temporal().await;
    let handle = temporal.get_workflow_handle::<TaskWorkflow>(task_id.as_str());
    let deadline = Instant::now() + wait;
    let mut why = Vec::new();
    loop {
        why.clear();
        let position = handle.query(TaskWorkflow::log, (), WorkflowQueryOptions::default()).await;
        let workflow = handle.query(TaskWorkflow::live, (), WorkflowQueryOptions::default()).await;
        let head = store.task_head(task_id).await.unwrap();
        match (position, workflow, head) {
            (Ok(p), Ok(live), Some(head)) => {
                let w = &live.task;
                if !p.idle {
                    why.push(format!("{task_id}: the workflow is not idle"));
                }
                if head.last_seq != p.last_seq {
                    why.push(format!("{task_id}: store last_seq {} but workflow {}", head.last_seq, p.last_seq));
                }
                if head.state != w.status.state {
                    why.push(format!("{task_id}: store state {} but workflow {}", head.state, w.status.state));
                }
                // The stored status is the workflow's own (a dead workflow task's events carry
                // other timestamps, whatever their text).
                let row = store.task(task_id, Some(0)).await.unwrap().unwrap();
                if row.task.status != w.status {
                    why.push(format!("{task_id}: store status {:?} but workflow {:?}", row.task.status, w.status));
                }
                if !matches!(head.state.as_str(), "TASK_STATE_INPUT_REQUIRED") {
                    why.push(format!("{task_id}: left {} after recovery", head.state));
                }
                let stored = store.history(task_id, i64::MAX, None).await.unwrap();
                let ids = |m: &mut dyn Iterator<Item = &a2a_types::Message>| {
                    m.map(|m| (m.message_id.clone(), m.text())).collect::<Vec<_>>()
                };
                // The workflow keeps no copy of the conversation (issue 15): idle, it has
                // nothing the store lacks, and the store has exactly the messages it stored.
                if !w.history.is_empty() || stored.len() != live.stored_history as usize {
                    why.push(format!(
                        "{task_id}: store history {:?} but the workflow stored {} and has {:?} pending",
                        ids(&mut stored.iter()),
                        live.stored_history,
                        ids(&mut w.history.iter().map(|m| &**m))
                    ));
                }
                // Every acknowledged message once, answered by its own reply (the reply that
                // names it, after it: a message queued behind a turn comes before that
                // turn's reply), and no message (acknowledged or not) with a second turn.
                let answers = |i: usize, id: &str| {
                    let key = harness_workflow::reply_ext_key();
                    stored[i + 1..]
                        .iter()
                        .filter(|r| {
                            r.metadata.as_ref().and_then(|md| md.get(&key)).and_then(harness_workflow::marked_reply_to)
                                == Some(id)
                        })
                        .map(|r| r.text())
                        .collect::<Vec<_>>()
                };
                let mut seen: HashMap<&str, usize> = HashMap::new();
                for (i, m) in stored.iter().enumerate() {
                    if m.role == a2a_types::Role::User {
                        *seen.entry(m.message_id.as_str()).or_default() += 1;
                        let replies = answers(i, &m.message_id);
                        if replies != [format!("echo: {}", m.text())] {
                            why.push(format!("{task_id}: `{}` is answered by {replies:?}", m.text()));
                        }
                    }
                }
                for (id, text, _) in &c.acked {
                    if seen.get(id.as_str()) != Some(&1) {
                        why.push(format!(
                            "{task_id}: acknowledged `{text}` is stored {:?} times",
                            seen.get(id.as_str())
                        ));
                    }
                }
                if let Some((id, n)) = seen.iter().find(|(_, n)| **n > 1) {
                    why.push(format!("{task_id}: message {id} ran {n} turns"));
                }
                let seqs: Vec<i64> =
                    store.events_after(task_id, 0, 100_000).await.unwrap().iter().map(|e| e.seq).collect();
                if seqs != (1..=head.last_seq).collect::<Vec<_>>() {
                    why.push(format!("{task_id}: the log has a gap: {seqs:?}"));
                }
            }
            (p, w, head) => why.push(format!(
                "{task_id}: not readable: log {:?} task {:?} head {head:?}",
                p.err(),
                w.err().map(|e| e.to_string())
            )),
        }
        if why.is_empty() || Instant::now() > deadline {
            return why;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Acknowledged replies answer their own messages.
fn replies_answer_their_messages(c: &Conversation) -> Vec<String> {
    c.acked
        .iter()
        .filter(|(_, text, reply)| *reply != format!("echo: {text}"))
        .map(|(_, text, reply)| format!("`{text}` was answered `{reply}`"))
        .collect()
}

/// Waits until the store shows a task whose log has at least `seq` events, and returns it.
async fn await_log(h: &HarnessProcess, task: Option<&str>, seq: i64) -> String {
    let store = h.store().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ids = match task {
            Some(t) => vec![t.to_string()],
            None => store.task_ids().await.unwrap(),
        };
        for id in ids {
            let row = sqlx_last_seq(&store, &id).await;
            if row >= seq {
                return id;
            }
        }
        assert!(Instant::now() < deadline, "no task reached seq {seq}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn sqlx_last_seq(store: &harness_store::Store, task: &str) -> i64 {
    store.events_after(task, 0, 100_000).await.unwrap().last().map_or(0, |e| e.seq)
}

/// Finding 1 and 2 of issue 13: the harness dies inside the workflow task that took a new
/// task's first message (its WORKING already in the store). The client retries the same
/// message: it gets the task the first attempt opened, answered once; a follow-up then gets
/// its own reply, and store and workflow agree. (Before: the update was lost, the store
/// kept the dead task's events, the retry opened a second task and the follow-up was
/// answered `echo: original 1`.)
#[tokio::test]
async fn a_first_message_whose_workflow_task_dies_is_answered_once_and_a_follow_up_gets_its_own_reply() {
    let (mut temporal, mut h) = slow_harness(1500).await;
    let first = user_text("original 1");
    let base = h.base_url.clone();
    let sent = first.clone();
    let lost = tokio::spawn(async move { send_as_client(&base, sent).await });
    // The Task is stored and the workflow task is still running (each emit waits 1.5 s).
    let task_id = await_log(&h, None, 1).await;
    // The harness dies, and Temporal with it (as `dev` runs them): what Temporal had not
    // committed is gone.
    h.kill9();
    temporal.crash_and_restart().await;
    h.restart_with_env(vec![verbose()]).await;
    let _ = lost.await;

    // As the user did: a follow-up to the announced task, then the first message
    // retried.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut next = user_text("NEW TEXT");
    next["taskId"] = json!(task_id);
    let unanswered = |what: &str| panic!("the {what} is not answered\n{}\nTemporal:\n{}", h.log(), temporal.log());
    let answer = send_until_answered(&h.base_url, &next, deadline).await.unwrap_or_else(|| unanswered("follow-up"));
    assert_eq!(reply_of(&answer), "echo: NEW TEXT", "the reply answers its own message");
    let answer = send_until_answered(&h.base_url, &first, deadline).await.unwrap_or_else(|| unanswered("retry"));
    assert_eq!(answer["result"]["task"]["id"], json!(task_id), "the retry finds the task the first attempt opened");
    let store = h.store().await;
    assert_eq!(store.task_ids().await.unwrap(), vec![task_id.clone()], "no second task");
    let c = Conversation {
        task_id: Some(task_id.clone()),
        acked: vec![
            (first["messageId"].as_str().unwrap().into(), "original 1".into(), "echo: original 1".into()),
            (next["messageId"].as_str().unwrap().into(), "NEW TEXT".into(), "echo: NEW TEXT".into()),
        ],
    };
    let why = check(&h, &c, Duration::from_secs(30)).await;
    assert!(why.is_empty(), "{why:#?}\n{}", h.log());
}

/// A follow-up whose workflow task dies after its WORKING was stored: Temporal may lose the
/// update (the sender was never answered). Whichever it does, the store ends up saying what
/// the workflow says: the reconciler cuts back what the dead task appended, or the workflow
/// runs the turn again and its events replace the dead ones.
#[tokio::test]
async fn a_follow_up_whose_workflow_task_dies_leaves_the_store_agreeing_with_the_workflow() {
    let (mut temporal, mut h) = slow_harness(1000).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let first = user_text("one");
    let answer = send_until_answered(&h.base_url, &first, deadline).await.unwrap();
    let task_id = answer["result"]["task"]["id"].as_str().unwrap().to_string();
    let parked = sqlx_last_seq(&h.store().await, &task_id).await;
    let mut lost = user_text("lost");
    lost["taskId"] = json!(task_id);
    let (base, sent) = (h.base_url.clone(), lost.clone());
    let sending = tokio::spawn(async move { send_as_client(&base, sent).await });
    await_log(&h, Some(&task_id), parked + 1).await;
    h.kill9();
    temporal.crash_and_restart().await;
    h.restart_with_env(Vec::new()).await;
    let _ = sending.await;
    let c = Conversation {
        task_id: Some(task_id.clone()),
        acked: vec![(first["messageId"].as_str().unwrap().into(), "one".into(), "echo: one".into())],
    };
    let why = check(&h, &c, Duration::from_secs(60)).await;
    assert!(why.is_empty(), "{why:#?}\n{}", h.log());
    // The sender retries: answered once, with its own reply.
    let answer = send_until_answered(&h.base_url, &lost, deadline).await.unwrap();
    assert_eq!(reply_of(&answer), "echo: lost");
    let c = Conversation {
        acked: [
            c.acked.clone(),
            vec![(lost["messageId"].as_str().unwrap().into(), "lost".into(), "echo: lost".into())],
        ]
        .concat(),
        ..c
    };
    let why = check(&h, &c, Duration::from_secs(30)).await;
    assert!(why.is_empty(), "{why:#?}\n{}", h.log());
}

/// Finding 2 of issue 13: `messageId` is the idempotency key of an identified sender
/// (issue 28). A retried first message and a retried follow-up get their first answers and
/// run no second turn, before and after a SIGKILL of the harness; an id reused for another
/// message is refused naming it (the task named is the sender's own).
#[tokio::test]
async fn a_retried_message_gets_its_first_answer_and_never_a_second_turn() {
    let mut h = HarnessProcess::start(HarnessOptions::default()).await;
    let alice = Some(("X-Participant-Id", "alice"));
    let send = |base: String, message: Value| async move {
        contract_tests::rpc_as(&base, alice, "SendMessage", json!({"message": message})).await
    };
    let first = user_text("hello");
    let a = send(h.base_url.clone(), first.clone()).await;
    let b = send(h.base_url.clone(), first.clone()).await;
    let task_id = a["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(b["result"]["task"]["id"], json!(task_id), "{b}");
    assert_eq!(reply_of(&b), "echo: hello");
    let mut next = user_text("again");
    next["taskId"] = json!(task_id);
    let x = send(h.base_url.clone(), next.clone()).await;
    let y = send(h.base_url.clone(), next.clone()).await;
    assert_eq!((reply_of(&x), reply_of(&y)), ("echo: again".to_string(), "echo: again".to_string()), "{y}");
    // After a later turn, a retry still gets its own answer; so does a retried first message,
    // also after the harness was SIGKILLed and started again.
    let mut third = user_text("third");
    third["taskId"] = json!(task_id);
    assert_eq!(reply_of(&send(h.base_url.clone(), third).await), "echo: third");
    assert_eq!(reply_of(&send(h.base_url.clone(), next.clone()).await), "echo: again");
    h.kill9();
    h.restart().await;
    let z = send(h.base_url.clone(), first.clone()).await;
    assert_eq!(z["result"]["task"]["id"], json!(task_id), "{z}");
    assert_eq!(reply_of(&z), "echo: hello", "{z}");
    assert_eq!(reply_of(&send(h.base_url.clone(), next.clone()).await), "echo: again");
    let store = h.store().await;
    let texts: Vec<String> = store.history(&task_id, i64::MAX, None).await.unwrap().iter().map(|m| m.text()).collect();
    assert_eq!(texts, vec!["hello", "echo: hello", "again", "echo: again", "third", "echo: third"], "no second turn");
    assert_eq!(store.task_ids().await.unwrap(), vec![task_id.clone()], "no second task");
    // A streamed retry replays the first answer too.
    let events = h.client().stream_message(next.clone()).await;
    let last = events.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["message"]["parts"][0]["text"], "echo: again", "{events:?}");

    let mut other = user_text("something else");
    other["messageId"] = next["messageId"].clone();
    other["taskId"] = json!(task_id);
    let refused = send(h.base_url.clone(), other).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let text = refused["error"]["message"].as_str().unwrap();
    assert!(text.contains(next["messageId"].as_str().unwrap()) && text.contains("already used"), "{text}");
    // A first message with alice's first id but other text is refused naming her own task.
    let reused = send(
        h.base_url.clone(),
        json!({"messageId": first["messageId"], "role": "ROLE_USER",
        "parts": [{"text": "not hello"}]}),
    )
    .await;
    assert_eq!(reused["error"]["code"], -32602, "{reused}");
    assert!(reused["error"]["message"].as_str().unwrap().contains(&task_id), "alice is on her task: {reused}");
    // Another sender may use the same id for its own first message, and so may an anonymous
    // one: neither learns of alice's task.
    for header in [Some(("X-Participant-Id", "bob")), None] {
        let theirs = contract_tests::rpc_as(&h.base_url, header, "SendMessage", json!({"message": first})).await;
        assert_ne!(theirs["result"]["task"]["id"], json!(task_id), "{theirs}");
        assert!(!theirs.to_string().contains(&task_id), "{theirs}");
    }
}

/// Finding 3 of issue 13: a message too large for Temporal's payloads is refused up front,
/// naming the limit, and opens nothing; a run Temporal terminates (as it does at a history
/// limit) is ended FAILED in the store, and every later message is refused naming that state.
#[tokio::test]
async fn an_oversized_message_is_refused_up_front_and_a_terminated_run_leaves_no_zombie() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let big = user_text(&"x".repeat(300 * 1024));
    let r = c.send(big, json!({})).await;
    assert_eq!(r["error"]["code"], -32602, "{}", &r.to_string()[..300.min(r.to_string().len())]);
    let text = r["error"]["message"].as_str().unwrap();
    assert!(text.contains("agent.max_message_bytes") && text.contains("262144"), "{text}");
    let store = h.store().await;
    assert!(store.task_ids().await.unwrap().is_empty(), "nothing opened");

    let a = c.send(user_text("hi"), json!({})).await;
    let task_id = a["result"]["task"]["id"].as_str().unwrap().to_string();
    let temporal = h.temporal().await;
    let handle = temporal.get_workflow_handle::<TaskWorkflow>(task_id.as_str());
    handle.terminate(WorkflowTerminateOptions::builder().reason("history size exceeded").build()).await.unwrap();
    let mut next = user_text("are you there?");
    next["taskId"] = json!(task_id);
    for _ in 0..2 {
        let r = c.send(next.clone(), json!({})).await;
        let text = r["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains("terminal state (TASK_STATE_FAILED)"), "{r}");
        next["messageId"] = json!(format!("{}-again", next["messageId"].as_str().unwrap()));
    }
    let got = c.rpc("GetTask", json!({"id": task_id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_FAILED", "{got}");
    let why = got["result"]["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(why.contains("terminated"), "{why}");
}

/// The fault-injection suite (issue 13): conversations with retrying clients while the
/// harness is SIGKILLed at random moments (each emit waits a little, so kills land inside
/// workflow tasks too), then every invariant. `TINY_HARNESS_CHAOS_MINUTES` runs it that
/// long (`cargo xtask chaos --minutes N`); by default three kills.
#[tokio::test]
async fn chaos_kills_under_concurrent_conversations_break_no_invariant() {
    let minutes: f64 = std::env::var("TINY_HARNESS_CHAOS_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(0.0);
    let conversations: usize =
        std::env::var("TINY_HARNESS_CHAOS_CONVERSATIONS").ok().and_then(|m| m.parse().ok()).unwrap_or(4);
    // Runs continue as new every few messages (issue 15), so kills land at run boundaries too.
    let opts = HarnessOptions { agent_extra: "run_max_messages = 4\n".into(), ..Default::default() };
    let (mut temporal, mut h) = slow_harness_with(120, opts).await;
    let run_until = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let stop = Arc::new(AtomicBool::new(false));
    let give_up = Instant::now() + Duration::from_secs_f64(minutes * 60.0 + 240.0);
    let clients: Vec<_> =
        (0..conversations).map(|n| tokio::spawn(converse(h.base_url.clone(), n, stop.clone(), give_up))).collect();
    let mut kills = 0;
    let mut seed = std::process::id() as u64 ^ Instant::now().elapsed().as_nanos() as u64 ^ 0x9e3779b97f4a7c15;
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    while kills < 3 || Instant::now() < run_until {
        tokio::time::sleep(Duration::from_millis(300 + random(2500))).await;
        h.kill9();
        // Every other time Temporal dies too (as under `dev`), at a moment of its own.
        if kills % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(random(200))).await;
            temporal.crash_and_restart().await;
        }
        h.restart().await; // the same environment: emits still wait
        kills += 1;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for c in clients {
        seen.push(c.await.unwrap());
    }
    let acked: usize = seen.iter().map(|c| c.acked.len()).sum();
    let mut why: Vec<String> = seen.iter().flat_map(replies_answer_their_messages).collect();
    for c in &seen {
        why.extend(check(&h, c, Duration::from_secs(60)).await);
    }
    let log = h.log();
    eprintln!(
        "chaos: the harness logged {} workers started again after an SDK panic, {} logs cut back by the reconciler, {} \
         reconciler passes that changed something",
        log.matches("starting a new one").count(),
        log.matches("cut back events a crashed workflow task").count(),
        log.matches("reconciled the store with Temporal").count(),
    );
    eprintln!(
        "chaos: {kills} kills of the harness ({} with Temporal), {conversations} conversations, {acked} acknowledged messages, {} violations",
        kills / 2,
        why.len()
    );
    assert!(acked >= conversations, "too little got through: {acked}\n{}", h.log());
    assert!(why.is_empty(), "{why:#?}");
}

/// Issue 15: the harness (and Temporal with it) dies inside the workflow task that ends a
/// turn and continues the run as new (each run takes two messages; the turn's final event is
/// stored and the task still waits in its last emit). The retried message is answered once
/// with its own reply, the conversation goes on across more boundaries, and store and
/// workflow agree.
#[tokio::test]
async fn a_harness_killed_while_a_run_continues_as_new_loses_nothing() {
    let opts = HarnessOptions { agent_extra: "run_max_messages = 2\n".into(), ..Default::default() };
    let (mut temporal, mut h) = slow_harness_with(800, opts).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut c = Conversation::default();
    let opened = send_until_answered(&h.base_url, &user_text("message 0"), deadline).await.expect("opened");
    let task_id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    c.task_id = Some(task_id.clone());
    c.acked.push(("".into(), "message 0".into(), reply_of(&opened)));
    c.acked[0].0 = opened["result"]["task"]["history"][0]["messageId"].as_str().unwrap().to_string();

    // The second message crosses the bound: its turn's final event, then continue-as-new.
    let before = sqlx_last_seq(&h.store().await, &task_id).await;
    let mut crossing = user_text("message 1");
    crossing["taskId"] = json!(task_id);
    let base = h.base_url.clone();
    let sent = crossing.clone();
    let lost = tokio::spawn(async move { send_as_client(&base, sent).await });
    await_log(&h, Some(&task_id), before + 3).await;
    h.kill9();
    temporal.crash_and_restart().await;
    let _ = lost.await;
    h.restart().await;
    let answer = send_until_answered(&h.base_url, &crossing, deadline).await.expect("the retried message");
    c.acked.push((crossing["messageId"].as_str().unwrap().into(), "message 1".into(), reply_of(&answer)));
    for i in 2..6 {
        let mut m = user_text(&format!("message {i}"));
        m["taskId"] = json!(task_id);
        let answer = send_until_answered(&h.base_url, &m, deadline).await.expect("a later message");
        c.acked.push((m["messageId"].as_str().unwrap().into(), format!("message {i}"), reply_of(&answer)));
    }
    let mut why = replies_answer_their_messages(&c);
    why.extend(check(&h, &c, Duration::from_secs(60)).await);
    assert!(why.is_empty(), "{why:#?}\n{}", h.log());

    // The run the kill hit did continue as new, and so did later ones.
    let runs = contract_tests::runs_of(&h.temporal().await, &task_id).await;
    let continued =
        runs.iter().filter(|r| r.status() == temporalio_client::WorkflowExecutionStatus::ContinuedAsNew).count();
    assert!(continued >= 2, "expected runs that continued as new, found {continued} of {}", runs.len());
}

/// Issue 31: a restart checks the tasks it reconciles from their runs' newest history
/// events and replays none whose stored log that history already covers. Asking the
/// workflow (its `position` update) rebuilds each run from its whole history into the
/// worker's cache: a harness restarted with many parked conversations held tens of MiB for
/// them, and wrote an update and a workflow task into every one's history. Here three
/// parked conversations are checked and their histories do not grow; a message after the
/// restart is answered in its conversation as before.
#[tokio::test]
async fn a_restart_checks_parked_tasks_from_their_history_without_replaying_them() {
    let mut h = HarnessProcess::start(HarnessOptions { env: vec![verbose()], ..Default::default() }).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut tasks = Vec::new();
    for i in 0..3 {
        let answer = send_until_answered(&h.base_url, &user_text(&format!("one {i}")), deadline).await.unwrap();
        let task_id = answer["result"]["task"]["id"].as_str().unwrap().to_string();
        let mut two = user_text(&format!("two {i}"));
        two["taskId"] = json!(task_id);
        let answer = send_until_answered(&h.base_url, &two, deadline).await.unwrap();
        assert_eq!(reply_of(&answer), format!("echo: two {i}"));
        tasks.push(task_id);
    }
    let mut lengths = Vec::new();
    for task in &tasks {
        lengths.push(h.workflow_history(task).await["events"].as_array().map_or(0, Vec::len));
    }
    let passes_before = h.log().matches("the store agrees with Temporal").count();
    h.restart().await;
    let reconciled = loop {
        let log = h.log();
        if let Some(line) = log.lines().filter(|l| l.contains("the store agrees with Temporal")).nth(passes_before) {
            break line.to_string();
        }
        assert!(Instant::now() < deadline, "the reconciler did not finish after the restart\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(reconciled.contains("checked: 3"), "the reconciler checked the three tasks: {reconciled}");
    for (task, before) in tasks.iter().zip(&lengths) {
        let after = h.workflow_history(task).await["events"].as_array().map_or(0, Vec::len);
        assert_eq!(
            after,
            *before,
            "the reconciler added events to {task}'s history (it asked the workflow)\n{}",
            h.log()
        );
    }
    let mut three = user_text("three");
    three["taskId"] = json!(tasks[1]);
    let answer = send_until_answered(&h.base_url, &three, deadline).await.unwrap();
    assert_eq!(reply_of(&answer), "echo: three");
    assert_eq!(answer["result"]["task"]["history"].as_array().map(Vec::len), Some(6), "{answer}");
}
