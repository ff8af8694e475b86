//! Issue 18: the conversation's controls over real HTTP, on both bindings: the control
//! envelope (S8), slash commands (S9), task and event envelopes (S11), briefs (S21),
//! participant mode and brief-only starts (S22), the channel echo (S12) and the status
//! substates on the card. Each abuse case is checked to leave the task and its log as they
//! were (docs/controls.md).

use contract_tests::{A2AClient, HarnessOptions, HarnessProcess, kind, state};
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "io.github.madarauchiha-314.tiny-harness";
const EVENT: &str = "application/vnd.tiny-harness.event+json";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Binding {
    JsonRpc,
    Rest,
}

const BOTH: [Binding; 2] = [Binding::JsonRpc, Binding::Rest];

/// A message from `who` to `task`, with these parts.
fn from(who: Option<&str>, task: Option<&str>, parts: Value) -> Value {
    contract_tests::message_from(who, task, parts)
}

fn text(who: Option<&str>, task: Option<&str>, t: &str) -> Value {
    from(who, task, json!([{"text": t}]))
}

fn control(who: Option<&str>, task: &str) -> Value {
    from(who, Some(task), json!([{"data": {"kind": "control", "action": "complete"}, "mediaType": EVENT}]))
}

fn envelope(who: Option<&str>, task: Option<&str>, data: Value) -> Value {
    from(who, task, json!([{"data": data, "mediaType": EVENT}]))
}

/// A refusal as both bindings carry it: the JSON-RPC code (REST: the HTTP status) and text.
#[derive(Debug)]
struct Refused {
    code: i64,
    message: String,
}

/// Blocking SendMessage on a binding: the result (`{"task": ..}` or `{"message": ..}`).
async fn send(c: &A2AClient, b: Binding, message: Value) -> Result<Value, Refused> {
    match b {
        Binding::JsonRpc => {
            let answer = c.send(message, json!({})).await;
            match answer.get("error") {
                Some(e) => Err(Refused {
                    code: e["code"].as_i64().unwrap(),
                    message: e["message"].as_str().unwrap().to_string(),
                }),
                None => Ok(answer["result"].clone()),
            }
        }
        Binding::Rest => {
            let body = json!({"message": message}).to_string();
            let answer = c.rest(reqwest::Method::POST, "/message:send", Some(body)).await;
            if answer.status == 200 {
                return Ok(answer.body);
            }
            Err(Refused {
                code: i64::from(answer.status),
                message: answer.body["error"]["message"].as_str().unwrap_or_default().to_string(),
            })
        }
    }
}

async fn sent_task(c: &A2AClient, b: Binding, message: Value) -> Value {
    match send(c, b, message).await {
        Ok(r) => r["task"].clone(),
        Err(e) => panic!("refused on {b:?}: {e:?}"),
    }
}

/// GetTask as `who` sees it.
async fn get(h: &HarnessProcess, who: &str, task: &str) -> Value {
    contract_tests::rpc_as(&h.base_url, Some(("X-Participant-Id", who)), "GetTask", json!({"id": task})).await
}

/// The task's whole log in the store (seq, event).
async fn log(h: &HarnessProcess, task: &str) -> Vec<Value> {
    let store = h.store().await;
    store
        .events_after(task, 0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| serde_json::to_value(e.event).unwrap())
        .collect()
}

/// What an abuse case must leave as it was: the stored task and its log.
async fn unchanged_after(h: &HarnessProcess, who: &str, task: &str, before: &(Value, Vec<Value>)) {
    // Give a wrongly accepted message time to show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let now = (get(h, who, task).await["result"].clone(), log(h, task).await);
    assert_eq!(now.0, before.0, "the task changed");
    assert_eq!(now.1.len(), before.1.len(), "the log grew: {:?}", &now.1[before.1.len().min(now.1.len())..]);
}

async fn snapshot(h: &HarnessProcess, who: &str, task: &str) -> (Value, Vec<Value>) {
    (get(h, who, task).await["result"].clone(), log(h, task).await)
}

