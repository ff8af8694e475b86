//! Push-notification configs (S14): validated, their secrets sealed at rest, opened only to
//! answer a caller who may see the task.

use super::{HarnessHandler, store_error};
use a2a_server::CallContext;
use a2a_types::{
    A2AError, ErrorKind, ListTaskPushNotificationConfigsRequest, ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig, TaskPushNotificationConfigRef, validate,
};
use harness_push::PushSecret;
use harness_store::PushRow;

/// A push config validated and sealed, not yet stored.
pub(super) struct SealedPush {
    config: TaskPushNotificationConfig,
    sealed: String,
    /// The client named its id.
    named: bool,
}

impl HarnessHandler {
    /// A config reference's checks: a task id and a config id, on a task the caller may
    /// configure push for.
    async fn push_ref_access(&self, ctx: &CallContext, req: &TaskPushNotificationConfigRef) -> Result<(), A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        if req.id.is_empty() {
            return Err(A2AError::missing_field("id", "the push notification config id is missing"));
        }
        self.push_access(ctx, &req.task_id).await
    }

    pub(super) async fn create_push(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        self.push_access(ctx, &req.task_id).await?;
        let task_id = req.task_id.clone();
        Ok(write_only(self.store_push_config(&task_id, req).await?))
    }

    pub(super) async fn get_push(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfigRef,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.push_ref_access(ctx, &req).await?;
        match self.store.push_config(&req.task_id, &req.id).await.map_err(store_error)? {
            Some(row) => self.open_push_config(row),
            None => Err(A2AError::new(
                ErrorKind::TaskNotFound,
                format!("push notification config `{}` not found for task {}", req.id, req.task_id),
            )
            .with("taskId", &req.task_id)
            .with("configId", &req.id)),
        }
    }

    pub(super) async fn list_push(
        &self,
        ctx: &CallContext,
        req: ListTaskPushNotificationConfigsRequest,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        validate::task_id(&req.task_id, "taskId")?;
        self.push_access(ctx, &req.task_id).await?;
        let rows = self.store.push_configs(&req.task_id).await.map_err(store_error)?;
        let configs = rows.into_iter().map(|r| self.open_push_config(r)).collect::<Result<_, _>>()?;
        Ok(ListTaskPushNotificationConfigsResponse { configs, next_page_token: String::new() })
    }

    pub(super) async fn delete_push(
        &self,
        ctx: &CallContext,
        req: TaskPushNotificationConfigRef,
    ) -> Result<(), A2AError> {
        self.push_ref_access(ctx, &req).await?;
        self.store.delete_push_config(&req.task_id, &req.id).await.map_err(store_error)?;
        Ok(())
    }

    /// Validates, seals and stores a push config of `task_id`; returns it as stored (with
    /// its id) and in the clear (S14).
    pub(super) async fn store_push_config(
        &self,
        task_id: &str,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        let sealed = self.seal_push_config(config)?;
        self.put_push_config(task_id, sealed, false).await
    }

    /// Validates and seals a push config, before anything is written: a bad one writes
    /// nothing. A config without an id is given one.
    pub(super) fn seal_push_config(&self, mut config: TaskPushNotificationConfig) -> Result<SealedPush, A2AError> {
        let pusher = self.pusher.as_ref().ok_or_else(|| {
            A2AError::new(ErrorKind::PushNotificationNotSupported, "push notifications are not supported by this agent")
        })?;
        validate::push_config(&config)?;
        let host = validate::push_url_host(&config.url).unwrap_or_default();
        if let Some(why) = pusher.hosts().refuses_host(host) {
            return Err(A2AError::invalid_params(format!(
                "invalid params: url {:?}: its host `{host}` is {why}; a push goes to a webhook this agent may reach",
                config.url
            ))
            .with("field", "url"));
        }
        let named = !config.id.is_empty();
        if !named {
            config.id = uuid::Uuid::new_v4().to_string();
        }
        let secret = PushSecret { token: config.token.clone(), authentication: config.authentication.clone() };
        Ok(SealedPush { sealed: pusher.key().seal(&secret), config, named })
    }

    /// Stores a sealed config on `task_id`: a new one only while the task has fewer than
    /// `push.max_configs_per_task`. `inline` (a message's `configuration`): one without an
    /// id replaces the task's config with the same URL rather than adding another, so a
    /// client that sends its webhook with every message, or retries a message, has one
    /// config, not one per message (docs/event-log.md).
    pub(super) async fn put_push_config(
        &self,
        task_id: &str,
        SealedPush { mut config, sealed, named }: SealedPush,
        inline: bool,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        let configs = self.store.push_configs(task_id).await.map_err(store_error)?;
        if inline
            && !named
            && let Some(same) = configs.iter().find(|c| c.url == config.url)
        {
            config.id = same.config_id.clone();
        }
        let most = self.settings.max_push_configs;
        if configs.len() >= most && !configs.iter().any(|c| c.config_id == config.id) {
            return Err(A2AError::invalid_params(format!(
                "invalid params: task {task_id} has {} push notification configs; a task has at most {most} \
                 (`push.max_configs_per_task`): delete one first",
                configs.len()
            ))
            .with("field", "taskPushNotificationConfig"));
        }
        config.task_id = task_id.to_string();
        let row =
            PushRow { task_id: task_id.to_string(), config_id: config.id.clone(), url: config.url.clone(), sealed };
        self.store.put_push_config(&row).await.map_err(store_error)?;
        Ok(config)
    }

    /// A stored push config as a reader sees it: its secrets opened only to tell the
    /// authentication scheme, never returned ([`write_only`]).
    fn open_push_config(&self, row: PushRow) -> Result<TaskPushNotificationConfig, A2AError> {
        let pusher = self.pusher.as_ref().ok_or_else(|| A2AError::internal("push is off"))?;
        let secret = pusher.key().open(&row.sealed).map_err(A2AError::from_fault)?;
        Ok(write_only(TaskPushNotificationConfig {
            id: row.config_id,
            task_id: row.task_id,
            url: row.url,
            token: secret.token,
            authentication: secret.authentication,
            ..Default::default()
        }))
    }
}

/// A push config's token and credentials are write-only (issue 34): Create, Get and List
/// answer with its id, task, URL and authentication scheme, never a secret. Whoever may read
/// a task's configs (any participant, or anyone under D4) could otherwise forge pushes to
/// the webhook, or to a delegating harness's receiver. A client that lost its token deletes
/// the config and creates another.
fn write_only(mut config: TaskPushNotificationConfig) -> TaskPushNotificationConfig {
    config.token.clear();
    if let Some(auth) = config.authentication.as_mut() {
        auth.credentials.clear();
    }
    config
}
