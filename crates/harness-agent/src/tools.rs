//! Tools the model may call (issue 29): the [`Tool`] trait, the registry a harness freezes
//! at build, and the host tools a host registers with a closure. `invoke_tool` validates a
//! call's arguments against the tool's input schema before it runs it, bounds it in time and
//! caps and redacts what it gives back; whatever goes wrong becomes an error result the model
//! reads, never a failed task.

use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the model is told about a tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by: 1 to 64 of `a-z A-Z 0-9 _ -`.
    pub name: String,
    pub description: String,
    /// A JSON Schema of the arguments object.
    pub input_schema: Value,
}

/// What a tool knows of the call besides its arguments.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub task_id: String,
    pub context_id: String,
    pub turn: u32,
    pub call_id: String,
}

/// A tool the model can call.
pub trait Tool: Send + Sync + 'static {
    fn spec(&self) -> &ToolSpec;

    /// Whether running it twice does no more than running it once (it is retried after a
    /// failure or a crash); a tool that is not is attempted once.
    fn idempotent(&self) -> bool {
        false
    }

    /// Runs the call with arguments that passed the input schema. `Err` is the tool's own
    /// error, which the model reads.
    fn call(&self, ctx: ToolContext, arguments: Value) -> BoxFuture<'static, Result<String, String>>;
}

/// A host tool's handler (`HarnessBuilder::tool`).
pub trait ToolHandler: Send + Sync + 'static {
    fn call(&self, ctx: ToolContext, arguments: Value) -> BoxFuture<'static, Result<String, String>>;
}

impl<F, Fut> ToolHandler for F
where
    F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, String>> + Send + 'static,
{
    fn call(&self, ctx: ToolContext, arguments: Value) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(self(ctx, arguments))
    }
}

/// A tool a host registered: its spec, whether it is idempotent, and its handler.
pub struct HostTool {
    spec: ToolSpec,
    idempotent: bool,
    handler: Box<dyn ToolHandler>,
}

impl HostTool {
    pub fn new(spec: ToolSpec, idempotent: bool, handler: impl ToolHandler) -> Self {
        Self { spec, idempotent, handler: Box::new(handler) }
    }
}

impl Tool for HostTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn idempotent(&self) -> bool {
        self.idempotent
    }
    fn call(&self, ctx: ToolContext, arguments: Value) -> BoxFuture<'static, Result<String, String>> {
        self.handler.call(ctx, arguments)
    }
}

/// Asked before each call runs, once its arguments passed the schema (the host's
/// `tool.invoked` policy point, issue 29). `Some(why)` refuses the call: it does not run, and
/// the model reads `why` as the call's error result.
#[async_trait::async_trait]
pub trait ToolGate: Send + Sync + 'static {
    async fn refusal(&self, ctx: &ToolContext, name: &str, arguments: &Value) -> Option<String>;
}

struct Entry {
    tool: Arc<dyn Tool>,
    validator: jsonschema::Validator,
}

/// The tools of a harness, by name: its own (host tools), frozen when the harness is built,
/// and those its MCP sources list now.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<BTreeMap<String, Entry>>,
    sources: Vec<Arc<crate::mcp::McpSource>>,
    gate: Option<Arc<dyn ToolGate>>,
    /// Built-in tools the workflow runs itself (`ask_participant`): offered to the model,
    /// never run by `invoke_tool`.
    builtins: Vec<ToolSpec>,
}

/// The names of the built-in tools, which no other tool may take.
pub const BUILTIN_NAMES: &[&str] =
    &[harness_workflow::ASK_PARTICIPANT, harness_workflow::DELEGATE, harness_workflow::a2ui::EMIT_UI];

/// `emit_ui` as the model is told about it (issue 30; the workflow runs it: docs/tools.md):
/// A2UI v0.9 messages in the basic catalog. The arguments' schema says the outline; the
/// workflow checks each message against the A2UI schemas and answers what is wrong.
pub fn emit_ui_spec() -> ToolSpec {
    use harness_workflow::a2ui::BASIC_CATALOG;
    ToolSpec {
        name: harness_workflow::a2ui::EMIT_UI.into(),
        description: format!(
            "Shows the user an interactive surface (A2UI v0.9) beside the conversation.\n\
             Send A2UI messages in order: `createSurface` ({{\"surfaceId\", \"catalogId\": \"{BASIC_CATALOG}\"}}) \
             once per surface, then `updateComponents` ({{\"surfaceId\", \"components\": [...]}}: a flat list, \
             one component with id `root`, children named by id; the basic catalog's components are Text, Image, \
             Icon, Video, AudioPlayer, Row, Column, List, Card, Tabs, Modal, Divider, Button, TextField, CheckBox, \
             ChoicePicker, Slider, DateTimeInput), `updateDataModel` ({{\"surfaceId\", \"path\", \"value\"}}) and \
             `deleteSurface` ({{\"surfaceId\"}}). A Button's `action` is {{\"event\": {{\"name\", \"context\"}}}}: \
             when the user presses it you read `[A2UI action] <name> on surface <id> from <component>: <context>` \
             as their next message. The result says what was shown, or which message is wrong and why."
        ),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "messages": {
                    "type": "array",
                    "minItems": 1,
                    "description": "A2UI v0.9 server-to-client messages, each an object with one of createSurface, \
                                    updateComponents, updateDataModel, deleteSurface.",
                    "items": {"type": "object"}
                }
            },
            "required": ["messages"],
            "additionalProperties": false
        }),
    }
}

