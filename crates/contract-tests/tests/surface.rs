//! The A2A surface beyond the durable core (issue 3, S1, S2, S13, S14): error paths the
//! official client cannot provoke, tenant routes, card caching, capability gating, push
//! secrets at rest. Every test runs a real harness over real HTTP.

use contract_tests::webhook::{Posts, webhook, webhook_answering};
use contract_tests::{HarnessOptions, HarnessProcess, rpc_as, user_text};
use reqwest::Method;
use serde_json::{Value, json};

fn reason(answer: &Value) -> &str {
    answer["error"]["details"][0]["reason"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_non_json_body_is_content_type_not_supported_and_a_json_body_is_taken_whatever_its_type() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let http = reqwest::Client::new();
    let post = |path: &str, ct: &str, body: &str| {
        http.post(format!("{}{path}", h.base_url))
            .header("A2A-Version", "1.0")
            .header("content-type", ct)
            .body(body.to_string())
            .send()
    };
    let rpc: Value = post("/a2a/jsonrpc", "text/plain", "hello").await.unwrap().json().await.unwrap();
    assert_eq!(rpc["error"]["code"], -32005, "{rpc}");
    assert!(rpc["error"]["message"].as_str().unwrap().contains("text/plain"), "{rpc}");
    let rest = post("/a2a/rest/message:send", "application/xml", "<message/>").await.unwrap();
    assert_eq!(rest.status(), 415);
    let body: Value = rest.json().await.unwrap();
    assert_eq!(reason(&body), "CONTENT_TYPE_NOT_SUPPORTED", "{body}");

    // A JSON body is accepted whatever Content-Type it declares (CHEATSHEET §13.3).
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "nope"}}).to_string();
    let lenient: Value = post("/a2a/jsonrpc", "text/plain", &call).await.unwrap().json().await.unwrap();
    assert_eq!(lenient["error"]["code"], -32001, "{lenient}");

    // Not a request object: -32600, with the id when it could be read.
    let invalid = h.client().rpc_raw(json!({"jsonrpc": "1.0", "id": 9, "method": "GetTask"}).to_string()).await;
    assert_eq!(invalid.body["error"]["code"], -32600, "{:?}", invalid.body);
}

#[tokio::test]
async fn a2a_version_is_read_from_the_header_or_the_query_and_only_1_0_is_served() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let http = reqwest::Client::new();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}).to_string();
    let rpc = |query: &'static str, header: Option<&'static str>| {
        let mut r = http.post(format!("{}/a2a/jsonrpc{query}", h.base_url)).body(call.clone());
        if let Some(v) = header {
            r = r.header("A2A-Version", v);
        }
        async move { r.send().await.unwrap().json::<Value>().await.unwrap()["error"]["code"].clone() }
    };
    assert_eq!(rpc("?A2A-Version=1.0", None).await, -32001, "the query parameter counts");
    assert_eq!(rpc("", Some("1.0.7")).await, -32001, "a patch part is ignored");
    assert_eq!(rpc("?A2A-Version=1.0.2", None).await, -32001, "in the query too");
    // Issue 33: Major.Minor is compared, and a malformed version is refused, not read as 1.0.
    for refused in ["1.1", "1.banana", "1", "1.0.x", "1.0.0.0", "01.0a", "1..0", " 1.0 x", "v1.0"] {
        assert_eq!(rpc("", Some(refused)).await, -32009, "A2A-Version {refused:?}");
    }
    assert_eq!(rpc("?A2A-Version=1.banana", None).await, -32009, "in the query too");
    assert_eq!(rpc("", Some("0.3")).await, -32009);
    assert_eq!(rpc("", Some("")).await, -32009, "empty means 0.3");
    for version in ["2.0", "1.banana"] {
        let rest = http
            .get(format!("{}/a2a/rest/tasks/nope", h.base_url))
            .header("A2A-Version", version)
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 400, "{version}");
        let body = rest.json::<Value>().await.unwrap();
        assert_eq!(reason(&body), "VERSION_NOT_SUPPORTED", "{version}: {body}");
        assert!(body.to_string().contains(version), "the refusal names the version: {body}");
    }
    // A send with a malformed version writes nothing.
    let send = http
        .post(format!("{}/a2a/rest/message:send", h.base_url))
        .header("A2A-Version", "1.banana")
        .body(json!({"message": user_text("hi")}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(send.status(), 400);
    let store = h.store().await;
    assert!(store.task_ids().await.unwrap().is_empty() && store.inbox_count().await.unwrap() == 0, "nothing written");
}

#[tokio::test]
async fn the_card_is_served_with_cache_headers_and_revalidates_with_304() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let http = reqwest::Client::new();
    let url = format!("{}/.well-known/agent-card.json", h.base_url);
    let first = http.get(&url).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let header = |name: &str| first.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let etag = header("etag");
    assert!(etag.starts_with("W/\""), "{etag}");
    assert!(header("cache-control").contains("max-age="), "{}", header("cache-control"));
    assert!(header("last-modified").ends_with("GMT"), "{}", header("last-modified"));
    assert!(header("content-type").starts_with("application/json"));
    let card: Value = first.json().await.unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{}/a2a/jsonrpc", h.base_url));
    assert_eq!(card["supportedInterfaces"][1]["protocolBinding"], "HTTP+JSON");
    assert!(card.get("securitySchemes").is_none(), "no security scheme is declared (S2)");

    let again = http.get(&url).header("if-none-match", &etag).send().await.unwrap();
    assert_eq!(again.status(), 304);
    assert!(again.bytes().await.unwrap().is_empty());
    let stale = http.get(&url).header("if-none-match", "W/\"other\"").send().await.unwrap();
    assert_eq!(stale.status(), 200);
}

