//! Determinism: every recorded `TaskWorkflow` history replays through the SDK's replayer.
//! A change to the workflow that is not replay-compatible fails here with a
//! nondeterminism error (TEMPORAL-RUST.md). Fixtures: `cargo xtask histories`.

use harness_workflow::TaskWorkflow;
use temporalio_client::WorkflowHistory;
use temporalio_sdk::workflow_replayer::{WorkflowReplayer, WorkflowReplayerOptions};

#[tokio::test]
async fn recorded_histories_replay_without_nondeterminism() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/histories");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("tests/histories").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 4, "expected the recorded histories in {}", dir.display());
    let replayer =
        WorkflowReplayer::new(WorkflowReplayerOptions::new().register_workflow::<TaskWorkflow>().unwrap().build())
            .unwrap();
    for file in files {
        let history = WorkflowHistory::from_json(&std::fs::read(&file).unwrap()).unwrap();
        if let Err(e) = replayer.replay_workflow(history).await {
            panic!("{} does not replay: {e}", file.display());
        }
    }
}
