//! Issue 28: what a client that knows only A2A sees. Such a client sends no participant,
//! reuses messageIds as the conformance kit does (one id per scenario, the same text), and
//! parses camelCase only. Over real HTTP on both bindings:
//! - anonymous first messages with one messageId each open a task of their own (the
//!   exactly-once rule of first messages is an identified sender's, docs/event-log.md);
//! - an inline push config on such a message is applied: its webhook is posted;
//! - no key of any response of a plain conversation is snake_case (send, stream, get, list,
//!   cancel, subscribe, push configs and push payloads);
//! - a command's reply message carries S9's top-level `command`.

use contract_tests::webhook::{Posts, webhook};
use contract_tests::{A2AClient, HarnessOptions, HarnessProcess, rpc_as, user_text};
use reqwest::Method;
use serde_json::{Value, json};

/// The JSON-RPC result (or REST body) of a blocking SendMessage on `binding`.
async fn send_on(c: &A2AClient, binding: &str, params: Value) -> Value {
    match binding {
        "jsonrpc" => {
            let r = c.rpc("SendMessage", params).await;
            r.get("result").cloned().unwrap_or_else(|| panic!("no result: {r}"))
        }
        _ => {
            let r = c.rest(Method::POST, "/message:send", Some(params.to_string())).await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            r.body
        }
    }
}

#[tokio::test]
async fn anonymous_first_messages_with_one_message_id_each_open_their_own_task() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let c = h.client();
    for binding in ["jsonrpc", "rest"] {
        let message = json!({"messageId": format!("tck-complete-task-{binding}"), "role": "ROLE_USER",
            "parts": [{"text": "Hello"}]});
        let mut ids = Vec::new();
        for _ in 0..3 {
            let answer = send_on(&c, binding, json!({"message": message})).await;
            assert_eq!(answer["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{binding}: {answer}");
            ids.push(answer["task"]["id"].as_str().unwrap().to_string());
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3, "{binding}: three tasks, not one answered three times: {ids:?}");
        // Each task ran its own turn: its history is the message and its own reply.
        let store = h.store().await;
        for id in &ids {
            let history = store.history(id, i64::MAX, None).await.unwrap();
            assert_eq!(history.iter().map(|m| m.text()).collect::<Vec<_>>(), ["Hello", "echo: Hello"], "{id}");
        }
    }
}

/// The states posted to `hook` for `task`, waiting until one is COMPLETED (30 s at most).
async fn posted_until_completed(posts: &Posts, hook: &str, task: &str) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let states: Vec<String> = posts
            .lock()
            .unwrap()
            .iter()
            .filter(|(h, _, _, body)| h == hook && body.to_string().contains(task))
            .filter_map(|(_, _, _, body)| {
                let event = body.get("task").or_else(|| body.get("statusUpdate"))?;
                event["status"]["state"].as_str().map(String::from)
            })
            .collect();
        if states.iter().any(|s| s == "TASK_STATE_COMPLETED") || tokio::time::Instant::now() > deadline {
            return states;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_inline_push_config_on_a_reused_message_id_gets_its_webhook_posted() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let c = h.client();
    let (url, posts) = webhook().await;
    for binding in ["jsonrpc", "rest"] {
        let message = json!({"messageId": format!("tck-push-{binding}"), "role": "ROLE_USER",
            "parts": [{"text": "push me"}]});
        // The id's first use has no config; its second carries one, as the kit's push checks do.
        let plain = send_on(&c, binding, json!({"message": message})).await;
        let hook = format!("hook-{binding}");
        let config = json!({"url": format!("{url}/{hook}"), "token": "tok-1"});
        let configured =
            send_on(&c, binding, json!({"message": message, "configuration": {"taskPushNotificationConfig": config}}))
                .await;
        let task = configured["task"]["id"].as_str().unwrap().to_string();
        assert_ne!(plain["task"]["id"], json!(task), "{binding}: a task of its own");
        let states = posted_until_completed(&posts, &hook, &task).await;
        assert_eq!(states.first().map(String::as_str), Some("TASK_STATE_SUBMITTED"), "{binding}: {states:?}");
        assert!(states.iter().any(|s| s == "TASK_STATE_COMPLETED"), "{binding}: {states:?}");
        let tokens: Vec<String> = posts.lock().unwrap().iter().filter(|p| p.0 == hook).map(|p| p.1.clone()).collect();
        assert!(tokens.iter().all(|t| t == "tok-1"), "{tokens:?}");
        // The first task has no config: nothing was posted for it.
        let first = plain["task"]["id"].as_str().unwrap();
        assert!(!posts.lock().unwrap().iter().any(|p| p.3.to_string().contains(first)), "{binding}");
    }
}