#[tokio::test]
async fn tenant_prefixed_rest_routes_serve_the_task_verbs() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let c = h.client();
    let sent = c
        .rest(Method::POST, "/acme/message:send", Some(json!({"message": user_text("tenant hello")}).to_string()))
        .await;
    assert_eq!(sent.status, 200, "{:?}", sent.body);
    let id = sent.body["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(sent.body["task"]["status"]["state"], "TASK_STATE_COMPLETED");

    let got = c.rest(Method::GET, &format!("/acme/tasks/{id}?historyLength=1"), None).await;
    assert_eq!((got.status, got.body["id"].as_str()), (200, Some(id.as_str())), "{:?}", got.body);
    assert_eq!(got.body["history"].as_array().unwrap().len(), 1);

    let listed = c.rest(Method::GET, "/acme/tasks?pageSize=5", None).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(listed.body["tasks"][0]["id"], id.as_str());
    assert_eq!(listed.body["nextPageToken"], "", "always present, empty on the last page");

    let hook = json!({"url": "https://hooks.example.com/x", "token": "t"}).to_string();
    let created = c.rest(Method::POST, &format!("/acme/tasks/{id}/pushNotificationConfigs"), Some(hook)).await;
    assert_eq!(created.status, 200, "{:?}", created.body);
    let config_id = created.body["id"].as_str().unwrap().to_string();
    let one = c.rest(Method::GET, &format!("/acme/tasks/{id}/pushNotificationConfigs/{config_id}"), None).await;
    assert_eq!(one.body["url"], "https://hooks.example.com/x");
    assert!(one.body.get("token").is_none(), "a token is write-only: {:?}", one.body);
    let deleted = c.rest(Method::DELETE, &format!("/acme/tasks/{id}/pushNotificationConfigs/{config_id}"), None).await;
    assert_eq!((deleted.status, &deleted.body), (200, &json!({})));

    let cancel = c.rest(Method::POST, &format!("/acme/tasks/{id}:cancel"), Some("{}".into())).await;
    assert_eq!((cancel.status, reason(&cancel.body)), (400, "TASK_NOT_CANCELABLE"));
    let subscribe = c.rest(Method::POST, &format!("/acme/tasks/{id}:subscribe"), None).await;
    assert_eq!((subscribe.status, reason(&subscribe.body)), (400, "UNSUPPORTED_OPERATION"));
}

#[tokio::test]
async fn without_a_push_key_push_is_off_and_every_push_call_says_so_on_both_bindings() {
    let h = HarnessProcess::start(HarnessOptions { push: false, ..Default::default() }).await;
    let c = h.client();
    let card: Value =
        reqwest::get(format!("{}/.well-known/agent-card.json", h.base_url)).await.unwrap().json().await.unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], false);

    for (method, params) in [
        ("CreateTaskPushNotificationConfig", json!({"taskId": "t", "url": "https://h.example.com"})),
        ("GetTaskPushNotificationConfig", json!({"taskId": "t", "id": "c"})),
        ("ListTaskPushNotificationConfigs", json!({"taskId": "t"})),
        ("DeleteTaskPushNotificationConfig", json!({"taskId": "t", "id": "c"})),
    ] {
        let answer = c.rpc(method, params).await;
        assert_eq!(answer["error"]["code"], -32003, "{method}: {answer}");
    }
    let rest = c.rest(Method::GET, "/tasks/t/pushNotificationConfigs", None).await;
    assert_eq!((rest.status, reason(&rest.body)), (400, "PUSH_NOTIFICATION_NOT_SUPPORTED"));

    // A config at send time is refused too, before any task exists.
    let config = json!({"taskPushNotificationConfig": {"url": "https://h.example.com"}});
    let refused = c.send(user_text("hi"), config).await;
    assert_eq!(refused["error"]["code"], -32003, "{refused}");
    assert!(h.store().await.task_ids().await.unwrap().is_empty());
}

