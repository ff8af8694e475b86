//! SendMessage and SendStreamingMessage once the message is admitted: nothing is answered
//! before Temporal committed the message's acceptance (S5).

use super::HarnessHandler;
use super::admission::{Accepted, AnswerBy};
use super::stream::StopAt;
use a2a_server::{CallContext, EventStream, StreamItem};
use a2a_types::{
    A2AError, Message, SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskState, TaskStatus,
};
use futures::StreamExt;

impl HarnessHandler {
    /// SendMessage: blocking, or answered at once with `returnImmediately` (S5).
    pub(super) async fn send(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2AError> {
        let config = req.configuration.clone().unwrap_or_default();
        let by = if config.return_immediately { AnswerBy::Accepted } else { AnswerBy::End };
        let pending = crate::metrics::refusal(self.admit(ctx, req, by).await)?;
        if config.return_immediately {
            let task = self.accepted_task(pending.accepted().await?).await?;
            return Ok(SendMessageResponse::Task(task.with_history_length(self.answer_history(config.history_length))));
        }
        // S5: blocking returns at the newest final event (terminal or INPUT_REQUIRED).
        // S5: nothing is answered before Temporal committed the message's acceptance (the
        // events a workflow task appends before it commits may still be replaced).
        let (task_id, direct, stop) = (pending.task_id.clone(), pending.direct, pending.stop_at());
        let message_id = pending.message_id().to_string();
        let accepted = pending.accepted().await?;
        let (mut status, row) = self
            .answer_at_end(
                accepted.task_id,
                accepted.receipt.cursor,
                stop.clone(),
                config.history_length,
                accepted.read,
            )
            .await?;
        if stop == StopAt::Final {
            status = self.with_own_reply(&task_id, &message_id, status).await?;
        }
        if direct && let Some(reply) = direct_reply(status.as_ref()) {
            return Ok(SendMessageResponse::Message(reply));
        }
        let task = self.task_with_status(&task_id, status, config.history_length, row).await?;
        Ok(SendMessageResponse::Task(task.with_history_length(self.answer_history(config.history_length))))
    }

    /// SendStreamingMessage: the task, then its log until a final event (S10).
    pub(super) async fn send_streaming(
        &self,
        ctx: &CallContext,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2AError> {
        let pending = crate::metrics::refusal(self.admit(ctx, req, AnswerBy::Accepted).await)?;
        let (new_task, direct, stop) = (pending.new_task, pending.direct, pending.stop_at());
        // S5: the stream starts once Temporal committed the message's acceptance.
        let accepted = pending.accepted().await?;
        if direct {
            let id = accepted.task_id;
            return Ok(direct_stream(
                self.log_stream(id.clone(), 0, StopAt::Final),
                self.log_stream(id, 0, StopAt::Final),
            ));
        }
        if new_task {
            // A new task: its log begins with the Task (seq 1).
            return Ok(self.log_stream(accepted.task_id, 0, stop));
        }
        // A continued task: the stream still begins with the Task, the message added.
        let log = self.log_stream(accepted.task_id.clone(), accepted.receipt.cursor, stop);
        let task = self.accepted_task(accepted).await?.with_history_length(self.answer_history(None));
        Ok(futures::stream::once(async move { Ok(StreamItem::from(StreamResponse::Task(task))) }).chain(log).boxed())
    }

    /// The final status a message's answer carries, with the message's own reply: when
    /// messages were queued, the newest final status (S5) is a later turn's, and its
    /// message answers that turn's message; this message's reply is in the history, marked
    /// `inReplyTo` it. (A turn that failed leaves no reply in the history: then the status
    /// stays as it is.)
    async fn with_own_reply(
        &self,
        task_id: &str,
        message_id: &str,
        status: Option<TaskStatus>,
    ) -> Result<Option<TaskStatus>, A2AError> {
        let Some(mut status) = status else { return Ok(None) };
        let key = harness_workflow::reply_ext_key();
        let answered = |m: &Message| {
            let mark = m.metadata.as_ref().and_then(|md| md.get(&key));
            mark.and_then(harness_workflow::marked_reply_to).map(String::from)
        };
        match status.message.as_ref().and_then(answered) {
            Some(id) if id != message_id => {}
            _ => return Ok(Some(status)),
        }
        let row = self.answer_row(task_id, None).await?;
        let own =
            row.and_then(|r| r.task.history.into_iter().rev().find(|m| answered(m).as_deref() == Some(message_id)));
        if let Some(own) = own {
            status.message = Some(a2a_types::Shared::into_inner(own));
        }
        Ok(Some(status))
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
                self.answer_row(&accepted.task_id, None)
                    .await?
                    .map(|r| r.task)
                    .ok_or_else(|| A2AError::task_not_found(&accepted.task_id))?,
                false,
            ),
        };
        if add {
            task.status.state = state;
            task.history.push(accepted.message.into());
        }
        Ok(task)
    }
}

/// The reply Message of a direct turn: the status message it completed with. A turn that
/// ended otherwise (failed, rejected, still asking for input) is answered with its task,
/// which says so; a Message could not.
fn direct_reply(status: Option<&TaskStatus>) -> Option<Message> {
    status.filter(|s| s.state == TaskState::Completed).and_then(|s| s.message.clone())
}

/// A direct reply's stream: the one reply Message once the turn completed (A2A's
/// Message-only stream), else the task's log as any task's stream: `again`, read from its
/// start, so it still begins with the Task. (A log stream reads nothing until polled.)
fn direct_stream(mut log: EventStream, again: EventStream) -> EventStream {
    async_stream::stream! {
        let mut status = None;
        while let Some(event) = log.next().await {
            match event {
                Ok(e) => status = e.into_event().and_then(super::stream::status_of).or(status),
                Err(e) => {
                    yield Err(e);
                    return;
                }
            }
        }
        if let Some(reply) = direct_reply(status.as_ref()) {
            yield Ok(StreamItem::from(StreamResponse::Message(reply)));
            return;
        }
        let mut again = again;
        while let Some(event) = again.next().await {
            yield event;
        }
    }
    .boxed()
}
