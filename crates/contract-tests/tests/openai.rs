//! Issue 17: the `openai` provider against a local endpoint that speaks the real wire
//! format (`contract_tests::openai_mock`): streaming into the log before the endpoint is
//! done, the conversation as the model sees it, usage, retries that leave no half reply,
//! failures that name the endpoint and never the key, a cancel that drops the request, and
//! a SIGKILL mid-reply.

use contract_tests::openai_mock::MockOpenAi;
use contract_tests::{HarnessOptions, HarnessProcess, kind, state, user_text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-7f3c9a1e5b2d4680aa11";
const USAGE: &str = "io.github.madarauchiha-314.tiny-harness/usage";
const ATTEMPT: &str = "io.github.madarauchiha-314.tiny-harness/attempt";

async fn harness(mock: &MockOpenAi, lifecycle: &'static str) -> HarnessProcess {
    HarnessProcess::start(HarnessOptions {
        lifecycle,
        server_extra: "monitor_interval_secs = 1".into(),
        agent_extra: "model = \"gpt\"\ninstructions = \"You are a test agent.\"\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-model\"\napi_key_env = \
             \"TEST_OPENAI_KEY\"\nrequest_timeout_secs = 1\nmax_attempts = 3\ntemperature = 0.5\n",
            mock.base_url
        ),
        env: vec![("TEST_OPENAI_KEY".into(), KEY.into())],
        ..Default::default()
    })
    .await
}

