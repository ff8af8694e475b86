//! The event log as a stream (D1, S10): read in order from a cursor, woken by appends,
//! ended with `Unavailable` when a crash cut back what it delivered.

use super::{HarnessHandler, store_error};
use a2a_server::{EventStream, StreamItem};
use a2a_types::{A2AError, ErrorKind, StreamResponse, Task};
use futures::StreamExt;

/// Where a log stream stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopAt {
    /// Terminal or interrupted: a SendMessage stream (S10). A channel echo or a command's
    /// reply in the unchanged state is neither (S9, S12): another participant's does not end
    /// this sender's answer.
    Final,
    /// Terminal only: SubscribeToTask stays attached through INPUT_REQUIRED (S10).
    Terminal,
    /// The event that answers the message with this id (a command's reply, a refused
    /// control's status), or the task's end: the answer to a command or a control.
    Reply(String),
    /// The Task (or a final event): the answer to a brief that opened a task waiting for its
    /// first message (S22).
    Opened,
}

impl StopAt {
    fn reached(&self, e: &StreamResponse) -> bool {
        match self {
            Self::Final => e.is_final() && !is_side_event(e),
            Self::Terminal => e.is_terminal(),
            Self::Reply(id) => e.is_terminal() || answers(e, id),
            Self::Opened => matches!(e, StreamResponse::Task(_)) || (e.is_final() && !is_side_event(e)),
        }
    }
}

/// A status update in the unchanged state beside the turns: a channel echo (S12), a
/// command's reply (S9), a recorded event or a task envelope's answer (S11).
fn is_side_event(e: &StreamResponse) -> bool {
    let StreamResponse::StatusUpdate(u) = e else { return false };
    let keys = [
        "command".to_string(),
        harness_workflow::channel_ext_key(),
        harness_workflow::event_ext_key(),
        harness_workflow::task_ext_key(),
    ];
    u.metadata.as_ref().is_some_and(|m| keys.iter().any(|k| m.contains_key(k)))
}

/// Whether a status update answers the message `id`: its status message is marked
/// `inReplyTo` it (a command's reply, a refused control, a task envelope's update), or it
/// records that message itself (an event envelope, S11).
fn answers(e: &StreamResponse, id: &str) -> bool {
    let StreamResponse::StatusUpdate(u) = e else { return false };
    let Some(message) = u.status.message.as_ref() else { return false };
    let records = u.metadata.as_ref().is_some_and(|m| m.contains_key(&harness_workflow::event_ext_key()));
    if records && message.message_id == id {
        return true;
    }
    let Some(md) = message.metadata.as_ref() else { return false };
    [harness_workflow::command_ext_key(), harness_workflow::answer_ext_key()]
        .iter()
        .filter_map(|k| md.get(k))
        .any(|mark| harness_workflow::marked_reply_to(mark) == Some(id))
}

/// The SSE id of the event at `seq` of a log cut back `epoch` times (issue 34): the seq
/// alone while the log was never cut (what every client saw before), `<seq>.<epoch>` after,
/// so a `Last-Event-ID` says which bodies its sender holds.
pub(super) fn event_id(seq: i64, epoch: i64) -> String {
    if epoch == 0 { seq.to_string() } else { format!("{seq}.{epoch}") }
}

/// The seq and epoch of an id [`event_id`] made; `None` for anything else.
pub(super) fn parse_event_id(text: &str) -> Option<(i64, i64)> {
    let (seq, epoch) = text.split_once('.').unwrap_or((text, "0"));
    let number = |n: &str| n.parse::<i64>().ok().filter(|n| *n >= 0);
    Some((number(seq)?, number(epoch)?))
}

impl HarnessHandler {
    /// Reads the log of a task from `after`, in order, until `stop` (D1), each event with
    /// its SSE id.
    pub fn log_stream(&self, task_id: String, after: i64, stop: StopAt) -> EventStream {
        self.read_log(task_id, after, stop, true)
    }

