//! The harness under measure: its process (start, CPU, RSS) and the messages sent to it.

use crate::floor::{count_loops, unique};
use futures::StreamExt;
use serde_json::json;
use std::time::{Duration, Instant};

/// Blocking messages sent to running conversations, one loop per task, for `slice`.
pub(crate) async fn harness_slice(http: &reqwest::Client, base: &str, tasks: &[String], slice: Duration) -> u64 {
    let (http, base) = (http.clone(), base.to_string());
    count_loops(tasks, slice, move |task| {
        let (http, base) = (http.clone(), base.clone());
        Box::pin(async move {
            say(&http, &base, &task, "again").await;
        })
    })
    .await
}

/// Opens a conversation with a blocking message; answers its task id.
pub(crate) async fn open_task(http: &reqwest::Client, base: &str, text: &str) -> String {
    let opened = rpc(http, base, "SendMessage", json!({"message": message(text, None)})).await;
    opened["result"]["task"]["id"].as_str().expect("task id").to_string()
}

/// A blocking message in a conversation already open.
pub(crate) async fn say(http: &reqwest::Client, base: &str, task: &str, text: &str) -> serde_json::Value {
    rpc(http, base, "SendMessage", json!({"message": message(text, Some(task))})).await
}

pub(crate) fn message(text: &str, task_id: Option<&str>) -> serde_json::Value {
    let mut m = json!({"messageId": unique("m"), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(t) = task_id {
        m["taskId"] = json!(t);
    }
    m
}

pub(crate) async fn rpc(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    params: serde_json::Value,
) -> serde_json::Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let r =
        http.post(format!("{base}/a2a/jsonrpc")).header("A2A-Version", "1.0").json(&body).send().await.expect("rpc");
    let v: serde_json::Value = r.json().await.expect("json");
    assert!(v.get("error").is_none(), "{v}");
    v
}

/// (time to first event, time to final event) of a streaming message on a new task.
pub(crate) async fn stream_times(http: &reqwest::Client, base: &str) -> (Duration, Duration) {
    let t = Instant::now();
    let r = http
        .post(format!("{base}/a2a/rest/message:stream"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("hello bench", None)}))
        .send()
        .await
        .expect("stream");
    let mut bytes = r.bytes_stream();
    let mut first = None;
    let mut buf = Vec::new();
    while let Some(chunk) = bytes.next().await {
        buf.extend_from_slice(&chunk.expect("chunk"));
        if first.is_none() && buf.windows(2).any(|w| w == b"\n\n") {
            first = Some(t.elapsed());
        }
    }
    (first.expect("no event"), t.elapsed())
}

/// CPU seconds (user + system) a process has used so far.
pub(crate) fn cpu_secs(pid: u32) -> f64 {
    stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()).1
}

/// CPU seconds each thread of a process has used so far, and how often it was switched out
/// (voluntary and not), summed by thread name (issue 31's per-thread profile). A thread that
/// ended is no longer counted.
pub(crate) fn thread_cpu(pid: u32) -> std::collections::BTreeMap<String, (f64, f64)> {
    let mut by_name = std::collections::BTreeMap::<String, (f64, f64)>::new();
    for thread in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let (name, secs) = stat_cpu(&std::fs::read_to_string(thread.path().join("stat")).unwrap_or_default());
        let switches: f64 = std::fs::read_to_string(thread.path().join("status"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:").or(l.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|n| n.trim().parse::<f64>().ok())
            .sum();
        let entry = by_name.entry(name).or_default();
        (entry.0, entry.1) = (entry.0 + secs, entry.1 + switches);
    }
    by_name
}

/// The command name and CPU seconds (user + system) of a `stat` file of proc(5).
fn stat_cpu(stat: &str) -> (String, f64) {
    let Some((head, rest)) = stat.rsplit_once(')') else { return (String::new(), 0.0) };
    let name = head.split_once('(').map_or("", |(_, n)| n).to_string();
    // Fields after the parenthesised command name, from the state on (proc(5) fields 3..):
    // utime and stime are fields 14 and 15, the 12th and 13th here.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (name, (ticks(11) + ticks(12)) / 100.0)
}

/// Writes `dir/<name>.toml`, a config of the harness under measure: the dev server
/// `temporal`, the port and task queue given, the rate limit off, then `rest` (more TOML).
pub(crate) fn write_config(
    dir: &std::path::Path,
    name: &str,
    port: u16,
    temporal: &str,
    task_queue: &str,
    rest: &str,
) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[server]\nport = {port}\nrate_limit_per_minute = 0\n[temporal]\nmode = \"remote\"\naddress = \"{temporal}\"\n\
             task_queue = \"{task_queue}\"\n{rest}"
        ),
    )?;
    Ok(path)
}

/// Starts `tiny-harness serve` and waits until it serves its card.
pub(crate) async fn start_harness(
    http: &reqwest::Client,
    bin: &str,
    config: &std::path::Path,
    data_dir: &std::path::Path,
    base: &str,
) -> anyhow::Result<std::process::Child> {
    let child = std::process::Command::new(bin)
        .args(["serve", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(std::process::Stdio::null())
        .spawn()?;
    while http.get(format!("{base}/.well-known/agent-card.json")).send().await.is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(child)
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

pub(crate) fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

pub(crate) fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A second harness, on a Postgres store and a task queue of its own, with 16 open
/// conversations: the throughput phase's Postgres side (issue 31).
pub(crate) struct OnPostgres {
    child: std::process::Child,
    base: String,
    tasks: Vec<String>,
    /// Messages answered and CPU seconds used in its slices.
    messages: u64,
    cpu: f64,
}

impl OnPostgres {
    pub(crate) async fn start(
        http: &reqwest::Client,
        bin: &str,
        temporal: &str,
        postgres: &str,
        dir: &std::path::Path,
    ) -> anyhow::Result<Self> {
        let port = tiny_harness::temporal_dev::free_port();
        let store = format!("[store]\nurl = \"{postgres}\"\n");
        let config = write_config(dir, "harness-postgres", port, temporal, "bench-harness-postgres", &store)?;
        let base = format!("http://127.0.0.1:{port}");
        let child = start_harness(http, bin, &config, &dir.join("harness-postgres"), &base).await?;
        let mut tasks = Vec::new();
        for _ in 0..16 {
            tasks.push(open_task(http, &base, "start").await);
        }
        Ok(Self { child, base, tasks, messages: 0, cpu: 0.0 })
    }

    /// One slice of blocking messages to its conversations; how many were answered.
    pub(crate) async fn slice(&mut self, http: &reqwest::Client, slice: Duration) -> u64 {
        let before = cpu_secs(self.child.id());
        let n = harness_slice(http, &self.base, &self.tasks, slice).await;
        self.cpu += cpu_secs(self.child.id()) - before;
        self.messages += n;
        n
    }

    /// Stops it; the messages answered and the CPU seconds used in its slices.
    pub(crate) fn stop(mut self) -> (u64, f64) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        (self.messages, self.cpu)
    }
}
