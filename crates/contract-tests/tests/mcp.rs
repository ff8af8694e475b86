//! Issue 29: MCP tool sources. A real MCP server written with the official Python SDK
//! (`interop/mcp_server.py`, `mcp` pinned in `interop/requirements.txt`) on stdio and on
//! streamable HTTP, the `tiny-harness serve` binary with `[[mcp]]` entries, the `openai`
//! provider against the local wire-format endpoint (`@call` lines make it call tools), the
//! test dev server, real HTTP. The SIGKILL tests kill the harness while a tool runs.

use contract_tests::openai_mock::MockOpenAi;
use contract_tests::{A2AClient, HarnessOptions, HarnessProcess, state, user_text};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TOKEN: &str = "mcp-token-7d1c9e0b5a";
const BEARER: &str = "Bearer mcp-header-3f8a2b";

/// The interop venv's Python (`cargo xtask test` builds it; TINY_HARNESS_INTEROP_PYTHON).
fn python() -> PathBuf {
    std::env::var("TINY_HARNESS_INTEROP_PYTHON")
        .map(Into::into)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python"))
}

fn server_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop/mcp_server.py")
}

/// The MCP server on streamable HTTP, as a child process of the test.
struct HttpServer {
    child: tokio::process::Child,
    port: u16,
}

