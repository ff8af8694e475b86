//! The A2A request handler of the harness, one concern per file:
//!
//! - [`admission`]: SendMessage's way in: validate, redact, audit, the task's access and
//!   idempotency, the start of the delivery (S4, S5, S7).
//! - [`temporal`]: every call to Temporal ([`TaskClient`]), each bounded by
//!   `temporal.request_timeout_secs` (TEMPORAL-RUST.md item 4), with typed refusals.
//! - [`send`]: SendMessage and SendStreamingMessage once a message is admitted.
//! - [`stream`]: the event log as a stream (D1, S10).
//! - [`tasks`]: GetTask, CancelTask, SubscribeToTask and the monitor's reads (S13, S20);
//!   [`closed`]: GetTask's answers for ended tasks, kept until their log changes.
//! - [`access`]: who is calling and what they may do (S13, S17, S19, D4).
//! - [`push`]: push-notification configs, sealed at rest (S14).
//! - [`listing`]: ListTasks and its page tokens.
//!
//! The [`RequestHandler`] impl below only delegates.

mod access;
mod admission;
mod brief;
mod closed;
mod controls;
mod envelope;
mod listing;
mod pending;
mod push;
mod send;
mod stream;
mod tasks;
mod temporal;

pub(crate) use access::Caller;
pub use access::ParticipantResolver;
pub(crate) use controls::PolicyGate;
pub use controls::{Policy, PolicyDecision, PolicyPoint, PolicyRequest};
pub use envelope::ENVELOPE_SCHEMA;

pub use stream::StopAt;
pub(crate) use temporal::TaskClient;

use a2a_server::{CallContext, EventStream, RequestHandler, TaskAnswer};
use a2a_types::{
    A2AError, AgentCard, CancelTaskRequest, ErrorKind, GetTaskRequest, ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, SubscribeToTaskRequest, Task, TaskPushNotificationConfig, TaskPushNotificationConfigRef,
};
use harness_agent::redaction::Redactor;
use harness_push::Pusher;
use harness_store::{Store, TaskRow};
use harness_workflow::Lifecycle;
use std::sync::Arc;

/// How this agent's tasks are started (every workflow's [`harness_workflow::TaskInput`]).
pub(crate) struct TaskSettings {
    pub lifecycle: Lifecycle,
    pub model: String,
    pub linger_secs: u64,
    pub instant_model: bool,
    /// `agent.max_message_bytes`.
    pub max_message_bytes: usize,
    /// `agent.max_message_parts`.
    pub max_message_parts: usize,
    /// `push.max_configs_per_task`.
    pub max_push_configs: usize,
    /// `agent.answer_window`: what an answer to one message carries of a long task.
    pub answer_window: u32,
    /// When a task's run continues as new (`agent.run_max_*`).
    pub run_limits: harness_workflow::RunLimits,
    /// How turns use tools (issue 29).
    pub tool_limits: harness_workflow::ToolLimits,
    /// The id this agent has as a participant.
    pub agent_id: String,
    /// The provider of `model`, when this process knows it (it says what its turns need).
    pub provider: Option<Arc<dyn harness_agent::models::ModelProvider>>,
    /// Every configured model, by name: a trusted brief may pick one (S21).
    pub models: harness_agent::models::ModelRegistry,
    /// `server.delegators` (S21).
    pub delegators: Vec<String>,
    /// `store.backstop_ms`: a caught-up reader's longest wait without a wake-up.
    pub backstop: std::time::Duration,
}

/// The harness's [`RequestHandler`].
pub struct HarnessHandler {
    pub(crate) temporal: TaskClient,
    pub(crate) store: Store,
    pub(crate) redactor: Redactor,
    pub(crate) settings: TaskSettings,
    pub(crate) extended_card: Option<AgentCard>,
    /// Push delivery and the key that seals configs; `None`: push notifications are off.
    pub(crate) pusher: Option<Arc<Pusher>>,
    pub(crate) resolver: Option<Arc<dyn ParticipantResolver>>,
    /// S19: whether a task id runs on this agent's queue, from the store's row or else from
    /// describing its workflow, kept per id (a task's queue never changes; at most 10,000).
    pub(crate) owners: std::sync::Mutex<std::collections::HashMap<String, bool>>,
    /// Whether Temporal answers (issue 13): while it does not, sends and cancels fail fast
    /// and reads come from the store.
    pub(crate) health: Arc<crate::supervise::Health>,
    /// The slash commands (S9), frozen with the harness.
    pub(crate) commands: harness_agent::commands::CommandRegistry,
    /// The host's policy points (S9), when it gave a policy.
    pub(crate) policy: Option<Arc<dyn Policy>>,
    /// GetTask's whole answers for ended tasks, until their log changes (issue 31).
    pub(crate) closed: closed::ClosedTasks,
}

