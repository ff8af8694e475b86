//! A2UI v0.9 (issue 30, S12, EXTENSIONS.md "A2UI"): what the model may show with the
//! built-in `emit_ui`, the surfaces a task has open, and the actions a renderer sends back.
//!
//! Messages are checked against the A2UI v0.9 JSON schemas vendored from the renderer
//! package (`a2ui/README.md` beside this crate): each component against its own schema in
//! the basic catalog, then each message against its own kind, so an error names the message,
//! the component and the schema path. The surfaces registry travels in the workflow's
//! carried state, so an action is checked against what the task really showed, across
//! continue-as-new. Everything here is pure computation (no I/O, no clock): the workflow
//! may call it.

use a2a_types::{Message, Struct};
use jsonschema::{Registry, Validator};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// The built-in tool that shows A2UI surfaces.
pub const EMIT_UI: &str = "emit_ui";
/// The media type of an A2UI data part, both ways.
pub const MEDIA_TYPE: &str = "application/a2ui+json";
/// The A2UI version this server writes (the extension's, v0.9.1); it reads `v0.9` too.
pub const VERSION: &str = "v0.9.1";
/// The versions a message may carry (the renderers' own checks take both).
pub const VERSIONS: &[&str] = &["v0.9", "v0.9.1"];
/// The basic catalog, the one catalog this server's surfaces use.
pub const BASIC_CATALOG: &str = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json";
/// The catalogs `emit_ui` takes (the card's A2UI params say the same).
pub const CATALOGS: &[&str] = &[BASIC_CATALOG];
/// The refusal code of an action on a surface the task did not create, or from a component
/// not on it.
pub const UNKNOWN_SURFACE_OR_COMPONENT: &str = "a2ui.unknown_surface_or_component";
/// The message metadata key a client names the catalogs it renders with.
pub const CLIENT_CAPABILITIES_KEY: &str = "a2uiClientCapabilities";
/// The artifact name of an emission (its id is `a2ui:<n>`).
pub const ARTIFACT_NAME: &str = "a2ui";
/// How many surfaces a task may have open, and components one surface may have: the
/// registry travels in the workflow's state.
pub const MAX_SURFACES: usize = 64;
pub const MAX_COMPONENTS: usize = 1000;

/// The surfaces a task has open, what it has emitted, and what its client renders.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Surfaces {
    /// Open surfaces by id, each with the ids of its components.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub open: BTreeMap<String, BTreeSet<String>>,
    /// Emissions so far: the next artifact is `a2ui:<emitted + 1>`.
    #[serde(default, skip_serializing_if = "crate::types::is_zero")]
    pub emitted: u32,
    /// The catalogs the newest client that said so renders with (`a2uiClientCapabilities`
    /// in a message's metadata); `None`: no client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_catalogs: Option<Vec<String>>,
}

/// An accepted emission: the messages as they are sent, each as `<kind> <surface id>` for
/// the model's result, and the registry after them.
#[derive(Clone, Debug, PartialEq)]
pub struct Emission {
    pub messages: Vec<Value>,
    pub shown: Vec<String>,
    pub surfaces: Surfaces,
}

impl Surfaces {
    /// Nothing open, emitted or said: nothing to carry.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Notes the catalogs a message's sender renders with, when its metadata says.
    pub fn note_client(&mut self, metadata: Option<&Struct>) {
        if let Some(catalogs) = metadata.and_then(client_catalogs) {
            self.client_catalogs = Some(catalogs);
        }
    }

    /// The catalogs a surface may use now: this server's, and of those the client's when it
    /// said.
    pub fn usable_catalogs(&self) -> Vec<String> {
        CATALOGS
            .iter()
            .filter(|c| self.client_catalogs.as_ref().is_none_or(|theirs| theirs.iter().any(|t| t == *c)))
            .map(|c| c.to_string())
            .collect()
    }

    /// Checks `emit_ui`'s arguments (`{"messages": [...]}`) against the schemas and these
    /// surfaces; all or nothing. The error is what the model reads: it names the message, the
    /// component and the schema path.
    pub fn check_emission(&self, arguments: &str) -> Result<Emission, String> {
        let text = if arguments.trim().is_empty() { "{}" } else { arguments };
        let args: Value =
            serde_json::from_str(text).map_err(|e| format!("the arguments of `{EMIT_UI}` are not JSON ({e})"))?;
        let Some(messages) = args.as_object().and_then(|o| o.get("messages")).and_then(Value::as_array) else {
            return Err(format!("`{EMIT_UI}` takes `messages`: an array of A2UI v0.9 messages"));
        };
        if let Some(extra) = args.as_object().and_then(|o| o.keys().find(|k| *k != "messages")) {
            return Err(format!("`{EMIT_UI}` takes `messages` only, not `{extra}`"));
        }
        if messages.is_empty() {
            return Err(format!("`{EMIT_UI}`: `messages` is empty"));
        }
        let mut after = self.clone();
        let (mut out, mut shown) = (Vec::with_capacity(messages.len()), Vec::with_capacity(messages.len()));
        for (i, message) in messages.iter().enumerate() {
            let (message, what) = after.apply(message).map_err(|why| format!("messages[{i}]{why}"))?;
            out.push(message);
            shown.push(what);
        }
        after.emitted += 1;
        Ok(Emission { messages: out, shown, surfaces: after })
    }

