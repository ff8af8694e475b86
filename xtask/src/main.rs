//! `cargo xtask <verb>`: every chore of the project, so nothing hides in shell history.
//!
//! - `lint`: `cargo fmt --check` and clippy with warnings denied on every target.
//! - `test`: runs `lint`, builds the binary, provisions the `temporal` CLI when missing, starts one
//!   shared Temporal dev server, then runs every test of the workspace (nextest when
//!   installed, else `cargo test`), the ignored-by-default recorders excluded.
//!   A private PostgreSQL cluster is started for the store's tests (D2) unless
//!   TINY_HARNESS_TEST_POSTGRES names a database.
//!   The interop suite's Python venv (`target/interop-venv`) is built first when missing or
//!   when its pinned requirements changed.
//! - `contract`: refreshes the contract snapshots (the agent card, S2) with insta.
//! - `ui [--check]`: installs `ui/`'s packages from its lockfile (`npm ci`), type-checks the
//!   sources and rebuilds the web UI into `crates/tiny-harness/ui/` (committed, embedded in
//!   the binary: docs/ui.md); `--check` fails instead when the committed build is not the
//!   build of the sources. `test` runs the check.
//! - `bench`: the benchmark of `docs/performance.md`, release build, one run, ratios.
//! - `symbol-order [--bin PATH]`: measures which functions start-up and a conversation run (valgrind's
//!   callgrind over the release binary) and writes them to `crates/harness-cli/symbol-order.txt`,
//!   the link order of release builds (issue 31, docs/performance.md).
//! - `histories`: re-records the `TaskWorkflow` histories the replay test replays.
//! - `dev`: `cargo run -p harness-cli -- dev` with any extra arguments.
//! - `old-run [REV]`: builds REV's harness and checks that a task mid-conversation on it is
//!   taken over by this tree's (issue 15).
//! - `chaos --minutes N [--conversations C]`: the fault-injection suite of
//!   `crates/contract-tests/tests/crash.rs` for N minutes: C conversations (default 8) with
//!   retrying clients while the harness, and every other time its Temporal server, is
//!   SIGKILLed at random moments; then every invariant (docs/event-log.md). Then N minutes
//!   of `tests/instances.rs`'s chaos test: C conversations over three instances on one
//!   private Postgres, one instance SIGKILLed every 20-40 s (issue 20). The short versions
//!   (three kills, four conversations; one kill of one of three instances) are part of
//!   `test`.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

mod instructions;
mod postgres;
mod symbol_order;
use postgres::Postgres;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

pub(crate) fn run(mut cmd: Command) -> Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// `cargo build -p harness-cli`: the binary the black-box tests run.
fn build_harness() -> Result<()> {
    run({
        let mut c = cargo();
        c.args(["build", "-p", "harness-cli"]);
        c
    })
}

/// Fails on a dependency no crate uses (cargo-machete; `.ci/run` installs it). A crate
/// whose macros need a dependency no source names lists it under
/// `[package.metadata.cargo-machete] ignored`. The tool is run as `cargo-machete`, not
/// through `cargo`: under `cargo run` it takes the subcommand's name for a path to scan.
fn unused_dependencies() -> Result<()> {
    let probe = Command::new("cargo-machete").arg("--version").output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        let why = match probe {
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => e.to_string(),
        };
        bail!("cargo-machete is missing ({why}): `cargo install cargo-machete --locked` (`.ci/run` does)");
    }
    run({
        let mut c = Command::new("cargo-machete");
        c.arg("--skip-target-dir").current_dir(root());
        c
    })
    .context("unused dependencies (cargo machete): remove them from Cargo.toml")?;
    let unused = unused_workspace_dependencies()?;
    if !unused.is_empty() {
        bail!("`[workspace.dependencies]` lists what no member uses: {}; remove it", unused.join(", "));
    }
    Ok(())
}

