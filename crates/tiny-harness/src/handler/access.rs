//! Who is calling and what they may do with a task (S13, S17, S19, D4): the caller from
//! the resolver, a header or metadata; the participant roles; the ownership of a task by
//! this agent's queue, cached for ids the store does not know.

use super::{HarnessHandler, store_error};
use a2a_server::CallContext;
use a2a_types::A2AError;

/// Resolves who is calling from a request (S17). When a host gives one, it is the only
/// source of the participant: `X-Participant-Id` and `metadata.participant_id` are ignored.
#[async_trait::async_trait]
pub trait ParticipantResolver: Send + Sync + 'static {
    /// The caller's participant id; `Ok(None)` when this request has none. An error fails
    /// the request.
    async fn resolve(&self, headers: &axum::http::HeaderMap) -> Result<Option<String>, String>;
}

/// Who is calling (S13, D4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// No participant known and no resolver: sees tasks unfiltered, its messages are
    /// ordinary messages (D4).
    Anonymous,
    /// A resolver is configured (the host authenticates) and resolved no participant: a
    /// stranger to every task. Its messages are refused, it sees no task and may not act on
    /// one (issue 28).
    Unresolved,
    Participant(String),
}

impl Caller {
    /// The participant id, when one is known.
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::Participant(id) => Some(id),
            Self::Anonymous | Self::Unresolved => None,
        }
    }
}

/// A participant's role on a task (EXTENSIONS.md, task), as the store keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The agent that does the task: this agent, on its own tasks.
    Assignee,
    /// Who asked for the task.
    Reporter,
    /// Who follows the task; may read it but not cancel it.
    Watcher,
    /// A role this version does not name: treated as a participant who may act.
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Assignee => "assignee",
            Self::Reporter => "reporter",
            Self::Watcher => "watcher",
            Self::Other => "participant",
        }
    }

    fn parse(s: &str) -> Self {
        [Self::Assignee, Self::Reporter, Self::Watcher].into_iter().find(|r| r.as_str() == s).unwrap_or(Self::Other)
    }
}

/// What a caller wants to do with a task, for the access policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Cancel,
}

impl HarnessHandler {
    /// The caller (S13, S17, D4): the resolver's answer when there is a resolver (a
    /// resolver error fails the request); else `X-Participant-Id`, else the message's or the
    /// request's `metadata.participant_id`.
    pub(crate) async fn caller(
        &self,
        ctx: &CallContext,
        metadata: &[Option<&a2a_types::Struct>],
    ) -> Result<Caller, A2AError> {
        if let Some(resolver) = &self.resolver {
            return match resolver.resolve(&ctx.headers).await {
                Ok(Some(id)) if !id.is_empty() => Ok(Caller::Participant(id)),
                Ok(_) => Ok(Caller::Unresolved),
                Err(e) => Err(A2AError::internal(format!("the participant resolver failed: {e}"))),
            };
        }
        let header = ctx.headers.get("x-participant-id").and_then(|v| v.to_str().ok()).map(str::trim);
        if let Some(id) = header.filter(|id| !id.is_empty()) {
            return Ok(Caller::Participant(id.to_string()));
        }
        let named = metadata
            .iter()
            .flatten()
            .find_map(|m| m.get("participant_id").and_then(|v| v.as_str()).filter(|s| !s.is_empty()));
        Ok(named.map_or(Caller::Anonymous, |id| Caller::Participant(id.to_string())))
    }

    /// S19: does this agent's queue run the task? The store's row says so for every task
    /// whose log has begun; otherwise the workflow is described. The answer is kept per id.
    pub(crate) async fn owned(&self, task_id: &str) -> Result<bool, A2AError> {
        // A task's queue never changes once known: each id is asked once (issue 31).
        if let Some(owned) = self.owners.lock().expect("owners").get(task_id) {
            return Ok(*owned);
        }
        let queue = match self.store.task_queue_of(task_id).await.map_err(store_error)? {
            Some(queue) => queue,
            None => match self.temporal.queue_of(task_id).await? {
                Some(queue) => queue,
                None => return Ok(false),
            },
        };
        let owned = queue == self.task_queue();
        let mut owners = self.owners.lock().expect("owners");
        if owners.len() >= 10_000 {
            owners.clear();
        }
        owners.insert(task_id.to_string(), owned);
        Ok(owned)
    }

    /// The access policy of every task operation (S13, S19): a task on another queue, or
    /// one a known caller is not on, is not found; a watcher may not cancel.
    pub(crate) async fn check_access(&self, caller: &Caller, task_id: &str, access: Access) -> Result<(), A2AError> {
        crate::hosting::record_task_id(task_id);
        if !self.owned(task_id).await? {
            return Err(A2AError::task_not_found(task_id));
        }
        self.check_participant(caller, task_id, access).await
    }

    /// The participant half of the access policy: a known caller must be on the task; a
    /// caller the resolver could not resolve is on none.
    pub(crate) async fn check_participant(
        &self,
        caller: &Caller,
        task_id: &str,
        access: Access,
    ) -> Result<(), A2AError> {
        let id = match caller {
            Caller::Anonymous => return Ok(()),
            Caller::Unresolved => return Err(A2AError::task_not_found(task_id)),
            Caller::Participant(id) => id,
        };
        let role = self.store.participant_role(task_id, id).await.map_err(store_error)?;
        match role.as_deref().map(Role::parse) {
            None => Err(A2AError::task_not_found(task_id)),
            Some(Role::Watcher) if access == Access::Cancel => {
                Err(A2AError::unsupported(format!("participant `{id}` watches task {task_id} and may not cancel it"))
                    .with("taskId", task_id))
            }
            Some(_) => Ok(()),
        }
    }

    /// Push-config calls see a task as GetTask does: it exists on this queue (the ownership
    /// check finds it in the store or in Temporal), and the caller may see it.
    pub(crate) async fn push_access(&self, ctx: &CallContext, task_id: &str) -> Result<(), A2AError> {
        let caller = self.caller(ctx, &[]).await?;
        self.check_access(&caller, task_id, Access::Read).await
    }
}
