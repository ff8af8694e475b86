//! Issue 32: what observability costs the harness. Three harnesses on one dev server, each
//! with 16 open conversations, measured in 2 s turns: metrics and traces off; the default
//! (metrics on, traces off); metrics on and traces exported over OTLP/HTTP to a receiver in
//! this process that decodes every export (its CPU is this process's, not the harness's).
//! Reported as the harness's CPU per message of each.

use crate::harness::{cpu_secs, harness_slice, open_task, start_harness};
use std::time::Duration;

/// CPU per message (ms) of each configuration, in the order above, and messages/s of each.
pub(crate) struct Cost {
    pub cpu_ms: [f64; 3],
    pub rate: [f64; 3],
    /// Spans the receiver decoded (0 would mean the traced harness exported nothing).
    pub spans: usize,
}

pub(crate) async fn measure(
    http: &reqwest::Client,
    bin: &str,
    temporal: &str,
    dir: &std::path::Path,
    seconds: u64,
) -> anyhow::Result<Cost> {
    let (otlp, received) = contract_tests::otlp::http_receiver().await;
    let setups = [
        "[server]\nmetrics = false\n".to_string(),
        "[server]\n".to_string(),
        format!("[server]\n\n[observability]\notlp_endpoint = \"{otlp}\"\n"),
    ];
    let mut harnesses = Vec::new();
    for (i, setup) in setups.iter().enumerate() {
        let port = tiny_harness::temporal_dev::free_port();
        let (server, rest) = setup.split_once('\n').unwrap_or((setup.as_str(), ""));
        let config = dir.join(format!("observability-{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "{server}\nport = {port}\nrate_limit_per_minute = 0\n{rest}\n[temporal]\nmode = \"remote\"\naddress = \"{temporal}\"\ntask_queue = \"bench-observability-{i}\"\n"
            ),
        )?;
        let base = format!("http://127.0.0.1:{port}");
        let child = start_harness(http, bin, &config, &dir.join(format!("observability-{i}")), &base).await?;
        let mut tasks = Vec::new();
        for _ in 0..16 {
            tasks.push(open_task(http, &base, "start").await);
        }
        harnesses.push((child, base, tasks));
    }
    let slice = Duration::from_secs(2);
    let (mut cpu, mut messages) = ([0.0f64; 3], [0u64; 3]);
    for _ in 0..seconds.div_ceil(2).max(1) {
        for (i, (child, base, tasks)) in harnesses.iter().enumerate() {
            let before = cpu_secs(child.id());
            messages[i] += harness_slice(http, base, tasks, slice).await;
            cpu[i] += cpu_secs(child.id()) - before;
        }
    }
    // The traced harness's last spans go within its export interval.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let spans = received.spans().len();
    for (mut child, _, _) in harnesses {
        let _ = child.kill();
        let _ = child.wait();
    }
    let measured = (seconds.div_ceil(2).max(1) * 2) as f64;
    Ok(Cost {
        cpu_ms: std::array::from_fn(|i| cpu[i] * 1000.0 / messages[i].max(1) as f64),
        rate: std::array::from_fn(|i| messages[i] as f64 / measured),
        spans,
    })
}
