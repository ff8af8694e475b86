//! Keeps a workflow query from crossing a message on the same task, in this process.
//!
//! temporalio-sdk-core 0.10.1 can lose a workflow task when a query-only task and a new
//! workflow task of one run reach the worker close together (it logs "Trying to send a new
//! WFT for a run which already has one!"); the message behind that workflow task then waits
//! out the 10 s workflow-task timeout, and its sender gets "Temporal did not answer". With
//! 16 conversations and GetTask in a loop beside them it happened about twice a minute
//! (docs/performance.md). So messages to a task share its gate while their update-with-start
//! is on its way, and a query (GetTask, cancel, subscribe, `/_monitor`) takes the gate alone:
//! it waits for the messages in flight, and messages that arrive meanwhile wait for it
//! (queries answer in milliseconds; both are bounded by the request timeout). Harness
//! instances do not share gates, so a query from one instance can still cross a message
//! sent through another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::RwLock;

#[derive(Clone, Default)]
pub(crate) struct TaskGates {
    gates: Arc<Mutex<HashMap<String, Arc<RwLock<()>>>>>,
}

/// The read (message) or write (query) guard, kept only to be dropped.
type Held = Box<dyn std::any::Any + Send + Sync>;

/// A held gate; dropping it lets the task's waiting messages or query through.
pub(crate) struct Gate {
    held: Option<Held>,
    task_id: String,
    gate: Arc<RwLock<()>>,
    gates: Arc<Mutex<HashMap<String, Arc<RwLock<()>>>>>,
}

impl TaskGates {
    fn gate(&self, task_id: &str) -> Arc<RwLock<()>> {
        self.gates.lock().expect("task gates").entry(task_id.to_string()).or_default().clone()
    }

    /// Runs `delivery` (a message's update-with-start) holding `task_id`'s gate, shared with
    /// the task's other messages.
    pub(crate) async fn deliver<F: std::future::Future>(&self, task_id: &str, delivery: F) -> F::Output {
        let _gate = self.message(task_id).await;
        delivery.await
    }

    /// Runs `query` (a query of `task_id`'s workflow) holding the task's gate alone.
    pub(crate) async fn query<F: std::future::Future>(&self, task_id: &str, query: F) -> F::Output {
        let _gate = self.alone(task_id).await;
        query.await
    }

    /// The gate as messages hold it: shared.
    async fn message(&self, task_id: &str) -> Gate {
        let gate = self.gate(task_id);
        let held: Held = Box::new(gate.clone().read_owned().await);
        self.held(task_id, gate, held)
    }

    /// The gate as a query holds it: alone.
    async fn alone(&self, task_id: &str) -> Gate {
        let gate = self.gate(task_id);
        let held: Held = Box::new(gate.clone().write_owned().await);
        self.held(task_id, gate, held)
    }

    fn held(&self, task_id: &str, gate: Arc<RwLock<()>>, held: Held) -> Gate {
        Gate { held: Some(held), task_id: task_id.to_string(), gate, gates: self.gates.clone() }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.gates.lock().expect("task gates").len()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let mut gates = self.gates.lock().expect("task gates");
        self.held.take();
        // Only the map and this handle know the gate: nobody holds or waits for it.
        if Arc::strong_count(&self.gate) == 2 {
            gates.remove(&self.task_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ready<F: std::future::Future>(f: F) -> Option<F::Output> {
        futures::FutureExt::now_or_never(f)
    }

    #[tokio::test]
    async fn messages_share_a_gate_a_query_waits_for_them_and_holds_it_alone() {
        let gates = TaskGates::default();
        let a = gates.message("t").await;
        let b = ready(gates.message("t")).expect("messages to one task share the gate");
        let query = tokio::spawn({
            let gates = TaskGates { gates: gates.gates.clone() };
            async move {
                let _q = gates.alone("t").await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!query.is_finished(), "the query waits for the messages in flight");
        assert!(ready(gates.alone("other")).is_some(), "another task's gate is free");
        drop((a, b));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(ready(gates.message("t")).is_none(), "a message waits while the query holds the gate");
        query.await.unwrap();
        assert!(ready(gates.message("t")).is_some(), "and goes once the query is done");
        assert_eq!(gates.len(), 0, "a gate nobody holds is forgotten");
    }
}
