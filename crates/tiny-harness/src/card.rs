//! The agent card (S2): name, interfaces with absolute URLs for both bindings, capabilities.

use a2a_types::{AgentCapabilities, AgentCard, AgentInterface, AgentSkill};

/// Builds the card for a server reachable at `base_url` (no trailing slash).
pub fn build(base_url: &str) -> AgentCard {
    let interface = |path: &str, binding: &str| AgentInterface {
        url: format!("{base_url}{path}"),
        protocol_binding: binding.into(),
        protocol_version: "1.0".into(),
        ..Default::default()
    };
    AgentCard {
        name: "tiny-harness".into(),
        description: "A durable A2A agent: every task is a Temporal workflow.".into(),
        supported_interfaces: vec![
            interface(a2a_server::JSONRPC_PATH, "JSONRPC"),
            interface(a2a_server::REST_PATH, "HTTP+JSON"),
        ],
        version: env!("CARGO_PKG_VERSION").into(),
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            ..Default::default()
        },
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![AgentSkill {
            id: "conversation".into(),
            name: "Conversation".into(),
            description: "Talks with the configured model, one durable task per conversation.".into(),
            tags: vec!["chat".into()],
            ..Default::default()
        }],
        documentation_url: None,
    }
}
