//! A host application that embeds tiny-harness (S17): its own route (`/health`) and the
//! agent, mounted side by side on one server. The harness's routes carry its prefix
//! (`/agents/helper`), sit behind its own 503 gate, mount check and limits, and are listed
//! in `/agents/helper/openapi.json` under the tag `A2A: helper`.
//!
//! Run: `cargo run -p tiny-harness --example host` (embedded Temporal, data in
//! `./.tiny-harness-host`), then `curl http://127.0.0.1:8090/agents/helper/.well-known/agent-card.json`.

use axum::Router;
use axum::routing::get;
use tiny_harness::{Config, Harness, harness_router};

/// The host's app: its own `/health` beside the harness at its prefix.
pub fn app(harness: &Harness) -> Router {
    Router::new().route("/health", get(|| async { "ok" })).merge(harness_router(harness))
}

/// The harness this host runs.
pub fn helper_config(data_dir: &std::path::Path, port: u16) -> Config {
    let mut config = Config::with_data_dir(data_dir);
    config.server.port = port;
    config.server.prefix = "/agents/helper".into();
    config.agent.id = "helper".into();
    config
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let harness = Harness::new(helper_config(std::path::Path::new(".tiny-harness-host"), 8090))?;
    harness.start().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
    println!("host on http://127.0.0.1:8090 (/health, /agents/helper/...)");
    axum::serve(listener, app(&harness).into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    harness.stop().await;
    Ok(())
}
