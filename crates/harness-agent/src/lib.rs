//! The agent runtime: what `TaskWorkflow`'s activities run. The model providers (D6) and
//! the factories that build them from `[models.<name>]` by `kind`, the slash commands
//! (S9), the remote A2A client a stand-in reaches its agent with (issue 19), the redaction
//! applied to every message before it reaches the workflow (S4), and [`Activities`], the
//! worker's registration of them all.
//!
//! Owns: every side effect of a task but its HTTP surface and its store. Must never: make a
//! decision about a task's lifecycle (harness-workflow does), or rename an activity
//! (harness-workflow's `activity` markers pin the names recorded histories hold).

pub mod activities;
pub mod commands;
pub mod mcp;
pub mod metrics;
pub mod models;
pub mod redaction;
pub mod tools;
mod trace;
pub use trace::current_traceparent;

pub use activities::Activities;

// The workflow's boundary types, as `crate::` paths for the modules moved out of it.
#[allow(unused_imports)]
pub(crate) use harness_workflow::*;

/// The request headers of configured `(name, value)` pairs. For the first pair that is not a
/// header the error is `bad(name, true)` when its name is not a header name, `bad(name,
/// false)` when its value is not a header value, so it names the config key it came from.
pub(crate) fn header_map(
    pairs: &[(String, String)],
    bad: impl Fn(&str, bool) -> String,
) -> Result<reqwest::header::HeaderMap, String> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in pairs {
        let n = reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(name, true))?;
        let v = reqwest::header::HeaderValue::from_str(value).map_err(|_| bad(name, false))?;
        map.insert(n, v);
    }
    Ok(map)
}