    /// Checks one message and applies it: the message as sent and `<kind> <surface id>`; the
    /// error follows `messages[i]`.
    fn apply(&mut self, message: &Value) -> Result<(Value, String), String> {
        let Some(object) = message.as_object() else {
            return Err(": an A2UI message must be a JSON object".into());
        };
        let mut message = object.clone();
        if let Some(other) = message.get("version").filter(|v| !v.as_str().is_some_and(|v| VERSIONS.contains(&v))) {
            return Err(format!(
                ".version: {other} is not an A2UI version this server speaks ({})",
                VERSIONS.join(", ")
            ));
        }
        message.insert("version".into(), json!(VERSION));
        let present: Vec<usize> = (0..KINDS.len()).filter(|&at| message.contains_key(KINDS[at])).collect();
        let [at] = present[..] else {
            return Err(format!(": an A2UI message has exactly one of {}", KINDS.join(", ")));
        };
        let kind = KINDS[at];
        let schemas = schemas();
        if kind == "updateComponents"
            && let Some(components) = message.get(kind).and_then(|u| u.get("components")).and_then(Value::as_array)
        {
            for (j, component) in components.iter().enumerate() {
                check_component(schemas, component).map_err(|why| format!(".updateComponents.components[{j}]{why}"))?;
            }
        }
        let message = Value::Object(message);
        if let Some(e) = schemas.messages[at].iter_errors(&message).next() {
            return Err(located(&e, &format!("server_to_client.json#/$defs/{}", DEFS[at])));
        }
        let body = &message[kind];
        let surface_id = body["surfaceId"].as_str().unwrap_or_default().to_string();
        match kind {
            "createSurface" => {
                if self.open.contains_key(&surface_id) {
                    return Err(format!(
                        ".createSurface: surface `{surface_id}` is open already (update it, or delete it first)"
                    ));
                }
                let catalog = body["catalogId"].as_str().unwrap_or_default();
                let usable = self.usable_catalogs();
                if !usable.iter().any(|c| c == catalog) {
                    return Err(if CATALOGS.contains(&catalog) {
                        format!(
                            ".createSurface.catalogId: the client does not render catalog `{catalog}` (it said it renders: {})",
                            self.client_catalogs.clone().unwrap_or_default().join(", ")
                        )
                    } else {
                        format!(
                            ".createSurface.catalogId: `{catalog}` is not a catalog this agent uses (use {BASIC_CATALOG})"
                        )
                    });
                }
                if self.open.len() >= MAX_SURFACES {
                    return Err(format!(".createSurface: {MAX_SURFACES} surfaces are open already; delete one first"));
                }
                self.open.insert(surface_id.clone(), BTreeSet::new());
            }
            _ => {
                let Some(components) = self.open.get_mut(&surface_id) else {
                    return Err(format!(
                        ".{kind}.surfaceId: there is no open surface `{surface_id}` (create it first)"
                    ));
                };
                match kind {
                    "updateComponents" => {
                        for c in body["components"].as_array().into_iter().flatten() {
                            components.insert(c["id"].as_str().unwrap_or_default().to_string());
                        }
                        if components.len() > MAX_COMPONENTS {
                            return Err(format!(
                                ".updateComponents: surface `{surface_id}` would have more than {MAX_COMPONENTS} components"
                            ));
                        }
                    }
                    "deleteSurface" => {
                        self.open.remove(&surface_id);
                    }
                    _ => {}
                }
            }
        }
        let shown = format!("{kind} {surface_id}");
        Ok((message, shown))
    }

