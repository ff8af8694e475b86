//! tiny-harness as a library: the configuration, the [`Harness`] that wires the store, the
//! Temporal worker and the A2A server together, and the embedded Temporal dev server.
//! `harness-cli` is argument parsing plus a call into this crate, so a host embeds exactly
//! what the CLI runs.

mod accept;
pub mod card;
pub mod config;
mod handler;
mod harness;
mod hosting;
pub mod metrics;
mod openapi;
mod peer;
mod reconcile;
pub mod supervise;
pub mod telemetry;
pub mod temporal_dev;
pub mod ui;
mod worker;

pub use config::{Config, ConfigError, GrpcCompression, TemporalMode};
pub use handler::{ENVELOPE_SCHEMA, ParticipantResolver, Policy, PolicyDecision, PolicyPoint, PolicyRequest};
pub use handler::{HarnessHandler, StopAt};
pub use harness::{Harness, HarnessBuilder, HarnessError, RunningHarness, running_harness};
pub use harness_agent::tools::{Tool, ToolContext, ToolHandler, ToolSpec};
pub use harness_workflow::CommandContext;
pub use hosting::{MONITOR_PATH, OPENAPI_PATH, PUSH_REFUSAL_FLOOR, RouteOptions, UI_PATH, harness_router};
pub use worker::{Shutdown, connect as connect_temporal, connect_with as connect_temporal_with, spawn_worker_thread};
