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

pub(crate) async fn measure(http: &reqwest::Client, base: &str, seconds: u64, harness_pid: u32) -> Reads {
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
    Reads {
        card: card_n as f64 / secs,
        get_task: get_n as f64 / secs,
        cpu: (card_cpu * 1000.0 / card_n.max(1) as f64, get_cpu * 1000.0 / get_n.max(1) as f64),
    }
}
