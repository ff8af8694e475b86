//! The agent card (S2): built once at start from the `[card]` section over defaults, with
//! absolute interface URLs for both bindings, the capabilities this build has, and the five
//! extensions of EXTENSIONS.md with their params. No security scheme: the deployment's
//! perimeter authenticates.

use crate::config::{CardSection, SkillConfig};
use a2a_types::{AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill, Struct};
use harness_workflow::{
    AWAITING_ASSIGNEE, AWAITING_NEXT_MESSAGE, AWAITING_PARTICIPANT, AWAITING_SUBTASKS, CALLING_TOOLS,
};
use serde_json::json;

/// Base URI of this project's extensions (EXTENSIONS.md `BASE`).
pub const EXT_BASE: &str = "https://madarauchiha-314.github.io/tiny-harness/a2a/ext";
/// The A2UI extension.
pub const A2UI_URI: &str = "https://a2ui.org/a2a-extension/a2ui/v0.9.1";
/// The A2UI catalog this agent's surfaces use.
pub use harness_workflow::a2ui::BASIC_CATALOG as A2UI_BASIC_CATALOG;

/// Media types of EXTENSIONS.md.
pub const TASK_MEDIA_TYPE: &str = "application/vnd.tiny-harness.task+json";
pub const EVENT_MEDIA_TYPE: &str = "application/vnd.tiny-harness.event+json";
pub const CHANNEL_MEDIA_TYPE: &str = "application/vnd.tiny-harness.channel+json";
pub use harness_workflow::a2ui::MEDIA_TYPE as A2UI_MEDIA_TYPE;

pub use harness_agent::commands::CommandInfo;

/// What the card depends on besides the config.
pub struct CardInputs<'a> {
    /// Where clients reach the server (no trailing slash).
    pub base_url: &'a str,
    pub push_notifications: bool,
    /// The frozen command registry.
    pub commands: &'a [CommandInfo],
    /// The model may show A2UI surfaces (`emit_ui`, issue 30): the A2UI extension and media
    /// type are declared only then.
    pub a2ui: bool,
}

fn skill(s: &SkillConfig) -> AgentSkill {
    AgentSkill {
        id: s.id.clone(),
        name: s.name.clone(),
        description: s.description.clone(),
        tags: s.tags.clone(),
        examples: s.examples.clone(),
        ..Default::default()
    }
}

fn params(v: serde_json::Value) -> Option<Struct> {
    v.as_object().cloned()
}

/// The substates this build emits (EXTENSIONS.md, status); `awaiting-subtasks` comes with
/// delegation, `calling-tools` and `awaiting-participant` with tools (issue 29).
pub const SUBSTATES: [&str; 5] =
    [AWAITING_NEXT_MESSAGE, AWAITING_ASSIGNEE, AWAITING_SUBTASKS, CALLING_TOOLS, AWAITING_PARTICIPANT];

/// The five extensions (four without A2UI), each `required: false`.
fn extensions(commands: &[CommandInfo], a2ui: bool) -> Vec<AgentExtension> {
    let mut commands: Vec<&CommandInfo> = commands.iter().collect();
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    let commands: Vec<_> =
        commands.iter().map(|c| json!({"name": c.name, "description": c.description, "usage": c.usage})).collect();
    let ext = |path: &str, description: &str, params: Option<Struct>| AgentExtension {
        uri: format!("{EXT_BASE}/{path}"),
        description: description.into(),
        required: false,
        params,
    };
    let mut all = vec![
        ext("task/v1", "The task's own data (name, goal, participants, sub-tasks) in Task.metadata.", None),
        ext("channel/v1", "A task is a channel among its participants; their messages are echoed as events.", None),
        ext(
            "status/v1",
            "Substates qualifying an A2A state, in metadata of status updates and tasks.",
            params(json!({"substates": SUBSTATES})),
        ),
        ext(
            "commands/v1",
            "Slash commands (`/<name> <arguments>` as a message's whole text).",
            params(json!({"commands": commands})),
        ),
    ];
    if a2ui {
        all.push(AgentExtension {
            uri: A2UI_URI.into(),
            description: "A2UI surfaces as artifacts; user actions as data parts.".into(),
            required: false,
            params: params(
                json!({"supportedCatalogIds": harness_workflow::a2ui::CATALOGS, "acceptsInlineCatalogs": false}),
            ),
        });
    }
    all
}

/// Builds the public card.
pub fn build(config: &CardSection, inputs: &CardInputs<'_>) -> AgentCard {
    let base_url = inputs.base_url.trim_end_matches('/');
    let interface = |path: &str, binding: &str| AgentInterface {
        url: format!("{base_url}{path}"),
        protocol_binding: binding.into(),
        protocol_version: "1.0".into(),
        ..Default::default()
    };
    let skills = if config.skills.is_empty() {
        vec![AgentSkill {
            id: "conversation".into(),
            name: "Conversation".into(),
            description: "Talks with the configured model, one durable task per conversation.".into(),
            tags: vec!["chat".into()],
            ..Default::default()
        }]
    } else {
        config.skills.iter().map(skill).collect()
    };
    let input_modes: Vec<String> =
        ["text/plain", TASK_MEDIA_TYPE, EVENT_MEDIA_TYPE, CHANNEL_MEDIA_TYPE, A2UI_MEDIA_TYPE]
            .into_iter()
            .filter(|m| inputs.a2ui || *m != A2UI_MEDIA_TYPE)
            .map(String::from)
            .collect();
    let output_modes: Vec<String> = input_modes.iter().filter(|m| *m != EVENT_MEDIA_TYPE).cloned().collect();
    AgentCard {
        name: config.name.clone().unwrap_or_else(|| "tiny-harness".into()),
        description: config
            .description
            .clone()
            .unwrap_or_else(|| "A durable A2A agent: every task is a Temporal workflow.".into()),
        supported_interfaces: vec![
            interface(a2a_server::JSONRPC_PATH, "JSONRPC"),
            interface(a2a_server::REST_PATH, "HTTP+JSON"),
        ],
        version: config.version.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").into()),
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(inputs.push_notifications),
            extensions: extensions(inputs.commands, inputs.a2ui),
            extended_agent_card: config.extended.is_some().then_some(true),
        },
        default_input_modes: input_modes,
        default_output_modes: output_modes,
        skills,
        documentation_url: config.documentation_url.clone(),
    }
}

/// The extended card: the public card with the `[card.extended]` description and skills,
/// or `None` when the section is absent.
pub fn build_extended(config: &CardSection, public: &AgentCard) -> Option<AgentCard> {
    let extended = config.extended.as_ref()?;
    let mut card = public.clone();
    if let Some(d) = &extended.description {
        card.description = d.clone();
    }
    card.skills.extend(extended.skills.iter().map(skill));
    Some(card)
}
