//! Slash commands (S9): a registry of named commands, frozen when the harness is built and
//! published on the card, that the `run_command` activity runs. Built in: `/help` and
//! `/status`; host code registers more through the `Harness` builder.

use crate::CommandContext;
use crate::tools::ToolSpec;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What runs a command: gets the task's context and the arguments, returns the reply text
/// (an `Err` is the reply too, marked failed). Any `async` closure
/// `Fn(CommandContext, String) -> impl Future<Output = Result<String, String>>` is one.
pub trait CommandHandler: Send + Sync + 'static {
    fn run(&self, ctx: CommandContext, args: String) -> BoxFuture<'static, Result<String, String>>;
}

impl<F, Fut> CommandHandler for F
where
    F: Fn(CommandContext, String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, String>> + Send + 'static,
{
    fn run(&self, ctx: CommandContext, args: String) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(self(ctx, args))
    }
}

/// A command as the card publishes it (EXTENSIONS.md, commands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    pub usage: String,
}

/// A registered command.
#[derive(Clone)]
struct Command {
    info: CommandInfo,
    /// `None` for a built-in, which the registry answers itself.
    handler: Option<Arc<dyn CommandHandler>>,
}

/// The names this build keeps for itself: its built-ins, and `delegate` (delegation).
const RESERVED: &[&str] = &["help", "status", "delegate"];

/// The commands of this agent, by name. Cloning shares them; nothing can be added once a
/// harness is built (the registry is frozen at start, S9).
#[derive(Clone)]
pub struct CommandRegistry {
    commands: Arc<BTreeMap<String, Command>>,
    /// The remote agents `/delegate` may name (issue 19); empty: no `/delegate`.
    delegates: Arc<Vec<String>>,
}

impl Default for CommandRegistry {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl CommandRegistry {
    /// A registry with the built-ins; add host commands, then [`CommandRegistryBuilder::build`].
    pub fn builder() -> CommandRegistryBuilder {
        let mut commands = BTreeMap::new();
        for (name, description, usage) in [
            ("help", "Lists the commands this agent takes.", "/help"),
            (
                "status",
                "Shows the task's state, substate, turn, participants, open sub-tasks, waiting messages and the \
                 model's tools.",
                "/status",
            ),
        ] {
            let info = CommandInfo { name: name.into(), description: description.into(), usage: usage.into() };
            commands.insert(name.to_string(), Command { info, handler: None });
        }
        CommandRegistryBuilder { commands, error: None, delegates: Vec::new() }
    }

    /// The commands, sorted by name.
    pub fn list(&self) -> Vec<CommandInfo> {
        self.commands.values().map(|c| c.info.clone()).collect()
    }

    /// The command a message's whole text names: `/<name>` or `/<name> <args>` for a
    /// registered name; `None` for anything else (an ordinary message).
    pub fn parse(&self, text: &str) -> Option<(String, String)> {
        let rest = text.trim().strip_prefix('/')?;
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        self.commands.contains_key(name).then(|| (name.to_string(), args.trim().to_string()))
    }

    /// Runs a command; an unknown name (a registry changed since the message was admitted)
    /// and a handler's error are failed replies that say so. `tools` are the tools the model
    /// may call now, which `/help` and `/status` list (issue 29).
    pub async fn run(&self, ctx: CommandContext, tools: &[ToolSpec]) -> Result<String, String> {
        let Some(command) = self.commands.get(&ctx.name) else {
            return Err(format!("/{} is not a command of this agent (any more); /help lists them", ctx.name));
        };
        match (&command.handler, command.info.name.as_str()) {
            (Some(handler), _) => {
                let args = ctx.args.clone();
                handler.run(ctx, args).await
            }
            (None, "help") => Ok(self.help(tools)),
            (None, "delegate") => Err("/delegate is run by the task's workflow, not as an activity".into()),
            (None, _) => Ok(status(&ctx, tools)),
        }
    }

