//! Every call the handler makes to Temporal, in one client type: each is bounded by the
//! request timeout (a timeout is a clear `Unavailable`, never a hang), and a failed update
//! is read by type: the workflow's typed [`Refusal`], a closed run, an unreachable server.
//! It sends no workflow query: a query crossing a message's workflow task (from this
//! instance or another) can make temporalio-sdk-core lose one, so every read is answered
//! from the store (issue 20, docs/deploying.md).

use a2a_types::{A2AError, ErrorKind};
use harness_store::Store;
use harness_workflow::{
    CancelRequest, InboxItem, Json, Receipt, Refusal, RefusalKind, RemotePush, TaskInput, TaskWorkflow,
};
use std::future::Future;
use std::time::Duration;
use temporalio_client::errors::{WorkflowUpdateError, WorkflowUpdateWithStartError};
use temporalio_client::tonic::{Code, Status};
use temporalio_client::{
    Client, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowSignalOptions, WorkflowUpdateWithStartOptions,
};

/// The handler's Temporal client.
#[derive(Clone)]
pub(crate) struct TaskClient {
    pub client: Client,
    pub task_queue: String,
    /// `temporal.request_timeout_secs`.
    pub timeout: Duration,
}

/// How a failed update-with-start reads, from the error's types alone.
#[derive(Debug, PartialEq)]
enum UpdateFailure {
    /// The workflow's validator refused the message.
    Refused(Refusal),
    /// The task's run has closed (TEMPORAL-RUST.md items 1 and 3).
    Closed,
    /// Temporal could not be reached.
    Unreachable,
    /// Temporal refused the update before admitting it because the workflow's task is being
    /// retried ("Workflow Task in failed state": its worker died or timed out and another
    /// has not finished it yet). Nothing was delivered; the same update goes through once a
    /// worker completes the workflow task.
    Recovering,
    Other,
}

fn classify(e: &WorkflowUpdateWithStartError) -> UpdateFailure {
    let by_code = |status: &Status| match status.code() {
        Code::AlreadyExists | Code::NotFound => UpdateFailure::Closed,
        Code::FailedPrecondition => UpdateFailure::Recovering,
        _ if crate::supervise::is_transport_error(status) => UpdateFailure::Unreachable,
        _ => UpdateFailure::Other,
    };
    match e {
        WorkflowUpdateWithStartError::Update(WorkflowUpdateError::Failed(failure)) => {
            Refusal::from_failure(failure).map_or(UpdateFailure::Other, UpdateFailure::Refused)
        }
        WorkflowUpdateWithStartError::Update(WorkflowUpdateError::NotFound(_))
        | WorkflowUpdateWithStartError::Start(_) => UpdateFailure::Closed,
        WorkflowUpdateWithStartError::Update(WorkflowUpdateError::Rpc(status))
        | WorkflowUpdateWithStartError::Rpc(status) => by_code(status),
        _ if crate::supervise::is_transport_error(e) => UpdateFailure::Unreachable,
        _ => UpdateFailure::Other,
    }
}

/// The error of a Temporal call that outlived the request timeout (`temporal.request_timeout_secs`).
fn unanswered(what: &str, timeout: Duration, task_queue: &str) -> A2AError {
    A2AError::new(
        ErrorKind::Unavailable,
        format!(
            "Temporal did not answer {what} within {} s (`temporal.request_timeout_secs`): the worker running the \
             task may be slow or gone (Temporal hands its work to another after a timeout of its own), or no worker \
             polls task queue `{task_queue}`",
            timeout.as_secs()
        ),
    )
}

/// What a message that outlived the timeout tells its sender: what the task queue's pollers
/// say, and that a retry learns the outcome.
fn message_unanswered(timeout: Duration, task_queue: &str, pollers: Option<usize>) -> A2AError {
    let why = match pollers {
        Some(0) => format!("no worker polls task queue `{task_queue}`: start one (`temporal.worker = true`)"),
        Some(n) => format!(
            "{n} worker(s) poll task queue `{task_queue}`: the one running the task may be slow or gone, and \
             Temporal hands its work to another after a timeout of its own"
        ),
        None => {
            format!("the worker running the task may be slow or gone, or no worker polls task queue `{task_queue}`")
        }
    };
    A2AError::new(
        ErrorKind::Unavailable,
        format!(
            "Temporal did not answer the message within {} s (`temporal.request_timeout_secs`); {why}. The message \
             may still be delivered: send it again with the same messageId to learn its outcome (it never runs twice)",
            timeout.as_secs()
        ),
    )
}

