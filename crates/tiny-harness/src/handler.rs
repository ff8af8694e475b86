//! The A2A request handler of the harness: SendMessage is update-with-start of the task's
//! `TaskWorkflow` with the (redacted) message as its `inbox` update (S4); streams read the
//! event log from the receipt's cursor (D1, S10); reads go to the workflow's `task` query
//! and fall back to the store once the workflow is gone (S13). Every call to Temporal is
//! bounded by `temporal.request_timeout_secs` (TEMPORAL-RUST.md item 4).

use a2a_server::{CallContext, EventStream, RequestHandler};
use a2a_types::{
    A2AError, AgentCard, CancelTaskRequest, ErrorKind, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, Message, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig,
    TaskPushNotificationConfigRef, TaskState, validate,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::StreamExt;
use harness_push::{PushSecret, Pusher};
use harness_store::{InboxOutcome, Store, TaskHead, TaskRow};
use harness_store::{PushRow, TaskQuery};
use harness_workflow::redaction::Redactor;
use harness_workflow::{
    CancelRequest, InboxItem, Lifecycle, Receipt, Refusal, TaskInput, TaskWorkflow, terminal_refusal,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::errors::{WorkflowQueryError, WorkflowUpdateError, WorkflowUpdateWithStartError};
use temporalio_client::{
    Client, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowQueryOptions, WorkflowSignalOptions,
    WorkflowUpdateWithStartOptions,
};

/// Where a log stream stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopAt {
    /// Terminal or interrupted: a SendMessage stream (S10).
    Final,
    /// Terminal only: SubscribeToTask stays attached through INPUT_REQUIRED (S10).
    Terminal,
}

impl StopAt {
    fn reached(self, e: &StreamResponse) -> bool {
        match self {
            Self::Final => e.is_final(),
            Self::Terminal => e.is_terminal(),
        }
    }
}

/// Resolves who is calling from a request (S17). When a host gives one, it is the only
/// source of the participant: `X-Participant-Id` and `metadata.participant_id` are ignored.
#[async_trait::async_trait]
pub trait ParticipantResolver: Send + Sync + 'static {
    /// The caller's participant id; `Ok(None)` when this request has none. An error fails
    /// the request.
    async fn resolve(&self, headers: &axum::http::HeaderMap) -> Result<Option<String>, String>;
}

/// Who is calling (S13, D4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No participant known: sees tasks unfiltered, its messages are ordinary messages.
    Anonymous,
    Participant(String),
}

/// What a caller wants to do with a task, for the access policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Cancel,
}

/// The participant role of this agent on its own tasks.
const ASSIGNEE: &str = "assignee";

/// The harness's [`RequestHandler`].
pub struct HarnessHandler {
    pub(crate) client: Client,
    pub(crate) store: Store,
    pub(crate) redactor: Redactor,
    pub(crate) task_queue: String,
    pub(crate) lifecycle: Lifecycle,
    pub(crate) model: String,
    pub(crate) linger_secs: u64,
    pub(crate) instant_model: bool,
    pub(crate) timeout: Duration,
    /// `agent.max_message_bytes`.
    pub(crate) max_message_bytes: usize,
    pub(crate) card: Arc<AgentCard>,
    pub(crate) extended_card: Option<AgentCard>,
    /// Push delivery and the key that seals configs; `None`: push notifications are off.
    pub(crate) pusher: Option<Arc<Pusher>>,
    pub(crate) agent_id: String,
    pub(crate) resolver: Option<Arc<dyn ParticipantResolver>>,
    /// S19: whether a task id runs on this agent's queue, from describing its workflow
    /// (cached per id) when the store does not know the task.
    pub(crate) owners: std::sync::Mutex<std::collections::HashMap<String, bool>>,
    /// Keeps this process's workflow queries from crossing its messages on one task.
    pub(crate) gates: crate::task_gate::TaskGates,
    /// Whether Temporal answers (issue 13): while it does not, sends and cancels fail fast
    /// and reads come from the store.
    pub(crate) health: Arc<crate::supervise::Health>,
}

/// A message the workflow accepted.
struct Accepted {
    task_id: String,
    receipt: Receipt,
    /// The accepted message as delivered (redacted, ids set).
    message: Message,
    /// The stored snapshot read before delivery, when asked for (a continued task).
    before: Option<Task>,
}

/// A message durable in its task's inbox (S5) whose delivery runs in a task of its own.
struct Pending {
    task_id: String,
    message: Message,
    before: Option<Task>,
    /// The message opened the task: its log starts at seq 1 with the Task.
    new_task: bool,
    /// Update-with-start, then the audit row's outcome: they complete even when the caller
    /// goes away before them.
    delivery: tokio::task::JoinHandle<Result<Receipt, A2AError>>,
}

/// Waits for a delivery's answer.
async fn delivered(delivery: &mut tokio::task::JoinHandle<Result<Receipt, A2AError>>) -> Result<Receipt, A2AError> {
    delivery.await.map_err(|e| A2AError::internal(format!("the delivery of the message failed: {e}")))?
}

