//! Hosting and protection (issue 4: S13, S16, S17, S18, S19, S20, D4), each over real HTTP:
//! the embeddable `Harness` in this process, served by axum on a free port, against the
//! test dev server.

#[path = "../../tiny-harness/examples/host.rs"]
#[allow(dead_code)]
mod host;

use axum::Router;
use contract_tests::{A2AClient, rpc_as, temporal_address, user_text};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tiny_harness::{Config, Harness, ParticipantResolver, RouteOptions, TemporalMode, harness_router};

fn config(dir: &std::path::Path) -> Config {
    let mut c = Config::with_data_dir(dir);
    c.temporal.mode = TemporalMode::Remote;
    c.temporal.address = temporal_address().to_string();
    c.temporal.task_queue = format!("hosting-{}", uuid());
    c.server.port = 0;
    c
}

fn uuid() -> String {
    format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos())
}

/// Serves an app on a free port with peer addresses; returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await;
    });
    base
}

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::Client::new().get(url).header("A2A-Version", "1.0").send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_router_exists_before_start_is_503_until_started_and_again_after_stop() {
    let dir = tempfile::tempdir().unwrap();
    let harness = Harness::new(config(dir.path())).unwrap();
    let base = serve(harness.router()).await;
    for path in ["/.well-known/agent-card.json", "/a2a/rest/tasks", "/no/such/route", "/openapi.json"] {
        let (status, body) = get(&format!("{base}{path}")).await;
        assert_eq!(status, 503, "{path}: {body}");
        assert!(body.contains("not started"), "{body}");
    }
    harness.start().await.unwrap();
    assert_eq!(get(&format!("{base}/.well-known/agent-card.json")).await.0, 200);
    let sent = A2AClient::new(&base).send(user_text("hello"), json!({})).await;
    assert_eq!(sent["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{sent}");
    harness.stop().await;
    assert_eq!(get(&format!("{base}/.well-known/agent-card.json")).await.0, 503);
}

#[tokio::test(flavor = "multi_thread")]
async fn mounted_elsewhere_than_its_prefix_every_request_is_500_naming_both_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.prefix = "/agents/helper".into();
    let harness = Harness::new(c).unwrap();
    let wrong = serve(Router::new().nest("/elsewhere", harness.router())).await;
    let (status, body) = get(&format!("{wrong}/elsewhere/.well-known/agent-card.json")).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("/elsewhere") && body.contains("/agents/helper"), "{body}");
    let unmounted = serve(harness.router()).await;
    let (status, body) = get(&format!("{unmounted}/.well-known/agent-card.json")).await;
    assert_eq!(status, 500, "{body}");
    let nested_host_router = serve(Router::new().nest("/x", harness_router(&harness))).await;
    let (status, body) = get(&format!("{nested_host_router}/x/agents/helper/.well-known/agent-card.json")).await;
    assert_eq!(status, 500, "{body}");

    let right = serve(Router::new().nest("/agents/helper", harness.router())).await;
    assert_eq!(get(&format!("{right}/agents/helper/.well-known/agent-card.json")).await.0, 503, "not started yet");
}

#[tokio::test(flavor = "multi_thread")]
async fn running_harness_serves_at_its_prefix_and_the_card_carries_the_public_url() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.prefix = "/agents/helper".into();
    let running = tiny_harness::running_harness(c).await.unwrap();
    let root = format!("{}/agents/helper", running.address);
    let (status, card) = get(&format!("{root}/.well-known/agent-card.json")).await;
    assert_eq!(status, 200, "{card}");
    let card: Value = serde_json::from_str(&card).unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{root}/a2a/jsonrpc"));
    assert_eq!(card["supportedInterfaces"][1]["url"], format!("{root}/a2a/rest"));
    assert_eq!(running.harness.public_url(), root);
    let sent = A2AClient::new(&root).send(user_text("hi"), json!({})).await;
    assert!(sent["result"]["task"]["id"].is_string(), "{sent}");
    let address = running.address.clone();
    running.stop().await.unwrap();
    assert!(reqwest::get(format!("{address}/agents/helper/.well-known/agent-card.json")).await.is_err(), "stopped");
}

