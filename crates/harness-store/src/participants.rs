//! Participants of tasks (S13, D4): a task a known caller is not on is, for that caller,
//! not found; ListTasks filters the same way.

use crate::conn::Conn;
use crate::{Store, StoreError};
use sqlx::Row;

impl Store {
    /// Adds participants to a task (an existing one keeps its role).
    pub async fn add_participants(&self, task_id: &str, participants: &[(String, String)]) -> Result<(), StoreError> {
        let (task_id, participants) = (task_id.to_string(), participants.to_vec());
        transaction!(self, move |conn| { insert_participants(conn, &task_id, participants).await }).await
    }

    /// Replaces a task's participants (a task envelope changed them, S11).
    pub async fn set_participants(&self, task_id: &str, participants: &[(String, String)]) -> Result<(), StoreError> {
        let (task_id, participants) = (task_id.to_string(), participants.to_vec());
        transaction!(self, move |conn| {
            conn.execute("DELETE FROM task_participants WHERE task_id = $1", args![&task_id]).await?;
            insert_participants(conn, &task_id, participants).await
        })
        .await
    }

    /// The role of a participant on a task, `None` when not on it.
    pub async fn participant_role(&self, task_id: &str, participant_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT role FROM task_participants WHERE task_id = $1 AND participant_id = $2")
            .bind(task_id)
            .bind(participant_id)
            .fetch_optional(self.reads())
            .await?;
        row.map(|r| r.try_get("role")).transpose().map_err(Into::into)
    }
}

/// The statements of [`Store::add_participants`], for a write that does more.
pub(crate) async fn insert_participants(
    conn: &mut Conn<'_>,
    task_id: &str,
    participants: Vec<(String, String)>,
) -> Result<(), StoreError> {
    for (id, role) in &participants {
        conn.execute(
            "INSERT INTO task_participants (task_id, participant_id, role) VALUES ($1, $2, $3) \
             ON CONFLICT (task_id, participant_id) DO NOTHING",
            args![task_id, id, role],
        )
        .await?;
    }
    Ok(())
}
