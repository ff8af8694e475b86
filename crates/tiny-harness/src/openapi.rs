//! The OpenAPI document of a harness's routes (S17), served at `<prefix>/openapi.json`.
//! Built before start from the route table of `a2a-server` plus the harness's own routes;
//! every operation is tagged `A2A: <agent id>`.

use crate::harness::Harness;
use crate::hosting::{MONITOR_PATH, Mount, OPENAPI_PATH, UI_PATH};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{InfoBuilder, OpenApiBuilder, PathsBuilder, ServerBuilder};

/// The document as JSON. Paths carry the prefix when the router carries it (a host mount).
pub(crate) fn document(harness: &Harness, mount: Mount) -> String {
    let inner = &harness.inner;
    let tag = format!("A2A: {}", inner.config.agent.id);
    let path_prefix = if mount == Mount::AtRoot { inner.prefix.clone() } else { String::new() };
    let mut routes: Vec<(&str, String, &str)> = a2a_server::routes();
    routes.push(("GET", OPENAPI_PATH.into(), "OpenAPI document"));
    if inner.options.push_route {
        routes.push(("POST", crate::hosting::PUSH_PATH.into(), "Push receiver (S15)"));
    }
    if inner.options.monitor {
        routes.push(("GET", MONITOR_PATH.into(), "Monitor snapshot"));
    }
    if inner.options.metrics {
        routes.push(("GET", crate::metrics::METRICS_PATH.into(), "Prometheus metrics"));
    }
    if mount == Mount::AtPrefix && inner.options.ui {
        routes.push(("GET", format!("{UI_PATH}/{{file}}"), "Web UI"));
    }
    let mut items: BTreeMap<String, PathItem> = BTreeMap::new();
    for (verb, path, operation) in routes {
        let (method, verb_name) = match verb {
            "POST" => (HttpMethod::Post, "post"),
            "DELETE" => (HttpMethod::Delete, "delete"),
            _ => (HttpMethod::Get, "get"),
        };
        // An operation served on two methods (SubscribeToTask) gets an id for each.
        let id: String = operation.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        let op = OperationBuilder::new()
            .tag(tag.clone())
            .summary(Some(operation))
            .operation_id(Some(format!("{id}_{verb_name}")))
            .response("200", ResponseBuilder::new().description("see the A2A 1.0 specification").build())
            .build();
        let item = PathItem::new(method, op);
        match items.entry(format!("{path_prefix}{path}")) {
            Entry::Vacant(v) => {
                v.insert(item);
            }
            Entry::Occupied(mut o) => o.get_mut().merge_operations(item),
        }
    }
    let mut paths = PathsBuilder::new();
    for (path, item) in items {
        paths = paths.path(path, item);
    }
    let doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title(inner.card.name.clone())
                .version(inner.card.version.clone())
                .description(Some(inner.card.description.clone()))
                .build(),
        )
        .servers(Some([ServerBuilder::new().url(inner.public_url.clone()).build()]))
        .paths(paths.build())
        .build();
    doc.to_json().unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