impl Pending {
    /// A message answered without a delivery: a retry of one the workflow accepted.
    fn answered(task_id: String, message: Message, before: Option<Task>, new_task: bool, receipt: Receipt) -> Self {
        Self { task_id, message, before, new_task, delivery: tokio::spawn(async move { Ok(receipt) }) }
    }

    /// Waits for the workflow's answer to the message.
    async fn accepted(mut self) -> Result<Accepted, A2AError> {
        let receipt = delivered(&mut self.delivery).await?;
        Ok(Accepted { task_id: self.task_id, receipt, message: self.message, before: self.before })
    }
}

fn store_error(e: harness_store::StoreError) -> A2AError {
    A2AError::internal(format!("the store failed: {e}"))
}

/// Maps a failed update-with-start to the A2A error the client should see.
async fn update_error(client: &Client, store: &Store, task_id: &str, e: WorkflowUpdateWithStartError) -> A2AError {
    let text = format!("{e:?}");
    if let Some(r) = Refusal::decode(&text) {
        let kind = match r.reason.as_str() {
            "INVALID_PARAMS" => ErrorKind::InvalidParams,
            "TASK_NOT_FOUND" => ErrorKind::TaskNotFound,
            _ => ErrorKind::UnsupportedOperation,
        };
        return A2AError::new(kind, r.message).with("taskId", task_id);
    }
    // The run has closed (TEMPORAL-RUST.md items 1 and 3): answer from the store (S7).
    let closed = matches!(&e, WorkflowUpdateWithStartError::Update(WorkflowUpdateError::NotFound(_)))
        || matches!(&e, WorkflowUpdateWithStartError::Start(_))
        || text.contains("AlreadyExists")
        || text.contains("already completed");
    if closed {
        // A run Temporal closed without the task ending (a limit, an operator) is ended in
        // the store first, so this and every later message is refused naming the state.
        if let Err(why) = crate::reconcile::ended_run(client, store, task_id).await {
            tracing::warn!(task_id, why, "could not check how the task's run ended");
        }
        if let Ok(Some(head)) = store.task_head(task_id).await
            && head.state.is_terminal()
        {
            return A2AError::unsupported(terminal_refusal(head.state))
                .with("taskId", task_id)
                .with("state", head.state.as_str());
        }
    }
    tracing::error!(task_id, error = %e, "update-with-start failed");
    if crate::supervise::is_transport_error(&text) {
        return A2AError::new(
            ErrorKind::Unavailable,
            format!(
                "Temporal is unreachable: the message to task {task_id} was not delivered; retry it (same messageId) \
                 in a few seconds"
            ),
        );
    }
    A2AError::internal(format!("could not deliver the message to task {task_id}: {e}"))
}

/// The error of a Temporal call that outlived the request timeout.
fn unanswered(what: &str, timeout: Duration, task_queue: &str) -> A2AError {
    A2AError::new(
        ErrorKind::Unavailable,
        format!(
            "Temporal did not answer {what} within {} s: is a worker polling task queue `{task_queue}`?",
            timeout.as_secs()
        ),
    )
}

impl HarnessHandler {
    /// Bounds a Temporal call; a timeout is a clear Unavailable error, never a hang.
    async fn bounded<T>(&self, what: &str, fut: impl Future<Output = T>) -> Result<T, A2AError> {
        tokio::time::timeout(self.timeout, fut).await.map_err(|_| unanswered(what, self.timeout, &self.task_queue))
    }

    /// The stored row of a task with the newest `history_length` messages (all: `None`).
    async fn row(&self, task_id: &str, history_length: Option<i32>) -> Result<Option<TaskRow>, A2AError> {
        self.store.task(task_id, history_length).await.map_err(store_error)
    }

    /// Audits a refused message and returns the refusal.
    async fn refuse(&self, request_id: &str, task_id: &str, message: &Message, err: A2AError) -> A2AError {
        let refused = InboxOutcome::Refused(err.message.clone());
        if let Err(e) = self.store.record_inbox(request_id, task_id, message, refused, "").await {
            tracing::warn!(error = %e, "could not write the audit row of a refused message");
        }
        err
    }

    /// Validates, redacts and audits a message, and starts its delivery to the task's inbox
    /// (S4, S5, S7). `want_snapshot`: also read the stored snapshot of a continued task
    /// before delivering (a stream or `returnImmediately` answers with it); a blocking send
    /// does not need it.
    async fn admit(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
        want_snapshot: bool,
    ) -> Result<Pending, A2AError> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let caller =
            self.caller(ctx, &[req.message.as_ref().and_then(|m| m.metadata.as_ref()), req.metadata.as_ref()]).await?;
        if self.resolver.is_some() && caller == Caller::Anonymous {
            let err = A2AError::invalid_params(
                "invalid params: no participant: the participant resolver resolved none for this request \
                 (with a resolver, metadata cannot name the sender)",
            );
            return Err(match &req.message {
                Some(m) => self.refuse(&request_id, &m.task_id, m, err).await,
                None => err,
            });
        }
        let sender = match &caller {
            Caller::Participant(id) => id.clone(),
            Caller::Anonymous => String::new(),
        };
        let mut message = match validate::send_message(&req) {
            Ok(m) => m.clone(),
            Err(e) => {
                return Err(match &req.message {
                    Some(m) => self.refuse(&request_id, &m.task_id, m, e).await,
                    None => e,
                });
            }
        };
        self.redactor.message(&mut message);
        if !self.health.is_up() {
            let err = self.health.unavailable("the delivery of the message");
            return Err(self.refuse(&request_id, &message.task_id, &message, err).await);
        }
        let size = serde_json::to_vec(&message).map_or(0, |m| m.len());
        if size > self.max_message_bytes {
            let err = A2AError::invalid_params(format!(
                "invalid params: the message is {size} bytes; this agent takes at most {} bytes per message \
                 (`agent.max_message_bytes`): a larger one does not fit Temporal's payloads",
                self.max_message_bytes
            ))
            .with("field", "message");
            return Err(self.refuse(&request_id, &message.task_id, &message, err).await);
        }

