//! Issue 16 item 3: the `conformance` model does what each scenario of the conformance
//! kit's contract says (`conformance/*.feature`, copied unchanged from the kit; see
//! `conformance/SOURCE.txt`). The expectations are read from the scenario text, step by
//! step, never from the model's constants: a test per scenario runs it over real HTTP on
//! both bindings, blocking and streaming. A step this reader does not know fails the test
//! naming it, so a new contract is noticed rather than passed over.

use contract_tests::{HarnessOptions, HarnessProcess, kind, state};
use serde_json::{Value, json};
use std::path::PathBuf;

/// What one step of a scenario expects.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// The task ends in this state, with this status message text when given.
    Final { state: &'static str, message: Option<String> },
    /// The task holds an artifact with this part.
    Artifact(PartCheck),
    /// The answer is a Message (not a Task) with this text part.
    Message(String),
    /// The stream carries a status update to this state.
    StreamStatus(&'static str),
    /// The stream carries an artifact update with this part; `chunk`: Some(last) for a
    /// chunk ("an artifact chunk" / "a final artifact chunk").
    StreamArtifact { part: PartCheck, chunk: Option<bool> },
    /// The task stays in its state for this many streaming timeouts (a client may
    /// resubscribe meanwhile).
    Wait(u32),
}

/// A part as a scenario describes it.
#[derive(Clone, Debug, PartialEq)]
enum PartCheck {
    Text(String),
    File { name: String, media_type: String },
    Url { url: String, name: String, media_type: String },
    Data(Value),
}

impl PartCheck {
    fn matches(&self, part: &Value) -> bool {
        match self {
            Self::Text(t) => part["text"] == json!(t),
            Self::File { name, media_type } => {
                part["raw"].as_str().is_some_and(|r| !r.is_empty())
                    && part["filename"] == json!(name)
                    && part["mediaType"] == json!(media_type)
            }
            Self::Url { url, name, media_type } => {
                part["url"] == json!(url) && part["filename"] == json!(name) && part["mediaType"] == json!(media_type)
            }
            Self::Data(d) => &part["data"] == d,
        }
    }
}

/// One scenario: its name, the messageId prefix, whether the message is streamed, and its
/// steps in order.
#[derive(Clone, Debug)]
struct Scenario {
    name: String,
    prefix: String,
    streaming: bool,
    steps: Vec<Step>,
}

/// The quoted strings of a step, in order.
fn quoted(step: &str) -> Vec<String> {
    step.split('"').skip(1).step_by(2).map(String::from).collect()
}

fn state_named(s: &str) -> &'static str {
    match s {
        "working" => "TASK_STATE_WORKING",
        "completed" => "TASK_STATE_COMPLETED",
        "input_required" => "TASK_STATE_INPUT_REQUIRED",
        other => panic!("a scenario names the state {other:?}, which this reader does not know"),
    }
}

/// A part description ("a text part \"x\"", "a file part named ...", "a file url ...").
fn part_of(description: &str, doc: Option<&str>) -> PartCheck {
    let q = quoted(description);
    if description.starts_with("a text part ") {
        PartCheck::Text(q[0].clone())
    } else if description.starts_with("a file part named ") {
        PartCheck::File { name: q[0].clone(), media_type: q[1].clone() }
    } else if description.starts_with("a file url ") {
        PartCheck::Url { url: q[0].clone(), name: q[1].clone(), media_type: q[2].clone() }
    } else if description.starts_with("a data part:") {
        PartCheck::Data(serde_json::from_str(doc.expect("a data part step has a doc string")).expect("JSON"))
    } else {
        panic!("unknown part description {description:?}")
    }
}

