//! The inbox audit (S5): every incoming message is written here before it is
//! acknowledged, refused ones included, with the outcome.

use crate::conn::{Conn, Row};
use crate::{Store, StoreError, now};
use a2a_types::Message;
use sqlx::Row as _;

/// An audit row's outcome: $1 the request id, $2 the outcome, $3 the receipt's cursor.
pub(crate) const SET_OUTCOME: &str = "UPDATE inbox SET outcome = $2, receipt_cursor = $3 WHERE request_id = $1";

/// What happened to an inbox item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InboxOutcome {
    /// Written, not yet delivered to the workflow.
    Received,
    /// The workflow's inbox accepted it; its receipt's cursor (the log's newest seq then: the
    /// events it caused come after it), so a retry is answered from the store.
    Accepted(i64),
    /// Refused, with the reason given to the client.
    Refused(String),
}

impl InboxOutcome {
    pub(crate) fn as_text(&self) -> String {
        match self {
            Self::Received => "received".into(),
            Self::Accepted(_) => "accepted".into(),
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

/// An earlier audit row of the same message (same sender and `messageId`), found when the
/// message comes again: a client's retry (S5, docs/event-log.md).
#[derive(Clone, Debug, PartialEq)]
pub struct PriorMessage {
    pub task_id: String,
    pub outcome: String,
    /// The receipt's cursor when the workflow accepted it.
    pub cursor: Option<i64>,
    /// The message as audited (redacted, ids set).
    pub body: String,
}

impl PriorMessage {
    /// The workflow accepted it.
    pub fn accepted(&self) -> bool {
        self.outcome == "accepted"
    }
}

/// How much of a refused message's body its audit row keeps: a refusal (a body over a limit
/// among them) must not cost the store what it refused.
pub const REFUSED_EXCERPT: usize = 4096;

impl Store {
    /// Writes the audit row of an incoming (already redacted) message from `sender` (''
    /// when anonymous). A refused message keeps an excerpt of its body ([`REFUSED_EXCERPT`]).
    pub async fn record_inbox(
        &self,
        request_id: &str,
        task_id: &str,
        message: &Message,
        outcome: InboxOutcome,
        sender: &str,
    ) -> Result<(), StoreError> {
        let row = inbox_row(request_id, task_id, message, outcome)?;
        let sender = sender.to_string();
        statement!(self, move |conn| {
            insert_inbox(conn, row, &sender, None).await?;
            Ok(())
        })
        .await
    }

    /// The first message of a new task: its audit row (received) and the task's first
    /// participants, in one transaction, so a new task costs one write before delivery.
    /// `opens` (`<sender>\n<messageId>`, an identified sender's claim) is unique among opening
    /// messages: when a row has it already (a retried first message, even one racing the
    /// first attempt), nothing is written and that row is returned, naming the task the first
    /// attempt opened. Without a claim (an anonymous sender) the message always opens its task.
    pub async fn record_new_task_inbox(
        &self,
        request_id: &str,
        task_id: &str,
        message: &Message,
        participants: &[(String, String)],
        sender: &str,
        opens: Option<&str>,
    ) -> Result<Option<PriorMessage>, StoreError> {
        let row = inbox_row(request_id, task_id, message, InboxOutcome::Received)?;
        let (task_id, participants) = (task_id.to_string(), participants.to_vec());
        let (sender, opens) = (sender.to_string(), opens.map(str::to_string));
        transaction!(self, move |conn| {
            let inserted = insert_inbox(&mut *conn, row, &sender, opens.as_deref()).await?;
            if let Some(opens) = opens.filter(|_| !inserted) {
                let prior = conn
                    .fetch_one(
                        "SELECT task_id, outcome, receipt_cursor, body FROM inbox WHERE opens = $1",
                        args![&opens],
                    )
                    .await?;
                return Ok(Some(prior_at(&prior, 0)?));
            }
            crate::participants::insert_participants(&mut *conn, &task_id, participants).await?;
            Ok(None)
        })
        .await
    }

    /// The audit row of an earlier delivery of `message_id` to `task_id`: the accepted one
    /// when there is one, else the newest.
    pub async fn prior_message(&self, task_id: &str, message_id: &str) -> Result<Option<PriorMessage>, StoreError> {
        let rows = self
            .read_rows(
                "SELECT task_id, outcome, receipt_cursor, body FROM inbox WHERE task_id = $1 AND message_id = $2 \
                 ORDER BY received_at, request_id",
                args![task_id, message_id],
            )
            .await?;
        let rows = rows.iter().map(|r| prior_at(r, 0)).collect::<Result<Vec<_>, _>>()?;
        Ok(accepted_else_newest(rows))
    }

    /// A task's head and the audit row of an earlier delivery of `message_id` to it, as
    /// [`Store::task_head`] and [`Store::prior_message`] read them, in one read: what a
    /// message to a task is admitted by (one statement less per message, issue 31).
    pub async fn head_and_prior(
        &self,
        task_id: &str,
        message_id: &str,
    ) -> Result<(Option<crate::TaskHead>, Option<PriorMessage>), StoreError> {
        let rows = self
            .read_rows_of_message(
                "SELECT t.state, t.context_id, t.last_seq, t.task_queue, t.rewrites, t.rewrote_from, \
                 i.task_id, i.outcome, i.receipt_cursor, i.body FROM tasks t \
                 LEFT JOIN inbox i ON i.task_id = t.task_id AND i.message_id = $2 \
                 WHERE t.task_id = $1 AND t.snapshot <> '' ORDER BY i.received_at, i.request_id",
                args![task_id, message_id],
            )
            .await?;
        let Some(first) = rows.first() else { return Ok((None, None)) };
        let head = crate::reads::head_of(first)?;
        let mut priors = Vec::new();
        for r in &rows {
            if r.opt_text(6)?.is_some() {
                priors.push(prior_at(r, 6)?);
            }
        }
        Ok((Some(head), accepted_else_newest(priors)))
    }

    /// Records what happened to an audited message.
    pub async fn set_inbox_outcome(&self, request_id: &str, outcome: InboxOutcome) -> Result<(), StoreError> {
        let cursor = match outcome {
            InboxOutcome::Accepted(cursor) => Some(cursor),
            _ => None,
        };
        let (request_id, outcome) = (request_id.to_string(), outcome.as_text());
        statement!(self, move |conn| {
            conn.execute(SET_OUTCOME, args![&request_id, &outcome, cursor]).await?;
            Ok(())
        })
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
    let mut body = serde_json::to_string(message)?;
    if matches!(outcome, InboxOutcome::Refused(_)) && body.len() > REFUSED_EXCERPT {
        body = refused_excerpt(&body);
    }
    Ok([request_id.to_string(), task_id.to_string(), message.message_id.clone(), now(), outcome.as_text(), body])
}

/// What a refused body over [`REFUSED_EXCERPT`] bytes leaves in its audit row: its first
/// bytes (cut at a character boundary), its length and its SHA-256, as JSON.
fn refused_excerpt(body: &str) -> String {
    use sha2::Digest;
    let mut end = REFUSED_EXCERPT;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    let digest = sha2::Sha256::digest(body.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    serde_json::json!({"excerpt": &body[..end], "bytes": body.len(), "sha256": hex}).to_string()
}

/// A row's audit columns from `first` on: task_id, outcome, receipt_cursor, body.
fn prior_at(r: &Row, first: usize) -> Result<PriorMessage, StoreError> {
    Ok(PriorMessage {
        task_id: r.text(first)?.into_owned(),
        outcome: r.text(first + 1)?.into_owned(),
        cursor: r.opt_int(first + 2)?,
        body: r.text(first + 3)?.into_owned(),
    })
}

/// Of a message's audit rows, oldest first: the accepted one when there is one, else the
/// newest.
fn accepted_else_newest(mut rows: Vec<PriorMessage>) -> Option<PriorMessage> {
    match rows.iter().position(PriorMessage::accepted) {
        Some(i) => Some(rows.swap_remove(i)),
        None => rows.pop(),
    }
}

/// Inserts an audit row; with `opens`, only when no row has it yet (returns whether it did).
async fn insert_inbox(
    conn: &mut Conn<'_>,
    row: [String; 6],
    sender: &str,
    opens: Option<&str>,
) -> Result<bool, StoreError> {
    let [request_id, task_id, message_id, received_at, outcome, body] = &row;
    let done = conn
        .execute(
            "INSERT INTO inbox (request_id, task_id, message_id, received_at, outcome, body, sender, opens) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (opens) WHERE opens IS NOT NULL DO NOTHING",
            args![request_id, task_id, message_id, received_at, outcome, body, sender, opens],
        )
        .await?;
    Ok(done == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    on_both!(a_new_tasks_audit_row_and_participants_are_written_together_or_not_at_all, new_task_inbox);
    on_both!(a_retried_first_message_finds_the_task_its_first_attempt_opened, retried_first_message);
    on_both!(a_tasks_head_and_an_earlier_delivery_read_together_are_what_each_read_finds, head_and_prior);

    /// A database written before migration 10 (every audit row in `inbox_opens`, NULLs too)
    /// keeps its rows and its claims through it: a retried first message audited before
    /// the upgrade still finds its task, and anonymous first messages still open their own.
    #[tokio::test]
    async fn audit_rows_and_claims_written_before_the_leaner_indexes_survive_them_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("s.db").display());
        audit_rows_survive_the_upgrade(&url).await;
    }

    #[tokio::test]
    async fn audit_rows_and_claims_written_before_the_leaner_indexes_survive_them_on_postgres() {
        audit_rows_survive_the_upgrade(&crate::testing::fresh_postgres_database().await.unwrap()).await;
    }

    async fn audit_rows_survive_the_upgrade(url: &str) {
        crate::install_default_drivers();
        let pool = sqlx::AnyPool::connect(url).await.unwrap();
        let mut before = sqlx::migrate!("./migrations");
        before.migrations = before.migrations.iter().filter(|m| m.version < 10).cloned().collect::<Vec<_>>().into();
        before.run(&pool).await.unwrap();
        for (request, opens) in [("r1", Some("alice\nm1")), ("r2", None), ("r3", None)] {
            sqlx::query(
                "INSERT INTO inbox (request_id, task_id, message_id, received_at, outcome, body, sender, opens) \
                 VALUES ($1, $2, 'm1', '2026-01-01T00:00:00Z', 'accepted', '{}', '', $3)",
            )
            .bind(request)
            .bind(format!("t-{request}"))
            .bind(opens)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
        let store = Store::connect(url).await.unwrap();
        let m = Message::agent_text("m1", "hi");
        let agent = [("agent".to_string(), "assignee".to_string())];
        let prior = store.record_new_task_inbox("r4", "t4", &m, &agent, "alice", Some("alice\nm1")).await.unwrap();
        assert_eq!(prior.map(|p| p.task_id), Some("t-r1".to_string()), "the claim made before the upgrade holds");
        assert_eq!(store.record_new_task_inbox("r5", "t5", &m, &agent, "", None).await.unwrap(), None);
        assert_eq!(store.inbox_of_message("m1").await.unwrap().len(), 4, "the old rows and the new one");
        assert_eq!(store.inbox_of("t-r2").await.unwrap()[0].outcome, "accepted");
    }

    async fn new_task_inbox(store: Store) {
        let m = a2a_types::Message::agent_text("m1", "hi");
        let first = [("agent".to_string(), "assignee".to_string()), ("alice".to_string(), "reporter".to_string())];
        assert_eq!(store.record_new_task_inbox("r1", "t", &m, &first, "alice", Some("alice\nm1")).await.unwrap(), None);
        let rows = store.inbox_of("t").await.unwrap();
        assert_eq!((rows.len(), rows[0].outcome.as_str()), (1, "received"));
        assert_eq!(store.participant_role("t", "alice").await.unwrap().as_deref(), Some("reporter"));
        assert_eq!(store.participant_role("t", "agent").await.unwrap().as_deref(), Some("assignee"));
        // A refused audit row (the request id is taken) takes its participants with it.
        let err = store
            .record_new_task_inbox("r1", "t", &m, &[("mallory".into(), "reporter".into())], "", Some("\nm1"))
            .await;
        let err = err.unwrap_err().to_string();
        assert!(err.contains("UNIQUE") || err.contains("unique") || err.contains("duplicate"), "{err}");
        assert_eq!(store.participant_role("t", "mallory").await.unwrap(), None);
        assert_eq!(store.inbox_of("t").await.unwrap().len(), 1);
    }

    async fn retried_first_message(store: Store) {
        let m = Message::agent_text("m1", "hi");
        let agent = [("agent".to_string(), "assignee".to_string())];
        assert_eq!(
            store.record_new_task_inbox("r1", "t1", &m, &agent, "alice", Some("alice\nm1")).await.unwrap(),
            None
        );
        // The same sender and id again (a retry, or a race with the first attempt): the row
        // of the first names its task, and nothing is written.
        let prior =
            store.record_new_task_inbox("r2", "t2", &m, &agent, "alice", Some("alice\nm1")).await.unwrap().unwrap();
        assert_eq!((prior.task_id.as_str(), prior.accepted(), prior.cursor), ("t1", false, None));
        assert_eq!(store.participant_role("t2", "agent").await.unwrap(), None, "the retry opened nothing");
        // Another sender's message with the same id opens its own task.
        assert_eq!(store.record_new_task_inbox("r3", "t3", &m, &agent, "bob", Some("bob\nm1")).await.unwrap(), None);
        // An anonymous sender makes no claim: each of its first messages opens its own task.
        for (request, task) in [("r8", "t8"), ("r9", "t9")] {
            assert_eq!(store.record_new_task_inbox(request, task, &m, &agent, "", None).await.unwrap(), None);
            assert_eq!(store.participant_role(task, "agent").await.unwrap().as_deref(), Some("assignee"));
        }
        store.set_inbox_outcome("r1", crate::InboxOutcome::Accepted(0)).await.unwrap();
        let prior =
            store.record_new_task_inbox("r4", "t4", &m, &agent, "alice", Some("alice\nm1")).await.unwrap().unwrap();
        assert_eq!((prior.task_id.as_str(), prior.accepted(), prior.cursor), ("t1", true, Some(0)));
        // A follow-up's earlier delivery, the accepted one first.
        store
            .record_inbox("r5", "t1", &Message::agent_text("m2", "x"), crate::InboxOutcome::Received, "")
            .await
            .unwrap();
        store.set_inbox_outcome("r5", crate::InboxOutcome::Accepted(4)).await.unwrap();
        store
            .record_inbox("r6", "t1", &Message::agent_text("m2", "x"), crate::InboxOutcome::Received, "")
            .await
            .unwrap();
        let prior = store.prior_message("t1", "m2").await.unwrap().unwrap();
        assert_eq!((prior.accepted(), prior.cursor), (true, Some(4)));
        assert_eq!(store.prior_message("t1", "m9").await.unwrap(), None);
        // A refused body keeps an excerpt, its length and digest, not the whole of it.
        let big = Message::agent_text("m3", "x".repeat(100_000));
        store.record_inbox("r7", "t1", &big, crate::InboxOutcome::Refused("too big".into()), "").await.unwrap();
        let row = store.inbox_of("t1").await.unwrap().into_iter().find(|r| r.request_id == "r7").unwrap();
        let body: serde_json::Value = serde_json::from_str(&row.body).unwrap();
        assert!(row.body.len() < 2 * crate::REFUSED_EXCERPT, "{}", row.body.len());
        assert_eq!(body["bytes"].as_u64(), Some(serde_json::to_string(&big).unwrap().len() as u64));
        assert_eq!(body["sha256"].as_str().map(str::len), Some(64));
    }

    /// What admission reads of a message to a task in one statement is what the head and
    /// the earlier-delivery reads find apart: no head for a task whose log has not begun
    /// (its audit rows notwithstanding) or that does not exist; the accepted delivery of the
    /// messageId when there is one, else the newest; none for a messageId not seen.
    async fn head_and_prior(store: Store) {
        let m = Message::agent_text("m1", "hi");
        store.record_inbox("r0", "t", &m, crate::InboxOutcome::Refused("early".into()), "").await.unwrap();
        assert_eq!(store.head_and_prior("t", "m1").await.unwrap(), (None, None), "no log yet");
        assert_eq!(store.head_and_prior("nowhere", "m1").await.unwrap(), (None, None));
        store.append(&opened("t", "c", "2026-01-01T00:00:00Z", "q")).await.unwrap();
        let (head, prior) = together_as_apart(&store, "m1").await;
        assert_eq!(head.map(|h| h.context_id), Some("c".to_string()));
        assert_eq!(prior.map(|p| (p.accepted(), p.cursor)), Some((false, None)), "the refused one, the only one");
        assert_eq!(together_as_apart(&store, "m9").await.1, None);
        store.record_inbox("r1", "t", &m, crate::InboxOutcome::Received, "").await.unwrap();
        store.set_inbox_outcome("r1", crate::InboxOutcome::Accepted(3)).await.unwrap();
        store.record_inbox("r2", "t", &m, crate::InboxOutcome::Refused("later".into()), "").await.unwrap();
        let (_, prior) = together_as_apart(&store, "m1").await;
        assert_eq!(prior.map(|p| (p.accepted(), p.cursor)), Some((true, Some(3))), "the accepted one, not the newest");
    }

    async fn together_as_apart(store: &Store, id: &str) -> (Option<crate::TaskHead>, Option<PriorMessage>) {
        let apart = (store.task_head("t").await.unwrap(), store.prior_message("t", id).await.unwrap());
        let together = store.head_and_prior("t", id).await.unwrap();
        assert_eq!(together, apart, "messageId {id}");
        together
    }
}