impl TaskClient {
    /// How many workers poll this task queue for workflow tasks, as Temporal says (`None`:
    /// it did not say in time).
    pub async fn pollers(&self) -> Option<usize> {
        use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeTaskQueueRequest;
        use temporalio_common::protos::temporal::api::{enums::v1::TaskQueueType, taskqueue::v1::TaskQueue};
        let request = DescribeTaskQueueRequest {
            namespace: temporalio_client::NamespacedClient::namespace(&self.client),
            task_queue: Some(TaskQueue { name: self.task_queue.clone(), ..Default::default() }),
            task_queue_type: TaskQueueType::Workflow as i32,
            ..Default::default()
        };
        let mut service = self.client.connection().workflow_service();
        let call = service.describe_task_queue(temporalio_client::tonic::Request::new(request));
        match tokio::time::timeout(Duration::from_secs(2), call).await {
            Ok(Ok(r)) => Some(r.into_inner().pollers.len()),
            _ => None,
        }
    }

    /// Bounds a Temporal call by the request timeout.
    pub async fn bounded<T>(&self, what: &str, fut: impl Future<Output = T>) -> Result<T, A2AError> {
        tokio::time::timeout(self.timeout, fut).await.map_err(|_| unanswered(what, self.timeout, &self.task_queue))
    }

