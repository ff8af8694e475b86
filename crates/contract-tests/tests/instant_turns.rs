//! Issue 31: an instant provider's turn hands its WORKING to the model call, which appends it
//! with the reply's first chunks in one transaction. What a client sees must not change:
//! WORKING before the reply, every status and chunk once, the log gap-free from seq 1 on
//! replay, the user's message in the history, also when the model fails before any chunk,
//! fails after one, or says nothing; and a new task's Task, which goes with its first turn's
//! events, at seq 1 once. An embedder's instant provider (`model_kind`), the
//! embeddable `Harness` in this process, the test dev server, real HTTP.

use contract_tests::{A2AClient, kind, state, temporal_address, user_text};
use futures::StreamExt;
use harness_agent::models::{
    DeltaStream, ModelError, ModelEvent, ModelProvider, ModelRequest, ProviderContext, ProviderFactory, last_user_text,
};
use serde_json::{Value, json};
use std::sync::Arc;
use tiny_harness::{Config, Harness, TemporalMode};

/// An instant provider whose reply the user's text chooses: `fail` fails before any text,
/// `break` after one chunk, `quiet` says nothing; anything else is echoed word by word.
struct Moody;

#[async_trait::async_trait]
impl ModelProvider for Moody {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let text = last_user_text(&request.history);
        let refused = |message: &str| ModelError { message: message.into(), retryable: false };
        let events: Vec<Result<ModelEvent, ModelError>> = match text.as_str() {
            "fail" => return Err(refused("moody would not start")),
            "break" => vec![Ok(ModelEvent::Text("half ".into())), Err(refused("moody broke off"))],
            "quiet" => Vec::new(),
            other => other.split_inclusive(' ').map(|w| Ok(ModelEvent::Text(w.to_string()))).collect(),
        };
        Ok(futures::stream::iter(events).boxed())
    }

    fn is_instant(&self) -> bool {
        true
    }

    fn history_window(&self) -> Option<usize> {
        Some(1)
    }
}

struct MoodyKind;

impl ProviderFactory for MoodyKind {
    fn kind(&self) -> &'static str {
        "moody"
    }

    fn build(&self, _table: &toml::Table, _ctx: &ProviderContext<'_>) -> Result<Arc<dyn ModelProvider>, String> {
        Ok(Arc::new(Moody))
    }
}

fn text_of(event: &Value) -> String {
    let parts = event["artifactUpdate"]["artifact"]["parts"].as_array().cloned().unwrap_or_default();
    parts.iter().filter_map(|p| p["text"].as_str()).collect()
}

fn status_text(event: &Value) -> String {
    let parts = event["statusUpdate"]["status"]["message"]["parts"].as_array().cloned().unwrap_or_default();
    parts.iter().filter_map(|p| p["text"].as_str()).collect()
}