#[tokio::test]
async fn an_identified_retry_with_an_inline_push_config_configures_the_first_task_once() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let (url, _posts) = webhook().await;
    let alice = Some(("X-Participant-Id", "alice"));
    let message = user_text("hello");
    let config = json!({"url": format!("{url}/retry"), "token": "tok-2"});
    let params = json!({"message": message, "configuration": {"taskPushNotificationConfig": config}});
    let a = rpc_as(&h.base_url, alice, "SendMessage", params.clone()).await;
    let b = rpc_as(&h.base_url, alice, "SendMessage", params).await;
    let task = a["result"]["task"]["id"].as_str().unwrap();
    assert_eq!(b["result"]["task"]["id"], task, "the retry finds the first task: {b}");
    let configs = rpc_as(&h.base_url, alice, "ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
    let configs = configs["result"]["configs"].as_array().cloned().unwrap_or_default();
    assert_eq!(configs.len(), 1, "one config for one webhook, not one per attempt: {configs:?}");
    assert_eq!(configs[0]["url"], format!("{url}/retry"));
}

/// A blocking SendMessage over HTTP+JSON as participant `who` (`None`: anonymous).
async fn rest_send_as(base: &str, who: Option<&str>, params: &Value) -> Value {
    let mut r = reqwest::Client::new().post(format!("{base}/a2a/rest/message:send")).header("A2A-Version", "1.0");
    if let Some(who) = who {
        r = r.header("X-Participant-Id", who);
    }
    r.body(params.to_string()).send().await.unwrap().json().await.unwrap()
}

/// An identified sender's retried first message finds its task on both bindings; the same id
/// with other content is refused naming only the sender's own task; another participant and
/// an anonymous client reusing the id open tasks of their own and never learn of hers.
#[tokio::test]
async fn an_identified_senders_first_message_is_exactly_once_and_no_error_names_anothers_task() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let base = h.base_url.as_str();
    let rpc_send = |who: Option<&'static str>, params: Value| async move {
        let r = rpc_as(base, who.map(|w| ("X-Participant-Id", w)), "SendMessage", params).await;
        r.get("result").cloned().unwrap_or(r)
    };
    for binding in ["jsonrpc", "rest"] {
        let send = |who: Option<&'static str>, params: Value| async move {
            match binding {
                "jsonrpc" => rpc_send(who, params).await,
                _ => rest_send_as(base, who, &params).await,
            }
        };
        let message = json!({"messageId": format!("shared-{binding}"), "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        let first = send(Some("alice"), json!({"message": message})).await;
        let task = first["task"]["id"].as_str().unwrap_or_else(|| panic!("{binding}: {first}")).to_string();
        let retry = send(Some("alice"), json!({"message": message})).await;
        assert_eq!(retry["task"]["id"], task.as_str(), "{binding}: the retry finds her task: {retry}");
        let mut other = message.clone();
        other["parts"] = json!([{"text": "something else"}]);
        let refused = send(Some("alice"), json!({"message": other})).await;
        let text = refused.to_string();
        assert!(text.contains("already used") && text.contains(&task), "{binding}: names her own task: {text}");
        // Bob's first use of the id opens his own task; his second, with other text, is
        // refused naming his task, never hers.
        let bobs = send(Some("bob"), json!({"message": message})).await;
        let bobs = bobs["task"]["id"].as_str().unwrap_or_else(|| panic!("{binding}: {bobs}")).to_string();
        assert_ne!(bobs, task, "{binding}: a task of his own");
        let refused = send(Some("bob"), json!({"message": other})).await.to_string();
        assert!(refused.contains("already used") && refused.contains(&bobs), "{binding}: {refused}");
        assert!(!refused.contains(&task), "{binding}: bob learned her task: {refused}");
        // An anonymous client's first messages each open a task, whatever their text.
        for params in [json!({"message": message}), json!({"message": other})] {
            let theirs = send(None, params).await;
            let id = theirs["task"]["id"].as_str().unwrap_or_else(|| panic!("{binding}: {theirs}"));
            assert!(id != task && id != bobs, "{binding}: a task of its own");
            assert!(!theirs.to_string().contains(&task), "{binding}: learned her task: {theirs}");
        }
    }
    let store = h.store().await;
    let history = |id: String| {
        let store = store.clone();
        async move { store.history(&id, i64::MAX, None).await.unwrap().len() }
    };
    let ids = store.task_ids().await.unwrap();
    assert_eq!(ids.len(), 2 * 4, "on each binding: alice's, bob's and two anonymous tasks");
    for id in ids {
        assert_eq!(history(id).await, 2, "one turn each");
    }
}

