//! `[models.<name>]` of `kind = "openai"`: the table, checked into [`OpenAiSettings`], and
//! the factory that builds the provider from it ([`super::ProviderKinds`]).

use super::openai::{OpenAiModel, OpenAiSettings};
use super::{ModelProvider, ProviderContext, ProviderFactory};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Builds `kind = "openai"` models.
pub struct OpenAiKind;

impl ProviderFactory for OpenAiKind {
    fn kind(&self) -> &'static str {
        "openai"
    }

    fn build(&self, table: &toml::Table, ctx: &ProviderContext<'_>) -> Result<Arc<dyn ModelProvider>, String> {
        let section = OpenAiSection::from_table(ctx.name, table)?;
        let settings = section.settings(ctx.name, ctx.instructions)?;
        Ok(Arc::new(OpenAiModel::new(settings)?))
    }

    fn check(&self, name: &str, table: &toml::Table) -> Result<(), String> {
        OpenAiSection::from_table(name, table).map(drop)
    }

    fn secrets(&self, name: &str, table: &toml::Table) -> Vec<String> {
        OpenAiSection::from_table(name, table).ok().and_then(|s| s.api_key(name).ok().flatten()).into_iter().collect()
    }
}

/// One OpenAI-compatible model (`kind = "openai"`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OpenAiSection {
    pub kind: String,
    /// Requests go to `{base_url}/chat/completions`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// The model id the endpoint knows (`gpt-4o-mini`, `llama3.2`...).
    pub model: String,
    /// The environment variable holding the key (never the key itself).
    #[serde(default = "default_key_env")]
    pub api_key_env: String,
    /// The endpoint takes no key (a local Ollama, vLLM...): none is sent or required.
    #[serde(default)]
    pub keyless: bool,
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub reasoning_effort: Option<String>,
    /// Bounds the wait for the response head and for each piece of the stream.
    #[serde(default = "default_timeout")]
    pub request_timeout_secs: u64,
    /// Extra request headers (literal values: a secret belongs in `api_key_env`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Requests per turn at most (429, 5xx, a cut or stalled stream are retried).
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    /// What the model sees of the conversation: the newest this many messages, and of
    /// those about this many tokens (4 characters a token).
    #[serde(default = "default_history_messages")]
    pub history_messages: usize,
    #[serde(default = "default_history_tokens")]
    pub history_tokens: usize,
}

fn default_base_url() -> String {
    "https://api.openai.com/v1".into()
}
fn default_key_env() -> String {
    "OPENAI_API_KEY".into()
}
pub(super) fn default_timeout() -> u64 {
    120
}
pub(super) fn default_attempts() -> u32 {
    4
}
pub(super) fn default_history_messages() -> usize {
    50
}
pub(super) fn default_history_tokens() -> usize {
    8000
}

impl OpenAiSection {
    /// The table of `[models.<name>]`, read; the error names the model and the key.
    pub fn from_table(name: &str, table: &toml::Table) -> Result<Self, String> {
        toml::Value::Table(table.clone()).try_into().map_err(|e| format!("`models.{name}`: {e}"))
    }

    /// This section as a `[models.<name>]` table.
    pub fn to_table(&self) -> toml::Table {
        toml::Table::try_from(self).expect("an openai section is a TOML table")
    }

    /// The model `model` at `OPENAI_BASE_URL` (else OpenAI) with the key in
    /// `OPENAI_API_KEY`, as the official SDKs read them: `dev --model openai:<model>`. An
    /// endpoint named by `OPENAI_BASE_URL` with no `OPENAI_API_KEY` is taken as keyless.
    pub fn from_env(model: &str) -> Self {
        let base_url = std::env::var("OPENAI_BASE_URL").ok().filter(|u| !u.trim().is_empty());
        let has_key = std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.trim().is_empty());
        Self {
            kind: "openai".into(),
            keyless: base_url.is_some() && !has_key,
            base_url: base_url.unwrap_or_else(default_base_url),
            model: model.into(),
            api_key_env: default_key_env(),
            temperature: None,
            max_output_tokens: None,
            reasoning_effort: None,
            request_timeout_secs: default_timeout(),
            headers: BTreeMap::new(),
            max_attempts: default_attempts(),
            history_messages: default_history_messages(),
            history_tokens: default_history_tokens(),
        }
    }

    /// The key, from the environment (`None` when keyless); an unset variable is an error
    /// naming it.
    pub fn api_key(&self, name: &str) -> Result<Option<String>, String> {
        read_key(name, self.keyless, &self.api_key_env)
    }

    /// The provider's settings, checked; `instructions` is `[agent] instructions`.
    pub fn settings(&self, name: &str, instructions: Option<&str>) -> Result<OpenAiSettings, String> {
        check_common(Common {
            name,
            base_url: &self.base_url,
            model: &self.model,
            temperature: self.temperature,
            max_temperature: 2.0,
            request_timeout_secs: self.request_timeout_secs,
            max_attempts: self.max_attempts,
            history_messages: self.history_messages,
        })?;
        Ok(OpenAiSettings {
            name: name.into(),
            base_url: self.base_url.trim_end_matches('/').into(),
            model: self.model.clone(),
            api_key: self.api_key(name)?,
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
            reasoning_effort: self.reasoning_effort.clone().filter(|e| !e.is_empty()),
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            headers: self.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            max_attempts: self.max_attempts,
            history_messages: self.history_messages,
            history_tokens: self.history_tokens,
            instructions: instructions.map(String::from),
        })
    }
}

/// The key in the variable `env` (`None` when `keyless`); an unset variable is an error
/// naming it.
pub(super) fn read_key(name: &str, keyless: bool, env: &str) -> Result<Option<String>, String> {
    if keyless {
        return Ok(None);
    }
    match std::env::var(env) {
        Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_string())),
        _ => Err(format!(
            "`models.{name}`: the API key variable `{env}` is not set (`api_key_env`); set it, or `keyless = true` \
             for an endpoint that takes no key"
        )),
    }
}

/// The keys every HTTP provider's table has, to check.
pub(super) struct Common<'a> {
    pub name: &'a str,
    pub base_url: &'a str,
    pub model: &'a str,
    pub temperature: Option<f64>,
    pub max_temperature: f64,
    pub request_timeout_secs: u64,
    pub max_attempts: u32,
    pub history_messages: usize,
}

/// Checks the keys every HTTP provider's table has; the error names the key.
pub(super) fn check_common(c: Common<'_>) -> Result<(), String> {
    let err = |key: &str, why: String| format!("`models.{}.{key}` {why}", c.name);
    let url = url::Url::parse(c.base_url).map_err(|e| err("base_url", format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(err("base_url", format!("= `{}` must be an http or https URL", c.base_url)));
    }
    if c.model.trim().is_empty() {
        return Err(err("model", "is empty: name the model the endpoint serves".into()));
    }
    if let Some(t) = c.temperature.filter(|t| !(0.0..=c.max_temperature).contains(t)) {
        return Err(err("temperature", format!("= {t} must be between 0 and {}", c.max_temperature)));
    }
    if c.request_timeout_secs == 0 {
        return Err(err("request_timeout_secs", "must be at least 1".into()));
    }
    if !(1..=10).contains(&c.max_attempts) {
        return Err(err("max_attempts", format!("= {} must be between 1 and 10", c.max_attempts)));
    }
    if c.history_messages == 0 {
        return Err(err("history_messages", "must be at least 1 (the turn's own message)".into()));
    }
    Ok(())
}