/// `delegate` as the model is told about it, naming the remote agents it may hand a brief to
/// (the workflow runs it: docs/tools.md).
pub fn delegate_spec(agents: &[String]) -> ToolSpec {
    ToolSpec {
        name: harness_workflow::DELEGATE.into(),
        description: format!(
            "Hands a piece of work to another agent as a sub-task and waits for its result, which is this \
             tool's result. Write the brief as that agent should read it: what to do and what to answer. The \
             agents: {}.",
            agents.join(", ")
        ),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": agents, "description": "The agent to hand the work to."},
                "brief": {"type": "string", "description": "The work, as the agent will read it."}
            },
            "required": ["agent", "brief"],
            "additionalProperties": false
        }),
    }
}

/// `ask_participant` as the model is told about it (the workflow runs it: docs/tools.md).
pub fn ask_participant_spec() -> ToolSpec {
    ToolSpec {
        name: harness_workflow::ASK_PARTICIPANT.into(),
        description: "Asks a participant of this task a question and waits for the answer, which is this \
                      tool's result. The task shows the question and waits (input required) until that \
                      participant replies. Use it when only a person can give what you need: a fact, a \
                      choice, an approval."
            .into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question, as the participant will read it."},
                "participant": {"type": "string", "description":
                    "The id of the participant to ask; leave it out to take the answer of whoever writes next."}
            },
            "required": ["question"],
            "additionalProperties": false
        }),
    }
}

impl ToolRegistry {
    pub fn builder() -> ToolRegistryBuilder {
        ToolRegistryBuilder::default()
    }

    /// These tools and the tools of `sources` (issue 29: MCP).
    pub fn with_sources(self, sources: Vec<Arc<crate::mcp::McpSource>>) -> Self {
        Self { sources, ..self }
    }

    /// These tools and the built-in `spec`, which the workflow runs.
    pub fn with_builtin(mut self, spec: ToolSpec) -> Self {
        self.builtins.push(spec);
        self
    }

    /// These tools, each call asked of `gate` before it runs.
    pub fn with_gate(self, gate: Arc<dyn ToolGate>) -> Self {
        Self { gate: Some(gate), ..self }
    }

    /// Why `gate` refuses the call, if it does (none without a gate).
    pub async fn refusal(&self, ctx: &ToolContext, name: &str, arguments: &Value) -> Option<String> {
        self.gate.as_ref()?.refusal(ctx, name, arguments).await
    }

    /// The MCP sources.
    pub fn sources(&self) -> &[Arc<crate::mcp::McpSource>] {
        &self.sources
    }

    /// The tools as the model is told about them: the built-ins, the harness's own sorted by
    /// name, then each source's.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let own = self.builtins.iter().cloned().chain(self.tools.values().map(|e| e.tool.spec().clone()));
        own.chain(self.sources.iter().flat_map(|s| s.specs().into_iter().map(|(spec, _)| spec))).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.builtins.is_empty() && self.tools.is_empty() && self.sources.iter().all(|s| s.specs().is_empty())
    }

    /// Whether a tool of that name is known (a built-in, the harness's own, or a source's).
    pub fn knows(&self, name: &str) -> bool {
        self.builtins.iter().any(|spec| spec.name == name)
            || self.tools.contains_key(name)
            || self.sources.iter().any(|s| s.lists(name))
    }

    /// Whether the named tool may run again (unknown tools may not).
    pub fn idempotent(&self, name: &str) -> bool {
        match self.tools.get(name) {
            Some(e) => e.tool.idempotent(),
            None => self.sources.iter().flat_map(|s| s.specs()).any(|(spec, idem)| spec.name == name && idem),
        }
    }

    /// Checks a call against the tool's input schema; the error says what the model got
    /// wrong, naming the argument.
    pub fn check(&self, name: &str, arguments: &str) -> Result<(Arc<dyn Tool>, Value), String> {
        let (tool, compiled);
        let validator = match self.tools.get(name) {
            Some(entry) => {
                tool = entry.tool.clone();
                &entry.validator
            }
            None => {
                let Some(found) = self.sources.iter().find_map(|s| s.tool(name)) else {
                    let known = self.specs().into_iter().map(|s| s.name).collect::<Vec<_>>().join(", ");
                    return Err(format!("there is no tool `{name}` (the tools are: {known})"));
                };
                compiled = jsonschema::validator_for(&found.spec().input_schema)
                    .map_err(|e| format!("the tool `{name}` has an input schema that is not one: {e}"))?;
                tool = found;
                &compiled
            }
        };
        let text = if arguments.trim().is_empty() { "{}" } else { arguments };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("the arguments of `{name}` are not JSON ({e}): {}", shorten(arguments, 200)))?;
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() { e.to_string() } else { format!("at `{at}`: {e}") }
            })
            .collect();
        if !errors.is_empty() {
            return Err(format!("the arguments of `{name}` do not match its input schema: {}", errors.join("; ")));
        }
        Ok((tool, value))
    }
}

