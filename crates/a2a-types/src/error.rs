//! The A2A error model: one `A2AError` maps to a JSON-RPC error object and to a REST
//! `google.rpc.Status` body (CHEATSHEET §7, v1.0.1 table).

use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The kinds of error the protocol names, plus the generic JSON-RPC ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    /// The backend (Temporal) did not answer in time; the request may be retried.
    Unavailable,
}

impl ErrorKind {
    /// JSON-RPC `error.code`.
    pub fn jsonrpc_code(self) -> i64 {
        match self {
            Self::TaskNotFound => -32001,
            Self::TaskNotCancelable => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation => -32004,
            Self::ContentTypeNotSupported => -32005,
            Self::InvalidAgentResponse => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired => -32008,
            Self::VersionNotSupported => -32009,
            Self::ParseError => -32700,
            Self::InvalidRequest => -32600,
            Self::MethodNotFound => -32601,
            Self::InvalidParams => -32602,
            Self::Internal | Self::Unavailable => -32603,
        }
    }

    /// HTTP status of the REST binding.
    pub fn http_status(self) -> u16 {
        match self {
            Self::TaskNotFound | Self::MethodNotFound => 404,
            Self::InvalidAgentResponse | Self::Internal => 500,
            Self::Unavailable => 503,
            _ => 400,
        }
    }

    /// gRPC canonical status name (REST `error.status`).
    pub fn grpc_status(self) -> &'static str {
        match self {
            Self::TaskNotFound | Self::MethodNotFound => "NOT_FOUND",
            Self::ContentTypeNotSupported | Self::ParseError | Self::InvalidRequest | Self::InvalidParams => {
                "INVALID_ARGUMENT"
            }
            Self::InvalidAgentResponse | Self::Internal => "INTERNAL",
            Self::Unavailable => "UNAVAILABLE",
            _ => "FAILED_PRECONDITION",
        }
    }

    /// ErrorInfo `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::TaskNotFound => "TASK_NOT_FOUND",
            Self::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            Self::ParseError => "PARSE_ERROR",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::MethodNotFound => "METHOD_NOT_FOUND",
            Self::InvalidParams => "INVALID_PARAMS",
            Self::Internal => "INTERNAL_ERROR",
            Self::Unavailable => "UNAVAILABLE",
        }
    }
}

/// An error answered to a client. The message says what was wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct A2AError {
    pub kind: ErrorKind,
    pub message: String,
    /// ErrorInfo metadata (string map).
    pub metadata: BTreeMap<String, String>,
    /// `google.rpc.BadRequest` field violations: (field, description).
    pub field_violations: Vec<(String, String)>,
}

pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

impl A2AError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), metadata: BTreeMap::new(), field_violations: Vec::new() }
    }

    /// Adds an ErrorInfo metadata entry.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.metadata.insert(key.to_string(), value.into());
        self
    }

    pub fn task_not_found(task_id: &str) -> Self {
        Self::new(ErrorKind::TaskNotFound, format!("task not found: {task_id}")).with("taskId", task_id)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParams, message)
    }

    /// A REQUIRED field is missing or empty.
    pub fn missing_field(field: &str, description: &str) -> Self {
        let mut e = Self::invalid_params(format!("invalid params: {field}: {description}"));
        e.field_violations.push((field.to_string(), description.to_string()));
        e
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::UnsupportedOperation, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// An internal error that says what failed in the server's own words (a value that would
    /// not write or read back, a key that would not open): for `map_err(A2AError::from_fault)`.
    pub fn from_fault(fault: impl std::fmt::Display) -> Self {
        Self::internal(fault.to_string())
    }

    /// Whether ErrorInfo is attached (A2A errors always; generic ones too, harmlessly).
    fn details(&self) -> Vec<Value> {
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.kind.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": self.metadata,
        })];
        if !self.field_violations.is_empty() {
            let violations: Vec<Value> =
                self.field_violations.iter().map(|(f, d)| json!({"field": f, "description": d})).collect();
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": violations,
            }));
        }
        details
    }

    /// The JSON-RPC `error` object: exactly `code`, `message`, `data`.
    pub fn to_jsonrpc(&self) -> Value {
        json!({"code": self.kind.jsonrpc_code(), "message": self.message, "data": self.details()})
    }

    /// The REST body: ProtoJSON `google.rpc.Status` under `error`.
    pub fn to_rest(&self) -> Value {
        json!({"error": {
            "code": self.kind.http_status(),
            "status": self.kind.grpc_status(),
            "message": self.message,
            "details": self.details(),
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_not_found_maps_to_both_bindings() {
        let e = A2AError::task_not_found("t-1");
        let rpc = e.to_jsonrpc();
        assert_eq!(rpc["code"], -32001);
        assert_eq!(rpc.as_object().unwrap().len(), 3);
        assert_eq!(rpc["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(rpc["data"][0]["domain"], "a2a-protocol.org");
        let rest = e.to_rest();
        assert_eq!(rest["error"]["code"], 404);
        assert_eq!(rest["error"]["status"], "NOT_FOUND");
        assert_eq!(rest["error"]["details"][0]["metadata"]["taskId"], "t-1");
    }
}
