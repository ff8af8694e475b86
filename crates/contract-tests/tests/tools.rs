//! Issue 29: the model calls tools. The embeddable `Harness` in this process with host
//! tools, the `openai` provider against the local endpoint that speaks the real wire format
//! (`contract_tests::openai_mock`, streaming `tool_calls` deltas: split arguments, several
//! calls in one response), the test dev server, real HTTP.

use axum::Router;
use contract_tests::openai_mock::MockOpenAi;
use contract_tests::{A2AClient, kind, rpc_as, state, user_text};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tiny_harness::{Config, Harness, HarnessBuilder};

const SECRET: &str = "sk-tool-secret-4242-abcdef";
const TOOL: &str = "io.github.madarauchiha-314.tiny-harness/tool";
const STATUS: &str = "io.github.madarauchiha-314.tiny-harness/status";

fn config(dir: &std::path::Path, mock: &MockOpenAi) -> Config {
    let mut c = mock.harness_config(dir, "tools");
    c.redaction.values = vec![SECRET.into()];
    c
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await;
    });
    base
}

/// The host tools of these tests; `runs` counts the calls of `weather`.
fn with_tools(builder: HarnessBuilder, runs: Arc<AtomicU32>) -> HarnessBuilder {
    let city = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    builder
        .idempotent_tool("weather", "The weather of a city", city, move |_ctx, args: Value| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(format!("Sunny in {}", args["city"].as_str().unwrap_or("?")))
            }
        })
        .tool("leak", "Says the key", json!({"type": "object"}), |_ctx, _args| async {
            Ok(format!("the key is {SECRET}"))
        })
        .tool("fail", "Always fails", json!({"type": "object"}), |_ctx, _args| async {
            Err("no such station".to_string())
        })
        .tool("sleepy", "Takes longer than the timeout", json!({"type": "object"}), |_ctx, _args| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok("woke up".to_string())
        })
}

fn texts(message: &Value) -> String {
    message["parts"].as_array().map(|p| p.iter().filter_map(|p| p["text"].as_str()).collect()).unwrap_or_default()
}

/// The tool marks of a log's status updates, as (phase, name, outcome).
fn tool_marks(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| kind(e) == "statusUpdate")
        .filter_map(|e| {
            let md = &e["statusUpdate"]["metadata"];
            let mark = md.get(TOOL)?;
            assert_eq!(md[STATUS]["substate"], "calling-tools", "{e}");
            assert_eq!(state(e), Some("TASK_STATE_WORKING"), "{e}");
            let s = |k: &str| mark[k].as_str().unwrap_or_default().to_string();
            Some((s("phase"), s("name"), s("outcome")))
        })
        .collect()
}