#[tokio::test]
async fn an_extended_card_that_is_not_declared_is_unsupported_on_both_bindings() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let rpc = c.rpc("GetExtendedAgentCard", json!({})).await;
    assert_eq!(rpc["error"]["code"], -32004, "{rpc}");
    let rest = c.rest(Method::GET, "/extendedAgentCard", None).await;
    assert_eq!((rest.status, reason(&rest.body)), (400, "UNSUPPORTED_OPERATION"));
}

#[tokio::test]
async fn list_tasks_refuses_bad_values_naming_them() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    for (params, named) in [
        (json!({"pageSize": 0}), "pageSize"),
        (json!({"pageSize": 150}), "pageSize"),
        (json!({"historyLength": -1}), "historyLength"),
        (json!({"pageToken": "not-a-token"}), "pageToken"),
        (json!({"statusTimestampAfter": "yesterday"}), "statusTimestampAfter"),
        (json!({"status": "TASK_STATE_BOGUS"}), "TASK_STATE_BOGUS"),
    ] {
        let answer = c.rpc("ListTasks", params.clone()).await;
        assert_eq!(answer["error"]["code"], -32602, "{params}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(named), "{params}: {answer}");
    }
    for query in ["pageSize=abc", "pageSize=101", "includeArtifacts=maybe", "status=TASK_STATE_BOGUS"] {
        let answer = c.rest(Method::GET, &format!("/tasks?{query}"), None).await;
        assert_eq!((answer.status, reason(&answer.body)), (400, "INVALID_PARAMS"), "{query}: {:?}", answer.body);
    }
    let empty = c.rpc("ListTasks", json!({})).await;
    assert_eq!(empty["result"], json!({"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}));
}

#[tokio::test]
async fn push_tokens_and_credentials_are_encrypted_at_rest_and_never_read_back() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let c = h.client();
    let task = c.send(user_text("hi"), json!({})).await;
    let id = task["result"]["task"]["id"].as_str().unwrap().to_string();
    let config = json!({"taskId": id, "url": "https://hooks.example.com/a2a", "token": "tok-plain-7f3a",
                        "authentication": {"scheme": "Bearer", "credentials": "cred-plain-9c1d"}});
    let created = c.rpc("CreateTaskPushNotificationConfig", config).await;
    let config_id = created["result"]["id"].as_str().unwrap().to_string();
    // Issue 34: write-only. No answer carries the token or the credentials; the scheme shows.
    let got = c.rpc("GetTaskPushNotificationConfig", json!({"taskId": id, "id": config_id})).await;
    let listed = c.rpc("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    let rest = c.rest(Method::GET, &format!("/tasks/{id}/pushNotificationConfigs"), None).await.body;
    assert_eq!(got["result"]["authentication"]["scheme"], "Bearer", "{got}");
    assert_eq!(got["result"]["url"], "https://hooks.example.com/a2a", "{got}");
    for answer in [&created, &got, &listed, &rest] {
        let text = answer.to_string();
        assert!(!text.contains("tok-plain-7f3a") && !text.contains("cred-plain-9c1d"), "a secret was read: {text}");
    }
    // (A delivery still opens them: pushes carry the token and credentials, tested below.)

    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(h.data_dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("harness.db") {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("hooks.example.com"), "the store was read (the URL is stored in the clear)");
    assert!(!text.contains("tok-plain-7f3a") && !text.contains("cred-plain-9c1d"), "a secret is stored in the clear");
    assert!(!h.log().contains("tok-plain-7f3a"), "a token reached the log");

    let missing = c.rpc("GetTaskPushNotificationConfig", json!({"taskId": id, "id": "nope"})).await;
    assert_eq!(missing["error"]["code"], -32001, "{missing}");
}

/// The kind and state of each event posted to `hook` for `task`, waiting up to 10 s for
/// `count` of them.
async fn pushed(posts: &Posts, hook: &str, task: &str, count: usize) -> Vec<(String, String)> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let seen: Vec<(String, String)> = posts
            .lock()
            .unwrap()
            .iter()
            .filter(|(h, ..)| h == hook)
            .map(|(.., body)| body)
            .filter(|body| {
                let id = body.get("task").map(|t| &t["id"]).or_else(|| body.get("statusUpdate").map(|u| &u["taskId"]));
                id.and_then(Value::as_str) == Some(task)
            })
            .map(|body| {
                let kind = body.as_object().and_then(|o| o.keys().next().cloned()).unwrap_or_default();
                let status = body.get("task").or_else(|| body.get("statusUpdate")).map(|v| &v["status"]["state"]);
                (kind, status.and_then(Value::as_str).unwrap_or_default().to_string())
            })
            .collect();
        if seen.len() >= count || tokio::time::Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// S14: delivery is at-least-once across a crash. The webhook is down while a turn's events
/// are pushed; the harness is killed with SIGKILL while it still retries them; once it is
/// back (the webhook up again) it posts what its outbox still held, in log order, and the
/// outbox empties.
#[tokio::test]
async fn pushes_a_killed_harness_had_not_delivered_are_posted_after_its_restart() {
    let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, posts) = webhook_answering(open.clone()).await;
    let mut h = HarnessProcess::start(HarnessOptions::default()).await;
    let config = json!({"taskPushNotificationConfig": {"url": format!("{url}/down"), "token": "tok-down"}});
    let r = h.client().send(user_text("while the hook is down"), config).await;
    let task = r["result"]["task"]["id"].as_str().expect("a task").to_string();
    assert_eq!(r["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    assert!(posts.lock().unwrap().is_empty(), "the hook took nothing yet");

    h.restart().await;
    open.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = pushed(&posts, "down", &task, 3).await;
    let expected = [
        ("task", "TASK_STATE_SUBMITTED"),
        ("statusUpdate", "TASK_STATE_WORKING"),
        ("statusUpdate", "TASK_STATE_INPUT_REQUIRED"),
    ];
    assert_eq!(seen, expected.map(|(k, s)| (k.to_string(), s.to_string())), "every event, in log order");
    assert!(posts.lock().unwrap().iter().all(|p| p.1 == "tok-down"), "with the config's token");
    let store = h.store().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.pending_pushes().await.unwrap() > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(store.pending_pushes().await.unwrap(), 0, "delivered pushes leave the outbox");
}

/// S14: the Task and every status update reach each push config of the task, in log order,
/// with the config's token and authentication; a config sent with the first message, one
/// created later and one deleted each take effect from the next event.
#[tokio::test]
async fn pushed_events_reach_each_config_of_the_task_in_order_from_the_next_event_on() {
    let (url, posts) = webhook().await;
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let (submitted, working, parked) = (
        ("task".to_string(), "TASK_STATE_SUBMITTED".to_string()),
        ("statusUpdate".to_string(), "TASK_STATE_WORKING".to_string()),
        ("statusUpdate".to_string(), "TASK_STATE_INPUT_REQUIRED".to_string()),
    );

    // A task with no config: nothing is pushed for its first turn.
    let first = c.send(user_text("one"), json!({})).await;
    let plain = first["result"]["task"]["id"].as_str().unwrap().to_string();
    // A config created now takes effect from the next turn, with its token and credentials.
    let hook = json!({"taskId": plain, "url": format!("{url}/later"), "token": "tok-later",
                      "authentication": {"scheme": "Bearer", "credentials": "cred-later"}});
    let created = c.rpc("CreateTaskPushNotificationConfig", hook).await;
    let config_id = created["result"]["id"].as_str().unwrap().to_string();
    let again = json!({"messageId": "m-two", "role": "ROLE_USER", "parts": [{"text": "two"}], "taskId": plain});
    c.send(again, json!({})).await;
    assert_eq!(pushed(&posts, "later", &plain, 2).await, vec![working.clone(), parked.clone()]);
    let (_, token, auth, _) = posts.lock().unwrap()[0].clone();
    assert_eq!((token.as_str(), auth.as_str()), ("tok-later", "Bearer cred-later"));

    // A config sent with a task's first message sees the task from its Task event on.
    let config = json!({"taskPushNotificationConfig": {"url": format!("{url}/early"), "token": "tok-early"}});
    let early = c.send(user_text("three"), config).await;
    let early = early["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(pushed(&posts, "early", &early, 3).await, vec![submitted, working.clone(), parked.clone()]);
    assert!(posts.lock().unwrap().iter().filter(|p| p.0 == "early").all(|p| p.1 == "tok-early"));

    // A deleted config gets nothing more; the other task's config still does.
    c.rpc("DeleteTaskPushNotificationConfig", json!({"taskId": plain, "id": config_id})).await;
    let last = json!({"messageId": "m-four", "role": "ROLE_USER", "parts": [{"text": "four"}], "taskId": plain});
    c.send(last, json!({})).await;
    let more = json!({"messageId": "m-five", "role": "ROLE_USER", "parts": [{"text": "five"}], "taskId": early});
    c.send(more, json!({})).await;
    assert_eq!(pushed(&posts, "early", &early, 5).await.len(), 5);
    // Both turns ended before this: a post for the deleted config would have been queued
    // with the early task's, which have arrived.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(pushed(&posts, "later", &plain, 2).await.len(), 2, "a deleted config was posted to");
}

#[tokio::test]
async fn a_malformed_push_key_stops_the_start_with_a_config_error_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(contract_tests::harness_binary())
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(dir.path())
        .env("TINY_HARNESS_PUSH_KEY", "c2hvcnQ=")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("TINY_HARNESS_PUSH_KEY") && stderr.contains("5 bytes, not 32"), "{stderr}");
    assert!(!dir.path().join("harness.db").exists(), "nothing was opened before the key was checked");
}

#[tokio::test]
async fn a_plain_first_message_gets_the_default_brief_in_the_task_extension_metadata() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let key = "io.github.madarauchiha-314.tiny-harness/task";
    let events = h.client().stream_message(user_text("Plan the offsite\nfor twelve people in May")).await;
    let brief = &events[0]["task"]["metadata"][key];
    assert_eq!(brief["name"], "Plan the offsite", "{}", events[0]);
    assert_eq!(brief["goal"], "Plan the offsite\nfor twelve people in May");
    assert_eq!(brief["participants"], json!([{"id": "tiny-harness", "kind": "agent", "role": "assignee"}]));

    let long = "x".repeat(80);
    let params = json!({"message": user_text(&long)});
    let sent = rpc_as(&h.base_url, Some(("X-Participant-Id", "alice")), "SendMessage", params).await;
    let task = &sent["result"]["task"];
    let brief = &task["metadata"][key];
    assert_eq!(brief["name"].as_str().unwrap().chars().count(), 60, "{task}");
    assert_eq!(brief["participants"][0], json!({"id": "alice", "kind": "human", "role": "reporter"}));
    // The status substate lives beside it; neither replaces the other.
    assert_eq!(task["metadata"]["io.github.madarauchiha-314.tiny-harness/status"]["substate"], "awaiting-next-message");
}

/// Issue 16 item 1: clients that join the interface URL and "/" reach the JSON-RPC
/// operations; every request that reaches no operation gets a JSON body in its binding's
/// error shape (a JSON-RPC error at the JSON-RPC URL, a `google.rpc.Status` under the REST
/// base and elsewhere), never an empty 404 or 405.
#[tokio::test]
async fn the_json_rpc_url_takes_a_trailing_slash_and_no_request_gets_an_empty_error() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let http = reqwest::Client::new();
    let at = |path: &str| format!("{}{path}", h.base_url);
    let answer = |r: reqwest::Response| async move {
        let status = r.status().as_u16();
        let allow = r.headers().get("allow").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let ct = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let text = r.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text:?}"));
        assert!(ct.starts_with("application/json"), "{status} {ct}");
        (status, allow, body)
    };
    // The trailing-slash URL is the JSON-RPC URL.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_text("slash")}});
    let sent = http.post(at("/a2a/jsonrpc/")).header("A2A-Version", "1.0").json(&call).send().await.unwrap();
    let (status, _, body) = answer(sent).await;
    assert_eq!(status, 200);
    let task_id = body["result"]["task"]["id"].as_str().unwrap_or_else(|| panic!("{body}")).to_string();
    // Not POSTed: 405, Allow: POST, a JSON-RPC error that says how to call.
    for path in ["/a2a/jsonrpc", "/a2a/jsonrpc/"] {
        let (status, allow, body) = answer(http.get(at(path)).send().await.unwrap()).await;
        assert_eq!((status, allow.as_str()), (405, "POST"), "{path}: {body}");
        assert_eq!((body["jsonrpc"].as_str(), body["error"]["code"].as_i64()), (Some("2.0"), Some(-32600)), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("POST"), "{body}");
    }
    // Below the JSON-RPC URL: 404 as a JSON-RPC error naming the path.
    let (status, _, body) = answer(http.post(at("/a2a/jsonrpc/v1/rpc")).json(&call).send().await.unwrap()).await;
    assert_eq!((status, body["error"]["code"].as_i64()), (404, Some(-32601)), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("/a2a/jsonrpc/v1/rpc"), "{body}");
    // The REST base, with and without the slash, and an unknown REST path: google.rpc.Status.
    for path in ["/a2a/rest", "/a2a/rest/", "/a2a/rest/no/such/thing"] {
        let (status, _, body) = answer(http.get(at(path)).header("A2A-Version", "1.0").send().await.unwrap()).await;
        assert_eq!((status, body["error"]["status"].as_str()), (404, Some("NOT_FOUND")), "{path}: {body}");
    }
    // A REST operation's path with a trailing slash is the operation.
    let got = http.get(at(&format!("/a2a/rest/tasks/{task_id}/"))).header("A2A-Version", "1.0").send().await.unwrap();
    let (status, _, body) = answer(got).await;
    assert_eq!((status, body["id"].as_str()), (200, Some(task_id.as_str())), "{body}");
    // Outside the A2A paths: a JSON 404 naming the request.
    let (status, _, body) = answer(http.get(at("/no/such/page")).send().await.unwrap()).await;
    assert_eq!((status, body["error"]["status"].as_str()), (404, Some("NOT_FOUND")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("GET /no/such/page"), "{body}");
}

/// S13, issue 31: GetTask of an ended task is answered from the bytes kept for it, and the
/// answer is the task as the store says it on both bindings, whoever asks and however often:
/// the JSON-RPC envelope names the caller's id, `historyLength` trims the kept answer.
#[tokio::test]
async fn an_ended_tasks_kept_answer_is_the_same_task_on_both_bindings_and_history_length_trims_it() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();
    let first = c.send(user_text("one"), json!({})).await;
    let id = first["result"]["task"]["id"].as_str().expect("task id").to_string();
    let mut second = user_text("two");
    second["taskId"] = json!(id);
    c.send(second, json!({})).await;
    let canceled = c.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");

    let get = |rpc_id: Value, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": rpc_id, "method": "GetTask", "params": params}).to_string();
        let c = c.clone();
        async move { c.rpc_raw(body).await }
    };
    // The first read fills what is kept; the next ones are served from it.
    let reads = [get(json!("first"), json!({"id": id})).await, get(json!(7), json!({"id": id})).await];
    let again = get(json!("third"), json!({"id": id})).await;
    for (answer, rpc_id) in reads.iter().chain([&again]).zip([json!("first"), json!(7), json!("third")]) {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.content_type, "application/json");
        assert_eq!(answer.body["jsonrpc"], "2.0", "{:?}", answer.body);
        assert_eq!(answer.body["id"], rpc_id, "each answer names its own request");
    }
    let task = &reads[0].body["result"];
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task}");
    let texts: Vec<&str> =
        task["history"].as_array().unwrap().iter().map(|m| m["parts"][0]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(texts.len(), 4, "two messages and their two replies: {task}");
    assert_eq!((texts[0], texts[2]), ("one", "two"));
    assert_eq!(&reads[1].body["result"], task, "a kept answer is the task as first read");
    assert_eq!(&again.body["result"], task);

    let rest = c.rest(Method::GET, &format!("/tasks/{id}"), None).await;
    assert_eq!(rest.status, 200);
    assert_eq!(rest.content_type, "application/json");
    assert_eq!(&rest.body, task, "the HTTP+JSON binding serves the same task");

    // historyLength on a kept answer: the newest messages only, on both bindings.
    let trimmed = get(json!(8), json!({"id": id, "historyLength": 1})).await.body;
    assert_eq!(trimmed["result"]["history"], json!([task["history"][3]]), "{trimmed}");
    assert_eq!(trimmed["result"]["status"], task["status"]);
    let rest_trimmed = c.rest(Method::GET, &format!("/tasks/{id}?historyLength=2"), None).await.body;
    assert_eq!(rest_trimmed["history"], json!([task["history"][2], task["history"][3]]), "{rest_trimmed}");
    // And the whole answer is still whole afterwards.
    assert_eq!(get(json!(9), json!({"id": id})).await.body["result"], *task);
}
