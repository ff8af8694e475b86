//! How the workflow emits: a status with its timestamp from workflow time, and every event
//! through the `emit_event` local activity with what changed of the history and artifacts
//! since the event before (D1, docs/event-log.md).

use super::{Held, TaskWorkflow};
use crate::activity;
use crate::{EmitInput, InboxItem, Json, status_ext_key};
use a2a_types::{Message, StreamResponse, Struct, Task, TaskState, TaskStatus, TaskStatusUpdateEvent};
use std::time::Duration;
use temporalio_sdk::{ActivityExecutionError, LocalActivityOptions, WorkflowContext, WorkflowResult};

pub(super) fn timestamp(t: Option<std::time::SystemTime>) -> Option<String> {
    t.map(a2a_types::format_timestamp)
}

/// Milliseconds of workflow time since `started` (0 when either time is unknown).
pub(super) fn millis_since(ctx: &WorkflowContext<TaskWorkflow>, started: Option<std::time::SystemTime>) -> u64 {
    match (started, ctx.workflow_time()) {
        (Some(a), Some(b)) => b.duration_since(a).map_or(0, |d| d.as_millis() as u64),
        _ => 0,
    }
}

/// Sets the status (with its timestamp from workflow time) and emits it with the snapshot.
pub(super) async fn set_status(
    ctx: &WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    substate: Option<&str>,
) -> WorkflowResult<()> {
    set_status_with(ctx, state, message, substate, None).await
}

/// [`set_status`], the event's metadata with `extra` (a command's `{"command": <name>}`);
/// the head keeps the substate only.
pub(super) async fn set_status_with(
    ctx: &WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    substate: Option<&str>,
    extra: Option<Struct>,
) -> WorkflowResult<()> {
    let status = substate.map(|sub| serde_json::json!({ "substate": sub }));
    set_status_full(ctx, state, message, status, extra).await
}

/// [`set_status_with`] with the status extension's whole object (`{"substate", ...}`), which
/// the head keeps too.
pub(super) async fn set_status_full(
    ctx: &WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    status: Option<serde_json::Value>,
    extra: Option<Struct>,
) -> WorkflowResult<()> {
    let (event, snapshot, turn) = status_event(ctx, state, message, status, extra);
    append(ctx, None, event, snapshot, turn).await
}

/// Sets the status as [`set_status`] does and holds its event back for the next append
/// (or the model call it is handed to, [`hand_held`]).
pub(super) fn hold_status(ctx: &WorkflowContext<TaskWorkflow>, state: TaskState) {
    let (event, _, _) = status_event(ctx, state, None, None, None);
    hold(ctx, event, None);
}

/// Holds `event` back, its key taken now, for the next append (which appends it first),
/// with the snapshot it stores.
pub(super) fn hold(ctx: &WorkflowContext<TaskWorkflow>, event: StreamResponse, snapshot: Option<Task>) {
    ctx.state_mut(|s| {
        s.log.next_key += 1;
        let key = format!("wf-{}", s.log.next_key);
        s.log.held.push(Held { key, event, snapshot });
    });
}

/// The held events, handed to a model call to append first ([`crate::ModelTurn::before`]).
pub(super) struct Handed {
    pub(super) inputs: Vec<EmitInput>,
    /// The held events and the participants change they took, to hold again.
    held: Vec<Held>,
    participants: Option<Vec<(String, String)>>,
    /// The messages and artifacts they carry to the store.
    pub(super) sent: (usize, usize),
}

/// Hands what is held to a model call: the `emit_event` inputs the events would have had
/// in one append (the first carries what the store lacks).
pub(super) fn hand_held(ctx: &WorkflowContext<TaskWorkflow>) -> Handed {
    ctx.state_mut(|s| {
        let held = std::mem::take(&mut s.log.held);
        let participants = s.log.changed_participants.clone();
        let mut sent = (0, 0);
        let inputs = s.held_inputs(held.iter().cloned(), &mut sent);
        Handed { inputs, held, participants, sent }
    })
}

/// The model call that was handed `h` answered: its events are stored, with what they
/// carried.
pub(super) fn handed_stored(ctx: &WorkflowContext<TaskWorkflow>, h: Handed) {
    ctx.state_mut(|s| s.stored(h.sent));
}

/// The model call that was handed `h` failed or was cut: its events may not be stored, so
/// they are held again, before anything held since, for the next append.
pub(super) fn hold_again(ctx: &WorkflowContext<TaskWorkflow>, h: Handed) {
    ctx.state_mut(|s| {
        let since = std::mem::replace(&mut s.log.held, h.held);
        s.log.held.extend(since);
        if s.log.changed_participants.is_none() {
            s.log.changed_participants = h.participants;
        }
    });
}

