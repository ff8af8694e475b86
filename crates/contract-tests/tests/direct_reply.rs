//! Issue 16 item 2: a direct Message reply (A2A's SendMessage answered with a `message`,
//! and the Message-only stream) through the provider interface, on both bindings, with a
//! conversation lifecycle (the scripted model's `direct = true`). What stays durable: the
//! inbox row, found by the message id, and a completed task holding both messages
//! (docs/conformance.md, "Direct replies").

use contract_tests::{HarnessOptions, HarnessProcess, kind, rpc_as, state, user_text};
use serde_json::{Value, json};

const SCRIPT: &str = r#"
[[reply]]
when = "quick"
chunks = ["A direct ", "reply."]
direct = true

[[reply]]
when = "doomed"
fail = "the scripted model failed"
direct = true

[[reply]]
chunks = ["a task reply"]
"#;

async fn harness() -> HarnessProcess {
    HarnessProcess::start(HarnessOptions { script: Some(SCRIPT.into()), ..Default::default() }).await
}

fn texts(message: &Value) -> String {
    message["parts"].as_array().unwrap().iter().filter_map(|p| p["text"].as_str()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_reply_is_a_message_on_both_bindings_and_its_task_is_stored_completed() {
    let h = harness().await;
    let c = h.client();

    // JSON-RPC, blocking: the answer is the reply Message, not a Task.
    let sent = user_text("a quick question");
    // An identified sender: its retried first message is exactly-once (issue 28).
    let alice = Some(("X-Participant-Id", "alice"));
    let answer = rpc_as(&h.base_url, alice, "SendMessage", json!({"message": sent})).await;
    let reply = answer["result"]["message"].clone();
    assert!(answer["result"].get("task").is_none(), "{answer}");
    assert_eq!(reply["role"], "ROLE_AGENT", "{reply}");
    assert_eq!(texts(&reply), "A direct reply.", "the whole streamed text: {reply}");
    let task_id = reply["taskId"].as_str().expect("the reply names the task that stores it").to_string();
    assert!(!reply["contextId"].as_str().unwrap().is_empty(), "{reply}");

    // Durable: the task completed (a conversation's task, but its client tracks no task),
    // with the message and its reply in the history; the audit row finds it by message id.
    let task = c.rpc("GetTask", json!({"id": task_id})).await["result"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["history"][0]["messageId"], sent["messageId"], "{task}");
    assert_eq!(task["history"][1], reply, "the stored reply is the one answered");
    let store = h.store().await;
    let rows = store.inbox_of_message(sent["messageId"].as_str().unwrap()).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].task_id.as_str(), rows[0].outcome.as_str()), (task_id.as_str(), "accepted"));

    // A retry of the same message is answered with the same reply, and runs no second turn.
    let again = rpc_as(&h.base_url, alice, "SendMessage", json!({"message": sent})).await;
    assert_eq!(again["result"]["message"], reply, "{again}");
    let history = c.rpc("GetTask", json!({"id": task_id})).await["result"]["history"].clone();
    assert_eq!(history.as_array().unwrap().len(), 2, "{history}");

    // The task ended: a message naming it is refused, naming the state (S7).
    let mut follow = user_text("and another thing");
    follow["taskId"] = json!(task_id);
    let refused = c.send(follow, json!({})).await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("TASK_STATE_COMPLETED"), "{refused}");

    // HTTP+JSON, blocking: the same shape.
    let rest = c
        .rest(reqwest::Method::POST, "/message:send", Some(json!({"message": user_text("quick one")}).to_string()))
        .await;
    assert_eq!(rest.status, 200, "{:?}", rest.body);
    assert_eq!(texts(&rest.body["message"]), "A direct reply.", "{:?}", rest.body);
    assert!(rest.body.get("task").is_none(), "{:?}", rest.body);

    // Streamed on either binding: exactly one Message event, then the stream closes.
    for rpc in [None, Some("SendStreamingMessage")] {
        let body = json!({"message": user_text("quick, streamed")});
        let path = if rpc.is_some() { "" } else { "/message:stream" };
        let events = c.open_stream(path, rpc, body).await.collect_all().await;
        assert_eq!(events.iter().map(kind).collect::<Vec<_>>(), ["message"], "{rpc:?}: {events:?}");
        assert_eq!(texts(&events[0]["message"]), "A direct reply.", "{rpc:?}");
    }
}

/// A message to a task the client tracks is answered with the task, even when its text
/// would pick a direct reply; and a direct turn that fails is answered with the failed
/// task, which says so (a Message could not).
#[tokio::test(flavor = "multi_thread")]
async fn a_tracked_task_and_a_failed_direct_turn_are_answered_with_the_task() {
    let h = harness().await;
    let c = h.client();
    let first = c.send(user_text("hello"), json!({})).await["result"]["task"].clone();
    assert_eq!(first["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{first}");
    let mut quick = user_text("a quick one on this task");
    quick["taskId"] = first["id"].clone();
    let answer = c.send(quick, json!({})).await;
    let task = &answer["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{answer}");
    assert_eq!(texts(&task["status"]["message"]), "A direct reply.", "{answer}");

    let failed = c.send(user_text("a doomed question"), json!({})).await;
    let task = &failed["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{failed}");
    assert!(texts(&task["status"]["message"]).contains("the scripted model failed"), "{failed}");
    // Streamed: the task's stream from its Task to FAILED.
    let events = c.stream_message(user_text("doomed, streamed")).await;
    assert_eq!(kind(&events[0]), "task", "{events:?}");
    assert_eq!(state(events.last().unwrap()), Some("TASK_STATE_FAILED"), "{events:?}");
}
