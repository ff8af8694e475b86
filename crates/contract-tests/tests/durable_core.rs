//! The durable path end to end (D1, S4, S5, S7, S10, S13): the real `tiny-harness` binary,
//! a real Temporal dev server, real HTTP on both bindings.

use contract_tests::{HarnessOptions, HarnessProcess, kind, state, task_id, user_text};
use serde_json::{Value, json};
use std::time::Duration;
use temporalio_client::{WorkflowDescribeOptions, WorkflowExecutionStatus};

const SUBSTATE_KEY: &str = "io.github.madarauchiha-314.tiny-harness/status";

fn artifact_text(events: &[Value]) -> String {
    events
        .iter()
        .filter_map(|e| e.get("artifactUpdate"))
        .flat_map(|a| a["artifact"]["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect()
}

fn final_text(event: &Value) -> String {
    event["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str().unwrap_or("").to_string()
}

async fn workflow_status(h: &HarnessProcess, task: &str) -> WorkflowExecutionStatus {
    let client = h.temporal().await;
    let handle = client.get_workflow_handle::<harness_workflow::TaskWorkflow>(task);
    handle.describe(WorkflowDescribeOptions::default()).await.expect("describe").status()
}

async fn wait_until_closed(h: &HarnessProcess, task: &str) {
    for _ in 0..200 {
        if workflow_status(h, task).await != WorkflowExecutionStatus::Running {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the workflow of {task} did not close");
}

#[tokio::test]
async fn a_streamed_conversation_turn_is_task_working_chunks_then_parked_and_a_second_message_continues_it() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();

    let events = c.stream_message(user_text("hello big world")).await;
    let kinds: Vec<&str> = events.iter().map(kind).collect();
    assert_eq!(kinds[0], "task", "{events:#?}");
    assert_eq!(state(&events[0]), Some("TASK_STATE_SUBMITTED"));
    assert_eq!(events[0]["task"]["history"][0]["parts"][0]["text"], "hello big world");
    assert_eq!(state(&events[1]), Some("TASK_STATE_WORKING"));
    let chunks: Vec<&Value> = events.iter().filter(|e| kind(e) == "artifactUpdate").collect();
    assert!(chunks.len() >= 2, "the reply streams in pieces: {events:#?}");
    assert_eq!(chunks.last().unwrap()["artifactUpdate"]["lastChunk"], true);
    assert_eq!(artifact_text(&events), "echo: hello big world");
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"));
    assert_eq!(last["statusUpdate"]["metadata"][SUBSTATE_KEY]["substate"], "awaiting-next-message");
    assert_eq!(final_text(last), "echo: hello big world");

    // D5: the parked conversation continues with the next message on the same task.
    let task = task_id(&events);
    let mut second = user_text("and again");
    second["taskId"] = json!(task);
    let events2 = c.stream_message(second).await;
    assert_eq!(kind(&events2[0]), "task");
    assert_eq!(events2[0]["task"]["id"], task.as_str());
    assert_eq!(events2[0]["task"]["history"].as_array().unwrap().len(), 3, "user, agent, user");
    assert_eq!(state(&events2[1]), Some("TASK_STATE_WORKING"));
    assert_eq!(artifact_text(&events2), "echo: and again");
    assert_eq!(final_text(events2.last().unwrap()), "echo: and again");
    assert_eq!(state(events2.last().unwrap()), Some("TASK_STATE_INPUT_REQUIRED"));
}

#[tokio::test]
async fn a_one_shot_task_streams_over_json_rpc_and_completes_when_its_turn_ends() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let mut stream =
        h.client().open_stream("", Some("SendStreamingMessage"), json!({"message": user_text("ping")})).await;
    assert_eq!(stream.status, 200);
    assert!(stream.content_type.starts_with("text/event-stream"), "{}", stream.content_type);
    let events = stream.collect_all().await;
    assert_eq!(kind(&events[0]), "task");
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_COMPLETED"));
    assert!(last["statusUpdate"].get("metadata").is_none(), "no substate on a completed task: {last}");
    assert_eq!(final_text(last), "echo: ping");
}

#[tokio::test]
async fn blocking_send_message_returns_the_task_at_its_final_event() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let r = h.client().send(user_text("block on me"), json!({})).await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "echo: block on me");
    assert_eq!(task["history"].as_array().unwrap().len(), 2);
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "echo: block on me");
    // historyLength applies to the returned task.
    let mut next = user_text("second");
    next["taskId"] = task["id"].clone();
    let r2 = h.client().send(next, json!({"historyLength": 1})).await;
    assert_eq!(r2["result"]["task"]["history"].as_array().unwrap().len(), 1, "{r2}");
}

