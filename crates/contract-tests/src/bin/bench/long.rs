//! Issue 15: one conversation of many messages, one after the other; the first hundred
//! against the last hundred (latency and rate), and the harness's RSS before and after.

use crate::harness::{open_task, rss_kib, say};
use std::time::{Duration, Instant};

/// What the long conversation measured.
pub(crate) struct Long {
    pub messages: usize,
    /// p50 latency and messages/s of the first and of the last `window` messages.
    pub first: (Duration, f64),
    pub last: (Duration, f64),
    pub window: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
}

/// p50 and rate of a window of sequential latencies.
fn window_figures(took: &[Duration]) -> (Duration, f64) {
    let mut sorted = took.to_vec();
    sorted.sort();
    let total: Duration = took.iter().sum();
    (sorted[sorted.len() / 2], took.len() as f64 / total.as_secs_f64())
}

/// Sends `messages` blocking messages to one new conversation, each after the answer to
/// the one before.
pub(crate) async fn long_conversation(http: &reqwest::Client, base: &str, pid: u32, messages: usize) -> Long {
    let rss_before_kib = rss_kib(pid);
    let task = open_task(http, base, "long 0").await;
    let mut took = Vec::with_capacity(messages);
    for i in 1..messages {
        let t = Instant::now();
        say(http, base, &task, &format!("long {i}")).await;
        took.push(t.elapsed());
        if i % 1000 == 0 {
            eprintln!("bench: long conversation, {i} messages");
        }
    }
    let window = took.len().min(100);
    Long {
        messages,
        first: window_figures(&took[..window]),
        last: window_figures(&took[took.len() - window..]),
        window,
        rss_before_kib,
        rss_after_kib: rss_kib(pid),
    }
}
