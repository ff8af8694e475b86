//! Refusals of the `inbox` update validator, typed across Temporal.
//!
//! The validator's error becomes the update's failure. The SDK wraps whatever the
//! validator returns in an application failure of its own, and keeps, as that failure's
//! cause, an application failure found as the error's `source()`: a [`RefusalError`] has
//! one, of type [`REFUSAL_FAILURE_TYPE`], whose one detail is the [`Refusal`] as JSON. The
//! handler finds it by that type in the failure's cause chain ([`Refusal::from_failure`]);
//! no error text is searched.

use a2a_types::TaskState;
use serde::{Deserialize, Serialize};
use temporalio_common::error::ApplicationFailure;
use temporalio_common::protos::temporal::api::failure::v1::Failure;
use temporalio_common::protos::temporal::api::failure::v1::failure::FailureInfo;

/// The application failure type a refusal travels as.
pub const REFUSAL_FAILURE_TYPE: &str = "TinyHarnessRefusal";

/// Why the workflow refused a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RefusalKind {
    /// The task has ended, or a cancel is underway (S7): A2A UnsupportedOperation.
    TaskEnded,
    /// The message itself is unusable: A2A InvalidParams.
    InvalidMessage,
    /// The sender may not do what the message asks (a watcher's control, S8): A2A
    /// UnsupportedOperation, as a watcher's cancel.
    NotAllowed,
}

/// A refusal by the `inbox` validator, turned back into an A2A error by the handler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
    /// A code a client can test for, beside the kind (`a2ui.unknown_surface_or_component`):
    /// the A2A error's ErrorInfo metadata `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl Refusal {
    /// A task that has ended (or is being canceled) takes no more messages (S7).
    pub fn task_ended(state: TaskState) -> Self {
        Self { kind: RefusalKind::TaskEnded, message: terminal_refusal(state), code: None }
    }

    pub fn invalid_message(message: impl Into<String>) -> Self {
        Self { kind: RefusalKind::InvalidMessage, message: message.into(), code: None }
    }

    pub fn not_allowed(message: impl Into<String>) -> Self {
        Self { kind: RefusalKind::NotAllowed, message: message.into(), code: None }
    }

    /// The refusal with a code a client can test for.
    pub fn with_code(self, code: &str) -> Self {
        Self { code: Some(code.to_string()), ..self }
    }

    /// The error an update validator returns.
    pub fn into_error(self) -> Box<dyn std::error::Error + Send + Sync> {
        let typed = ApplicationFailure::builder(self.message.clone())
            .type_name(REFUSAL_FAILURE_TYPE.to_string())
            .non_retryable(true)
            .details(self.clone())
            .build();
        Box::new(RefusalError { refusal: self, typed })
    }

    /// The refusal a failed update carries: the first failure of [`REFUSAL_FAILURE_TYPE`]
    /// in its cause chain, `None` when there is none (any other failure).
    pub fn from_failure(failure: &Failure) -> Option<Self> {
        let mut next = Some(failure);
        while let Some(f) = next {
            if let Some(FailureInfo::ApplicationFailureInfo(info)) = &f.failure_info
                && info.r#type == REFUSAL_FAILURE_TYPE
            {
                let payload = info.details.as_ref()?.payloads.first()?;
                return serde_json::from_slice(&payload.data).ok();
            }
            next = f.cause.as_deref();
        }
        None
    }
}

/// A refusal as an error: its `source()` is the typed application failure the SDK keeps
/// as the update failure's cause.
#[derive(Debug)]
pub struct RefusalError {
    refusal: Refusal,
    typed: ApplicationFailure,
}

impl std::fmt::Display for RefusalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.refusal.message)
    }
}

impl std::error::Error for RefusalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.typed)
    }
}

/// The refusal text for a terminal task (S7).
pub fn terminal_refusal(state: TaskState) -> String {
    format!("the task is in a terminal state ({state})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use temporalio_common::data_converters::{DataConverter, SerializationContextData};
    use temporalio_common::error::{OutgoingError, OutgoingWorkflowError};

    /// What the worker does with a validator's error: wraps it in an application failure
    /// of its own and encodes that (temporalio-workflow, `workflow_error_to_failure`).
    fn as_the_sdk_sends_it(refusal: Refusal) -> Failure {
        let wrapped = ApplicationFailure::new(refusal.into_error());
        DataConverter::default().to_failure(
            &SerializationContextData::None,
            OutgoingError::Workflow(OutgoingWorkflowError::Application(Box::new(wrapped))),
        )
    }

    #[test]
    fn each_refusal_kind_survives_the_sdk_s_failure_encoding() {
        for refusal in [
            Refusal::task_ended(TaskState::Completed),
            Refusal::invalid_message("the message has no parts"),
            Refusal::not_allowed("participant `w` watches task t and may not complete it"),
            Refusal::invalid_message("parts[0]: no surface `s`").with_code("a2ui.unknown_surface_or_component"),
        ] {
            let failure = as_the_sdk_sends_it(refusal.clone());
            assert_eq!(failure.message, refusal.message, "the outer failure reads as the refusal");
            assert_eq!(Refusal::from_failure(&failure), Some(refusal));
        }
    }

    #[test]
    fn a_failure_of_another_type_is_no_refusal_whatever_its_text() {
        let text = ApplicationFailure::builder("refused:TASK_ENDED: the task is in a terminal state").build();
        let failure = DataConverter::default().to_failure(
            &SerializationContextData::None,
            OutgoingError::Workflow(OutgoingWorkflowError::Application(Box::new(text))),
        );
        assert_eq!(Refusal::from_failure(&failure), None);
    }
}
