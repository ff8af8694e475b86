//! `cargo xtask <verb>`: every chore of the project, so nothing hides in shell history.
//!
//! - `test`: builds the binary, provisions the `temporal` CLI when missing, starts one
//!   shared Temporal dev server, then runs every test of the workspace (nextest when
//!   installed, else `cargo test`), the ignored-by-default recorders excluded.
//!   The interop suite's Python venv (`target/interop-venv`) is built first when missing or
//!   when its pinned requirements changed.
//! - `contract`: refreshes the contract snapshots (the agent card, S2) with insta.
//! - `bench`: the benchmark of `docs/performance.md`, release build, one run, ratios.
//! - `histories`: re-records the `TaskWorkflow` histories the replay test replays.
//! - `dev`: `cargo run -p harness-cli -- dev` with any extra arguments.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn run(mut cmd: Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

fn has_nextest() -> bool {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts a dev server for the whole test run; it stops when this process exits.
async fn shared_dev_server(dir: &Path) -> Result<tiny_harness::temporal_dev::EmbeddedTemporal> {
    let cli = tiny_harness::temporal_dev::find_or_provision_cli(None).await?;
    Ok(tiny_harness::temporal_dev::EmbeddedTemporal::start(&cli, &dir.join("temporal.db")).await?)
}

/// The Python venv of the interop suite (`target/interop-venv`), rebuilt whenever
/// `crates/contract-tests/interop/requirements.txt` changes. Returns its python.
fn interop_venv() -> Result<PathBuf> {
    let requirements = root().join("crates/contract-tests/interop/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).with_context(|| format!("{}", requirements.display()))?;
    let venv = root().join("target/interop-venv");
    let stamp = venv.join(".requirements");
    let python = venv.join("bin/python");
    if python.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) {
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&venv);
    run({
        let mut c = Command::new("python3");
        c.args(["-m", "venv"]).arg(&venv);
        c
    })
    .context("cannot create the interop venv: install python3 and python3-venv")?;
    run({
        let mut c = Command::new(&python);
        c.args(["-m", "pip", "install", "--disable-pip-version-check", "-r"]).arg(&requirements);
        c
    })?;
    std::fs::write(&stamp, wanted)?;
    Ok(python)
}

async fn test(extra: &[String]) -> Result<()> {
    run({
        let mut c = cargo();
        c.args(["build", "-p", "harness-cli"]);
        c
    })?;
    let python = interop_venv()?;
    let dir = std::env::temp_dir().join(format!("tiny-harness-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut server = shared_dev_server(&dir).await?;
    let mut cmd = cargo();
    if has_nextest() {
        cmd.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
    } else {
        cmd.args(["test", "--workspace", "--no-fail-fast"]);
    }
    cmd.args(extra).env("TINY_HARNESS_TEST_TEMPORAL", &server.address).env("TINY_HARNESS_INTEROP_PYTHON", python);
    let result = tokio::task::spawn_blocking(move || run(cmd)).await?;
    server.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn histories() -> Result<()> {
    run({
        let mut c = cargo();
        c.args(["build", "-p", "harness-cli"]);
        c
    })?;
    run({
        let mut c = cargo();
        c.args(["test", "-p", "contract-tests", "--test", "record_histories", "--", "--ignored"]);
        c
    })?;
    run({
        let mut c = cargo();
        c.args(["test", "-p", "harness-workflow", "--test", "replay"]);
        c
    })
}

fn bench(extra: &[String]) -> Result<()> {
    run({
        let mut c = cargo();
        c.args([
            "build",
            "--release",
            "-p",
            "harness-cli",
            "-p",
            "contract-tests",
            "--bin",
            "tiny-harness",
            "--bin",
            "bench",
        ]);
        c
    })?;
    let mut c = Command::new(root().join("target/release/bench"));
    c.args(extra).env("TINY_HARNESS_BIN", root().join("target/release/tiny-harness"));
    run(c)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (verb, extra) = args.split_first().map(|(v, e)| (v.as_str(), e)).unwrap_or(("help", &[]));
    match verb {
        "test" => test(extra).await,
        "bench" => bench(extra),
        "histories" => histories(),
        "contract" => run({
            let mut c = cargo();
            c.args(["test", "-p", "tiny-harness", "--test", "card_contract"]).env("INSTA_UPDATE", "always");
            c
        }),
        "dev" => run({
            let mut c = cargo();
            c.args(["run", "-p", "harness-cli", "--", "dev"]).args(extra);
            c
        }),
        _ => {
            eprintln!("usage: cargo xtask <test|contract|bench|histories|dev> [args]");
            if verb == "help" { Ok(()) } else { bail!("unknown verb `{verb}`") }
        }
    }
}