        let mut before = None;
        let new_task = message.task_id.is_empty();
        let (task_id, context_id) = if new_task {
            let context_id = if message.context_id.is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                message.context_id.clone()
            };
            (uuid::Uuid::new_v4().to_string(), context_id)
        } else {
            let task_id = message.task_id.clone();
            let head = if want_snapshot {
                self.row(&task_id, None).await?.map(|row| {
                    let head = TaskHead {
                        state: row.state,
                        context_id: row.task.context_id.clone(),
                        last_seq: row.last_seq,
                        task_queue: row.task_queue.clone(),
                        rewrites: 0,
                    };
                    before = Some(row.task);
                    head
                })
            } else {
                self.store.task_head(&task_id).await.map_err(store_error)?
            };
            // S19 from the row just read; then the caller's access (S13).
            let head = match head {
                Some(h) if h.task_queue == self.task_queue => h,
                _ => {
                    return Err(self.refuse(&request_id, &task_id, &message, A2AError::task_not_found(&task_id)).await);
                }
            };
            if let Err(e) = self.check_participant(&caller, &task_id, Access::Read).await {
                return Err(self.refuse(&request_id, &task_id, &message, e).await);
            }
            // S5: a message accepted before (same messageId) is answered with its first
            // outcome from the store, whatever the task did since; it runs no second turn.
            if let Some(prior) = self.store.prior_message(&task_id, &message.message_id).await.map_err(store_error)?
                && prior.accepted()
            {
                if let Err(e) = same_message(&prior, &message) {
                    return Err(self.refuse(&request_id, &task_id, &message, e).await);
                }
                if before.is_none() {
                    before = self.row(&task_id, None).await?.map(|r| r.task);
                }
                let receipt = Receipt {
                    accepted: true,
                    cursor: prior.cursor.unwrap_or(0),
                    state: head.state,
                    task: None,
                    duplicate: true,
                };
                message.task_id = task_id.clone();
                message.context_id = head.context_id.clone();
                return Ok(Pending::answered(task_id, message, before, false, receipt));
            }
            if head.state.is_terminal() {
                let err = A2AError::unsupported(terminal_refusal(head.state))
                    .with("taskId", &task_id)
                    .with("state", head.state.as_str());
                return Err(self.refuse(&request_id, &task_id, &message, err).await);
            }
            if !message.context_id.is_empty() && message.context_id != head.context_id {
                let err = A2AError::invalid_params(format!(
                    "invalid params: message.contextId `{}` does not match the task's context `{}`",
                    message.context_id, head.context_id
                ));
                return Err(self.refuse(&request_id, &task_id, &message, err).await);
            }
            (task_id, head.context_id)
        };
        message.task_id = task_id.clone();
        message.context_id = context_id.clone();

        if let Some(config) = req.configuration.as_ref().and_then(|c| c.task_push_notification_config.clone()) {
            let stored = self.store_push_config(&task_id, config).await;
            if let Err(e) = stored {
                return Err(self.refuse(&request_id, &task_id, &message, e).await);
            }
        }

        // S5: the message is durable before anything is acknowledged.
        let mut task_id = task_id;
        let mut context_id = context_id;
        if new_task {
            // A new task: the sender (when known) reports it, this agent is its assignee.
            let mut participants = vec![(self.agent_id.clone(), ASSIGNEE.to_string())];
            if let Caller::Participant(id) = &caller {
                participants.push((id.clone(), "reporter".to_string()));
            }
            let opens = format!("{sender}\n{}", message.message_id);
            let prior = self
                .store
                .record_new_task_inbox(&request_id, &task_id, &message, &participants, &sender, &opens)
                .await
                .map_err(store_error)?;
            if let Some(prior) = prior {
                // A retried first message: the task its first attempt opened.
                if let Err(e) = same_message(&prior, &message) {
                    return Err(self.refuse(&request_id, &prior.task_id, &message, e).await);
                }
                let first: Message = serde_json::from_str(&prior.body).map_err(|e| {
                    A2AError::internal(format!(
                        "the audited first message of task {} is unreadable: {e}",
                        prior.task_id
                    ))
                })?;
                (task_id, context_id) = (prior.task_id.clone(), first.context_id.clone());
                message.task_id = task_id.clone();
                message.context_id = context_id.clone();
                if prior.accepted() {
                    let state = self
                        .store
                        .task_head(&task_id)
                        .await
                        .map_err(store_error)?
                        .map_or(TaskState::Submitted, |h| h.state);
                    let receipt = Receipt { accepted: true, cursor: 0, state, task: None, duplicate: true };
                    return Ok(Pending::answered(task_id, message, None, true, receipt));
                }
                // Its first attempt was not answered: deliver it again (the workflow, if it
                // started, knows the message and answers with its receipt).
                self.store
                    .record_inbox(&request_id, &task_id, &message, InboxOutcome::Received, &sender)
                    .await
                    .map_err(store_error)?;
            }
        } else {
            self.store
                .record_inbox(&request_id, &task_id, &message, InboxOutcome::Received, &sender)
                .await
                .map_err(store_error)?;
        }

        let input = TaskInput {
            task_id: task_id.clone(),
            context_id,
            task_queue: self.task_queue.clone(),
            lifecycle: self.lifecycle,
            model: self.model.clone(),
            linger_secs: self.linger_secs,
            instant_model: self.instant_model,
            metadata: new_task.then(|| {
                let reporter = match &caller {
                    Caller::Participant(id) => Some(id.as_str()),
                    Caller::Anonymous => None,
                };
                default_brief(&message, reporter, &self.agent_id)
            }),
            first: None,
        };
        let item = InboxItem { request_id, message: message.clone() };
        // The first message travels in the start itself, durable with it (docs/event-log.md).
        let input = TaskInput { first: new_task.then(|| item.clone()), ..input };
        let delivery = self.deliver(input, item);
        Ok(Pending { task_id, message, before, new_task, delivery })
    }

    /// Runs a message's update-with-start in a task of its own, bounded by the request
    /// timeout, and writes its audit row's outcome (S5) whatever becomes of the caller.
    fn deliver(&self, input: TaskInput, item: InboxItem) -> tokio::task::JoinHandle<Result<Receipt, A2AError>> {
        let (client, store, gates) = (self.client.clone(), self.store.clone(), self.gates.clone());
        let (timeout, task_queue) = (self.timeout, self.task_queue.clone());
        tokio::spawn(async move {
            let task_id = input.task_id.clone();
            let request_id = item.request_id.clone();
            let options = WorkflowUpdateWithStartOptions::new(
                task_queue.clone(),
                task_id.clone(),
                WorkflowIdConflictPolicy::UseExisting,
            )
            .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
            .build();
            let update =
                client.execute_update_with_start_workflow(TaskWorkflow::run, input, TaskWorkflow::inbox, item, options);
            let outcome = match tokio::time::timeout(timeout, gates.deliver(&task_id, update)).await {
                Ok(Ok(receipt)) => Ok(receipt),
                Ok(Err(e)) => Err(update_error(&client, &store, &task_id, e).await),
                Err(_) => Err(unanswered("the message", timeout, &task_queue)),
            };
            let audit = match &outcome {
                Ok(receipt) => InboxOutcome::Accepted(receipt.cursor),
                Err(e) => InboxOutcome::Refused(e.message.clone()),
            };
            store.set_inbox_outcome(&request_id, audit).await.map_err(store_error)?;
            outcome
        })
    }

    /// Reads the log of a task from `after`, in order, until `stop` (D1).
    pub fn log_stream(&self, task_id: String, after: i64, stop: StopAt) -> EventStream {
        let store = self.store.clone();
        async_stream::stream! {
            // Subscribe before reading so an append between read and wait is not missed.
            let mut wake = store.notifier().subscribe(&task_id);
            let mut rewrites = wake.borrow().rewrites;
            let mut cursor = after;
            loop {
                let now = *wake.borrow();
                if now.rewrites != rewrites {
                    rewrites = now.rewrites;
                    if now.rewound_from <= cursor {
                        // What this stream delivered from that seq on was written by a workflow
                        // task that never committed; going on would leave a hole.
                        yield Err(A2AError::new(
                            ErrorKind::Unavailable,
                            format!(
                                "the log of task {task_id} was cut back to seq {} after a crash: events this stream \
                                 delivered from there on were never committed; subscribe again to read the log from \
                                 the start",
                                now.rewound_from - 1
                            ),
                        )
                        .with("taskId", &task_id));
                        return;
                    }
                }
                let batch = match store.events_after(&task_id, cursor, 256).await {
                    Ok(b) => b,
                    Err(e) => {
                        yield Err(store_error(e));
                        return;
                    }
                };
                let empty = batch.is_empty();
                for logged in batch {
                    cursor = logged.seq;
                    let end = stop.reached(&logged.event);
                    yield Ok(logged.event);
                    if end {
                        return;
                    }
                }
                if empty {
                    // Woken by appends in this process; the timeout only covers appends made
                    // by another process (a separate worker), it is not the latency floor.
                    let _ = tokio::time::timeout(Duration::from_secs(1), wake.changed()).await;
                }
            }
        }
        .boxed()
    }

    /// Reads a task's log to its end (`events` stops where it should), then answers with
    /// the stored task (the snapshot written with that final event) and the newest
    /// `history_length` messages.
    async fn task_at_end(
        &self,
        task_id: &str,
        mut events: EventStream,
        history_length: Option<i32>,
    ) -> Result<Task, A2AError> {
        let mut last_status = None;
        while let Some(event) = events.next().await {
            match event? {
                StreamResponse::StatusUpdate(u) => last_status = Some(u.status),
                StreamResponse::Task(t) => last_status = Some(t.status),
                _ => {}
            }
        }
        let mut task = self
            .row(task_id, history_length)
            .await?
            .map(|r| r.task)
            .ok_or_else(|| A2AError::task_not_found(task_id))?;
        // The answer's status is the one the stream ended at: a retried message's own final
        // status, even when later turns have run since.
        if let Some(status) = last_status {
            task.status = status;
        }
        Ok(task)
    }

    /// The task right after a message was accepted: the receipt's snapshot when the message
    /// opened the task, else the snapshot stored before delivery with the message added. A
    /// retried message (already in the history) and a new task whose receipt came without a
    /// snapshot are answered with the stored task.
    async fn accepted_task(&self, accepted: Accepted) -> Result<Task, A2AError> {
        if let Some(task) = accepted.receipt.task {
            return Ok(task);
        }
        let state = accepted.receipt.state;
        let (mut task, add) = match accepted.before {
            Some(task) if !accepted.receipt.duplicate => (task, true),
            _ => (
                self.row(&accepted.task_id, None)
                    .await?
                    .map(|r| r.task)
                    .ok_or_else(|| A2AError::task_not_found(&accepted.task_id))?,
                false,
            ),
        };
        if add {
            task.status.state = state;
            task.history.push(accepted.message);
        }
        Ok(task)
    }

    /// The caller (S13, S17, D4): the resolver's answer when there is a resolver (a
    /// resolver error fails the request); else `X-Participant-Id`, else the message's or the
    /// request's `metadata.participant_id`.
    pub(crate) async fn caller(
        &self,
        ctx: &CallContext,
        metadata: &[Option<&a2a_types::Struct>],
    ) -> Result<Caller, A2AError> {
        if let Some(resolver) = &self.resolver {
            return match resolver.resolve(&ctx.headers).await {
                Ok(Some(id)) if !id.is_empty() => Ok(Caller::Participant(id)),
                Ok(_) => Ok(Caller::Anonymous),
                Err(e) => Err(A2AError::internal(format!("the participant resolver failed: {e}"))),
            };
        }
        let header = ctx.headers.get("x-participant-id").and_then(|v| v.to_str().ok()).map(str::trim);
        if let Some(id) = header.filter(|id| !id.is_empty()) {
            return Ok(Caller::Participant(id.to_string()));
        }
        let named = metadata
            .iter()
            .flatten()
            .find_map(|m| m.get("participant_id").and_then(|v| v.as_str()).filter(|s| !s.is_empty()));
        Ok(named.map_or(Caller::Anonymous, |id| Caller::Participant(id.to_string())))
    }

    /// S19: does this agent's queue run the task? The store's row says so for every task
    /// whose log has begun; otherwise the workflow is described (cached per id).
    async fn owned(&self, task_id: &str) -> Result<bool, A2AError> {
        if let Some(queue) = self.store.task_queue_of(task_id).await.map_err(store_error)? {
            return Ok(queue == self.task_queue);
        }
        if let Some(owned) = self.owners.lock().expect("owners").get(task_id) {
            return Ok(*owned);
        }
        let handle = self.client.get_workflow_handle::<TaskWorkflow>(task_id);
        let described = self
            .bounded("the describe", handle.describe(temporalio_client::WorkflowDescribeOptions::default()))
            .await?;
        let owned = match described {
            Ok(d) => {
                d.raw_description.execution_config.as_ref().and_then(|c| c.task_queue.as_ref()).map(|q| q.name.as_str())
                    == Some(self.task_queue.as_str())
            }
            Err(_) => return Ok(false),
        };
        let mut owners = self.owners.lock().expect("owners");
        if owners.len() >= 10_000 {
            owners.clear();
        }
        owners.insert(task_id.to_string(), owned);
        Ok(owned)
    }

    /// The access policy of every task operation (S13, S19): a task on another queue, or
    /// one a known caller is not on, is not found; a watcher may not cancel.
    async fn check_access(&self, caller: &Caller, task_id: &str, access: Access) -> Result<(), A2AError> {
        if !self.owned(task_id).await? {
            return Err(A2AError::task_not_found(task_id));
        }
        self.check_participant(caller, task_id, access).await
    }

    /// The participant half of the access policy: a known caller must be on the task.
    async fn check_participant(&self, caller: &Caller, task_id: &str, access: Access) -> Result<(), A2AError> {
        let Caller::Participant(id) = caller else { return Ok(()) };
        match self.store.participant_role(task_id, id).await.map_err(store_error)? {
            None => Err(A2AError::task_not_found(task_id)),
            Some(role) if role == "watcher" && access == Access::Cancel => {
                Err(A2AError::unsupported(format!("participant `{id}` watches task {task_id} and may not cancel it"))
                    .with("taskId", task_id))
            }
            Some(_) => Ok(()),
        }
    }

    /// Push-config calls see a task as GetTask does: it exists on this queue (the ownership
    /// check finds it in the store or in Temporal), and the caller may see it.
    async fn push_access(&self, ctx: &CallContext, task_id: &str) -> Result<(), A2AError> {
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, task_id, Access::Read).await
    }

    /// The id this agent has as a participant.
    pub(crate) fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// Every task of this queue that has not ended (S20): read from the store, and only the
    /// tasks a turn runs on (WORKING or SUBMITTED, as many as run at once) are asked for
    /// their mailbox and turn; none while Temporal does not answer.
    pub(crate) async fn monitor_rows(&self) -> Result<Vec<harness_workflow::MonitorRow>, A2AError> {
        let open = self.store.open_task_states(&self.task_queue).await.map_err(store_error)?;
        let mut rows = Vec::new();
        for row in open {
            let busy = matches!(row.state, TaskState::Working | TaskState::Submitted);
            if busy && self.health.is_up() {
                let handle = self.client.get_workflow_handle::<TaskWorkflow>(row.task_id.as_str());
                let query = handle.query(TaskWorkflow::monitor, (), WorkflowQueryOptions::default());
                match self.bounded("the monitor query", self.gates.query(&row.task_id, query)).await {
                    Ok(Ok(r)) => {
                        rows.push(r);
                        continue;
                    }
                    Ok(Err(e)) => tracing::debug!(task_id = %row.task_id, error = %e, "monitor: query failed"),
                    Err(e) => tracing::debug!(task_id = %row.task_id, error = %e.message, "monitor: query timed out"),
                }
            }
            rows.push(harness_workflow::MonitorRow {
                task_id: row.task_id,
                state: row.state,
                substate: row.substate,
                mailbox_depth: 0,
                turn: row.turns,
                children: Vec::new(),
            });
        }
        Ok(rows)
    }

    /// Whether Temporal answers.
    pub(crate) fn health(&self) -> &crate::supervise::Health {
        &self.health
    }

    /// Validates, seals and stores a push config of `task_id`; returns it as stored (with
    /// its id) and in the clear (S14).
    async fn store_push_config(
        &self,
        task_id: &str,
        mut config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        let pusher = self.pusher.as_ref().ok_or_else(|| {
            A2AError::new(ErrorKind::PushNotificationNotSupported, "push notifications are not supported by this agent")
        })?;
        validate::push_config(&config)?;
        if config.id.is_empty() {
            config.id = uuid::Uuid::new_v4().to_string();
        }
        config.task_id = task_id.to_string();
        let secret = PushSecret { token: config.token.clone(), authentication: config.authentication.clone() };
        let row = PushRow {
            task_id: task_id.to_string(),
            config_id: config.id.clone(),
            url: config.url.clone(),
            sealed: pusher.key().seal(&secret),
        };
        self.store.put_push_config(&row).await.map_err(store_error)?;
        Ok(config)
    }

    /// A stored push config in the clear.
    fn open_push_config(&self, row: PushRow) -> Result<TaskPushNotificationConfig, A2AError> {
        let pusher = self.pusher.as_ref().ok_or_else(|| A2AError::internal("push is off"))?;
        let secret = pusher.key().open(&row.sealed).map_err(|e| A2AError::internal(e.to_string()))?;
        Ok(TaskPushNotificationConfig {
            id: row.config_id,
            task_id: row.task_id,
            url: row.url,
            token: secret.token,
            authentication: secret.authentication,
            ..Default::default()
        })
    }

    /// The task as its workflow sees it, or the store's copy once the workflow is gone
    /// (with the newest `history_length` messages; the workflow's copy has them all).
    async fn current_task(&self, task_id: &str, history_length: Option<i32>) -> Result<Task, A2AError> {
        // The head says whether the store's copy is the answer; the whole row (with its
        // history) is read only when it is.
        let head = self.store.task_head(task_id).await.map_err(store_error)?;
        let stored = || async {
            Ok::<_, A2AError>(if head.is_some() {
                self.row(task_id, history_length).await?.map(|r| r.task)
            } else {
                None
            })
        };
        if head.as_ref().is_some_and(|h| h.state.is_terminal()) {
            return stored().await?.ok_or_else(|| A2AError::task_not_found(task_id));
        }
        if !self.health.is_up() {
            // Temporal does not answer: the store's copy, as of its newest event.
            return stored().await?.ok_or_else(|| self.health.unavailable("reading the task"));
        }
        let handle = self.client.get_workflow_handle::<TaskWorkflow>(task_id);
        let query = handle.query(TaskWorkflow::task, (), WorkflowQueryOptions::default());
        match self.bounded("the task query", self.gates.query(task_id, query)).await {
            Ok(Ok(task)) => Ok(task),
            Ok(Err(WorkflowQueryError::NotFound(_))) => {
                stored().await?.ok_or_else(|| A2AError::task_not_found(task_id))
            }
            Ok(Err(e)) => stored().await?.ok_or_else(|| A2AError::internal(format!("the task query failed: {e}"))),
            Err(timeout) => stored().await?.ok_or(timeout),
        }
    }
}