    /// Checks the A2UI parts of a user message (an action or a renderer's error): each must be
    /// a v0.9 client-to-server message about a surface this task has open (and, for an action,
    /// a component on it).
    pub fn check_incoming(&self, message: &Message) -> Result<(), IncomingError> {
        for (i, part) in message.parts.iter().enumerate() {
            if part.media_type != MEDIA_TYPE {
                continue;
            }
            let invalid = |why: String| IncomingError { message: format!("parts[{i}]: {why}"), code: None };
            let Some(data) = part.data.as_ref().and_then(Value::as_object) else {
                return Err(invalid(format!("an `{MEDIA_TYPE}` part carries a JSON object as `data`")));
            };
            if let Some(e) = schemas().client.iter_errors(&Value::Object(data.clone())).next() {
                return Err(invalid(format!(
                    "not an A2UI v0.9 client-to-server message{}",
                    located(&e, "client_to_server.json")
                )));
            }
            let (surface_id, component) = match (data.get("action"), data.get("error")) {
                (Some(action), _) => (action["surfaceId"].as_str(), action["sourceComponentId"].as_str()),
                (None, Some(error)) => (error["surfaceId"].as_str(), None),
                (None, None) => (None, None),
            };
            let surface_id = surface_id.unwrap_or_default();
            let unknown = |message: String| IncomingError {
                message: format!("parts[{i}]: {message}"),
                code: Some(UNKNOWN_SURFACE_OR_COMPONENT),
            };
            let Some(surface) = self.open.get(surface_id) else {
                return Err(unknown(format!("this task has no open A2UI surface `{surface_id}`")));
            };
            if let Some(component) = component
                && !surface.contains(component)
            {
                return Err(unknown(format!("A2UI surface `{surface_id}` has no component `{component}`")));
            }
        }
        Ok(())
    }
}

/// Why a user message's A2UI part was refused: its text, and the code a client can test for
/// ([`UNKNOWN_SURFACE_OR_COMPONENT`]), none for a malformed part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingError {
    pub message: String,
    pub code: Option<&'static str>,
}

/// How the model reads an A2UI part of a user message: one line naming it, `None` for
/// anything else.
pub fn model_line(part: &a2a_types::Part) -> Option<String> {
    if part.media_type != MEDIA_TYPE {
        return None;
    }
    let data = part.data.as_ref()?;
    if let Some(action) = data.get("action") {
        let context = action.get("context").cloned().unwrap_or_else(|| json!({}));
        return Some(format!(
            "[A2UI action] {} on surface {} from {}: {}",
            action["name"].as_str().unwrap_or_default(),
            action["surfaceId"].as_str().unwrap_or_default(),
            action["sourceComponentId"].as_str().unwrap_or_default(),
            context
        ));
    }
    let error = data.get("error")?;
    Some(format!(
        "[A2UI error] {} on surface {}: {}",
        error["code"].as_str().unwrap_or_default(),
        error["surfaceId"].as_str().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default()
    ))
}

/// The catalogs `a2uiClientCapabilities` names (under a `v0.9` or `v0.9.1` key).
fn client_catalogs(metadata: &Struct) -> Option<Vec<String>> {
    let caps = metadata.get(CLIENT_CAPABILITIES_KEY)?.as_object()?;
    let mut out: Vec<String> = VERSIONS
        .iter()
        .filter_map(|v| caps.get(*v)?.get("supportedCatalogIds")?.as_array().cloned())
        .flatten()
        .filter_map(|c| c.as_str().map(String::from))
        .collect();
    out.dedup();
    Some(out)
}

/// The four server-to-client messages, each by its key, and the schema `$defs` checking it.
const KINDS: &[&str] = &["createSurface", "updateComponents", "updateDataModel", "deleteSurface"];
const DEFS: &[&str] =
    &["CreateSurfaceMessage", "UpdateComponentsMessage", "UpdateDataModelMessage", "DeleteSurfaceMessage"];

/// The compiled schemas.
struct Schemas {
    /// One per [`KINDS`].
    messages: Vec<Validator>,
    /// The basic catalog's components by name.
    components: BTreeMap<String, Validator>,
    client: Validator,
}

const BASE: &str = "https://a2ui.org/specification/v0_9/";

fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(compile)
}

/// A vendored schema, its `version` consts widened to [`VERSIONS`] (a2ui/README.md).
fn load(text: &str) -> Value {
    let mut value: Value = serde_json::from_str(text).expect("a vendored A2UI schema is JSON");
    widen_versions(&mut value);
    value
}

fn widen_versions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(v) = map.get_mut("version")
                && v.get("const").is_some_and(|c| c == "v0.9")
            {
                *v = json!({"enum": VERSIONS});
            }
            map.values_mut().for_each(widen_versions);
        }
        Value::Array(items) => items.iter_mut().for_each(widen_versions),
        _ => {}
    }
}

