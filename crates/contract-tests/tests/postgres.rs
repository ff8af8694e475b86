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
