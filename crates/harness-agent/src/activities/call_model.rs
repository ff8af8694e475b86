//! `call_model`: one model turn. Each text delta is appended to the log as an artifact
//! chunk (`reply-<turn>`) as it arrives, and an empty chunk marked `lastChunk` closes the
//! reply; an instant provider's (echo's) chunk waits for the next event instead, so its last
//! carries `lastChunk` itself. The whole reply is returned to the workflow for the final
//! status.
//!
//! A turn's first [`STREAMED_CHUNKS`] text chunks go out delta by delta; after them deltas
//! are coalesced into chunks of [`COALESCED_BYTES`] (or whatever came within [`WATCH`] from
//! a provider that is not instant), so no reply, however long, writes more than a few
//! hundred events (issue 34: a 240 KB echo once wrote 200,000).
//!
//! Events the provider gave at once (an instant provider's whole reply, the deltas of one read
//! of an endpoint's stream) are appended in one transaction, each as its own event in order:
//! a reader sees the same events, and the store commits once where it would have committed
//! per chunk (issue 31). Nothing is held while the provider makes us wait.
//!
//! An instant provider's turn is handed its WORKING (and a message's echo held for it) by the
//! workflow ([`ModelTurn::before`]): they go first in the turn's first transaction, pushed
//! as `emit_event` would push them, and are appended even when the reply has no chunk.
//!
//! Chunks are keyed `turn-<n>-chunk-<i>` (`turn-<n>-try-<a>-chunk-<i>` on the activity's
//! attempt `a` > 1, whose output is new). A provider that starts its reply again
//! ([`ModelEvent::Restart`]) closes the void text as a last chunk marked with the reason, and
//! its next chunk starts the artifact afresh (`append` unset replaces it). A cancel (or a
//! control) that ends the task fences the log; a chunk after that is refused by the store and
//! the activity stops, and a turn waiting on its provider looks every 250 ms.

use crate::models::{ModelEvent, ModelRegistry, ModelRequest};
use crate::{ModelReply, ModelTurn};
use a2a_types::{Artifact, Message, Part, StreamResponse, TaskArtifactUpdateEvent};
use futures::StreamExt;
use harness_store::{NewEvent, Store, StoreError};
use temporalio_common::error::ApplicationFailure;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use tracing::Instrument as _;

/// One model call in its span (issue 32): the child of the turn's message's request, with
/// the GenAI attributes and, when `content` (the redactor) is given, the message and reply.
pub(super) async fn run(
    store: &Store,
    pusher: Option<&std::sync::Arc<harness_push::Pusher>>,
    models: &ModelRegistry,
    tools: &crate::tools::ToolRegistry,
    content: Option<&crate::redaction::Redactor>,
    ctx: &ActivityContext,
    input: ModelTurn,
) -> Result<ModelReply, ActivityError> {
    let provider = models.get(&input.model).ok_or_else(|| {
        let names = models.names().join(", ");
        ActivityError::application(ApplicationFailure::non_retryable(format!(
            "unknown model `{}` (this worker has: {names})",
            input.model
        )))
    })?;
    let (system, model) = provider.gen_ai();
    let span = crate::trace::model_span(system, model, &input.task_id, input.turn, input.round);
    crate::trace::join(&span, input.trace.as_deref());
    let reply = call(store, pusher, &*provider, tools, content, ctx, input, &span).instrument(span.clone()).await;
    crate::trace::model_done(&span, &reply);
    if let (Some(redactor), Ok(reply)) = (content, &reply) {
        span.record("gen_ai.output.messages", redactor.text(&reply.text));
    }
    reply
}