fn compile() -> Schemas {
    let catalog = load(include_str!("../a2ui/v0_9/catalogs/basic/catalog.json"));
    let server = load(include_str!("../a2ui/v0_9/server_to_client.json"));
    let client = load(include_str!("../a2ui/v0_9/client_to_server.json"));
    let common = load(include_str!("../a2ui/v0_9/common_types.json"));
    // The messages name their catalog as `catalog.json` beside them: the basic one here.
    let mut as_catalog = catalog.clone();
    as_catalog.as_object_mut().map(|o| o.remove("$id"));
    let registry = Registry::new()
        .add(format!("{BASE}server_to_client.json"), server)
        .and_then(|r| r.add(format!("{BASE}common_types.json"), common))
        .and_then(|r| r.add(format!("{BASE}catalog.json"), as_catalog))
        .and_then(|r| r.add(BASIC_CATALOG, catalog.clone()))
        .and_then(|r| r.prepare())
        .expect("the vendored A2UI schemas register");
    let build = |schema: Value| {
        jsonschema::options().with_registry(&registry).build(&schema).expect("a vendored A2UI schema compiles")
    };
    let messages =
        DEFS.iter().map(|d| build(json!({"$ref": format!("{BASE}server_to_client.json#/$defs/{d}")}))).collect();
    let components = catalog["components"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, _)| (name.clone(), build(json!({"$ref": format!("{BASIC_CATALOG}#/components/{name}")}))))
        .collect();
    let mut client_schema = client;
    client_schema["$id"] = json!(format!("{BASE}client_to_server.json"));
    Schemas { messages, components, client: build(client_schema) }
}

/// One component of an `updateComponents`, against its catalog entry.
fn check_component(schemas: &Schemas, component: &Value) -> Result<(), String> {
    let name = component.get("component").and_then(Value::as_str);
    let id = component.get("id").and_then(Value::as_str).unwrap_or("?");
    let Some(name) = name else {
        return Err(format!(" (`{id}`): a component names its type in `component`"));
    };
    let Some(validator) = schemas.components.get(name) else {
        let known: Vec<&str> = schemas.components.keys().map(String::as_str).collect();
        return Err(format!(
            " (`{id}`): `{name}` is not a component of the basic catalog (it has {})",
            known.join(", ")
        ));
    };
    match validator.iter_errors(component).next() {
        Some(e) => Err(format!(" (`{id}`, {name}){}", located(&e, &format!("catalog.json#/components/{name}")))),
        None => Ok(()),
    }
}