/// The kinds and states of a turn's events, e.g. `WORKING artifact:echo artifact: INPUT_REQUIRED`.
fn shape(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match kind(e) {
            "artifactUpdate" => format!("artifact:{}", text_of(e).trim()),
            _ => state(e).unwrap_or("?").trim_start_matches("TASK_STATE_").to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instant_turns_working_goes_before_its_reply_once_whatever_the_model_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::with_data_dir(dir.path());
    c.temporal.mode = TemporalMode::Remote;
    c.temporal.address = temporal_address().to_string();
    c.temporal.task_queue = format!("instant-turns-{}", std::process::id());
    c.server.port = 0;
    let mut table = toml::Table::new();
    table.insert("kind".into(), "moody".into());
    c.models.named.insert("moody".into(), table);
    c.agent.model = "moody".into();
    let harness = Harness::builder(c).model_kind(Arc::new(MoodyKind)).build().unwrap();
    harness.start().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = harness.router().into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = A2AClient::new(&base);

    let first = client.stream_message(user_text("hello there")).await;
    assert_eq!(shape(&first), ["SUBMITTED", "WORKING", "artifact:hello", "artifact:there", "INPUT_REQUIRED"]);
    let task_id = first[0]["task"]["id"].as_str().unwrap().to_string();
    let mut streamed = first.clone();
    for (text, want) in [
        ("fail", vec!["WORKING", "INPUT_REQUIRED"]),
        ("break", vec!["WORKING", "INPUT_REQUIRED"]),
        ("quiet", vec!["WORKING", "INPUT_REQUIRED"]),
        ("good bye", vec!["WORKING", "artifact:good", "artifact:bye", "INPUT_REQUIRED"]),
    ] {
        let mut m = user_text(text);
        m["taskId"] = json!(task_id);
        let mut events = client.stream_message(m).await;
        // A stream on a task the client names opens with the task as it is (not a log event).
        assert_eq!(kind(&events[0]), "task", "{text}: {events:?}");
        events.remove(0);
        assert_eq!(shape(&events), want, "{text}: {events:?}");
        let last = events.last().unwrap();
        match text {
            "fail" => assert!(status_text(last).contains("moody would not start"), "{last}"),
            "break" => assert!(status_text(last).contains("moody broke off"), "{last}"),
            _ => {}
        }
        streamed.extend(events);
    }

    // A replay from seq 1 is what was streamed, without a gap or a second copy: the handed
    // WORKING that a failed call may or may not have appended is in the log once.
    let mut replay = client.open_stream(&format!("/tasks/{task_id}:subscribe"), None, json!({})).await;
    assert_eq!(replay.status, 200);
    let mut seqs = Vec::new();
    let mut replayed = Vec::new();
    while replayed.len() < streamed.len() {
        replayed.push(replay.next().await.expect("the replay ended early"));
        seqs.push(replay.last_id.clone().and_then(|id| id.parse::<i64>().ok()).expect("an event id"));
    }
    assert_eq!(shape(&replayed), shape(&streamed), "the replay is the streamed log");
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "gap-free from seq 1");

    // Every message the user sent is in the history once, each followed by what answered it.
    let got = client.rpc("GetTask", json!({"id": task_id})).await;
    let history = got["result"]["history"].as_array().expect("history").clone();
    let users: Vec<String> = history
        .iter()
        .filter(|m| m["role"] == "ROLE_USER")
        .map(|m| m["parts"][0]["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(users, ["hello there", "fail", "break", "quiet", "good bye"], "{got}");

    // A new task's Task goes with its first turn's events (issue 31): whatever that first
    // model call does, the Task is seq 1, once, before the turn's WORKING, and the task is
    // there to read once the stream ends.
    for (text, want) in [
        ("fail", vec!["SUBMITTED", "WORKING", "INPUT_REQUIRED"]),
        ("break", vec!["SUBMITTED", "WORKING", "INPUT_REQUIRED"]),
        ("quiet", vec!["SUBMITTED", "WORKING", "INPUT_REQUIRED"]),
    ] {
        let events = client.stream_message(user_text(text)).await;
        assert_eq!(kind(&events[0]), "task", "{text}: {events:?}");
        assert_eq!(shape(&events), want, "{text}: {events:?}");
        let task_id = events[0]["task"]["id"].as_str().unwrap().to_string();
        let mut replay = client.open_stream(&format!("/tasks/{task_id}:subscribe"), None, json!({})).await;
        let mut replayed = Vec::new();
        let mut seqs = Vec::new();
        while replayed.len() < events.len() {
            replayed.push(replay.next().await.expect("the replay ended early"));
            seqs.push(replay.last_id.clone().and_then(|id| id.parse::<i64>().ok()).expect("an event id"));
        }
        assert_eq!(replayed, events, "{text}: the replay from seq 1 is the stream");
        assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "{text}: gap-free from seq 1");
        let got = client.rpc("GetTask", json!({"id": task_id})).await;
        assert_eq!(got["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{text}: {got}");
        assert_eq!(got["result"]["history"][0]["parts"][0]["text"], text, "{text}: {got}");
    }
    harness.stop().await;
}