impl HttpServer {
    async fn start(port: u16, marks: &std::path::Path) -> Self {
        let child = tokio::process::Command::new(python())
            .arg(server_script())
            .arg("http")
            .arg(port.to_string())
            .env("MCP_MARKS", marks)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the MCP server");
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(Instant::now() < deadline, "the MCP server did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A harness whose model is the wire-format endpoint and whose tools come from `mcp`
/// (TOML of `[[mcp]]` entries); the stdio server's marks go to `marks`.
async fn harness(mock: &MockOpenAi, mcp: &str, marks: &std::path::Path) -> HarnessProcess {
    HarnessProcess::start(HarnessOptions {
        agent_extra: "model = \"gpt\"\ntool_timeout_secs = 60\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n\n{mcp}",
            mock.base_url
        ),
        env: vec![
            ("TEST_MCP_TOKEN".into(), TOKEN.into()),
            ("TEST_MCP_BEARER".into(), BEARER.into()),
            ("MCP_MARKS".into(), marks.display().to_string()),
        ],
        secrets: vec![],
        ..Default::default()
    })
    .await
}

/// A stdio `[[mcp]]` entry running the test server.
fn stdio_entry(id: &str, extra: &str) -> String {
    format!(
        "[[mcp]]\nid = \"{id}\"\ncommand = {}\nargs = [{}]\n{extra}\n",
        json!(python().display().to_string()),
        json!(server_script().display().to_string())
    )
}

fn texts(message: &Value) -> String {
    message["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default()
}

/// The results the model read, from its `Tools said: a | b` answer.
fn said(events: &[Value]) -> Vec<String> {
    let last = events.last().expect("events");
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:#?}");
    let answer = texts(&last["statusUpdate"]["status"]["message"]);
    answer.strip_prefix("Tools said: ").unwrap_or_else(|| panic!("{answer}")).split(" | ").map(String::from).collect()
}

fn in_task(text: &str, task: &str) -> Value {
    let mut m = user_text(text);
    m["taskId"] = json!(task);
    m
}

fn marks(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(String::from).collect()
}

/// A push config gets the tool calls as a client of the stream does: a WORKING status update
/// per call and per result (substate `calling-tools`, the tool mark with the outcome and the
/// redacted argument summary), in order, then the turn's answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_push_config_gets_each_tool_call_and_result() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marks_at = dir.path().join("marks");
    let h = harness(&mock, &stdio_entry("notes", ""), &marks_at).await;
    let (url, posts) = contract_tests::webhook::webhook().await;
    let config = json!({"url": format!("{url}/tools"), "token": "tok-tools"});
    let message = user_text("@call notes__lookup {\"key\": \"tea\"}\n@call notes__broken {}");
    let answer = h.client().send(message, json!({"taskPushNotificationConfig": config})).await;
    let task = answer["result"]["task"]["id"].as_str().expect("a task").to_string();
    let tool = "io.github.madarauchiha-314.tiny-harness/tool";
    let deadline = Instant::now() + Duration::from_secs(30);
    let marks = loop {
        let bodies: Vec<Value> = posts.lock().unwrap().iter().filter(|p| p.0 == "tools").map(|p| p.3.clone()).collect();
        let ended = bodies.iter().any(|b| b["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED");
        if ended {
            break bodies
                .iter()
                .filter(|b| b["statusUpdate"]["taskId"] == json!(task))
                .filter_map(|b| b["statusUpdate"]["metadata"].get(tool).cloned())
                .collect::<Vec<Value>>();
        }
        assert!(Instant::now() < deadline, "the turn's pushes: {bodies:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let seen: Vec<(String, String, String)> = marks
        .iter()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (s("phase"), s("name"), s("outcome"))
        })
        .collect();
    let t = |phase: &str, name: &str, outcome: &str| (phase.to_string(), name.to_string(), outcome.to_string());
    assert_eq!(
        seen,
        [
            t("call", "notes__lookup", ""),
            t("call", "notes__broken", ""),
            t("result", "notes__lookup", "ok"),
            t("result", "notes__broken", "error"),
        ]
    );
    assert_eq!(marks[2]["arguments"], r#"{"key": "tea"}"#);
}

/// Both transports: tools listed at start as `<id>__<tool>` (`exclude` and `tools` applied),
/// called with the arguments the model gave, a tool's error an error result; `env` and
/// `headers_env` reach the server from the harness's variables, and a configured secret in a
/// tool's result never reaches the model or the store.
#[tokio::test(flavor = "multi_thread")]
async fn tools_of_a_stdio_and_a_streamable_http_server_answer_the_model() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marks_at = dir.path().join("marks");
    let web = HttpServer::start(tiny_harness::temporal_dev::free_port(), &dir.path().join("web-marks")).await;
    let mcp = format!(
        "{}\n[[mcp]]\nid = \"web\"\nurl = \"{}\"\nheaders_env = {{ Authorization = \"TEST_MCP_BEARER\" }}\n\
         tools = [\"lookup\", \"authorization\"]\n",
        stdio_entry("notes", "env = { MCP_TOKEN = \"TEST_MCP_TOKEN\" }\nexclude = [\"hidden\"]"),
        web.url()
    );
    let h = harness(&mock, &mcp, &marks_at).await;
    let client = h.client();
    let ask = "@call notes__lookup {\"key\": \"tea\"}\n@call web__lookup {\"key\": \"jam\"}\n\
               @call web__authorization {}\n@call notes__token {}\n@call notes__broken {}\n\
               @call notes__lookup {\"key\": 5}\n@call notes__hidden {}";
    let events = client.stream_message(user_text(ask)).await;
    let said = said(&events);
    assert_eq!(said.len(), 7, "{said:?}");
    assert_eq!(said[0], "tea is on the top shelf");
    assert_eq!(said[1], "jam is in the cellar");
    assert_eq!(said[2], "called with [REDACTED]", "a header value read from a variable is a secret");
    assert_eq!(said[3], "my token is [REDACTED]", "an env value read from a variable is a secret");
    assert!(
        said[4].starts_with("the tool `notes__broken` failed:") && said[4].contains("the shelf collapsed"),
        "{}",
        said[4]
    );
    assert!(said[5].contains("do not match its input schema") && said[5].contains("/key"), "{}", said[5]);
    assert!(said[6].starts_with("there is no tool `notes__hidden`"), "{}", said[6]);
    for listed in ["notes__lookup", "notes__slow_note", "web__lookup", "web__authorization"] {
        assert!(said[6].contains(listed), "{listed} is offered: {}", said[6]);
    }
    assert!(!said[6].contains("web__note"), "`tools` keeps only the named ones: {}", said[6]);
    assert_eq!(marks(&marks_at), ["start lookup tea"], "the call whose arguments broke the schema never ran");

    let offered: Vec<String> = mock.seen()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(offered.contains(&"notes__slow_lookup".to_string()) && !offered.contains(&"notes__hidden".into()));
    let lookup = mock.seen()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "web__lookup")
        .cloned()
        .unwrap();
    assert_eq!(lookup["function"]["description"], "Where a thing is kept.");
    assert_eq!(lookup["function"]["parameters"]["required"], json!(["key"]), "the server's input schema: {lookup}");
    for seen in mock.seen() {
        let body = seen.body.to_string();
        assert!(!body.contains(TOKEN) && !body.contains("mcp-header-3f8a2b"), "a secret reached the model");
    }
    let task = contract_tests::task_id(&events);
    let stored = client.rpc("GetTask", json!({"id": task})).await;
    assert!(!stored.to_string().contains(TOKEN));
    let log = h.store().await.events_after(&task, 0, 10_000).await.unwrap();
    assert!(!format!("{log:?}").contains(TOKEN), "a secret is in the stored log");
    web.stop().await;
}

/// `notifications/tools/list_changed` lists the tools again: a tool the server adds is the
/// model's on its next request.
#[tokio::test(flavor = "multi_thread")]
async fn a_tools_list_changed_notification_offers_the_new_tool() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = harness(&mock, &stdio_entry("notes", ""), &dir.path().join("marks")).await;
    let client = h.client();
    let events = client.stream_message(user_text("@call notes__grow {}")).await;
    assert_eq!(said(&events), ["grew a tool"]);
    let task = contract_tests::task_id(&events);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let events = client.stream_message(in_task("@call notes__added {}", &task)).await;
        let said = said(&events);
        if said == ["the added tool answers"] {
            break;
        }
        assert!(said[0].starts_with("there is no tool"), "{said:?}");
        assert!(Instant::now() < deadline, "the new tool was never listed: {said:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A stdio server that dies answers the call it died in with an error result, and the next
/// call starts it again; an HTTP server that is down answers an error result at once (the
/// turn goes on), and is used again once it is back.
#[tokio::test(flavor = "multi_thread")]
async fn a_source_that_dies_answers_errors_and_is_used_again_when_back() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marks_at = dir.path().join("marks");
    let port = tiny_harness::temporal_dev::free_port();
    let web = HttpServer::start(port, &dir.path().join("web-marks")).await;
    let mcp = format!("{}\n[[mcp]]\nid = \"web\"\nurl = \"{}\"\n", stdio_entry("notes", ""), web.url());
    let h = harness(&mock, &mcp, &marks_at).await;
    let client = h.client();

    let events = client.stream_message(user_text("@call notes__crash {}")).await;
    let said_first = said(&events);
    assert!(said_first[0].starts_with("the tool `notes__crash` failed:"), "{said_first:?}");
    let task = contract_tests::task_id(&events);
    let events = client.stream_message(in_task("@call notes__lookup {\"key\": \"tea\"}", &task)).await;
    assert_eq!(said(&events), ["tea is on the top shelf"], "the stdio server was started again");
    assert_eq!(marks(&marks_at), ["start crash", "start lookup tea"]);

    web.stop().await;
    let started = Instant::now();
    let events = client.stream_message(in_task("@call web__lookup {\"key\": \"jam\"}", &task)).await;
    let down = said(&events);
    assert!(down[0].starts_with("the tool `web__lookup` failed:") && down[0].contains("web"), "{down:?}");
    assert!(started.elapsed() < Duration::from_secs(30), "a source that is down does not hang the turn");

    let _web = HttpServer::start(port, &dir.path().join("web-marks")).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let events = client.stream_message(in_task("@call web__lookup {\"key\": \"jam\"}", &task)).await;
        let said = said(&events);
        if said == ["jam is in the cellar"] {
            break;
        }
        assert!(Instant::now() < deadline, "the HTTP source was never used again: {said:?}");
    }
}

/// Waits until the marks file has `line`.
async fn wait_for_mark(path: &std::path::Path, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marks(path).iter().any(|m| m == line) {
        assert!(Instant::now() < deadline, "no `{line}` in {:?}", marks(path));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the task answers (INPUT_REQUIRED with the model's text) and returns it.
async fn final_answer(client: &A2AClient, task: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let t = client.rpc("GetTask", json!({"id": task})).await;
        let status = &t["result"]["status"];
        if status["state"] == "TASK_STATE_INPUT_REQUIRED" {
            return texts(&status["message"]);
        }
        assert!(Instant::now() < deadline, "the task never answered: {t}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// SIGKILL of the harness while two tool calls of one response run: the idempotent one
/// (`readOnlyHint`) runs once more after the restart, the other is never run again and the
/// model reads that it was not; the model's next request holds each call and each result
/// once, in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_sigkill_during_tool_calls_reruns_only_the_idempotent_one_and_the_context_stays_exact() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marks_at = dir.path().join("marks");
    let mut h = harness(&mock, &stdio_entry("notes", ""), &marks_at).await;
    let client = h.client();
    let mut stream = client
        .open_stream(
            "/message:stream",
            None,
            json!({"message": user_text(
                "@call notes__slow_lookup {\"key\": \"tea\", \"seconds\": 4}\n\
                 @call notes__slow_note {\"text\": \"buy milk\", \"seconds\": 4}"
            )}),
        )
        .await;
    let first = stream.next().await.expect("the task event");
    let task = first["task"]["id"].as_str().expect("a task").to_string();
    wait_for_mark(&marks_at, "start slow_lookup tea").await;
    wait_for_mark(&marks_at, "start slow_note buy milk").await;
    h.kill9();
    drop(stream);
    h.restart().await;

    let answer = final_answer(&client, &task).await;
    let said: Vec<&str> =
        answer.strip_prefix("Tools said: ").unwrap_or_else(|| panic!("{answer}")).split(" | ").collect();
    assert_eq!(said.len(), 2, "{answer}");
    assert_eq!(said[0], "tea is on the top shelf", "the idempotent call ran again and answered");
    assert!(said[1].contains("was not run again") && said[1].contains("notes__slow_note"), "{}", said[1]);
    let m = marks(&marks_at);
    let count = |line: &str| m.iter().filter(|l| *l == line).count();
    assert_eq!(count("start slow_lookup tea"), 2, "the idempotent call runs at most once more: {m:?}");
    assert_eq!(count("start slow_note buy milk"), 1, "the other is never run again: {m:?}");

    let seen = mock.seen();
    let last = &seen.last().unwrap().body["messages"];
    let calls: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let results: Vec<&str> = last.as_array().unwrap().iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
    assert_eq!(calls, ["call_0_0", "call_0_1"], "each call once: {last}");
    assert_eq!(results, ["call_0_0", "call_0_1"], "each result once, in order: {last}");
    assert_eq!(seen.len(), 2, "the model was asked once for the calls and once for the answer: {seen:#?}");
}
