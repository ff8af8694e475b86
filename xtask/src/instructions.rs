//! `cargo xtask instructions` (issue 31): the harness's instructions per message, counted.
//!
//! CPU time per message on a shared two-core machine varies by several percent from run to
//! run (the Temporal server, the client and the harness share the cores), more than most
//! single changes move it. An instruction count does not: each release binary given runs
//! under valgrind's callgrind on a real Temporal server, answers `--warm` blocking
//! SendMessages in one conversation uncounted (the answers' window fills), then
//! `--messages` more with counting on, in every thread of the process. Two runs of one
//! binary agree to about 0.1%, so two binaries, or one binary with an environment switch
//! between its old and new path, compare in one run of this command. An instruction is not
//! a unit of time (a copy from memory or a cache miss costs more), so a change that this
//! moves is still checked in `bench`'s CPU figures.
//!
//! `--store URL` counts on that store instead of each run's own SQLite file: a Postgres URL
//! (a database that may be shared by the runs: each harness has a task queue of its own).
//! The harness does less of the work on Postgres (its statements run in Postgres's server),
//! so its count there is lower than on SQLite.

use crate::symbol_order::{harness_config, message, release_harness, rpc, temporal, under_callgrind, wait_ready};
use anyhow::{Context, Result, bail};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[derive(Debug)]
struct Options {
    bins: Vec<PathBuf>,
    warm: usize,
    messages: usize,
    store: Option<String>,
    /// Keep each run's callgrind dump (and the run's directory) for `callgrind_annotate`.
    keep: bool,
}

fn options(extra: &[String]) -> Result<Options> {
    let usage = "usage: cargo xtask instructions [--bin PATH]... [--warm N] [--messages N] [--store URL] [--keep]";
    let mut o = Options { bins: Vec::new(), warm: 60, messages: 100, store: None, keep: false };
    let mut args = extra.iter();
    while let Some(flag) = args.next() {
        if flag == "--keep" {
            o.keep = true;
            continue;
        }
        let value = args.next().with_context(|| format!("{flag} needs a value; {usage}"))?;
        match flag.as_str() {
            "--bin" => o.bins.push(value.into()),
            "--warm" => o.warm = value.parse().with_context(|| format!("--warm {value}: not a count"))?,
            "--messages" => o.messages = value.parse().with_context(|| format!("--messages {value}: not a count"))?,
            "--store" => o.store = Some(value.clone()),
            _ => bail!("unknown flag {flag}; {usage}"),
        }
    }
    if o.messages == 0 {
        bail!("--messages must be at least 1");
    }
    Ok(o)
}

