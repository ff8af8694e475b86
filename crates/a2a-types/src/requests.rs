//! Request and response messages of the 11 operations (CHEATSHEET §3).

use crate::{Message, Struct, Task, TaskState};
use serde::{Deserialize, Serialize};

/// Authentication a push webhook expects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthenticationInfo {
    pub scheme: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub credentials: String,
}

/// A webhook registered for a task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskPushNotificationConfig {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "task_id")]
    pub task_id: String,
    pub url: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// How a SendMessage is handled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SendMessageConfiguration {
    #[serde(skip_serializing_if = "Vec::is_empty", alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "task_push_notification_config")]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "history_length")]
    pub history_length: Option<i32>,
    #[serde(skip_serializing_if = "crate::is_false", alias = "return_immediately")]
    pub return_immediately: bool,
}

/// SendMessage / SendStreamingMessage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SendMessageRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    /// REQUIRED; `None` is refused by validation with a message naming `message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// GetTask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetTaskRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none", alias = "history_length")]
    pub history_length: Option<i32>,
}

/// CancelTask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CancelTaskRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// SubscribeToTask.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscribeToTaskRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    pub id: String,
}

/// ListTasks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTasksRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(skip_serializing_if = "String::is_empty", alias = "context_id")]
    pub context_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "page_size")]
    pub page_size: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty", alias = "page_token")]
    pub page_token: String,
    #[serde(skip_serializing_if = "Option::is_none", alias = "history_length")]
    pub history_length: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", alias = "include_artifacts")]
    pub include_artifacts: Option<bool>,
}

/// The result of ListTasks; `tasks` and `nextPageToken` are always present.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub page_size: i32,
    pub total_size: i32,
}

/// GetTaskPushNotificationConfig and DeleteTaskPushNotificationConfig.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskPushNotificationConfigRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(alias = "task_id")]
    pub task_id: String,
    pub id: String,
}

/// ListTaskPushNotificationConfigs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTaskPushNotificationConfigsRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(skip_serializing_if = "Option::is_none", alias = "page_size")]
    pub page_size: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty", alias = "page_token")]
    pub page_token: String,
}

/// The result of ListTaskPushNotificationConfigs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListTaskPushNotificationConfigsResponse {
    pub configs: Vec<TaskPushNotificationConfig>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub next_page_token: String,
}

/// GetExtendedAgentCard.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetExtendedAgentCardRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tenant: String,
}
