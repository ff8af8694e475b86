//! Issue 30 (S12, EXTENSIONS.md "A2UI"): the model shows A2UI surfaces with the built-in
//! `emit_ui`, and a renderer's actions come back as data parts. A `tiny-harness serve`
//! process on the test dev server, the `openai` provider against the local endpoint that
//! speaks the real wire format (`@call emit_ui ...`), or the scripted model, real HTTP, and a
//! push webhook.

use contract_tests::openai_mock::MockOpenAi;
use contract_tests::{HarnessOptions, HarnessProcess, kind, message_from, user_text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const A2UI: &str = "application/a2ui+json";
const BASIC: &str = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json";

/// A surface `s1` with a button `go` (its action `go`, context `{"n": 1}`).
fn surface() -> Value {
    json!({"messages": contract_tests::button_surface()})
}

async fn harness(mock: &MockOpenAi) -> HarnessProcess {
    HarnessProcess::start(HarnessOptions {
        agent_extra: "model = \"gpt\"\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
            mock.base_url
        ),
        ..Default::default()
    })
    .await
}

fn call(args: &Value) -> String {
    format!("@call emit_ui {args}")
}

/// The A2UI artifact updates of a list of stream events.
fn a2ui_updates(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| kind(e) == "artifactUpdate" && e["artifactUpdate"]["artifact"]["name"] == "a2ui")
        .map(|e| e["artifactUpdate"].clone())
        .collect()
}