/// What a step's text asks for.
fn step_of(text: &str, doc: Option<&str>) -> Step {
    let q = quoted(text);
    if let Some(rest) = text.strip_prefix("complete the task with the message ") {
        return Step::Final { state: "TASK_STATE_COMPLETED", message: Some(quoted(rest)[0].clone()) };
    }
    if text == "complete the task" {
        return Step::Final { state: "TASK_STATE_COMPLETED", message: None };
    }
    if let Some(rest) = text.strip_prefix("add an artifact with ") {
        return Step::Artifact(part_of(rest, doc));
    }
    if let Some(rest) = text.strip_prefix("return a message with a text part ") {
        return Step::Message(quoted(rest)[0].clone());
    }
    if text.starts_with("update the task status to ") {
        return Step::Final { state: state_named(&q[0]), message: None };
    }
    if text.starts_with("reject with error ") {
        // The task is rejected (REJECTED), its status message the error's text.
        return Step::Final { state: "TASK_STATE_REJECTED", message: Some(q[0].clone()) };
    }
    if text.starts_with("stream a status update to ") {
        return Step::StreamStatus(state_named(&q[0]));
    }
    if let Some(rest) = text.strip_prefix("stream an artifact chunk with ") {
        return Step::StreamArtifact { part: part_of(rest, doc), chunk: Some(false) };
    }
    if let Some(rest) = text.strip_prefix("stream a final artifact chunk with ") {
        return Step::StreamArtifact { part: part_of(rest, doc), chunk: Some(true) };
    }
    if let Some(rest) = text.strip_prefix("stream an artifact with ") {
        return Step::StreamArtifact { part: part_of(rest, doc), chunk: None };
    }
    if let Some(rest) = text.strip_prefix("wait for ") {
        let times = rest.split('x').next().and_then(|n| n.parse().ok()).expect("wait for Nx streaming timeout");
        return Step::Wait(times);
    }
    panic!("a scenario step this reader does not know: {text:?}")
}

/// Every scenario of the contract's feature files.
fn scenarios() -> Vec<Scenario> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let mut out = Vec::new();
    for file in ["core_operations.feature", "streaming.feature"] {
        let text = std::fs::read_to_string(dir.join(file)).expect("a feature file");
        out.extend(parse(&text));
    }
    out
}

fn parse(text: &str) -> Vec<Scenario> {
    let mut out: Vec<Scenario> = Vec::new();
    // Steps as (text, doc string), turned into Steps once the doc string is read.
    let mut raw: Vec<(String, Option<String>)> = Vec::new();
    let mut doc: Option<String> = None;
    let finish = |out: &mut Vec<Scenario>, raw: &mut Vec<(String, Option<String>)>| {
        if let Some(s) = out.last_mut() {
            s.steps = raw.drain(..).map(|(t, d)| step_of(&t, d.as_deref())).collect();
        }
    };
    for line in text.lines().map(str::trim) {
        if let Some(d) = doc.as_mut() {
            if line == "\"\"\"" {
                raw.last_mut().expect("a doc string follows a step").1 = doc.take();
            } else {
                d.push_str(line);
                d.push('\n');
            }
            continue;
        }
        if line.starts_with("\"\"\"") {
            doc = Some(String::new());
        } else if let Some(name) = line.strip_prefix("Scenario:") {
            finish(&mut out, &mut raw);
            out.push(Scenario { name: name.trim().into(), prefix: String::new(), streaming: false, steps: Vec::new() });
        } else if let Some(when) = line.strip_prefix("When ") {
            let s = out.last_mut().expect("a When inside a scenario");
            s.streaming = when.starts_with("a streaming message");
            s.prefix = quoted(when)[0].clone();
        } else if let Some(step) = line.strip_prefix("Then ").or_else(|| line.strip_prefix("And ")) {
            raw.push((step.to_string(), None));
        }
    }
    finish(&mut out, &mut raw);
    out
}

fn scenario(name: &str) -> Scenario {
    let all = scenarios();
    all.iter().find(|s| s.name == name).cloned().unwrap_or_else(|| {
        panic!("no scenario {name:?} in the contract; it has {:?}", all.iter().map(|s| &s.name).collect::<Vec<_>>())
    })
}

/// The kit's streaming timeout the harness under test runs with (seconds).
const STREAMING_TIMEOUT: &str = "1";

async fn harness() -> HarnessProcess {
    HarnessProcess::start(HarnessOptions {
        model: Some("conformance"),
        env: vec![("TCK_STREAMING_TIMEOUT".into(), STREAMING_TIMEOUT.into())],
        ..Default::default()
    })
    .await
}

/// A messageId with the prefix, unique in this test run.
fn message(prefix: &str) -> Value {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    json!({
        "messageId": format!("{prefix}-{}-{nanos}-{n}", std::process::id()),
        "role": "ROLE_USER",
        "parts": [{"text": "hello"}],
    })
}

#[derive(Clone, Copy, Debug)]
enum Binding {
    JsonRpc,
    Rest,
}

const BINDINGS: [Binding; 2] = [Binding::JsonRpc, Binding::Rest];

/// SendMessage (blocking) on a binding: the answer's `task` or `message` object.
async fn send(h: &HarnessProcess, binding: Binding, msg: Value) -> Value {
    let c = h.client();
    match binding {
        Binding::JsonRpc => {
            let r = c.send(msg, json!({})).await;
            r.get("result").cloned().unwrap_or_else(|| panic!("SendMessage failed: {r}"))
        }
        Binding::Rest => {
            let a = c.rest(reqwest::Method::POST, "/message:send", Some(json!({"message": msg}).to_string())).await;
            assert_eq!(a.status, 200, "SendMessage failed: {:?}", a.body);
            a.body
        }
    }
}

