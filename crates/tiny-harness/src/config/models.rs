//! `[models.<name>]` (D6): `[models.scripted]` for the scripted model, and any other name
//! with a `kind` (`"openai"` for an OpenAI-compatible endpoint) for a provider its kind's
//! factory builds (harness-agent's `ProviderKinds`; docs/configuration.md).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScriptedSection {
    pub file: Option<PathBuf>,
}

/// The `[models]` tables.
#[derive(Clone, Debug, Default)]
pub struct ModelsSection {
    pub scripted: ScriptedSection,
    /// The models built by their `kind`'s factory, by name: each table as written, read
    /// by the factory when the harness is built.
    pub named: BTreeMap<String, toml::Table>,
}

/// Names a `[models.<name>]` with a `kind` cannot take: the built-in models.
const BUILT_IN: &[&str] = &["echo", "conformance", "scripted"];

impl<'de> Deserialize<'de> for ModelsSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let tables: BTreeMap<String, toml::Value> = BTreeMap::deserialize(d)?;
        let mut out = ModelsSection::default();
        for (name, value) in tables {
            let kind = value.get("kind").and_then(|k| k.as_str()).map(String::from);
            match (name.as_str(), kind.as_deref()) {
                ("scripted", None) => {
                    out.scripted = value.try_into().map_err(|e| D::Error::custom(format!("`models.scripted`: {e}")))?;
                }
                (builtin, Some(_)) if BUILT_IN.contains(&builtin) => {
                    return Err(D::Error::custom(format!(
                        "`models.{builtin}` is a built-in model's name; give the model another name"
                    )));
                }
                (_, Some(_)) => {
                    let toml::Value::Table(table) = value else {
                        return Err(D::Error::custom(format!("`models.{name}` must be a table")));
                    };
                    out.named.insert(name, table);
                }
                (_, None) => {
                    return Err(D::Error::custom(format!(
                        "`models.{name}` needs `kind` (a provider kind, such as \"openai\")"
                    )));
                }
            }
        }
        Ok(out)
    }
}