#[allow(clippy::too_many_arguments)]
async fn call(
    store: &Store,
    pusher: Option<&std::sync::Arc<harness_push::Pusher>>,
    provider: &dyn crate::models::ModelProvider,
    tools: &crate::tools::ToolRegistry,
    content: Option<&crate::redaction::Redactor>,
    ctx: &ActivityContext,
    input: ModelTurn,
    span: &tracing::Span,
) -> Result<ModelReply, ActivityError> {
    let began = std::time::Instant::now();
    let history = for_the_model(conversation(store, provider.history_window(), &input).await?);
    if let Some(redactor) = content {
        span.record("gen_ai.input.messages", redactor.text(&crate::models::last_user_text(&history)));
    }
    let mut first_token = true;
    let request = ModelRequest {
        history,
        turn: input.turn,
        reasoning_effort: input.reasoning_effort.clone(),
        tools: tools.specs(),
        exchanges: input.exchanges.clone(),
    };
    let instant = provider.is_instant();
    let mut deltas = provider.stream(request).await.map_err(model_failure)?;
    let mut out = Output::new(&input, ctx.info().attempt, pusher);
    out.hand(store, &input.before).await?;
    // The first look comes after WATCH: an instant turn (echo) never reads the store for it.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + WATCH, WATCH);
    let mut ticks = 0u32;
    loop {
        // What the provider has ready goes with what is queued; before waiting for more, the
        // queue is appended (at most QUEUED events wait).
        let ready = match out.queued.len() < QUEUED {
            true => futures::FutureExt::now_or_never(deltas.next()),
            false => None,
        };
        let next = match ready {
            Some(next) => next,
            None => {
                if out.write(store).await?.is_some() {
                    let _ = ctx.record_heartbeat(out.index).await;
                }
                tokio::select! {
                    next = deltas.next() => next,
                    _ = ctx.cancelled() => return Err(ActivityError::cancelled()),
                    _ = tick.tick() => {
                        // A cancel (or a control) that ended the task reaches a reply that is
                        // waiting on its endpoint within WATCH: dropping `deltas` drops its
                        // request. Temporal's own cancel arrives only with a heartbeat's answer.
                        ticks += 1;
                        // Coalesced text waits at most WATCH.
                        if out.coalescing() && out.flush(false, None) && out.write(store).await?.is_some() {
                            let _ = ctx.record_heartbeat(out.index).await;
                        }
                        if ticks.is_multiple_of(HEARTBEAT_EVERY) {
                            let _ = ctx.record_heartbeat(out.index).await;
                        }
                        if ended(store, &input.task_id).await {
                            return Err(task_ended());
                        }
                        continue;
                    }
                }
            }
        };
        let next = next.transpose().map_err(model_failure)?;
        // A text chunk is the last one unless more text follows (a restart closes it itself).
        let last = !matches!(next, Some(ModelEvent::Text(_)));
        let restart = matches!(next, Some(ModelEvent::Restart { .. }));
        // Coalesced text is held while more text comes.
        if !restart && (last || !out.coalescing()) {
            out.flush(last, None);
        }
        match next {
            Some(ModelEvent::Text(delta)) => {
                if std::mem::take(&mut first_token) {
                    span.record("gen_ai.server.time_to_first_token", began.elapsed().as_secs_f64());
                }
                out.reply.text.push_str(&delta);
                out.pending.get_or_insert_with(String::new).push_str(&delta);
                // An instant provider's chunk is held until the next event says whether it
                // is the last; any other's goes to the log now (S12), and an empty last
                // chunk closes the reply. Coalesced text goes once it is large enough.
                let send_now = match out.coalescing() {
                    true => out.pending.as_ref().is_some_and(|p| p.len() >= COALESCED_BYTES),
                    false => !instant,
                };
                if send_now {
                    out.flush(false, None);
                }
            }
            Some(ModelEvent::Artifact { artifact, append, last_chunk }) => {
                out.artifact(artifact, append, last_chunk);
            }
            Some(ModelEvent::Finish(finish)) => out.reply.finish = Some(finish),
            Some(ModelEvent::Restart { reason }) => out.restart(reason),
            Some(ModelEvent::Usage(usage)) => {
                out.reply.usage = Some(out.reply.usage.unwrap_or_default().plus(usage));
            }
            Some(ModelEvent::ToolCall(mut call)) => {
                // Whether it may run again is the registry's word, recorded in the reply.
                call.idempotent = tools.idempotent(&call.name);
                out.reply.tool_calls.push(call);
            }
            None => break,
        }
    }
    out.close();
    // A plain reply ends the turn as the workflow planned, with the last chunks (issue 31).
    let end = input.end.as_ref().filter(|_| out.reply.is_plain());
    if let Some(end) = end {
        out.queued.push(super::emit_event::new_event(end.input(&input.task_queue, &out.reply.text)));
    }
    let last = out.write(store).await?;
    if let (Some(end), Some(seq)) = (end, last) {
        out.reply.ended = Some(seq);
        // The turn's end (issue 32), as `emit_event` reports a final status.
        if let Some(turn) = &end.turn {
            super::emit_event::turn_ended(turn, &input.task_id, end.state);
        }
    }
    out.reply.chunks = out.index;
    Ok(out.reply)
}