const SLOW_SCRIPT: &str = "[[reply]]\nchunks = [\"slow \", \"reply\"]\ndelay_ms = 1500\n";

#[tokio::test]
async fn return_immediately_answers_with_a_non_terminal_task_whose_inbox_row_already_exists() {
    let h = HarnessProcess::start(HarnessOptions { script: Some(SLOW_SCRIPT.into()), ..Default::default() }).await;
    let r = h.client().send(user_text("take your time"), json!({"returnImmediately": true})).await;
    let task = &r["result"]["task"];
    let st = task["status"]["state"].as_str().unwrap();
    assert!(st == "TASK_STATE_SUBMITTED" || st == "TASK_STATE_WORKING", "{r}");
    let id = task["id"].as_str().unwrap();
    // S5: the message was durable before the answer.
    let rows = h.store().await.inbox_of(id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].outcome, "accepted");
    assert!(rows[0].body.contains("take your time"));
}

/// S5: a streamed message's audit row gets its outcome whatever the client does: here it
/// hangs up at the first event. The row ends accepted with its receipt's cursor, once, and a
/// retry of the message is answered from it.
#[tokio::test]
async fn a_streamed_messages_outcome_is_written_even_when_its_client_leaves_at_the_first_event() {
    let h = HarnessProcess::start(HarnessOptions { script: Some(SLOW_SCRIPT.into()), ..Default::default() }).await;
    let c = h.client();
    let opened = c.send(user_text("open"), json!({})).await;
    let id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    let store = h.store().await;
    let cursor = store.task_head(&id).await.unwrap().unwrap().last_seq;
    let mut message = user_text("stream me");
    message["taskId"] = json!(id);
    let mut stream = c.open_stream("/message:stream", None, json!({"message": message})).await;
    let first = stream.next().await.expect("a first event");
    assert_eq!(kind(&first), "task", "{first}");
    drop(stream);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = store.inbox_of(&id).await.unwrap();
        if rows.iter().all(|r| r.outcome != "received") || std::time::Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.outcome == "accepted"), "{rows:?}");
    let prior = store.prior_message(&id, message["messageId"].as_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(prior.cursor, Some(cursor), "the receipt's cursor: the log's end when the message was accepted");
    // A retry of the streamed message is answered from its outcome: its first turn's reply,
    // and no second turn.
    let again = c.send(message.clone(), json!({})).await;
    assert_eq!(again["result"]["task"]["status"]["message"]["parts"][0]["text"], "slow reply", "{again}");
    let turns = store.inbox_of(&id).await.unwrap();
    assert_eq!(turns.len(), 2, "a retry answered from the audit writes no row: {turns:?}");
}