/// A schema error as the model or a client reads it: where in the instance, what, and which
/// schema rule.
fn located(e: &jsonschema::ValidationError<'_>, schema: &str) -> String {
    let at = e.instance_path().to_string();
    let at = if at.is_empty() { String::new() } else { format!(" at {at}") };
    format!("{at}: {e} (schema {schema}{})", e.schema_path())
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a_types::Part;

    fn examples() -> Vec<(String, Value)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("a2ui/v0_9/catalogs/basic/examples");
        let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.display().to_string(), serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    #[test]
    fn every_example_of_the_renderer_package_is_accepted() {
        let examples = examples();
        assert!(examples.len() >= 20, "the vendored examples are there");
        for (path, example) in examples {
            let args = json!({"messages": example["messages"]}).to_string();
            let emission = Surfaces::default().check_emission(&args).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert!(emission.messages.iter().all(|m| m["version"] == VERSION), "{path}: written as {VERSION}");
            assert_eq!(emission.surfaces.emitted, 1);
        }
    }

    fn button_surface() -> String {
        json!({"messages": [
            {"version": "v0.9", "createSurface": {"surfaceId": "s1", "catalogId": BASIC_CATALOG}},
            {"updateComponents": {"surfaceId": "s1", "components": [
                {"id": "root", "component": "Column", "children": ["go"]},
                {"id": "go", "component": "Button", "child": "label", "action": {"event": {"name": "go", "context": {}}}},
                {"id": "label", "component": "Text", "text": "Go"}
            ]}}
        ]})
        .to_string()
    }

    #[test]
    fn an_emission_opens_surfaces_and_names_what_is_wrong() {
        let open = Surfaces::default().check_emission(&button_surface()).unwrap().surfaces;
        assert_eq!(open.open["s1"], ["go", "label", "root"].map(String::from).into());
        // A component's own schema is named, with where in the component the error is.
        let bad = json!({"messages": [{"updateComponents": {"surfaceId": "s1", "components": [
            {"id": "go", "component": "Button", "child": "label"}]}}]});
        let err = open.check_emission(&bad.to_string()).unwrap_err();
        assert!(err.starts_with("messages[0].updateComponents.components[0] (`go`, Button)"), "{err}");
        assert!(err.contains("\"action\" is a required property"), "{err}");
        assert!(err.contains("schema catalog.json#/components/Button"), "{err}");
        // An unknown component type names the catalog's.
        let bad = json!({"messages": [{"updateComponents": {"surfaceId": "s1", "components": [
            {"id": "x", "component": "Carousel"}]}}]});
        let err = open.check_emission(&bad.to_string()).unwrap_err();
        assert!(err.contains("`Carousel` is not a component of the basic catalog"), "{err}");
        // A message of the wrong shape names its schema definition.
        let bad = json!({"messages": [{"deleteSurface": {"surfaceId": "s1", "now": true}}]});
        let err = open.check_emission(&bad.to_string()).unwrap_err();
        assert!(err.contains("server_to_client.json#/$defs/DeleteSurfaceMessage"), "{err}");
        // All or nothing: a later bad message leaves no surface of an earlier one.
        let bad = json!({"messages": [
            {"createSurface": {"surfaceId": "s2", "catalogId": BASIC_CATALOG}},
            {"updateDataModel": {"surfaceId": "nope", "value": {}}}]});
        let err = open.check_emission(&bad.to_string()).unwrap_err();
        assert_eq!(err, "messages[1].updateDataModel.surfaceId: there is no open surface `nope` (create it first)");
        // Surfaces are created once, in a catalog this agent uses.
        let again = json!({"messages": [{"createSurface": {"surfaceId": "s1", "catalogId": BASIC_CATALOG}}]});
        assert!(open.check_emission(&again.to_string()).unwrap_err().contains("is open already"));
        let other = json!({"messages": [{"createSurface": {"surfaceId": "s3", "catalogId": "https://x/c.json"}}]});
        assert!(open.check_emission(&other.to_string()).unwrap_err().contains("is not a catalog this agent uses"));
        // Deleting closes it.
        let delete = json!({"messages": [{"deleteSurface": {"surfaceId": "s1"}}]});
        assert!(open.check_emission(&delete.to_string()).unwrap().surfaces.open.is_empty());
    }

    #[test]
    fn a_client_that_renders_other_catalogs_gets_no_basic_surface() {
        let mut s = Surfaces::default();
        let caps = json!({"v0.9": {"supportedCatalogIds": ["https://example.com/mine.json"]}});
        s.note_client(Some(&Struct::from_iter([(CLIENT_CAPABILITIES_KEY.to_string(), caps)])));
        assert!(s.usable_catalogs().is_empty());
        let err = s.check_emission(&button_surface()).unwrap_err();
        assert!(err.contains("the client does not render catalog"), "{err}");
        let caps = json!({"v0.9.1": {"supportedCatalogIds": [BASIC_CATALOG]}});
        s.note_client(Some(&Struct::from_iter([(CLIENT_CAPABILITIES_KEY.to_string(), caps)])));
        assert!(s.check_emission(&button_surface()).is_ok());
    }

    fn action(surface: &str, component: &str) -> Message {
        let data = json!({"version": "v0.9", "action": {"name": "go", "surfaceId": surface,
            "sourceComponentId": component, "timestamp": "2026-12-04T00:00:00Z", "context": {"n": 1}}});
        Message { parts: vec![Part::data(data, MEDIA_TYPE)], ..Default::default() }
    }

    #[test]
    fn actions_are_taken_only_for_open_surfaces_and_their_components() {
        let open = Surfaces::default().check_emission(&button_surface()).unwrap().surfaces;
        assert_eq!(open.check_incoming(&action("s1", "go")), Ok(()));
        let err = open.check_incoming(&action("s1", "nope")).unwrap_err();
        assert_eq!(err.code, Some(UNKNOWN_SURFACE_OR_COMPONENT));
        assert_eq!(err.message, "parts[0]: A2UI surface `s1` has no component `nope`");
        let err = open.check_incoming(&action("s9", "go")).unwrap_err();
        assert_eq!(err.code, Some(UNKNOWN_SURFACE_OR_COMPONENT));
        // A malformed part is invalid, not unknown.
        let bad = Message {
            parts: vec![Part::data(json!({"version": "v0.9", "action": {"name": "go"}}), MEDIA_TYPE)],
            ..Default::default()
        };
        let err = open.check_incoming(&bad).unwrap_err();
        assert_eq!(err.code, None);
        assert!(err.message.contains("not an A2UI v0.9 client-to-server message"), "{}", err.message);
        assert_eq!(
            model_line(&action("s1", "go").parts[0]).unwrap(),
            "[A2UI action] go on surface s1 from go: {\"n\":1}"
        );
    }
}