/// Text chunks a turn streams delta by delta before it coalesces deltas.
pub(crate) const STREAMED_CHUNKS: u32 = 128;
/// The size a coalesced chunk waits for (or [`WATCH`], from a provider that is not instant).
pub(crate) const COALESCED_BYTES: usize = 8 * 1024;

/// How often a running turn looks whether its task ended, and heartbeats every so many.
const WATCH: std::time::Duration = std::time::Duration::from_millis(250);
const HEARTBEAT_EVERY: u32 = 20;
/// How many events the provider had ready at once go in one transaction at most.
const QUEUED: usize = 64;

/// How a turn stops when its task ended under it (a cancel, a control): a failure that is
/// not retried, not a cancellation. Temporal refuses an activity's "cancelled" before the
/// workflow's cancel request reached it, and the workflow task that carries that request may
/// still be completing (its terminal status is stored by a local activity inside it). The
/// workflow moved on already and ignores the result.
fn task_ended() -> ActivityError {
    ActivityError::application(ApplicationFailure::non_retryable(
        "the task ended while its turn ran (a cancel or a control)".to_string(),
    ))
}

/// Whether the task ended (a cancel's terminal status is in the store).
async fn ended(store: &Store, task_id: &str) -> bool {
    matches!(store.task_head(task_id).await, Ok(Some(head)) if head.state.is_terminal())
}

/// What a turn has put in the log so far.
struct Output<'a> {
    turn: &'a ModelTurn,
    pusher: Option<&'a std::sync::Arc<harness_push::Pusher>>,
    reply: ModelReply,
    /// The text chunk held back until the next event says whether it is the last.
    pending: Option<String>,
    /// Chunks appended (across restarts), and where the current start of the reply is.
    index: u32,
    fresh_from: u32,
    /// The reply artifact has chunks and no last one yet.
    open: bool,
    /// Artifact updates of the provider's own.
    own: u32,
    /// The chunk keys' prefix: `turn-<n>` on the activity's first attempt, with the attempt
    /// after (a retried activity's output is new, and must not meet the store's
    /// de-duplication of the keys the failed one used).
    key: String,
    /// Events made and not appended yet, in order ([`Output::write`]).
    queued: Vec<NewEvent>,
}

impl<'a> Output<'a> {
    fn new(turn: &'a ModelTurn, attempt: u32, pusher: Option<&'a std::sync::Arc<harness_push::Pusher>>) -> Self {
        // A later round of the turn (after tool calls, issue 29) has keys of its own.
        let round = if turn.round > 0 { format!("-round-{}", turn.round) } else { String::new() };
        let key = if attempt > 1 {
            format!("turn-{}{round}-try-{attempt}", turn.turn)
        } else {
            format!("turn-{}{round}", turn.turn)
        };
        Self {
            turn,
            pusher,
            reply: ModelReply::default(),
            pending: None,
            index: 0,
            fresh_from: 0,
            open: false,
            own: 0,
            key,
            queued: Vec::new(),
        }
    }

    /// Past [`STREAMED_CHUNKS`], deltas are coalesced.
    fn coalescing(&self) -> bool {
        self.index >= STREAMED_CHUNKS
    }

