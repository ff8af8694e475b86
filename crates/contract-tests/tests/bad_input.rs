//! Bad input gets the A2A error the cheatsheet names, with a message saying what was wrong,
//! and nothing is written for a refused request except its audit row.

use contract_tests::{HarnessOptions, HarnessProcess, rpc_as, user_text};
use serde_json::json;

#[tokio::test]
async fn malformed_json_missing_message_empty_parts_and_unknown_task_are_refused_and_write_only_audit_rows() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let c = h.client();

    let parse = c.rpc_raw("{not json".into()).await;
    assert_eq!(parse.body["error"]["code"], -32700, "{:?}", parse.body);
    assert_eq!(parse.body["id"], serde_json::Value::Null);
    let rest_parse = c.rest(reqwest::Method::POST, "/message:send", Some("{not json".into())).await;
    assert_eq!(rest_parse.status, 400);
    assert_eq!(rest_parse.body["error"]["status"], "INVALID_ARGUMENT");
    assert!(rest_parse.content_type.starts_with("application/json"));

    let missing = c.rpc("SendMessage", json!({})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(missing["error"]["message"].as_str().unwrap().contains("message"), "{missing}");

    let mut empty = user_text("x");
    empty["parts"] = json!([]);
    let empty_parts = c.rpc("SendMessage", json!({"message": empty})).await;
    assert_eq!(empty_parts["error"]["code"], -32602, "{empty_parts}");
    assert!(empty_parts["error"]["message"].as_str().unwrap().contains("message.parts"), "{empty_parts}");
    assert_eq!(empty_parts["error"]["data"][1]["fieldViolations"][0]["field"], "message.parts");

    let mut orphan = user_text("who are you");
    orphan["taskId"] = json!("no-such-task");
    let unknown = c.rpc("SendMessage", json!({"message": orphan})).await;
    assert_eq!(unknown["error"]["code"], -32001, "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("no-such-task"));
    let rest_unknown = c.rest(reqwest::Method::GET, "/tasks/no-such-task", None).await;
    assert_eq!(rest_unknown.status, 404);
    assert_eq!(rest_unknown.body["error"]["details"][0]["reason"], "TASK_NOT_FOUND");

    let no_method = c.rpc("message/send", json!({})).await;
    assert_eq!(no_method["error"]["code"], -32601, "{no_method}");
    let no_version = reqwest::Client::new()
        .post(format!("{}/a2a/jsonrpc", h.base_url))
        .body(json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}}).to_string())
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(no_version["error"]["code"], -32009, "{no_version}");

    // Nothing but audit rows: no task, no event; one refused row per request with a message.
    let store = h.store().await;
    assert!(store.task_ids().await.unwrap().is_empty());
    assert_eq!(store.inbox_count().await.unwrap(), 2);
    let refused = store.inbox_of("no-such-task").await.unwrap();
    assert_eq!(refused.len(), 1);
    assert!(refused[0].outcome.starts_with("refused: task not found"), "{}", refused[0].outcome);
}

