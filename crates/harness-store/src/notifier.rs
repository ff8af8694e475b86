//! In-process wake-ups: every append publishes the task's newest seq, so readers wait on
//! a change instead of polling (D1).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Per-task watch channels of the newest appended seq.
#[derive(Clone, Default)]
pub struct Notifier {
    channels: Arc<Mutex<HashMap<String, watch::Sender<i64>>>>,
}

impl Notifier {
    /// Watches a task's newest seq. Subscribe *before* reading the log, so an append between
    /// the read and the wait is not missed.
    pub fn subscribe(&self, task_id: &str) -> watch::Receiver<i64> {
        let mut channels = self.channels.lock().expect("notifier lock");
        channels.retain(|_, tx| tx.receiver_count() > 0);
        channels.entry(task_id.to_string()).or_insert_with(|| watch::channel(0).0).subscribe()
    }

    /// Publishes a newly appended seq.
    pub fn notify(&self, task_id: &str, seq: i64) {
        let channels = self.channels.lock().expect("notifier lock");
        if let Some(tx) = channels.get(task_id) {
            tx.send_if_modified(|cur| {
                let newer = seq > *cur;
                if newer {
                    *cur = seq;
                }
                newer
            });
        }
    }
}
