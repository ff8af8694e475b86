//! The one table of A2A operations. Each entry names its JSON-RPC method, its HTTP+JSON
//! routes, the card capability it needs, where its request comes from on the REST binding
//! and the handler call. The JSON-RPC dispatch, the REST router, the capability gate and
//! the API document all read this table: adding an operation is one entry here plus its
//! method on [`RequestHandler`].

use crate::{CallContext, EventStream, RequestHandler, TaskAnswer, parse_params};
use a2a_types::{A2AError, AgentCard};
use axum::body::Bytes;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::Arc;

/// The card capability an operation needs (CHEATSHEET §5, capability gating).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// Every server has it.
    Always,
    /// `capabilities.streaming`.
    Streaming,
    /// `capabilities.pushNotifications`.
    PushNotifications,
    /// `capabilities.extendedAgentCard`.
    ExtendedAgentCard,
}

impl Capability {
    /// Refuses the call when the card does not declare the capability.
    pub(crate) fn check(self, card: &AgentCard) -> Result<(), A2AError> {
        let caps = &card.capabilities;
        match self {
            Self::Streaming if caps.streaming != Some(true) => {
                Err(A2AError::unsupported("streaming is not supported by this agent (capabilities.streaming)"))
            }
            Self::PushNotifications if caps.push_notifications != Some(true) => Err(crate::push_not_supported()),
            Self::ExtendedAgentCard if caps.extended_agent_card != Some(true) => Err(A2AError::unsupported(
                "this agent declares no extended agent card (capabilities.extendedAgentCard)",
            )),
            _ => Ok(()),
        }
    }
}

/// Where the REST binding reads an operation's request (path parameters are added to it).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Input {
    /// The JSON body (an empty body is `{}`).
    Body,
    /// The query string: camelCase names, these parsed as integers and these as booleans.
    Query { ints: &'static [&'static str], bools: &'static [&'static str] },
    /// Nothing but the path parameters.
    Path,
}

/// What a call answers: a value written as JSON, nothing (JSON-RPC `null`, REST `{}`), or a
/// stream. A value is written once, straight from its type: the JSON-RPC envelope is put
/// around those bytes and the REST body is those bytes.
pub(crate) enum Reply {
    Json(Bytes),
    Empty,
    Stream(EventStream),
}

type Call = fn(Arc<dyn RequestHandler>, CallContext, Value) -> BoxFuture<'static, Result<Reply, A2AError>>;

/// One A2A operation.
pub struct Operation {
    /// The JSON-RPC method, also the operation's name in the API document.
    pub method: &'static str,
    /// The capability the card must declare.
    pub capability: Capability,
    /// HTTP+JSON routes, relative to [`crate::REST_PATH`]; `{name}` binds the request field
    /// `name`, and a segment `{name}:verb` binds what precedes `:verb`. Every route is also
    /// served under a leading `/{tenant}` segment.
    pub rest: &'static [(&'static str, &'static str)],
    pub(crate) input: Input,
    pub(crate) call: Call,
}

impl Operation {
    /// The operation a JSON-RPC method names.
    pub fn named(method: &str) -> Option<&'static Operation> {
        by_method(method)
    }

    /// A client's request line for this operation on the HTTP+JSON binding: its first
    /// route's HTTP method and path, each `{name}` filled from `params` (a string field,
    /// percent-encoded as one segment). `None` when a named field is missing.
    pub fn rest_request(&self, params: &Value) -> Option<(&'static str, String)> {
        let (verb, route) = *self.rest.first()?;
        let mut path = String::with_capacity(route.len() + 32);
        let mut rest = route;
        while let Some(open) = rest.find('{') {
            let close = open + rest[open..].find('}')?;
            path.push_str(&rest[..open]);
            let field = params.get(&rest[open + 1..close])?.as_str()?;
            path.extend(percent_encoding::utf8_percent_encode(field, SEGMENT));
            rest = &rest[close + 1..];
        }
        path.push_str(rest);
        Some((verb, path))
    }
}

/// What a path segment escapes: everything but RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

fn value<T: serde::Serialize>(v: T) -> Result<Reply, A2AError> {
    serde_json::to_vec(&v).map(|json| Reply::Json(json.into())).map_err(A2AError::from_fault)
}

/// GetTask's answer: a task to write, or one the handler keeps written (issue 31).
fn task(answer: TaskAnswer) -> Result<Reply, A2AError> {
    match answer {
        TaskAnswer::Task(task) => value(task),
        TaskAnswer::Json(json) => Ok(Reply::Json(json)),
    }
}

