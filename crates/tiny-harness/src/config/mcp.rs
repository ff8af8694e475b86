//! `[[mcp]]`: the MCP servers whose tools the model may call (issue 29; docs/tools.md).

use super::ConfigError;
use harness_agent::mcp::{McpSettings, McpTransport};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One MCP source: `command` (+ `args`, `env`) for a server on stdio, or `url` (+
/// `headers_env`) for streamable HTTP.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// The source's id: its tools are `<id>__<tool>` to the model.
    pub id: String,
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The server's environment: each variable's value read from the named variable of the
    /// harness's (`{ GITHUB_TOKEN = "MY_GITHUB_TOKEN" }`), so no secret sits in the file.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub url: Option<String>,
    /// Headers every request carries, each value read from the named variable.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// Only these of its tools (all by default).
    #[serde(default)]
    pub tools: Vec<String>,
    /// None of these.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Every tool of this source may be retried after a failure or a crash (otherwise only
    /// those annotated `readOnlyHint` or `idempotentHint`).
    #[serde(default)]
    pub idempotent: bool,
}

impl McpSection {
    /// The entry checked, with the values its variables hold; the error names the key.
    pub fn settings(&self) -> Result<McpSettings, ConfigError> {
        let id = &self.id;
        let valid = !id.is_empty()
            && id.len() <= 30
            && !id.contains("__")
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(ConfigError(format!(
                "`mcp.id` = `{id}` must be 1 to 30 of a-z, A-Z, 0-9, `-`, `_` without `__` (its tools are `<id>__<tool>`)"
            )));
        }
        let read = |key: &str, from: &BTreeMap<String, String>| -> Result<Vec<(String, String)>, ConfigError> {
            from.iter()
                .map(|(name, var)| match std::env::var(var) {
                    Ok(value) => Ok((name.clone(), value)),
                    Err(_) => Err(ConfigError(format!(
                        "`mcp.{key}.{name}` of source `{id}` reads the variable `{var}`, which is not set"
                    ))),
                })
                .collect()
        };
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(ConfigError(format!("`mcp.command` of source `{id}` is empty")));
                }
                if !self.headers_env.is_empty() {
                    return Err(ConfigError(format!("`mcp.headers_env` of source `{id}` needs `url`, not `command`")));
                }
                McpTransport::Stdio { command: command.clone(), args: self.args.clone(), env: read("env", &self.env)? }
            }
            (None, Some(url)) => {
                let parsed: url::Url = url
                    .parse()
                    .map_err(|e| ConfigError(format!("`mcp.url` of source `{id}` = `{url}` is not a URL: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(ConfigError(format!("`mcp.url` of source `{id}` must be http or https")));
                }
                if !self.args.is_empty() || !self.env.is_empty() {
                    return Err(ConfigError(format!(
                        "`mcp.args` and `mcp.env` of source `{id}` need `command`, not `url`"
                    )));
                }
                McpTransport::Http { url: url.clone(), headers: read("headers_env", &self.headers_env)? }
            }
            _ => {
                return Err(ConfigError(format!(
                    "source `{id}` of `[[mcp]]` needs exactly one of `command` (stdio) and `url` (streamable HTTP)"
                )));
            }
        };
        Ok(McpSettings {
            id: id.clone(),
            transport,
            tools: self.tools.clone(),
            exclude: self.exclude.clone(),
            idempotent: self.idempotent,
        })
    }

    /// The values its variables hold (redacted wherever they would appear).
    pub fn secrets(&self) -> Vec<String> {
        self.env.values().chain(self.headers_env.values()).filter_map(|var| std::env::var(var).ok()).collect()
    }
}

/// Checks every entry, refusing a repeated id.
pub fn check(sections: &[McpSection]) -> Result<Vec<McpSettings>, ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for s in sections {
        let settings = s.settings()?;
        if !seen.insert(settings.id.clone()) {
            return Err(ConfigError(format!("`mcp.id` = `{}` is used twice", settings.id)));
        }
        out.push(settings);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(toml_text: &str) -> Result<Vec<McpSettings>, String> {
        #[derive(Deserialize)]
        struct File {
            mcp: Vec<McpSection>,
        }
        let file: File = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        check(&file.mcp).map_err(|e| e.0)
    }

    /// Each bad entry is refused with an error naming the key and the source (issue 29).
    #[test]
    fn bad_entries_are_refused_naming_the_key() {
        let err = |t: &str| entries(t).unwrap_err();
        assert!(err("[[mcp]]\nid = \"a__b\"\ncommand = \"x\"").contains("`mcp.id` = `a__b` must be"));
        assert!(err("[[mcp]]\nid = \"\"\ncommand = \"x\"").contains("`mcp.id` = `` must be"));
        assert!(err("[[mcp]]\nid = \"a\"").contains("source `a` of `[[mcp]]` needs exactly one of `command`"));
        assert!(err("[[mcp]]\nid = \"a\"\ncommand = \"x\"\nurl = \"http://h/mcp\"").contains("exactly one"));
        assert!(err("[[mcp]]\nid = \"a\"\nurl = \"ftp://h/mcp\"").contains("`mcp.url` of source `a` must be http"));
        assert!(err("[[mcp]]\nid = \"a\"\nurl = \"not a url\"").contains("`mcp.url` of source `a` = `not a url`"));
        assert!(
            err("[[mcp]]\nid = \"a\"\nurl = \"http://h/mcp\"\nargs = [\"x\"]").contains("`mcp.args` and `mcp.env`")
        );
        assert!(err("[[mcp]]\nid = \"a\"\ncommand = \"x\"\nheaders_env = { A = \"B\" }").contains("`mcp.headers_env`"));
        assert!(
            err("[[mcp]]\nid = \"a\"\ncommand = \"x\"\nenv = { TOKEN = \"TINY_HARNESS_NO_SUCH_VARIABLE_29\" }")
                .contains("`mcp.env.TOKEN` of source `a` reads the variable `TINY_HARNESS_NO_SUCH_VARIABLE_29`")
        );
        assert!(
            err("[[mcp]]\nid = \"a\"\ncommand = \"x\"\n[[mcp]]\nid = \"a\"\ncommand = \"y\"").contains("used twice")
        );
        assert!(err("[[mcp]]\nid = \"a\"\ncommand = \"x\"\nbogus = 1").contains("bogus"));
        let ok = entries(
            "[[mcp]]\nid = \"a\"\ncommand = \"x\"\nargs = [\"-v\"]\n[[mcp]]\nid = \"b\"\nurl = \"http://h/mcp\"",
        )
        .unwrap();
        assert_eq!(ok[0].transport, McpTransport::Stdio { command: "x".into(), args: vec!["-v".into()], env: vec![] });
        assert_eq!(ok[1].transport, McpTransport::Http { url: "http://h/mcp".into(), headers: vec![] });
    }
}
