//! A message admitted to its task's inbox and what becomes of it: [`Pending`] while its
//! delivery (update-with-start) runs in a task of its own, [`Accepted`] once the workflow
//! answered (S5). A retry answered from the audit is a `Pending` with its first receipt.

use super::stream::StopAt;
use a2a_types::{A2AError, Message, Task};
use harness_workflow::{ItemKind, Receipt};

/// A message the workflow accepted.
pub(crate) struct Accepted {
    pub task_id: String,
    pub receipt: Receipt,
    /// The accepted message as delivered (redacted, ids set).
    pub message: Message,
    /// The stored snapshot read before delivery, when asked for (a continued task).
    pub before: Option<Task>,
    /// The log from the receipt and the task's row, when read with the outcome.
    pub read: Option<LogAndRow>,
}

/// Events of a task's log and its row, read together.
pub(crate) type LogAndRow = (Vec<harness_store::LoggedEvent>, Option<harness_store::TaskRow>);

/// What a blocking SendMessage's answer reads of the task's row.
pub(crate) struct AnswerRead {
    pub history_length: Option<i32>,
    pub artifacts: harness_store::Artifacts,
}

/// What a SendMessage answers with, which says what it reads before delivering and what
/// its delivery reads with the workflow's receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AnswerBy {
    /// The task as accepted (a stream's first event, `returnImmediately`): the stored
    /// snapshot of a continued task is read before delivering.
    Accepted,
    /// The task at the newest final event (a blocking SendMessage): the delivery reads the
    /// log from the receipt and the task's row as it writes the outcome.
    End,
}

/// What a delivery ends with: the workflow's receipt and, when asked for, the log from it
/// and the task's row, read as the audit row's outcome was written.
pub(crate) struct Delivered {
    pub receipt: Receipt,
    pub read: Option<LogAndRow>,
}

/// A message durable in its task's inbox (S5) whose delivery runs in a task of its own.
pub(crate) struct Pending {
    pub task_id: String,
    pub(super) message: Message,
    pub(super) before: Option<Task>,
    /// The message opened the task: its log starts at seq 1 with the Task.
    pub new_task: bool,
    /// The provider answers it with a direct reply Message (a message that opens a task).
    pub direct: bool,
    /// What the message is (S8, S9): a command's or a control's answer is its own event.
    pub(super) kind: ItemKind,
    /// A brief alone opened a task that waits for its first message (a one-shot): the
    /// answer is the Task.
    pub(super) opened_only: bool,
    /// Update-with-start, then the audit row's outcome (and for a blocking SendMessage the
    /// log and row read with it): they complete even when the caller goes away before them.
    pub(super) delivery: tokio::task::JoinHandle<Result<Delivered, A2AError>>,
}

impl Pending {
    /// A message answered without a delivery: a retry of one the workflow accepted.
    pub(super) fn answered(
        task_id: String,
        message: Message,
        before: Option<Task>,
        new_task: bool,
        direct: bool,
        receipt: Receipt,
    ) -> Self {
        let delivery = tokio::spawn(async move { Ok(Delivered { receipt, read: None }) });
        Self { task_id, message, before, new_task, direct, kind: ItemKind::Message, opened_only: false, delivery }
    }

    /// This pending message as a `kind` (a retried command or control).
    pub(super) fn of_kind(self, kind: ItemKind) -> Self {
        let opened_only = kind == ItemKind::BriefOnly;
        Self { kind, opened_only, ..self }
    }

    /// The client's id of the message.
    pub fn message_id(&self) -> &str {
        &self.message.message_id
    }

    /// Where a SendMessage answering this message stops: at the newest final event, or, for
    /// a command or a control, at the event that answers it (or the task's end).
    pub fn stop_at(&self) -> StopAt {
        match self.kind {
            _ if self.opened_only => StopAt::Opened,
            ItemKind::Message | ItemKind::BriefOnly => StopAt::Final,
            ItemKind::Command { .. } | ItemKind::Control | ItemKind::TaskUpdate { .. } | ItemKind::Record { .. } => {
                StopAt::Reply(self.message.message_id.clone())
            }
        }
    }

    /// Waits for the workflow's answer to the message.
    pub async fn accepted(self) -> Result<Accepted, A2AError> {
        let Delivered { receipt, read } = self
            .delivery
            .await
            .map_err(|e| A2AError::internal(format!("the delivery of the message failed: {e}")))??;
        Ok(Accepted { task_id: self.task_id, receipt, message: self.message, before: self.before, read })
    }
}