    /// [`Self::log_stream`] for an answer built from the log's end (a blocking SendMessage,
    /// CancelTask): its events carry no id, so the log's epoch is not read (one statement
    /// less per blocking message, issue 31), and a crash's cut past `after` is read through
    /// rather than ending the answer with `Unavailable`: none of what was cut was sent.
    pub(super) fn log_to_answer(&self, task_id: String, after: i64, stop: StopAt) -> EventStream {
        self.read_log(task_id, after, stop, false)
    }

    /// `streamed`: each event goes to the client as it is read (with its SSE id), so a cut
    /// behind what was read ends the stream; else the events only build an answer.
    fn read_log(&self, task_id: String, after: i64, stop: StopAt, streamed: bool) -> EventStream {
        let store = self.store.clone();
        let backstop = self.settings.backstop;
        async_stream::stream! {
            // Subscribe before reading so an append between read and wait is not missed.
            let mut wake = store.notifier().subscribe(&task_id);
            let mut rewrites = wake.borrow().rewrites;
            let mut cursor = after;
            // The log's epoch (how often it was cut back), which a streamed event's id
            // carries: read with the events (`None`: with the next ones), in the same read.
            let mut epoch = (!streamed).then_some(0);
            loop {
                let now = *wake.borrow();
                if now.rewrites != rewrites {
                    rewrites = now.rewrites;
                    if streamed {
                        epoch = None;
                    }
                    if !streamed && now.rewound_from > after && now.rewound_from <= cursor {
                        // An answer built from the log's end has sent nothing yet: it reads on
                        // from the cut, where the retried workflow task appends again. (A cut
                        // at or before where it began would reach what Temporal committed.)
                        cursor = now.rewound_from - 1;
                    } else if now.rewound_from <= cursor {
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
                let read = match epoch {
                    Some(epoch) => store.events_after(&task_id, cursor, harness_store::LOG_PAGE).await.map(|b| (b, epoch)),
                    None => store.events_after_in_epoch(&task_id, cursor, harness_store::LOG_PAGE).await,
                };
                let (batch, at) = match read {
                    Ok(read) => read,
                    Err(e) => {
                        yield Err(store_error(e));
                        return;
                    }
                };
                epoch = Some(at);
                let empty = batch.is_empty();
                for logged in batch {
                    cursor = logged.seq;
                    let end = stop.reached(&logged.event);
                    yield Ok(StreamItem::Event { id: streamed.then(|| event_id(logged.seq, at)), event: logged.event });
                    if end {
                        return;
                    }
                }
                if empty {
                    // Woken by appends in this process and, on Postgres, in every other
                    // (LISTEN/NOTIFY); the backstop only makes up for a lost wake-up.
                    let _ = tokio::time::timeout(backstop, wake.changed()).await;
                }
            }
        }
        .boxed()
    }

    /// A blocking SendMessage's answer from the log after its receipt's `after`: the status
    /// the log ends at, and the task's row when it was read with the log. The log and the
    /// row are one read (`read`, when the delivery read them with the audit row's outcome)
    /// and used when the log already holds the event it stops at (an instant model's turn
    /// ends in the workflow task that accepted the message: issue 31, one read less per
    /// message); else the log is read on as a stream from `after` (woken by appends, read
    /// through a crash's cut) and the row is left to be read at its end.
    pub(super) async fn answer_at_end(
        &self,
        task_id: String,
        after: i64,
        stop: StopAt,
        history_length: Option<i32>,
        read: Option<super::pending::LogAndRow>,
    ) -> Result<(Option<a2a_types::TaskStatus>, Option<harness_store::TaskRow>), A2AError> {
        let (events, row) = match read {
            Some(read) => read,
            None => self
                .store
                .log_and_task(&task_id, Some(after), self.answer_history(history_length), self.answer_artifacts())
                .await
                .map_err(store_error)?,
        };
        let mut status = None;
        for logged in events {
            let end = stop.reached(&logged.event);
            status = status_of(logged.event).or(status);
            if end {
                let row = row.ok_or_else(|| A2AError::task_not_found(&task_id))?;
                return Ok((status, Some(row)));
            }
        }
        Ok((final_status(self.log_to_answer(task_id, after, stop)).await?, None))
    }

    /// Reads a task's log to its end (`events` stops where it should), then answers with
    /// the stored task and the status the log ended at.
    pub(super) async fn task_at_end(
        &self,
        task_id: &str,
        events: EventStream,
        history_length: Option<i32>,
    ) -> Result<Task, A2AError> {
        let status = final_status(events).await?;
        self.task_with_status(task_id, status, history_length, None).await
    }

    /// The stored task (the snapshot written with a SendMessage's final event) with the
    /// newest `history_length` messages, and the status that SendMessage's log ended at:
    /// `read`, the row read with the log, else read now.
    pub(super) async fn task_with_status(
        &self,
        task_id: &str,
        status: Option<a2a_types::TaskStatus>,
        history_length: Option<i32>,
        read: Option<harness_store::TaskRow>,
    ) -> Result<Task, A2AError> {
        let row = match read {
            Some(row) => Some(row),
            None => self.answer_row(task_id, history_length).await?,
        };
        let mut task = row.map(|r| r.task).ok_or_else(|| A2AError::task_not_found(task_id))?;
        // The answer's status is the one the stream ended at: a retried message's own final
        // status, even when later turns have run since.
        if let Some(status) = status {
            task.status = status;
        }
        Ok(task)
    }
}

/// The status a SendMessage's log ends at (`None`: it ended without one).
pub(super) async fn final_status(mut events: EventStream) -> Result<Option<a2a_types::TaskStatus>, A2AError> {
    let mut last = None;
    while let Some(event) = events.next().await {
        last = event?.into_event().and_then(status_of).or(last);
    }
    Ok(last)
}

/// The status an event carries: a Task's or a status update's.
pub(super) fn status_of(event: StreamResponse) -> Option<a2a_types::TaskStatus> {
    match event {
        StreamResponse::StatusUpdate(u) => Some(u.status),
        StreamResponse::Task(t) => Some(t.status),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::{Message, TaskState, TaskStatus, TaskStatusUpdateEvent};

    fn update(state: TaskState, message: Option<Message>, key: Option<String>) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            status: TaskStatus { state, message, timestamp: None },
            metadata: key.map(|k| a2a_types::Struct::from_iter([(k, serde_json::json!({}))])),
            ..Default::default()
        })
    }

