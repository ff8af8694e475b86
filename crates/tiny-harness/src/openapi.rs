//! The OpenAPI document of a harness's routes (S17), served at `<prefix>/openapi.json`.
//! Built before start from the route table of `a2a-server` plus the harness's own routes;
//! every operation is tagged `A2A: <agent id>`.

use crate::harness::Harness;
use crate::hosting::{MONITOR_PATH, Mount, OPENAPI_PATH, UI_PATH};
use utoipa::openapi::path::{HttpMethod, OperationBuilder, PathItem};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{InfoBuilder, OpenApiBuilder, PathsBuilder, ServerBuilder};

/// The document as JSON. Paths carry the prefix when the router carries it (a host mount).
pub(crate) fn document(harness: &Harness, mount: Mount) -> String {
    let inner = &harness.inner;
    let tag = format!("A2A: {}", inner.config.agent.id);
    let path_prefix = if mount == Mount::AtRoot { inner.prefix.clone() } else { String::new() };
    let mut routes: Vec<(String, String, String)> =
        a2a_server::ROUTES.iter().map(|(m, p, o)| (m.to_string(), p.to_string(), o.to_string())).collect();
    routes.push(("GET".into(), OPENAPI_PATH.into(), "OpenAPI document".into()));
    if inner.options.push_route {
        routes.push(("POST".into(), crate::hosting::PUSH_PATH.into(), "Push receiver (S15)".into()));
    }
    if inner.options.monitor {
        routes.push(("GET".into(), MONITOR_PATH.into(), "Monitor snapshot".into()));
    }
    if mount == Mount::AtPrefix && inner.options.ui && inner.config.server.ui_dir.is_some() {
        routes.push(("GET".into(), format!("{UI_PATH}/{{file}}"), "Web renderer".into()));
    }
    let mut paths = PathsBuilder::new();
    for (method, path, operation) in routes {
        let method = match method.as_str() {
            "POST" => HttpMethod::Post,
            "DELETE" => HttpMethod::Delete,
            _ => HttpMethod::Get,
        };
        let id: String = operation.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        let op = OperationBuilder::new()
            .tag(tag.clone())
            .summary(Some(operation.clone()))
            .operation_id(Some(format!("{id}_{}", path.len())))
            .response("200", ResponseBuilder::new().description("see the A2A 1.0 specification").build())
            .build();
        paths = paths.path(format!("{path_prefix}{path}"), PathItem::new(method, op));
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