#[tokio::test]
async fn get_task_answers_while_the_workflow_runs_and_from_the_store_after_it_closed() {
    let h = HarnessProcess::start(HarnessOptions {
        lifecycle: "one-shot",
        script: Some(SLOW_SCRIPT.into()),
        linger_secs: 0,
        ..Default::default()
    })
    .await;
    let c = h.client();
    let r = c.send(user_text("get me"), json!({"returnImmediately": true})).await;
    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();

    let running = c.rpc("GetTask", json!({"id": id})).await;
    let st = running["result"]["status"]["state"].as_str().unwrap();
    assert!(st == "TASK_STATE_SUBMITTED" || st == "TASK_STATE_WORKING", "{running}");
    assert_eq!(workflow_status(&h, &id).await, WorkflowExecutionStatus::Running);

    let mut sub = c.open_stream(&format!("/tasks/{id}:subscribe"), None, json!({})).await;
    let _ = sub.collect_all().await;
    wait_until_closed(&h, &id).await;
    let done = c.rest(reqwest::Method::GET, &format!("/tasks/{id}"), None).await;
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(done.body["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done.body["artifacts"][0]["parts"][0]["text"], "slow reply");
    let short = c.rest(reqwest::Method::GET, &format!("/tasks/{id}?historyLength=0"), None).await;
    assert!(short.body.get("history").is_none(), "historyLength=0 drops the history: {:?}", short.body);
}

#[tokio::test]
async fn subscribe_replays_from_seq_1_after_a_sigkill_restart_then_delivers_live_events() {
    let mut h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let original = c.stream_message(user_text("remember this")).await;
    let id = task_id(&original);

    h.restart().await; // SIGKILL, then a new process on the same data dir
    let mut sub = c.open_stream(&format!("/tasks/{id}:subscribe"), None, json!({})).await;
    assert_eq!(sub.status, 200);
    let mut replayed = Vec::new();
    for _ in 0..original.len() {
        replayed.push(sub.next().await.expect("replayed event"));
    }
    assert_eq!(replayed, original, "the replay is the original stream, event for event");

    // S10: the subscriber stays attached to the parked conversation and sees what follows.
    let mut next = user_text("what did I say?");
    next["taskId"] = json!(id);
    let r = c.send(next, json!({})).await;
    assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let working = sub.next().await.unwrap();
    assert_eq!(state(&working), Some("TASK_STATE_WORKING"));
    let mut live = vec![working];
    while state(live.last().unwrap()) != Some("TASK_STATE_INPUT_REQUIRED") {
        live.push(sub.next().await.expect("live event"));
    }
    assert_eq!(artifact_text(&live), "echo: what did I say?");
    let cancel = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(cancel["result"]["status"]["state"], "TASK_STATE_CANCELED", "{cancel}");
    let end = sub.next().await.unwrap();
    assert_eq!(state(&end), Some("TASK_STATE_CANCELED"));
    assert!(sub.next().await.is_none(), "the stream ends at the terminal state");
}

#[tokio::test]
async fn a_message_to_a_canceled_task_is_refused_naming_the_state_before_and_after_the_run_closes() {
    let h = HarnessProcess::start(HarnessOptions { linger_secs: 3, ..Default::default() }).await;
    let c = h.client();
    let r = c.send(user_text("start"), json!({})).await;
    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();
    let canceled = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let history_len = canceled["result"]["history"].as_array().unwrap().len();

    let refuse = || async {
        let mut m = user_text("too late");
        m["taskId"] = json!(id);
        c.send(m, json!({})).await
    };
    // The run is still open (lingering after its terminal event).
    assert_eq!(workflow_status(&h, &id).await, WorkflowExecutionStatus::Running);
    let open = refuse().await;
    assert_eq!(open["error"]["code"], -32004, "{open}");
    assert_eq!(open["error"]["message"], "the task is in a terminal state (TASK_STATE_CANCELED)");

    wait_until_closed(&h, &id).await;
    let closed = refuse().await;
    assert_eq!(closed["error"]["code"], -32004, "{closed}");
    assert_eq!(closed["error"]["message"], "the task is in a terminal state (TASK_STATE_CANCELED)");
    let rest = c
        .rest(
            reqwest::Method::POST,
            "/message:send",
            Some(
                json!({"message": {"messageId": "x", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "x"}]}})
                    .to_string(),
            ),
        )
        .await;
    assert_eq!(rest.status, 400);
    assert_eq!(rest.body["error"]["details"][0]["reason"], "UNSUPPORTED_OPERATION");

    // The task is unchanged, and cancelling again is TaskNotCancelable.
    let after = c.rpc("GetTask", json!({"id": id})).await;
    assert_eq!(after["result"]["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(after["result"]["history"].as_array().unwrap().len(), history_len);
    let again = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
    assert_eq!(again["error"]["message"], "the task is in a terminal state (TASK_STATE_CANCELED)");
    let sub = c.rpc("SubscribeToTask", json!({"id": id})).await;
    assert_eq!(sub["error"]["code"], -32004, "{sub}");
}

#[tokio::test]
async fn a_cancel_mid_stream_cuts_the_turn_and_leaves_a_gap_free_log_ending_canceled() {
    let script = "[[reply]]\nchunks = [\"a \", \"b \", \"c \", \"d \", \"e \", \"f \", \"g \", \"h \", \"i \", \"j\"]\ndelay_ms = 300\n";
    let h = HarnessProcess::start(HarnessOptions { script: Some(script.into()), ..Default::default() }).await;
    let c = h.client();
    let mut stream = c.open_stream("/message:stream", None, json!({"message": user_text("long one")})).await;
    let first = stream.next().await.unwrap();
    let id = first["task"]["id"].as_str().unwrap().to_string();
    loop {
        let e = stream.next().await.expect("event");
        if kind(&e) == "artifactUpdate" {
            break;
        }
    }
    let canceled = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let rest = stream.collect_all().await;
    assert_eq!(state(rest.last().unwrap()), Some("TASK_STATE_CANCELED"), "{rest:#?}");

    // D1: the store's log is gap-free from 1 and nothing follows the terminal event, even
    // though the model was still producing chunks.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let log = h.store().await.events_after(&id, 0, 1000).await.unwrap();
    let seqs: Vec<i64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert!(log.last().unwrap().event.is_terminal(), "the log ends with CANCELED");
    assert!(
        log.iter().filter(|e| matches!(e.event, a2a_types::StreamResponse::ArtifactUpdate(_))).count() < 10,
        "the turn was cut"
    );
}

#[tokio::test]
async fn with_no_worker_polling_a_send_message_gets_a_clear_error_instead_of_hanging() {
    let h =
        HarnessProcess::start(HarnessOptions { worker: false, request_timeout_secs: 2, ..Default::default() }).await;
    let started = std::time::Instant::now();
    let r = h.client().send(user_text("anyone there?"), json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("did not answer") && msg.contains(&h.task_queue), "{msg}");
    assert!(msg.contains("no worker polls task queue") && msg.contains("same messageId"), "says what happened: {msg}");
}

/// S5: a sender who hangs up while its message is on its way to Temporal does not leave the
/// audit row half-written: the delivery goes on without the request, and its outcome (here
/// Temporal's silence, with no worker polling) is recorded all the same.
#[tokio::test]
async fn a_message_whose_sender_hung_up_during_delivery_still_gets_its_audited_outcome() {
    let h =
        HarnessProcess::start(HarnessOptions { worker: false, request_timeout_secs: 2, ..Default::default() }).await;
    let message = user_text("are you still there?");
    let message_id = message["messageId"].as_str().unwrap().to_string();
    let impatient = reqwest::Client::builder().timeout(Duration::from_millis(500)).build().unwrap();
    let sent = impatient
        .post(format!("{}/a2a/jsonrpc", h.base_url))
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}).to_string())
        .send()
        .await;
    assert!(sent.is_err_and(|e| e.is_timeout()), "the sender gave up before the 2 s request timeout");
    let store = h.store().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let row = loop {
        let rows = store.inbox_of_message(&message_id).await.unwrap();
        assert_eq!(rows.len(), 1, "one audit row for the message");
        if rows[0].outcome != "received" || std::time::Instant::now() > deadline {
            break rows.into_iter().next().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        row.outcome.starts_with("refused") && row.outcome.contains("did not answer"),
        "the outcome names what became of the message: {}",
        row.outcome
    );
    assert!(row.body.contains("are you still there?"));
}

