//! Issue 31: GetTask of an ended task beside the agent card, requests per second over 16
//! concurrent loops, in 2 s turns on the same harness, with the harness's CPU per request.
//! The card is an in-memory answer: the ratio says how near GetTask of a task that no longer
//! changes comes to it.

use crate::floor::count_loops;
use crate::harness::{open_task, rpc};
use std::time::Duration;

/// The figures of the phase.
pub(crate) struct Reads {
    pub card: f64,
    pub get_task: f64,
    /// The harness's CPU per request, card / GetTask (ms).
    pub cpu: (f64, f64),
}

/// The phase with the bench's own client, then with `wrk` when it is installed.
pub(crate) async fn measure(
    http: &reqwest::Client,
    base: &str,
    seconds: u64,
    harness_pid: u32,
) -> (Reads, Option<Reads>) {
    // A conversation of one message and its reply, canceled: from then on it does not change.
    let task = open_task(http, base, "read me").await;
    let task = task.as_str();
    rpc(http, base, "CancelTask", serde_json::json!({"id": task})).await;
    let loops: Vec<String> = (0..16).map(|i| i.to_string()).collect();
    let slice = Duration::from_secs(2);
    let (mut card_n, mut get_n, mut card_cpu, mut get_cpu) = (0u64, 0u64, 0.0, 0.0);
    for _ in 0..seconds.div_ceil(2).max(1) {
        let before = crate::harness::cpu_secs(harness_pid);
        let (http2, url) = (http.clone(), format!("{base}/.well-known/agent-card.json"));
        card_n += count_loops(&loops, slice, move |_| {
            let (http, url) = (http2.clone(), url.clone());
            Box::pin(async move {
                let r = http.get(&url).send().await.expect("card");
                assert!(r.status().is_success());
                r.bytes().await.expect("card body");
            })
        })
        .await;
        card_cpu += crate::harness::cpu_secs(harness_pid) - before;
        let before = crate::harness::cpu_secs(harness_pid);
        let (http2, base2, id) = (http.clone(), base.to_string(), task.to_string());
        get_n += count_loops(&loops, slice, move |_| {
            let (http, base, id) = (http2.clone(), base2.clone(), id.clone());
            Box::pin(async move {
                let v = rpc(&http, &base, "GetTask", serde_json::json!({"id": id})).await;
                assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
            })
        })
        .await;
        get_cpu += crate::harness::cpu_secs(harness_pid) - before;
    }
    let secs = (seconds.div_ceil(2).max(1) * 2) as f64;
    let ours = Reads {
        card: card_n as f64 / secs,
        get_task: get_n as f64 / secs,
        cpu: (card_cpu * 1000.0 / card_n.max(1) as f64, get_cpu * 1000.0 / get_n.max(1) as f64),
    };
    // The body wrk sends, checked first: a JSON-RPC error would be a 200 too.
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}}).to_string();
    let answer: serde_json::Value = http
        .post(format!("{base}/a2a/jsonrpc"))
        .header("A2A-Version", "1.0")
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .expect("GetTask")
        .json()
        .await
        .expect("GetTask's answer");
    assert_eq!(answer["result"]["status"]["state"], "TASK_STATE_CANCELED", "{answer}");
    let base = base.to_string();
    let with_wrk = tokio::task::spawn_blocking(move || measure_with_wrk(&base, &body, seconds, harness_pid))
        .await
        .expect("the wrk runs");
    (ours, with_wrk)
}

/// The same two reads driven by `wrk` (2 threads, 16 connections; `body` is GetTask's), the
/// tool issue 31 measured them with, when it is on `PATH` (`None` when it is not). The
/// bench's own client shares the two cores with the harness and spends more CPU on a GetTask
/// (it parses the answer to check it) than on the card, so its ratio reads low. The two
/// alternate in 2 s turns, as above.
fn measure_with_wrk(base: &str, body: &str, seconds: u64, harness_pid: u32) -> Option<Reads> {
    let dir = std::env::temp_dir().join(format!("bench-wrk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the wrk script's directory");
    let script = dir.join("get-task.lua");
    let lua = format!(
        "wrk.method = \"POST\"\nwrk.body = {}\nwrk.headers[\"Content-Type\"] = \"application/json\"\n\
         wrk.headers[\"A2A-Version\"] = \"1.0\"\n",
        serde_json::to_string(body).expect("a string"), // ASCII here, so a Lua string too
    );
    std::fs::write(&script, lua).expect("the wrk script");
    let script = script.to_str().expect("a temporary path in UTF-8");
    let card = format!("{base}/.well-known/agent-card.json");
    let rpc = format!("{base}/a2a/jsonrpc");
    // Requests, seconds and the harness's CPU seconds of each read, summed over the turns.
    let (mut card_sum, mut get_sum) = ([0.0; 3], [0.0; 3]);
    for _ in 0..seconds.div_ceil(2).max(1) {
        for (args, sum) in [(vec![card.as_str()], &mut card_sum), (vec!["-s", script, rpc.as_str()], &mut get_sum)] {
            let before = crate::harness::cpu_secs(harness_pid);
            let Some((n, secs)) = wrk(&args) else {
                let _ = std::fs::remove_dir_all(&dir);
                return None;
            };
            let cpu = crate::harness::cpu_secs(harness_pid) - before;
            for (total, x) in sum.iter_mut().zip([n, secs, cpu]) {
                *total += x;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let rate = |[n, secs, _]: [f64; 3]| n / secs.max(f64::EPSILON);
    let per_read = |[n, _, cpu]: [f64; 3]| cpu * 1000.0 / n.max(1.0);
    Some(Reads { card: rate(card_sum), get_task: rate(get_sum), cpu: (per_read(card_sum), per_read(get_sum)) })
}

/// One 2 s run of `wrk -t2 -c16` with `args`: the requests it completed and in how many
/// seconds, `None` when `wrk` is not installed. A run with any answer other than 2xx, a
/// socket error or no request ends the bench: its rate would not be a rate of reads.
fn wrk(args: &[&str]) -> Option<(f64, f64)> {
    let out = match std::process::Command::new("wrk").args(["-t2", "-c16", "-d2s"]).args(args).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("wrk: {e}"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk {args:?} failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("Non-2xx") && !text.contains("Socket errors"), "wrk {args:?}: {text}");
    // "  N requests in 2.00s, M MB read"
    let (done, secs) = text
        .lines()
        .find_map(|l| {
            let (n, rest) = l.trim().split_once(" requests in ")?;
            let secs = rest.split_once("s,")?.0;
            Some((n.parse::<f64>().ok()?, secs.parse::<f64>().ok()?))
        })
        .unwrap_or_else(|| panic!("wrk {args:?}: no request count in {text}"));
    assert!(done > 0.0, "wrk {args:?} completed no request: {text}");
    Some((done, secs))
}
