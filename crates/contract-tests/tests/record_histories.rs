//! Records `TaskWorkflow` histories for the determinism replay test
//! (`crates/harness-workflow/tests/replay.rs`). Run by `cargo xtask histories` after a
//! deliberate, compatible change to the workflow; CI only replays what is committed.

use contract_tests::{HarnessOptions, HarnessProcess, task_id, user_text};
use serde_json::json;
use std::path::PathBuf;
use temporalio_client::WorkflowFetchHistoryOptions;

fn fixtures() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../harness-workflow/tests/histories");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves every run of a task (oldest first) as `<name>-run-<n>.json`: a run that continued
/// as new and the run that took over.
async fn save_runs(h: &HarnessProcess, task: &str, name: &str) {
    let client = h.temporal().await;
    for (n, run) in contract_tests::runs_of(&client, task).await.iter().enumerate() {
        let handle = contract_tests::run_handle(&client, task, run.run_id());
        let json = handle.fetch_history(WorkflowFetchHistoryOptions::default()).to_json().await.unwrap();
        std::fs::write(fixtures().join(format!("{name}-run-{}.json", n + 1)), json).unwrap();
    }
}

async fn save(h: &HarnessProcess, task: &str, name: &str) {
    let dir = fixtures();
    let client = h.temporal().await;
    let handle = client.get_workflow_handle::<harness_workflow::TaskWorkflow>(task);
    for _ in 0..100 {
        let d = handle.describe(Default::default()).await.unwrap();
        if d.status() != temporalio_client::WorkflowExecutionStatus::Running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let json = handle.fetch_history(WorkflowFetchHistoryOptions::default()).to_json().await.unwrap();
    std::fs::write(dir.join(format!("{name}.json")), json).unwrap();
}

#[tokio::test]
#[ignore = "writes the replay fixtures; run with `cargo xtask histories`"]
async fn record_task_workflow_histories() {
    // A conversation: two turns, then cancel.
    let h = HarnessProcess::start(HarnessOptions { linger_secs: 0, ..Default::default() }).await;
    let c = h.client();
    let first = c.stream_message(user_text("first turn")).await;
    let id = task_id(&first);
    let mut next = user_text("second turn");
    next["taskId"] = json!(id);
    c.send(next, json!({})).await;
    c.rpc("CancelTask", json!({"id": id})).await;
    save(&h, &id, "conversation-two-turns-cancel").await;
    drop(h);

    // A conversation whose runs continue as new every two messages (issue 15), then cancel.
    let h = HarnessProcess::start(HarnessOptions {
        linger_secs: 0,
        agent_extra: "run_max_messages = 2\n".into(),
        ..Default::default()
    })
    .await;
    let c = h.client();
    let first = c.stream_message(user_text("run one")).await;
    let id = task_id(&first);
    for text in ["still run one", "run two", "still run two"] {
        let mut next = user_text(text);
        next["taskId"] = json!(id);
        c.send(next, json!({})).await;
    }
    c.rpc("CancelTask", json!({"id": id})).await;
    save_runs(&h, &id, "conversation-continued-as-new").await;
    drop(h);

    // One-shot, completed.
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", linger_secs: 0, ..Default::default() }).await;
    let r = h.client().send(user_text("just once"), json!({})).await;
    save(&h, r["result"]["task"]["id"].as_str().unwrap(), "one-shot-completed").await;
    drop(h);

    // A scripted model that fails: a one-shot task ends FAILED (a conversation parks).
    let script = "[[reply]]\nfail = \"scripted failure\"\n";
    let h = HarnessProcess::start(HarnessOptions {
        script: Some(script.into()),
        lifecycle: "one-shot",
        linger_secs: 0,
        ..Default::default()
    })
    .await;
    let r = h.client().send(user_text("fail please"), json!({})).await;
    assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_FAILED", "{r}");
    save(&h, r["result"]["task"]["id"].as_str().unwrap(), "model-failure").await;
    drop(h);

    // A cancel while the model streams.
    let script = "[[reply]]\nchunks = [\"a \", \"b \", \"c \", \"d\"]\ndelay_ms = 400\n";
    let h = HarnessProcess::start(HarnessOptions { script: Some(script.into()), linger_secs: 0, ..Default::default() })
        .await;
    let c = h.client();
    let mut s = c.open_stream("/message:stream", None, json!({"message": user_text("cut me")})).await;
    let id = s.next().await.unwrap()["task"]["id"].as_str().unwrap().to_string();
    while contract_tests::kind(&s.next().await.unwrap()) != "artifactUpdate" {}
    c.rpc("CancelTask", json!({"id": id})).await;
    save(&h, &id, "cancel-mid-stream").await;
    drop(h);

    // Issue 16: a direct reply in a conversation (the task completes after the turn).
    let script = "[[reply]]\nwhen = \"quick\"\nchunks = [\"A direct reply.\"]\ndirect = true\n";
    let h = HarnessProcess::start(HarnessOptions { script: Some(script.into()), linger_secs: 0, ..Default::default() })
        .await;
    let r = h.client().send(user_text("a quick one"), json!({})).await;
    let id = r["result"]["message"]["taskId"].as_str().expect("a direct reply").to_string();
    save(&h, &id, "direct-reply").await;
    drop(h);

    // Issue 17: a failed turn parks a conversation; the next message is a new turn; cancel.
    let script = "[[reply]]\nwhen = \"fail\"\nfail = \"scripted failure\"\n[[reply]]\nchunks = [\"fine\"]\n";
    let h = HarnessProcess::start(HarnessOptions { script: Some(script.into()), linger_secs: 0, ..Default::default() })
        .await;
    let c = h.client();
    let r = c.send(user_text("fail please"), json!({})).await;
    assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();
    let mut next = user_text("and now?");
    next["taskId"] = json!(id);
    c.send(next, json!({})).await;
    c.rpc("CancelTask", json!({"id": id})).await;
    save(&h, &id, "conversation-failure-parks").await;
    drop(h);

    // Issue 17: an openai turn whose stream is cut and retried (a restart), with usage; cancel.
    let mock = contract_tests::openai_mock::MockOpenAi::start().await;
    let h = HarnessProcess::start(HarnessOptions {
        linger_secs: 0,
        agent_extra: "model = \"gpt\"\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
            mock.base_url
        ),
        ..Default::default()
    })
    .await;
    let c = h.client();
    let r = c.send(user_text("cut question"), json!({})).await;
    let id = r["result"]["task"]["id"].as_str().unwrap().to_string();
    c.rpc("CancelTask", json!({"id": id})).await;
    save(&h, &id, "openai-retried-with-usage").await;
    drop(h);

    // Issue 18: a shared conversation opened by a brief: echoes, a command, a task envelope
    // from its admin, a recorded event envelope, a command and a control cutting a turn.
    let script = "[[reply]]\nwhen = \"slowly\"\nchunks = [\"a \", \"b \", \"c \", \"d\"]\ndelay_ms = 400\n\
                  [[reply]]\nchunks = [\"fine\"]\n";
    let h = HarnessProcess::start(HarnessOptions { script: Some(script.into()), linger_secs: 0, ..Default::default() })
        .await;
    let c = h.client();
    let people = json!([{"id": "ada", "kind": "human", "role": "admin"}]);
    let envelope = |data: serde_json::Value| json!({"data": data, "mediaType": EVENT});
    let brief =
        envelope(json!({"kind": "task", "payload": {"name": "shared", "goal": "talk", "participants": people}}));
    let r = c.send(as_alice(json!([brief, {"text": "hello"}]), None), json!({})).await;
    let id = r["result"]["task"]["id"].as_str().expect("a task").to_string();
    c.send(as_alice(json!([{"text": "/status"}]), Some(&id)), json!({})).await;
    let rename = envelope(json!({"kind": "task", "payload": {"name": "renamed"}}));
    let mut by_ada = as_alice(json!([rename]), Some(&id));
    by_ada["metadata"] = json!({"participant_id": "ada"});
    c.send(by_ada, json!({})).await;
    let update =
        json!({"kind": "status_update", "payload": {"taskId": "remote", "status": {"state": "TASK_STATE_WORKING"}}});
    c.send(as_alice(json!([envelope(update)]), Some(&id)), json!({})).await;
    let mut s = c
        .open_stream("/message:stream", None, json!({"message": as_alice(json!([{"text": "slowly"}]), Some(&id))}))
        .await;
    while contract_tests::kind(&s.next().await.unwrap()) != "artifactUpdate" {}
    c.send(as_alice(json!([{"text": "/help"}]), Some(&id)), json!({})).await;
    let control = envelope(json!({"kind": "control", "action": "complete"}));
    let done = c.send(as_alice(json!([control]), Some(&id)), json!({})).await;
    assert_eq!(done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    save(&h, &id, "shared-conversation-controls").await;

    // Issue 18: participant mode: a brief alone names another assignee, whose message ends it.
    let people = json!([{"id": "bob", "kind": "agent", "role": "assignee"}]);
    let brief = envelope(json!({"kind": "task", "payload": {"name": "fix", "goal": "fix it", "participants": people}}));
    let r = c.send(as_alice(json!([brief]), None), json!({})).await;
    let id = r["result"]["task"]["id"].as_str().expect("a task").to_string();
    c.send(as_alice(json!([{"text": "any news?"}]), Some(&id)), json!({})).await;
    let mut by_bob = as_alice(json!([{"text": "fixed"}]), Some(&id));
    by_bob["metadata"] = json!({"participant_id": "bob"});
    c.send(by_bob, json!({})).await;
    save(&h, &id, "participant-mode").await;
}

const EVENT: &str = "application/vnd.tiny-harness.event+json";

/// A message from alice (named in its metadata) with these parts, to `task` when given.
fn as_alice(parts: serde_json::Value, task: Option<&str>) -> serde_json::Value {
    let mut m = user_text("");
    m["parts"] = parts;
    m["metadata"] = json!({"participant_id": "alice"});
    if let Some(task) = task {
        m["taskId"] = json!(task);
    }
    m
}

/// Issue 19: a parent that delegates, gets the result and completes; its stand-in followed
/// by push; one followed by subscribing; a parent cancelled with its sub-task open, and that
/// stand-in. The remote agent is another harness (echo, or a slow script).
#[tokio::test]
#[ignore = "writes the replay fixtures; run with `cargo xtask histories`"]
async fn record_delegation_histories() {
    const SLOW: &str = "[[reply]]\nwhen = \"slowly\"\nchunks = [\"a \", \"b \", \"c\"]\ndelay_ms = 1500\n\n[[reply]]\nchunks = [\"fine\"]\n";
    let b = HarnessProcess::start(HarnessOptions { script: Some(SLOW.into()), ..Default::default() }).await;
    let agents = format!("[[agents]]\nid = \"b\"\nurl = \"{}/.well-known/agent-card.json\"\n", b.base_url);
    let rpc = |base: String, method: &'static str, params: serde_json::Value| async move {
        contract_tests::rpc_as(&base, None, method, params).await
    };
    let msg = |task: Option<&str>, text: &str| {
        let mut m = user_text(text);
        m["metadata"] = json!({"participant_id": "alice"});
        if let Some(t) = task {
            m["taskId"] = json!(t);
        }
        json!({"message": m})
    };
    let results = |task: &serde_json::Value| task["history"].to_string().contains("/sub_task");
    for push_route in [true, false] {
        let a = HarnessProcess::start(HarnessOptions {
            linger_secs: 0,
            server_extra: format!("push_route = {push_route}\n"),
            extra_config: agents.clone(),
            ..Default::default()
        })
        .await;
        let base = a.base_url.clone();
        let parent = rpc(base.clone(), "SendMessage", msg(None, "plan")).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let reply = rpc(base.clone(), "SendMessage", msg(Some(&parent), "/delegate b find it slowly")).await;
        let sub = reply["result"]["task"]["status"]["message"]["metadata"]["task_ref"].as_str().unwrap().to_string();
        for _ in 0..300 {
            if results(&rpc(base.clone(), "GetTask", json!({"id": parent})).await["result"]) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let control = json!({"message": {"messageId": "ctl", "role": "ROLE_USER", "taskId": parent,
            "metadata": {"participant_id": "alice"}, "parts": [{"data": {"kind": "control", "action": "complete"}}]}});
        rpc(base.clone(), "SendMessage", control).await;
        let path = if push_route { "push" } else { "subscribe" };
        save(&a, &sub, &format!("delegation-stand-in-{path}")).await;
        if push_route {
            save(&a, &parent, "delegation-parent-completed").await;
            let parent = rpc(base.clone(), "SendMessage", msg(None, "plan again")).await["result"]["task"]["id"]
                .as_str()
                .unwrap()
                .to_string();
            let reply = rpc(base.clone(), "SendMessage", msg(Some(&parent), "/delegate b more slowly")).await;
            let sub =
                reply["result"]["task"]["status"]["message"]["metadata"]["task_ref"].as_str().unwrap().to_string();
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            rpc(base.clone(), "CancelTask", json!({"id": parent})).await;
            save(&a, &parent, "delegation-parent-canceled").await;
            save(&a, &sub, "delegation-stand-in-canceled").await;
        }
    }
}

/// Issue 20: a conversation whose workflow the reconciler asks where its log ends (the
/// `position` update) between two turns, then cancelled.
#[tokio::test]
#[ignore = "writes the replay fixtures; run with `cargo xtask histories`"]
async fn record_position_history() {
    let h = HarnessProcess::start(HarnessOptions { linger_secs: 0, ..Default::default() }).await;
    let c = h.client();
    let first = c.send(user_text("first turn"), json!({})).await;
    let id = first["result"]["task"]["id"].as_str().unwrap().to_string();
    let client = h.temporal().await;
    let handle = client.get_workflow_handle::<harness_workflow::TaskWorkflow>(id.as_str());
    let position = handle
        .execute_update(harness_workflow::TaskWorkflow::position, (), Default::default())
        .await
        .expect("the position update answers");
    assert!(position.idle && position.last_seq > 0, "{position:?}");
    let mut next = user_text("second turn");
    next["taskId"] = json!(id);
    c.send(next, json!({})).await;
    c.rpc("CancelTask", json!({"id": id})).await;
    save(&h, &id, "position-asked").await;
}
