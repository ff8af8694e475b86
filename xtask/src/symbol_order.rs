//! `cargo xtask symbol-order` (issue 31): the link order of the release binary's code.
//!
//! Most of an idle harness's memory is pages of its own code: the kernel maps a binary's
//! code 64 KiB at a time around each page it faults, and the functions that start-up and a
//! conversation run are spread over most of the 30 MB of `.text`. Linked in the order this
//! command writes (`crates/harness-cli/symbol-order.txt`, passed to lld by
//! `crates/harness-cli/build.rs` in release builds), those functions sit together at the
//! start of `.text` and the rest is never read.
//!
//! The order is measured, not guessed: the release binary runs under valgrind's callgrind,
//! which records every function that executes, through two workloads on a real Temporal
//! server. First what `bench` measures as the idle RSS (start-up, one conversation of three
//! blocking JSON-RPC messages, five idle seconds); then a wider one (streaming on both
//! bindings, GetTask, ListTasks, SubscribeToTask, CancelTask, the extended card, errors),
//! whose further functions follow the first set's. Function names are the binary's own
//! symbols, which depend on the toolchain, Cargo.lock and the features of the build: the
//! file is written for `cargo build --release -p harness-cli`, which is how `bench` and a
//! deployment build the binary. A stale file costs memory only: lld skips names that no
//! longer exist and places the rest of the code as it would without the file.

use crate::{cargo, root, run};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where the order is written (and where `build.rs` reads it).
const ORDER_FILE: &str = "crates/harness-cli/symbol-order.txt";