/// Sets the status (with its timestamp from workflow time) in the head; returns its event,
/// the snapshot a final status stores, and the turn it ends.
fn status_event(
    ctx: &WorkflowContext<TaskWorkflow>,
    state: TaskState,
    message: Option<Message>,
    status: Option<serde_json::Value>,
    extra: Option<Struct>,
) -> (StreamResponse, Option<Task>, Option<crate::TurnMark>) {
    let ts = timestamp(ctx.workflow_time());
    let (event, snapshot, turn) = ctx.state_mut(|s| {
        // A final status ends the running turn, if any: its mark goes with the event.
        let turn = state.is_final().then(|| s.work.turn_mark.take()).flatten();
        if state.is_final() {
            s.work.in_turn = false;
        }
        let metadata = set_head_status(&mut s.head, TaskStatus { state, message, timestamp: ts }, status);
        let metadata = match extra {
            Some(extra) => Some(metadata.unwrap_or_default().into_iter().chain(extra).collect()),
            None => metadata,
        };
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: s.head.id.clone(),
            context_id: s.head.context_id.clone(),
            status: s.head.status.clone(),
            metadata,
        });
        (event, s.head.clone(), turn)
    });
    // The stored snapshot serves reads once the workflow is gone; the final status of a
    // turn (and a terminal one) is what such a read must see. WORKING updates the state only.
    (event, state.is_final().then_some(snapshot), turn)
}

/// Sets `status` on `head`, with the status extension's object `ext` (none: the head's is
/// removed); returns the status event's metadata (that object under the extension's key).
pub(crate) fn set_head_status(head: &mut Task, status: TaskStatus, ext: Option<serde_json::Value>) -> Option<Struct> {
    let metadata = ext.map(|ext| Struct::from_iter([(status_ext_key(), ext)]));
    head.status = status;
    let mut md = head.metadata.take().unwrap_or_default();
    md.remove(&status_ext_key());
    if let Some(m) = &metadata {
        md.extend(m.clone());
    }
    head.metadata = if md.is_empty() { None } else { Some(md) };
    metadata
}

/// Emits one event through the `emit_event` local activity; the store assigns its seq. The
/// event carries the messages and artifacts the store does not have yet, which count as
/// stored once the append has answered. (A run recorded before [`super::HISTORY_BY_ROW`]
/// stored them only with a snapshot, so it carries them only then.)
pub(super) async fn emit(
    ctx: &WorkflowContext<TaskWorkflow>,
    event: StreamResponse,
    snapshot: Option<Task>,
) -> WorkflowResult<()> {
    append(ctx, None, event, snapshot, None).await
}

/// [`emit`] of an event, with the key it took when it was held (else the next one), and
/// the turn it ends (its final status), after the events held back.
async fn append(
    ctx: &WorkflowContext<TaskWorkflow>,
    key: Option<String>,
    event: StreamResponse,
    snapshot: Option<Task>,
    turn: Option<crate::TurnMark>,
) -> WorkflowResult<()> {
    let (input, sent) = ctx.state_mut(|s| {
        // Held events go first, the first of them carrying what the store lacks, as each
        // would have alone.
        let mut sent = (0, 0);
        let held = std::mem::take(&mut s.log.held);
        let earlier = s.held_inputs(held, &mut sent);
        let key = key.unwrap_or_else(|| {
            s.log.next_key += 1;
            format!("wf-{}", s.log.next_key)
        });
        let input = EmitInput { turn, earlier, ..s.emit_input(key, event, snapshot, &mut sent) };
        (input, sent)
    });
    let seq = ctx
        .execute_local_activity(
            activity::EmitEvent,
            Json(input),
            LocalActivityOptions::builder()
                .start_to_close_timeout(Duration::from_secs(30))
                .retry_policy(
                    temporalio_common::RetryPolicy::builder()
                        .initial_interval(Duration::from_millis(100))
                        .maximum_interval(Duration::from_secs(5))
                        .build(),
                )
                .build(),
        )
        .await?;
    ctx.state_mut(|s| {
        s.log.last_seq = s.log.last_seq.max(seq);
        s.run.bytes += EMIT_BYTES;
        s.stored(sent);
    });
    Ok(())
}

/// Appends what is held back, if anything (a guard: the turn's WORKING takes it), the last
/// of it as the `emit_event`'s own event.
pub(super) async fn flush_held(ctx: &WorkflowContext<TaskWorkflow>) -> WorkflowResult<()> {
    let Some(h) = ctx.state_mut(|s| s.log.held.pop()) else { return Ok(()) };
    append(ctx, Some(h.key), h.event, h.snapshot, None).await
}

impl TaskWorkflow {
    /// The messages and artifacts an append carried (`sent`) are stored: no later event
    /// carries them again.
    fn stored(&mut self, sent: (usize, usize)) {
        self.log.pending_history.drain(..sent.0);
        self.log.stored_history += sent.0;
        self.log.pending_artifacts.drain(..sent.1);
        self.log.stored_artifacts += sent.1;
    }

