//! Push notifications (S14): the key that seals each config's token and credentials
//! (AES-256-GCM), and delivery of a task's status updates to its configs.
//!
//! Owns: [`PushKey`] (from `TINY_HARNESS_PUSH_KEY`, or a key file `dev` creates), sealing
//! and opening [`PushSecret`]s, and [`Pusher`], which posts events in order per config
//! with bounded retries and backoff, off the task's path.
//! Must never: log a token, a credential or a pushed body; block the caller of `deliver`.
//!
//! The push receiver of S15 (`POST /a2a/push/{task_id}`) is a route of `tiny-harness`
//! (`hosting.rs`), not of this crate.

mod deliver;
mod hosts;
mod key;

pub use deliver::{DeliveryPolicy, Pusher};
pub use hosts::HostPolicy;
pub use key::{KEY_ENV, KeyError, PushKey, PushSecret};

/// Push posts by `outcome` (issue 32): `delivered`, `given_up` after the last attempt, or
/// `refused_host` (the host policy refused the URL's host).
pub const PUSH_DELIVERIES: &str = "harness_push_deliveries_total";
/// Failed push posts that are tried again.
pub const PUSH_RETRIES: &str = "harness_push_retries_total";