/// Collects tools; the first bad registration is the build's error.
#[derive(Default)]
pub struct ToolRegistryBuilder {
    tools: BTreeMap<String, Entry>,
    error: Option<String>,
}

impl ToolRegistryBuilder {
    pub fn register(mut self, tool: Arc<dyn Tool>) -> Self {
        if self.error.is_some() {
            return self;
        }
        let spec = tool.spec();
        let name = spec.name.clone();
        let checked = check_name(&name).and_then(|()| {
            if self.tools.contains_key(&name) {
                return Err(format!("the tool `{name}` is registered twice"));
            }
            if BUILTIN_NAMES.contains(&name.as_str()) {
                return Err(format!("the tool name `{name}` is a built-in tool's (`agent.builtin_tools`)"));
            }
            if !spec.input_schema.is_object() || spec.input_schema.get("type").is_some_and(|t| t != "object") {
                return Err(format!("the input schema of tool `{name}` must be a JSON Schema of an object"));
            }
            jsonschema::validator_for(&spec.input_schema)
                .map_err(|e| format!("the input schema of tool `{name}` is not a JSON Schema: {e}"))
        });
        match checked {
            Ok(validator) => {
                self.tools.insert(name, Entry { tool, validator });
            }
            Err(why) => self.error = Some(why),
        }
        self
    }

    pub fn try_build(self) -> Result<ToolRegistry, String> {
        match self.error {
            Some(why) => Err(why),
            None => Ok(ToolRegistry { tools: Arc::new(self.tools), ..ToolRegistry::default() }),
        }
    }
}

/// A name every provider takes: 1 to 64 of `a-z A-Z 0-9 _ -`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok { Ok(()) } else { Err(format!("`{name}` is not a tool name: use 1 to 64 of a-z, A-Z, 0-9, `_` and `-`")) }
}

pub use harness_workflow::shorten;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> Arc<dyn Tool> {
        let spec = ToolSpec { name: name.into(), description: "d".into(), input_schema: schema };
        Arc::new(HostTool::new(spec, true, |_ctx: ToolContext, args: Value| async move { Ok(args.to_string()) }))
    }

    #[test]
    fn bad_or_repeated_names_and_bad_schemas_are_refused_naming_the_tool() {
        let object = json!({"type": "object"});
        let err = ToolRegistry::builder().register(tool("a b", object.clone())).try_build().err().unwrap();
        assert!(err.contains("`a b` is not a tool name"), "{err}");
        let err = ToolRegistry::builder().register(tool(&"x".repeat(65), object.clone())).try_build().err().unwrap();
        assert!(err.contains("is not a tool name"), "{err}");
        let err = ToolRegistry::builder()
            .register(tool("t", object.clone()))
            .register(tool("t", object.clone()))
            .try_build()
            .err()
            .unwrap();
        assert!(err.contains("`t` is registered twice"), "{err}");
        let err = ToolRegistry::builder().register(tool("t", json!({"type": "string"}))).try_build().err().unwrap();
        assert!(err.contains("must be a JSON Schema of an object"), "{err}");
        let err =
            ToolRegistry::builder().register(tool("t", json!({"type": "object", "properties": {"a": {"type": 7}}})));
        assert!(err.try_build().err().unwrap().contains("is not a JSON Schema"));
    }

    #[test]
    fn a_call_is_checked_against_the_schema_naming_the_argument() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
        let registry = ToolRegistry::builder().register(tool("weather", schema)).try_build().unwrap();
        assert!(registry.check("weather", r#"{"city": "Oslo"}"#).is_ok());
        let err = registry.check("weather", r#"{"city": 7}"#).err().unwrap();
        assert!(err.contains("do not match its input schema") && err.contains("`/city`"), "{err}");
        let err = registry.check("weather", "{}").err().unwrap();
        assert!(err.contains("\"city\" is a required property"), "{err}");
        let err = registry.check("weather", "{not json").err().unwrap();
        assert!(err.contains("are not JSON"), "{err}");
        let err = registry.check("forecast", "{}").err().unwrap();
        assert!(err.contains("there is no tool `forecast` (the tools are: weather)"), "{err}");
    }
}
