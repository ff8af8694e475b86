//! `invoke_tool`: one tool call (issue 29). The arguments are checked against the tool's
//! input schema first; the call runs with heartbeats and stops when Temporal cancels it (a
//! cancel or a control cut the turn); its text is capped at `max_tool_result_bytes` (the cut
//! marked) and redacted. A call the host's policy refuses (`tool.invoked`) does not run. A
//! bad call, an unknown tool, a tool's own error and a panic all
//! answer an error result the model reads; only a timeout or a crash fail the activity,
//! which the workflow turns into an error result too.

use crate::redaction::Redactor;
use crate::tools::{ToolContext, ToolRegistry, shorten};
use harness_workflow::{ToolInvocation, ToolResult};
use std::time::{Duration, Instant};
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// How often a running call heartbeats (the workflow's heartbeat timeout is 10 s).
const HEARTBEAT: Duration = Duration::from_secs(2);
/// How much of the arguments a client sees on the call's status update.
const SUMMARY_BYTES: usize = 200;

pub(super) async fn run(
    tools: &ToolRegistry,
    redactor: &Redactor,
    max_result_bytes: usize,
    ctx: &ActivityContext,
    input: ToolInvocation,
) -> Result<ToolResult, ActivityError> {
    let started = Instant::now();
    let call = input.call;
    let summary = shorten(&redactor.text(&call.arguments), SUMMARY_BYTES);
    let answer = |content: String, is_error: bool| ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
        summary: summary.clone(),
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let (tool, arguments) = match tools.check(&call.name, &call.arguments) {
        Ok(checked) => checked,
        Err(why) => return Ok(answer(redactor.text(&why), true)),
    };
    let context = ToolContext {
        task_id: input.task_id,
        context_id: input.context_id,
        turn: input.turn,
        call_id: call.id.clone(),
    };
    // The host's `tool.invoked` policy point: a refused call never runs.
    if let Some(why) = tools.refusal(&context, &call.name, &arguments).await {
        return Ok(answer(redactor.text(&format!("the call of `{}` was refused: {why}", call.name)), true));
    }
    // The tool runs in a task of its own, so a panic is its error and not the worker's; in
    // the call's span, so what it calls out to joins the trace (issue 32).
    let mut running =
        tokio::spawn(tracing::Instrument::instrument(tool.call(context, arguments), tracing::Span::current()));
    let mut beat = tokio::time::interval(HEARTBEAT);
    let outcome = loop {
        tokio::select! {
            done = &mut running => break done,
            _ = beat.tick() => { let _ = ctx.record_heartbeat(0u32).await; }
            _ = ctx.cancelled() => {
                running.abort();
                return Err(ActivityError::cancelled());
            }
        }
    };
    let (text, is_error) = match outcome {
        Ok(Ok(text)) => (text, false),
        Ok(Err(why)) => (format!("the tool `{}` failed: {why}", call.name), true),
        Err(panic) => (format!("the tool `{}` failed: it panicked ({panic})", call.name), true),
    };
    let text = redactor.text(&text);
    let text = if text.len() > max_result_bytes {
        format!(
            "{}\n[truncated: the result was {} bytes, more than max_tool_result_bytes = {max_result_bytes}]",
            shorten(&text, max_result_bytes).trim_end_matches('…'),
            text.len()
        )
    } else {
        text
    };
    Ok(answer(text, is_error))
}