#[async_trait::async_trait]
impl RequestHandler for HarnessHandler {
    async fn send_message(&self, ctx: &CallContext, req: SendMessageRequest) -> Result<SendMessageResponse, A2AError> {
        let config = req.configuration.clone().unwrap_or_default();
        let pending = self.admit(ctx, req, config.return_immediately).await?;
        if config.return_immediately {
            let task = self.accepted_task(pending.accepted().await?).await?;
            return Ok(SendMessageResponse::Task(task.with_history_length(config.history_length)));
        }
        // S5: blocking returns at the newest final event (terminal or INPUT_REQUIRED).
        // S5: nothing is answered before Temporal committed the message's acceptance (the
        // events a workflow task appends before it commits may still be replaced).
        let task_id = pending.task_id.clone();
        let accepted = pending.accepted().await?;
        let log = self.log_stream(accepted.task_id, accepted.receipt.cursor, StopAt::Final);
        let task = self.task_at_end(&task_id, log, config.history_length).await?;
        Ok(SendMessageResponse::Task(task.with_history_length(config.history_length)))
    }

    async fn send_streaming_message(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2AError> {
        let pending = self.admit(ctx, req, true).await?;
        let new_task = pending.new_task;
        // S5: the stream starts once Temporal committed the message's acceptance.
        let accepted = pending.accepted().await?;
        if new_task {
            // A new task: its log begins with the Task (seq 1).
            return Ok(self.log_stream(accepted.task_id, 0, StopAt::Final));
        }
        // A continued task: the stream still begins with the Task, the message added.
        let log = self.log_stream(accepted.task_id.clone(), accepted.receipt.cursor, StopAt::Final);
        let task = self.accepted_task(accepted).await?;
        Ok(futures::stream::once(async move { Ok(StreamResponse::Task(task)) }).chain(log).boxed())
    }

    async fn get_task(&self, ctx: &CallContext, req: GetTaskRequest) -> Result<Task, A2AError> {
        validate::task_id(&req.id, "id")?;
        if let Some(h) = req.history_length {
            validate::history_length(h, "historyLength")?;
        }
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, &req.id, Access::Read).await?;
        Ok(self.current_task(&req.id, req.history_length).await?.with_history_length(req.history_length))
    }

