//! GetTask's answers for ended tasks (issue 31): an ended task does not change, so its whole
//! answer is kept and served again without rebuilding it from the store's rows. An entry
//! holds a watch on the task's log taken before the task was read (the store's notifier: in
//! this process, and on Postgres every instance's appends through LISTEN); any append or
//! cut-back since then drops it, so a read never serves what the log no longer says (a
//! terminal event that Temporal did not commit is cut back: docs/event-log.md). Bounded by
//! count and by the answers' size, the oldest entry leaving first.

use axum::body::Bytes;
use harness_store::Wake;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::watch;

/// At most this many ended tasks are kept.
const MAX_ENTRIES: usize = 1024;
/// At most this many bytes of answers are kept.
const MAX_BYTES: usize = 32 * 1024 * 1024;
/// An answer larger than this is not kept (a very long ended conversation).
const MAX_ENTRY_BYTES: usize = 1024 * 1024;

struct Entry {
    /// The answer as GetTask writes it: the whole task's JSON.
    json: Bytes,
    changes: watch::Receiver<Wake>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    order: VecDeque<String>,
    bytes: usize,
}

/// The kept answers.
#[derive(Default)]
pub(crate) struct ClosedTasks {
    inner: Mutex<Inner>,
}

impl ClosedTasks {
    /// The kept answer for `task_id`, when its log has not changed since it was read.
    pub(crate) fn get(&self, task_id: &str) -> Option<Bytes> {
        let mut inner = self.inner.lock().expect("closed tasks");
        let fresh = inner.entries.get(task_id).map(|e| matches!(e.changes.has_changed(), Ok(false)))?;
        if fresh {
            return inner.entries.get(task_id).map(|e| e.json.clone());
        }
        inner.remove(task_id);
        None
    }

    /// Keeps the whole answer of an ended task (its JSON), read after `changes` was taken.
    pub(crate) fn put(&self, task_id: &str, json: Bytes, changes: watch::Receiver<Wake>) {
        let bytes = json.len();
        if bytes > MAX_ENTRY_BYTES || !matches!(changes.has_changed(), Ok(false)) {
            return;
        }
        let mut inner = self.inner.lock().expect("closed tasks");
        inner.remove(task_id);
        while !inner.order.is_empty() && (inner.entries.len() >= MAX_ENTRIES || inner.bytes + bytes > MAX_BYTES) {
            if let Some(oldest) = inner.order.pop_front() {
                inner.remove(&oldest);
            }
        }
        inner.bytes += bytes;
        inner.order.push_back(task_id.to_string());
        inner.entries.insert(task_id.to_string(), Entry { json, changes });
    }
}

impl Inner {
    fn remove(&mut self, task_id: &str) {
        if let Some(e) = self.entries.remove(task_id) {
            self.bytes -= e.json.len();
            self.order.retain(|id| id != task_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_store::Notifier;

    fn task(id: &str, text: &str) -> Bytes {
        serde_json::to_vec(&serde_json::json!({"id": id, "text": text})).unwrap().into()
    }

    fn text(json: Bytes) -> String {
        serde_json::from_slice::<serde_json::Value>(&json).unwrap()["text"].as_str().unwrap().to_string()
    }

    #[test]
    fn an_answer_is_kept_until_the_log_changes_and_the_oldest_leaves_first() {
        let notifier = Notifier::default();
        let closed = ClosedTasks::default();
        closed.put("t1", task("t1", "done"), notifier.subscribe("t1"));
        assert_eq!(text(closed.get("t1").unwrap()), "done");
        // An append (or a cut) after the read: the answer is dropped, read again.
        notifier.notify("t1", 7);
        assert!(closed.get("t1").is_none());
        closed.put("t1", task("t1", "again"), notifier.subscribe("t1"));
        notifier.rewound("t1", 3);
        assert!(closed.get("t1").is_none());
        // A change between the subscription and the put: not kept.
        let changes = notifier.subscribe("t2");
        notifier.notify("t2", 9);
        closed.put("t2", task("t2", "stale"), changes);
        assert!(closed.get("t2").is_none());
        // Bounded by count: the oldest leaves first.
        for i in 0..MAX_ENTRIES + 1 {
            let id = format!("n{i}");
            closed.put(&id, task(&id, "x"), notifier.subscribe(&id));
        }
        assert!(closed.get("n0").is_none());
        assert!(closed.get(&format!("n{MAX_ENTRIES}")).is_some());
        assert_eq!(closed.inner.lock().unwrap().entries.len(), MAX_ENTRIES);
    }
}
