//! Issue 29: what the harness adds to a tool round, beside the tool's own time and the
//! Temporal floor of the round's shape. The harness is the embeddable `Harness` in this
//! process with a host tool that notes when it ran, its model the test suite's mock endpoint
//! (`contract_tests::openai_mock`, answering at once), so every instant comes from one clock:
//! the harness's time is from the model's request that asked for the tool to the tool's
//! start, plus from the tool's end to the next model request.

use crate::floor::tool_shape_once;
use contract_tests::openai_mock::MockOpenAi;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The figures of the phase, per sample.
pub(crate) struct ToolRounds {
    /// The harness's time in the round.
    pub harness: Vec<Duration>,
    /// The tool's own time.
    pub tool: Vec<Duration>,
    /// The round's Temporal shape, start to result, and the same workflow doing nothing.
    pub shaped: Vec<Duration>,
    pub empty: Vec<Duration>,
}

/// How long the tool works.
const TOOL_TIME: Duration = Duration::from_millis(10);

pub(crate) async fn measure(
    dir: &std::path::Path,
    temporal: &str,
    client: &temporalio_client::Client,
    samples: u64,
) -> anyhow::Result<ToolRounds> {
    let mock = MockOpenAi::start().await;
    let config = dir.join("tools.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nport = 0\nrate_limit_per_minute = 0\n[temporal]\nmode = \"remote\"\naddress = \"{temporal}\"\n\
             task_queue = \"bench-tools\"\n[agent]\nmodel = \"mock\"\n[models.mock]\nkind = \"openai\"\nbase_url = \"{}\"\n\
             model = \"mock\"\nkeyless = true\n",
            mock.base_url
        ),
    )?;
    let c = tiny_harness::Config::from_file(&config, dir.join("tools-harness"))?;
    let ran: Arc<Mutex<Vec<(Instant, Instant)>>> = Arc::default();
    let noted = ran.clone();
    let harness = tiny_harness::Harness::builder(c)
        .tool("clock", "Works for 10 ms", json!({"type": "object"}), move |_ctx, _args| {
            let noted = noted.clone();
            async move {
                let start = Instant::now();
                tokio::time::sleep(TOOL_TIME).await;
                noted.lock().unwrap().push((start, Instant::now()));
                Ok("done".to_string())
            }
        })
        .build()?;
    harness.start().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = harness.router();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await;
    });
    let http = reqwest::Client::new();
    let (mut shaped, mut empty) = (Vec::new(), Vec::new());
    let mut rounds = Vec::new();
    for i in 0..samples + 3 {
        let seen_before = mock.seen().len();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": format!("tool-round-{i}"), "role": "ROLE_USER", "parts": [{"text": "@call clock {}"}]}}});
        let r: serde_json::Value = http
            .post(format!("{base}/a2a/jsonrpc"))
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        anyhow::ensure!(r["result"]["task"]["id"].is_string(), "the tool round failed: {r}");
        let seen = mock.seen();
        anyhow::ensure!(seen.len() == seen_before + 2, "one tool round: two model requests");
        let (start, end) = *ran.lock().unwrap().last().expect("the tool ran");
        let harness_time = start.saturating_duration_since(seen[seen_before].at)
            + seen[seen_before + 1].at.saturating_duration_since(end);
        let e = tool_shape_once(client, false).await;
        let s = tool_shape_once(client, true).await;
        if i >= 3 {
            rounds.push((harness_time, end - start));
            empty.push(e);
            shaped.push(s);
        }
    }
    harness.stop().await;
    let (harness, tool) = rounds.into_iter().unzip();
    Ok(ToolRounds { harness, tool, shaped, empty })
}
