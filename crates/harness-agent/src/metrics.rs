//! What a worker's activities count (issue 32), through the `metrics` facade: model calls
//! and their tokens, tool calls. Nothing is recorded unless the process installed a
//! recorder (tiny-harness serves them at `GET /metrics`).

use crate::ModelReply;
use harness_workflow::ToolResult;
use std::time::Instant;
use temporalio_sdk::activities::ActivityError;

/// Model calls (one activity attempt of a turn), by `model` and `outcome` (`ok`, `failed`).
pub const MODEL_CALLS: &str = "harness_model_calls_total";
/// Seconds a model call took, by `model`.
pub const MODEL_CALL_SECONDS: &str = "harness_model_call_duration_seconds";
/// Tokens the model's endpoint reported, by `model` and `kind` (`input`, `output`, `reasoning`).
pub const MODEL_TOKENS: &str = "harness_model_tokens_total";
/// Model turns ended, by `outcome`: the state the turn ended in (`input_required`,
/// `completed`, `failed`, `canceled`, ...).
pub const TURNS: &str = "harness_turns_total";
/// Seconds from a turn's start to its final status.
pub const TURN_SECONDS: &str = "harness_turn_duration_seconds";
/// Tool calls, by `tool` (`unknown` for a name no tool has) and `outcome` (`ok`, `error`,
/// `failed`: the activity itself failed).
pub const TOOL_CALLS: &str = "harness_tool_calls_total";
/// Seconds a tool call took, by `tool`.
pub const TOOL_CALL_SECONDS: &str = "harness_tool_call_duration_seconds";

pub(crate) fn model_call(model: &str, began: Instant, reply: &Result<ModelReply, ActivityError>) {
    let model = model.to_string();
    let outcome = if reply.is_ok() { "ok" } else { "failed" };
    metrics::counter!(MODEL_CALLS, "model" => model.clone(), "outcome" => outcome).increment(1);
    metrics::histogram!(MODEL_CALL_SECONDS, "model" => model.clone()).record(began.elapsed().as_secs_f64());
    if let Ok(ModelReply { usage: Some(usage), .. }) = reply {
        for (kind, n) in
            [("input", usage.prompt_tokens), ("output", usage.completion_tokens), ("reasoning", usage.reasoning_tokens)]
        {
            metrics::counter!(MODEL_TOKENS, "model" => model.clone(), "kind" => kind).increment(n);
        }
    }
}

pub(crate) fn turn(mark: &harness_workflow::TurnMark, state: a2a_types::TaskState) {
    let outcome = state_label(state);
    metrics::counter!(TURNS, "outcome" => outcome).increment(1);
    let began = std::time::UNIX_EPOCH + std::time::Duration::from_millis(mark.started_ms);
    if let Ok(took) = std::time::SystemTime::now().duration_since(began) {
        metrics::histogram!(TURN_SECONDS).record(took.as_secs_f64());
    }
}

/// A state as a label: `TASK_STATE_INPUT_REQUIRED` is `input_required`.
pub(crate) fn state_label(state: a2a_types::TaskState) -> &'static str {
    use a2a_types::TaskState as S;
    match state {
        S::Submitted => "submitted",
        S::Working => "working",
        S::InputRequired => "input_required",
        S::AuthRequired => "auth_required",
        S::Completed => "completed",
        S::Failed => "failed",
        S::Canceled => "canceled",
        S::Rejected => "rejected",
        _ => "unspecified",
    }
}

pub(crate) fn tool_call(tool: String, began: Instant, result: &Result<ToolResult, ActivityError>) {
    let outcome = match result {
        Ok(r) if r.is_error => "error",
        Ok(_) => "ok",
        Err(_) => "failed",
    };
    metrics::counter!(TOOL_CALLS, "tool" => tool.clone(), "outcome" => outcome).increment(1);
    metrics::histogram!(TOOL_CALL_SECONDS, "tool" => tool).record(began.elapsed().as_secs_f64());
}
