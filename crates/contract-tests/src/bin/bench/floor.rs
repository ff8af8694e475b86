//! The floor: trivial and turn-shaped workflows on the same dev server, and the loops that
//! measure their updates.

use futures::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use temporalio_client::{
    Client, WorkflowExecuteUpdateOptions, WorkflowIdConflictPolicy, WorkflowIdReusePolicy,
    WorkflowUpdateWithStartOptions,
};
use temporalio_macros::activities;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{LocalActivityOptions, SyncWorkflowContext, WorkflowContext, WorkflowResult};

#[workflow]
#[derive(Default)]
pub struct FloorWorkflow {
    pings: u64,
    done: bool,
}

#[workflow_methods]
impl FloorWorkflow {
    #[run(name = "FloorWorkflow")]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<u64> {
        ctx.wait_condition(|s| s.done).await?;
        Ok(ctx.state(|s| s.pings))
    }

    #[update(name = "ping")]
    pub fn ping(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _n: u64) -> u64 {
        self.pings += 1;
        self.pings
    }

    #[signal(name = "stop")]
    pub fn stop(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _x: ()) {
        self.done = true;
    }
}

/// The shape of a harness turn without the harness: each update is answered after three
/// local activities that do nothing (the harness's WORKING append, model call and final
/// append), all in the workflow task that accepts the update.
#[workflow]
#[derive(Default)]
pub struct TurnWorkflow {
    waiting: u64,
    done: bool,
}

#[workflow_methods]
impl TurnWorkflow {
    #[run(name = "TurnWorkflow")]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        loop {
            ctx.wait_condition(|s| s.waiting > 0 || s.done).await?;
            if ctx.state(|s| s.done) {
                return Ok(());
            }
            ctx.state_mut(|s| s.waiting -= 1);
            for step in 0..3u64 {
                let options = LocalActivityOptions::builder().start_to_close_timeout(Duration::from_secs(10)).build();
                ctx.execute_local_activity(Noop::noop, step, options).await?;
            }
        }
    }

    #[update(name = "ping")]
    pub fn ping(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _n: u64) -> u64 {
        self.waiting += 1;
        self.waiting
    }

    #[signal(name = "stop")]
    pub fn stop(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _x: ()) {
        self.done = true;
    }
}

/// The Temporal shape of a tool round without the harness (issue 29): a regular activity
/// (the tool), two local activities (the result's status update and the model call's
/// WORKING state are appends), then a regular activity (the next model call). Run with
/// `false` it does nothing: the difference of the two is the shape's own time.
#[workflow]
#[derive(Default)]
pub struct ToolShapeWorkflow;

#[workflow_methods]
impl ToolShapeWorkflow {
    #[run(name = "ToolShapeWorkflow")]
    pub async fn run(ctx: &mut WorkflowContext<Self>, shaped: bool) -> WorkflowResult<()> {
        if !shaped {
            return Ok(());
        }
        let regular = || temporalio_sdk::ActivityOptions::with_start_to_close_timeout(Duration::from_secs(10)).build();
        let local = || LocalActivityOptions::builder().start_to_close_timeout(Duration::from_secs(10)).build();
        ctx.execute_activity(Noop::noop, 0u64, regular()).await?;
        ctx.execute_local_activity(Noop::noop, 1u64, local()).await?;
        ctx.execute_local_activity(Noop::noop, 2u64, local()).await?;
        ctx.execute_activity(Noop::noop, 3u64, regular()).await?;
        Ok(())
    }
}

/// One run of [`ToolShapeWorkflow`], start to result.
pub(crate) async fn tool_shape_once(client: &Client, shaped: bool) -> Duration {
    let id = unique("tool-shape");
    let t = Instant::now();
    let handle = client
        .start_workflow(
            ToolShapeWorkflow::run,
            shaped,
            temporalio_client::WorkflowStartOptions::new("bench-floor", id).build(),
        )
        .await
        .expect("start");
    handle.get_result(Default::default()).await.expect("tool shape");
    t.elapsed()
}

pub struct Noop;

#[activities]
impl Noop {
    #[activity(name = "noop")]
    pub async fn noop(self: Arc<Self>, _ctx: ActivityContext, n: u64) -> Result<u64, ActivityError> {
        Ok(n)
    }
}

pub(crate) fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos())
}

/// One update-with-start of a new trivial workflow; returns its latency and id.
pub(crate) async fn floor_once(client: &Client) -> (Duration, String) {
    let id = unique("floor");
    let opts = WorkflowUpdateWithStartOptions::new("bench-floor", id.clone(), WorkflowIdConflictPolicy::UseExisting)
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .build();
    let t = Instant::now();
    client
        .execute_update_with_start_workflow(FloorWorkflow::run, (), FloorWorkflow::ping, 1, opts)
        .await
        .expect("floor update-with-start");
    (t.elapsed(), id)
}

pub(crate) async fn stop_floor(client: &Client, ids: Vec<String>) {
    for id in ids {
        let _ =
            client.get_workflow_handle::<FloorWorkflow>(id).signal(FloorWorkflow::stop, (), Default::default()).await;
    }
}

/// How the raw loops send: a plain update or update-with-start (use-existing, as the
/// harness does) to trivial workflows, or a plain update to turn-shaped ones.
#[derive(Clone, Copy)]
pub(crate) enum Raw {
    Update,
    UpdateWithStart,
    Turn,
}

/// One loop per id for `slice`, each sending again as soon as its last send was answered;
/// returns how many sends were answered.
pub(crate) async fn count_loops<F>(ids: &[String], slice: Duration, send: F) -> u64
where
    F: Fn(String) -> BoxFuture<'static, ()> + Clone + Send + 'static,
{
    let count = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + slice;
    let mut loops = Vec::new();
    for id in ids {
        let (send, count, id) = (send.clone(), count.clone(), id.clone());
        loops.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                send(id.clone()).await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for l in loops {
        l.await.expect("send loop");
    }
    count.load(Ordering::Relaxed)
}

/// Updates sent to running workflows, one loop per workflow, for `slice`.
pub(crate) async fn raw_slice(client: &Client, ids: &[String], slice: Duration, raw: Raw) -> u64 {
    let client = client.clone();
    count_loops(ids, slice, move |id| {
        let client = client.clone();
        Box::pin(async move {
            match raw {
                Raw::UpdateWithStart => {
                    let opts =
                        WorkflowUpdateWithStartOptions::new("bench-floor", id, WorkflowIdConflictPolicy::UseExisting)
                            .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
                            .build();
                    client
                        .execute_update_with_start_workflow(FloorWorkflow::run, (), FloorWorkflow::ping, 1, opts)
                        .await
                        .expect("ping");
                }
                Raw::Update => {
                    client
                        .get_workflow_handle::<FloorWorkflow>(id)
                        .execute_update(FloorWorkflow::ping, 1, WorkflowExecuteUpdateOptions::default())
                        .await
                        .expect("ping");
                }
                Raw::Turn => {
                    client
                        .get_workflow_handle::<TurnWorkflow>(id)
                        .execute_update(TurnWorkflow::ping, 1, WorkflowExecuteUpdateOptions::default())
                        .await
                        .expect("ping");
                }
            }
        })
    })
    .await
}