/// One turn: five calls in one response (a good one, one whose result carries a secret, a
/// tool error, arguments that break the schema, an unknown tool) and a call that outlives
/// `tool_timeout_secs`; every outcome is a result the model reads, in the order of the calls,
/// and the turn ends with the model's answer. Clients see each call and result as a WORKING
/// status update on the stream and in the stored log; the secret is in neither the model's
/// next request nor the store.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_runs_the_models_tool_calls_and_the_model_reads_every_outcome_in_order() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), &mock);
    c.agent.tool_timeout_secs = 2;
    let runs = Arc::new(AtomicU32::new(0));
    let harness = with_tools(Harness::builder(c), runs.clone()).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let client = A2AClient::new(&base);
    let ask = "@call weather {\"city\": \"Oslo\"}\n@call leak {}\n@call fail {}\n@call weather {\"city\": 7}\n\
               @call nosuch {}\n@call sleepy {}";
    let events = client.stream_message(user_text(ask)).await;
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:#?}");
    let answer = texts(&last["statusUpdate"]["status"]["message"]);
    let said: Vec<&str> = answer.strip_prefix("Tools said: ").expect(&answer).split(" | ").collect();
    assert_eq!(said.len(), 6, "{answer}");
    assert_eq!(said[0], "Sunny in Oslo");
    assert_eq!(said[1], "the key is [REDACTED]", "a result is redacted before the model reads it");
    assert_eq!(said[2], "the tool `fail` failed: no such station");
    assert!(said[3].contains("the arguments of `weather` do not match its input schema") && said[3].contains("/city"));
    assert!(
        said[4].starts_with("there is no tool `nosuch` (the tools are: emit_ui, fail, leak, sleepy, weather)"),
        "{}",
        said[4]
    );
    assert!(said[5].contains("was not run again"), "a call that timed out is not retried: {}", said[5]);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the call whose arguments broke the schema never ran");

    // What a client sees, live and replayed from the store.
    let marks = tool_marks(&events);
    let calls: Vec<_> = marks.iter().filter(|m| m.0 == "call").map(|m| (m.0.as_str(), m.1.as_str())).collect();
    let names = ["weather", "leak", "fail", "weather", "nosuch", "sleepy"];
    assert_eq!(calls, names.map(|n| ("call", n)));
    let outcomes: Vec<_> = marks.iter().filter(|m| m.0 == "result").map(|m| m.2.as_str()).collect();
    assert_eq!(outcomes, ["ok", "ok", "error", "error", "error", "error"]);
    let task_id = events[0]["task"]["id"].as_str().unwrap().to_string();
    // A subscription replays the stored log from its start (it stays open: the task is not
    // terminal), so it is read until the final status seen live.
    let mut stream = client.open_stream(&format!("/tasks/{task_id}:subscribe"), None, json!({})).await;
    let mut replay = Vec::new();
    while replay.len() < events.len() {
        let next = tokio::time::timeout(Duration::from_secs(20), stream.next()).await;
        replay.push(next.expect("the replay goes on").expect("an event"));
    }
    drop(stream);
    assert_eq!(tool_marks(&replay), marks, "the tool updates are in the stored log");

    // The model's second request: the calls, then each result in order; no secret anywhere.
    let seen = mock.seen();
    assert_eq!(seen.len(), 2, "one round of tools, then the answer");
    // The four host tools and the built-in `emit_ui` (on by default, issue 30).
    assert!(seen[0].body["tools"].as_array().is_some_and(|t| t.len() == 5), "{}", seen[0].body["tools"]);
    let messages = seen[1].body["messages"].as_array().unwrap();
    let tail: Vec<&str> = messages.iter().rev().take(7).rev().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(tail, ["assistant", "tool", "tool", "tool", "tool", "tool", "tool"]);
    let ids: Vec<&str> = messages.iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
    assert_eq!(ids, ["call_0_0", "call_0_1", "call_0_2", "call_0_3", "call_0_4", "call_0_5"]);
    assert!(!seen[1].body.to_string().contains(SECRET), "the secret reached the model");
    let task = rpc_as(&base, None, "GetTask", json!({"id": task_id})).await;
    assert!(!task.to_string().contains(SECRET) && !replay.iter().any(|e| e.to_string().contains(SECRET)));
    harness.stop().await;
}

/// Past `agent.max_tool_rounds` a turn ends with a status that says so, and the task takes
/// its next message; `agent.tools = false` offers the model no tools at all.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_keeps_calling_tools_is_stopped_after_max_rounds_and_tools_can_be_turned_off() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), &mock);
    c.agent.max_tool_rounds = 2;
    let runs = Arc::new(AtomicU32::new(0));
    let harness = with_tools(Harness::builder(c.clone()), runs.clone()).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let events = A2AClient::new(&base).stream_message(user_text("@loop\n@call weather {\"city\": \"Rome\"}")).await;
    let last = events.last().unwrap();
    assert_eq!(state(last), Some("TASK_STATE_INPUT_REQUIRED"), "{events:#?}");
    let answer = texts(&last["statusUpdate"]["status"]["message"]);
    assert!(answer.contains("after 2 rounds of tool calls (`agent.max_tool_rounds`)"), "{answer}");
    assert_eq!((mock.seen().len(), runs.load(Ordering::SeqCst)), (3, 2), "two rounds ran, the third was refused");
    // `/help` and `/status` list the tools the model may call (with the built-in `emit_ui`,
    // on by default: issue 30), each with its description's first line.
    let task_id = events[0]["task"]["id"].as_str().unwrap().to_string();
    let help = command(&base, &task_id, "/help").await;
    let listed = "Tools the model may call:\nemit_ui — Shows the user an interactive surface (A2UI v0.9) beside the \
                  conversation.\nfail — Always fails\nleak — Says the key";
    assert!(help.contains(listed), "{help}");
    let status = command(&base, &task_id, "/status").await;
    assert!(status.ends_with("tools: 5 (emit_ui, fail, leak, sleepy, weather)"), "{status}");
    harness.stop().await;

    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), &mock);
    c.agent.tools = false;
    let harness = with_tools(Harness::builder(c), runs.clone()).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let events = A2AClient::new(&base).stream_message(user_text("@call weather {\"city\": \"Rome\"}")).await;
    assert_eq!(state(events.last().unwrap()), Some("TASK_STATE_INPUT_REQUIRED"));
    assert!(mock.seen()[0].body.get("tools").is_none(), "no tools offered");
    assert_eq!(tool_marks(&events), []);
    let task_id = events[0]["task"]["id"].as_str().unwrap().to_string();
    let help = command(&base, &task_id, "/help").await;
    assert!(help.ends_with("Tools: none (the model answers without calling any)."), "{help}");
    assert!(command(&base, &task_id, "/status").await.ends_with("tools: none"));
    harness.stop().await;
}

