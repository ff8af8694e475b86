//! JSON-RPC 2.0 envelopes.

use crate::A2AError;
use serde_json::{Value, json};

/// The method names of A2A 1.0.
pub const METHODS: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

/// A parsed JSON-RPC request.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcRequest {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

impl RpcRequest {
    /// Checks the envelope: an object, `jsonrpc: "2.0"`, a string method, an id that is a
    /// string, a number or null. Errors carry the id when it could be read.
    pub fn from_value(v: Value) -> Result<Self, (Value, A2AError)> {
        let invalid = |id: Value, why: &str| {
            Err((id, A2AError::new(crate::ErrorKind::InvalidRequest, format!("invalid request: {why}"))))
        };
        let Value::Object(mut obj) = v else {
            return invalid(Value::Null, "the body must be a JSON object (batches are not supported)");
        };
        let id = obj.remove("id").unwrap_or(Value::Null);
        if !matches!(id, Value::String(_) | Value::Number(_) | Value::Null) {
            return invalid(Value::Null, "`id` must be a string, a number or null");
        }
        if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
            return invalid(id, "`jsonrpc` must be \"2.0\"");
        }
        let Some(Value::String(method)) = obj.remove("method") else {
            return invalid(id, "`method` must be a string");
        };
        let params = obj.remove("params").unwrap_or(Value::Object(Default::default()));
        Ok(Self { id, method, params })
    }
}

/// A success response.
pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn failure(id: &Value, error: &A2AError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc()})
}