    /// Queues the held-back chunk, if any (`last`: it ends the reply text); true if it did.
    fn flush(&mut self, last: bool, metadata: Option<a2a_types::Struct>) -> bool {
        let Some(text) = self.pending.take() else { return false };
        let append = self.index > self.fresh_from;
        let key = format!("{}-chunk-{}", self.key, self.index);
        let event = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.turn.task_id.clone(),
            context_id: self.turn.context_id.clone(),
            artifact: Artifact {
                artifact_id: self.turn.artifact_id.clone(),
                name: "reply".into(),
                parts: vec![Part::text(text)],
                ..Default::default()
            },
            append,
            last_chunk: last,
            metadata,
        });
        self.queue(key, event);
        self.index += 1;
        self.open = !last;
        true
    }

    /// Ends the reply text with an empty last chunk when its last chunk went out early.
    fn close(&mut self) {
        if self.open && self.pending.is_none() {
            self.pending = Some(String::new());
            self.flush(true, None);
        }
    }

    /// The provider starts the reply again: the void text so far is closed as the last
    /// chunk, marked with the reason; the next chunk starts the artifact afresh.
    fn restart(&mut self, reason: String) {
        let mut marked = a2a_types::Struct::new();
        marked.insert(crate::attempt_ext_key(), serde_json::json!({"abandoned": reason}));
        if self.pending.is_none() && self.open {
            self.pending = Some(String::new());
        }
        self.flush(true, Some(marked));
        self.fresh_from = self.index;
        self.reply.text.clear();
    }

    fn artifact(&mut self, artifact: Artifact, append: bool, last_chunk: bool) {
        let key = format!("{}-artifact-{}", self.key, self.own);
        self.own += 1;
        let event = TaskArtifactUpdateEvent {
            task_id: self.turn.task_id.clone(),
            context_id: self.turn.context_id.clone(),
            artifact: artifact.clone(),
            append,
            last_chunk,
            metadata: None,
        };
        self.queue(key, StreamResponse::ArtifactUpdate(event));
        merge_artifact(&mut self.reply.artifacts, artifact, append);
    }

    /// Queues the events the workflow handed over, first; a participants change one carries
    /// is made before, as `emit_event` makes it (a reader that sees the event may rely on it).
    async fn hand(&mut self, store: &Store, before: &[crate::EmitInput]) -> Result<(), ActivityError> {
        for participants in before.iter().filter_map(|i| i.participants.as_ref()) {
            store.set_participants(&self.turn.task_id, participants).await.map_err(store_failure)?;
        }
        self.queued.extend(before.iter().cloned().map(super::emit_event::new_event));
        Ok(())
    }

    fn queue(&mut self, key: String, event: StreamResponse) {
        self.queued.push(NewEvent::new(self.turn.task_id.clone(), key, event, self.turn.task_queue.clone()));
    }

    /// Appends the queued events in one transaction; the last one's seq, if there were any.
    async fn write(&mut self, store: &Store) -> Result<Option<i64>, ActivityError> {
        if self.queued.is_empty() {
            return Ok(None);
        }
        let appended = store.append_all(&self.queued).await.map_err(store_failure)?;
        // A handed status event (the Task's push configs, S14), as `emit_event` delivers it.
        if let Some(pusher) = self.pusher {
            for (event, appended) in self.queued.iter().zip(&appended).filter(|(_, a)| a.pushes) {
                pusher.deliver(&event.task_id, &event.event, appended.seq).await;
            }
        }
        self.queued.clear();
        Ok(appended.last().map(|a| a.seq))
    }
}

/// The conversation up to this turn's message, at most the provider's window of it: the
/// turn's own messages, after what the store has of the rest.
async fn conversation(store: &Store, window: Option<usize>, turn: &ModelTurn) -> Result<Vec<Message>, ActivityError> {
    let wanted = window.unwrap_or(usize::MAX);
    let given = &turn.history[turn.history.len().saturating_sub(wanted)..];
    let before = wanted - given.len();
    if before == 0 || turn.history_from == 0 {
        return Ok(given.to_vec());
    }
    let mut history = store
        .history(&turn.task_id, i64::from(turn.history_from), window.map(|_| before))
        .await
        .map_err(|e| ActivityError::application(ApplicationFailure::new(e)))?;
    history.extend_from_slice(given);
    Ok(history)
}

/// The conversation as the model reads it: without slash commands and their replies (S9),
/// nor the workflow's answers to messages that took no turn.
/// An A2UI action or renderer error reads as one line of text naming it (issue 30).
fn for_the_model(mut history: Vec<Message>) -> Vec<Message> {
    let keys = [crate::command_ext_key(), crate::answer_ext_key()];
    history.retain(|m| !m.metadata.as_ref().is_some_and(|md| keys.iter().any(|k| md.contains_key(k))));
    for m in &mut history {
        for part in &mut m.parts {
            if let Some(line) = harness_workflow::a2ui::model_line(part) {
                *part = Part::text(line);
            }
        }
    }
    history
}

