//! The activities of `TaskWorkflow`. Names are pinned (`name = ..`): a rename breaks
//! recorded histories. One file per activity; this file only registers them.

mod call_model;
mod emit_event;

use crate::models::ModelRegistry;
use crate::{EmitInput, ModelReply, ModelTurn};
use harness_store::Store;
use std::sync::Arc;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// What the activities need: the store, the model providers and push delivery.
pub struct Activities {
    pub store: Store,
    pub models: ModelRegistry,
    /// Delivers status events to the task's push configs (S14); `None` without a push key.
    pub pusher: Option<Arc<harness_push::Pusher>>,
}

#[activities]
impl Activities {
    /// Appends an event to the task's log and wakes its readers (D1).
    #[activity(name = "emit_event")]
    pub async fn emit_event(self: Arc<Self>, _ctx: ActivityContext, input: EmitInput) -> Result<i64, ActivityError> {
        emit_event::run(&self.store, self.pusher.as_ref(), input).await
    }

    /// Runs one model turn, streaming its output into the log as it is produced (D6, S12).
    #[activity(name = "call_model")]
    pub async fn call_model(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: ModelTurn,
    ) -> Result<ModelReply, ActivityError> {
        call_model::run(&self.store, &self.models, &ctx, input).await
    }
}
