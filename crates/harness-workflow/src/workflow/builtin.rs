//! The built-in tools the workflow runs itself (issue 29), because they wait on the task
//! rather than on the world: `ask_participant` parks the turn INPUT_REQUIRED and takes the
//! asked participant's next message as its result; `delegate` starts a sub-task on a
//! configured remote agent (the stand-in of `/delegate`) and takes its result; `emit_ui`
//! (issue 30) shows A2UI surfaces as an artifact of the task and keeps the surfaces open.

use super::TaskWorkflow;
use super::emit::set_status_full;
use crate::a2ui::{self, EMIT_UI};
use crate::{ASK_PARTICIPANT, AWAITING_PARTICIPANT, DELEGATE, InboxItem, SubTaskResult, ToolCall, ToolResult};
use a2a_types::{Artifact, Message, Part, TaskState};
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// What cut a running turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    Cancel,
    Control,
}

impl Cut {
    /// Which cut came: a waiting cancel goes before a control.
    pub(super) fn now(ctx: &WorkflowContext<TaskWorkflow>) -> Self {
        if ctx.state(|s| s.work.cancel.is_some()) { Cut::Cancel } else { Cut::Control }
    }
}

/// Whether the workflow runs this call itself (a built-in this task's tools turn on).
pub(super) fn is_builtin(s: &TaskWorkflow, call: &ToolCall) -> bool {
    (call.name == ASK_PARTICIPANT && s.input.tools.ask_participant)
        || (call.name == DELEGATE && !s.input.tools.delegates.is_empty())
        || (call.name == EMIT_UI && s.input.tools.emit_ui)
}

/// Runs a built-in call; `Err` when a cancel or a control cut it.
pub(super) async fn run(
    ctx: &WorkflowContext<TaskWorkflow>,
    turn: u32,
    call: &ToolCall,
    trace: Option<&str>,
) -> WorkflowResult<Result<ToolResult, Cut>> {
    if call.name == DELEGATE {
        return delegate(ctx, call, trace).await;
    }
    if call.name == EMIT_UI {
        return emit_ui(ctx, call).await.map(Ok);
    }
    ask_participant(ctx, turn, call).await
}

/// The call's arguments as a JSON object whose keys are among `keys`, each a string; the
/// error is what the model reads.
fn string_args(
    tool: &str,
    arguments: &str,
    keys: &[&str],
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let text = if arguments.trim().is_empty() { "{}" } else { arguments };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the arguments of `{tool}` are not JSON ({e})"))?;
    let Some(object) = value.as_object() else {
        return Err(format!("the arguments of `{tool}` must be a JSON object"));
    };
    let mut out = std::collections::BTreeMap::new();
    for (key, value) in object {
        if !keys.contains(&key.as_str()) {
            return Err(format!(
                "`{tool}` takes {}, not `{key}`",
                keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(" and ")
            ));
        }
        match value {
            serde_json::Value::Null => {}
            serde_json::Value::String(v) if v.trim().is_empty() => {}
            serde_json::Value::String(v) => {
                out.insert(key.clone(), v.trim().to_string());
            }
            _ => return Err(format!("`{tool}`: `{key}` must be a string")),
        }
    }
    Ok(out)
}

/// A call's result (its duration set once known).
fn outcome(call: &ToolCall, content: String, is_error: bool, summary: String) -> ToolResult {
    ToolResult { call_id: call.id.clone(), name: call.name.clone(), content, is_error, summary, duration_ms: 0 }
}

/// `emit_ui`: the messages, checked all together against the A2UI schemas and the task's
/// open surfaces, become one artifact update (`a2ui:<n>`, one data part per message), stored,
/// streamed and pushed as every event is; the surfaces they open, change or delete are kept.
/// A message that fails leaves nothing shown: the model reads what was wrong.
async fn emit_ui(ctx: &WorkflowContext<TaskWorkflow>, call: &ToolCall) -> WorkflowResult<ToolResult> {
    let emission = match ctx.state(|s| s.ui.check_emission(&call.arguments)) {
        Ok(emission) => emission,
        Err(why) => return Ok(outcome(call, why, true, String::new())),
    };
    let summary = emission.shown.join(", ");
    let artifact = Artifact {
        artifact_id: format!("a2ui:{}", emission.surfaces.emitted),
        name: a2ui::ARTIFACT_NAME.into(),
        parts: emission.messages.into_iter().map(|m| Part::data(m, a2ui::MEDIA_TYPE)).collect(),
        ..Default::default()
    };
    ctx.state_mut(|s| s.ui = emission.surfaces);
    super::emit::emit_artifact(ctx, artifact).await?;
    Ok(outcome(call, format!("shown to the user: {summary}"), false, summary))
}