#[tokio::test]
async fn a_request_naming_an_extension_the_card_does_not_advertise_is_refused_and_creates_no_task() {
    let h = HarnessProcess::start(HarnessOptions::default()).await;
    let card: serde_json::Value =
        reqwest::get(format!("{}/.well-known/agent-card.json", h.base_url)).await.unwrap().json().await.unwrap();
    let unknown = "https://example.test/ext/unknown/v1";
    assert!(!card.to_string().contains(unknown));
    let padded = format!(" {unknown} ");
    let params = json!({"message": user_text("hi")});
    let rpc = rpc_as(&h.base_url, Some(("A2A-Extensions", &padded)), "SendMessage", params).await;
    assert_eq!(rpc["error"]["code"], -32004, "{rpc}");
    assert!(rpc["error"]["message"].as_str().unwrap().contains(unknown), "{rpc}");
    let rest = reqwest::Client::new()
        .post(format!("{}/a2a/rest/message:send", h.base_url))
        .header("A2A-Version", "1.0")
        .header("A2A-Extensions", unknown)
        .body(json!({"message": user_text("hi")}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let store = h.store().await;
    assert!(store.task_ids().await.unwrap().is_empty(), "S3: no task was created");
    assert_eq!(store.inbox_count().await.unwrap(), 0, "refused before any work");
}

/// Calls `method` (SendMessage or CreateTaskPushNotificationConfig) on `binding` ("jsonrpc"
/// or "rest"); returns the error's code (JSON-RPC) or HTTP status (REST), 0 when it was
/// taken, and the answer's text.
async fn refusal(
    c: &contract_tests::A2AClient,
    binding: &str,
    method: &str,
    params: serde_json::Value,
) -> (i64, String) {
    if binding == "jsonrpc" {
        let r = c.rpc(method, params).await;
        return (r["error"]["code"].as_i64().unwrap_or(0), r.to_string());
    }
    let (verb, path) = match method {
        "SendMessage" => (reqwest::Method::POST, "/message:send".to_string()),
        _ => (reqwest::Method::POST, format!("/tasks/{}/pushNotificationConfigs", params["taskId"].as_str().unwrap())),
    };
    let r = c.rest(verb, &path, Some(params.to_string())).await;
    let code = if (200..300).contains(&r.status) { 0 } else { i64::from(r.status) };
    (code, r.body.to_string())
}

/// Issue 33, points 1 and 2, on both bindings: a message over `agent.max_message_parts` and
/// a file part whose `raw` is not base64 are refused up front naming what was wrong, and open
/// nothing (no task, no event); a message at the limit and well-formed base64 are taken.
#[tokio::test]
async fn too_many_parts_and_raw_bytes_that_are_not_base64_are_refused_up_front_on_both_bindings() {
    let h = HarnessProcess::start(HarnessOptions { lifecycle: "one-shot", ..Default::default() }).await;
    let c = h.client();
    let store = h.store().await;
    for binding in ["jsonrpc", "rest"] {
        let refused_code = if binding == "jsonrpc" { -32602 } else { 400 };
        let before = store.task_ids().await.unwrap().len();
        let mut many = user_text("x");
        many["parts"] = json!((0..10_000).map(|i| json!({"text": format!("w{i} ")})).collect::<Vec<_>>());
        let (code, text) = refusal(&c, binding, "SendMessage", json!({"message": many})).await;
        assert_eq!(code, refused_code, "{binding}: {}", &text[..text.len().min(400)]);
        assert!(text.contains("10000 parts") && text.contains("agent.max_message_parts"), "{binding}: {text}");
        for raw in ["not base64!", "aGk===", "a"] {
            let mut bad = user_text("see the file");
            bad["parts"] =
                json!([{"text": "see"}, {"raw": raw, "filename": "f.bin", "mediaType": "application/octet-stream"}]);
            let (code, text) = refusal(&c, binding, "SendMessage", json!({"message": bad})).await;
            assert_eq!(code, refused_code, "{binding} {raw:?}: {text}");
            assert!(text.contains("message.parts[1].raw") && text.contains("base64"), "{binding} {raw:?}: {text}");
        }
        assert_eq!(store.task_ids().await.unwrap().len(), before, "{binding}: a refusal opens no task");

        let mut at_limit = user_text("x");
        at_limit["parts"] = json!((0..64).map(|i| json!({"text": format!("w{i} ")})).collect::<Vec<_>>());
        let (code, _) = refusal(&c, binding, "SendMessage", json!({"message": at_limit})).await;
        assert_eq!(code, 0, "{binding}: 64 parts are taken");
        let mut file = user_text("x");
        file["parts"] = json!([{"raw": "aGVsbG8", "filename": "f.txt", "mediaType": "text/plain"}, {"raw": "-_8="}]);
        let (code, text) = refusal(&c, binding, "SendMessage", json!({"message": file})).await;
        assert_eq!(code, 0, "{binding}: unpadded and URL-safe base64 are base64: {text}");
    }
    let inbox = store.inbox_count().await.unwrap();
    assert_eq!(store.task_ids().await.unwrap().len(), 4, "only the taken messages opened tasks ({inbox} audit rows)");
}

/// Issue 33, point 3, on both bindings: a push URL holding CR/LF or a space, one to a
/// link-local (metadata) address, and, with `push.allow_private_hosts = false`, one to a
/// loopback host, are refused naming `url` (escaped), by CreateTaskPushNotificationConfig and
/// as a message's inline config; nothing is stored.
#[tokio::test]
async fn push_urls_with_control_characters_or_refused_hosts_are_refused_on_both_bindings() {
    for allow_private in [true, false] {
        let extra_config = format!("[push]\nallow_private_hosts = {allow_private}\n");
        let h = HarnessProcess::start(HarnessOptions { extra_config, ..Default::default() }).await;
        let c = h.client();
        let task = c.send(user_text("hello"), json!({})).await["result"]["task"]["id"].as_str().unwrap().to_string();
        let mut bad = vec![
            "https://hooks.example.com/x\r\nX-Injected: 1",
            "https://hooks.example.com/a b",
            "http://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/hook",
            "http://0.0.0.0:8080/hook",
        ];
        if !allow_private {
            bad.extend(["http://127.0.0.1:9/hook", "http://localhost:9/hook", "http://10.0.0.7/hook"]);
        }
        for binding in ["jsonrpc", "rest"] {
            let refused_code = if binding == "jsonrpc" { -32602 } else { 400 };
            for url in &bad {
                let config = json!({"taskId": task, "url": url, "token": "t"});
                let (code, text) = refusal(&c, binding, "CreateTaskPushNotificationConfig", config.clone()).await;
                assert_eq!(code, refused_code, "{binding} {url:?}: {text}");
                assert!(text.contains("url"), "{binding} {url:?}: {text}");
                assert!(!text.contains("\r\n"), "the refusal quotes the URL escaped: {text}");
                let inline = json!({"message": user_text("with a hook"),
                    "configuration": {"taskPushNotificationConfig": {"url": url}}});
                let (code, text) = refusal(&c, binding, "SendMessage", inline).await;
                assert_eq!(code, refused_code, "{binding} inline {url:?}: {text}");
            }
        }
        let listed = c.rpc("ListTaskPushNotificationConfigs", json!({"taskId": task})).await;
        assert_eq!(listed["result"]["configs"], json!([]), "nothing stored: {listed}");
        assert_eq!(h.store().await.task_ids().await.unwrap().len(), 1, "no refused inline config opened a task");
        // A public name is taken under either policy; loopback only when private hosts are allowed.
        let public = json!({"taskId": task, "url": "https://hooks.example.com/ok"});
        assert!(c.rpc("CreateTaskPushNotificationConfig", public).await["result"]["id"].is_string());
        let local =
            c.rpc("CreateTaskPushNotificationConfig", json!({"taskId": task, "url": "http://127.0.0.1:9/h"})).await;
        assert_eq!(local["result"]["id"].is_string(), allow_private, "{local}");
    }
}
