//! D2: the harness on the Postgres store, the same code path and migrations as SQLite. The
//! server is the one `cargo xtask test` starts (TINY_HARNESS_TEST_POSTGRES); each test
//! takes a fresh database on it.

use contract_tests::{HarnessOptions, HarnessProcess, kind, state, task_id, user_text};
use serde_json::json;

#[tokio::test]
async fn a_conversation_on_the_postgres_store_streams_continues_lists_and_survives_a_restart() {
    let url = harness_store::testing::fresh_postgres_database().await.unwrap();
    let mut h = HarnessProcess::start(HarnessOptions { store_url: Some(url.clone()), ..Default::default() }).await;
    let c = h.client();
    let events = c.stream_message(user_text("hello postgres")).await;
    assert_eq!(kind(&events[0]), "task");
    assert_eq!(state(events.last().unwrap()), Some("TASK_STATE_INPUT_REQUIRED"));
    let id = task_id(&events);

    h.kill9();
    h.restart().await;
    let mut next = user_text("still there?");
    next["taskId"] = json!(id);
    let second = c.send(next, json!({})).await;
    assert_eq!(second["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{second}");
    assert_eq!(second["result"]["task"]["history"].as_array().unwrap().len(), 4, "{second}");

    let listed = c.rpc("ListTasks", json!({"includeArtifacts": true})).await;
    assert_eq!(listed["result"]["tasks"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["result"]["tasks"][0]["artifacts"].as_array().unwrap().len(), 2, "{listed}");
    let canceled = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");

    let store = h.store().await;
    assert_eq!(store.backend(), harness_store::Backend::Postgres);
    let seqs: Vec<i64> = store.events_after(&id, 0, 1000).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "gap-free on Postgres too");
    assert_eq!(store.inbox_of(&id).await.unwrap().len(), 2);
}

/// A blocking SendMessage whose turn's events are cut back while it waits for the turn's
/// end (a crash's uncommitted tail that a retried workflow task replaces; here the cut is
/// made on the store from another process, as another instance's worker or reconciler would,
/// and reaches the harness by LISTEN/NOTIFY) is answered with its reply, not UNAVAILABLE:
/// none of what was cut had been sent to its client, so it reads on from the cut. Found by
/// the three-instance chaos run, whose client got "the log ... was cut back" for a message
/// that was accepted and answered in the task.
#[tokio::test]
async fn a_blocking_answer_reads_on_through_a_cut_of_its_turns_events() {
    let url = harness_store::testing::fresh_postgres_database().await.unwrap();
    let script = "[[reply]]\nwhen = \"hello\"\nchunks = [\"hi\"]\n\n\
                  [[reply]]\nwhen = \"slow\"\nchunks = [\"slow \", \"reply\"]\ndelay_ms = 1500\n";
    let h = HarnessProcess::start(HarnessOptions {
        store_url: Some(url),
        script: Some(script.into()),
        ..Default::default()
    })
    .await;
    let c = h.client();
    let opened = c.send(user_text("hello"), json!({})).await;
    let task = opened["result"]["task"]["id"].as_str().expect("a task").to_string();
    let store = h.store().await;
    let before = store.task_head(&task).await.unwrap().unwrap().last_seq;

    let mut slow = user_text("slow please");
    slow["taskId"] = json!(task);
    let sending = tokio::spawn(async move { c.send(slow, json!({})).await });
    // The turn's WORKING is stored (the model waits 1.5 s before its first chunk), and the
    // blocking answer has read it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let head = loop {
        let head = store.task_head(&task).await.unwrap().unwrap();
        if head.last_seq > before {
            break head;
        }
        assert!(std::time::Instant::now() < deadline, "the turn's WORKING was never stored");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let row = store.task(&task, None).await.unwrap().unwrap();
    let kept = harness_store::Stored { history: i64::MAX, artifacts: i64::MAX };
    assert!(store.cut_back(&task, &head, before, kept, &row.task).await.unwrap(), "the cut happened");

    let answer = sending.await.unwrap();
    assert!(answer.get("error").is_none(), "the blocking answer failed: {answer}");
    let reply = &answer["result"]["task"]["status"]["message"]["parts"][0]["text"];
    assert_eq!(reply, "slow reply", "{answer}");
    // The log the task keeps is whole: no gap where the cut was.
    let seqs: Vec<i64> = store.events_after(&task, 0, 1000).await.unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "a gap in the log");
}
