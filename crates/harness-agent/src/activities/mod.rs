//! The activities of `TaskWorkflow`. Names are pinned (`name = ..`): a rename breaks
//! recorded histories, and each must be the name and types of its marker in
//! `harness_workflow::activity` (the workflow starts activities by those; the test below
//! fails to compile when the types part and fails when a name does). One file per
//! activity; this file only registers them.

mod call_model;
mod emit_event;
mod invoke_tool;
pub mod remote;

use crate::commands::CommandRegistry;
use crate::models::ModelRegistry;
use crate::{
    CommandContext, CommandReply, EmitInput, ModelReply, ModelTurn, Observation, RemoteCancel, RemoteLook, RemoteSend,
    RemoteStarted, ToolInvocation, ToolResult,
};
use harness_store::Store;
use harness_workflow::Json;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::Instrument as _;

/// What the activities need: the store, the model providers and push delivery.
#[derive(Clone)]
pub struct Activities {
    pub store: Store,
    pub models: ModelRegistry,
    /// Delivers status events to the task's push configs (S14); `None` without a push key.
    pub pusher: Option<Arc<harness_push::Pusher>>,
    /// Fault injection for crash tests only: `emit_event` waits this long after its append,
    /// so a kill lands inside the workflow task that appended (env
    /// `TINY_HARNESS_FAULT_EMIT_DELAY_MS`, docs/event-log.md). Zero in production.
    pub emit_delay: std::time::Duration,
    /// The slash commands `run_command` runs (S9): the built-ins unless a host added more.
    pub commands: CommandRegistry,
    /// The remote agents a stand-in reaches (issue 19); `None`: none is configured.
    pub remotes: Option<Arc<remote::Remotes>>,
    /// The tools the model may call (issue 29): empty when tool calling is off.
    pub tools: crate::tools::ToolRegistry,
    /// Redacts tool arguments and results (S4).
    pub redactor: Arc<crate::redaction::Redactor>,
    /// A tool result longer than this is cut, the cut marked (`[agent] max_tool_result_bytes`).
    pub max_tool_result_bytes: usize,
    /// Model calls' spans carry the turn's message and the reply, redacted
    /// (`[observability] record_content`, issue 32). Off: no text on any span.
    pub record_content: bool,
}

/// The environment variable that sets [`Activities::emit_delay`] (milliseconds).
pub const FAULT_EMIT_DELAY_ENV: &str = "TINY_HARNESS_FAULT_EMIT_DELAY_MS";

impl Activities {
    /// The activities with the fault injection the environment asks for (none by default).
    pub fn new(store: Store, models: ModelRegistry, pusher: Option<Arc<harness_push::Pusher>>) -> Self {
        let ms = std::env::var(FAULT_EMIT_DELAY_ENV).ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if ms > 0 {
            tracing::warn!(ms, "fault injection: every emit_event waits after its append ({FAULT_EMIT_DELAY_ENV})");
        }
        let emit_delay = std::time::Duration::from_millis(ms);
        Self {
            store,
            models,
            pusher,
            emit_delay,
            commands: CommandRegistry::default(),
            remotes: None,
            tools: Default::default(),
            redactor: Arc::new(crate::redaction::Redactor::new(Vec::new())),
            max_tool_result_bytes: 16 * 1024,
            record_content: false,
        }
    }

    /// These activities recording message and reply text on model calls' spans (issue 32).
    pub fn with_recorded_content(self, record_content: bool) -> Self {
        Self { record_content, ..self }
    }

    /// These activities offering `tools` to the model, redacting with `redactor` and
    /// capping results at `max_result_bytes` (issue 29).
    pub fn with_tools(
        self,
        tools: crate::tools::ToolRegistry,
        redactor: Arc<crate::redaction::Redactor>,
        max_result_bytes: usize,
    ) -> Self {
        Self { tools, redactor, max_tool_result_bytes: max_result_bytes, ..self }
    }

    /// These activities running `commands` (the harness's frozen registry).
    pub fn with_commands(self, commands: CommandRegistry) -> Self {
        Self { commands, ..self }
    }

    /// These activities reaching `remotes` (the configured `[[agents]]`).
    pub fn with_remotes(self, remotes: Arc<remote::Remotes>) -> Self {
        Self { remotes: Some(remotes), ..self }
    }

    fn remotes(&self) -> Result<&remote::Remotes, ActivityError> {
        self.remotes.as_deref().ok_or_else(|| {
            ActivityError::application(temporalio_common::error::ApplicationFailure::non_retryable(
                "this worker has no remote agents configured (`[[agents]]`)".to_string(),
            ))
        })
    }
}