/// Every key in `value` that is snake_case (holds an `_`), with its path.
fn snake_keys(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let here = format!("{path}.{k}");
                if k.contains('_') {
                    out.push(here.clone());
                }
                snake_keys(v, &here, out);
            }
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| snake_keys(v, &format!("{path}[{i}]"), out)),
        _ => {}
    }
}

#[tokio::test]
async fn no_response_to_a_plain_conversation_carries_a_snake_case_key() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let (url, posts) = webhook().await;
    let mut seen: Vec<(String, Value)> = Vec::new();
    for binding in ["jsonrpc", "rest"] {
        let rpc = binding == "jsonrpc";
        let config = json!({"url": format!("{url}/snake-{binding}"), "token": "tok-3"});
        let first = json!({"message": user_text("hello there"),
            "configuration": {"taskPushNotificationConfig": config}});
        let answer = send_on(&c, binding, first).await;
        let task = answer["task"]["id"].as_str().unwrap().to_string();
        seen.push((format!("{binding} send"), answer));
        // A follow-up streamed, and a command (a plain client may send `/help`).
        let mut next = user_text("and again");
        next["taskId"] = json!(task);
        let stream = c.open_stream("/message:stream", rpc.then_some("SendStreamingMessage"), json!({"message": next}));
        for event in stream.await.collect_all().await {
            seen.push((format!("{binding} stream"), event));
        }
        let mut help = user_text("/help");
        help["taskId"] = json!(task);
        let helped = send_on(&c, binding, json!({"message": help})).await;
        let reply = &helped["task"]["status"]["message"];
        assert_eq!(reply["metadata"]["command"], "help", "S9: top-level `command` on the reply: {helped}");
        seen.push((format!("{binding} command"), helped));
        // A subscriber attached while the conversation is parked sees the cancel end it.
        let subscribe_path = format!("/tasks/{task}:subscribe");
        let mut subscriber =
            c.open_stream(&subscribe_path, rpc.then_some("SubscribeToTask"), json!({"id": task})).await;
        let replayed = subscriber.next().await.expect("the replay starts with the Task");
        seen.push((format!("{binding} subscribe"), replayed));
        let (get, list, push_list, cancel) = if rpc {
            (
                c.rpc("GetTask", json!({"id": task})).await,
                c.rpc("ListTasks", json!({"includeArtifacts": true})).await,
                c.rpc("ListTaskPushNotificationConfigs", json!({"taskId": task})).await,
                c.rpc("CancelTask", json!({"id": task})).await,
            )
        } else {
            (
                c.rest(Method::GET, &format!("/tasks/{task}"), None).await.body,
                c.rest(Method::GET, "/tasks?includeArtifacts=true", None).await.body,
                c.rest(Method::GET, &format!("/tasks/{task}/pushNotificationConfigs"), None).await.body,
                c.rest(Method::POST, &format!("/tasks/{task}:cancel"), Some("{}".into())).await.body,
            )
        };
        assert_eq!(cancel.get("result").unwrap_or(&cancel)["status"]["state"], "TASK_STATE_CANCELED", "{cancel}");
        for (what, v) in [("get", get), ("list", list), ("push configs", push_list), ("cancel", cancel)] {
            assert!(v.get("error").is_none(), "{binding} {what}: {v}");
            seen.push((format!("{binding} {what}"), v));
        }
        for event in subscriber.collect_all().await {
            seen.push((format!("{binding} subscribe"), event));
        }
        let hook = format!("snake-{binding}");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        while !posts.lock().unwrap().iter().any(|p| p.0 == hook && p.3.to_string().contains("TASK_STATE_CANCELED")) {
            assert!(tokio::time::Instant::now() < deadline, "{binding}: no CANCELED push");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    for (hook, _, _, body) in posts.lock().unwrap().iter() {
        seen.push((format!("push to {hook}"), body.clone()));
    }
    assert!(seen.len() > 20, "the walk saw the conversation: {}", seen.len());
    // The replies were marked with the message they answer, camelCase.
    assert!(seen.iter().any(|(_, v)| v.to_string().contains("inReplyTo")), "reply marks were seen");
    let mut found = Vec::new();
    for (what, v) in &seen {
        let mut keys = Vec::new();
        snake_keys(v, "", &mut keys);
        found.extend(keys.into_iter().map(|k| format!("{what}: {k}")));
    }
    assert!(found.is_empty(), "snake_case keys in responses to a plain client: {found:#?}");
}