/// `delegate`: a sub-task on a configured remote agent, exactly as `/delegate` starts one
/// (its stand-in, a child workflow, follows the remote task); the turn waits, WORKING, for
/// its result, which the model reads. The result is recorded in the history too, as a
/// `/delegate` result is, for later turns.
async fn delegate(
    ctx: &WorkflowContext<TaskWorkflow>,
    call: &ToolCall,
    trace: Option<&str>,
) -> WorkflowResult<Result<ToolResult, Cut>> {
    let started = ctx.workflow_time();
    let agents = ctx.state(|s| s.input.tools.delegates.clone());
    let result = |content: String, is_error: bool, summary: String| outcome(call, content, is_error, summary);
    let args = match string_args(DELEGATE, &call.arguments, &["agent", "brief"]) {
        Ok(args) => args,
        Err(why) => return Ok(Ok(result(why, true, String::new()))),
    };
    let (Some(agent), Some(brief)) = (args.get("agent"), args.get("brief")) else {
        let why = format!("`{DELEGATE}` needs `agent` (one of {}) and `brief`", agents.join(", "));
        return Ok(Ok(result(why, true, String::new())));
    };
    let summary = format!("{agent}: {}", crate::shorten(brief, 160));
    if !agents.contains(agent) {
        let why = format!("there is no remote agent `{agent}` (the agents are: {})", agents.join(", "));
        return Ok(Ok(result(why, true, summary)));
    }
    let id = match super::delegate::start_sub_task(ctx, agent, brief, None, trace.map(String::from)).await? {
        Ok(id) => id,
        Err(why) => return Ok(Ok(result(why, true, summary))),
    };
    // Clients see the sub-task the call started.
    let mark = serde_json::json!({"callId": call.id, "name": call.name, "phase": "delegated", "taskRef": id});
    let extra = a2a_types::Struct::from_iter([(crate::tool_ext_key(), mark)]);
    super::emit::set_status_with(ctx, TaskState::Working, None, Some(crate::CALLING_TOOLS), Some(extra)).await?;
    let done = match wait_for_sub_task(ctx, &id).await? {
        Ok(done) => done,
        Err(cut) => return Ok(Err(cut)),
    };
    let elapsed = super::emit::millis_since(ctx, started);
    let failed = matches!(done.state, TaskState::Failed | TaskState::Canceled | TaskState::Rejected);
    let text = format!("sub-task {id} on `{agent}` ended {}: {}", done.state, done.summary);
    Ok(Ok(ToolResult { duration_ms: elapsed, ..result(text, failed, summary) }))
}

/// Waits for the result of sub-task `id`, doing the side work meanwhile (which records the
/// result in the history); `Err` when a cancel or a control came first.
async fn wait_for_sub_task(
    ctx: &WorkflowContext<TaskWorkflow>,
    id: &str,
) -> WorkflowResult<Result<SubTaskResult, Cut>> {
    let closed = |s: &TaskWorkflow| s.delegation.sub_tasks.iter().any(|t| t.task_id == id && t.state.is_some());
    loop {
        let next = temporalio_sdk::workflows::select! {
            _ = ctx.wait_condition(|s| s.work.cancel.is_some() || s.work.control.is_some()) => Some(()),
            _ = ctx.wait_condition(|s| !s.work.side.is_empty() || closed(s)) => None,
        };
        if next.is_some() {
            let cut = Cut::now(ctx);
            return Ok(Err(cut));
        }
        // The result as the stand-in sent it, before the side work records it.
        let result = ctx.state(|s| {
            s.work.side.iter().find_map(|w| match w {
                super::Side::SubResult(r) if r.task_id == id => Some(r.clone()),
                _ => None,
            })
        });
        super::dispatch::side_work(ctx).await?;
        if let Some(result) = result {
            return Ok(Ok(result));
        }
        // Closed with its result taken before (never while this call waits): its state alone.
        let closed = ctx.state(|s| {
            s.delegation
                .sub_tasks
                .iter()
                .find(|t| t.task_id == id)
                .and_then(|t| t.state.map(|state| (t.agent.clone(), state)))
        });
        if let Some((agent, state)) = closed {
            return Ok(Ok(SubTaskResult { task_id: id.to_string(), agent, state, ..Default::default() }));
        }
    }
}

/// What `ask_participant` was asked: the question, and whom (`None`: whoever speaks next).
#[derive(Debug, PartialEq, Eq)]
struct Ask {
    question: String,
    participant: Option<String>,
}

/// The call's arguments, checked as its input schema says (the workflow has no schema
/// validator: the schema is two strings); the error is what the model reads.
fn parse(arguments: &str) -> Result<Ask, String> {
    let mut args = string_args(ASK_PARTICIPANT, arguments, &["question", "participant"])?;
    let question = args.remove("question").ok_or_else(|| format!("`{ASK_PARTICIPANT}` needs `question`"))?;
    Ok(Ask { question, participant: args.remove("participant") })
}