/// An entry's call: parse the params into the method's request type, call, wrap the answer.
macro_rules! call {
    ($method:ident => value) => {
        |h, ctx, params| Box::pin(async move { value(h.$method(&ctx, parse_params(params)?).await?) })
    };
    ($method:ident => empty) => {
        |h, ctx, params| {
            Box::pin(async move {
                h.$method(&ctx, parse_params(params)?).await?;
                Ok(Reply::Empty)
            })
        }
    };
    ($method:ident => task) => {
        |h, ctx, params| Box::pin(async move { task(h.$method(&ctx, parse_params(params)?).await?) })
    };
    ($method:ident => stream) => {
        |h, ctx, params| Box::pin(async move { Ok(Reply::Stream(h.$method(&ctx, parse_params(params)?).await?)) })
    };
}

const BODY: Input = Input::Body;

/// Every operation of A2A 1.0, in the order of the specification.
pub static OPERATIONS: &[Operation] = &[
    Operation {
        method: "SendMessage",
        capability: Capability::Always,
        rest: &[("POST", "/message:send")],
        input: BODY,
        call: call!(send_message => value),
    },
    Operation {
        method: "SendStreamingMessage",
        capability: Capability::Streaming,
        rest: &[("POST", "/message:stream")],
        input: BODY,
        call: call!(send_streaming_message => stream),
    },
    Operation {
        method: "GetTask",
        capability: Capability::Always,
        rest: &[("GET", "/tasks/{id}")],
        input: Input::Query { ints: &["historyLength", "history_length"], bools: &[] },
        call: call!(get_task => task),
    },
    Operation {
        method: "ListTasks",
        capability: Capability::Always,
        rest: &[("GET", "/tasks")],
        input: Input::Query {
            ints: &["pageSize", "historyLength", "page_size", "history_length"],
            bools: &["includeArtifacts", "include_artifacts"],
        },
        call: call!(list_tasks => value),
    },
    Operation {
        method: "CancelTask",
        capability: Capability::Always,
        rest: &[("POST", "/tasks/{id}:cancel")],
        input: BODY,
        call: call!(cancel_task => value),
    },
    Operation {
        method: "SubscribeToTask",
        capability: Capability::Streaming,
        // GET and POST both (CHEATSHEET §13.1); the task id is all it reads.
        rest: &[("GET", "/tasks/{id}:subscribe"), ("POST", "/tasks/{id}:subscribe")],
        input: Input::Path,
        call: call!(subscribe_to_task => stream),
    },
    Operation {
        method: "CreateTaskPushNotificationConfig",
        capability: Capability::PushNotifications,
        rest: &[("POST", "/tasks/{taskId}/pushNotificationConfigs")],
        input: BODY,
        call: call!(create_push_config => value),
    },
    Operation {
        method: "GetTaskPushNotificationConfig",
        capability: Capability::PushNotifications,
        rest: &[("GET", "/tasks/{taskId}/pushNotificationConfigs/{id}")],
        input: Input::Path,
        call: call!(get_push_config => value),
    },
    Operation {
        method: "ListTaskPushNotificationConfigs",
        capability: Capability::PushNotifications,
        rest: &[("GET", "/tasks/{taskId}/pushNotificationConfigs")],
        input: Input::Query { ints: &["pageSize", "page_size"], bools: &[] },
        call: call!(list_push_configs => value),
    },
    Operation {
        method: "DeleteTaskPushNotificationConfig",
        capability: Capability::PushNotifications,
        rest: &[("DELETE", "/tasks/{taskId}/pushNotificationConfigs/{id}")],
        input: Input::Path,
        call: call!(delete_push_config => empty),
    },
    Operation {
        method: "GetExtendedAgentCard",
        capability: Capability::ExtendedAgentCard,
        rest: &[("GET", "/extendedAgentCard")],
        input: Input::Path,
        call: |h, ctx, _params| Box::pin(async move { value(h.extended_agent_card(&ctx).await?) }),
    },
];

/// The operation a JSON-RPC method names.
pub(crate) fn by_method(method: &str) -> Option<&'static Operation> {
    OPERATIONS.iter().find(|op| op.method == method)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remote A2A client builds its REST requests from this table (issue 29): a field
    /// fills its placeholder as one escaped segment, a missing field builds nothing.
    #[test]
    fn a_rest_request_fills_the_route_from_the_params() {
        let get = Operation::named("GetTask").unwrap();
        assert_eq!(get.rest_request(&serde_json::json!({"id": "t 1/x"})), Some(("GET", "/tasks/t%201%2Fx".into())));
        let cancel = Operation::named("CancelTask").unwrap();
        assert_eq!(cancel.rest_request(&serde_json::json!({"id": "abc"})), Some(("POST", "/tasks/abc:cancel".into())));
        let send = Operation::named("SendMessage").unwrap();
        assert_eq!(send.rest_request(&serde_json::json!({})), Some(("POST", "/message:send".into())));
        let push = Operation::named("GetTaskPushNotificationConfig").unwrap();
        assert_eq!(push.rest_request(&serde_json::json!({"taskId": "t"})), None, "`id` is missing");
        assert!(Operation::named("NoSuchMethod").is_none());
    }
}