    async fn cancel_task(&self, ctx: &CallContext, req: CancelTaskRequest) -> Result<Task, A2AError> {
        validate::task_id(&req.id, "id")?;
        let caller = self.caller(ctx, &[req.metadata.as_ref()]).await?;
        self.check_access(&caller, &req.id, Access::Cancel).await?;
        let task = self.current_task(&req.id, None).await?;
        let not_cancelable = |state: TaskState| {
            A2AError::new(ErrorKind::TaskNotCancelable, terminal_refusal(state))
                .with("taskId", &req.id)
                .with("state", state.as_str())
        };
        if task.status.state.is_terminal() {
            return Err(not_cancelable(task.status.state));
        }
        if !self.health.is_up() {
            return Err(self.health.unavailable("the cancel"));
        }
        let after = self.store.task_head(&req.id).await.map_err(store_error)?.map_or(0, |h| h.last_seq);
        let handle = self.client.get_workflow_handle::<TaskWorkflow>(req.id.clone());
        let reason = CancelRequest { reason: "CancelTask".into() };
        match self
            .bounded("the cancel", handle.signal(TaskWorkflow::cancel, reason, WorkflowSignalOptions::default()))
            .await?
        {
            Ok(()) => {}
            Err(e) => {
                if let Some(row) = self.store.task_head(&req.id).await.map_err(store_error)?
                    && row.state.is_terminal()
                {
                    return Err(not_cancelable(row.state));
                }
                return Err(A2AError::internal(format!("could not cancel task {}: {e}", req.id)));
            }
        }
        let log = self.log_stream(req.id.clone(), after, StopAt::Terminal);
        self.bounded("the cancellation", self.task_at_end(&req.id, log, None)).await?
    }

