//! ListTasks (S19: this agent's queue only) and its page tokens.

use super::{Caller, HarnessHandler, store_error};
use a2a_server::CallContext;
use a2a_types::{A2AError, ListTasksRequest, ListTasksResponse, TaskState, validate};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use harness_store::TaskQuery;

impl HarnessHandler {
    /// ListTasks: this queue's tasks the caller may see, newest status first.
    pub(super) async fn list(&self, ctx: &CallContext, req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        let since = validate::list_tasks(&req)?;
        let participant = match self.caller(ctx, &[]).await? {
            Caller::Participant(id) => Some(id),
            Caller::Anonymous => None,
            // A caller the resolver could not resolve is on no task: it lists none.
            Caller::Unresolved => {
                let page_size = req.page_size.unwrap_or(50);
                return Ok(ListTasksResponse { page_size, ..Default::default() });
            }
        };
        let page_size = req.page_size.unwrap_or(50);
        let after = if req.page_token.is_empty() { None } else { Some(decode_page_token(&req.page_token)?) };
        let query = TaskQuery {
            task_queue: self.task_queue().to_string(),
            context_id: req.context_id.clone(),
            state: req.status.filter(|s| *s != TaskState::Unspecified),
            since,
            after,
            limit: i64::from(page_size),
            participant,
            history_length: req.history_length,
            include_artifacts: req.include_artifacts.unwrap_or(false),
        };
        let page = self.store.list_tasks(&query).await.map_err(store_error)?;
        Ok(ListTasksResponse {
            tasks: page.tasks,
            next_page_token: page.next.map(|(ts, id)| encode_page_token(&ts, &id)).unwrap_or_default(),
            page_size,
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }
}

/// A ListTasks page token: url-safe base64 of `<status timestamp>|<task id>`.
fn encode_page_token(ts: &str, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{ts}|{id}"))
}

fn decode_page_token(token: &str) -> Result<(String, String), A2AError> {
    let bad = || {
        A2AError::invalid_params(format!("invalid params: pageToken `{token}` is not a token this server issued"))
            .with("field", "pageToken")
    };
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (ts, id) = text.split_once('|').ok_or_else(bad)?;
    Ok((ts.to_string(), id.to_string()))
}