/// `cargo xtask instructions [--bin PATH]... [--warm N] [--messages N] [--store URL] [--keep]`: without
/// `--bin`, builds and counts `target/release/tiny-harness`; `--keep` leaves each run's dump
/// (printed) for `callgrind_annotate`.
pub(crate) async fn instructions(extra: &[String]) -> Result<()> {
    let mut o = options(extra)?;
    for tool in ["valgrind", "callgrind_control"] {
        if Command::new(tool).arg("--version").output().is_err() {
            bail!("`cargo xtask instructions` needs {tool}: install valgrind (apt-get install valgrind)");
        }
    }
    if o.bins.is_empty() {
        o.bins.push(release_harness()?);
    }
    let dir = std::env::temp_dir().join(format!("tiny-harness-instructions-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (server, address) = temporal(&dir).await?;
    let (mut counts, mut dumps) = (Vec::new(), Vec::new());
    for (i, bin) in o.bins.iter().enumerate() {
        let (per_message, dump) = count(bin, &dir.join(format!("run-{i}")), &address, &o)
            .await
            .with_context(|| format!("counting {}", bin.display()))?;
        counts.push(per_message);
        dumps.push(dump);
    }
    println!("| binary | instructions per message | against the first |");
    println!("|---|---|---|");
    for (bin, n) in o.bins.iter().zip(&counts) {
        println!("| {} | {:.3} M | {:.3}x |", bin.display(), n / 1e6, n / counts[0]);
    }
    if let Some(mut server) = server {
        server.stop().await;
    }
    if o.keep {
        for dump in &dumps {
            println!("kept: {}", dump.display());
        }
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// The instructions per message of one binary: every thread's, summed over the dump that
/// ends the counted messages; and that dump's path.
async fn count(bin: &Path, dir: &Path, address: &str, o: &Options) -> Result<(f64, PathBuf)> {
    let (warm, messages) = (o.warm, o.messages);
    // A TOML string: the URL as JSON writes it (the same escapes).
    let store = o.store.as_ref().map(|url| format!("[store]\nurl = {}\n", json!(url))).unwrap_or_default();
    std::fs::create_dir_all(dir)?;
    let (port, config) =
        harness_config(dir, address, "instructions", &format!("[agent]\nlifecycle = \"conversation\"\n{store}"))?;
    let profile = dir.join("callgrind.out");
    let mut child =
        under_callgrind(bin, "--instr-atstart=no", &profile, &config, &dir.join("data"), &dir.join("harness.log"))?;
    let pid = child.id().to_string();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(120)).build()?;
    let base = format!("http://127.0.0.1:{port}");
    let result = async {
        wait_ready(&http, &base).await?;
        let send = |text: String, task: Option<String>| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let answer =
                    rpc(&http, &base, "SendMessage", json!({"message": message(&text, task.as_deref())})).await?;
                answer["result"]["task"]["id"].as_str().map(String::from).with_context(|| format!("answer: {answer}"))
            }
        };
        let task = send("open".into(), None).await?;
        for i in 0..warm {
            send(format!("warm-up {i}"), Some(task.clone())).await?;
        }
        control(&pid, &["-i", "on"])?;
        for i in 0..messages {
            send(format!("message {i}"), Some(task.clone())).await?;
        }
        control(&pid, &["-d"])
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    result?;
    // The dump of `-d` is the profile's first part, `callgrind.out.1`.
    let dump = dir.join("callgrind.out.1");
    let text = std::fs::read_to_string(&dump).with_context(|| format!("no dump at {}", dump.display()))?;
    let total = total_instructions(&text).with_context(|| format!("no totals in {}", dump.display()))?;
    Ok((total as f64 / messages as f64, dump))
}

fn control(pid: &str, args: &[&str]) -> Result<()> {
    let out = Command::new("callgrind_control").args(args).arg(pid).output()?;
    if !out.status.success() {
        bail!("callgrind_control {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

/// The `Ir` count of a callgrind dump: its `totals:` line, else its `summary:` line.
fn total_instructions(profile: &str) -> Option<u64> {
    let line = |key: &str| profile.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next());
    line("totals:").or_else(|| line("summary:"))?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{options, total_instructions};

    #[test]
    fn a_dumps_instruction_count_and_the_commands_flags() {
        let dump = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 630714843\n\nfn=(1) x\n0 3\n\ntotals: 630714843\n";
        assert_eq!(total_instructions(dump), Some(630_714_843));
        assert_eq!(total_instructions("events: Ir\nsummary: 12\n"), Some(12));
        assert_eq!(total_instructions("events: Ir\n"), None);
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = options(&args(&["--bin", "a", "--bin", "b", "--messages", "7"])).unwrap();
        assert_eq!((o.bins.len(), o.warm, o.messages, o.store, o.keep), (2, 60, 7, None, false));
        assert!(options(&args(&["--keep", "--messages", "3"])).unwrap().keep);
        let o = options(&args(&["--store", "postgres://u@h/db"])).unwrap();
        assert_eq!(o.store.as_deref(), Some("postgres://u@h/db"));
        assert!(options(&args(&["--messages", "0"])).is_err());
        assert!(options(&args(&["--warm"])).unwrap_err().to_string().contains("--warm needs a value"));
        assert!(options(&args(&["--nope", "1"])).unwrap_err().to_string().contains("unknown flag --nope"));
    }
}