fn texts(message: &Value) -> String {
    message["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default()
}

/// An action of button `component` on `surface`, as a renderer sends it.
fn action(task: &str, surface: &str, component: &str) -> Value {
    let data = json!({"version": "v0.9", "action": {"name": "go", "surfaceId": surface,
        "sourceComponentId": component, "timestamp": "2026-12-04T10:00:00Z", "context": {"n": 1}}});
    message_from(None, Some(task), json!([{"data": data, "mediaType": A2UI}]))
}

/// One emission: an artifact update `a2ui:1` named `a2ui`, one data part per message (the
/// version written as v0.9.1), last chunk; it is on the stream, in GetTask's artifacts, pushed
/// to the task's webhook, and replayed in order by SubscribeToTask after a SIGKILL of the
/// harness, once.
#[tokio::test(flavor = "multi_thread")]
async fn an_emitted_surface_is_streamed_stored_pushed_and_replayed_after_a_sigkill() {
    let mock = MockOpenAi::start().await;
    let mut h = harness(&mock).await;
    let (url, posts) = contract_tests::webhook::webhook().await;
    let body = json!({"message": user_text(&call(&surface())),
        "configuration": {"taskPushNotificationConfig": {"url": format!("{url}/ui"), "token": "tok-ui"}}});
    let mut stream = h.client().open_stream("/message:stream", None, body).await;
    assert_eq!(stream.status, 200);
    let events = stream.collect_all().await;
    let id = contract_tests::task_id(&events);
    let updates = a2ui_updates(&events);
    assert_eq!(updates.len(), 1, "one emission, one artifact update: {events:#?}");
    let update = &updates[0];
    assert_eq!(update["artifact"]["artifactId"], "a2ui:1");
    assert_eq!(update["artifact"]["name"], "a2ui");
    assert_eq!(update["lastChunk"], true);
    let parts = update["artifact"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "one data part per message");
    assert!(parts.iter().all(|p| p["mediaType"] == A2UI && p["data"]["version"] == "v0.9.1"), "{parts:?}");
    assert_eq!(parts[0]["data"]["createSurface"]["surfaceId"], "s1");
    assert_eq!(parts[1]["data"]["updateComponents"]["components"][2]["id"], "go");
    // The model read what was shown, and said so.
    let last = events.last().unwrap();
    assert_eq!(
        texts(&last["statusUpdate"]["status"]["message"]),
        "Tools said: shown to the user: createSurface s1, updateComponents s1",
        "{last}"
    );
    // Stored: GetTask has the artifact as streamed.
    let task = h.client().rpc("GetTask", json!({"id": id})).await;
    let stored: Vec<&Value> =
        task["result"]["artifacts"].as_array().unwrap().iter().filter(|a| a["artifactId"] == "a2ui:1").collect();
    assert_eq!(stored, [&update["artifact"]], "{task}");
    // Pushed like any event.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pushed: Vec<Value> = posts.lock().unwrap().iter().filter(|p| p.0 == "ui").map(|p| p.3.clone()).collect();
        if let Some(p) = pushed.iter().find(|p| p["artifactUpdate"]["artifact"]["artifactId"] == "a2ui:1") {
            assert_eq!(p["artifactUpdate"]["artifact"], update["artifact"]);
            break;
        }
        assert!(Instant::now() < deadline, "the surface was not pushed: {pushed:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Replayed from the log after a SIGKILL, once, where it was.
    h.kill9();
    h.restart().await;
    let mut replay = h.client().open_stream(&format!("/tasks/{id}:subscribe"), None, json!({"id": id})).await;
    assert_eq!(replay.status, 200);
    let mut replayed = Vec::new();
    while replayed.len() < events.len() {
        replayed.push(replay.next().await.expect("the log replays"));
    }
    assert_eq!(a2ui_updates(&replayed), updates, "the same surface, once");
    let kinds = |e: &[Value]| e.iter().map(|e| kind(e).to_string()).collect::<Vec<_>>();
    assert_eq!(kinds(&replayed), kinds(&events), "the replay is the stream");
}

/// A bad emission is an error result naming the message, the component and the schema path,
/// and nothing is shown; an action on a surface the task did not show, or from a component not
/// on it, is refused InvalidParams with code `a2ui.unknown_surface_or_component` on both
/// bindings; an accepted action reaches the model's next turn as one line naming it; a client
/// that renders only other catalogs gets no surface of the basic one.
#[tokio::test(flavor = "multi_thread")]
async fn bad_emissions_and_unknown_actions_are_refused_and_an_action_reaches_the_model() {
    let mock = MockOpenAi::start().await;
    let h = harness(&mock).await;
    let client = h.client();
    let mut bad = surface();
    bad["messages"][1]["updateComponents"]["components"][2].as_object_mut().unwrap().remove("action");
    let answer = client.send(user_text(&call(&bad)), json!({})).await;
    let task = &answer["result"]["task"];
    let id = task["id"].as_str().expect("a task").to_string();
    let said = texts(&task["status"]["message"]);
    assert!(
        said.starts_with("Tools said: messages[1].updateComponents.components[2] (`go`, Button)"),
        "the error names the message and the component: {said}"
    );
    assert!(said.contains("schema catalog.json#/components/Button"), "and the schema path: {said}");
    let got = client.rpc("GetTask", json!({"id": id})).await;
    assert!(
        got["result"]["artifacts"].as_array().is_none_or(|a| a.iter().all(|a| a["name"] != "a2ui")),
        "nothing shown: {got}"
    );
    // No surface yet: an action is refused with the code, on both bindings.
    let refused = client.send(action(&id, "s1", "go"), json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let info = &refused["error"]["data"][0];
    assert_eq!(info["metadata"]["code"], "a2ui.unknown_surface_or_component", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("no open A2UI surface `s1`"), "{refused}");
    let rest = client
        .rest(reqwest::Method::POST, "/message:send", Some(json!({"message": action(&id, "s1", "go")}).to_string()))
        .await;
    assert_eq!(rest.status, 400, "{:?}", rest.body);
    assert_eq!(rest.body["error"]["details"][0]["metadata"]["code"], "a2ui.unknown_surface_or_component");
    // Shown now; a component not on it is refused, a malformed action is invalid without the code.
    let mut show = user_text(&call(&surface()));
    show["taskId"] = json!(id);
    let shown = client.send(show, json!({})).await;
    assert!(texts(&shown["result"]["task"]["status"]["message"]).contains("shown to the user"), "{shown}");
    let refused = client.send(action(&id, "s1", "nope"), json!({})).await;
    assert_eq!(refused["error"]["data"][0]["metadata"]["code"], "a2ui.unknown_surface_or_component", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("has no component `nope`"), "{refused}");
    let malformed =
        message_from(None, Some(&id), json!([{"data": {"version": "v0.9", "action": {}}, "mediaType": A2UI}]));
    let refused = client.send(malformed, json!({})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["data"][0]["metadata"].get("code").is_none(), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("client-to-server"), "{refused}");
    // The button's action reaches the model's next turn as one line.
    let before = mock.seen().len();
    let answered = client.send(action(&id, "s1", "go"), json!({})).await;
    assert_eq!(answered["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{answered}");
    let seen = mock.seen();
    assert_eq!(seen.len(), before + 1, "one model call for the action");
    let messages = seen.last().unwrap().body["messages"].as_array().unwrap().clone();
    let last_user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert_eq!(last_user["content"], "[A2UI action] go on surface s1 from go: {\"n\":1}", "{messages:?}");
    // The history keeps the action as the client sent it.
    let got = client.rpc("GetTask", json!({"id": id})).await;
    let history = got["result"]["history"].as_array().unwrap();
    assert!(history.iter().any(|m| m["parts"][0]["mediaType"] == A2UI), "{got}");
    // A client that renders only another catalog: the model is told, nothing is shown.
    let mut other = user_text(&call(&json!({"messages": [
        {"createSurface": {"surfaceId": "s2", "catalogId": BASIC}}]})));
    other["taskId"] = json!(id);
    other["metadata"] =
        json!({"a2uiClientCapabilities": {"v0.9": {"supportedCatalogIds": ["https://example.com/mine.json"]}}});
    let told = client.send(other, json!({})).await;
    let said = texts(&told["result"]["task"]["status"]["message"]);
    assert!(said.contains("the client does not render catalog"), "{said}");
}

/// The scripted model shows a surface with `ui` (no network model), and reads the action
/// of its button: a demo needs nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn the_scripted_model_shows_a_surface_and_answers_its_action() {
    let ui = surface()["messages"].to_string();
    let script = format!(
        "[[reply]]\nwhen = \"[A2UI action] go\"\nchunks = [\"You pressed go.\"]\n\n[[reply]]\nwhen = \"form\"\nchunks = [\"Here you are.\"]\nui = '''{ui}'''\nafter = [\"Press it.\"]\n"
    );
    let h = HarnessProcess::start(HarnessOptions { script: Some(script), ..Default::default() }).await;
    let events = h.client().stream_message(user_text("a form please")).await;
    let id = contract_tests::task_id(&events);
    let ui_updates = a2ui_updates(&events);
    assert_eq!(ui_updates.len(), 1, "{events:#?}");
    assert_eq!(ui_updates[0]["artifact"]["parts"][1]["data"]["updateComponents"]["surfaceId"], "s1");
    let last = events.last().unwrap();
    assert!(texts(&last["statusUpdate"]["status"]["message"]).ends_with("Press it."), "{last}");
    let answered = h.client().send(action(&id, "s1", "go"), json!({})).await;
    assert_eq!(texts(&answered["result"]["task"]["status"]["message"]), "You pressed go.", "{answered}");
}