/// What a turn hands to its activities does not grow with the conversation: `call_model`
/// (a regular activity for a scripted model, so its input is in the workflow history) gets
/// where the turn's message ends and reads the conversation from the store (the model's
/// replies show it read the right message); the store's copy of the conversation is the
/// workflow's, message for message.
#[tokio::test]
async fn a_turns_activity_input_stays_one_message_however_long_the_conversation_and_the_store_keeps_it_all() {
    let mut script = String::new();
    for word in ["one", "two", "three", "four"] {
        script.push_str(&format!("[[reply]]\nwhen = \"{word}\"\nchunks = [\"heard {word}\"]\n"));
    }
    script.push_str("[[reply]]\nchunks = [\"noted\"]\n");
    let h = HarnessProcess::start(HarnessOptions { script: Some(script), ..Default::default() }).await;
    let c = h.client();
    let first = c.send(user_text("one"), json!({})).await;
    let id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    for text in ["two", "three", "four"] {
        let mut next = user_text(text);
        next["taskId"] = json!(id);
        let r = c.send(next, json!({})).await;
        assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    }

    let history = h.workflow_history(&id).await;
    let turns: Vec<harness_workflow::ModelTurn> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["attributes"].get("ActivityTaskScheduledEventAttributes"))
        .filter(|a| a["activity_type"]["name"] == "call_model")
        .map(|a| {
            use base64::Engine;
            let data = a["input"]["payloads"][0]["data"].as_str().unwrap();
            let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        })
        .collect();
    let shape: Vec<(u32, usize)> = turns.iter().map(|t| (t.history_from, t.history.len())).collect();
    assert_eq!(
        shape,
        [(1, 0), (3, 0), (5, 0), (7, 0)],
        "each turn names where its message ends and carries none: WORKING stored it, the model reads it back"
    );

    let running = c.rpc("GetTask", json!({"id": id})).await["result"].clone();
    let stored = h.store().await.task(&id, None).await.unwrap().unwrap().task;
    assert_eq!(
        serde_json::to_value(&stored.history).unwrap(),
        running["history"],
        "the store's history is the workflow's"
    );
    assert_eq!(serde_json::to_value(&stored.artifacts).unwrap(), running["artifacts"]);
    let replies: Vec<String> = stored.history.iter().skip(1).step_by(2).map(|m| m.text()).collect();
    assert_eq!(replies, ["heard one", "heard two", "heard three", "heard four"], "each turn read its own message");
    let last_two = c.rpc("SendMessage", json!({"message": {"messageId": "m5", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "five"}]}, "configuration": {"historyLength": 2}})).await;
    let texts: Vec<&str> = last_two["result"]["task"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["five", "noted"], "a blocking reply's historyLength is read from the store: {last_two}");
}