/// `cargo xtask symbol-order [--bin PATH]`: `--bin` profiles a release binary already built
/// (symbol names do not depend on the link order, so a build with a stale order has the names
/// of a build with the new one).
pub(crate) async fn symbol_order(extra: &[String]) -> Result<()> {
    if Command::new("valgrind").arg("--version").output().is_err() {
        bail!("`cargo xtask symbol-order` runs the harness under valgrind: install it (apt-get install valgrind)");
    }
    let bin = match extra {
        [] => release_harness()?,
        [flag, path] if flag == "--bin" => path.into(),
        _ => bail!("usage: cargo xtask symbol-order [--bin PATH]"),
    };
    // callgrind names the object by its real path: resolve symlinks so that its functions match.
    let bin = std::fs::canonicalize(&bin).with_context(|| format!("no binary at {}", bin.display()))?;
    let dir = std::env::temp_dir().join(format!("tiny-harness-symbol-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (server, address) = temporal(&dir).await?;

    let mut order: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for (phase, wide) in [("idle", false), ("wide", true)] {
        let profile = dir.join(format!("{phase}.callgrind"));
        profile_phase(&bin, &dir, &address, &profile, wide).await.with_context(|| format!("phase {phase}"))?;
        let functions = executed_functions(&profile, &bin)?;
        eprintln!("xtask: {phase}: {} functions of the binary ran", functions.len());
        for f in functions {
            if seen.insert(f.clone()) {
                order.push(f);
            }
        }
    }
    let mut text = String::from(
        "# The link order of the release binary's code (issue 31): written by `cargo xtask\n\
         # symbol-order`, read by crates/harness-cli/build.rs. Generated; do not edit.\n",
    );
    for f in &order {
        text.push_str(f);
        text.push('\n');
    }
    std::fs::write(root().join(ORDER_FILE), text)?;
    eprintln!("xtask: wrote {} symbols to {ORDER_FILE}", order.len());
    if let Some(mut server) = server {
        server.stop().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Runs the binary under callgrind through one workload and stops it with SIGINT, so that
/// callgrind writes its profile.
async fn profile_phase(bin: &Path, dir: &Path, address: &str, profile: &Path, wide: bool) -> Result<()> {
    let (port, config) = harness_config(dir, address, "symbol-order", "")?;
    let data = dir.join(format!("data-{}", profile.file_stem().and_then(|s| s.to_str()).unwrap_or("x")));
    let mut child = under_callgrind(bin, "--demangle=no", profile, &config, &data, &dir.join("harness.log"))?;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let base = format!("http://127.0.0.1:{port}");
    let result = async {
        wait_ready(&http, &base).await?;
        if wide { wide_workload(&http, &base).await } else { idle_workload(&http, &base).await }
    }
    .await;
    let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let status = child.wait()?;
    result?;
    if !profile.exists() {
        bail!(
            "callgrind wrote no profile (the harness exited with {status}; see {})",
            dir.join("harness.log").display()
        );
    }
    Ok(())
}

/// Builds the release harness (as `bench` and a deployment build it); its path.
pub(crate) fn release_harness() -> Result<std::path::PathBuf> {
    run({
        let mut c = cargo();
        c.args(["build", "--release", "-p", "harness-cli", "--bin", "tiny-harness"]);
        c
    })?;
    Ok(root().join("target/release/tiny-harness"))
}

/// Writes `dir/harness.toml` for a harness on a free port, on the Temporal server at
/// `address`, with a task queue of its own named after `name`, and `extra` (TOML sections)
/// after: the port and the file.
pub(crate) fn harness_config(dir: &Path, address: &str, name: &str, extra: &str) -> Result<(u16, std::path::PathBuf)> {
    let port = tiny_harness::temporal_dev::free_port();
    let config = dir.join("harness.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nport = {port}\nrate_limit_per_minute = 0\n[temporal]\nmode = \"remote\"\naddress = \"{address}\"\ntask_queue = \"{name}-{}-{port}\"\n{extra}",
            std::process::id()
        ),
    )?;
    Ok((port, config))
}

/// The Temporal server to run on: `TINY_HARNESS_TEST_TEMPORAL`'s, else a dev server started
/// in `dir` (returned, to be stopped).
pub(crate) async fn temporal(dir: &Path) -> Result<(Option<tiny_harness::temporal_dev::EmbeddedTemporal>, String)> {
    Ok(match std::env::var("TINY_HARNESS_TEST_TEMPORAL") {
        Ok(address) if !address.is_empty() => (None, address),
        _ => {
            let server = crate::shared_dev_server(dir).await?;
            let address = server.address.clone();
            (Some(server), address)
        }
    })
}

/// `bin serve` with `config` and `data` under callgrind (with `option`), writing its profile
/// to `profile` and its log to `log`.
pub(crate) fn under_callgrind(
    bin: &Path,
    option: &str,
    profile: &Path,
    config: &Path,
    data: &Path,
    log: &Path,
) -> Result<std::process::Child> {
    Command::new("valgrind")
        .args(["--tool=callgrind", option])
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg(bin)
        .args(["serve", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .context("cannot start valgrind")
}

pub(crate) async fn wait_ready(http: &reqwest::Client, base: &str) -> Result<()> {
    for _ in 0..600 {
        if let Ok(r) = http.get(format!("{base}/.well-known/agent-card.json")).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the harness under valgrind did not answer its card within two minutes")
}

pub(crate) fn message(text: &str, task: Option<&str>) -> Value {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut m = json!({"messageId": format!("order-{}-{n}", std::process::id()), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    m
}

pub(crate) async fn rpc(http: &reqwest::Client, base: &str, method: &str, params: Value) -> Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let r = http.post(format!("{base}/a2a/jsonrpc")).header("A2A-Version", "1.0").json(&body).send().await?;
    Ok(r.json().await?)
}

/// A request whose answer (a stream, perhaps one that stays open) is read for at most a few
/// seconds.
async fn read_for(request: reqwest::RequestBuilder, limit: Duration) -> Result<()> {
    let mut r = request.header("A2A-Version", "1.0").send().await?;
    let _ = tokio::time::timeout(limit, async { while let Ok(Some(_)) = r.chunk().await {} }).await;
    Ok(())
}

/// What `bench` measures as the idle RSS: one conversation of three blocking messages, then
/// five idle seconds.
async fn idle_workload(http: &reqwest::Client, base: &str) -> Result<()> {
    let opened = rpc(http, base, "SendMessage", json!({"message": message("hello", None)})).await?;
    let task = opened["result"]["task"]["id"].as_str().context("SendMessage answered no task")?.to_string();
    for text in ["again", "and again"] {
        rpc(http, base, "SendMessage", json!({"message": message(text, Some(&task))})).await?;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(())
}

/// The rest of the A2A surface a deployment serves.
async fn wide_workload(http: &reqwest::Client, base: &str) -> Result<()> {
    idle_workload(http, base).await?;
    let jsonrpc = format!("{base}/a2a/jsonrpc");
    let rest = format!("{base}/a2a/rest");
    let stream = json!({"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage", "params": {"message": message("stream", None)}});
    read_for(http.post(&jsonrpc).json(&stream), Duration::from_secs(30)).await?;
    let opened: Value = http
        .post(format!("{rest}/message:send"))
        .header("A2A-Version", "1.0")
        .json(&json!({"message": message("rest", None)}))
        .send()
        .await?
        .json()
        .await?;
    let task = opened["task"]["id"].as_str().context("message:send answered no task")?.to_string();
    read_for(
        http.post(format!("{rest}/message:stream")).json(&json!({"message": message("more", Some(&task))})),
        Duration::from_secs(30),
    )
    .await?;
    rpc(http, base, "GetTask", json!({"id": task, "historyLength": 2})).await?;
    read_for(http.get(format!("{rest}/tasks/{task}")), Duration::from_secs(10)).await?;
    rpc(http, base, "ListTasks", json!({"pageSize": 10})).await?;
    read_for(http.get(format!("{rest}/tasks?pageSize=10")), Duration::from_secs(10)).await?;
    let subscribe = json!({"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": task}});
    read_for(http.post(&jsonrpc).json(&subscribe), Duration::from_secs(3)).await?;
    rpc(http, base, "GetExtendedAgentCard", json!({})).await?;
    rpc(http, base, "CancelTask", json!({"id": task})).await?;
    rpc(http, base, "GetTask", json!({"id": task})).await?;
    // Errors a client meets: an unknown task, an unknown method, a malformed message.
    rpc(http, base, "GetTask", json!({"id": "no-such-task"})).await?;
    rpc(http, base, "NoSuchMethod", json!({})).await?;
    rpc(http, base, "SendMessage", json!({"message": {"role": "ROLE_USER"}})).await?;
    read_for(http.post(&jsonrpc).body("{not json"), Duration::from_secs(10)).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(())
}

/// The binary's functions that a callgrind profile records as run, in the order the profile
/// names them. The format (valgrind's docs, "Callgrind Format Specification") compresses
/// names: `ob=(3) /path` and `fn=(7) name` define an id the first time, later lines give
/// `ob=(3)` alone; `cob=`/`cfn=` (a call's target) share the ids.
fn executed_functions(profile: &Path, bin: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(profile)?;
    let bin = bin.to_string_lossy();
    let (mut objects, mut functions) = (std::collections::HashMap::new(), std::collections::HashMap::new());
    let (mut in_bin, mut out, mut seen) = (false, Vec::new(), HashSet::new());
    for line in text.lines() {
        let Some((key, rest)) = line.split_once('=') else { continue };
        let Some(rest) = rest.strip_prefix('(') else { continue };
        let Some((id, name)) = rest.split_once(')') else { continue };
        let name = name.trim_start();
        match key {
            "ob" | "cob" => {
                if !name.is_empty() {
                    objects.insert(id.to_string(), name.to_string());
                }
                if key == "ob" {
                    in_bin = objects.get(id).is_some_and(|o| o.as_str() == bin);
                }
            }
            "fn" | "cfn" => {
                if !name.is_empty() {
                    functions.insert(id.to_string(), name.to_string());
                }
                if key == "fn"
                    && in_bin
                    && let Some(f) = functions.get(id)
                    // Code without a symbol is named by its address; it has nothing to order.
                    && !f.starts_with("0x")
                    && seen.insert(f.clone())
                {
                    out.push(f.clone());
                }
            }
            _ => {}
        }
    }
    if out.is_empty() {
        bail!("the profile {} names no function of {bin}", profile.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::executed_functions;

    /// A profile in callgrind's compressed format: the binary's functions are listed once
    /// each, in the order they are named, whether defined by `fn=` or first named as a call's
    /// target; library code and unnamed code are left out.
    #[test]
    fn the_binary_functions_of_a_callgrind_profile_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("p.callgrind");
        std::fs::write(
            &profile,
            "version: 1\ncreator: callgrind-3.19.0\ncmd: /x/tiny-harness serve\npart: 1\n\nevents: Ir\n\n\
             ob=(1) /usr/lib/libc.so.6\nfl=(1) ???\nfn=(1) memcpy\n0 12\n\n\
             ob=(2) /x/tiny-harness\nfl=(2) ???\nfn=(2) _ZN4main17h0E\n0 3\n\
             cob=(1)\ncfi=(1)\ncfn=(1)\ncalls=1 0\n0 12\n\
             cfn=(3) _ZN5later17h1E\ncalls=1 0\n0 4\n\n\
             fn=(4) 0x0000000000012345\n0 1\n\n\
             fn=(3)\n0 4\n\n\
             fn=(2)\n0 1\n\n\
             ob=(1)\nfn=(5) free\n0 2\n",
        )
        .unwrap();
        let functions = executed_functions(&profile, std::path::Path::new("/x/tiny-harness")).unwrap();
        assert_eq!(functions, ["_ZN4main17h0E", "_ZN5later17h1E"]);
        // A profile of another program names none of the binary's functions: an error, not
        // an empty order.
        let err = executed_functions(&profile, std::path::Path::new("/y/other")).unwrap_err();
        assert!(err.to_string().contains("names no function of /y/other"), "{err}");
    }
}