/// `Harness::serve` runs its accept loop as a task of the runtime (issue 31); a host that
/// drops the `serve` future (a `select!` that took another branch) still closes the port.
#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_serve_future_stops_accepting() {
    let dir = tempfile::tempdir().unwrap();
    let harness = Harness::new(config(dir.path())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = harness.clone();
    let serving = tokio::spawn(async move { served.serve(listener, std::future::pending()).await });
    let mut card = None;
    for _ in 0..200 {
        match reqwest::get(format!("{base}/.well-known/agent-card.json")).await {
            Ok(r) => {
                card = Some(r.status().as_u16());
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert_eq!(card, Some(200), "served");
    serving.abort();
    let _ = serving.await;
    let after = reqwest::Client::new()
        .get(format!("{base}/.well-known/agent-card.json"))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(after.is_err(), "still accepting after the serve future was dropped: {after:?}");
    harness.stop().await;
}

#[test]
fn a_prefix_that_disagrees_with_base_url_is_a_config_error_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.prefix = "/agents/helper".into();
    c.server.base_url = Some("https://agents.example.com/agents/other".into());
    let err = Harness::new(c).err().expect("a config error").to_string();
    assert!(err.contains("/agents/other") && err.contains("/agents/helper"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_example_host_mounts_its_own_route_and_the_harness_side_by_side_with_a_tagged_openapi() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = host::helper_config(dir.path(), 0);
    c.temporal = config(dir.path()).temporal;
    let harness = Harness::new(c).unwrap();
    let base = serve(host::app(&harness)).await;
    assert_eq!(get(&format!("{base}/health")).await, (200, "ok".to_string()), "the host's route works before start");
    assert_eq!(get(&format!("{base}/agents/helper/.well-known/agent-card.json")).await.0, 503);
    harness.start().await.unwrap();
    let (status, doc) = get(&format!("{base}/agents/helper/openapi.json")).await;
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.contains_key("/agents/helper/a2a/jsonrpc") && paths.contains_key("/agents/helper/a2a/rest/tasks"));
    for (path, item) in paths {
        for (_, op) in item.as_object().unwrap() {
            assert_eq!(op["tags"], json!(["A2A: helper"]), "{path}");
        }
    }
    let c = A2AClient::new(&format!("{base}/agents/helper"));
    let sent = c.send(user_text("through the host"), json!({})).await;
    assert!(sent["result"]["task"]["id"].is_string(), "{sent}");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_mounted_router_serves_neither_cors_nor_ui_while_the_own_router_does() {
    let dir = tempfile::tempdir().unwrap();
    let ui = tempfile::tempdir().unwrap();
    std::fs::write(ui.path().join("index.html"), "<h1>renderer</h1>").unwrap();
    let mut c = config(dir.path());
    c.server.cors_origins = vec!["http://localhost:5173".into()];
    c.server.ui_dir = Some(ui.path().to_path_buf());
    let harness = Harness::new(c).unwrap();
    harness.start().await.unwrap();
    let own = serve(harness.router()).await;
    let hosted = serve(harness_router(&harness)).await;
    let preflight = |base: String| async move {
        reqwest::Client::new()
            .request(Method::OPTIONS, format!("{base}/a2a/jsonrpc"))
            .header("origin", "http://localhost:5173")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "a2a-version,content-type")
            .send()
            .await
            .unwrap()
    };
    let answered = preflight(own.clone()).await;
    assert_eq!(answered.headers().get("access-control-allow-origin").unwrap(), "http://localhost:5173");
    let allowed = answered.headers().get("access-control-allow-headers").unwrap().to_str().unwrap().to_string();
    assert!(allowed.contains("a2a-version"), "{allowed}");
    assert!(preflight(hosted.clone()).await.headers().get("access-control-allow-origin").is_none());
    assert_eq!(get(&format!("{own}/ui/index.html")).await, (200, "<h1>renderer</h1>".to_string()));
    assert_eq!(get(&format!("{hosted}/ui/index.html")).await.0, 404);
    harness.stop().await;
}

/// Issue 34: under a prefix, `ui_dir`'s files are served, a directory's redirect keeps the
/// prefix and `/ui`, and a symlink that points out of the directory is a 404.
#[tokio::test(flavor = "multi_thread")]
async fn the_ui_redirects_under_its_prefix_and_refuses_symlinks_that_leave_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ui = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ui.path().join("docs")).unwrap();
    std::fs::write(ui.path().join("docs/index.html"), "docs").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not for the web").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ui.path().join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ui.path().join("out")).unwrap();
    std::fs::write(ui.path().join("inside.txt"), "fine").unwrap();
    std::os::unix::fs::symlink(ui.path().join("inside.txt"), ui.path().join("alias.txt")).unwrap();
    let mut c = config(dir.path());
    c.server.prefix = "/agents/helper".into();
    c.server.ui_dir = Some(ui.path().to_path_buf());
    let harness = Harness::new(c).unwrap();
    harness.start().await.unwrap();
    let base = serve(Router::new().nest("/agents/helper", harness.router())).await;
    let ui_base = format!("{base}/agents/helper/ui");
    assert_eq!(get(&format!("{ui_base}/docs/index.html")).await, (200, "docs".to_string()));
    assert_eq!(get(&format!("{ui_base}/alias.txt")).await, (200, "fine".to_string()), "a link inside is served");
    for path in ["/leak.txt", "/out/secret.txt", "/%6Ceak.txt"] {
        let (status, body) = get(&format!("{ui_base}{path}")).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert!(!body.contains("not for the web"), "{path}");
    }
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = no_redirects.get(format!("{ui_base}/docs")).send().await.unwrap();
    assert!(r.status().is_redirection(), "{}", r.status());
    assert_eq!(r.headers()["location"], "/agents/helper/ui/docs/", "the redirect keeps the prefix");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn route_options_turn_off_limits_cors_monitor_and_ui_one_by_one() {
    let ui = tempfile::tempdir().unwrap();
    std::fs::write(ui.path().join("index.html"), "ui").unwrap();
    let run = |options: RouteOptions| {
        let ui = ui.path().to_path_buf();
        async move {
            let dir = tempfile::tempdir().unwrap();
            let mut c = config(dir.path());
            c.server.cors_origins = vec!["http://localhost:5173".into()];
            c.server.ui_dir = Some(ui);
            c.server.max_request_bytes = 64;
            let harness = Harness::builder(c).route_options(options).build().unwrap();
            harness.start().await.unwrap();
            let base = serve(harness.router()).await;
            let big = reqwest::Client::new()
                .post(format!("{base}/a2a/jsonrpc"))
                .header("A2A-Version", "1.0")
                .body(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x".repeat(100)}})
                        .to_string(),
                )
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            let cors = reqwest::Client::new()
                .request(Method::OPTIONS, format!("{base}/a2a/jsonrpc"))
                .header("origin", "http://localhost:5173")
                .header("access-control-request-method", "POST")
                .send()
                .await
                .unwrap()
                .headers()
                .contains_key("access-control-allow-origin");
            let monitor = get(&format!("{base}/_monitor")).await.0;
            let ui = get(&format!("{base}/ui/index.html")).await.0;
            let push = reqwest::Client::new()
                .post(format!("{base}/a2a/push/some-task"))
                .body("{}")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            harness.stop().await;
            (big, cors, monitor, ui, push, dir)
        }
    };
    let all = run(RouteOptions::default()).await;
    assert_eq!(
        (all.0, all.1, all.2, all.3, all.4),
        (413, true, 200, 200, 400),
        "`{{}}` reaches the push receiver: 400"
    );
    let no_limits = run(RouteOptions { limits: false, ..Default::default() }).await;
    assert_eq!(no_limits.0, 200, "without limits the big body reaches the route (a JSON-RPC error, HTTP 200)");
    assert!(!run(RouteOptions { cors: false, ..Default::default() }).await.1);
    assert_eq!(run(RouteOptions { monitor: false, ..Default::default() }).await.2, 404);
    assert_eq!(run(RouteOptions { ui: false, ..Default::default() }).await.3, 404);
    assert_eq!(run(RouteOptions { push_route: false, ..Default::default() }).await.4, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_or_chunked_body_is_413_and_a_fast_peer_is_429_before_any_temporal_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.max_request_bytes = 2048;
    c.server.rate_limit_per_minute = 5;
    let harness = Harness::new(c).unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let http = reqwest::Client::new();
    let big = json!({"message": user_text(&"x".repeat(4096))}).to_string();
    let declared = http
        .post(format!("{base}/a2a/rest/message:send"))
        .header("A2A-Version", "1.0")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(declared.status(), 413);
    assert!(declared.text().await.unwrap().contains("max_request_bytes"));
    let chunks: Vec<Result<String, std::io::Error>> =
        big.as_bytes().chunks(512).map(|c| Ok(String::from_utf8_lossy(c).to_string())).collect();
    let chunked = http
        .post(format!("{base}/a2a/rest/message:send"))
        .header("A2A-Version", "1.0")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(chunked.status(), 413, "a chunked body without Content-Length is measured as it arrives");
    let store = harness.store().await.unwrap();
    assert_eq!(store.inbox_count().await.unwrap(), 0, "no refused body reached the handler (no audit row)");
    assert!(store.task_ids().await.unwrap().is_empty());

    // A fresh connection: the server closed the one whose body it refused.
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..5 {
        let r = http.get(format!("{base}/a2a/rest/tasks")).header("A2A-Version", "1.0").send().await.unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429], "5 per minute: two 413s and three reads, then 429");
    assert!(retry_after.is_some_and(|s| (1..=60).contains(&s)), "{retry_after:?}");
    harness.stop().await;
}

/// Resolves `Authorization: Bearer <id>`; `Bearer boom` is a resolver failure.
struct BearerResolver;

#[async_trait::async_trait]
impl ParticipantResolver for BearerResolver {
    async fn resolve(&self, headers: &axum::http::HeaderMap) -> Result<Option<String>, String> {
        match headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")) {
            Some("boom") => Err("the identity service is down".into()),
            Some(id) => Ok(Some(id.to_string())),
            None => Ok(None),
        }
    }
}

/// Issue 28, point 4: with a resolver (the host authenticates), a caller it does not resolve
/// is a stranger to every task on both bindings: every task verb is refused as for a task it
/// is not on, ListTasks shows nothing, the extended card is refused; the public card and
/// `/_ready` stay public. Point 5: its refused message leaves no configured secret in the
/// store, nor does a malformed one.
#[tokio::test(flavor = "multi_thread")]
async fn with_a_resolver_every_verb_of_an_unresolved_caller_is_refused_on_both_bindings() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.push.key_file = None;
    c.push.generate_key = true;
    c.redaction.values = vec!["sk-live-ZX81-secret".into()];
    c.card.extended = Some(Default::default());
    let harness = Harness::builder(c).participant_resolver(Arc::new(BearerResolver)).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let alice = Some(("authorization", "Bearer alice"));
    let opened = rpc_as(&base, alice, "SendMessage", json!({"message": user_text("hi")})).await;
    let id = opened["result"]["task"]["id"].as_str().expect("a task").to_string();
    let config = rpc_as(
        &base,
        alice,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": "https://hooks.example.com/a", "token": "t"}),
    )
    .await;
    let config_id = config["result"]["id"].as_str().expect("a config").to_string();

    // Unresolved: no header at all, and a spoofed participant header (ignored with a resolver).
    for header in [None, Some(("x-participant-id", "alice"))] {
        for (method, params) in [
            ("GetTask", json!({"id": id})),
            ("CancelTask", json!({"id": id})),
            ("SubscribeToTask", json!({"id": id})),
            ("CreateTaskPushNotificationConfig", json!({"taskId": id, "url": "https://evil.example.com/x"})),
            ("GetTaskPushNotificationConfig", json!({"taskId": id, "id": config_id})),
            ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
            ("DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": config_id})),
        ] {
            let answer = rpc_as(&base, header, method, params).await;
            assert_eq!(answer["error"]["code"], -32001, "{method} {header:?}: {answer}");
        }
        let follow_up = json!({"message": {"messageId": "m-x", "role": "ROLE_USER", "taskId": id,
            "parts": [{"text": "let me in"}]}});
        let answer = rpc_as(&base, header, "SendMessage", follow_up).await;
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let listed = rpc_as(&base, header, "ListTasks", json!({})).await;
        assert_eq!((listed["result"]["tasks"].clone(), listed["result"]["totalSize"].clone()), (json!([]), json!(0)));
        let card = rpc_as(&base, header, "GetExtendedAgentCard", json!({})).await;
        assert_eq!(card["error"]["code"], -32004, "{card}");
    }
    // The same over HTTP+JSON.
    let rest = |method: Method, path: String, body: Option<Value>| {
        let base = base.clone();
        async move {
            let mut r =
                reqwest::Client::new().request(method, format!("{base}/a2a/rest{path}")).header("A2A-Version", "1.0");
            if let Some(b) = body {
                r = r.header("content-type", "application/json").body(b.to_string());
            }
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    for (method, path, body) in [
        (Method::GET, format!("/tasks/{id}"), None),
        (Method::POST, format!("/tasks/{id}:cancel"), Some(json!({}))),
        (Method::POST, format!("/tasks/{id}:subscribe"), Some(json!({}))),
        (
            Method::POST,
            format!("/tasks/{id}/pushNotificationConfigs"),
            Some(json!({"url": "https://evil.example.com"})),
        ),
        (Method::GET, format!("/tasks/{id}/pushNotificationConfigs/{config_id}"), None),
        (Method::GET, format!("/tasks/{id}/pushNotificationConfigs"), None),
        (Method::DELETE, format!("/tasks/{id}/pushNotificationConfigs/{config_id}"), None),
    ] {
        let (status, text) = rest(method.clone(), path.clone(), body).await;
        assert_eq!(status, 404, "{method} {path}: {text}");
    }
    let (status, text) = rest(Method::GET, "/tasks".into(), None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["totalSize"], 0, "{text}");
    assert_eq!(rest(Method::GET, "/extendedAgentCard".into(), None).await.0, 400);
    let secret = "sk-live-ZX81-secret";
    let carrying = json!({"message": user_text(&format!("over rest: {secret}"))});
    let (status, text) = rest(Method::POST, "/message:send".into(), Some(carrying)).await;
    assert_eq!(status, 400, "{text}");
    // Nothing changed for alice: her task goes on and her config is there.
    let hers = rpc_as(&base, alice, "GetTask", json!({"id": id})).await;
    assert_eq!(hers["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{hers}");
    let configs = rpc_as(&base, alice, "ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
    assert_eq!(configs["result"]["configs"].as_array().map(Vec::len), Some(1), "{configs}");
    assert!(rpc_as(&base, alice, "GetExtendedAgentCard", json!({})).await["result"]["name"].is_string());
    // Public: the card and readiness.
    assert_eq!(get(&format!("{base}/.well-known/agent-card.json")).await.0, 200);
    assert_eq!(get(&format!("{base}/_ready")).await.0, 200);

    // Point 5: refused messages carrying a configured secret are audited redacted.
    let unresolved = json!({"message": user_text(&format!("my key is {secret}"))});
    assert_eq!(rpc_as(&base, None, "SendMessage", unresolved).await["error"]["code"], -32602);
    let malformed = json!({"message": {"messageId": "m-bad", "parts": [{"text": secret}]}});
    assert_eq!(rpc_as(&base, alice, "SendMessage", malformed).await["error"]["code"], -32602);
    let store = harness.store().await.unwrap();
    assert!(store.inbox_count().await.unwrap() >= 4, "the refusals were audited");
    harness.stop().await;
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("harness.db") {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    assert!(!bytes.is_empty(), "the store was read");
    assert!(String::from_utf8_lossy(&bytes).contains("[REDACTED]"), "the refused messages are audited");
    assert!(!String::from_utf8_lossy(&bytes).contains(secret), "a configured secret reached the store");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_the_caller_is_not_on_is_not_found_for_every_verb_and_absent_from_lists() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.push.key_file = None;
    c.push.generate_key = true;
    let harness = Harness::new(c).unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let alice = Some(("x-participant-id", "alice"));
    let bob = Some(("x-participant-id", "bob"));
    let sent = rpc_as(&base, alice, "SendMessage", json!({"message": user_text("alice's task")})).await;
    let id = sent["result"]["task"]["id"].as_str().expect("a task").to_string();

    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
        (
            "SendMessage",
            json!({"message": {"messageId": "m-bob", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "hi"}]}}),
        ),
        ("CreateTaskPushNotificationConfig", json!({"taskId": id, "url": "https://h.example.com"})),
        ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
    ] {
        let answer = rpc_as(&base, bob, method, params).await;
        assert_eq!(answer["error"]["code"], -32001, "bob {method}: {answer}");
    }
    assert_eq!(rpc_as(&base, alice, "GetTask", json!({"id": id})).await["result"]["id"], id.as_str());
    assert_eq!(rpc_as(&base, None, "GetTask", json!({"id": id})).await["result"]["id"], id.as_str(), "anonymous (D4)");
    let bobs = rpc_as(&base, bob, "ListTasks", json!({})).await;
    assert_eq!(bobs["result"]["tasks"], json!([]), "{bobs}");
    let alices = rpc_as(&base, alice, "ListTasks", json!({})).await;
    assert_eq!(alices["result"]["tasks"][0]["id"], id.as_str());

    // metadata.participant_id names the sender when no header does.
    let mut m = user_text("as carol");
    m["metadata"] = json!({"participant_id": "carol"});
    let carols = rpc_as(&base, None, "SendMessage", json!({"message": m})).await;
    let carols = carols["result"]["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(rpc_as(&base, alice, "GetTask", json!({"id": carols})).await["error"]["code"], -32001);

    // A watcher sees the task but may not cancel it.
    let store = harness.store().await.unwrap();
    store.add_participants(&id, &[("walt".into(), "watcher".into())]).await.unwrap();
    let walt = Some(("x-participant-id", "walt"));
    assert_eq!(rpc_as(&base, walt, "GetTask", json!({"id": id})).await["result"]["id"], id.as_str());
    let cancel = rpc_as(&base, walt, "CancelTask", json!({"id": id})).await;
    assert_eq!(cancel["error"]["code"], -32004, "{cancel}");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_resolver_the_header_is_ignored_unresolved_messages_are_refused_and_resolver_errors_fail() {
    let dir = tempfile::tempdir().unwrap();
    let harness = Harness::builder(config(dir.path())).participant_resolver(Arc::new(BearerResolver)).build().unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let mut named = user_text("who am I");
    named["metadata"] = json!({"participant_id": "alice"});
    let refused = rpc_as(&base, Some(("x-participant-id", "alice")), "SendMessage", json!({"message": named})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("no participant"), "{refused}");
    let failed =
        rpc_as(&base, Some(("authorization", "Bearer boom")), "SendMessage", json!({"message": user_text("x")})).await;
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert!(failed["error"]["message"].as_str().unwrap().contains("identity service is down"), "{failed}");
    let store = harness.store().await.unwrap();
    assert!(store.task_ids().await.unwrap().is_empty(), "nothing was started for a refused or failed request");

    let ok = rpc_as(&base, Some(("authorization", "Bearer alice")), "SendMessage", json!({"message": user_text("hi")}))
        .await;
    let id = ok["result"]["task"]["id"].as_str().expect("a task").to_string();
    let spoofed = rpc_as(&base, Some(("x-participant-id", "alice")), "ListTasks", json!({})).await;
    assert_eq!(spoofed["result"]["totalSize"], 0, "the header is ignored: an unresolved reader sees no task");
    let mallory = rpc_as(&base, Some(("authorization", "Bearer mallory")), "GetTask", json!({"id": id})).await;
    assert_eq!(mallory["error"]["code"], -32001);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_harnesses_on_one_temporal_server_each_answer_the_others_tasks_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let shared_store = format!("sqlite://{}", dir.path().join("shared.db").display());
    let make = |queue: &str, store: Option<String>| {
        let d = tempfile::tempdir().unwrap();
        let mut c = config(d.path());
        c.temporal.task_queue = format!("{queue}-{}", uuid());
        c.store.url = store;
        c.push.generate_key = true;
        (Harness::new(c).unwrap(), d)
    };
    let (a, _da) = make("owner-a", Some(shared_store.clone()));
    let (b, _db) = make("owner-b", Some(shared_store));
    let (c, _dc) = make("owner-c", None); // its own store: knows A's tasks only through Temporal
    for h in [&a, &b, &c] {
        h.start().await.unwrap();
    }
    let (base_a, base_b, base_c) = (serve(a.router()).await, serve(b.router()).await, serve(c.router()).await);
    let sent = rpc_as(&base_a, None, "SendMessage", json!({"message": user_text("A's task")})).await;
    let id = sent["result"]["task"]["id"].as_str().expect("a task").to_string();
    rpc_as(&base_b, None, "SendMessage", json!({"message": user_text("B's task")})).await;

    for base in [&base_b, &base_c] {
        for (method, params) in [
            ("GetTask", json!({"id": id})),
            ("CancelTask", json!({"id": id})),
            ("SubscribeToTask", json!({"id": id})),
            (
                "SendMessage",
                json!({"message": {"messageId": "m-x", "role": "ROLE_USER", "taskId": id, "parts": [{"text": "hi"}]}}),
            ),
            ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
        ] {
            let answer = rpc_as(base, None, method, params).await;
            assert_eq!(answer["error"]["code"], -32001, "{base} {method}: {answer}");
        }
    }
    let listed_b = rpc_as(&base_b, None, "ListTasks", json!({})).await;
    assert_eq!(listed_b["result"]["totalSize"], 1, "B lists only its own task: {listed_b}");
    assert_ne!(listed_b["result"]["tasks"][0]["id"], id.as_str());
    // A crafted context id is a bound value, not query text: it cannot widen the filter.
    let crafted = rpc_as(&base_b, None, "ListTasks", json!({"contextId": "x' OR '1'='1"})).await;
    assert_eq!(crafted["result"]["totalSize"], 0, "{crafted}");
    assert_eq!(rpc_as(&base_a, None, "GetTask", json!({"id": id})).await["result"]["id"], id.as_str());
    for h in [a, b, c] {
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_monitor_shows_running_tasks_from_its_last_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("slow.toml");
    std::fs::write(&script, "[[reply]]\nchunks = [\"a\", \"b\", \"c\"]\ndelay_ms = 1500\n").unwrap();
    let mut c = config(dir.path());
    c.models.scripted.file = Some(script);
    c.agent.model = "scripted".into();
    c.server.monitor_interval_secs = 1;
    let harness = Harness::new(c).unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let sent = A2AClient::new(&base).send(user_text("take your time"), json!({"returnImmediately": true})).await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_string();
    let mut seen = Value::Null;
    for _ in 0..40 {
        let (_, body) = get(&format!("{base}/_monitor")).await;
        seen = serde_json::from_str(&body).unwrap();
        if seen["running"].as_array().is_some_and(|r| r.iter().any(|t| t["task_id"] == id.as_str())) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let row = seen["running"].as_array().unwrap().iter().find(|t| t["task_id"] == id.as_str()).cloned();
    let row = row.unwrap_or_else(|| panic!("the running task is not in the monitor: {seen}"));
    assert_eq!(row["state"], "TASK_STATE_WORKING", "{row}");
    assert_eq!((row["turn"].as_u64(), row["mailbox_depth"].as_u64()), (Some(1), Some(0)), "{row}");
    assert_eq!(row["children"], json!([]));
    assert!(seen["taken_at"].is_string() && seen["agent"] == "tiny-harness", "{seen}");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_push_receiver_refuses_large_unparseable_and_unknown_pushes_alike_without_logging_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let harness = Harness::new(config(dir.path())).unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let post = |body: String, token: Option<&'static str>| {
        let mut r = http.post(format!("{base}/a2a/push/remote-stand-in")).body(body);
        if let Some(t) = token {
            r = r.header("X-A2A-Notification-Token", t);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(post("x".repeat(70 * 1024), None).await.0, 413);
    assert_eq!(post("not json".into(), None).await.0, 400);
    let push =
        json!({"statusUpdate": {"taskId": "remote-1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}});
    let no_token = post(push.to_string(), None).await;
    let wrong_token = post(push.to_string(), Some("secret-push-token-123")).await;
    assert_eq!(no_token.0, 401);
    assert_eq!(no_token, wrong_token, "every refusal is the same answer");
    harness.stop().await;
}

/// Collects what tracing writes, for the warnings a host should see.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_host_mounted_router_warns_that_it_serves_neither_cors_nor_ui() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.cors_origins = vec!["http://localhost:5173".into()];
    c.server.ui_dir = Some(dir.path().to_path_buf());
    let harness = Harness::new(c).unwrap();
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    tracing::subscriber::with_default(subscriber, || {
        let _ = harness_router(&harness);
    });
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("WARN") && log.contains("server.cors_origins"), "{log}");
    assert!(log.contains("server.ui_dir") && log.contains("/ui"), "{log}");
    let quiet = Captured::default();
    let writer = quiet.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).finish();
    tracing::subscriber::with_default(subscriber, || {
        let _ = harness.router();
    });
    assert!(quiet.0.lock().unwrap().is_empty(), "the own router serves both and says nothing");
}

/// Issue 14: one table of operations drives the router and the OpenAPI document. Every REST
/// path the document lists reaches its operation (an A2A answer, never a routing miss), bare
/// and under a tenant segment; a known path under another method is 405 naming the allowed
/// ones; an unknown path is 404 naming the request.
#[tokio::test(flavor = "multi_thread")]
async fn every_documented_rest_route_reaches_its_operation_bare_and_under_a_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let harness = Harness::new(config(dir.path())).unwrap();
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let (_, doc) = get(&format!("{base}/openapi.json")).await;
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let http = reqwest::Client::new();
    let mut seen = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(rest) = path.strip_prefix("/a2a/rest") else { continue };
        for (verb, op) in item.as_object().unwrap() {
            let concrete = rest.replace("{taskId}", "no-such-task").replace("{id}", "no-such-id");
            for prefix in ["", "/tenant-a"] {
                let method = Method::from_bytes(verb.to_uppercase().as_bytes()).unwrap();
                let url = format!("{base}/a2a/rest{prefix}{concrete}");
                let r = http.request(method, &url).header("A2A-Version", "1.0").json(&json!({})).send().await.unwrap();
                let status = r.status().as_u16();
                let body = r.text().await.unwrap();
                assert!(status != 405 && !body.contains("no such operation"), "{verb} {url}: {status} {body}");
                let error: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                assert!(status < 300 || error["error"]["status"].is_string(), "{verb} {url}: {status} {body}");
            }
            seen.push(op["summary"].as_str().unwrap().to_string());
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 11, "all 11 operations are documented: {seen:?}");

    let r = http.delete(format!("{base}/a2a/rest/tasks")).header("A2A-Version", "1.0").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(r.headers()["allow"], "GET");
    let r = http.get(format!("{base}/a2a/rest/no/such/route")).header("A2A-Version", "1.0").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body = r.text().await.unwrap();
    assert!(body.contains("no such operation: GET /no/such/route"), "{body}");
    harness.stop().await;
}

/// Issue 18 item 3: the host's policy, recording the points it is asked at. Refuses
/// `forbidden` text at `request.received`, `/shout secrets` and bob's control at
/// `command.invoked`, and fails on `boom`.
#[derive(Default)]
struct Guard {
    asked: std::sync::Mutex<Vec<(String, Option<String>)>>,
}

#[async_trait::async_trait]
impl tiny_harness::Policy for Guard {
    async fn check(&self, r: &tiny_harness::PolicyRequest) -> Result<tiny_harness::PolicyDecision, String> {
        use tiny_harness::{PolicyDecision, PolicyPoint};
        self.asked.lock().unwrap().push((r.point.as_str().to_string(), r.command.clone()));
        let refuse =
            |code: &str, message: &str| Ok(PolicyDecision::Refuse { code: code.into(), message: message.into() });
        let text = r.message.text();
        match (r.point, r.command.as_deref()) {
            _ if text.contains("boom") => Err("the policy service is down".into()),
            (PolicyPoint::RequestReceived, _) if text.contains("forbidden") => {
                refuse("content.blocked", "no such words")
            }
            (PolicyPoint::CommandInvoked, Some("shout")) if r.args == "secrets" => refuse("command.denied", "not that"),
            (PolicyPoint::CommandInvoked, Some("control")) if r.sender.as_deref() == Some("bob") => {
                refuse("control.denied", "bob may not end tasks")
            }
            _ => Ok(PolicyDecision::Allow),
        }
    }
}

async fn shout(ctx: tiny_harness::CommandContext, args: String) -> Result<String, String> {
    Ok(format!("{} (turn {}, from {})", args.to_uppercase(), ctx.turn, ctx.sender.unwrap_or_default()))
}

async fn fail(_ctx: tiny_harness::CommandContext, _args: String) -> Result<String, String> {
    Err("the backend said no".into())
}

async fn stall(_ctx: tiny_harness::CommandContext, _args: String) -> Result<String, String> {
    tokio::time::sleep(Duration::from_secs(12)).await;
    Ok("too late".into())
}

#[tokio::test(flavor = "multi_thread")]
async fn host_commands_run_with_the_task_context_and_the_policy_refuses_or_fails_requests_leaving_tasks_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let guard = Arc::new(Guard::default());
    let harness = Harness::builder(config(dir.path()))
        .command("shout", "Repeats its arguments loudly.", "/shout <text>", shout)
        .command("fail", "Always fails.", "/fail", fail)
        .command("stall", "Takes 12 s.", "/stall", stall)
        .policy(guard.clone())
        .build()
        .unwrap();
    let names: Vec<String> = harness.card().capabilities.extensions[3].params.as_ref().unwrap()["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["fail", "help", "shout", "stall", "status"], "the frozen registry, sorted, on the card");
    assert!(
        Harness::builder(config(dir.path())).command("help", "", "", shout).build().is_err(),
        "a built-in's name is refused"
    );
    harness.start().await.unwrap();
    let base = serve(harness.router()).await;
    let alice = Some(("x-participant-id", "alice"));
    let send = |who, message: Value| {
        let base = base.clone();
        async move { rpc_as(&base, who, "SendMessage", json!({"message": message})).await }
    };
    let opened = send(alice, user_text("hello")).await;
    let id = opened["result"]["task"]["id"].as_str().unwrap().to_string();
    let on_task = |text: &str| {
        let mut m = user_text(text);
        m["taskId"] = json!(id);
        m
    };

    let shouted = send(alice, on_task("/shout hello there")).await;
    let status = &shouted["result"]["task"]["status"];
    assert_eq!(status["message"]["parts"][0]["text"], "HELLO THERE (turn 1, from alice)", "{shouted}");
    assert_eq!(status["state"], "TASK_STATE_INPUT_REQUIRED", "the unchanged state");
    let failed = send(alice, on_task("/fail")).await;
    let text = failed["result"]["task"]["status"]["message"]["parts"][0]["text"].clone();
    assert_eq!(text, "/fail failed: the backend said no", "{failed}");

    let store = harness.store().await.unwrap();
    let before = rpc_as(&base, alice, "GetTask", json!({"id": id})).await["result"].clone();
    let log_before = store.events_after(&id, 0, 1000).await.unwrap().len();
    for (message, who, code, text) in [
        (on_task("a forbidden word"), alice, -32602, "content.blocked: no such words"),
        (on_task("/shout secrets"), alice, -32602, "command.denied: not that"),
        (on_task("boom"), alice, -32603, "the policy failed at request.received: the policy service is down"),
    ] {
        let refused = send(who, message.clone()).await;
        assert_eq!(refused["error"]["code"], code, "{refused}");
        assert_eq!(refused["error"]["message"], text, "{refused}");
        let rows = store.inbox_of_message(message["messageId"].as_str().unwrap()).await.unwrap();
        assert_eq!(rows[0].outcome, format!("refused: {text}"), "the audit row records the refusal");
    }
    // The same refusal on the HTTP+JSON binding.
    let rest = A2AClient::new(&base)
        .rest(Method::POST, "/message:send", Some(json!({"message": on_task("forbidden again")}).to_string()))
        .await;
    assert_eq!(rest.status, 400, "{:?}", rest.body);
    assert_eq!(rest.body["error"]["message"], "content.blocked: no such words", "{:?}", rest.body);
    store.add_participants(&id, &[("bob".into(), "reporter".into())]).await.unwrap();
    let mut control = on_task("");
    control["parts"] = json!([{"data": {"kind": "control", "action": "complete"}}]);
    let bob = Some(("x-participant-id", "bob"));
    let refused = send(bob, control.clone()).await;
    assert_eq!(refused["error"]["message"], "control.denied: bob may not end tasks", "{refused}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rpc_as(&base, alice, "GetTask", json!({"id": id})).await["result"], before, "the task is unchanged");
    assert_eq!(store.events_after(&id, 0, 1000).await.unwrap().len(), log_before, "and so is its log");

    // Commands and controls are asked at command.invoked only; messages at request.received.
    let asked = guard.asked.lock().unwrap().clone();
    let at = |point: &str, command: Option<&str>| (point.to_string(), command.map(String::from));
    assert_eq!(
        asked,
        [
            at("request.received", None),
            at("command.invoked", Some("shout")),
            at("command.invoked", Some("fail")),
            at("request.received", None),
            at("command.invoked", Some("shout")),
            at("request.received", None),
            at("request.received", None),
            at("command.invoked", Some("control")),
        ]
    );

    // A slow command is acknowledged at once, and a control does not wait for it.
    let started = std::time::Instant::now();
    let stalled = rpc_as(
        &base,
        alice,
        "SendMessage",
        json!({"message": on_task("/stall"), "configuration": {"returnImmediately": true}}),
    )
    .await;
    assert!(stalled["result"]["task"].is_object(), "{stalled}");
    let done = send(alice, control).await;
    assert_eq!(done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(started.elapsed() < Duration::from_secs(10), "the control waited: {:?}", started.elapsed());
    harness.stop().await;
}

/// Issue 30 (S20): with no `ui_dir`, the built web UI embedded in the binary is served at
/// `<prefix>/ui/` (its page with a content security policy, its script and style); `/ui`
/// redirects to `/ui/` keeping the prefix; a host nests `tiny_harness::ui::router()` itself;
/// `RouteOptions { ui: false }` serves none.
#[tokio::test(flavor = "multi_thread")]
async fn the_embedded_ui_is_served_under_the_prefix_unless_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.server.prefix = "/agents/helper".into();
    let harness = Harness::new(c.clone()).unwrap();
    harness.start().await.unwrap();
    let base = serve(Router::new().nest("/agents/helper", harness.router())).await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let page = http.get(format!("{base}/agents/helper/ui/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(csp.contains("default-src 'self'") && csp.contains("connect-src 'self'"), "{csp}");
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<script type="module" src="app.js">"#), "{html}");
    let script = http.get(format!("{base}/agents/helper/ui/app.js")).send().await.unwrap();
    assert_eq!(script.headers()["content-type"], "text/javascript; charset=utf-8");
    assert!(script.text().await.unwrap().contains("a2ui-surface"), "the bundle carries the A2UI renderer");
    let style = http.get(format!("{base}/agents/helper/ui/app.css")).send().await.unwrap();
    assert_eq!(
        (style.status().as_u16(), style.headers()["content-type"].to_str().unwrap()),
        (200, "text/css; charset=utf-8")
    );
    let bare = http.get(format!("{base}/agents/helper/ui")).send().await.unwrap();
    assert!(bare.status().is_redirection(), "{}", bare.status());
    assert_eq!(bare.headers()["location"], "/agents/helper/ui/", "the redirect keeps the prefix");
    assert_eq!(get(&format!("{base}/agents/helper/ui/nothing.js")).await.0, 404);
    // The OpenAPI document names the UI's route.
    let doc: Value = serde_json::from_str(&get(&format!("{base}/agents/helper/openapi.json")).await.1).unwrap();
    assert!(doc["paths"].as_object().unwrap().keys().any(|p| p.contains("/ui/")), "{doc}");
    harness.stop().await;

    // A host that merges the routes nests the UI beside them.
    let harness = Harness::new(c.clone()).unwrap();
    harness.start().await.unwrap();
    let hosted = serve(
        Router::new().merge(harness_router(&harness)).nest_service("/agents/helper/ui", tiny_harness::ui::router()),
    )
    .await;
    assert_eq!(get(&format!("{hosted}/agents/helper/ui/")).await.0, 200);
    harness.stop().await;

    let harness = Harness::builder(c).route_options(RouteOptions { ui: false, ..Default::default() }).build().unwrap();
    harness.start().await.unwrap();
    let off = serve(Router::new().nest("/agents/helper", harness.router())).await;
    assert_eq!(get(&format!("{off}/agents/helper/ui/")).await.0, 404);
    harness.stop().await;
}
