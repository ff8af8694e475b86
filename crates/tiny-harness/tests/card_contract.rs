//! The agent card is a contract (S2): its JSON is pinned by an insta snapshot. A change to
//! the card fails here until it is reviewed and refreshed with `cargo xtask contract`.

use tiny_harness::card::{CardInputs, build, build_extended};
use tiny_harness::config::{CardSection, ExtendedCardSection, SkillConfig};

#[test]
fn the_default_card_matches_its_snapshot() {
    let card = build(
        &CardSection::default(),
        &CardInputs {
            base_url: "http://127.0.0.1:8080",
            push_notifications: true,
            commands: &harness_agent::commands::CommandRegistry::default().list(),
            // The default config offers `emit_ui` (issue 30).
            a2ui: tiny_harness::config::Config::default().tool_limits().unwrap().emit_ui,
        },
    );
    let mut json = serde_json::to_value(&card).unwrap();
    // The version follows the crate's; the snapshot pins everything else.
    json["version"] = "<crate version>".into();
    insta::assert_snapshot!(serde_json::to_string_pretty(&json).unwrap());
}

#[test]
fn the_card_section_overrides_the_defaults_and_declares_the_extended_card() {
    let section = CardSection {
        name: Some("helper".into()),
        description: Some("Helps.".into()),
        version: Some("2.0.0".into()),
        documentation_url: Some("https://example.com/docs".into()),
        skills: vec![SkillConfig { id: "s".into(), name: "S".into(), ..Default::default() }],
        extended: Some(ExtendedCardSection {
            description: Some("More.".into()),
            skills: vec![SkillConfig { id: "x".into(), name: "X".into(), ..Default::default() }],
        }),
    };
    let inputs =
        CardInputs { base_url: "https://agents.example.com/", push_notifications: false, commands: &[], a2ui: false };
    let card = build(&section, &inputs);
    assert_eq!((card.name.as_str(), card.version.as_str()), ("helper", "2.0.0"));
    assert_eq!(card.supported_interfaces[0].url, "https://agents.example.com/a2a/jsonrpc");
    assert_eq!(card.capabilities.push_notifications, Some(false));
    assert_eq!(card.capabilities.extended_agent_card, Some(true));
    let extended = build_extended(&section, &card).unwrap();
    assert_eq!(extended.description, "More.");
    assert_eq!(extended.skills.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["s", "x"]);
    assert!(build_extended(&CardSection::default(), &card).is_none());
    // Without `emit_ui` the card promises no A2UI (issue 30): no extension, no media type.
    assert!(card.capabilities.extensions.iter().all(|e| !e.uri.contains("a2ui")), "{:?}", card.capabilities.extensions);
    assert!(!card.default_input_modes.iter().any(|m| m == "application/a2ui+json"));
}

/// Issue 18: the event-envelope schema this project publishes (docs/schemas/) is the one the
/// harness validates with, and a change to it is reviewed here (`cargo xtask contract`).
#[test]
fn the_published_envelope_schema_matches_its_snapshot() {
    let schema: serde_json::Value = serde_json::from_str(tiny_harness::ENVELOPE_SCHEMA).unwrap();
    insta::assert_snapshot!(serde_json::to_string_pretty(&schema).unwrap());
}