/// The entries of `[workspace.dependencies]` that no member's manifest inherits
/// (cargo-machete reads the members' own lists only).
fn unused_workspace_dependencies() -> Result<Vec<String>> {
    let manifest = |path: &Path| -> Result<toml::Table> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        text.parse().with_context(|| format!("{} is not valid TOML", path.display()))
    };
    let workspace = manifest(&root().join("Cargo.toml"))?;
    let listed = workspace.get("workspace").and_then(|w| w.get("dependencies")).and_then(|d| d.as_table());
    let mut members = vec![root().join("xtask/Cargo.toml")];
    for entry in std::fs::read_dir(root().join("crates"))? {
        let path = entry?.path().join("Cargo.toml");
        if path.exists() {
            members.push(path);
        }
    }
    let mut used = std::collections::BTreeSet::new();
    for member in members {
        let table = manifest(&member)?;
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            if let Some(deps) = table.get(section).and_then(|d| d.as_table()) {
                used.extend(deps.keys().cloned());
            }
        }
    }
    Ok(listed.map(|l| l.keys().filter(|k| !used.contains(*k)).cloned().collect()).unwrap_or_default())
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

/// The Postgres of the store's tests: `TINY_HARNESS_TEST_POSTGRES` when set, else a private
/// one (kept running while the returned guard lives).
fn test_postgres() -> Result<(Option<Postgres>, String)> {
    match std::env::var("TINY_HARNESS_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Ok((None, url)),
        _ => {
            let pg = Postgres::start()?;
            let url = pg.url.clone();
            Ok((Some(pg), url))
        }
    }
}

pub(crate) fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `cargo xtask lint`: the formatting check and clippy with warnings denied, on every target
/// of the workspace (tests and benches included). `test` runs it first.
fn lint() -> Result<()> {
    run({
        let mut c = cargo();
        c.args(["fmt", "--all", "--", "--check"]);
        c
    })
    .context("the code is not formatted: run `cargo fmt --all`")?;
    run({
        let mut c = cargo();
        c.args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]);
        c
    })
    .context("clippy has warnings (denied)")
}

/// `ui/node_modules` from the lockfile (`npm ci`), again whenever the lockfile changed.
fn ui_modules() -> Result<PathBuf> {
    let ui = root().join("ui");
    let lock = std::fs::read_to_string(ui.join("package-lock.json")).context("ui/package-lock.json")?;
    let stamp = ui.join("node_modules/.tiny-harness-lock");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == lock) {
        return Ok(ui);
    }
    run({
        let mut c = Command::new("npm");
        c.args(["ci", "--no-audit", "--no-fund"]).current_dir(&ui);
        c
    })
    .context("`npm ci` in ui/ failed: the UI's build and browser test need Node 20 with npm")?;
    std::fs::write(&stamp, lock)?;
    Ok(ui)
}

/// `cargo xtask ui [--check]`.
fn ui(extra: &[String]) -> Result<()> {
    let check = match extra {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => bail!("usage: cargo xtask ui [--check]"),
    };
    let ui = ui_modules()?;
    let node = |args: &[&str]| {
        let mut c = Command::new("node");
        c.args(args).current_dir(&ui);
        c
    };
    run(node(&["node_modules/typescript/bin/tsc", "--noEmit"])).context("the UI's TypeScript does not check")?;
    let committed = root().join("crates/tiny-harness/ui");
    if !check {
        return run(node(&["build.mjs"]));
    }
    let fresh = std::env::temp_dir().join(format!("tiny-harness-ui-{}", std::process::id()));
    run(node(&["build.mjs", "--out", &fresh.display().to_string()]))?;
    let mut stale = Vec::new();
    for file in ["index.html", "app.js", "app.css"] {
        if std::fs::read(fresh.join(file)).ok() != std::fs::read(committed.join(file)).ok() {
            stale.push(file);
        }
    }
    let _ = std::fs::remove_dir_all(&fresh);
    if !stale.is_empty() {
        bail!(
            "crates/tiny-harness/ui/ is not the build of ui/ ({} differ): run `cargo xtask ui` and commit the result",
            stale.join(", ")
        );
    }
    Ok(())
}

