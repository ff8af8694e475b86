//! The inbox audit (S5): every incoming message is written here before it is
//! acknowledged, refused ones included, with the outcome.

use crate::{Store, StoreError, now};
use a2a_types::Message;
use sqlx::{AnyConnection, Row};

/// What happened to an inbox item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InboxOutcome {
    /// Written, not yet delivered to the workflow.
    Received,
    /// The workflow's inbox accepted it.
    Accepted,
    /// Refused, with the reason given to the client.
    Refused(String),
}

impl InboxOutcome {
    fn as_text(&self) -> String {
        match self {
            Self::Received => "received".into(),
            Self::Accepted => "accepted".into(),
            Self::Refused(why) => format!("refused: {why}"),
        }
    }
}

/// One audit row.
#[derive(Clone, Debug, PartialEq)]
pub struct InboxRow {
    pub request_id: String,
    pub task_id: String,
    pub message_id: String,
    pub outcome: String,
    pub body: String,
}

impl Store {
    /// Writes the audit row of an incoming (already redacted) message.
    pub async fn record_inbox(
        &self,
        request_id: &str,
        task_id: &str,
        message: &Message,
        outcome: InboxOutcome,
    ) -> Result<(), StoreError> {
        let row = inbox_row(request_id, task_id, message, outcome)?;
        self.write(Box::new(move |conn| Box::pin(async move { insert_inbox(conn, row).await }))).await
    }

    /// The first message of a new task: its audit row (received) and the task's first
    /// participants, in one transaction, so a new task costs one write before delivery.
    pub async fn record_new_task_inbox(
        &self,
        request_id: &str,
        task_id: &str,
        message: &Message,
        participants: &[(String, String)],
    ) -> Result<(), StoreError> {
        let row = inbox_row(request_id, task_id, message, InboxOutcome::Received)?;
        let (task_id, participants) = (task_id.to_string(), participants.to_vec());
        self.write(Box::new(move |conn| {
            Box::pin(async move {
                crate::participants::insert_participants(&mut *conn, &task_id, participants).await?;
                insert_inbox(conn, row).await
            })
        }))
        .await
    }

    /// Records what happened to an audited message.
    pub async fn set_inbox_outcome(&self, request_id: &str, outcome: InboxOutcome) -> Result<(), StoreError> {
        let (request_id, outcome) = (request_id.to_string(), outcome.as_text());
        self.write(Box::new(move |conn| {
            Box::pin(async move {
                sqlx::query("UPDATE inbox SET outcome = $2 WHERE request_id = $1")
                    .bind(request_id)
                    .bind(outcome)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        }))
        .await
    }

    /// The audit rows of a task, oldest first.
    pub async fn inbox_of(&self, task_id: &str) -> Result<Vec<InboxRow>, StoreError> {
        self.inbox_where("task_id", task_id).await
    }

    /// The audit rows of a message id (the id its sender chose), oldest first: where a
    /// message went when its sender never saw the answer. For operators and tests: no index
    /// serves it, so it reads the whole audit table.
    pub async fn inbox_of_message(&self, message_id: &str) -> Result<Vec<InboxRow>, StoreError> {
        self.inbox_where("message_id", message_id).await
    }

    async fn inbox_where(&self, column: &'static str, value: &str) -> Result<Vec<InboxRow>, StoreError> {
        let sql = format!(
            "SELECT request_id, task_id, message_id, outcome, body FROM inbox WHERE {column} = $1 \
             ORDER BY received_at, request_id"
        );
        let rows = sqlx::query(&sql).bind(value).fetch_all(self.reads()).await?;
        rows.iter()
            .map(|r| {
                Ok(InboxRow {
                    request_id: r.try_get("request_id")?,
                    task_id: r.try_get("task_id")?,
                    message_id: r.try_get("message_id")?,
                    outcome: r.try_get("outcome")?,
                    body: r.try_get("body")?,
                })
            })
            .collect()
    }

    /// Every audit row (newest last); used by tests and operators.
    pub async fn inbox_count(&self) -> Result<i64, StoreError> {
        let r = sqlx::query("SELECT COUNT(*) AS n FROM inbox").fetch_one(self.reads()).await?;
        Ok(r.try_get("n")?)
    }
}

fn inbox_row(
    request_id: &str,
    task_id: &str,
    message: &Message,
    outcome: InboxOutcome,
) -> Result<[String; 6], StoreError> {
    Ok([
        request_id.to_string(),
        task_id.to_string(),
        message.message_id.clone(),
        now(),
        outcome.as_text(),
        serde_json::to_string(message)?,
    ])
}

async fn insert_inbox(conn: &mut AnyConnection, row: [String; 6]) -> Result<(), StoreError> {
    let mut insert = sqlx::query(
        "INSERT INTO inbox (request_id, task_id, message_id, received_at, outcome, body) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    );
    for value in row {
        insert = insert.bind(value);
    }
    insert.execute(conn).await?;
    Ok(())
}