    /// The `emit_event` inputs of held events, in order, as one append carries them.
    fn held_inputs(&mut self, held: impl IntoIterator<Item = Held>, sent: &mut (usize, usize)) -> Vec<EmitInput> {
        held.into_iter().map(|h| self.emit_input(h.key, h.event, h.snapshot, sent)).collect()
    }

    /// The `emit_event` input of one event: the messages and artifacts the store lacks past
    /// what the events before it in the same call carry (`sent`, which it adds to).
    pub(super) fn emit_input(
        &mut self,
        key: String,
        event: StreamResponse,
        snapshot: Option<Task>,
        sent: &mut (usize, usize),
    ) -> EmitInput {
        let log = &mut self.log;
        let (stored_history, stored_artifacts) = (log.stored_history + sent.0, log.stored_artifacts + sent.1);
        let stored_before = log.by_row.then_some((stored_history as u32, stored_artifacts as u32));
        let carries = log.by_row || snapshot.is_some();
        let (history, artifacts) = if carries {
            (log.pending_history[sent.0..].to_vec(), log.pending_artifacts[sent.1..].to_vec())
        } else {
            Default::default()
        };
        *sent = (sent.0 + history.len(), sent.1 + artifacts.len());
        EmitInput {
            task_id: self.input.task_id.clone(),
            task_queue: self.input.task_queue.clone(),
            key,
            event,
            snapshot,
            history,
            history_from: stored_history as u32,
            artifacts,
            stored_before,
            participants: log.changed_participants.take(),
            turn: None,
            earlier: Vec::new(),
        }
    }
}

/// Adds `artifact` to the task's artifacts and emits it whole (not appended, its last chunk):
/// an A2UI emission, a sub-task's artifact mirrored by its stand-in.
pub(super) async fn emit_artifact(
    ctx: &WorkflowContext<TaskWorkflow>,
    artifact: a2a_types::Artifact,
) -> WorkflowResult<()> {
    let event = ctx.state_mut(|s| {
        s.add_artifact(artifact.clone());
        StreamResponse::ArtifactUpdate(a2a_types::TaskArtifactUpdateEvent {
            task_id: s.head.id.clone(),
            context_id: s.head.context_id.clone(),
            artifact,
            append: false,
            last_chunk: true,
            metadata: None,
        })
    });
    emit(ctx, event, None).await
}

/// What the history gains per `emit_event` beyond its result, the markers and task events around them (an estimate, on the large side).
pub(super) const EMIT_BYTES: u64 = 600;

/// A status update in the unchanged state carrying `message`, its metadata the head's
/// substate and `extra`; with `snapshot`, the head (which a task envelope changed) is
/// stored with it.
pub(super) async fn emit_unchanged(
    ctx: &WorkflowContext<TaskWorkflow>,
    message: Message,
    extra: Vec<(String, serde_json::Value)>,
    snapshot: bool,
) -> WorkflowResult<()> {
    let event = unchanged_event(ctx, message, extra);
    let head = snapshot.then(|| ctx.state(|s| s.head.clone()));
    emit(ctx, event, head).await
}

/// The event of [`emit_unchanged`].
pub(super) fn unchanged_event(
    ctx: &WorkflowContext<TaskWorkflow>,
    message: Message,
    extra: Vec<(String, serde_json::Value)>,
) -> StreamResponse {
    let ts = timestamp(ctx.workflow_time());
    ctx.state(|s| {
        let mut md = Struct::new();
        if let Some(sub) = s.head.metadata.as_ref().and_then(|m| m.get(&status_ext_key())) {
            md.insert(status_ext_key(), sub.clone());
        }
        md.extend(extra);
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: s.head.id.clone(),
            context_id: s.head.context_id.clone(),
            status: TaskStatus { state: s.head.status.state, message: Some(message), timestamp: ts },
            metadata: Some(md),
        })
    })
}

/// The metadata of a command's reply message: S9's `{"command": <name>}` (plus `"task_ref"`
/// when the command created a sub-task), and the commands extension's mark naming the
/// message it answers (`{"name", "inReplyTo"}`).
pub(super) fn command_marks(name: &str, item: &InboxItem, task_ref: Option<&str>) -> Vec<(String, serde_json::Value)> {
    let mut mark = crate::reply_mark(&item.message.message_id);
    mark["name"] = serde_json::json!(name);
    let mut marks = vec![("command".to_string(), serde_json::json!(name)), (crate::command_ext_key(), mark)];
    if let Some(id) = task_ref {
        marks.push(("task_ref".to_string(), serde_json::json!(id)));
    }
    marks
}

/// What a failed model call says: the provider's own text, the innermost cause (the
/// activity failure around it only says "Activity task failed").
pub(super) fn failure_text(e: &ActivityExecutionError) -> String {
    let Some(mut failure) = e.failure() else { return e.to_string() };
    while let Some(cause) = failure.cause.as_deref() {
        failure = cause;
    }
    failure.message.clone()
}
