//! Issue 17: what the harness adds between an OpenAI-compatible endpoint's first byte and
//! the first artifact chunk at an SSE client, beside the endpoint's own time to first byte.
//! The endpoint is the test suite's mock (`contract_tests::openai_mock`), in this process,
//! so both instants come from one clock.
//!
//! Issue 31: the first event of a streamed message on a new task when the model does I/O
//! (a regular activity: the workflow task that accepted the message commits before the model
//! is called), each beside a floor sample taken just before it.
//!
//! Issue 30: on the same harness, the time from the endpoint's first byte of a response that
//! asks for `emit_ui` to the surface's A2UI artifact at an SSE client.

use crate::harness::{message, start_harness, write_config};
use contract_tests::openai_mock::MockOpenAi;
use futures::StreamExt;
use serde_json::json;
use std::time::{Duration, Instant};

/// The figures of the phase.
pub(crate) struct FirstChunk {
    /// Endpoint's first byte to the first chunk at the client, per sample.
    pub added: Vec<Duration>,
    /// The endpoint's own time to first byte, per sample.
    pub endpoint: Vec<Duration>,
    /// Endpoint's first byte of an `emit_ui` call to its A2UI artifact at the client.
    pub surface: Vec<Duration>,
    /// A streamed message on a new task: its first event (the Task) at the client, each
    /// beside a floor sample taken just before it (issue 31).
    pub first_event: Vec<Duration>,
    pub floor: Vec<Duration>,
}

/// A surface with a button, as a model shows it.
fn surface_call() -> String {
    format!("@call emit_ui {}", json!({"messages": contract_tests::button_surface()}))
}

/// When the first artifact chunk of a streamed message reached the client, and how long
/// after the request its first event (the Task) did.
async fn first_chunk_at(http: &reqwest::Client, base: &str) -> (Instant, Duration) {
    stream_marks(http, base, "hello model", "\"artifactUpdate\"").await
}

/// When the first event containing `mark` of a streamed message's stream reached the client.
async fn artifact_at(http: &reqwest::Client, base: &str, text: &str, mark: &str) -> Instant {
    stream_marks(http, base, text, mark).await.0
}

/// When the first event containing `mark` reached the client, and the time from the request
/// to the stream's first event.
async fn stream_marks(http: &reqwest::Client, base: &str, text: &str, mark: &str) -> (Instant, Duration) {
    let sent = Instant::now();
    let r = http
        .post(format!("{base}/a2a/rest/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message(text, None)}))
        .send()
        .await
        .expect("stream");
    let mut bytes = r.bytes_stream();
    let mut buf = Vec::new();
    let (mut at, mut first) = (None, None);
    while let Some(chunk) = bytes.next().await {
        buf.extend_from_slice(&chunk.expect("chunk"));
        let text = String::from_utf8_lossy(&buf);
        if first.is_none() && text.contains("data:") {
            first = Some(sent.elapsed());
        }
        if at.is_none() && text.contains(mark) {
            at = Some(Instant::now());
        }
    }
    (at.expect("no artifact chunk"), first.expect("no event"))
}

/// `samples` streamed turns against a harness whose model is the mock endpoint, which
/// waits 50 ms before its first byte (a model's time to first token).
pub(crate) async fn first_chunk(
    dir: &std::path::Path,
    bin: &str,
    temporal: &str,
    client: &temporalio_client::Client,
    samples: u64,
) -> anyhow::Result<FirstChunk> {
    let mock = MockOpenAi::start().await;
    mock.set_first_delay(Duration::from_millis(50));
    let port = tiny_harness::temporal_dev::free_port();
    let model = format!(
        "[agent]\nmodel = \"mock\"\n[models.mock]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock\"\nkeyless = true\n",
        mock.base_url
    );
    let config = write_config(dir, "openai", port, temporal, "bench-openai", &model)?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut harness = start_harness(&http, bin, &config, &dir.join("openai-harness"), &base).await?;
    let (mut clients, mut first_event, mut floor, mut floor_ids) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples + 3 {
        let (f, id) = crate::floor::floor_once(client).await;
        floor_ids.push(id);
        let (chunk, first) = first_chunk_at(&http, &base).await;
        clients.push(chunk);
        if i >= 3 {
            floor.push(f);
            first_event.push(first);
        }
    }
    crate::floor::stop_floor(client, floor_ids).await;
    let endpoint = mock.first_bytes();
    // Each surface turn asks the endpoint twice: for the call, then after its result. The
    // endpoint answers a call whole, at once: its first byte is when it got the request.
    let mut surface = Vec::new();
    for i in 0..samples + 3 {
        let asked = mock.seen().len();
        let at = artifact_at(&http, &base, &surface_call(), "\"artifactId\":\"a2ui:").await;
        if i >= 3 {
            surface.push(at.saturating_duration_since(mock.seen()[asked].at));
        }
    }
    let _ = harness.kill();
    let _ = harness.wait();
    let pairs = clients.iter().zip(endpoint.iter()).skip(3);
    let added = pairs.clone().map(|(client, (_, first))| client.saturating_duration_since(*first)).collect();
    let endpoint = pairs.map(|(_, (asked, first))| first.saturating_duration_since(*asked)).collect();
    Ok(FirstChunk { added, endpoint, surface, first_event, floor })
}