/// Issue 14 item 3: the `inbox` validator's refusals reach a client of Temporal typed: an
/// application failure of type `TinyHarnessRefusal` whose detail is the refusal, one for
/// each kind, read without looking at any error text.
#[tokio::test]
async fn each_refusal_of_the_inbox_validator_crosses_temporal_typed() {
    use harness_workflow::{InboxItem, REFUSAL_FAILURE_TYPE, Refusal, RefusalKind, TaskWorkflow};
    use temporalio_client::WorkflowExecuteUpdateOptions;
    use temporalio_client::errors::WorkflowUpdateError;

    let h = HarnessProcess::start(HarnessOptions { linger_secs: 30, ..Default::default() }).await;
    let c = h.client();
    let r = c.send(user_text("start"), json!({})).await;
    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();
    let temporal = h.temporal().await;
    let handle = temporal.get_workflow_handle::<TaskWorkflow>(id.as_str());
    let refusal_of = |item: InboxItem| {
        let handle = &handle;
        async move {
            match handle
                .execute_update(
                    TaskWorkflow::inbox,
                    harness_workflow::Json(item),
                    WorkflowExecuteUpdateOptions::default(),
                )
                .await
            {
                Err(WorkflowUpdateError::Failed(failure)) => {
                    let cause = failure.cause.as_deref().expect("the typed failure is the cause");
                    let Some(temporalio_common::protos::temporal::api::failure::v1::failure::FailureInfo::ApplicationFailureInfo(info)) =
                        &cause.failure_info
                    else {
                        panic!("not an application failure: {cause:?}")
                    };
                    assert_eq!(info.r#type, REFUSAL_FAILURE_TYPE);
                    Refusal::from_failure(&failure).expect("a refusal")
                }
                other => panic!("the update was not refused: {other:?}"),
            }
        }
    };
    let item = |message_id: &str, parts: Value| {
        let message = json!({"messageId": message_id, "role": "ROLE_USER", "taskId": id, "parts": parts});
        InboxItem {
            request_id: message_id.to_string(),
            message: serde_json::from_value(message).unwrap(),
            ..Default::default()
        }
    };

    let empty = refusal_of(item("no-parts", json!([]))).await;
    assert_eq!(empty.kind, RefusalKind::InvalidMessage, "{empty:?}");

    let canceled = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let ended = refusal_of(item("after-cancel", json!([{"text": "too late"}]))).await;
    assert_eq!(ended, Refusal::task_ended(a2a_types::TaskState::Canceled));
}

/// Issue 15's open problem, fixed: two messages to one conversation, the second queued
/// behind the first's slow turn, are both answered at the newest final status (S5), and
/// each answer carries its own reply, on both bindings.
#[tokio::test(flavor = "multi_thread")]
async fn queued_messages_of_one_conversation_are_each_answered_with_their_own_reply() {
    let script = "[[reply]]\nwhen = \"alpha\"\nchunks = [\"reply to alpha\"]\ndelay_ms = 1500\n\n\
                  [[reply]]\nwhen = \"beta\"\nchunks = [\"reply to beta\"]\n\n[[reply]]\nchunks = [\"hi\"]\n";
    let h = HarnessProcess::start(HarnessOptions { script: Some(script.into()), ..Default::default() }).await;
    let c = h.client();
    let opened = c.send(user_text("hello"), json!({})).await;
    let id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    for rest in [false, true] {
        let on_task = |text: &str| {
            let mut m = user_text(text);
            m["taskId"] = json!(id);
            m
        };
        let send = |m: Value| {
            let c = c.clone();
            async move {
                if rest {
                    let body = json!({"message": m}).to_string();
                    c.rest(reqwest::Method::POST, "/message:send", Some(body)).await.body
                } else {
                    c.send(m, json!({})).await["result"].clone()
                }
            }
        };
        let alpha = tokio::spawn(send(on_task("alpha")));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let beta = tokio::spawn(send(on_task("beta")));
        let (alpha, beta) = (alpha.await.unwrap(), beta.await.unwrap());
        let reply = |a: &Value| a["task"]["status"]["message"]["parts"][0]["text"].as_str().unwrap_or("").to_string();
        assert_eq!(reply(&alpha), "reply to alpha", "rest={rest}: {alpha}");
        assert_eq!(reply(&beta), "reply to beta", "rest={rest}: {beta}");
        assert_eq!(alpha["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    }
}

/// Issue 20: GetTask is answered from the store alone (no workflow query). While a turn
/// runs it shows the WORKING status without the substate the parked task had, and a
/// message accepted behind the running turn (which no event has stored yet) once, from
/// its audit row; after the turns, every message is in the history once.
#[tokio::test(flavor = "multi_thread")]
async fn get_task_during_a_turn_shows_the_running_status_and_the_message_queued_behind_it() {
    // Alpha's reply streams 40 chunks, 100 ms apart: the log moves on past beta's cursor
    // while nothing stores beta.
    let chunks = (0..40).map(|i| format!("\"{}\"", if i == 39 { "alpha." } else { "a " })).collect::<Vec<_>>();
    let script = format!(
        "[[reply]]\nwhen = \"alpha\"\nchunks = [{}]\ndelay_ms = 100\n\n[[reply]]\nchunks = [\"hi\"]\n",
        chunks.join(", ")
    );
    let h = HarnessProcess::start(HarnessOptions { script: Some(script), ..Default::default() }).await;
    let c = h.client();
    let opened = c.send(user_text("hello"), json!({})).await;
    let id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    let status_key = harness_workflow::status_ext_key();
    let status_key = status_key.as_str();
    assert!(opened["result"]["task"]["metadata"][status_key]["substate"].is_string(), "parked: {opened}");
    let on_task = |text: &str| {
        let mut m = user_text(text);
        m["taskId"] = json!(id);
        m
    };
    let alpha = tokio::spawn({
        let (c, m) = (c.clone(), on_task("alpha"));
        async move { c.send(m, json!({})).await }
    });
    let get = || {
        let c = c.clone();
        let id = id.clone();
        async move { c.rpc("GetTask", json!({"id": id})).await["result"].clone() }
    };
    let users = |t: &Value| -> Vec<String> {
        t["history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "ROLE_USER")
            .map(|m| m["parts"][0]["text"].as_str().unwrap().to_string())
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let working = loop {
        let t = get().await;
        if t["status"]["state"] == "TASK_STATE_WORKING" && users(&t).last().map(String::as_str) == Some("alpha") {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "the turn shows as WORKING: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(working["metadata"][status_key].is_null(), "a running turn has no substate: {working}");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let beta = tokio::spawn({
        let (c, m) = (c.clone(), on_task("beta"));
        async move { c.send(m, json!({})).await }
    });
    let queued = loop {
        let t = get().await;
        if users(&t).last().map(String::as_str) == Some("beta") {
            break t;
        }
        assert!(std::time::Instant::now() < deadline, "the queued message shows: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!alpha.is_finished(), "alpha's turn still runs");
    assert_eq!(queued["status"]["state"], "TASK_STATE_WORKING", "{queued}");
    let texts: Vec<&str> =
        queued["history"].as_array().unwrap().iter().map(|m| m["parts"][0]["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["hello", "hi", "alpha", "beta"], "each once, and no reply to alpha yet");
    let (alpha, beta) = (alpha.await.unwrap(), beta.await.unwrap());
    assert!(alpha.get("result").is_some() && beta.get("result").is_some(), "{alpha} {beta}");
    assert_eq!(users(&get().await), ["hello", "alpha", "beta"], "stored once each");
}

/// Issue 31: a named participant's message is echoed into the log (S12) and its turn
/// follows at once: the echo goes with the turn's WORKING, and (the default echo model being
/// instant) both go with the reply's chunks in the model call's one append; a new task's Task
/// goes with them too. The log is what it was (the Task, then per message its echo, WORKING,
/// the reply's chunks, the final status, seqs without a gap from 1), and each message, the
/// first included, costs the workflow one local activity (the model call, with what was held
/// and the final status it was told to end with) where it cost four, then three, then two
/// (the first: five, then four, then three, then two). The final status the call stores is
/// the one the workflow stored itself: the reply as its message, marked with the message it
/// answers, parked awaiting the next message, and the reply artifact.
#[tokio::test]
async fn a_participants_echo_is_stored_with_its_turns_working_in_one_local_activity() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let send = |message: Value| {
        let base = h.base_url.clone();
        async move {
            contract_tests::rpc_as(
                &base,
                Some(("X-Participant-Id", "alice")),
                "SendMessage",
                json!({"message": message}),
            )
            .await
        }
    };
    let first = send(user_text("one")).await;
    let id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(first["result"]["task"]["status"]["message"]["parts"][0]["text"], "echo: one", "{first}");
    for text in ["two", "three"] {
        let mut next = user_text(text);
        next["taskId"] = json!(id);
        let r = send(next).await;
        assert_eq!(r["result"]["task"]["status"]["message"]["parts"][0]["text"], format!("echo: {text}"), "{r}");
    }
    // The task's events, in order from seq 1.
    let logged = h.store().await.events_after(&id, 0, 1000).await.unwrap();
    let seqs: Vec<i64> = logged.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=logged.len() as i64).collect::<Vec<_>>(), "no gap");
    // The Task and the status updates (the chunks of each reply come between WORKING and the
    // final status).
    let shape: Vec<String> = logged
        .iter()
        .filter_map(|e| {
            let v = serde_json::to_value(&e.event).unwrap();
            if v.get("task").is_some() {
                return Some("task".to_string());
            }
            let u = v.get("statusUpdate")?.clone();
            let text = u["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string();
            Some(match () {
                _ if u["status"]["state"] == "TASK_STATE_WORKING" => "working".to_string(),
                _ if u["metadata"].get("io.github.madarauchiha-314.tiny-harness/channel").is_some() => {
                    format!("echo {text}")
                }
                _ => format!("final {text}"),
            })
        })
        .collect();
    assert_eq!(
        shape,
        [
            "task",
            "echo one",
            "working",
            "final echo: one",
            "echo two",
            "working",
            "final echo: two",
            "echo three",
            "working",
            "final echo: three"
        ]
    );
    // Its snapshot was stored with the Task: GetTask answers from the store.
    let got =
        contract_tests::rpc_as(&h.base_url, Some(("X-Participant-Id", "alice")), "GetTask", json!({"id": id})).await;
    assert_eq!(got["result"]["history"].as_array().map(Vec::len), Some(6), "{got}");
    let task = &got["result"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{got}");
    assert_eq!(task["metadata"]["io.github.madarauchiha-314.tiny-harness/status"]["substate"], "awaiting-next-message");
    let reply = &task["status"]["message"];
    assert_eq!(reply["messageId"], format!("{id}:reply:3"), "{got}");
    assert_eq!(reply["taskId"], id.as_str(), "{got}");
    let three = &task["history"][4];
    assert_eq!(three["parts"][0]["text"], "three");
    assert_eq!(reply["metadata"]["io.github.madarauchiha-314.tiny-harness/reply"]["inReplyTo"], three["messageId"]);
    assert_eq!(&task["history"][5], reply, "the reply is stored in the history as it is on the status");
    let artifacts: Vec<(String, String)> = task["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["artifactId"].as_str().unwrap().into(), a["parts"][0]["text"].as_str().unwrap().into()))
        .collect();
    let expected: Vec<(String, String)> =
        (1..=3).zip(["one", "two", "three"]).map(|(n, t)| (format!("reply-{n}"), format!("echo: {t}"))).collect();
    assert_eq!(artifacts, expected, "{got}");

    // Local activities per message: the markers between one accepted update and the next.
    let history = h.workflow_history(&id).await;
    let mut per_message: Vec<usize> = Vec::new();
    for e in history["events"].as_array().unwrap() {
        let attributes = &e["attributes"];
        if attributes.get("WorkflowExecutionUpdateAcceptedEventAttributes").is_some() {
            per_message.push(0);
        } else if let Some(marker) = attributes.get("MarkerRecordedEventAttributes")
            && marker["marker_name"].as_str().is_some_and(|n| n.contains("local_activity"))
            && let Some(n) = per_message.last_mut()
        {
            *n += 1;
        }
    }
    assert_eq!(per_message, [1, 1, 1], "the model with what was held and the final status: {per_message:?}");

    // The run asked for one patch (`run-patches`, which takes all the others) and upserted
    // Temporal's change-version search attribute once: it was six of each, a visibility
    // write each on the server, in a new task's first workflow task (issue 31).
    let events = history["events"].as_array().unwrap();
    let patches: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["attributes"].get("MarkerRecordedEventAttributes"))
        .filter(|m| m["marker_name"] == "core_patch")
        .map(|m| &m["details"])
        .collect();
    let upserts = events
        .iter()
        .filter(|e| e["attributes"].get("UpsertWorkflowSearchAttributesEventAttributes").is_some())
        .count();
    assert_eq!((patches.len(), upserts), (1, 1), "one patch marker and one upsert (the patches' details): {patches:?}");
}