async fn test(extra: &[String]) -> Result<()> {
    lint()?;
    unused_dependencies()?;
    // The committed web UI is the build of its sources, and the browser test has its packages.
    ui(&["--check".to_string()])?;
    build_harness()?;
    let python = interop_venv()?;
    // D2: a Postgres for the store's tests, unless one is given.
    let (postgres, postgres_url) = test_postgres()?;
    let dir = std::env::temp_dir().join(format!("tiny-harness-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut server = shared_dev_server(&dir).await?;
    let mut cmd = cargo();
    if has_nextest() {
        cmd.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
    } else {
        cmd.args(["test", "--workspace", "--no-fail-fast"]);
    }
    cmd.args(extra)
        .env("TINY_HARNESS_TEST_TEMPORAL", &server.address)
        .env("TINY_HARNESS_INTEROP_PYTHON", python)
        .env("TINY_HARNESS_TEST_POSTGRES", &postgres_url);
    let result = tokio::task::spawn_blocking(move || run(cmd)).await?;
    server.stop().await;
    drop(postgres);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `cargo xtask chaos --minutes N [--conversations C]`.
fn chaos(extra: &[String]) -> Result<()> {
    let mut minutes = "20".to_string();
    let mut conversations = "8".to_string();
    let mut args = extra.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--minutes" => minutes = args.next().context("--minutes takes a number")?.clone(),
            "--conversations" => conversations = args.next().context("--conversations takes a number")?.clone(),
            other => bail!("unknown chaos argument `{other}` (expected --minutes N, --conversations C)"),
        }
    }
    minutes.parse::<f64>().with_context(|| format!("--minutes `{minutes}` is not a number"))?;
    conversations.parse::<usize>().with_context(|| format!("--conversations `{conversations}` is not a number"))?;
    build_harness()?;
    run({
        let mut c = cargo();
        c.args(["test", "-p", "contract-tests", "--test", "crash", "--", "--nocapture", "chaos_"])
            .env("TINY_HARNESS_CHAOS_MINUTES", &minutes)
            .env("TINY_HARNESS_CHAOS_CONVERSATIONS", &conversations);
        c
    })?;
    // Issue 20: three instances on one Postgres, one SIGKILLed every 20-40 s.
    let (postgres, postgres_url) = test_postgres()?;
    let result = run({
        let mut c = cargo();
        c.args(["test", "-p", "contract-tests", "--test", "instances", "--", "--nocapture", "chaos_"])
            .env("TINY_HARNESS_CHAOS_MINUTES", &minutes)
            .env("TINY_HARNESS_CHAOS_CONVERSATIONS", &conversations)
            .env("TINY_HARNESS_TEST_POSTGRES", &postgres_url);
        c
    });
    drop(postgres);
    result
}

/// `cargo xtask old-run [REV]` (issue 15): builds the harness of REV (default: the commit
/// before the workflow stopped keeping the conversation) in a worktree, then runs the test
/// in which a task mid-conversation on that binary is taken over by this one.
fn old_run(extra: &[String]) -> Result<()> {
    let rev = extra.first().map(String::as_str).unwrap_or("996d0e0");
    let tree = root().join("target/old-run/tree");
    let bin = root().join(format!("target/old-run/tiny-harness-{rev}"));
    let git = |args: &[&str]| {
        let mut c = Command::new("git");
        c.current_dir(root()).args(args);
        c
    };
    let _ = git(&["worktree", "remove", "--force", &tree.to_string_lossy()]).status();
    run(git(&["worktree", "add", "--detach", &tree.to_string_lossy(), rev]))?;
    let built = run({
        let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        c.current_dir(&tree).args(["build", "-p", "harness-cli"]).env("CARGO_TARGET_DIR", root().join("target"));
        c
    })
    .and_then(|()| Ok(std::fs::copy(root().join("target/debug/tiny-harness"), &bin).map(|_| ())?));
    let _ = git(&["worktree", "remove", "--force", &tree.to_string_lossy()]).status();
    built?;
    // The shared target dir now holds REV's binary: build this tree's again.
    build_harness()?;
    run({
        let mut c = cargo();
        c.args(["test", "-p", "contract-tests", "--test", "long_lived", "--", "--ignored", "--nocapture"])
            .arg("a_task_mid_conversation_on_the_old_code_continues_on_this_one")
            .env("TINY_HARNESS_OLD_BIN", &bin);
        c
    })
}

fn histories() -> Result<()> {
    build_harness()?;
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
    // The harness is built on its own, as a deployment builds it: built together with
    // `contract-tests`, its dependencies would take the features that crate adds, its
    // symbols other names, and the link order of `symbol-order.txt` would match none of them.
    run({
        let mut c = cargo();
        c.args(["build", "--release", "-p", "harness-cli", "--bin", "tiny-harness"]);
        c
    })?;
    run({
        let mut c = cargo();
        c.args(["build", "--release", "-p", "contract-tests", "--bin", "bench"]);
        c
    })?;
    // Issue 20: a Postgres for the instances phase, unless one is given.
    let (postgres, url) = match std::env::var("TINY_HARNESS_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => (None, url),
        _ => match Postgres::start() {
            Ok(pg) => {
                let url = pg.url.clone();
                (Some(pg), url)
            }
            Err(e) => {
                eprintln!("xtask: no Postgres ({e:#}): the instances phase is skipped");
                (None, String::new())
            }
        },
    };
    let mut c = Command::new(root().join("target/release/bench"));
    c.args(extra)
        .env("TINY_HARNESS_BIN", root().join("target/release/tiny-harness"))
        .env("TINY_HARNESS_BENCH_POSTGRES", url);
    let result = run(c);
    drop(postgres);
    result
}

/// `cargo xtask cluster --instances N [--port P]` (issue 20): a Temporal dev server, a
/// private Postgres and N `tiny-harness serve` instances on one task queue, on ports P,
/// P+1, ... (default 8080), for demos and trials by hand; Ctrl-C stops everything.
async fn cluster(extra: &[String]) -> Result<()> {
    let value = |flag: &str, default: u16| -> Result<u16> {
        match extra.iter().position(|a| a == flag) {
            Some(i) => extra
                .get(i + 1)
                .context(format!("{flag} needs a number"))?
                .parse()
                .context(format!("{flag} needs a number")),
            None => Ok(default),
        }
    };
    let (instances, first_port) = (value("--instances", 2)?, value("--port", 8080)?);
    build_harness()?;
    let dir = std::env::temp_dir().join(format!("tiny-harness-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let postgres = Postgres::start()?;
    let mut server = shared_dev_server(&dir).await?;
    let bin = root().join("target/debug/tiny-harness");
    let key = dir.join("push.key");
    let mut children = Vec::new();
    for i in 0..instances {
        let port = first_port + i;
        let data = dir.join(format!("instance-{i}"));
        std::fs::create_dir_all(&data)?;
        let config = data.join("harness.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nport = {port}\n\n[temporal]\nmode = \"remote\"\naddress = \"{}\"\ntask_queue = \"cluster\"\n\n\
                 [store]\nurl = \"{}\"\n\n[push]\nkey_file = \"{}\"\n",
                server.address,
                postgres.url,
                key.display()
            ),
        )?;
        if i == 0 {
            // One push key for all: each instance delivers the others' push configs.
            harness_push::PushKey::load_or_create(&key).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        let log = std::fs::File::create(data.join("harness.log"))?;
        let child = Command::new(&bin)
            .args(["serve", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(&data)
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("start an instance")?;
        println!("instance {i}: http://127.0.0.1:{port}  (log {})", data.join("harness.log").display());
        children.push(child);
    }
    println!("temporal: {}  postgres: {}  task queue: cluster\nCtrl-C stops everything", server.address, postgres.url);
    tokio::signal::ctrl_c().await?;
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    server.stop().await;
    drop(postgres);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (verb, extra) = args.split_first().map(|(v, e)| (v.as_str(), e)).unwrap_or(("help", &[]));
    match verb {
        "test" => test(extra).await,
        "lint" => lint(),
        "bench" => bench(extra),
        "histories" => histories(),
        "old-run" => old_run(extra),
        "chaos" => chaos(extra),
        "cluster" => cluster(extra).await,
        "ui" => ui(extra),
        "symbol-order" => symbol_order::symbol_order(extra).await,
        "instructions" => instructions::instructions(extra).await,
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
            eprintln!(
                "usage: cargo xtask <test|lint|contract|ui|bench|instructions|symbol-order|histories|dev|chaos|cluster|old-run> [args]"
            );
            if verb == "help" { Ok(()) } else { bail!("unknown verb `{verb}`") }
        }
    }
}