    fn reply_to(id: &str, key: String) -> Message {
        let mut m = Message::agent_text("r", "reply");
        m.metadata = Some(a2a_types::Struct::from_iter([(key, harness_workflow::reply_mark(id))]));
        m
    }

    /// Issue 18: another participant's echo, command reply, recorded event or task update in a
    /// parked task ends no one's SendMessage; each ends the answer to its own message.
    #[test]
    fn side_events_end_only_the_answer_to_their_own_message() {
        let parked = TaskState::InputRequired;
        let side = [
            update(parked, Some(Message::agent_text("m1", "hi")), Some(harness_workflow::channel_ext_key())),
            update(parked, Some(reply_to("m2", harness_workflow::command_ext_key())), Some("command".into())),
            update(parked, Some(Message::agent_text("m3", "framed")), Some(harness_workflow::event_ext_key())),
            update(
                parked,
                Some(reply_to("m4", harness_workflow::answer_ext_key())),
                Some(harness_workflow::task_ext_key()),
            ),
        ];
        for (e, own) in side.iter().zip(["m1", "m2", "m3", "m4"]) {
            assert!(!StopAt::Final.reached(e), "{e:?}");
            assert!(!StopAt::Reply("other".into()).reached(e), "{e:?}");
            if own != "m1" {
                assert!(StopAt::Reply(own.into()).reached(e), "{e:?} answers {own}");
            }
        }
        let turn_end = update(parked, Some(Message::agent_text("t:reply:1", "echo: hi")), None);
        assert!(StopAt::Final.reached(&turn_end));
        assert!(!StopAt::Reply("m2".into()).reached(&turn_end), "a turn's end answers no command");
        assert!(StopAt::Reply("m2".into()).reached(&update(TaskState::Completed, None, None)), "the task's end does");
    }
}