fn brief(data: Value) -> Value {
    json!({"kind": "task", "payload": data})
}

/// A task alice opens from a brief with wanda watching and ada as its admin.
async fn shared_task(c: &A2AClient, b: Binding) -> String {
    let participants = json!([
        {"id": "wanda", "kind": "human", "role": "watcher"},
        {"id": "ada", "kind": "human", "role": "admin"},
    ]);
    let opening = from(
        Some("alice"),
        None,
        json!([
            {"data": brief(json!({"name": "shared", "goal": "talk", "participants": participants})), "mediaType": EVENT},
            {"text": "hello all"},
        ]),
    );
    let task = sent_task(c, b, opening).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task}");
    task["id"].as_str().unwrap().to_string()
}

/// Streams `words` from alice to task `id` and returns the stream once the turn's first
/// chunk arrived (the model is mid-reply).
async fn streaming(c: &A2AClient, id: &str, words: &str) -> contract_tests::SseEvents {
    let mut stream =
        c.open_stream("/message:stream", None, json!({"message": text(Some("alice"), Some(id), words)})).await;
    while kind(&stream.next().await.expect("the stream goes on")) != "artifactUpdate" {}
    stream
}

/// A harness whose model is the openai provider against `mock`, with `server` lines in
/// its `[server]` section.
async fn openai_harness(mock: &contract_tests::openai_mock::MockOpenAi, server: &str) -> HarnessProcess {
    HarnessProcess::start(HarnessOptions {
        agent_extra: "model = \"gpt\"\n".into(),
        server_extra: server.into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-model\"\nkeyless = true\n",
            mock.base_url
        ),
        ..Default::default()
    })
    .await
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string()
}

const SLOW: &str = r#"
[[reply]]
when = "slowly"
chunks = ["one ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight "]
delay_ms = 1500

[[reply]]
chunks = ["fine"]
"#;

