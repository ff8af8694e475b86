//! Issue 19: delegation to another A2A agent over real HTTP. `/delegate <agent> <brief>`
//! starts a stand-in sub-task that sends the brief to a configured remote agent and follows
//! the remote task by push (S15) or, with the push route off, by subscribing (S18); the
//! parent's history gets the result (S9, S20). The remote agents here are other harnesses
//! on the same Temporal server (their own task queues), each the other's remote agent.

use contract_tests::{HarnessOptions, HarnessProcess, rpc_as, user_text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const NS: &str = "io.github.madarauchiha-314.tiny-harness";

/// `[[agents]]` naming the harness on `port` as `id`.
fn agent(id: &str, port: u16) -> String {
    format!("[[agents]]\nid = \"{id}\"\nurl = \"http://127.0.0.1:{port}/.well-known/agent-card.json\"\n\n")
}

/// Two harnesses, each the other's remote agent: `a` names `b` as "b" and `b` names `a`
/// as "a". `script` is the model of `b` (echo when `None`).
async fn pair(push_route: bool, script: Option<&str>) -> (HarnessProcess, HarnessProcess) {
    pair_with(push_route, script, HarnessOptions::default()).await
}

/// [`pair`], `a` started with `a_opts` (its port, id, push route and agents set here).
async fn pair_with(push_route: bool, script: Option<&str>, a_opts: HarnessOptions) -> (HarnessProcess, HarnessProcess) {
    let (pa, pb) = (tiny_harness::temporal_dev::free_port(), tiny_harness::temporal_dev::free_port());
    let b = HarnessProcess::start(HarnessOptions {
        port: Some(pb),
        script: script.map(String::from),
        agent_extra: "id = \"agent-b\"\n".into(),
        extra_config: agent("a", pa),
        ..Default::default()
    })
    .await;
    let a = HarnessProcess::start(HarnessOptions {
        port: Some(pa),
        agent_extra: format!("id = \"agent-a\"\n{}", a_opts.agent_extra),
        server_extra: format!("push_route = {push_route}\nmonitor_interval_secs = 1\n{}", a_opts.server_extra),
        extra_config: format!("{}{}", agent("b", pb), a_opts.extra_config),
        ..a_opts
    })
    .await;
    (a, b)
}

async fn rpc(base: &str, method: &str, params: Value) -> Value {
    rpc_as(base, None, method, params).await
}

/// A message to `task` (a new task when `None`) from participant `who`.
fn message(task: Option<&str>, text: &str) -> Value {
    let mut m = user_text(text);
    m["metadata"] = json!({"participant_id": "alice"});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

async fn send(base: &str, task: Option<&str>, text: &str) -> Value {
    let r = rpc(base, "SendMessage", json!({"message": message(task, text)})).await;
    assert!(r.get("error").is_none(), "{text}: {r}");
    r["result"]["task"].clone()
}

async fn get_task(base: &str, id: &str) -> Value {
    let r = rpc(base, "GetTask", json!({"id": id})).await;
    assert!(r.get("error").is_none(), "GetTask {id}: {r}");
    r["result"].clone()
}

/// Waits until `done` holds for the task, returning it.
async fn wait_for(base: &str, id: &str, what: &str, secs: u64, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let task = get_task(base, id).await;
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "{what} within {secs} s: {task:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The sub-task results in a task's history.
fn results(task: &Value) -> Vec<Value> {
    let key = format!("{NS}/sub_task");
    task["history"].as_array().into_iter().flatten().filter(|m| m["metadata"].get(&key).is_some()).cloned().collect()
}

fn substate(task: &Value) -> String {
    task["metadata"][format!("{NS}/status")]["substate"].as_str().unwrap_or_default().to_string()
}

/// Delegates `brief` to agent "b" from a parked conversation on `a`: the parent's id and
/// the sub-task's (from the reply's `task_ref`).
async fn delegate(a: &HarnessProcess, brief: &str) -> (String, String) {
    let parent = send(&a.base_url, None, "plan the trip").await;
    let parent_id = parent["id"].as_str().unwrap().to_string();
    let reply = send(&a.base_url, Some(&parent_id), &format!("/delegate b {brief}")).await;
    // S9: the reply message's metadata is `{"command": "delegate", "task_ref": ...}`.
    let metadata = &reply["status"]["message"]["metadata"];
    assert_eq!(metadata["command"], "delegate", "{reply:#}");
    assert_eq!(metadata[format!("{NS}/command")]["name"], "delegate", "{reply:#}");
    let sub = metadata["task_ref"].as_str().unwrap_or_else(|| panic!("a task_ref: {reply:#}")).to_string();
    assert_eq!(reply["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(substate(&reply), "awaiting-subtasks", "{reply:#}");
    // S9: on the log, the reply is a status update with `{"command": "delegate", "task_ref"}`.
    // The reply names the sub-task as soon as its stand-in started: a GetTask at once finds it
    // (a read waits briefly for the first event of a workflow Temporal runs, tasks.rs).
    let r = rpc(&a.base_url, "GetTask", json!({"id": sub})).await;
    assert!(r.get("error").is_none(), "the sub-task exists: {r}");
    let mut events = a.client().open_stream(&format!("/tasks/{parent_id}:subscribe"), None, json!({})).await;
    loop {
        let event = events.next().await.expect("the reply on the parent's log");
        let update = &event["statusUpdate"];
        if update["metadata"]["command"] == "delegate" {
            assert_eq!(update["metadata"]["task_ref"], sub.as_str(), "{event}");
            assert_eq!(update["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{event}");
            break;
        }
    }
    (parent_id, sub)
}

/// What both paths must show: the parent records the result and waits for its next message
/// again; the stand-in mirrors the remote task and names its parent; the remote agent got
/// the brief from this agent.
async fn check_result(
    a: &HarnessProcess,
    b: &HarnessProcess,
    (parent, sub): (&str, &str),
    brief: &str,
    answer: &str,
) -> String {
    let done =
        wait_for(&a.base_url, parent, "the sub-task's result in the parent", 60, |t| !results(t).is_empty()).await;
    let result = &results(&done)[0];
    let text = result["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains(sub) && text.contains(answer), "the framed result names the sub-task and its answer: {text}");
    assert_eq!(result["role"], "ROLE_USER", "the model reads the result as input");
    let mark = &result["metadata"][format!("{NS}/sub_task")];
    let remote_id = mark["remote_task_id"].as_str().unwrap().to_string();
    assert_eq!(mark["agent"], "b");
    let parked =
        wait_for(&a.base_url, parent, "the parent parked again", 10, |t| substate(t) == "awaiting-next-message").await;
    assert_eq!(parked["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let data = &parked["metadata"][format!("{NS}/task")];
    assert_eq!(data["sub_tasks"], json!([{"task_id": sub, "agent": "b"}]), "{data:#}");

    let stand_in = get_task(&a.base_url, sub).await;
    assert_eq!(stand_in["status"]["state"], "TASK_STATE_COMPLETED", "{stand_in:#}");
    let sdata = &stand_in["metadata"][format!("{NS}/task")];
    assert_eq!(sdata["parent_tasks"], json!([{"task_id": parent, "agent": null}]), "{sdata:#}");
    assert_eq!(stand_in["contextId"], done["contextId"], "a sub-task shares its parent's context");

    let remote = get_task(&b.base_url, &remote_id).await;
    let brief_text = brief;
    let brief = &remote["history"][0];
    assert_eq!(brief["parts"][0]["text"], brief_text, "{remote:#}");
    let participants = remote["metadata"][format!("{NS}/task")]["participants"].to_string();
    assert!(participants.contains("agent-a"), "the brief came from agent-a: {participants}");
    remote_id
}

/// The push configs on the remote task (ListTaskPushNotificationConfigs on `b`).
async fn push_configs(b: &HarnessProcess, remote_id: &str) -> Vec<Value> {
    let r = rpc(&b.base_url, "ListTaskPushNotificationConfigs", json!({"taskId": remote_id})).await;
    assert!(r.get("error").is_none(), "{r}");
    r["result"]["configs"].as_array().cloned().unwrap_or_default()
}

/// A remote model that works for about six seconds on a brief that says "slowly".
const SLOW: &str = r#"
[[reply]]
when = "slowly"
chunks = ["found ", "three ", "hotels ", "by ", "the ", "sea"]
delay_ms = 1000

[[reply]]
chunks = ["fine"]
"#;

/// How many pushes a stand-in's workflow took (its `remote_push` updates).
async fn pushes_taken(a: &HarnessProcess, sub: &str) -> usize {
    let history = a.workflow_history(sub).await;
    history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["attributes"]["WorkflowExecutionUpdateAcceptedEventAttributes"]["accepted_request"]["input"]["name"]
                == "remote_push"
        })
        .count()
}

/// Issue 19, S15: delegate, the remote harness works and answers, its pushes wake the
/// stand-in (which mirrors the remote task's artifacts) and the parent sees the result.
#[tokio::test(flavor = "multi_thread")]
async fn a_delegated_sub_task_is_followed_by_push_and_its_result_reaches_the_parent() {
    let (a, b) = pair(true, Some(SLOW)).await;
    let (parent, sub) = delegate(&a, "find three hotels, slowly").await;
    let ids = (parent.as_str(), sub.as_str());
    let remote = check_result(&a, &b, ids, "find three hotels, slowly", "found three hotels by the sea").await;
    let configs = push_configs(&b, &remote).await;
    assert_eq!(configs.len(), 1, "{configs:?}");
    let url = configs[0]["url"].as_str().unwrap();
    assert_eq!(url, format!("{}/a2a/push/{sub}", a.base_url), "the callback names the stand-in");
    assert!(pushes_taken(&a, &sub).await >= 1, "the remote agent's pushes woke the stand-in");
    let stand_in = get_task(&a.base_url, &sub).await;
    let mirrored = stand_in["artifacts"].to_string();
    assert!(mirrored.contains("found three hotels by the sea"), "the remote artifacts are mirrored: {mirrored}");
}

/// Issue 19, S18: with the push route off the stand-in follows by subscribing.
#[tokio::test(flavor = "multi_thread")]
async fn with_the_push_route_off_a_sub_task_is_followed_by_subscribing() {
    let (a, b) = pair(false, Some(SLOW)).await;
    let (parent, sub) = delegate(&a, "book a table, slowly").await;
    let ids = (parent.as_str(), sub.as_str());
    let remote = check_result(&a, &b, ids, "book a table, slowly", "found three hotels by the sea").await;
    let mirrored = get_task(&a.base_url, &sub).await["artifacts"].to_string();
    assert!(mirrored.contains("found three hotels by the sea"), "the remote artifacts are mirrored: {mirrored}");
    assert!(push_configs(&b, &remote).await.is_empty(), "no push config without a push route");
}

/// The push config the stand-in registered on the remote task: (remote task id, token).
/// No A2A call returns the token (issue 34: write-only); it is opened from the remote's
/// store with the test push key, as only its delivery does.
async fn registered(b: &HarnessProcess, a: &HarnessProcess, sub: &str) -> (String, String) {
    let stand_in = wait_for(&a.base_url, sub, "the remote task's id on the stand-in", 30, |t| {
        t["metadata"][format!("{NS}/sub_task")]["task_id"].is_string()
    })
    .await;
    let remote = stand_in["metadata"][format!("{NS}/sub_task")]["task_id"].as_str().unwrap().to_string();
    let configs = push_configs(b, &remote).await;
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert!(configs[0].get("token").is_none(), "a token is never returned: {configs:?}");
    let rows = b.store().await.push_configs(&remote).await.unwrap();
    let key = harness_push::PushKey::from_base64(contract_tests::TEST_PUSH_KEY, "the test key").unwrap();
    let token = key.open(&rows[0].sealed).expect("the remote's config opens with its key").token;
    assert!(!token.is_empty(), "the stand-in registered a token");
    (remote, token)
}

/// S15 case by case: 413, 400, then every refusal (no token, a wrong token, no such
/// stand-in, a body naming another remote task, a stand-in on another queue, an ended
/// stand-in) is the same 401, byte for byte; the right token naming the followed task is 204
/// and wakes the stand-in. Neither the token nor a body reaches a log.
#[tokio::test(flavor = "multi_thread")]
async fn the_push_receiver_takes_only_the_registered_token_for_the_followed_task() {
    let (a, b) = pair(true, Some(SLOW)).await;
    let (_parent, sub) = delegate(&a, "find hotels slowly").await;
    let (remote, token) = registered(&b, &a, &sub).await;
    let http = reqwest::Client::new();
    let post = |base: String, id: String, body: String, token: Option<String>| {
        let mut r = http.post(format!("{base}/a2a/push/{id}")).header("content-type", "application/json").body(body);
        if let Some(t) = token {
            r = r.header("X-A2A-Notification-Token", t);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
        }
    };
    let status = |task: &str, text: &str| {
        json!({"statusUpdate": {"taskId": task, "contextId": "c", "status": {"state": "TASK_STATE_WORKING",
            "message": {"messageId": "p1", "role": "ROLE_AGENT", "parts": [{"text": text}]}}}})
        .to_string()
    };
    let good = status(&remote, "pushed by hand");
    let (ab, bb) = (a.base_url.clone(), b.base_url.clone());
    assert_eq!(post(ab.clone(), sub.clone(), "x".repeat(70 * 1024), Some(token.clone())).await.0, 413);
    assert_eq!(post(ab.clone(), sub.clone(), "not json".into(), Some(token.clone())).await.0, 400);
    let refusals = [
        ("no token", post(ab.clone(), sub.clone(), good.clone(), None).await),
        ("a wrong token", post(ab.clone(), sub.clone(), good.clone(), Some(format!("{token}x"))).await),
        ("no such stand-in", post(ab.clone(), "no-such-task".into(), good.clone(), Some(token.clone())).await),
        ("another remote task", post(ab.clone(), sub.clone(), status("other", "x"), Some(token.clone())).await),
        ("a stand-in on another queue", post(bb.clone(), sub.clone(), good.clone(), Some(token.clone())).await),
    ];
    let first = refusals[0].1.clone();
    assert_eq!(first.0, 401);
    for (case, answer) in &refusals {
        assert_eq!(answer, &first, "{case}: the same 401, byte for byte");
    }
    assert_eq!(get_task(&ab, &sub).await["status"]["state"], "TASK_STATE_WORKING", "no refusal changed the stand-in");
    assert_eq!(post(ab.clone(), sub.clone(), good.clone(), Some(token.clone())).await.0, 204);
    wait_for(&ab, &sub, "the pushed status mirrored", 10, |t| {
        t["status"]["message"]["parts"][0]["text"] == "pushed by hand"
    })
    .await;
    wait_for(&ab, &sub, "the stand-in ended", 60, |t| t["status"]["state"] == "TASK_STATE_COMPLETED").await;
    let ended = post(ab.clone(), sub.clone(), good.clone(), Some(token.clone())).await;
    assert_eq!(ended, first, "an ended stand-in: the same 401");
    for log in [a.log(), b.log()] {
        assert!(!log.contains(&token), "the push token is in a log");
        assert!(!log.contains("pushed by hand"), "a push body is in a log");
    }
}

/// Waits for the stand-in to follow its remote task, which is working: its id on `b`.
async fn remote_working(a: &HarnessProcess, b: &HarnessProcess, sub: &str) -> String {
    let stand_in = wait_for(&a.base_url, sub, "the stand-in following its remote task", 30, |t| {
        t["metadata"][format!("{NS}/sub_task")]["task_id"].is_string()
    })
    .await;
    let remote = stand_in["metadata"][format!("{NS}/sub_task")]["task_id"].as_str().unwrap().to_string();
    wait_for(&b.base_url, &remote, "the remote task working", 30, |t| t["status"]["state"] == "TASK_STATE_WORKING")
        .await;
    remote
}

/// Issue 19, S9: `/delegate` naming no configured agent, or with no brief, is refused
/// naming what is wrong, on both bindings, and the parent is unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn a_delegate_naming_no_configured_agent_or_no_brief_is_refused_and_starts_nothing() {
    let (a, _b) = pair(true, None).await;
    let parent = send(&a.base_url, None, "plan the trip").await;
    let id = parent["id"].as_str().unwrap();
    let before = get_task(&a.base_url, id).await;
    for (text, says) in [
        ("/delegate zed find hotels", "no remote agent `zed` is configured (agents: b"),
        ("/delegate b", "/delegate b: the brief is empty"),
        ("/delegate", "/delegate names no agent"),
    ] {
        let r = rpc(&a.base_url, "SendMessage", json!({"message": message(Some(id), text)})).await;
        assert_eq!(r["error"]["code"], -32602, "{text}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(says), "{text}: {r}");
        let rest = a
            .client()
            .rest(reqwest::Method::POST, "/message:send", Some(json!({"message": message(Some(id), text)}).to_string()))
            .await;
        assert_eq!(rest.status, 400, "{text}: {rest:?}");
        assert!(rest.body["error"]["message"].as_str().unwrap().contains(says), "{text}: {rest:?}");
    }
    let after = get_task(&a.base_url, id).await;
    assert_eq!(after["history"], before["history"], "nothing was added to the parent");
    assert!(after["metadata"][format!("{NS}/task")].get("sub_tasks").is_none(), "{after:#}");
}

/// Issue 19, S8, S20: while a sub-task is open the monitor lists it with its remote state,
/// and a control cannot complete the parent; cancelling the parent cancels the sub-task and
/// its remote task.
#[tokio::test(flavor = "multi_thread")]
async fn an_open_sub_task_shows_on_the_monitor_holds_a_control_and_is_cancelled_with_its_parent() {
    let (a, b) = pair(true, Some(SLOW)).await;
    let (parent, sub) = delegate(&a, "find hotels slowly").await;
    let remote = remote_working(&a, &b, &sub).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let child = loop {
        let snapshot: Value = reqwest::get(format!("{}/_monitor", a.base_url)).await.unwrap().json().await.unwrap();
        let row = snapshot["running"].as_array().unwrap().iter().find(|r| r["task_id"] == parent.as_str()).cloned();
        let child = row.map(|r| r["children"][0].clone()).filter(|c| c["state"] == "TASK_STATE_WORKING");
        if let Some(child) = child {
            break child;
        }
        assert!(Instant::now() < deadline, "the monitor lists the working child: {snapshot:#}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(child, json!({"task_id": sub, "agent": "b", "state": "TASK_STATE_WORKING", "remote_task_id": remote}));
    let status = send(&a.base_url, Some(&parent), "/status").await;
    let said = status["status"]["message"]["parts"][0]["text"].as_str().unwrap().to_string();
    assert!(said.contains(&format!("open sub-tasks: {sub}")) && said.contains("awaiting-subtasks"), "{said}");
    let r = rpc(&a.base_url, "SendMessage", json!({"message": message(Some(&sub), "hello stand-in")})).await;
    assert_eq!(r["error"]["code"], -32004, "a stand-in takes no messages: {r}");
    let why = r["error"]["message"].as_str().unwrap();
    assert!(why.contains("stand-in") && why.contains(&parent), "{why}");

    let control = json!({"messageId": "ctl-1", "role": "ROLE_USER", "taskId": parent,
        "metadata": {"participant_id": "alice"},
        "parts": [{"data": {"kind": "control", "action": "complete"}, "mediaType": "application/vnd.tiny-harness.event+json"}]});
    let r = rpc(&a.base_url, "SendMessage", json!({"message": control})).await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r:#}");
    assert_eq!(substate(task), "awaiting-next-message");
    let why = task["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(why.contains("sub-tasks are open") && why.contains(&sub), "{why}");

    let r = rpc(&a.base_url, "CancelTask", json!({"id": parent})).await;
    assert_eq!(r["result"]["status"]["state"], "TASK_STATE_CANCELED", "{r}");
    wait_for(&a.base_url, &sub, "the sub-task canceled", 30, |t| t["status"]["state"] == "TASK_STATE_CANCELED").await;
    wait_for(&b.base_url, &remote, "the remote task canceled", 30, |t| t["status"]["state"] == "TASK_STATE_CANCELED")
        .await;
}

/// Issue 19: the parent's model reads the sub-task's result on its next turn (an openai
/// model against the local endpoint, which records what it was sent).
#[tokio::test(flavor = "multi_thread")]
async fn the_parent_s_model_reads_the_sub_task_s_result_on_its_next_turn() {
    let mock = contract_tests::openai_mock::MockOpenAi::start().await;
    let a_opts = HarnessOptions {
        agent_extra: "model = \"gpt\"\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-model\"\nkeyless = true\n",
            mock.base_url
        ),
        ..Default::default()
    };
    let (a, b) = pair_with(true, None, a_opts).await;
    let (parent, sub) = delegate(&a, "find three hotels").await;
    check_result(&a, &b, (&parent, &sub), "find three hotels", "echo: find three hotels").await;
    send(&a.base_url, Some(&parent), "what did you find?").await;
    let last = mock.seen().last().expect("a request").body.clone();
    let said: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    let result = said.iter().find(|m| m.contains(&format!("[sub-task {sub}"))).unwrap_or_else(|| panic!("{last:#}"));
    assert!(result.contains("echo: find three hotels"), "{result}");
    assert!(!said.iter().any(|m| m.contains("/delegate")), "the command never reaches the model: {said:?}");
}

/// Issue 29: the built-in `delegate` tool (`agent.builtin_tools`): the model hands a brief to
/// a configured agent through the same stand-in as `/delegate`, the turn waits for the
/// sub-task, and the model reads its result as the call's result; the result is in the
/// parent's history too, and the tool is offered naming the agents it may name.
#[tokio::test(flavor = "multi_thread")]
async fn the_model_delegates_with_the_delegate_tool_and_reads_the_result() {
    let mock = contract_tests::openai_mock::MockOpenAi::start().await;
    let a_opts = HarnessOptions {
        agent_extra: "model = \"gpt\"\nbuiltin_tools = [\"delegate\"]\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-model\"\nkeyless = true\n",
            mock.base_url
        ),
        ..Default::default()
    };
    let (a, _b) = pair_with(true, None, a_opts).await;
    let ask = "@call delegate {\"agent\": \"b\", \"brief\": \"find three hotels\"}\n@call delegate {\"agent\": \"z\", \"brief\": \"x\"}";
    let task = send(&a.base_url, None, ask).await;
    let parent = task["id"].as_str().unwrap().to_string();
    let answer = task["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string();
    let said: Vec<&str> = answer.strip_prefix("Tools said: ").expect(&answer).split(" | ").collect();
    assert_eq!(
        said[0],
        format!("sub-task {parent}-sub-1 on `b` ended TASK_STATE_INPUT_REQUIRED: echo: find three hotels"),
        "{task:#}"
    );
    assert_eq!(said[1], "there is no remote agent `z` (the agents are: b)");
    let offered = mock.seen()[0].body["tools"].clone();
    let delegate = offered.as_array().unwrap().iter().find(|t| t["function"]["name"] == "delegate").expect("offered");
    assert_eq!(delegate["function"]["parameters"]["properties"]["agent"]["enum"], json!(["b"]));
    let task = get_task(&a.base_url, &parent).await;
    let recorded = results(&task);
    assert_eq!(recorded.len(), 1, "the result is in the parent's history: {task:#}");
    assert_eq!(recorded[0]["metadata"][format!("{NS}/sub_task")]["task_id"], format!("{parent}-sub-1"));
}

/// Delegates to a slow remote, SIGKILLs the delegating harness (`delegator`) or the remote
/// one while the remote works, restarts it, and checks that the result reaches the parent.
async fn result_survives_a_sigkill(delegator: bool, push_route: bool) {
    let (mut a, mut b) = pair(push_route, Some(SLOW)).await;
    let (parent, sub) = delegate(&a, "find hotels slowly").await;
    remote_working(&a, &b, &sub).await;
    let killed = if delegator { &mut a } else { &mut b };
    killed.kill9();
    tokio::time::sleep(Duration::from_secs(2)).await;
    killed.restart().await;
    let ids = (parent.as_str(), sub.as_str());
    check_result(&a, &b, ids, "find hotels slowly", "found three hotels by the sea").await;
}

/// Durability (issue 19): the delegating harness is SIGKILLed while the remote agent works
/// and comes back: the remote's result still reaches the parent.
#[tokio::test(flavor = "multi_thread")]
async fn the_result_arrives_after_the_delegating_harness_is_sigkilled_and_restarted() {
    result_survives_a_sigkill(true, true).await;
}

/// Durability (issue 19): the remote harness is SIGKILLed while it works and comes back; the
/// stand-in follows it again, by push and by subscribing, and the result reaches the parent.
#[tokio::test(flavor = "multi_thread")]
async fn the_stand_in_follows_the_remote_again_after_the_remote_harness_is_sigkilled_and_restarted() {
    for push_route in [true, false] {
        result_survives_a_sigkill(false, push_route).await;
    }
}

/// The interop venv's Python (`cargo xtask test` builds it; TINY_HARNESS_INTEROP_PYTHON).
fn python() -> std::path::PathBuf {
    std::env::var("TINY_HARNESS_INTEROP_PYTHON").map(Into::into).unwrap_or_else(|_| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python")
    })
}

/// The a2a-sdk agent of `interop/remote_agent.py` on a free port, until dropped.
struct PythonAgent {
    child: std::process::Child,
    port: u16,
}

impl PythonAgent {
    async fn start(push: bool, rest: bool, stream: bool) -> Self {
        let port = tiny_harness::temporal_dev::free_port();
        let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/remote_agent.py");
        let mut command = std::process::Command::new(python());
        command.arg(script).arg("--port").arg(port.to_string());
        if !push {
            command.arg("--no-push");
        }
        if rest {
            command.arg("--rest");
        }
        if !stream {
            command.arg("--no-stream");
        }
        let child = command.spawn().expect("start the python agent");
        let deadline = Instant::now() + Duration::from_secs(30);
        let card = format!("http://127.0.0.1:{port}/.well-known/agent-card.json");
        while reqwest::get(&card).await.map_or(true, |r| !r.status().is_success()) {
            assert!(Instant::now() < deadline, "the python agent did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { child, port }
    }
}

impl Drop for PythonAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 19: the remote agent is the official Python SDK's server (an agent this project
/// did not write), over JSON-RPC and over HTTP+JSON, followed by push and, when it does not
/// push, by subscribing, and when it does neither, by reading; twice each, so the second
/// delegation revalidates the cached card.
#[tokio::test(flavor = "multi_thread")]
async fn a_sub_task_on_an_a2a_sdk_python_agent_is_followed_by_push_and_by_subscribing() {
    let ways =
        [(true, false, true), (false, false, true), (true, true, true), (false, true, true), (false, false, false)];
    for (push, rest, stream) in ways {
        let agent = PythonAgent::start(push, rest, stream).await;
        let a = HarnessProcess::start(HarnessOptions {
            agent_extra: "id = \"agent-a\"\n".into(),
            extra_config: format!(
                "[[agents]]\nid = \"py\"\nurl = \"http://127.0.0.1:{}/.well-known/agent-card.json\"\n",
                agent.port
            ),
            ..Default::default()
        })
        .await;
        for brief in ["count the stars", "name the planets"] {
            let parent = send(&a.base_url, None, "plan the trip").await;
            let parent = parent["id"].as_str().unwrap().to_string();
            let reply = send(&a.base_url, Some(&parent), &format!("/delegate py {brief}")).await;
            let sub = reply["status"]["message"]["metadata"]["task_ref"]
                .as_str()
                .unwrap_or_else(|| panic!("{reply:#}"))
                .to_string();
            let done =
                wait_for(&a.base_url, &parent, "the python agent's result", 60, |t| !results(t).is_empty()).await;
            let result = results(&done)[0]["parts"][0]["text"].as_str().unwrap().to_string();
            assert!(result.contains(&format!("python agent did: {brief}")), "push {push}, rest {rest}: {result}");
            assert!(result.contains("TASK_STATE_COMPLETED"), "{result}");
            let stand_in = get_task(&a.base_url, &sub).await;
            assert_eq!(stand_in["status"]["state"], "TASK_STATE_COMPLETED", "{stand_in:#}");
            assert!(stand_in["artifacts"].to_string().contains("python agent did"), "{stand_in:#}");
            let pushes = pushes_taken(&a, &sub).await;
            assert_eq!(pushes > 0, push, "push {push}: {pushes} pushes taken");
        }
    }
}

/// Issue 19: a one-shot task does not complete while its sub-task is open: its turn parks it
/// awaiting-subtasks, and the turn after the result completes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_one_shot_task_waits_for_its_open_sub_task_before_it_completes() {
    let (a, _b) = pair_with(true, Some(SLOW), HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let opened = send(&a.base_url, None, "/delegate b find it slowly").await;
    let parent = opened["id"].as_str().unwrap().to_string();
    assert_eq!(
        (opened["status"]["state"].as_str(), substate(&opened)),
        (Some("TASK_STATE_INPUT_REQUIRED"), "awaiting-subtasks".into())
    );
    let meanwhile = send(&a.base_url, Some(&parent), "how is it going?").await;
    assert_eq!(meanwhile["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{meanwhile:#}");
    assert_eq!(substate(&meanwhile), "awaiting-subtasks");
    wait_for(&a.base_url, &parent, "the result", 60, |t| !results(t).is_empty()).await;
    let done = send(&a.base_url, Some(&parent), "so?").await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done:#}");
}

/// Issue 19: an agent whose card offers no interface this harness speaks fails its sub-task,
/// and the parent's result says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_agent_with_an_unusable_card_fails_the_sub_task_saying_why() {
    let b = HarnessProcess::start(HarnessOptions::default()).await;
    let a = HarnessProcess::start(HarnessOptions {
        // A JSON document that is no agent card of A2A 1.0 (the remote's OpenAPI document).
        extra_config: format!("[[agents]]\nid = \"odd\"\nurl = \"{}/openapi.json\"\n", b.base_url),
        ..Default::default()
    })
    .await;
    let parent = send(&a.base_url, None, "plan").await["id"].as_str().unwrap().to_string();
    let reply = send(&a.base_url, Some(&parent), "/delegate odd find hotels").await;
    let sub = reply["status"]["message"]["metadata"]["task_ref"].as_str().unwrap().to_string();
    let done = wait_for(&a.base_url, &parent, "the failed result", 60, |t| !results(t).is_empty()).await;
    let result = results(&done)[0]["parts"][0]["text"].as_str().unwrap().to_string();
    assert!(result.contains("TASK_STATE_FAILED") && result.contains("offers no A2A 1.0 interface"), "{result}");
    assert_eq!(get_task(&a.base_url, &sub).await["status"]["state"], "TASK_STATE_FAILED");
}

/// Issue 19: a parent that ends otherwise than by a completion (here its model fails a
/// one-shot) cancels its open sub-task, and the sub-task its remote task.
#[tokio::test(flavor = "multi_thread")]
async fn a_parent_that_fails_cancels_its_open_sub_task_and_the_remote_task() {
    let a_opts = HarnessOptions {
        lifecycle: "one-shot",
        script: Some(
            "[[reply]]\nwhen = \"explode\"\nfail = \"the model broke\"\n\n[[reply]]\nchunks = [\"ok\"]\n".into(),
        ),
        ..Default::default()
    };
    let (a, b) = pair_with(true, Some(SLOW), a_opts).await;
    let parent = send(&a.base_url, None, "/delegate b find it slowly").await["id"].as_str().unwrap().to_string();
    let sub = format!("{parent}-sub-1");
    let remote = remote_working(&a, &b, &sub).await;
    let failed = send(&a.base_url, Some(&parent), "explode").await;
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED", "{failed:#}");
    wait_for(&a.base_url, &sub, "the sub-task canceled", 30, |t| t["status"]["state"] == "TASK_STATE_CANCELED").await;
    wait_for(&b.base_url, &remote, "the remote task canceled", 30, |t| t["status"]["state"] == "TASK_STATE_CANCELED")
        .await;
}

/// Issue 19: the parent's framed result carries at most 500 characters of the answer; the
/// stand-in keeps the whole answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_answer_reaches_the_parent_as_a_summary_of_500_characters() {
    let (a, _b) = pair(true, None).await;
    let brief = "y".repeat(700);
    let (parent, sub) = delegate(&a, &brief).await;
    let done = wait_for(&a.base_url, &parent, "the result", 60, |t| !results(t).is_empty()).await;
    let text = results(&done)[0]["parts"][0]["text"].as_str().unwrap().to_string();
    let summary = text.split_once("] ").unwrap().1;
    assert_eq!(summary.chars().count(), 500, "{text}");
    assert!(format!("echo: {brief}").starts_with(summary));
    let whole = get_task(&a.base_url, &sub).await["status"]["message"]["parts"][0]["text"].clone();
    assert_eq!(whole, format!("echo: {brief}"));
}