fn texts(message: &Value) -> String {
    message["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default()
}

/// The text a log's reply artifact ends with: chunks appended, a chunk without `append`
/// starting it afresh.
fn reply_text(events: &[Value]) -> String {
    let mut text = String::new();
    for e in events.iter().filter(|e| kind(e) == "artifactUpdate") {
        let update = &e["artifactUpdate"];
        if update["append"] != true {
            text.clear();
        }
        text.push_str(&texts(&update["artifact"]));
    }
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_reaches_a_subscriber_before_the_endpoint_is_done_and_the_model_sees_the_conversation() {
    let mock = MockOpenAi::start().await;
    let h = harness(&mock, "conversation").await;
    let c = h.client();
    let mut s = c.open_stream("/message:stream", None, json!({"message": user_text("a gated question")})).await;
    let task_id = s.next().await.unwrap()["task"]["id"].as_str().unwrap().to_string();
    let first = loop {
        let e = s.next().await.expect("an event");
        if kind(&e) == "artifactUpdate" {
            break e;
        }
    };
    // The endpoint is still holding the rest of its reply.
    assert_eq!(texts(&first["artifactUpdate"]["artifact"]), "First words", "{first}");
    assert_ne!(first["artifactUpdate"]["lastChunk"], true, "{first}");
    mock.release();
    let mut events = vec![first];
    while let Some(e) = s.next().await {
        events.push(e);
    }
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:?}");
    let reply = &last["statusUpdate"]["status"]["message"];
    assert_eq!(texts(reply), "First words, then the rest.", "the whole reply: {last}");
    assert_eq!(reply_text(&events), "First words, then the rest.");
    let closing = events.iter().rev().find(|e| kind(e) == "artifactUpdate").unwrap();
    assert_eq!(closing["artifactUpdate"]["lastChunk"], true, "the reply artifact is closed: {closing}");
    let turn_usage = json!({"promptTokens": 12, "completionTokens": 4, "reasoningTokens": 1});
    assert_eq!(reply["metadata"][USAGE], turn_usage, "the turn's usage on its reply: {reply}");

    // What the endpoint got: the key, the system prompt, the user's message, the settings.
    let seen = mock.seen();
    assert_eq!(seen[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let body = &seen[0].body;
    assert_eq!(
        (body["model"].clone(), body["stream"].clone(), body["temperature"].clone()),
        (json!("mock-model"), json!(true), json!(0.5))
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are a test agent."},
            {"role": "user", "content": "a gated question"},
        ])
    );

    // A second turn: the model sees the conversation, its own reply as `assistant`.
    let mut next = user_text("and then?");
    next["taskId"] = json!(task_id);
    let answer = c.send(next, json!({})).await;
    let task = &answer["result"]["task"];
    assert_eq!(texts(&task["status"]["message"]), "Hello from the mock", "{answer}");
    let messages = &mock.seen()[1].body["messages"];
    assert_eq!(messages.as_array().unwrap().len(), 4, "{messages}");
    assert_eq!(messages[2], json!({"role": "assistant", "content": "First words, then the rest."}));
    assert_eq!(messages[3], json!({"role": "user", "content": "and then?"}));

    // Usage summed on the task, and in /_monitor for the (parked) running task.
    let got = c.rpc("GetTask", json!({"id": task_id})).await["result"].clone();
    let total = json!({"promptTokens": 24, "completionTokens": 8, "reasoningTokens": 2});
    assert_eq!(got["metadata"][USAGE], total, "{got}");
    let mut monitor = Value::Null;
    for _ in 0..40 {
        monitor = reqwest::get(format!("{}/_monitor", h.base_url)).await.unwrap().json().await.unwrap();
        let row = monitor["running"].as_array().unwrap().iter().find(|r| r["task_id"] == task_id.as_str()).cloned();
        if row.as_ref().is_some_and(|r| r["usage"] == total) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let row = monitor["running"].as_array().unwrap().iter().find(|r| r["task_id"] == task_id.as_str()).cloned();
    assert_eq!(row.map(|r| r["usage"].clone()), Some(total), "{monitor}");
}

/// 429 (with Retry-After), 500, a stream cut mid-way and a stream that stalls are retried;
/// a retry after output closes the void text, marked, and the reply starts afresh.
#[tokio::test(flavor = "multi_thread")]
async fn retried_attempts_leave_no_half_reply_and_say_what_happened() {
    let mock = MockOpenAi::start().await;
    let h = harness(&mock, "conversation").await;
    let c = h.client();
    for word in ["rate-limited", "flaky"] {
        let answer = c.send(user_text(&format!("{word} question")), json!({})).await;
        assert_eq!(texts(&answer["result"]["task"]["status"]["message"]), "Hello from the mock", "{word}: {answer}");
    }
    let limited: Vec<Instant> =
        mock.seen().iter().filter(|r| r.body.to_string().contains("rate-limited")).map(|r| r.at).collect();
    assert_eq!(limited.len(), 2);
    assert!(limited[1] - limited[0] >= Duration::from_millis(900), "Retry-After: 1 was not honoured");

    for (word, void) in [("cut", "Half a reply"), ("stall", "Stalled ")] {
        let events = c.stream_message(user_text(&format!("{word} question"))).await;
        let last = events.last().unwrap();
        assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{word}: {events:?}");
        assert_eq!(texts(&last["statusUpdate"]["status"]["message"]), "Hello from the mock", "{word}: no half reply");
        assert_eq!(reply_text(&events), "Hello from the mock", "{word}: {events:?}");
        let updates: Vec<&Value> =
            events.iter().filter(|e| kind(e) == "artifactUpdate").map(|e| &e["artifactUpdate"]).collect();
        let marked = updates.iter().position(|u| u["metadata"][ATTEMPT]["abandoned"].is_string());
        let marked = marked.unwrap_or_else(|| panic!("{word}: no chunk marks the void attempt: {updates:?}"));
        assert_eq!(updates[marked]["lastChunk"], true, "{word}: the void text is closed");
        let void_text: String = updates[..=marked].iter().map(|u| texts(&u["artifact"])).collect();
        assert_eq!(void_text, void, "{word}");
        assert!(updates[marked]["metadata"][ATTEMPT]["abandoned"].as_str().unwrap().contains("attempt 1 failed"));
        assert_ne!(updates[marked + 1]["append"], true, "{word}: the retry starts the artifact afresh");
    }
}

/// 401, 400, a malformed stream and a 500 that never ends: the turn ends with a message
/// naming the model, the endpoint, the status and the endpoint's words; never the key.
/// A conversation parks; a one-shot task fails.
#[tokio::test(flavor = "multi_thread")]
async fn failures_end_the_turn_naming_the_endpoint_and_never_the_key() {
    let mock = MockOpenAi::start().await;
    let h = harness(&mock, "conversation").await;
    let c = h.client();
    let cases = [
        ("unauthorized", "HTTP 401 Unauthorized: Incorrect API key provided: [REDACTED]"),
        ("bad-request", "HTTP 400 Bad Request: Invalid value for 'model': no such model"),
        ("malformed", "a malformed stream: a chunk that is not JSON"),
        ("always-500", "gave up after 3 attempts: HTTP 500 Internal Server Error: The server is down"),
    ];
    for (word, says) in cases {
        let answer = c.send(user_text(&format!("{word} please")), json!({})).await;
        let task = &answer["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{word}: a conversation parks: {answer}");
        let text = texts(&task["status"]["message"]);
        assert!(text.contains(&format!("openai model `gpt` at {}", mock.base_url)), "{word}: {text}");
        assert!(text.contains(says), "{word}: {text}");
        assert!(!text.contains(KEY), "{word}: the key is in {text}");
    }
    drop(h);
    let one_shot = harness(&mock, "one-shot").await;
    let answer = one_shot.client().send(user_text("unauthorized again"), json!({})).await;
    assert_eq!(answer["result"]["task"]["status"]["state"], "TASK_STATE_FAILED", "{answer}");

    // The key is in no store row and no log line.
    let db = std::fs::read(one_shot.data_dir.path().join("harness.db")).unwrap();
    assert!(!db.windows(KEY.len()).any(|w| w == KEY.as_bytes()), "the key is in the store");
    assert!(!one_shot.log().contains(KEY), "the key is in the log");
}

/// A cancel cuts a streaming reply: the endpoint sees its client go within a second.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_drops_the_request_of_a_streaming_reply() {
    let mock = MockOpenAi::start().await;
    let h = harness(&mock, "conversation").await;
    let c = h.client();
    let mut s = c.open_stream("/message:stream", None, json!({"message": user_text("go on forever")})).await;
    let task_id = s.next().await.unwrap()["task"]["id"].as_str().unwrap().to_string();
    while kind(&s.next().await.unwrap()) != "artifactUpdate" {}
    let canceled = c.rpc("CancelTask", json!({"id": task_id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let at = Instant::now();
    while mock.dropped().is_empty() && at.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dropped = mock.dropped();
    assert_eq!(dropped.len(), 1, "the endpoint's request was left running");
    assert!(dropped[0].0 - at < Duration::from_secs(1), "dropped {:?} after the cancel", dropped[0].0 - at);
    assert!(dropped[0].1 < 600, "{dropped:?}");
}

/// A SIGKILL mid-reply: after the restart the turn runs again and completes, and the log
/// replays from the start with the reply whole at its end.
#[tokio::test(flavor = "multi_thread")]
async fn a_harness_killed_mid_reply_completes_the_turn_after_the_restart() {
    let mock = MockOpenAi::start().await;
    let mut h = harness(&mock, "conversation").await;
    let c = h.client();
    let mut s = c.open_stream("/message:stream", None, json!({"message": user_text("slow please")})).await;
    let task_id = s.next().await.unwrap()["task"]["id"].as_str().unwrap().to_string();
    let mut chunks = 0;
    while chunks < 2 {
        if kind(&s.next().await.unwrap()) == "artifactUpdate" {
            chunks += 1;
        }
    }
    h.kill9();
    drop(s);
    h.restart().await;
    let mut sub = c.open_stream(&format!("/tasks/{task_id}:subscribe"), None, json!({})).await;
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while let Some(e) = tokio::time::timeout(deadline - Instant::now(), sub.next()).await.expect("no end in 90 s") {
        let parked = state(&e) == Some("TASK_STATE_INPUT_REQUIRED");
        events.push(e);
        if parked {
            break;
        }
    }
    assert_eq!(kind(&events[0]), "task", "the log replays from the Task: {events:?}");
    let want = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 ";
    let last = events.last().unwrap();
    assert_eq!(texts(&last["statusUpdate"]["status"]["message"]), want, "{last}");
    assert_eq!(reply_text(&events), want, "the artifact ends whole: {events:?}");
    assert!(mock.seen().len() >= 2, "the turn ran again after the restart");
}

/// One real streamed turn against OpenAI, when `OPENAI_API_KEY` is set (`OPENAI_MODEL`,
/// default gpt-4o-mini; `OPENAI_BASE_URL` for another endpoint).
#[tokio::test(flavor = "multi_thread")]
async fn a_real_endpoint_answers_a_streamed_turn_when_openai_api_key_is_set() {
    if std::env::var("OPENAI_API_KEY").map_or(true, |k| k.trim().is_empty()) {
        println!("skipped: OPENAI_API_KEY is not set");
        return;
    }
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let base = std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".into());
    let h = HarnessProcess::start(HarnessOptions {
        agent_extra: "model = \"real\"\n".into(),
        extra_config: format!("[models.real]\nkind = \"openai\"\nbase_url = \"{base}\"\nmodel = \"{model}\"\n"),
        ..Default::default()
    })
    .await;
    let events = h.client().stream_message(user_text("Say the word 'durable' and nothing else.")).await;
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:?}");
    assert!(texts(&last["statusUpdate"]["status"]["message"]).to_lowercase().contains("durable"), "{last}");
    assert!(events.iter().any(|e| kind(e) == "artifactUpdate"), "streamed: {events:?}");
}

/// A known sender is named on its message (the channel extension's `sender`), which is how
/// the provider frames the messages of several participants (its unit test); one speaker's
/// messages reach the model as they are.
#[tokio::test(flavor = "multi_thread")]
async fn a_known_sender_is_named_on_its_message_and_a_lone_speaker_is_not_framed() {
    let mock = MockOpenAi::start().await;
    let h = harness(&mock, "conversation").await;
    let params = json!({"message": user_text("hello from alice")});
    let answer = contract_tests::rpc_as(&h.base_url, Some(("X-Participant-Id", "alice")), "SendMessage", params).await;
    let task = &answer["result"]["task"];
    let channel = &task["history"][0]["metadata"]["io.github.madarauchiha-314.tiny-harness/channel"];
    assert_eq!(channel, &json!({"channel_id": task["id"], "sender": "alice"}), "{answer}");
    assert_eq!(mock.seen()[0].body["messages"][1], json!({"role": "user", "content": "hello from alice"}));
}