/// Sets its flag when dropped: a tool's future that was aborted.
struct Dropped(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// CancelTask while a tool runs cancels its activity (the tool's future is dropped, long
/// before it would end) and the task ends CANCELED at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_cuts_a_running_tool_call() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = dropped.clone();
    let harness = Harness::builder(config(dir.path(), &mock))
        .tool("forever", "Never ends", json!({"type": "object"}), move |_ctx, _args| {
            let guard = Dropped(flag.clone());
            async move {
                tokio::time::sleep(Duration::from_secs(120)).await;
                drop(guard);
                Ok("woke up".to_string())
            }
        })
        .build()
        .unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let client = A2AClient::new(&base);
    let mut stream =
        client.open_stream("/message:stream", None, json!({"message": user_text("@call forever {}")})).await;
    let task_id = stream.next().await.unwrap()["task"]["id"].as_str().unwrap().to_string();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(20), stream.next()).await.unwrap().expect("an event");
        if e["statusUpdate"]["metadata"][TOOL]["phase"] == "call" {
            break;
        }
    }
    let asked = std::time::Instant::now();
    let canceled = rpc_as(&base, None, "CancelTask", json!({"id": task_id})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    while !dropped.load(Ordering::SeqCst) {
        assert!(asked.elapsed() < Duration::from_secs(30), "the tool's call was not cut");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(mock.seen().len() == 1, "no model call after the cancel");
    harness.stop().await;
}

/// A host policy that refuses `weather` for Mordor and records what it was asked at
/// `tool.invoked`.
struct NoMordor(std::sync::Mutex<Vec<(String, String)>>);

#[async_trait::async_trait]
impl tiny_harness::Policy for NoMordor {
    async fn check(&self, request: &tiny_harness::PolicyRequest) -> Result<tiny_harness::PolicyDecision, String> {
        use tiny_harness::{PolicyDecision, PolicyPoint};
        if request.point != PolicyPoint::ToolInvoked {
            return Ok(PolicyDecision::Allow);
        }
        let tool = request.tool.clone().unwrap_or_default();
        self.0.lock().unwrap().push((tool.clone(), request.args.clone()));
        Ok(if tool == "weather" && request.args.contains("Mordor") {
            PolicyDecision::Refuse { code: "no-travel".into(), message: "one does not simply look up Mordor".into() }
        } else {
            PolicyDecision::Allow
        })
    }
}

/// The host's `tool.invoked` policy point: a refused call never runs and the model reads the
/// refusal as its result; the policy sees the tool and its arguments, redacted.
#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_policy_refuses_a_tool_call_and_the_model_reads_the_refusal() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let policy = Arc::new(NoMordor(Default::default()));
    let harness =
        with_tools(Harness::builder(config(dir.path(), &mock)), runs.clone()).policy(policy.clone()).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let ask = format!(
        "@call weather {{\"city\": \"Mordor\"}}\n@call weather {{\"city\": \"Oslo\"}}\n@call leak {{\"key\": \"{SECRET}\"}}"
    );
    let events = A2AClient::new(&base).stream_message(user_text(&ask)).await;
    let answer = texts(&events.last().unwrap()["statusUpdate"]["status"]["message"]);
    let said: Vec<&str> = answer.strip_prefix("Tools said: ").expect(&answer).split(" | ").collect();
    assert_eq!(
        said,
        [
            "the call of `weather` was refused: the policy refused it (no-travel: one does not simply look up Mordor)",
            "Sunny in Oslo",
            "the key is [REDACTED]",
        ]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the refused call never ran");
    let outcomes: Vec<_> = tool_marks(&events).into_iter().filter(|m| m.0 == "result").map(|m| m.2).collect();
    assert_eq!(outcomes, ["error", "ok", "ok"]);
    let mut asked = policy.0.lock().unwrap().clone();
    asked.sort();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[0], ("leak".to_string(), "{\"key\":\"[REDACTED]\"}".to_string()), "the policy sees no secret");
    assert!(asked[1].1.contains("Mordor") && asked[2].1.contains("Oslo"), "{asked:?}");
    harness.stop().await;
}