/// Adds an artifact update to the artifacts of a reply: appended parts join the artifact
/// with the same id, anything else replaces or adds it.
fn merge_artifact(artifacts: &mut Vec<Artifact>, artifact: Artifact, append: bool) {
    match artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
        Some(existing) if append => existing.parts.extend(artifact.parts),
        Some(existing) => *existing = artifact,
        None => artifacts.push(artifact),
    }
}

fn store_failure(e: StoreError) -> ActivityError {
    match e {
        // The task ended under us (cancel, control): stop streaming.
        StoreError::Closed(_) => task_ended(),
        e => ActivityError::application(ApplicationFailure::new(e)),
    }
}

fn model_failure(e: crate::models::ModelError) -> ActivityError {
    let failure = if e.retryable { ApplicationFailure::new(e) } else { ApplicationFailure::non_retryable(e) };
    ActivityError::application(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(history: &[&str], history_from: u32) -> ModelTurn {
        ModelTurn {
            task_id: "t".into(),
            context_id: "c".into(),
            task_queue: "q".into(),
            model: "any".into(),
            turn: 3,
            artifact_id: "reply-3".into(),
            history: history.iter().map(|id| Message::agent_text(*id, *id)).collect(),
            history_from,
            reasoning_effort: None,
            round: 0,
            exchanges: Vec::new(),
            trace: None,
            before: Vec::new(),
            end: None,
        }
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.message_id.as_str()).collect()
    }

    /// A turn reads the conversation before its own messages from the store, as much of it
    /// as the provider's window asks for.
    #[tokio::test]
    async fn a_turn_reads_what_its_input_lacks_from_the_store_up_to_the_providers_window() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}", dir.path().join("s.db").display())).await.unwrap();
        let stored: Vec<Message> = ["m0", "m1", "m2", "m3"].iter().map(|id| Message::agent_text(*id, *id)).collect();
        let event =
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent { task_id: "t".into(), ..Default::default() });
        store.append(&NewEvent { history: stored, ..NewEvent::new("t", "k", event, "q") }).await.unwrap();

        let whole = conversation(&store, None, &turn(&["m4"], 4)).await.unwrap();
        assert_eq!(ids(&whole), ["m0", "m1", "m2", "m3", "m4"]);
        let window = conversation(&store, Some(3), &turn(&["m4"], 4)).await.unwrap();
        assert_eq!(ids(&window), ["m2", "m3", "m4"]);
        // A message the store does not have yet (a turn without WORKING) comes in the input.
        let two_given = conversation(&store, Some(3), &turn(&["m3", "m4"], 3)).await.unwrap();
        assert_eq!(ids(&two_given), ["m2", "m3", "m4"]);
        // The turn's message alone: nothing read. A turn from an older worker carries it all.
        assert_eq!(ids(&conversation(&store, Some(1), &turn(&["m4"], 4)).await.unwrap()), ["m4"]);
        let old = conversation(&store, None, &turn(&["x0", "x1"], 0)).await.unwrap();
        assert_eq!(ids(&old), ["x0", "x1"]);
    }

    /// S9: the model reads neither a command, nor its reply, nor the workflow's answer to a
    /// message that took no turn; everything else it reads in order.
    #[test]
    fn the_model_never_reads_a_command_or_an_answer() {
        let marked = |id: &str, key: String| {
            let mut m = Message::agent_text(id, id);
            m.metadata = Some(a2a_types::Struct::from_iter([(key, serde_json::json!({"name": "status"}))]));
            m
        };
        let history = vec![
            Message::agent_text("hello", "hello"),
            marked("/status", crate::command_ext_key()),
            marked("status reply", crate::command_ext_key()),
            marked("updated the task", crate::answer_ext_key()),
            marked("[status_update] framed", crate::event_ext_key()),
            Message::agent_text("next", "next"),
        ];
        assert_eq!(ids(&for_the_model(history)), ["hello", "[status_update] framed", "next"]);
    }
}