    /// Whether `/delegate <args>` names a configured agent and a brief: the refusal says
    /// what is wrong and how the command goes.
    pub fn check_delegate(&self, args: &str) -> Result<(), String> {
        let usage = "usage: /delegate <agent-id> <brief text>";
        let (agent, brief) = delegate_args(args);
        if agent.is_empty() {
            return Err(format!("/delegate names no agent ({usage}; agents: {})", self.delegates.join(", ")));
        }
        if !self.delegates.iter().any(|d| d == agent) {
            return Err(format!(
                "/delegate: no remote agent `{agent}` is configured (agents: {}; {usage})",
                self.delegates.join(", ")
            ));
        }
        if brief.trim().is_empty() {
            return Err(format!("/delegate {agent}: the brief is empty ({usage})"));
        }
        Ok(())
    }

    /// `/help`: one line per command, then one per tool the model may call (the first line
    /// of its description).
    fn help(&self, tools: &[ToolSpec]) -> String {
        let lines: Vec<String> =
            self.commands.values().map(|c| format!("{} — {}", c.info.usage, c.info.description)).collect();
        let tools = if tools.is_empty() {
            "Tools: none (the model answers without calling any).".to_string()
        } else {
            let lines: Vec<String> = tools
                .iter()
                .map(|t| match t.description.lines().next().map(str::trim).filter(|d| !d.is_empty()) {
                    Some(d) => format!("{} — {d}", t.name),
                    None => t.name.clone(),
                })
                .collect();
            format!("Tools the model may call:\n{}", lines.join("\n"))
        };
        format!("Commands:\n{}\n\n{tools}", lines.join("\n"))
    }
}

pub use harness_workflow::delegate_args;

/// `/status`: the task as its dispatcher sees it, and the tools the model may call.
fn status(ctx: &CommandContext, tools: &[ToolSpec]) -> String {
    let state = match &ctx.substate {
        Some(sub) => format!("{} · {sub}", ctx.state),
        None => ctx.state.to_string(),
    };
    let participants = if ctx.participants.is_empty() {
        "none".to_string()
    } else {
        ctx.participants.iter().map(|p| format!("{} ({})", p.id, p.role)).collect::<Vec<_>>().join(", ")
    };
    let sub_tasks = if ctx.open_sub_tasks.is_empty() { "none".to_string() } else { ctx.open_sub_tasks.join(", ") };
    let tools = if tools.is_empty() {
        "none".to_string()
    } else {
        format!("{} ({})", tools.len(), tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", "))
    };
    format!(
        "state: {state}\nturn: {}\nparticipants: {participants}\nopen sub-tasks: {sub_tasks}\nwaiting messages: {}\n\
         tools: {tools}",
        ctx.turn, ctx.mailbox_depth
    )
}

/// Collects host commands; the first bad registration is the build's error.
pub struct CommandRegistryBuilder {
    commands: BTreeMap<String, Command>,
    error: Option<String>,
    delegates: Vec<String>,
}

