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
    /// Log lines as `text` or `json` (one object per line, with the trace and span ids when
    /// traces are on); wins over `[observability] log_format`.
    #[arg(long)]
    log_format: Option<tiny_harness::telemetry::LogFormat>,
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
    if let Some(format) = args.log_format {
        config.observability.log_format = format;
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

async fn run(mut config: Config) -> Result<(), HarnessError> {
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

/// Rust's allocations go to jemalloc, not the C library's malloc (issue 31): measured side by
/// side, the harness spent about a tenth less CPU per message with it (glibc's `malloc` and `free`
/// were a sixth of its samples, spread over every phase of a message) for a few MiB more
/// resident under load (docs/performance.md, "The allocator"). The library crates choose no
/// allocator: a host that embeds the harness keeps its own.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Two malloc arenas for what still uses the C library's malloc (SQLite's page cache and
/// statements) unless the operator chose a number (issue 31).
/// glibc gives each thread that allocates its own arena, up to eight per core, and each
/// keeps the pages its thread freed: with the harness's fifteen threads that is about
/// 1 MiB of an idle harness's heap (docs/performance.md). Two arenas serve two cores'
/// worth of threads without contention: small allocations are served from each thread's
/// own cache before an arena's lock is taken. `MALLOC_ARENA_MAX` or
/// `GLIBC_TUNABLES=glibc.malloc.arena_max=N` wins.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        if !chosen {
            // SAFETY: mallopt takes two integers and no pointer; it runs before any other
            // thread exists.
            unsafe {
                libc::mallopt(libc::M_ARENA_MAX, 2);
            }
        }
    }
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tiny-harness: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (args, force_embedded) = match cli.command {
        Command::Dev(args) => (args, true),
        Command::Serve(args) => (args, false),
    };
    // The configuration decides how logs are written and where spans go, so it is read
    // before anything logs (its errors are printed as they are).
    let loaded = load(&args, force_embedded).and_then(|config| {
        let export = config.observability.trace_export(|name| std::env::var(name).ok())?;
        // Inside the runtime: the gRPC exporter's channel lives on it.
        let _entered = runtime.enter();
        let telemetry = tiny_harness::telemetry::install(
            config.observability.log_format,
            export.as_ref(),
            "warn,tiny_harness=info",
        )?;
        Ok((config, telemetry))
    });
    let result = match loaded {
        Ok((config, telemetry)) => {
            let result = runtime.block_on(run(config));
            // Outside the runtime: the HTTP exporter's client blocks while it sends the rest.
            telemetry.shutdown();
            result
        }
        Err(e) => Err(e.into()),
    };
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
