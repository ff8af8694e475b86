//! The activities `TaskWorkflow` calls, by name and type only: what runs them lives in
//! harness-agent (its `Activities`), so this crate does no I/O. Each marker names the
//! activity type the worker registers; harness-agent checks at compile time that its
//! implementation takes and returns the same types (`harness_agent::activities`).
//!
//! Names are pinned: a rename breaks recorded histories. The payloads of every message
//! (the model call's and the appends') are [`Json`]: the same JSON, parsed in one pass.

use crate::{
    CommandContext, CommandReply, EmitInput, Json, ModelReply, ModelTurn, Observation, RemoteCancel, RemoteLook,
    RemoteSend, RemoteStarted, ToolInvocation, ToolResult,
};
use temporalio_common::ActivityDefinition;

macro_rules! activity {
    ($(#[$doc:meta])* $marker:ident = $name:literal, $input:ty => $output:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $marker;

        impl ActivityDefinition for $marker {
            type Input = $input;
            type Output = $output;
            fn name(&self) -> &str {
                $name
            }
        }
    };
}

activity!(
    /// Appends an event to the task's log and wakes its readers (D1); answers its seq.
    EmitEvent = "emit_event", Json<EmitInput> => i64
);
activity!(
    /// Runs one model turn, streaming its output into the log as it is produced (D6, S12).
    CallModel = "call_model", Json<ModelTurn> => Json<ModelReply>
);
activity!(
    /// Runs a slash command (S9).
    RunCommand = "run_command", CommandContext => CommandReply
);
activity!(
    /// Sends a stand-in's brief to its remote agent (issue 19).
    RemoteSendBrief = "remote_send", RemoteSend => RemoteStarted
);
activity!(
    /// Looks at a remote task: once, or subscribing until it changes (issue 19).
    RemoteObserve = "remote_observe", RemoteLook => Observation
);
activity!(
    /// Cancels a remote task (a cancelled parent's open sub-task, issue 19).
    RemoteCancelTask = "remote_cancel", RemoteCancel => ()
);
activity!(
    /// Runs one tool call the model asked for (issue 29); a failing tool answers an error
    /// result, never a failed activity.
    InvokeTool = "invoke_tool", ToolInvocation => ToolResult
);