/// `ask_participant`: the question becomes the task's status message (and a history entry),
/// the task parks INPUT_REQUIRED in substate `awaiting-participant` naming who is asked, and
/// the asked participant's next message (anyone's, when none is named) is the result. That
/// message takes no turn of its own; others' messages wait for the turn's end, commands are
/// answered meanwhile.
async fn ask_participant(
    ctx: &WorkflowContext<TaskWorkflow>,
    turn: u32,
    call: &ToolCall,
) -> WorkflowResult<Result<ToolResult, Cut>> {
    let started = ctx.workflow_time();
    let result = |content: String, is_error: bool, summary: String| outcome(call, content, is_error, summary);
    let ask = match parse(&call.arguments) {
        Ok(ask) => ask,
        Err(why) => return Ok(Ok(result(why, true, String::new()))),
    };
    let summary = match &ask.participant {
        Some(who) => format!("{who}: {}", crate::shorten(&ask.question, 160)),
        None => crate::shorten(&ask.question, 180),
    };
    // A named participant must be one of the task's, when it has a list.
    if let Some(who) = &ask.participant {
        let known: Vec<String> = ctx.state(|s| s.participants().into_iter().map(|p| p.id).collect());
        if !known.is_empty() && !known.contains(who) {
            let why = format!("there is no participant `{who}` on this task (participants: {})", known.join(", "));
            return Ok(Ok(result(why, true, summary)));
        }
    }
    let question = ctx.state_mut(|s| {
        let mut m = Message::agent_text(format!("{}:ask:{turn}:{}", s.head.id, call.id), ask.question.clone());
        m.task_id = s.head.id.clone();
        m.context_id = s.head.context_id.clone();
        s.log.pending_history.push(m.clone());
        m
    });
    let status = match &ask.participant {
        Some(who) => serde_json::json!({"substate": AWAITING_PARTICIPANT, "participant": who}),
        None => serde_json::json!({"substate": AWAITING_PARTICIPANT}),
    };
    let mark =
        serde_json::json!({"callId": call.id, "name": call.name, "phase": "ask", "participant": ask.participant});
    let extra = a2a_types::Struct::from_iter([(crate::tool_ext_key(), mark)]);
    set_status_full(ctx, TaskState::InputRequired, Some(question), Some(status), Some(extra)).await?;
    let answer = match wait_for_answer(ctx, ask.participant.as_deref()).await? {
        Ok(item) => item,
        Err(cut) => return Ok(Err(cut)),
    };
    ctx.state_mut(|s| s.work.in_turn = true);
    let who = answer.sender.clone().unwrap_or_else(|| "the user".into());
    let text = answer.message.text();
    let elapsed = super::emit::millis_since(ctx, started);
    Ok(Ok(ToolResult { duration_ms: elapsed, ..result(format!("{who} answered: {text}"), false, summary) }))
}

/// Waits for the message that answers: the first in the mailbox from `who` (from anyone when
/// `None`), taken out of it; side work is done meanwhile. `Err` when a cancel or a control
/// came first.
async fn wait_for_answer(
    ctx: &WorkflowContext<TaskWorkflow>,
    who: Option<&str>,
) -> WorkflowResult<Result<InboxItem, Cut>> {
    let answers = |item: &InboxItem| who.is_none_or(|w| item.sender.as_deref() == Some(w));
    loop {
        let next = temporalio_sdk::workflows::select! {
            _ = ctx.wait_condition(|s| s.work.mailbox.iter().any(|(_, i)| answers(i))) => Some(Ok(())),
            _ = ctx.wait_condition(|s| s.work.cancel.is_some() || s.work.control.is_some()) => Some(Err(())),
            _ = ctx.wait_condition(|s| !s.work.side.is_empty()) => None,
        };
        match next {
            Some(Ok(())) => {
                let item = ctx.state_mut(|s| {
                    let at = s.work.mailbox.iter().position(|(_, i)| answers(i))?;
                    s.work.mailbox.remove(at).map(|(_, item)| item)
                });
                if let Some(item) = item {
                    return Ok(Ok(item));
                }
            }
            Some(Err(())) => {
                let cut = Cut::now(ctx);
                return Ok(Err(cut));
            }
            None => super::dispatch::side_work(ctx).await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_are_checked_as_the_schema_says_naming_what_is_wrong() {
        assert_eq!(
            parse(r#"{"question": " Which colour? ", "participant": "bob"}"#),
            Ok(Ask { question: "Which colour?".into(), participant: Some("bob".into()) })
        );
        assert_eq!(parse(r#"{"question": "Why?"}"#).unwrap().participant, None);
        assert_eq!(parse(r#"{"question": "Why?", "participant": ""}"#).unwrap().participant, None);
        assert!(parse("{}").unwrap_err().contains("needs `question`"));
        assert!(parse(r#"{"question": "  "}"#).unwrap_err().contains("needs `question`"));
        assert!(parse(r#"{"question": 3}"#).unwrap_err().contains("`question` must be a string"));
        let err = parse(r#"{"question": "q", "to": "bob"}"#).unwrap_err();
        assert!(err.contains("takes `question` and `participant`, not `to`"), "{err}");
        assert!(parse(r#"{"question": "q", "participant": 7}"#).unwrap_err().contains("must be a string"));
        assert!(parse("[1]").unwrap_err().contains("must be a JSON object"));
        assert!(parse("{nope").unwrap_err().contains("are not JSON"));
    }
}
