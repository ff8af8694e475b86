//! The store alone under the write pattern of the harness's throughput bench: 16 tasks,
//! each message writing what an echo turn writes (the inbox row and its outcome, WORKING
//! with the user's message, one reply chunk, the final status with the task's head and the
//! reply). Prints messages/s.
//!
//! `cargo run --release -p harness-store --example store_load [STORE_URL] [SECONDS]`
//! (default: a fresh SQLite file, 5 s). See docs/performance.md.

use a2a_types::{Message, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent, now_timestamp};
use harness_store::{InboxOutcome, NewEvent, Store};
use std::time::{Duration, Instant};

const TASKS: usize = 16;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| format!("sqlite://{}", dir.path().join("load.db").display()));
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let store = Store::connect(&url).await?;
    let run = uuid_like();
    let mut loops = Vec::new();
    for t in 0..TASKS {
        let store = store.clone();
        let task_id = format!("load-{run}-{t}");
        loops.push(tokio::spawn(async move { one_task(store, task_id, Duration::from_secs(seconds)).await }));
    }
    let mut messages = 0;
    for l in loops {
        messages += l.await??;
    }
    println!("{TASKS} tasks, {seconds} s: {} messages/s", messages / seconds);
    Ok(())
}

async fn one_task(store: Store, task_id: String, length: Duration) -> Result<u64, harness_store::StoreError> {
    let task = Task { id: task_id.clone(), context_id: "load".into(), ..Default::default() };
    let event = |key: String, state: TaskState, snapshot: Option<Task>| NewEvent {
        snapshot,
        ..NewEvent::new(
            task_id.clone(),
            key,
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.clone(),
                context_id: "load".into(),
                status: TaskStatus { state, message: None, timestamp: Some(now_timestamp()) },
                metadata: None,
            }),
            "load",
        )
    };
    let opened = NewEvent {
        event: StreamResponse::Task(task.clone()),
        ..event("open".into(), TaskState::Submitted, Some(task.clone()))
    };
    store.append(&opened).await?;
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < length {
        let message = Message::agent_text(format!("in-{n}"), "a message of a moderate length, like a user's");
        let request = format!("{task_id}-{n}");
        store.record_inbox(&request, &task_id, &message, InboxOutcome::Received, "").await?;
        store.set_inbox_outcome(&request, InboxOutcome::Accepted(0)).await?;
        let at = 2 * n as i64;
        let working = event(format!("working-{n}"), TaskState::Working, None);
        store.append(&NewEvent { history: vec![message], history_from: at, ..working }).await?;
        store.append(&event(format!("chunk-{n}"), TaskState::Working, None)).await?;
        let reply = Message::agent_text(format!("out-{n}"), "a reply of a moderate length, like a model's");
        let last = event(format!("final-{n}"), TaskState::InputRequired, Some(task.clone()));
        store.append(&NewEvent { history: vec![reply], history_from: at + 1, ..last }).await?;
        n += 1;
    }
    Ok(n)
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}
