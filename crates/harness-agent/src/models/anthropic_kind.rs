//! `[models.<name>]` of `kind = "anthropic"`: the table, checked into
//! [`AnthropicSettings`], and the factory that builds the provider from it.

use super::anthropic::{AnthropicModel, AnthropicSettings};
use super::openai_kind::{
    Common, check_common, default_attempts, default_history_messages, default_history_tokens, default_timeout, read_key,
};
use super::{ModelProvider, ProviderContext, ProviderFactory};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Builds `kind = "anthropic"` models.
pub struct AnthropicKind;

impl ProviderFactory for AnthropicKind {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    fn build(&self, table: &toml::Table, ctx: &ProviderContext<'_>) -> Result<Arc<dyn ModelProvider>, String> {
        let section = AnthropicSection::from_table(ctx.name, table)?;
        let settings = section.settings(ctx.name, ctx.instructions)?;
        Ok(Arc::new(AnthropicModel::new(settings)?))
    }

    fn check(&self, name: &str, table: &toml::Table) -> Result<(), String> {
        AnthropicSection::from_table(name, table).map(drop)
    }

    fn secrets(&self, name: &str, table: &toml::Table) -> Vec<String> {
        let section = AnthropicSection::from_table(name, table).ok();
        section.and_then(|s| read_key(name, s.keyless, &s.api_key_env).ok().flatten()).into_iter().collect()
    }
}

/// One model behind Anthropic's Messages API (`kind = "anthropic"`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AnthropicSection {
    pub kind: String,
    /// Requests go to `{base_url}/v1/messages` (the official SDKs' base URL, no `/v1`).
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// The model id (`claude-sonnet-4-5`, ...).
    pub model: String,
    /// The environment variable holding the key, sent as `x-api-key` (never the key itself).
    #[serde(default = "default_key_env")]
    pub api_key_env: String,
    /// A gateway that takes no key: none is sent or required.
    #[serde(default)]
    pub keyless: bool,
    /// `anthropic-version`.
    #[serde(default = "default_version")]
    pub version: String,
    pub temperature: Option<f64>,
    /// `max_tokens`, which the API requires.
    #[serde(default = "default_max_tokens")]
    pub max_output_tokens: u32,
    /// Bounds the wait for the response head and for each piece of the stream.
    #[serde(default = "default_timeout")]
    pub request_timeout_secs: u64,
    /// Extra request headers (literal values: a secret belongs in `api_key_env`), such as
    /// `anthropic-beta`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Requests per turn at most (429, 529 and other 5xx, a cut or stalled stream are retried).
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
    "https://api.anthropic.com".into()
}
fn default_key_env() -> String {
    "ANTHROPIC_API_KEY".into()
}
fn default_version() -> String {
    "2023-06-01".into()
}
fn default_max_tokens() -> u32 {
    4096
}

impl AnthropicSection {
    /// The table of `[models.<name>]`, read; the error names the model and the key.
    pub fn from_table(name: &str, table: &toml::Table) -> Result<Self, String> {
        toml::Value::Table(table.clone()).try_into().map_err(|e| format!("`models.{name}`: {e}"))
    }

    /// The model `model` at `ANTHROPIC_BASE_URL` (else Anthropic) with the key in
    /// `ANTHROPIC_API_KEY`, as the official SDKs read them: `dev --model anthropic:<model>`.
    pub fn from_env(model: &str) -> Self {
        let base_url = std::env::var("ANTHROPIC_BASE_URL").ok().filter(|u| !u.trim().is_empty());
        let has_key = std::env::var("ANTHROPIC_API_KEY").is_ok_and(|k| !k.trim().is_empty());
        Self {
            kind: "anthropic".into(),
            keyless: base_url.is_some() && !has_key,
            base_url: base_url.unwrap_or_else(default_base_url),
            model: model.into(),
            api_key_env: default_key_env(),
            version: default_version(),
            temperature: None,
            max_output_tokens: default_max_tokens(),
            request_timeout_secs: default_timeout(),
            headers: BTreeMap::new(),
            max_attempts: default_attempts(),
            history_messages: default_history_messages(),
            history_tokens: default_history_tokens(),
        }
    }

    /// This section as a `[models.<name>]` table.
    pub fn to_table(&self) -> toml::Table {
        toml::Table::try_from(self).expect("an anthropic section is a TOML table")
    }

    /// The provider's settings, checked; `instructions` is `[agent] instructions`.
    pub fn settings(&self, name: &str, instructions: Option<&str>) -> Result<AnthropicSettings, String> {
        check_common(Common {
            name,
            base_url: &self.base_url,
            model: &self.model,
            temperature: self.temperature,
            max_temperature: 1.0,
            request_timeout_secs: self.request_timeout_secs,
            max_attempts: self.max_attempts,
            history_messages: self.history_messages,
        })?;
        if self.max_output_tokens == 0 {
            return Err(format!("`models.{name}.max_output_tokens` must be at least 1"));
        }
        Ok(AnthropicSettings {
            name: name.into(),
            base_url: self.base_url.trim_end_matches('/').into(),
            model: self.model.clone(),
            api_key: read_key(name, self.keyless, &self.api_key_env)?,
            version: self.version.clone(),
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            headers: self.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            max_attempts: self.max_attempts,
            history_messages: self.history_messages,
            history_tokens: self.history_tokens,
            instructions: instructions.map(String::from),
        })
    }
}