    async fn subscribe_to_task(&self, ctx: &CallContext, req: SubscribeToTaskRequest) -> Result<EventStream, A2AError> {
        validate::task_id(&req.id, "id")?;
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, &req.id, Access::Read).await?;
        let task = self.current_task(&req.id, Some(0)).await?;
        if task.status.state.is_terminal() {
            return Err(A2AError::unsupported(format!(
                "{}; subscribing needs a task that has not ended",
                terminal_refusal(task.status.state)
            ))
            .with("taskId", &req.id));
        }
        // S10: replay from seq 1, then stay attached until a terminal state.
        Ok(self.log_stream(req.id, 0, StopAt::Terminal))
    }

    async fn list_tasks(&self, ctx: &CallContext, req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        let since = validate::list_tasks(&req)?;
        let participant = match self.caller(ctx, &[]).await? {
            Caller::Participant(id) => Some(id),
            Caller::Anonymous => None,
        };
        let page_size = req.page_size.unwrap_or(50);
        let after = if req.page_token.is_empty() { None } else { Some(decode_page_token(&req.page_token)?) };
        let query = TaskQuery {
            task_queue: self.task_queue.clone(),
            context_id: req.context_id.clone(),
            state: req.status.filter(|s| *s != TaskState::Unspecified),
            since,
            after,
            limit: i64::from(page_size),
            participant,
            history_length: req.history_length,
            include_artifacts: req.include_artifacts.unwrap_or(false),
        };
        let page = self.store.list_tasks(&query).await.map_err(store_error)?;
        Ok(ListTasksResponse {
            tasks: page.tasks,
            next_page_token: page.next.map(|(ts, id)| encode_page_token(&ts, &id)).unwrap_or_default(),
            page_size,
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }

    async fn create_push_config(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        self.push_access(ctx, &req.task_id).await?;
        let task_id = req.task_id.clone();
        self.store_push_config(&task_id, req).await
    }

    async fn get_push_config(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfigRef,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        if req.id.is_empty() {
            return Err(A2AError::missing_field("id", "the push notification config id is missing"));
        }
        self.push_access(ctx, &req.task_id).await?;
        match self.store.push_config(&req.task_id, &req.id).await.map_err(store_error)? {
            Some(row) => self.open_push_config(row),
            None => Err(A2AError::new(
                ErrorKind::TaskNotFound,
                format!("push notification config `{}` not found for task {}", req.id, req.task_id),
            )
            .with("taskId", &req.task_id)
            .with("configId", &req.id)),
        }
    }

    async fn list_push_configs(
        &self,
        ctx: &CallContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        self.push_access(ctx, &req.task_id).await?;
        let rows = self.store.push_configs(&req.task_id).await.map_err(store_error)?;
        let configs = rows.into_iter().map(|r| self.open_push_config(r)).collect::<Result<_, _>>()?;
        Ok(ListTaskPushNotificationConfigsResponse { configs, next_page_token: String::new() })
    }

    async fn delete_push_config(&self, ctx: &CallContext, req: TaskPushNotificationConfigRef) -> Result<(), A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        if req.id.is_empty() {
            return Err(A2AError::missing_field("id", "the push notification config id is missing"));
        }
        self.push_access(ctx, &req.task_id).await?;
        self.store.delete_push_config(&req.task_id, &req.id).await.map_err(store_error)?;
        Ok(())
    }

    async fn extended_agent_card(&self, _ctx: &CallContext) -> Result<AgentCard, A2AError> {
        self.extended_card.clone().ok_or_else(|| {
            A2AError::new(ErrorKind::ExtendedAgentCardNotConfigured, "the extended agent card is not configured")
        })
    }

    fn agent_card(&self) -> Arc<AgentCard> {
        self.card.clone()
    }
}