pub(crate) fn store_error(e: harness_store::StoreError) -> A2AError {
    A2AError::internal(format!("the store failed: {e}"))
}

impl HarnessHandler {
    /// The task queue this agent's tasks run on (S19).
    pub(crate) fn task_queue(&self) -> &str {
        &self.temporal.task_queue
    }

    /// The stored row of a task with the newest `history_length` messages (all: `None`).
    async fn row(&self, task_id: &str, history_length: Option<i32>) -> Result<Option<TaskRow>, A2AError> {
        self.store.task(task_id, history_length).await.map_err(store_error)
    }

    /// The stored task as an answer to one message carries it (`agent.answer_window`): the
    /// newest `history_length` messages (the window's when unset) and the newest artifacts,
    /// so an answer costs the same in a long conversation as in a short one (issue 15).
    async fn answer_row(&self, task_id: &str, history_length: Option<i32>) -> Result<Option<TaskRow>, A2AError> {
        let artifacts = self.answer_artifacts();
        self.store.task_with(task_id, self.answer_history(history_length), artifacts).await.map_err(store_error)
    }

    /// The artifacts an answer to one message keeps: the window's newest.
    fn answer_artifacts(&self) -> harness_store::Artifacts {
        harness_store::Artifacts::Newest(i64::from(self.settings.answer_window))
    }

    /// The history length an answer to one message keeps: the client's, else the window.
    fn answer_history(&self, history_length: Option<i32>) -> Option<i32> {
        Some(history_length.unwrap_or(self.settings.answer_window as i32))
    }

    /// The id this agent has as a participant.
    pub(crate) fn agent_id(&self) -> &str {
        &self.settings.agent_id
    }

    /// Whether Temporal answers.
    pub(crate) fn health(&self) -> &crate::supervise::Health {
        &self.health
    }
}

#[async_trait::async_trait]
impl RequestHandler for HarnessHandler {
    async fn send_message(&self, ctx: &CallContext, req: SendMessageRequest) -> Result<SendMessageResponse, A2AError> {
        self.send(ctx, req).await
    }
    async fn send_streaming_message(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2AError> {
        self.send_streaming(ctx, req).await
    }
    async fn get_task(&self, ctx: &CallContext, req: GetTaskRequest) -> Result<TaskAnswer, A2AError> {
        self.get(ctx, req).await
    }
    async fn cancel_task(&self, ctx: &CallContext, req: CancelTaskRequest) -> Result<Task, A2AError> {
        self.cancel(ctx, req).await
    }
    async fn subscribe_to_task(&self, ctx: &CallContext, req: SubscribeToTaskRequest) -> Result<EventStream, A2AError> {
        self.subscribe(ctx, req).await
    }
    async fn list_tasks(&self, ctx: &CallContext, req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        self.list(ctx, req).await
    }
    async fn create_push_config(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.create_push(ctx, req).await
    }
    async fn get_push_config(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfigRef,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.get_push(ctx, req).await
    }
    async fn list_push_configs(
        &self,
        ctx: &CallContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        self.list_push(ctx, req).await
    }
    async fn delete_push_config(&self, ctx: &CallContext, req: TaskPushNotificationConfigRef) -> Result<(), A2AError> {
        self.delete_push(ctx, req).await
    }
    async fn extended_agent_card(&self, ctx: &CallContext) -> Result<AgentCard, A2AError> {
        // The extended card is for authenticated callers: with a resolver, one it resolves
        // (issue 28). The public card stays public.
        if self.caller(ctx, &[]).await? == Caller::Unresolved {
            return Err(A2AError::unsupported(
                "the extended agent card is for authenticated callers: the participant resolver resolved none for \
                 this request",
            ));
        }
        self.extended_card.clone().ok_or_else(|| {
            A2AError::new(ErrorKind::ExtendedAgentCardNotConfigured, "the extended agent card is not configured")
        })
    }
}