const EVENT: &str = "application/vnd.tiny-harness.event+json";

/// A message from `who` to `task`, with these parts.
fn from(who: Option<&str>, task: Option<&str>, parts: Value) -> Value {
    contract_tests::message_from(who, task, parts)
}

/// The texts of a task's history, in order.
fn history_texts(task: &Value) -> Vec<String> {
    task["history"].as_array().map(|h| h.iter().map(texts).collect()).unwrap_or_default()
}

/// `ask_participant` (a built-in of `agent.builtin_tools`): the model asks bob; the task parks
/// INPUT_REQUIRED in substate `awaiting-participant` naming bob, the question its status
/// message and a history entry; alice's message meanwhile waits for the turn's end; bob's
/// answer is the call's result (it takes no turn of its own) and the turn ends with the
/// model's answer; then alice's message takes its turn. A participant the task does not
/// have is an error result; a plain client (no participants) is asked and answers too.
#[tokio::test(flavor = "multi_thread")]
async fn ask_participant_parks_the_task_until_the_asked_participant_answers() {
    let mock = MockOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path(), &mock);
    c.agent.builtin_tools = vec!["ask_participant".into()];
    let harness = Harness::builder(c).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let send = |message: Value| {
        let base = base.clone();
        async move { rpc_as(&base, None, "SendMessage", json!({"message": message})).await["result"]["task"].clone() }
    };
    let get = |id: String| {
        let base = base.clone();
        async move { rpc_as(&base, None, "GetTask", json!({"id": id})).await["result"].clone() }
    };
    let brief = json!({"kind": "task", "payload": {"name": "trip", "goal": "plan a trip",
        "participants": [{"id": "bob", "kind": "human", "role": "reporter"}]}});
    let ask = "@call ask_participant {\"participant\": \"bob\", \"question\": \"Which city?\"}";
    let parked = send(from(Some("alice"), None, json!([{"data": brief, "mediaType": EVENT}, {"text": ask}]))).await;
    let id = parked["id"].as_str().expect("a task").to_string();
    assert_eq!(parked["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{parked}");
    assert_eq!(parked["metadata"][STATUS], json!({"substate": "awaiting-participant", "participant": "bob"}));
    assert_eq!(texts(&parked["status"]["message"]), "Which city?");
    let offered = &mock.seen()[0].body["tools"];
    assert_eq!(offered[0]["function"]["name"], "ask_participant", "{offered}");

    // Alice speaks meanwhile: her message waits; bob's answers.
    let alice = tokio::spawn(send(from(Some("alice"), Some(&id), json!([{"text": "I think Rome"}]))));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !history_texts(&get(id.clone()).await).contains(&"I think Rome".to_string()) {
        assert!(std::time::Instant::now() < deadline, "alice's message was not recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(mock.seen().len(), 1, "alice's message is not the answer: the model was not called");
    send(from(Some("bob"), Some(&id), json!([{"text": "Oslo"}]))).await;
    alice.await.unwrap();
    let done = loop {
        let task = get(id.clone()).await;
        if task["metadata"][STATUS]["substate"] == "awaiting-next-message" {
            break task;
        }
        assert!(std::time::Instant::now() < deadline, "the turns did not end: {task}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        history_texts(&done),
        [ask, "Which city?", "I think Rome", "Oslo", "Tools said: bob answered: Oslo", "Hello from the mock"]
    );
    let seen = mock.seen();
    assert_eq!(seen.len(), 3, "the ask turn's two model calls, then alice's turn");
    let last = seen[1].body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["content"].as_str()), (Some("tool"), Some("bob answered: Oslo")));

    // A participant the task does not have.
    let nobody = "@call ask_participant {\"participant\": \"zed\", \"question\": \"Hi?\"}";
    let answered = send(from(Some("alice"), Some(&id), json!([{"text": nobody}]))).await;
    let said = texts(&answered["status"]["message"]);
    assert!(said.starts_with("Tools said: there is no participant `zed` on this task (participants: "), "{said}");

    // A plain client: no participant named, the next message answers.
    let plain = send(user_text("@call ask_participant {\"question\": \"Which city?\"}")).await;
    assert_eq!(plain["metadata"][STATUS], json!({"substate": "awaiting-participant"}), "{plain}");
    let mut answer = user_text("Paris");
    answer["taskId"] = plain["id"].clone();
    let answered = send(answer).await;
    assert_eq!(texts(&answered["status"]["message"]), "Tools said: the user answered: Paris", "{answered}");
    harness.stop().await;
}

/// A task parked on a question survives a SIGKILL of the harness: after the restart the
/// answer resumes the turn, and the model's context holds the call and its result once.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_survives_a_sigkill_and_the_answer_resumes_the_turn() {
    let mock = MockOpenAi::start().await;
    let mut h = contract_tests::HarnessProcess::start(contract_tests::HarnessOptions {
        agent_extra: "model = \"gpt\"\nbuiltin_tools = [\"ask_participant\"]\n".into(),
        extra_config: format!(
            "[models.gpt]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
            mock.base_url
        ),
        ..Default::default()
    })
    .await;
    let parked = h.client().send(user_text("@call ask_participant {\"question\": \"Which city?\"}"), json!({})).await;
    let task = &parked["result"]["task"];
    assert_eq!(task["metadata"][STATUS]["substate"], "awaiting-participant", "{parked}");
    let id = task["id"].as_str().unwrap().to_string();
    h.kill9();
    h.restart().await;
    let mut answer = user_text("Paris");
    answer["taskId"] = json!(id);
    // Answered at once, then read until the turn ends: a blocking send would return at the
    // first final status after its receipt, which is the question again when the kill came
    // before the workflow task that asked it was committed (it is asked again after the
    // restart, and the answer, already waiting, is taken).
    let accepted = h.client().send(answer, json!({"returnImmediately": true})).await;
    assert!(accepted["result"]["task"].is_object(), "{accepted}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = h.client().rpc("GetTask", json!({"id": id})).await;
        let said = texts(&got["result"]["status"]["message"]);
        if said == "Tools said: the user answered: Paris" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the answer did not resume the turn: {got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = mock.seen();
    assert_eq!(seen.len(), 2, "one call before the kill, one after the answer");
    let messages = seen[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "the call and its result once: {messages:?}");
}

/// The text of a command's reply, sent to the task over JSON-RPC.
async fn command(base: &str, task_id: &str, text: &str) -> String {
    let mut message = user_text(text);
    message["taskId"] = json!(task_id);
    let r = rpc_as(base, None, "SendMessage", json!({"message": message})).await;
    texts(&r["result"]["task"]["status"]["message"])
}

/// A bad or repeated tool name, or a schema that is not one, is the build's error.
#[test]
fn bad_host_tools_are_refused_by_build_naming_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let c = Config::with_data_dir(dir.path());
    let ok = |_ctx, _args| async { Ok(String::new()) };
    let err = Harness::builder(c.clone()).tool("no spaces", "d", json!({"type": "object"}), ok).build().err().unwrap();
    assert!(err.to_string().contains("`no spaces` is not a tool name"), "{err}");
    let err = Harness::builder(c.clone())
        .tool("t", "d", json!({"type": "object"}), ok)
        .tool("t", "d", json!({"type": "object"}), ok)
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("`t` is registered twice"), "{err}");
    let err =
        Harness::builder(c.clone()).tool("t", "d", json!({"type": "object", "required": 3}), ok).build().err().unwrap();
    assert!(err.to_string().contains("the input schema of tool `t` is not a JSON Schema"), "{err}");
    let err = Harness::builder(c.clone()).tool("ask_participant", "d", json!({"type": "object"}), ok).build().err();
    assert!(err.unwrap().to_string().contains("`ask_participant` is a built-in tool's"));
    let mut summon = c.clone();
    summon.agent.builtin_tools = vec!["summon".into()];
    let err = Harness::builder(summon).build().err().unwrap().to_string();
    assert!(
        err.contains(
            "`agent.builtin_tools`: `summon` is not a built-in tool (expected one of ask_participant, delegate, emit_ui)"
        ),
        "{err}"
    );
    let mut lonely = c;
    lonely.agent.builtin_tools = vec!["delegate".into()];
    let err = Harness::builder(lonely).build().err().unwrap().to_string();
    assert!(err.contains("names `delegate`, but no `[[agents]]` entry names a remote agent"), "{err}");
}
