//! Helpers of the store's tests (D2: each runs on SQLite and on Postgres).

pub(crate) use crate::{Appended, NewEvent, Store, TaskQuery};
pub(crate) use a2a_types::{Artifact, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
pub(crate) use std::time::Duration;

pub(crate) fn status(task_id: &str, state: TaskState) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task_id.into(),
        context_id: "c".into(),
        status: TaskStatus { state, ..Default::default() },
        metadata: None,
    })
}

pub(crate) fn new(task_id: &str, key: &str, event: StreamResponse) -> NewEvent {
    NewEvent::new(task_id, key, event, "q")
}

pub(crate) async fn sqlite() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    (Store::connect(&url).await.unwrap(), dir)
}

pub(crate) async fn postgres() -> Store {
    let url = crate::testing::fresh_postgres_database().await.unwrap();
    let store = Store::connect(&url).await.unwrap();
    assert_eq!(store.backend(), crate::Backend::Postgres);
    store
}

/// Each test runs on both stores (D2).
macro_rules! on_both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test]
            async fn on_sqlite() {
                let (store, _dir) = crate::test_support::sqlite().await;
                super::$body(store).await;
            }
            #[tokio::test]
            async fn on_postgres() {
                super::$body(crate::test_support::postgres().await).await;
            }
        }
    };
}
pub(crate) use on_both;

pub(crate) fn message(id: &str) -> a2a_types::Message {
    a2a_types::Message::agent_text(id, id)
}

pub(crate) fn artifact(id: &str, text: &str) -> Artifact {
    Artifact { artifact_id: id.into(), parts: vec![a2a_types::Part::text(text)], ..Default::default() }
}

pub(crate) fn ids<M: std::borrow::Borrow<a2a_types::Message>>(history: &[M]) -> Vec<&str> {
    history.iter().map(|m| m.borrow().message_id.as_str()).collect()
}

pub(crate) fn opened(task_id: &str, context: &str, ts: &str, queue: &str) -> NewEvent {
    let task = Task {
        id: task_id.into(),
        context_id: context.into(),
        status: TaskStatus { state: TaskState::Submitted, timestamp: Some(ts.into()), ..Default::default() },
        ..Default::default()
    };
    NewEvent { snapshot: Some(task.clone()), ..NewEvent::new(task_id, "open", StreamResponse::Task(task), queue) }
}
