//! The `tiny-harness` binary: argument parsing, then a call into the `tiny-harness` crate.
//!
//! Exit codes: 0 after a clean stop, 2 for a configuration error (the message names the key
//! and the file), 1 for anything else.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tiny_harness::{Config, ConfigError, Harness, HarnessError, TemporalMode};

#[derive(Parser)]
#[command(name = "tiny-harness", version, about = "A durable A2A agent server on Temporal")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run everything on one machine: embedded Temporal dev server, SQLite, worker, server.
    Dev(RunArgs),
    /// Run with the configuration as written (`[temporal] mode = "remote"` to join a cluster).
    Serve(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Port of the A2A server (default 8080, or `[server] port`).
    #[arg(long)]
    port: Option<u16>,
    /// Where the store, the dev server's database and generated files live.
    #[arg(long, default_value = "./.tiny-harness")]
    data_dir: PathBuf,
    /// A TOML configuration file.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Model provider: `echo`, `conformance`, `scripted` (with `[models.scripted] file`),
    /// `scripted:FILE`, `openai:MODEL` (OPENAI_BASE_URL, OPENAI_API_KEY), `anthropic:MODEL`
    /// (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY) or a `[models.<name>]` of the config.
    #[arg(long)]
    model: Option<String>,
    /// Task lifecycle: `conversation` or `one-shot`.
    #[arg(long)]
    lifecycle: Option<String>,
}

const CONFIG_ERROR: u8 = 2;

fn load(args: &RunArgs, force_embedded: bool) -> Result<Config, ConfigError> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path, &args.data_dir)?,
        None => Config::with_data_dir(&args.data_dir),
    };
    if force_embedded {
        config.temporal.mode = TemporalMode::Embedded;
        // `dev` keeps push notifications on: a key is created in the data dir when none is given.
        config.push.generate_key = true;
    }
    if let Some(port) = args.port {
        config.server.port = port;
    }
    if let Some(model) = &args.model {
        match model.split_once(':') {
            Some(("openai", id)) => {
                // OPENAI_BASE_URL and OPENAI_API_KEY, as the official SDKs read them.
                let section = tiny_harness::config::OpenAiSection::from_env(id);
                config.models.named.insert("openai".into(), section.to_table());
                config.agent.model = "openai".into();
            }
            Some(("anthropic", id)) => {
                // ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, as the official SDKs read them.
                let section = tiny_harness::config::AnthropicSection::from_env(id);
                config.models.named.insert("anthropic".into(), section.to_table());
                config.agent.model = "anthropic".into();
            }
            Some(("scripted", file)) => {
                config.models.scripted.file = Some(PathBuf::from(file));
                config.agent.model = "scripted".into();
            }
            _ => config.agent.model = model.clone(),
        }
    }
    if let Some(lifecycle) = &args.lifecycle {
        config.agent.lifecycle = lifecycle.parse().map_err(|e| ConfigError(format!("--lifecycle: {e}")))?;
    }
    Ok(config)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
}

async fn run(args: RunArgs, force_embedded: bool) -> Result<(), HarnessError> {
    let mut config = load(&args, force_embedded)?;
    let addr = format!("{}:{}", config.server.host, config.server.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| ConfigError(format!("cannot listen on {addr} (`server.port`): {e}")))?;
    let local = listener.local_addr().map_err(|e| ConfigError(e.to_string()))?;
    config.server.port = local.port();
    let harness = Harness::new(config)?;
    let url = harness.public_url().to_string();
    let data_dir = harness.config().data_dir.display().to_string();
    let model = harness.config().agent.model.clone();
    harness.start().await?;
    println!("tiny-harness is serving on {url}");
    println!("  agent card: {url}/.well-known/agent-card.json");
    println!("  JSON-RPC:   {url}/a2a/jsonrpc    HTTP+JSON: {url}/a2a/rest");
    println!("  data dir:   {data_dir}   model: {model}   Ctrl-C stops");
    // `serve` finds the harness started, serves until Ctrl-C/SIGTERM, then stops it.
    let result = harness.serve(listener, shutdown_signal()).await;
    eprintln!("tiny-harness: stopped");
    result
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,tiny_harness=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tiny-harness: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Dev(args) => run(args, true).await,
            Command::Serve(args) => run(args, false).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(HarnessError::Config(e)) => {
            eprintln!("tiny-harness: configuration error: {e}");
            ExitCode::from(CONFIG_ERROR)
        }
        Err(e) => {
            eprintln!("tiny-harness: {e}");
            ExitCode::FAILURE
        }
    }
}