    /// Update-with-start of the task's workflow with a message as its `inbox` update (S4).
    pub async fn deliver(&self, store: &Store, input: TaskInput, item: InboxItem) -> Result<Receipt, A2AError> {
        let task_id = input.task_id.clone();
        let options = WorkflowUpdateWithStartOptions::new(
            self.task_queue.clone(),
            task_id.clone(),
            WorkflowIdConflictPolicy::UseExisting,
        )
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .build();
        // A workflow whose task is being retried refuses the update before admitting it: it is
        // sent again until it is admitted or the request timeout ends (the chaos test of
        // three instances found clients told INTERNAL meanwhile).
        let item = Json(item);
        let delivery = async {
            let mut pause = Duration::from_millis(100);
            loop {
                let update = self.client.execute_update_with_start_workflow(
                    TaskWorkflow::run,
                    input.clone(),
                    TaskWorkflow::inbox,
                    item.clone(),
                    options.clone(),
                );
                match update.await {
                    Err(e) if classify(&e) == UpdateFailure::Recovering => {
                        tracing::debug!(task_id, error = %e, "the task's workflow task is being retried; sending again");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(2));
                    }
                    answered => return answered,
                }
            }
        };
        let answered = tokio::time::timeout(self.timeout, delivery).await;
        let Ok(answered) = answered else {
            return Err(message_unanswered(self.timeout, &self.task_queue, self.pollers().await));
        };
        match answered {
            Ok(receipt) => Ok(receipt.into_inner()),
            Err(e) => Err(self.update_error(store, &task_id, e).await),
        }
    }

    /// Maps a failed update-with-start to the A2A error the client should see.
    async fn update_error(&self, store: &Store, task_id: &str, e: WorkflowUpdateWithStartError) -> A2AError {
        match classify(&e) {
            UpdateFailure::Refused(r) => {
                let kind = match r.kind {
                    RefusalKind::InvalidMessage => ErrorKind::InvalidParams,
                    RefusalKind::TaskEnded | RefusalKind::NotAllowed => ErrorKind::UnsupportedOperation,
                };
                let error = A2AError::new(kind, r.message).with("taskId", task_id);
                return match r.code {
                    Some(code) => error.with("code", code),
                    None => error,
                };
            }
            UpdateFailure::Closed => {
                // A run Temporal closed without the task ending (a limit, an operator) is
                // ended in the store first, so this and every later message is refused
                // naming the state (S7).
                if let Err(why) = crate::reconcile::ended_run(&self.client, store, task_id).await {
                    tracing::warn!(task_id, why, "could not check how the task's run ended");
                }
                if let Ok(Some(head)) = store.task_head(task_id).await
                    && head.state.is_terminal()
                {
                    return A2AError::unsupported(harness_workflow::terminal_refusal(head.state))
                        .with("taskId", task_id)
                        .with("state", head.state.as_str());
                }
            }
            UpdateFailure::Unreachable => {
                tracing::error!(task_id, error = %e, "update-with-start failed");
                return A2AError::new(
                    ErrorKind::Unavailable,
                    format!(
                        "Temporal is unreachable: the message to task {task_id} was not delivered; retry it (same \
                         messageId) in a few seconds"
                    ),
                );
            }
            UpdateFailure::Recovering | UpdateFailure::Other => {}
        }
        tracing::error!(task_id, error = %e, "update-with-start failed");
        A2AError::internal(format!("could not deliver the message to task {task_id}: {e}"))
    }

    /// Signals a task's workflow to cancel (S7). A refused signal is `Internal`, a timeout
    /// `Unavailable`.
    pub async fn cancel(&self, task_id: &str) -> Result<(), A2AError> {
        let handle = self.client.get_workflow_handle::<TaskWorkflow>(task_id);
        let reason = CancelRequest { reason: "CancelTask".into() };
        self.bounded("the cancel", handle.signal(TaskWorkflow::cancel, reason, WorkflowSignalOptions::default()))
            .await?
            .map_err(|e| A2AError::internal(format!("could not cancel task {task_id}: {e}")))
    }

    /// The task queue a task's workflow runs on; `None` when it cannot be described.
    pub async fn queue_of(&self, task_id: &str) -> Result<Option<String>, A2AError> {
        let handle = self.client.get_workflow_handle::<TaskWorkflow>(task_id);
        let described = self
            .bounded("the describe", handle.describe(temporalio_client::WorkflowDescribeOptions::default()))
            .await?;
        Ok(described.ok().and_then(|d| {
            d.raw_description.execution_config.as_ref().and_then(|c| c.task_queue.as_ref()).map(|q| q.name.clone())
        }))
    }

    /// A push for a stand-in (S15): whether its `remote_push` validator took it. Any
    /// failure (no such workflow, an ended one, a refusal, a timeout) is `false`.
    pub async fn remote_push(&self, task_id: &str, push: RemotePush) -> bool {
        let handle = self.client.get_workflow_handle::<TaskWorkflow>(task_id);
        let update = handle.execute_update(
            TaskWorkflow::remote_push,
            push,
            temporalio_client::WorkflowExecuteUpdateOptions::default(),
        );
        match self.bounded("the push", update).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(task_id, error = %e, "push refused");
                false
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temporalio_client::errors::WorkflowStartError;
    use temporalio_common::data_converters::{DataConverter, SerializationContextData};
    use temporalio_common::error::{ApplicationFailure, OutgoingError, OutgoingWorkflowError};

    /// A validator's error as the update's failure, encoded as the SDK encodes it.
    fn rejected(err: Box<dyn std::error::Error + Send + Sync>) -> WorkflowUpdateWithStartError {
        let wrapped = OutgoingWorkflowError::Application(Box::new(ApplicationFailure::new(err)));
        let failure =
            DataConverter::default().to_failure(&SerializationContextData::None, OutgoingError::Workflow(wrapped));
        WorkflowUpdateWithStartError::Update(WorkflowUpdateError::Failed(Box::new(failure)))
    }

    #[test]
    fn each_refusal_kind_is_read_by_type() {
        for refusal in
            [Refusal::task_ended(a2a_types::TaskState::Canceled), Refusal::invalid_message("the message has no parts")]
        {
            assert_eq!(classify(&rejected(refusal.clone().into_error())), UpdateFailure::Refused(refusal));
        }
        // The old text encoding, or any other failure, is no refusal.
        assert_eq!(classify(&rejected("refused:UNSUPPORTED_OPERATION:3:abc".into())), UpdateFailure::Other);
    }

    #[test]
    fn closed_runs_and_unreachable_servers_are_read_from_status_codes() {
        let closed = WorkflowUpdateWithStartError::Update(WorkflowUpdateError::NotFound(Status::not_found(
            "workflow execution already completed",
        )));
        assert_eq!(classify(&closed), UpdateFailure::Closed);
        let started = WorkflowUpdateWithStartError::Start(WorkflowStartError::AlreadyStarted {
            run_id: None,
            source: Status::already_exists("x"),
        });
        assert_eq!(classify(&started), UpdateFailure::Closed);
        let down = WorkflowUpdateWithStartError::Rpc(Status::unavailable("tcp connect error"));
        assert_eq!(classify(&down), UpdateFailure::Unreachable);
        let other = WorkflowUpdateWithStartError::Rpc(Status::internal("boom"));
        assert_eq!(classify(&other), UpdateFailure::Other);
        // What Temporal answers while the workflow's task is retried after its worker died.
        let recovering = WorkflowUpdateWithStartError::Update(WorkflowUpdateError::Rpc(Status::failed_precondition(
            "Unable to perform workflow execution update due to Workflow Task in failed state.",
        )));
        assert_eq!(classify(&recovering), UpdateFailure::Recovering);
    }
}