/// SendStreamingMessage on a binding: the open stream.
async fn open(h: &HarnessProcess, binding: Binding, msg: Value) -> contract_tests::SseEvents {
    let body = json!({"message": msg});
    let s = match binding {
        Binding::JsonRpc => h.client().open_stream("", Some("SendStreamingMessage"), body).await,
        Binding::Rest => h.client().open_stream("/message:stream", None, body).await,
    };
    assert_eq!(s.status, 200, "the stream was refused");
    s
}

fn status_text(status: &Value) -> Option<String> {
    status["message"]["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect())
}

/// Checks a blocking answer (and the stream of the same message) against a non-streaming
/// scenario's steps.
async fn check_unary(h: &HarnessProcess, s: &Scenario, binding: Binding) {
    let answer = send(h, binding, message(&s.prefix)).await;
    let mut events = open(h, binding, message(&s.prefix)).await.collect_all().await;
    for step in &s.steps {
        match step {
            Step::Message(text) => {
                let m = answer.get("message").unwrap_or_else(|| panic!("{}: not a Message: {answer}", s.name));
                assert_eq!(m["role"], "ROLE_AGENT", "{}: {m}", s.name);
                let parts: Vec<&str> =
                    m["parts"].as_array().unwrap().iter().filter_map(|p| p["text"].as_str()).collect();
                assert_eq!(parts, [text.as_str()], "{}: {m}", s.name);
                // Streamed, the answer is that one Message (a Message-only stream).
                assert_eq!(events.iter().map(kind).collect::<Vec<_>>(), ["message"], "{}: {events:?}", s.name);
                assert_eq!(events[0]["message"]["parts"], m["parts"], "{}", s.name);
            }
            Step::Final { state: want, message } => {
                let task = answer.get("task").unwrap_or_else(|| panic!("{}: not a Task: {answer}", s.name));
                assert_eq!(task["status"]["state"], *want, "{}: {task}", s.name);
                if let Some(text) = message {
                    assert_eq!(status_text(&task["status"]).as_deref(), Some(text.as_str()), "{}: {task}", s.name);
                }
                let last = events.pop().expect("a stream event");
                assert_eq!(state(&last), Some(*want), "{}: the stream ends elsewhere: {last}", s.name);
                assert_eq!(kind(&events[0]), "task", "{}: a task stream begins with the Task", s.name);
            }
            Step::Artifact(part) => {
                let task = answer.get("task").unwrap_or_else(|| panic!("{}: not a Task: {answer}", s.name));
                let parts: Vec<&Value> = task["artifacts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|a| a["parts"].as_array().unwrap())
                    .collect();
                assert!(parts.iter().any(|p| part.matches(p)), "{}: no artifact part {part:?} in {parts:?}", s.name);
            }
            other => panic!("{}: a non-streaming scenario with the step {other:?}", s.name),
        }
    }
}

/// Checks a stream against a streaming scenario's steps, in order: after the Task it begins
/// with, each event is the next step's.
async fn check_streaming(h: &HarnessProcess, s: &Scenario, binding: Binding) {
    let mut stream = open(h, binding, message(&s.prefix)).await;
    let first = stream.next().await.expect("a first event");
    assert_eq!(kind(&first), "task", "{}: {first}", s.name);
    assert_eq!(state(&first), Some("TASK_STATE_SUBMITTED"), "{}: {first}", s.name);
    let task_id = first["task"]["id"].as_str().unwrap().to_string();
    let mut chunk_artifact: Option<Value> = None;
    let mut resubscribed = None;
    for step in &s.steps {
        if let Step::Wait(_) = step {
            // While the task waits, a client resubscribes and follows it to its end.
            resubscribed = Some(h.client().open_stream(&format!("/tasks/{task_id}:subscribe"), None, json!({})).await);
            continue;
        }
        let event = stream.next().await.unwrap_or_else(|| panic!("{}: the stream ended before {step:?}", s.name));
        match step {
            Step::StreamStatus(want) => {
                assert_eq!(kind(&event), "statusUpdate", "{}: expected {want}, got {event}", s.name);
                assert_eq!(state(&event), Some(*want), "{}: {event}", s.name);
            }
            Step::StreamArtifact { part, chunk } => {
                assert_eq!(kind(&event), "artifactUpdate", "{}: expected {part:?}, got {event}", s.name);
                let update = &event["artifactUpdate"];
                let parts = update["artifact"]["parts"].as_array().unwrap();
                assert!(parts.len() == 1 && part.matches(&parts[0]), "{}: expected {part:?}, got {update}", s.name);
                match chunk {
                    None => assert_ne!(update["append"], true, "{}: a whole artifact: {update}", s.name),
                    Some(false) => {
                        assert_ne!(update["lastChunk"], true, "{}: not the last chunk: {update}", s.name);
                        chunk_artifact = Some(update["artifact"]["artifactId"].clone());
                    }
                    Some(true) => {
                        assert_eq!(update["lastChunk"], true, "{}: the last chunk: {update}", s.name);
                        assert_eq!(update["append"], true, "{}: appended to the first: {update}", s.name);
                        assert_eq!(chunk_artifact.as_ref(), Some(&update["artifact"]["artifactId"]), "{}", s.name);
                    }
                }
            }
            other => panic!("{}: a streaming scenario with the step {other:?}", s.name),
        }
    }
    assert_eq!(stream.next().await, None, "{}: the stream goes on after its last step", s.name);
    if let Some(mut sub) = resubscribed {
        let events = sub.collect_all().await;
        assert_eq!(kind(&events[0]), "task", "{}: {events:?}", s.name);
        let last = events.last().unwrap();
        assert_eq!(state(last), Some("TASK_STATE_COMPLETED"), "{}: the resubscribed stream: {events:?}", s.name);
    }
}

/// Runs a scenario on both bindings.
async fn run(name: &str) {
    let s = scenario(name);
    let h = harness().await;
    for binding in BINDINGS {
        if s.streaming {
            check_streaming(&h, &s, binding).await;
        } else {
            check_unary(&h, &s, binding).await;
        }
        println!("{name} ({binding:?}): passed");
    }
}

/// The tests below name every scenario: a scenario the contract adds fails this one.
const COVERED: &[&str] = &[
    "Complete the task",
    "Task with text artifact",
    "Task with file artifact",
    "Task with file URL artifact",
    "Task with data artifact",
    "Return message instead of task",
    "Task requiring user input",
    "Task rejected by executor",
    "Basic streaming lifecycle (CORE-STREAM-001)",
    "Message-only stream (CORE-STREAM-002)",
    "Task lifecycle stream (CORE-STREAM-003)",
    "Streaming with ordered status updates (STREAM-ORDER-001)",
    "Streaming with text artifact",
    "Streaming with file artifact",
    "Streaming with chunked artifact",
    "Long-running task for resubscription test",
];

#[test]
fn every_scenario_of_the_contract_has_a_test_and_every_step_is_understood() {
    let all = scenarios();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, COVERED, "the contract's scenarios and the tests here differ");
    for s in &all {
        assert!(!s.prefix.is_empty() && !s.steps.is_empty(), "{s:?}");
    }
    // The reader reads what the text says (one scenario spelled out).
    let data = scenario("Task with data artifact");
    assert_eq!(
        data.steps,
        [
            Step::Final { state: "TASK_STATE_COMPLETED", message: None },
            Step::Artifact(PartCheck::Data(json!({"key": "value", "count": 42}))),
        ]
    );
}

macro_rules! scenario_tests {
    ($($test:ident => $name:literal,)*) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $test() {
            run($name).await;
        }
    )*};
}

scenario_tests! {
    complete_the_task => "Complete the task",
    task_with_text_artifact => "Task with text artifact",
    task_with_file_artifact => "Task with file artifact",
    task_with_file_url_artifact => "Task with file URL artifact",
    task_with_data_artifact => "Task with data artifact",
    return_message_instead_of_task => "Return message instead of task",
    task_requiring_user_input => "Task requiring user input",
    task_rejected_by_executor => "Task rejected by executor",
    basic_streaming_lifecycle => "Basic streaming lifecycle (CORE-STREAM-001)",
    message_only_stream => "Message-only stream (CORE-STREAM-002)",
    task_lifecycle_stream => "Task lifecycle stream (CORE-STREAM-003)",
    streaming_with_ordered_status_updates => "Streaming with ordered status updates (STREAM-ORDER-001)",
    streaming_with_text_artifact => "Streaming with text artifact",
    streaming_with_file_artifact => "Streaming with file artifact",
    streaming_with_chunked_artifact => "Streaming with chunked artifact",
    long_running_task_for_resubscription => "Long-running task for resubscription test",
}