/// A ListTasks page token: url-safe base64 of `<status timestamp>|<task id>`.
fn encode_page_token(ts: &str, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{ts}|{id}"))
}

fn decode_page_token(token: &str) -> Result<(String, String), A2AError> {
    let bad = || {
        A2AError::invalid_params(format!("invalid params: pageToken `{token}` is not a token this server issued"))
            .with("field", "pageToken")
    };
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (ts, id) = text.split_once('|').ok_or_else(bad)?;
    Ok((ts.to_string(), id.to_string()))
}

/// The task data of a plain first message (EXTENSIONS.md, task): name = its first line
/// (60 characters at most; `task` when empty), goal = its text, participants = the sender
/// as reporter (when known) and this agent as assignee.
fn default_brief(message: &Message, reporter: Option<&str>, agent_id: &str) -> a2a_types::Struct {
    let text = message.text();
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let name: String = if first.is_empty() { "task".into() } else { first.chars().take(60).collect() };
    let mut participants = Vec::new();
    if let Some(id) = reporter {
        participants.push(serde_json::json!({"id": id, "kind": "human", "role": "reporter"}));
    }
    participants.push(serde_json::json!({"id": agent_id, "kind": "agent", "role": ASSIGNEE}));
    let mut metadata = a2a_types::Struct::new();
    metadata.insert(
        harness_workflow::task_ext_key(),
        serde_json::json!({"name": name, "goal": text, "participants": participants}),
    );
    metadata
}

/// A retried `messageId` must carry the message it named the first time (S5): one that
/// names another is refused, naming the id, rather than answered with another's outcome.
fn same_message(prior: &harness_store::PriorMessage, message: &Message) -> Result<(), A2AError> {
    let first: Message = serde_json::from_str(&prior.body)
        .map_err(|e| A2AError::internal(format!("the audited message of task {} is unreadable: {e}", prior.task_id)))?;
    if first.parts == message.parts && first.role == message.role {
        return Ok(());
    }
    Err(A2AError::invalid_params(format!(
        "invalid params: messageId `{}` was already used for another message (task {}); a new message needs a new \
         messageId",
        message.message_id, prior.task_id
    ))
    .with("field", "message.messageId")
    .with("taskId", &prior.task_id))
}
