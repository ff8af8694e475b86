//! The spans of a model call and a tool call (issue 32), by the OpenTelemetry GenAI semantic
//! conventions. A call joins the trace of the request that delivered its turn's message: the
//! W3C `traceparent` the workflow recorded with the message travels in the activity's input.
//! With traces off there is no `traceparent` and no OpenTelemetry layer: the spans are
//! ordinary `tracing` spans, as cheap as any other.

use tracing::Span;

/// The W3C `traceparent` of the span the caller runs in, when traces are on and it has one:
/// what a message carries into its workflow, and a tool call to an MCP server.
pub fn current_traceparent() -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    let cx = opentelemetry::Context::current();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    carrier.remove("traceparent")
}

/// The context a W3C `traceparent` names (empty when it names none or traces are off).
fn context_of(traceparent: &str) -> opentelemetry::Context {
    let carrier = std::collections::HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    opentelemetry::global::get_text_map_propagator(|p| p.extract(&carrier))
}

/// Makes `span` a child of `traceparent` (none: it stays where it is).
pub(crate) fn join(span: &Span, traceparent: Option<&str>) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let Some(traceparent) = traceparent else { return };
    let _ = span.set_parent(context_of(traceparent));
}

/// A model call's span: `chat <model>`, a client span naming the provider and the model;
/// [`model_done`] adds what the call answered.
pub(crate) fn model_span(provider: &str, model: &str, task_id: &str, turn: u32, round: u32) -> Span {
    tracing::info_span!(
        "chat",
        "otel.name" = format!("chat {model}").trim_end(),
        "otel.kind" = "client",
        "otel.status_code" = tracing::field::Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider,
        // The attribute's name before the conventions renamed it, which some backends read.
        "gen_ai.system" = provider,
        "gen_ai.request.model" = model,
        "gen_ai.usage.input_tokens" = tracing::field::Empty,
        "gen_ai.usage.output_tokens" = tracing::field::Empty,
        "gen_ai.response.finish_reasons" = tracing::field::Empty,
        "gen_ai.server.time_to_first_token" = tracing::field::Empty,
        "gen_ai.input.messages" = tracing::field::Empty,
        "gen_ai.output.messages" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        task_id,
        turn,
        round,
    )
}

/// What a model call answered, on its span: tokens, why it finished (`tool_calls`, `stop`,
/// or the state the provider ended the task in), or the error's kind.
pub(crate) fn model_done(span: &Span, reply: &Result<crate::ModelReply, temporalio_sdk::activities::ActivityError>) {
    match reply {
        Ok(reply) => {
            if let Some(usage) = reply.usage {
                span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
                span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
            }
            let finish = match &reply.finish {
                _ if !reply.tool_calls.is_empty() => "tool_calls".to_string(),
                Some(finish) => format!("{:?}", finish.state),
                None => "stop".to_string(),
            };
            span.record("gen_ai.response.finish_reasons", finish);
        }
        Err(e) => {
            span.record("otel.status_code", "error");
            span.record("error.type", error_kind(e));
        }
    }
}

/// The span of a brief sent to a remote agent on delegation: a client span whose
/// `traceparent` the request carries, so the remote agent's spans join the trace.
pub(crate) fn remote_span(agent: &str, stand_in: &str) -> Span {
    tracing::info_span!(
        "delegate",
        "otel.name" = format!("A2A SendMessage {agent}"),
        "otel.kind" = "client",
        "a2a.operation" = "SendMessage",
        "a2a.agent" = agent,
        task_id = stand_in,
    )
}

/// Exports the span of a turn that ended in `state` (issue 32): `turn`, from the turn's start
/// to now, with the id the workflow derived (its model and tool calls are its children), the
/// child of the request that delivered its message. Nothing without traces.
pub(crate) fn turn_ended(mark: &harness_workflow::TurnMark, task_id: &str, state: a2a_types::TaskState) {
    use opentelemetry::KeyValue;
    use opentelemetry::trace::{Span as _, SpanId, SpanKind, Status, TraceContextExt as _, Tracer as _};
    let (Some(parent), Some(id)) = (&mark.parent, &mark.span_id) else { return };
    let Ok(id) = SpanId::from_hex(id) else { return };
    let parent = context_of(parent);
    if !parent.span().span_context().is_valid() {
        return;
    }
    let tracer = opentelemetry::global::tracer("tiny-harness");
    let outcome = crate::metrics::state_label(state);
    let mut span = tracer
        .span_builder("turn")
        .with_span_id(id)
        .with_kind(SpanKind::Internal)
        .with_start_time(std::time::UNIX_EPOCH + std::time::Duration::from_millis(mark.started_ms))
        .with_attributes([
            KeyValue::new("task_id", task_id.to_string()),
            KeyValue::new("turn", i64::from(mark.turn)),
            KeyValue::new("turn.outcome", outcome),
        ])
        .start_with_context(&tracer, &parent);
    if state == a2a_types::TaskState::Failed {
        span.set_status(Status::error("the turn failed"));
    }
    span.end();
}

/// A tool call's span: `execute_tool <name>`.
pub(crate) fn tool_span(tool: &str, call_id: &str, task_id: &str, turn: u32) -> Span {
    tracing::info_span!(
        "execute_tool",
        "otel.name" = format!("execute_tool {tool}"),
        "otel.kind" = "internal",
        "otel.status_code" = tracing::field::Empty,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.call.id" = call_id,
        "tool.outcome" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
        task_id,
        turn,
    )
}

/// How a tool call ended, on its span: `ok`, `error` (the model reads why) or `failed` (the
/// activity failed: a timeout, a cancel).
pub(crate) fn tool_done(span: &Span, result: &Result<crate::ToolResult, temporalio_sdk::activities::ActivityError>) {
    let outcome = match result {
        Ok(r) if r.is_error => "error",
        Ok(_) => "ok",
        Err(e) => {
            span.record("error.type", error_kind(e));
            "failed"
        }
    };
    span.record("tool.outcome", outcome);
    if outcome != "ok" {
        span.record("otel.status_code", "error");
    }
}

/// An activity error's kind, never its text (which may quote a model's or a tool's output).
fn error_kind(e: &temporalio_sdk::activities::ActivityError) -> &'static str {
    use temporalio_sdk::activities::ActivityError as E;
    match e {
        E::Cancelled { .. } => "cancelled",
        E::Application(_) => "application",
        _ => "other",
    }
}