#[activities]
impl Activities {
    /// Appends an event to the task's log and wakes its readers (D1).
    #[activity(name = "emit_event")]
    pub async fn emit_event(
        self: Arc<Self>,
        _ctx: ActivityContext,
        Json(input): Json<EmitInput>,
    ) -> Result<i64, ActivityError> {
        let seq = emit_event::run(&self.store, self.pusher.as_ref(), input).await?;
        if !self.emit_delay.is_zero() {
            tokio::time::sleep(self.emit_delay).await;
        }
        Ok(seq)
    }

    /// Runs one model turn, streaming its output into the log as it is produced (D6, S12).
    #[activity(name = "call_model")]
    pub async fn call_model(
        self: Arc<Self>,
        ctx: ActivityContext,
        Json(input): Json<ModelTurn>,
    ) -> Result<Json<ModelReply>, ActivityError> {
        let (began, model) = (std::time::Instant::now(), input.model.clone());
        let content = self.record_content.then_some(&*self.redactor);
        let reply =
            call_model::run(&self.store, self.pusher.as_ref(), &self.models, &self.tools, content, &ctx, input).await;
        crate::metrics::model_call(&model, began, &reply);
        reply.map(Json)
    }

    /// Runs one tool call the model asked for (issue 29).
    #[activity(name = "invoke_tool")]
    pub async fn invoke_tool(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: ToolInvocation,
    ) -> Result<ToolResult, ActivityError> {
        let began = std::time::Instant::now();
        let name = input.call.name.clone();
        let tool = if self.tools.knows(&name) { name } else { "unknown".to_string() };
        let span = crate::trace::tool_span(&tool, &input.call.id, &input.task_id, input.turn);
        crate::trace::join(&span, input.trace.as_deref());
        let result = invoke_tool::run(&self.tools, &self.redactor, self.max_tool_result_bytes, &ctx, input)
            .instrument(span.clone())
            .await;
        crate::trace::tool_done(&span, &result);
        crate::metrics::tool_call(tool, began, &result);
        result
    }

    /// Runs a slash command (S9); a command that fails answers with why, it never fails
    /// the task.
    #[activity(name = "run_command")]
    pub async fn run_command(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: CommandContext,
    ) -> Result<CommandReply, ActivityError> {
        let name = input.name.clone();
        Ok(match self.commands.run(input, &self.tools.specs()).await {
            Ok(text) => CommandReply { text, failed: false },
            Err(why) => CommandReply { text: format!("/{name} failed: {why}"), failed: true },
        })
    }

    /// Sends a stand-in's brief to its remote agent (issue 19).
    #[activity(name = "remote_send")]
    pub async fn remote_send(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: RemoteSend,
    ) -> Result<RemoteStarted, ActivityError> {
        // The brief's request joins the trace of the message that delegated (issue 32).
        let span = crate::trace::remote_span(&input.agent, &input.stand_in);
        crate::trace::join(&span, input.trace.as_deref());
        self.remotes()?.send(input).instrument(span).await
    }

    /// Looks at a remote task: once, or subscribing until it changes (issue 19).
    #[activity(name = "remote_observe")]
    pub async fn remote_observe(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: RemoteLook,
    ) -> Result<Observation, ActivityError> {
        self.remotes()?.look(&ctx, input).await
    }

    /// Cancels a remote task (a cancelled parent's open sub-task, issue 19).
    #[activity(name = "remote_cancel")]
    pub async fn remote_cancel(
        self: Arc<Self>,
        _ctx: ActivityContext,
        input: RemoteCancel,
    ) -> Result<(), ActivityError> {
        self.remotes()?.cancel(input).await
    }
}

#[cfg(test)]
mod tests {
    use super::Activities;
    use harness_workflow::activity;
    use temporalio_common::ActivityDefinition;

    /// The workflow's marker and the registered implementation: same name, same types.
    fn same<A: ActivityDefinition, B: ActivityDefinition<Input = A::Input, Output = A::Output>>(a: A, b: B) {
        assert_eq!(a.name(), b.name());
    }

    #[test]
    fn every_marker_the_workflow_starts_is_an_activity_this_worker_registers() {
        same(activity::EmitEvent, Activities::emit_event);
        same(activity::CallModel, Activities::call_model);
        same(activity::RunCommand, Activities::run_command);
        same(activity::RemoteSendBrief, Activities::remote_send);
        same(activity::RemoteObserve, Activities::remote_observe);
        same(activity::RemoteCancelTask, Activities::remote_cancel);
        same(activity::InvokeTool, Activities::invoke_tool);
    }
}
