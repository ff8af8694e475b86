//! `[[agents]]`: the remote A2A agents this harness may delegate to (issue 19).

use super::ConfigError;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One remote agent. Only these are ever reached: `/delegate` names an agent by `id`, and
/// no URL that comes in a message is fetched.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The id `/delegate <id> ...` names (lowercase letters, digits, `-`, `_`).
    pub id: String,
    /// Its agent card's URL (`https://.../.well-known/agent-card.json`).
    pub url: String,
    /// Headers every request to it carries, each value read from the named environment
    /// variable (credentials live in the environment only): `{ Authorization = "PEER_AUTH" }`.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
}

impl AgentConfig {
    /// Checks the entry: an id, an http(s) URL, set variables; the headers with their values.
    pub fn resolve(&self) -> Result<Vec<(String, String)>, ConfigError> {
        let id = &self.id;
        let valid =
            !id.is_empty() && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !valid {
            return Err(ConfigError(format!("`agents.id` = `{id}` must be lowercase letters, digits, `-` or `_`")));
        }
        let url: url::Url = self
            .url
            .parse()
            .map_err(|e| ConfigError(format!("`agents.url` of agent `{id}` = `{}` is not a URL: {e}", self.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ConfigError(format!(
                "`agents.url` of agent `{id}` must be http or https, not `{}`",
                url.scheme()
            )));
        }
        self.headers_env
            .iter()
            .map(|(name, var)| match std::env::var(var) {
                Ok(value) if !value.is_empty() => Ok((name.clone(), value)),
                _ => Err(ConfigError(format!(
                    "`agents.headers_env.{name}` of agent `{id}` names the environment variable {var}, which is not set"
                ))),
            })
            .collect()
    }
}

/// Checks every entry and that no id repeats.
pub fn check(agents: &[AgentConfig]) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for agent in agents {
        agent.resolve()?;
        if !seen.insert(agent.id.as_str()) {
            return Err(ConfigError(format!("agent `{}` is configured twice in `[[agents]]`", agent.id)));
        }
    }
    Ok(())
}
