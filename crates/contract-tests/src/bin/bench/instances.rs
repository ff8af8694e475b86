//! Issue 20: instances on one task queue and one Postgres. Subscriber lag on the instance
//! that runs the task's workflow beside one on an instance that runs no worker (each event
//! reaches it through LISTEN/NOTIFY), and messages/s with the harness's CPU per message on
//! one instance and on two.

use crate::floor::{count_loops, unique};
use crate::harness::{cpu_secs, open_task, say, start_harness};
use futures::StreamExt;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) struct Figures {
    /// Send to arrival of each turn's final event: on the instance that runs it, and on the
    /// other one.
    pub local: Vec<Duration>,
    pub cross: Vec<Duration>,
    /// (messages/s, harness CPU ms per message) on one instance and on two.
    pub one: (f64, f64),
    pub two: (f64, f64),
}

/// When each `echo: <text>` final status arrived at a subscription (a reader task).
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

fn subscribe(http: &reqwest::Client, base: &str, task: &str) -> Arrivals {
    let arrivals: Arrivals = Arc::default();
    let (http, url, seen) = (http.clone(), format!("{base}/a2a/rest/tasks/{task}:subscribe"), arrivals.clone());
    tokio::spawn(async move {
        let r = http.post(url).header("A2A-Version", "1.0").json(&json!({})).send().await.expect("subscribe");
        let mut bytes = r.bytes_stream();
        let mut buf = Vec::new();
        while let Some(Ok(chunk)) = bytes.next().await {
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = buf.drain(..end + 2).collect();
                let frame = String::from_utf8_lossy(&frame);
                let data: String = frame.lines().filter_map(|l| l.strip_prefix("data:")).collect();
                let Ok(v) = serde_json::from_str::<serde_json::Value>(data.trim()) else { continue };
                let status = &v["statusUpdate"]["status"];
                if status["state"] == "TASK_STATE_INPUT_REQUIRED"
                    && let Some(text) = status["message"]["parts"][0]["text"].as_str()
                {
                    seen.lock().unwrap().insert(text.to_string(), Instant::now());
                }
            }
        }
    });
    arrivals
}

fn config(
    dir: &std::path::Path,
    name: &str,
    port: u16,
    temporal: &str,
    postgres: &str,
    worker: bool,
) -> std::path::PathBuf {
    let rest = format!("worker = {worker}\n[store]\nurl = \"{postgres}\"\n");
    crate::harness::write_config(dir, name, port, temporal, "bench-scale", &rest).expect("config")
}

/// Blocking messages for `slice`, one loop per task, each message to the next base in turn.
async fn rate(http: &reqwest::Client, bases: &[String], tasks: &[String], slice: Duration) -> u64 {
    let (http, bases) = (http.clone(), Arc::new(bases.to_vec()));
    let turn = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    count_loops(tasks, slice, move |task| {
        let (http, bases, turn) = (http.clone(), bases.clone(), turn.clone());
        Box::pin(async move {
            let i = turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            say(&http, &bases[i % bases.len()], &task, "again").await;
        })
    })
    .await
}

pub(crate) async fn measure(
    dir: &std::path::Path,
    bin: &str,
    temporal: &str,
    postgres: &str,
    samples: u64,
    seconds: u64,
) -> anyhow::Result<Figures> {
    let http = reqwest::Client::new();
    let port = tiny_harness::temporal_dev::free_port;
    let (pa, pb, pc) = (port(), port(), port());
    let base = |p: u16| format!("http://127.0.0.1:{p}");
    let a_cfg = config(dir, "a", pa, temporal, postgres, true);
    let mut a = start_harness(&http, bin, &a_cfg, &dir.join("a"), &base(pa)).await?;
    let b_cfg = config(dir, "b", pb, temporal, postgres, false);
    let mut b = start_harness(&http, bin, &b_cfg, &dir.join("b"), &base(pb)).await?;

    // Lag: one conversation, run by A's worker, watched from A and from B.
    let task = open_task(&http, &base(pa), "lag").await;
    let (on_a, on_b) = (subscribe(&http, &base(pa), &task), subscribe(&http, &base(pb), &task));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (mut local, mut cross) = (Vec::new(), Vec::new());
    for i in 0..samples {
        let text = unique(&format!("lag{i}"));
        let sent = Instant::now();
        say(&http, &base(pa), &task, &text).await;
        let want = format!("echo: {text}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (x, y) = (on_a.lock().unwrap().get(&want).copied(), on_b.lock().unwrap().get(&want).copied());
            if let (Some(x), Some(y)) = (x, y) {
                local.push(x - sent);
                cross.push(y - sent);
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "a subscriber missed {want}");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let _ = b.kill();
    let _ = b.wait();

    // Throughput: 16 conversations on A alone, then on A and a second worker instance C.
    let mut tasks = Vec::new();
    for _ in 0..16 {
        tasks.push(open_task(&http, &base(pa), "hello").await);
    }
    let slice = Duration::from_secs(seconds);
    let cpu0 = cpu_secs(a.id());
    let n1 = rate(&http, &[base(pa)], &tasks, slice).await;
    let one = (n1 as f64 / slice.as_secs_f64(), (cpu_secs(a.id()) - cpu0) * 1000.0 / n1.max(1) as f64);
    let c_cfg = config(dir, "c", pc, temporal, postgres, true);
    let mut c = start_harness(&http, bin, &c_cfg, &dir.join("c"), &base(pc)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (ca, cc) = (cpu_secs(a.id()), cpu_secs(c.id()));
    let n2 = rate(&http, &[base(pa), base(pc)], &tasks, slice).await;
    let used = cpu_secs(a.id()) - ca + cpu_secs(c.id()) - cc;
    let two = (n2 as f64 / slice.as_secs_f64(), used * 1000.0 / n2.max(1) as f64);
    for child in [&mut a, &mut c] {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(Figures { local, cross, one, two })
}
