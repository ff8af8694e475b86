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
