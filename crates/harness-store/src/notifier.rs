//! In-process wake-ups: every append publishes the task's newest seq, so readers wait on
//! a change instead of polling (D1). A cut-back log (an uncommitted event replaced,
//! docs/event-log.md) is published too, so a reader that already delivered what was cut
//! can tell.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// What a task's readers are told.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wake {
    /// The newest appended seq.
    pub seq: i64,
    /// How many cuts this process has seen on the task's log.
    pub rewrites: u64,
    /// Where the newest cut started: events from this seq on were replaced.
    pub rewound_from: i64,
}

/// Per-task watch channels of the newest appended seq.
#[derive(Clone, Default)]
pub struct Notifier {
    channels: Arc<Mutex<HashMap<String, watch::Sender<Wake>>>>,
}

impl Notifier {
    /// Watches a task's newest seq. Subscribe *before* reading the log, so an append between
    /// the read and the wait is not missed.
    pub fn subscribe(&self, task_id: &str) -> watch::Receiver<Wake> {
        let mut channels = self.channels.lock().expect("notifier lock");
        channels.retain(|_, tx| tx.receiver_count() > 0);
        channels.entry(task_id.to_string()).or_insert_with(|| watch::channel(Wake::default()).0).subscribe()
    }

    /// Publishes a newly appended seq.
    pub fn notify(&self, task_id: &str, seq: i64) {
        let channels = self.channels.lock().expect("notifier lock");
        if let Some(tx) = channels.get(task_id) {
            tx.send_if_modified(|cur| {
                let newer = seq > cur.seq;
                if newer {
                    cur.seq = seq;
                }
                newer
            });
        }
    }

    /// Wakes every reader to read again (what another process appended may have been
    /// missed).
    pub fn nudge_all(&self) {
        let channels = self.channels.lock().expect("notifier lock");
        for tx in channels.values() {
            tx.send_modify(|_| {});
        }
    }

    /// Publishes that the log was cut back to before `from` and `from` appended again.
    pub fn rewound(&self, task_id: &str, from: i64) {
        let channels = self.channels.lock().expect("notifier lock");
        if let Some(tx) = channels.get(task_id) {
            tx.send_modify(|cur| {
                cur.seq = from;
                cur.rewrites += 1;
                cur.rewound_from = from;
            });
        }
    }
}