impl CommandRegistryBuilder {
    /// Adds a command. A name must be lowercase letters, digits, `-` or `_`, and neither a
    /// built-in's nor one registered before.
    pub fn register(mut self, info: CommandInfo, handler: impl CommandHandler) -> Self {
        if self.error.is_some() {
            return self;
        }
        let name = info.name.clone();
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !valid {
            self.error = Some(format!("command name `{name}` must be lowercase letters, digits, `-` or `_`"));
        } else if RESERVED.contains(&name.as_str()) {
            self.error = Some(format!("command name `{name}` is built in"));
        } else {
            match self.commands.entry(name) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    self.error = Some(format!("command `{}` is registered twice", e.key()));
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(Command { info, handler: Some(Arc::new(handler)) });
                }
            }
        }
        self
    }

    /// Adds the built-in `/delegate` for these remote agents (none: no `/delegate`).
    pub fn delegation(mut self, agents: Vec<String>) -> Self {
        if agents.is_empty() {
            return self;
        }
        let info = CommandInfo {
            name: "delegate".into(),
            description: format!("Hands a sub-task to a remote A2A agent ({}).", agents.join(", ")),
            usage: "/delegate <agent-id> <brief text>".into(),
        };
        self.commands.insert("delegate".into(), Command { info, handler: None });
        self.delegates = agents;
        self
    }

    /// The frozen registry, or why a registration was refused.
    pub fn try_build(self) -> Result<CommandRegistry, String> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(CommandRegistry { commands: Arc::new(self.commands), delegates: Arc::new(self.delegates) }),
        }
    }

    fn build(self) -> CommandRegistry {
        CommandRegistry { commands: Arc::new(self.commands), delegates: Arc::new(self.delegates) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> CommandInfo {
        CommandInfo { name: name.into(), description: "d".into(), usage: format!("/{name}") }
    }

    async fn shout(_ctx: CommandContext, args: String) -> Result<String, String> {
        Ok(args.to_uppercase())
    }

    #[test]
    fn a_message_is_a_command_only_when_its_whole_text_names_a_registered_one() {
        let r = CommandRegistry::builder().register(info("shout"), shout).try_build().unwrap();
        assert_eq!(r.parse("/help"), Some(("help".into(), String::new())));
        assert_eq!(r.parse("  /shout  hello  there "), Some(("shout".into(), "hello  there".into())));
        assert_eq!(r.parse("/unknown thing"), None, "an unregistered name is an ordinary message");
        assert_eq!(r.parse("please /help"), None);
        assert_eq!(r.parse("/"), None);
        assert_eq!(r.list().iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["help", "shout", "status"]);
    }

    #[test]
    fn a_bad_a_built_in_or_a_twice_registered_name_is_refused_naming_it() {
        let bad = |b: CommandRegistryBuilder| b.try_build().err().unwrap();
        assert!(bad(CommandRegistry::builder().register(info("Shout"), shout)).contains("`Shout`"));
        assert!(bad(CommandRegistry::builder().register(info("help"), shout)).contains("built in"));
        assert!(bad(CommandRegistry::builder().register(info("delegate"), shout)).contains("built in"));
        let twice = CommandRegistry::builder().register(info("x"), shout).register(info("x"), shout);
        assert!(bad(twice).contains("twice"));
    }

    #[tokio::test]
    async fn help_lists_every_command_status_names_the_task_and_a_host_command_gets_its_args() {
        let r = CommandRegistry::builder().register(info("shout"), shout).try_build().unwrap();
        let ctx = |name: &str, args: &str| CommandContext {
            name: name.into(),
            args: args.into(),
            turn: 3,
            mailbox_depth: 1,
            substate: Some("awaiting-next-message".into()),
            state: a2a_types::TaskState::InputRequired,
            participants: vec![crate::Participant {
                id: "alice".into(),
                role: "reporter".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let tools = [
            ToolSpec {
                name: "lookup".into(),
                description: "Finds a record.\nLonger text the model reads.".into(),
                input_schema: serde_json::json!({"type": "object"}),
            },
            ToolSpec { name: "crm__note".into(), description: String::new(), input_schema: serde_json::json!({}) },
        ];
        let help = r.run(ctx("help", ""), &tools).await.unwrap();
        for usage in ["/help", "/shout", "/status"] {
            assert!(help.contains(usage), "{help}");
        }
        // Issue 29: the tools, each with the first line of its description.
        assert!(help.ends_with("Tools the model may call:\nlookup — Finds a record.\ncrm__note"), "{help}");
        let none = r.run(ctx("help", ""), &[]).await.unwrap();
        assert!(none.ends_with("Tools: none (the model answers without calling any)."), "{none}");
        let status = r.run(ctx("status", ""), &tools).await.unwrap();
        assert!(status.contains("TASK_STATE_INPUT_REQUIRED · awaiting-next-message"), "{status}");
        assert!(status.contains("turn: 3") && status.contains("alice (reporter)"), "{status}");
        assert!(status.contains("waiting messages: 1") && status.contains("open sub-tasks: none"), "{status}");
        assert!(status.ends_with("tools: 2 (lookup, crm__note)"), "{status}");
        assert!(r.run(ctx("status", ""), &[]).await.unwrap().ends_with("tools: none"));
        assert_eq!(r.run(ctx("shout", "hi"), &tools).await.unwrap(), "HI");
        assert!(r.run(ctx("gone", ""), &[]).await.unwrap_err().contains("/gone"));
    }
}