async fn scripted() -> HarnessProcess {
    HarnessProcess::start(HarnessOptions { script: Some(SLOW.into()), ..Default::default() }).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_control_completes_a_conversation_and_a_terminal_task_refuses_it_before_and_after_its_run_closed() {
    let h = HarnessProcess::start(HarnessOptions { linger_secs: 1, ..Default::default() }).await;
    let c = h.client();
    for b in BOTH {
        let task = sent_task(&c, b, text(Some("alice"), None, "let us talk")).await;
        let id = task["id"].as_str().unwrap();
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let done = sent_task(&c, b, control(Some("alice"), id)).await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{b:?}: {done}");
        assert_eq!(get(&h, "alice", id).await["result"]["status"]["state"], "TASK_STATE_COMPLETED");
        // S7 while the run lingers, then once it closed (answered from the store).
        for moment in ["before the run closed", "after the run closed"] {
            let again = send(&c, b, control(Some("alice"), id)).await.unwrap_err();
            assert!(again.message.contains("terminal state (TASK_STATE_COMPLETED)"), "{b:?} {moment}: {again:?}");
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_control_cuts_a_running_scripted_turn_and_the_stream_ends_completed() {
    let h = scripted().await;
    let c = h.client();
    for b in BOTH {
        let task = sent_task(&c, b, text(Some("alice"), None, "hi")).await;
        let id = task["id"].as_str().unwrap().to_string();
        // A slow turn streams; the sender's stream shows it working.
        let mut stream = streaming(&c, &id, "slowly").await;
        // A control the validator refuses interrupts nothing: the turn streams on.
        let refused = send(&c, b, control(None, &id)).await.unwrap_err();
        assert!(refused.message.contains("a control needs a known sender"), "{refused:?}");
        let next = stream.next().await.expect("the turn goes on");
        assert_eq!(kind(&next), "artifactUpdate", "{next}");
        let started = std::time::Instant::now();
        let done = sent_task(&c, b, control(Some("alice"), &id)).await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{b:?}: {done}");
        assert!(started.elapsed() < Duration::from_secs(8), "the control waited for the turn: {:?}", started.elapsed());
        let rest = stream.collect_all().await;
        assert_eq!(rest.last().and_then(state), Some("TASK_STATE_COMPLETED"), "{b:?}: {rest:?}");
        // Nothing of the cut turn lands after the end.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let events = log(&h, &id).await;
        assert_eq!(events.last().and_then(state), Some("TASK_STATE_COMPLETED"), "{events:?}");
        let chunks = events.iter().filter(|e| kind(e) == "artifactUpdate").count();
        assert!(chunks < 8, "the turn ran to its end: {chunks} chunks");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_control_cuts_a_running_openai_turn_and_a_trusted_brief_sets_the_reasoning_effort() {
    let mock = contract_tests::openai_mock::MockOpenAi::start().await;
    let h = openai_harness(&mock, "delegators = [\"planner\"]").await;
    let c = h.client();
    let task = sent_task(&c, Binding::JsonRpc, text(Some("alice"), None, "slow")).await;
    let id = task["id"].as_str().unwrap().to_string();
    let mut stream = streaming(&c, &id, "forever").await;
    let done = sent_task(&c, Binding::Rest, control(Some("alice"), &id)).await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let rest = stream.collect_all().await;
    assert_eq!(rest.last().and_then(state), Some("TASK_STATE_COMPLETED"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let chunks = log(&h, &id).await.iter().filter(|e| kind(e) == "artifactUpdate").count();
    assert!(chunks < 100, "the endpoint's 600 chunks ran on: {chunks}");

    // S21: a trusted delegator's brief sets the reasoning effort of its task's requests.
    let effort = brief(json!({"name": "think", "goal": "hard", "reasoning_effort": "high"}));
    let opening = from(Some("planner"), None, json!([{"data": effort, "mediaType": EVENT}, {"text": "think hard"}]));
    sent_task(&c, Binding::JsonRpc, opening).await;
    let asked = mock.seen().into_iter().rev().find(|r| r.body.to_string().contains("think hard")).expect("a request");
    assert_eq!(asked.body["reasoning_effort"], "high", "{}", asked.body);
    assert!(
        mock.seen()
            .iter()
            .all(|r| r.body.to_string().contains("think hard") || r.body.get("reasoning_effort").is_none())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn controls_and_envelopes_the_sender_may_not_send_leave_the_task_and_its_log_unchanged() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    for b in BOTH {
        let id = shared_task(&c, b).await;
        let before = snapshot(&h, "alice", &id).await;
        let cases: Vec<(&str, Value, &str, i64)> = vec![
            ("a watcher's control", control(Some("wanda"), &id), "watches task", -32004),
            ("an anonymous control", control(None, &id), "a control needs a known sender", -32602),
            ("a stranger's control", control(Some("mallory"), &id), "task not found", -32001),
            (
                "a control with a second part",
                from(
                    Some("alice"),
                    Some(&id),
                    json!([{"data": {"kind": "control", "action": "complete"}, "mediaType": EVENT}, {"text": "bye"}]),
                ),
                "a control must be the message's only part",
                -32602,
            ),
            (
                "two envelopes in one message",
                from(
                    Some("alice"),
                    Some(&id),
                    json!([
                        {"data": brief(json!({"name": "x"})), "mediaType": EVENT},
                        {"data": brief(json!({"description": "y"})), "mediaType": EVENT},
                    ]),
                ),
                "invalid event envelope: a message carries at most one envelope",
                -32602,
            ),
            (
                "an envelope with an unknown key",
                envelope(Some("alice"), Some(&id), json!({"kind": "task", "payload": {"name": "x"}, "extra": 1})),
                "invalid event envelope: unknown key `extra`",
                -32602,
            ),
            (
                "a non-admin's participant change",
                envelope(
                    Some("alice"),
                    Some(&id),
                    brief(json!({"participants": [{"id": "eve", "kind": "human", "role": "admin"}]})),
                ),
                "admin required to change participants",
                -32602,
            ),
            (
                "a delegator-only field on an existing task, even from this agent (a trusted delegator)",
                envelope(Some("tiny-harness"), Some(&id), brief(json!({"model": "echo"}))),
                "task envelope cannot change model",
                -32602,
            ),
            (
                "a delegator-only field on an existing task from its admin",
                envelope(Some("ada"), Some(&id), brief(json!({"lifecycle": "one-shot"}))),
                "task envelope cannot change lifecycle",
                -32602,
            ),
            (
                "bad task data",
                envelope(Some("alice"), Some(&id), brief(json!({"name": "", "colour": "red"}))),
                "invalid task extension: 2 error(s)",
                -32602,
            ),
            (
                "an anonymous task envelope",
                envelope(None, Some(&id), brief(json!({"name": "renamed"}))),
                "needs a known sender",
                -32602,
            ),
        ];
        for (case, message, why, code) in cases {
            let refused = send(&c, b, message).await.expect_err(case);
            assert!(refused.message.contains(why), "{b:?} {case}: {refused:?}");
            let expected = match (b, code) {
                (Binding::JsonRpc, code) => code,
                (Binding::Rest, -32001) => 404,
                (Binding::Rest, _) => 400,
            };
            assert_eq!(refused.code, expected, "{b:?} {case}: {refused:?}");
            unchanged_after(&h, "alice", &id, &before).await;
        }
        // The refusals are audited: the task's inbox keeps each with its reason.
        let rows = h.store().await.inbox_of(&id).await.unwrap();
        assert!(rows.iter().any(|r| r.outcome.contains("watches task")), "{rows:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delegator_only_field_from_an_untrusted_sender_opens_no_task_and_a_trusted_one_picks_the_model() {
    let h = HarnessProcess::start(HarnessOptions {
        script: Some(SLOW.into()),
        server_extra: "delegators = [\"planner\"]".into(),
        ..Default::default()
    })
    .await;
    let c = h.client();
    for b in BOTH {
        let asked = json!({"name": "n", "goal": "g", "model": "echo", "lifecycle": "one-shot"});
        let refused = send(
            &c,
            b,
            from(Some("mallory"), None, json!([{"data": brief(asked.clone()), "mediaType": EVENT}, {"text": "go"}])),
        )
        .await
        .unwrap_err();
        assert!(
            refused.message.contains("`lifecycle`, `model` are accepted only from a trusted delegator"),
            "{b:?}: {refused:?}"
        );
        let listed =
            contract_tests::rpc_as(&h.base_url, Some(("X-Participant-Id", "mallory")), "ListTasks", json!({})).await;
        assert_eq!(listed["result"]["tasks"].as_array().map(Vec::len), Some(0), "no task was opened: {listed}");

        // From a trusted delegator the brief decides the lifecycle and the model.
        let trusted = from(Some("planner"), None, json!([{"data": brief(asked), "mediaType": EVENT}, {"text": "go"}]));
        let task = sent_task(&c, b, trusted).await;
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "one-shot: {task}");
        assert_eq!(status_text(&task), "echo: go", "the brief's model answered, not the agent's (scripted): {task}");
        let unknown =
            send(&c, b, envelope(Some("planner"), None, brief(json!({"name": "n", "goal": "g", "model": "gpt-9"}))))
                .await
                .unwrap_err();
        assert!(unknown.message.contains("unknown model `gpt-9`"), "{unknown:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn slash_commands_reply_in_the_unchanged_state_and_never_reach_the_model() {
    let h = scripted().await;
    let c = h.client();
    for b in BOTH {
        // A command as a task's first message parks it.
        let first = sent_task(&c, b, text(Some("alice"), None, "/help")).await;
        assert_eq!(first["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{b:?}: {first}");
        assert_eq!(first["metadata"][format!("{NS}/status")]["substate"], "awaiting-next-message", "{first}");
        let help = status_text(&first);
        assert!(help.contains("/help") && help.contains("/status"), "{help}");
        let id = first["id"].as_str().unwrap().to_string();

        let reply = sent_task(&c, b, text(Some("alice"), Some(&id), "hello")).await;
        assert_eq!(status_text(&reply), "fine");
        let status = sent_task(&c, b, text(Some("alice"), Some(&id), "/status")).await;
        let shown = status_text(&status);
        assert_eq!(status["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        for part in
            ["TASK_STATE_INPUT_REQUIRED · awaiting-next-message", "turn: 1", "alice (reporter)", "waiting messages: 0"]
        {
            assert!(shown.contains(part), "{b:?}: {shown}");
        }
        // The reply's event: the unchanged state with {"command": "status"}.
        let events = log(&h, &id).await;
        let replied =
            events.iter().rev().find(|e| e["statusUpdate"]["metadata"]["command"] == "status").expect("a reply");
        assert_eq!(state(replied), Some("TASK_STATE_INPUT_REQUIRED"));
        // An unregistered name is an ordinary message: the model answers it.
        let ordinary = sent_task(&c, b, text(Some("alice"), Some(&id), "/nope")).await;
        assert_eq!(status_text(&ordinary), "fine", "{ordinary}");

        // Mid-turn, a command is answered while the turn runs.
        let mut stream = streaming(&c, &id, "slowly").await;
        let started = std::time::Instant::now();
        let during = sent_task(&c, b, text(Some("alice"), Some(&id), "/status")).await;
        assert_eq!(during["status"]["state"], "TASK_STATE_WORKING", "{b:?}: {during}");
        assert!(status_text(&during).contains("turn: 3"), "{}", status_text(&during));
        assert!(started.elapsed() < Duration::from_secs(6), "the command waited for the turn");
        let rest = stream.collect_all().await;
        assert_eq!(rest.last().and_then(state), Some("TASK_STATE_INPUT_REQUIRED"), "the turn ended as usual");
        let turn_reply = rest.last().unwrap();
        assert!(status_text(&turn_reply["statusUpdate"]).starts_with("one two"), "{turn_reply}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_participant_s_message_is_echoed_redacted_to_every_subscriber_on_both_bindings() {
    let h =
        HarnessProcess::start(HarnessOptions { secrets: vec!["hunter2-secret".into()], ..Default::default() }).await;
    let c = h.client();
    for b in BOTH {
        let id = shared_task(&c, b).await;
        let mut watch = match b {
            Binding::Rest => c.open_stream(&format!("/tasks/{id}:subscribe"), None, json!({})).await,
            Binding::JsonRpc => c.open_stream("", Some("SubscribeToTask"), json!({"id": id})).await,
        };
        assert_eq!(watch.status, 200);
        let sent = text(Some("ada"), Some(&id), "ada here hunter2-secret");
        let answer = sent_task(&c, b, sent.clone()).await;
        assert_eq!(status_text(&answer), "echo: ada here [REDACTED]", "the sender's answer is the reply, not its echo");
        let mut echoed = None;
        loop {
            let e = watch.next().await.expect("the subscription goes on");
            let md = &e["statusUpdate"]["metadata"][format!("{NS}/channel")];
            if md["sender"] == "ada" {
                echoed = Some(e.clone());
            }
            if status_text(&e["statusUpdate"]) == "echo: ada here [REDACTED]" {
                break;
            }
        }
        let echoed = echoed.expect("ada's message was echoed before the reply");
        let update = &echoed["statusUpdate"];
        assert_eq!(update["metadata"][format!("{NS}/channel")], json!({"channel_id": id, "sender": "ada"}));
        assert_eq!(update["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "the unchanged state");
        assert_eq!(update["status"]["message"]["messageId"], sent["messageId"]);
        assert_eq!(update["status"]["message"]["parts"][0]["text"], "ada here [REDACTED]", "redacted");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn task_envelopes_change_the_task_data_and_an_admin_the_participants() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    for b in BOTH {
        let id = shared_task(&c, b).await;
        let criteria = json!([{"text": "it works", "met": false}]);
        let renamed = envelope(
            Some("wanda"),
            Some(&id),
            brief(json!({"name": "renamed", "description": "d", "acceptance_criteria": criteria})),
        );
        let answer = sent_task(&c, b, renamed).await;
        assert!(status_text(&answer).starts_with("updated the task"), "{answer}");
        let data = &get(&h, "alice", &id).await["result"]["metadata"][format!("{NS}/task")];
        assert_eq!((data["name"].clone(), data["description"].clone()), (json!("renamed"), json!("d")), "{data}");
        assert_eq!(data["acceptance_criteria"], criteria);
        assert_eq!(data["goal"], "talk", "the rest stays");

        // Bob is not on the task, then the admin adds him: the access list follows.
        assert_eq!(get(&h, "bob", &id).await["error"]["code"], -32001);
        let mut people = data["participants"].as_array().unwrap().clone();
        people.push(json!({"id": "bob", "kind": "human", "role": "reporter"}));
        sent_task(&c, b, envelope(Some("ada"), Some(&id), brief(json!({"participants": people})))).await;
        assert_eq!(get(&h, "bob", &id).await["result"]["id"], json!(id), "bob now sees the task");

        // A status update envelope is recorded as a framed event, with its audit row.
        let update = json!({"kind": "status_update", "payload": {"taskId": "remote-7",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {"messageId": "x", "role": "ROLE_AGENT",
            "parts": [{"text": "all done"}]}}}});
        let recorded = envelope(Some("bob"), Some(&id), update);
        let answer = sent_task(&c, b, recorded.clone()).await;
        assert_eq!(answer["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "no turn: {answer}");
        let task = get(&h, "alice", &id).await["result"].clone();
        let last = task["history"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["messageId"], recorded["messageId"]);
        assert_eq!(last["parts"][0]["text"], "[status_update] task remote-7: TASK_STATE_COMPLETED: all done");
        let rows = h.store().await.inbox_of_message(recorded["messageId"].as_str().unwrap()).await.unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        let artifact = json!({"kind": "artifact_update", "payload": {"taskId": "remote-7",
            "artifact": {"artifactId": "a1", "name": "report", "parts": [{"text": "the report"}]}}});
        let recorded = envelope(Some("bob"), Some(&id), artifact);
        sent_task(&c, b, recorded.clone()).await;
        let task = get(&h, "alice", &id).await["result"].clone();
        let last = task["history"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["parts"][0]["text"], "[artifact_update] task remote-7: artifact report: the report");
        assert_eq!(last["metadata"][format!("{NS}/event")]["kind"], "artifact_update");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_brief_opens_its_task_and_a_brief_alone_calls_no_model() {
    let h = HarnessProcess::start(HarnessOptions {
        server_extra: "delegators = [\"planner\"]".into(),
        ..Default::default()
    })
    .await;
    let c = h.client();
    for b in BOTH {
        let task = sent_task(
            &c,
            b,
            from(
                Some("alice"),
                None,
                json!([{"data": brief(json!({"name": "Plan", "goal": "plan a trip"})), "mediaType": EVENT}, {"text": "start"}]),
            ),
        )
        .await;
        let data = &task["metadata"][format!("{NS}/task")];
        assert_eq!((data["name"].clone(), data["goal"].clone()), (json!("Plan"), json!("plan a trip")));
        let roles: Vec<(Value, Value)> =
            data["participants"].as_array().unwrap().iter().map(|p| (p["id"].clone(), p["role"].clone())).collect();
        assert!(roles.contains(&(json!("alice"), json!("reporter"))), "the sender reports it: {roles:?}");
        assert!(roles.contains(&(json!("tiny-harness"), json!("assignee"))), "{roles:?}");
        let first = &get(&h, "alice", task["id"].as_str().unwrap()).await["result"]["history"][0];
        assert_eq!(first["parts"], json!([{"text": "start"}]), "the envelope was taken out: {first}");

        // A brief alone: a conversation parks with nothing for its model.
        let alone =
            sent_task(&c, b, envelope(Some("alice"), None, brief(json!({"name": "quiet", "goal": "wait"})))).await;
        assert_eq!(alone["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{alone}");
        assert_eq!(alone["metadata"][format!("{NS}/status")]["substate"], "awaiting-next-message");
        let id = alone["id"].as_str().unwrap();
        let history = get(&h, "alice", id).await["result"]["history"].clone();
        assert_eq!(history.as_array().map_or(0, Vec::len), 0, "no message, no reply: {history}");
        assert!(log(&h, id).await.iter().all(|e| state(e) != Some("TASK_STATE_WORKING")), "no turn ran");

        // A one-shot brief alone waits for its first message, then completes.
        let one_shot = brief(json!({"name": "once", "goal": "answer once", "lifecycle": "one-shot"}));
        let waiting = sent_task(&c, b, envelope(Some("planner"), None, one_shot)).await;
        assert_eq!(waiting["status"]["state"], "TASK_STATE_SUBMITTED", "{waiting}");
        let id = waiting["id"].as_str().unwrap();
        let done = sent_task(&c, b, text(Some("planner"), Some(id), "now")).await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        assert_eq!(status_text(&done), "echo: now");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn in_participant_mode_the_task_waits_for_its_assignee_whose_message_completes_it() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    for b in BOTH {
        let participants = json!([{"id": "bob", "kind": "agent", "role": "assignee"}]);
        let opening = envelope(
            Some("alice"),
            None,
            brief(json!({"name": "fix", "goal": "fix the sink", "participants": participants})),
        );
        let task = sent_task(&c, b, opening).await;
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task}");
        assert_eq!(task["metadata"][format!("{NS}/status")]["substate"], "awaiting-assignee");
        assert_eq!(status_text(&task), "fix the sink", "the goal is the status text");
        let id = task["id"].as_str().unwrap();

        // Another participant's message is recorded, not acted on (no model call).
        let other = sent_task(&c, b, text(Some("alice"), Some(id), "any news?")).await;
        assert_eq!(other["metadata"][format!("{NS}/status")]["substate"], "awaiting-assignee", "{other}");
        let events = log(&h, id).await;
        assert!(events.iter().all(|e| kind(e) != "artifactUpdate" && state(e) != Some("TASK_STATE_WORKING")));

        let done = sent_task(&c, b, text(Some("bob"), Some(id), "the sink is fixed")).await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        assert_eq!(status_text(&done), "the sink is fixed");
        let history = get(&h, "alice", id).await["result"]["history"].clone();
        let texts: Vec<&str> =
            history.as_array().unwrap().iter().filter_map(|m| m["parts"][0]["text"].as_str()).collect();
        assert_eq!(texts, ["any news?", "the sink is fixed", "the sink is fixed"], "{history}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_card_lists_the_commands_sorted_and_exactly_the_substates_this_build_emits() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let card: Value =
        reqwest::get(format!("{}/.well-known/agent-card.json", h.base_url)).await.unwrap().json().await.unwrap();
    let ext = |path: &str| {
        card["capabilities"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["uri"].as_str().unwrap().ends_with(path))
            .cloned()
            .unwrap()
    };
    assert_eq!(
        ext("status/v1")["params"]["substates"],
        json!([
            "awaiting-next-message",
            "awaiting-assignee",
            "awaiting-subtasks",
            "calling-tools",
            "awaiting-participant"
        ])
    );
    let commands = ext("commands/v1");
    let names: Vec<&str> =
        commands["params"]["commands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["help", "status"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_model_tells_the_participants_of_a_shared_task_apart() {
    let mock = contract_tests::openai_mock::MockOpenAi::start().await;
    let h = openai_harness(&mock, "").await;
    let c = h.client();
    let id = shared_task(&c, Binding::JsonRpc).await;
    sent_task(&c, Binding::Rest, text(Some("ada"), Some(&id), "ada joins")).await;
    let last = mock.seen().last().expect("two requests").body.clone();
    let users: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["[alice] hello all", "[ada] ada joins"], "{last}");
}

/// Durability (S5, S8, S9): the harness is SIGKILLed mid-turn while the workflow task that
/// takes a control is still running (each emit waits a second); the client retries the
/// control with its messageId after the restart. The command acknowledged before is
/// answered, the turn is cut, the task completes, each message is stored once and the log
/// has no gap.
#[tokio::test(flavor = "multi_thread")]
async fn a_control_in_flight_when_the_harness_is_sigkilled_takes_effect_once_after_the_restart() {
    let mut h = HarnessProcess::start(HarnessOptions {
        script: Some(SLOW.into()),
        env: vec![("TINY_HARNESS_FAULT_EMIT_DELAY_MS".into(), "1000".into())],
        ..Default::default()
    })
    .await;
    let c = h.client();
    let task = sent_task(&c, Binding::JsonRpc, text(Some("alice"), None, "hi")).await;
    let id = task["id"].as_str().unwrap().to_string();
    let immediately = json!({"returnImmediately": true});
    c.send(text(Some("alice"), Some(&id), "slowly"), immediately.clone()).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !log(&h, &id).await.iter().any(|e| kind(e) == "artifactUpdate") {
        assert!(std::time::Instant::now() < deadline, "the slow turn never streamed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = text(Some("alice"), Some(&id), "/status");
    let ack = c.send(status.clone(), immediately.clone()).await;
    assert!(ack["result"]["task"].is_object(), "acknowledged: {ack}");

    // The control's workflow task appends its echo, then waits; the harness dies meanwhile.
    let ctl = control(Some("alice"), &id);
    let before = log(&h, &id).await.len();
    let lost = tokio::spawn({
        let (c, ctl) = (c.clone(), ctl.clone());
        async move { c.send(ctl, json!({})).await }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !log(&h, &id)
        .await
        .iter()
        .skip(before)
        .any(|e| e["statusUpdate"]["status"]["message"]["messageId"] == ctl["messageId"])
    {
        assert!(std::time::Instant::now() < deadline, "the control was never taken");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.kill9();
    let _ = lost.await;
    h.restart().await;

    // The client retries the same control until it is answered.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let answer = loop {
        let answer = c.send(ctl.clone(), json!({})).await;
        let done = answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED";
        let ended = answer["error"]["message"].as_str().is_some_and(|m| m.contains("(TASK_STATE_COMPLETED)"));
        if done || ended {
            break answer;
        }
        assert!(std::time::Instant::now() < deadline, "the control never took effect: {answer}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let task = get(&h, "alice", &id).await["result"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{answer}");
    let history = task["history"].as_array().unwrap();
    for m in [&status, &ctl] {
        let stored = history.iter().filter(|s| s["messageId"] == m["messageId"]).count();
        assert_eq!(stored, 1, "stored once: {m}");
    }
    let events = h.store().await.events_after(&id, 0, 10_000).await.unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "no gap");
    let events: Vec<Value> = events.into_iter().map(|e| serde_json::to_value(e.event).unwrap()).collect();
    let replied = events.iter().any(|e| {
        let answered = &e["statusUpdate"]["status"]["message"]["metadata"][format!("{NS}/command")]["inReplyTo"];
        *answered == status["messageId"]
    });
    assert!(replied, "the command was answered: {events:?}");
    assert_eq!(events.last().and_then(state), Some("TASK_STATE_COMPLETED"));
    let chunks = events.iter().filter(|e| kind(e) == "artifactUpdate").count();
    assert!(chunks < 8, "the turn was cut: {chunks} chunks");
}
