//! `cargo xtask bench`: the durable core's speed, measured side by side in one run on one
//! embedded dev server (WAL), and reported as ratios to the floor (docs/performance.md).
//!
//! - floor: update-with-start round trip of a trivial workflow (an update that returns at
//!   once) on the same server; raw throughput: updates/s of 16 concurrent trivial workflows;
//!   turn-shaped: the same with three no-op local activities before each update's answer
//!   (the harness turn's shape without its I/O);
//! - the harness (release binary, echo model): time to first and to final event of a
//!   streaming message on a new task, blocking SendMessage p50/p95, messages/s with 16
//!   concurrent tasks, its RSS idle after one conversation of three messages (issue 31) and
//!   its peak RSS; its CPU per new task (the latency rounds' first messages) beside its CPU
//!   per message to an open task (issue 31);
//! - reads: GetTask of an ended task beside the agent card, requests/s of 16 loops and the
//!   harness's CPU per request (issue 31); then the same driven by `wrk` when it is on `PATH`
//!   (the bench's own client, on the same cores, spends more CPU on a GetTask than on the
//!   card, and its ratio reads low);
//! - one conversation of `--long N` (10,000) messages, one after the other: p50 latency and
//!   messages/s of its first 100 messages against its last 100, and the harness's RSS before
//!   and after it (issue 15).
//!
//! - an OpenAI-compatible endpoint (the test suite's mock, in this process): the time from
//!   its first byte to the first artifact chunk at an SSE client, beside its own time to
//!   first byte (issue 17); and from its first byte of an `emit_ui` call to the surface's
//!   A2UI artifact at an SSE client, beside that (issue 30); and each turn's first event,
//!   beside a floor sample taken before it (issue 31).
//!
//! - tool calling (issue 29): the harness's time in a tool round (the embeddable harness in
//!   this process, a host tool, the mock endpoint), beside the tool's own time and the
//!   Temporal floor of the round's shape (two activities and two local ones).
//!
//! - with a Postgres (TINY_HARNESS_BENCH_POSTGRES, which `cargo xtask bench` starts): the
//!   harness on it beside the one on SQLite, each with 16 tasks in the same 2 s turns of the
//!   throughput phase, and its CPU per message as a ratio to SQLite's (issue 31);
//!   subscriber lag on the instance that runs a task beside one on an instance without a
//!   worker, and messages/s with the harness's CPU per message on one instance and on two
//!   (issue 20).
//!
//! - observability (issue 32): the harness's CPU per message with metrics and traces off,
//!   with metrics on (the default), and with traces exported too.
//!
//! Flags: `--samples N` (default 40), `--seconds S` per throughput phase (default 10),
//! `--parked N` (1,000), `--long N` (10,000; 0 skips it), `--openai N` (the samples of the
//! openai phase, default `--samples`; 0 skips it, e.g. for a harness older than issue 17),
//! `--tools N` (the samples of the tool phase, default `--samples`; 0 skips it),
//! `--observability S` (seconds of each configuration, default `--seconds`; 0 skips it),
//! `--participant NAME` (every request to the harness names its sender, `X-Participant-Id`:
//! a participant's messages are echoed into the log, S12; default: anonymous, as the
//! official clients send).
//! Latency samples are taken in turns (floor, streaming, blocking, in each of their six
//! orders in turn) and throughput in 2 s turns (raw, raw update-with-start, turn-shaped,
//! harness), so the dev server's fast and slow spells, and what it still does after a
//! sample, fall on every measure alike.

mod floor;
mod harness;
mod instances;
mod long;
mod observability;
mod openai;
mod reads;
mod tools;

use floor::*;
use futures::StreamExt;
use harness::*;
use serde_json::json;
use std::time::{Duration, Instant};
use temporalio_client::WorkflowStartOptions;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn string_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

/// The HTTP client of the harness's requests: naming its sender on each when given one.
fn client_as(participant: Option<String>) -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(who) = participant {
        headers.insert("X-Participant-Id", reqwest::header::HeaderValue::from_str(&who)?);
    }
    Ok(reqwest::Client::builder().default_headers(headers).build()?)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let samples = arg("--samples", 40);
    let seconds = arg("--seconds", 10);
    let bin = std::env::var("TINY_HARNESS_BIN").unwrap_or_else(|_| "target/release/tiny-harness".into());
    let dir = tempfile::tempdir()?;
    let cli = tiny_harness::temporal_dev::find_or_provision_cli(None).await?;
    let mut server = tiny_harness::temporal_dev::EmbeddedTemporal::start(&cli, &dir.path().join("temporal.db")).await?;
    // The harness's own rule for this address (none on loopback), so both sides call the
    // server alike.
    let compression = tiny_harness::GrpcCompression::for_address(&server.address);
    let client = tiny_harness::connect_temporal(&server.address, "default", compression).await?;
    let (stop_worker, _thread) = tiny_harness::spawn_worker_thread(client.clone(), || {
        Ok(temporalio_sdk::WorkerOptions::new("bench-floor")
            .register_workflow::<FloorWorkflow>()
            .map_err(|e| e.to_string())?
            .register_workflow::<TurnWorkflow>()
            .map_err(|e| e.to_string())?
            .register_workflow::<ToolShapeWorkflow>()
            .map_err(|e| e.to_string())?
            .register_activities(Noop)
            .build())
    })
    .await?;

    // Start the harness first: every phase below measures it and the floor in turns, so a
    // slow spell of the dev server (it has fast and slow periods, docs/performance.md)
    // falls on both alike.
    let port = tiny_harness::temporal_dev::free_port();
    let config = write_config(dir.path(), "harness", port, &server.address, "bench-harness", "")?;
    let base = format!("http://127.0.0.1:{port}");
    let http = client_as(string_arg("--participant"))?;
    let data_dir = dir.path().join("harness");
    let mut harness = start_harness(&http, &bin, &config, &data_dir, &base).await?;

    // Issue 31: what the harness holds idle after one conversation of three messages.
    let task = open_task(&http, &base, "hello").await;
    for text in ["again", "and again"] {
        say(&http, &base, &task, text).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss_idle, anon_idle) = (rss_kib(harness.id()), status_kib(harness.id(), "RssAnon:"));

    eprintln!("bench: latency, {samples} rounds of floor / streaming / blocking, taken in turns");
    let (mut floor, mut firsts, mut finals, mut blocking) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut floor_ids = Vec::new();
    // The streams' first events, [not right after a floor sample, right after one].
    let mut firsts_after_floor: [Vec<Duration>; 2] = Default::default();
    // Issue 31: the harness's CPU over the measured rounds, each of which opens two tasks (one
    // streamed, one blocking); it is idle while the floor is taken.
    let mut new_task_cpu = 0.0;
    for i in 0..samples + 5 {
        if i == 5 {
            new_task_cpu = cpu_secs(harness.id());
        }
        // The three in each of their six orders in turn: a measure taken right after a
        // floor sample was slower in every run, and a fixed order charged that to one of
        // them (docs/performance.md, "The latency rounds' order, and Postgres in ten
        // statements").
        let (mut f, mut first, mut fin, mut b) = Default::default();
        let order = ORDERS[i as usize % ORDERS.len()];
        for (place, measure) in order.iter().enumerate() {
            match measure {
                Latency::Floor => {
                    let (took, id) = floor_once(&client).await;
                    floor_ids.push(id);
                    f = took;
                }
                Latency::Stream => {
                    (first, fin) = stream_times(&http, &base).await;
                    let after_floor = place > 0 && order[place - 1] == Latency::Floor;
                    if i >= 5 {
                        firsts_after_floor[usize::from(after_floor)].push(first);
                    }
                }
                Latency::Blocking => {
                    let t = Instant::now();
                    rpc(&http, &base, "SendMessage", json!({"message": message("hello", None)})).await;
                    b = t.elapsed();
                }
            }
        }
        if i >= 5 {
            floor.push(f);
            firsts.push(first);
            finals.push(fin);
            blocking.push(b);
        }
    }
    let new_task_cpu = (cpu_secs(harness.id()) - new_task_cpu) * 1000.0 / (2 * samples).max(1) as f64;
    stop_floor(&client, floor_ids).await;
    let floor_p50 = percentile(&mut floor, 0.5);
    let floor_p95 = percentile(&mut floor, 0.95);

    eprintln!(
        "bench: throughput, 16 concurrent loops, {seconds} s each of raw update / raw update-with-start / turn-shaped update / harness, in 2 s turns"
    );
    let (mut raw_ids, mut turn_ids) = (Vec::new(), Vec::new());
    for _ in 0..16 {
        let id = unique("raw");
        client
            .start_workflow(FloorWorkflow::run, (), WorkflowStartOptions::new("bench-floor", id.clone()).build())
            .await
            .expect("start");
        raw_ids.push(id);
        let id = unique("turn");
        client
            .start_workflow(TurnWorkflow::run, (), WorkflowStartOptions::new("bench-floor", id.clone()).build())
            .await
            .expect("start");
        turn_ids.push(id);
    }
    let mut tasks = Vec::new();
    for _ in 0..16 {
        tasks.push(open_task(&http, &base, "start").await);
    }
    // Issue 31: the same harness on Postgres (its aim: no more CPU per message than on
    // SQLite), its 16 tasks measured in the same 2 s turns, so both meet the dev server's
    // spells alike and their conversations grow alike.
    let postgres = std::env::var("TINY_HARNESS_BENCH_POSTGRES").ok().filter(|url| !url.is_empty());
    let mut on_postgres = match &postgres {
        Some(url) => Some(OnPostgres::start(&http, &bin, &server.address, url, dir.path()).await?),
        None => None,
    };
    let server_pid = server.pid().unwrap_or(0);
    let slice = Duration::from_secs(2);
    let turns = seconds.div_ceil(2).max(1);
    let (mut raw_n, mut uws_n, mut turn_n, mut harness_n) = (0u64, 0u64, 0u64, 0u64);
    let mut cpu = (0.0, 0.0, 0.0);
    // The harness's CPU in those slices by thread name (issue 31).
    let mut threads = std::collections::BTreeMap::<String, (f64, f64)>::new();
    // The same for the turn-shaped phase: the server and the bench's client and worker (the
    // Temporal side of a turn without the harness's HTTP and store).
    let mut turn_cpu = (0.0, 0.0, 0.0);
    // CPU seconds so far of the harness, the server and this process.
    let cpu_now = |harness_pid: u32| (cpu_secs(harness_pid), cpu_secs(server_pid), cpu_secs(std::process::id()));
    let add_since = |total: &mut (f64, f64, f64), before: (f64, f64, f64), now: (f64, f64, f64)| {
        total.0 += now.0 - before.0;
        total.1 += now.1 - before.1;
        total.2 += now.2 - before.2;
    };
    for t in 0..turns {
        let r = raw_slice(&client, &raw_ids, slice, Raw::Update).await;
        let u = raw_slice(&client, &raw_ids, slice, Raw::UpdateWithStart).await;
        let before = cpu_now(harness.id());
        let w = raw_slice(&client, &turn_ids, slice, Raw::Turn).await;
        add_since(&mut turn_cpu, before, cpu_now(harness.id()));
        // Postgres's slice before SQLite's in every other turn: neither always follows the
        // other.
        let mut p = match &mut on_postgres {
            Some(pg) if t % 2 == 1 => pg.slice(&http, slice).await,
            _ => 0,
        };
        let (before, threads_before) = (cpu_now(harness.id()), thread_cpu(harness.id()));
        let h = harness_slice(&http, &base, &tasks, slice).await;
        add_since(&mut cpu, before, cpu_now(harness.id()));
        for (name, (secs, switches)) in thread_cpu(harness.id()) {
            let before = threads_before.get(&name).copied().unwrap_or_default();
            let entry = threads.entry(name).or_default();
            (entry.0, entry.1) = (entry.0 + secs - before.0, entry.1 + switches - before.1);
        }
        if let Some(pg) = &mut on_postgres
            && t % 2 == 0
        {
            p = pg.slice(&http, slice).await;
        }
        // Each turn's counts: a rate that falls as the conversations grow shows here.
        eprintln!(
            "bench: turn {}: raw {r}, update-with-start {u}, turn-shaped {w}, harness {h}, on Postgres {p} in 2 s",
            t + 1
        );
        (raw_n, uws_n, turn_n, harness_n) = (raw_n + r, uws_n + u, turn_n + w, harness_n + h);
    }
    stop_floor(&client, raw_ids).await;
    for id in turn_ids {
        let _ = client.get_workflow_handle::<TurnWorkflow>(id).signal(TurnWorkflow::stop, (), Default::default()).await;
    }
    let on_postgres = on_postgres.map(OnPostgres::stop);
    let measured = (turns * 2) as f64;
    let rate = |n: u64| n as f64 / measured;
    let (raw, raw_uws, raw_turn, harness_rate) = (rate(raw_n), rate(uws_n), rate(turn_n), rate(harness_n));
    let rss = peak_rss_kib(harness.id());
    eprintln!(
        "bench: reads, 16 concurrent loops, {seconds} s each of the agent card / GetTask of an ended task, in 2 s turns"
    );
    let (reads, reads_wrk) = reads::measure(&http, &base, seconds, harness.id()).await;

    // Issue 13: what parked tasks cost the harness, idle and after a restart (the
    // reconciler's pass over them included), and with the monitor reading the store.
    let parked = arg("--parked", 1000) as usize;
    eprintln!("bench: opening {parked} parked tasks");
    let opened: Vec<String> = futures::stream::iter(0..parked)
        .map(|i| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": {"messageId": format!("parked-{i}"), "role": "ROLE_USER", "parts": [{"text": "park"}]}}});
                let r: serde_json::Value =
                    http.post(format!("{base}/a2a/jsonrpc")).header("A2A-Version", "1.0").json(&body).send().await.ok()?.json().await.ok()?;
                r["result"]["task"]["id"].as_str().map(String::from)
            }
        })
        .buffer_unordered(16)
        .filter_map(|id| async move { id })
        .collect()
        .await;
    let idle = |pid: u32| async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let before = cpu_secs(pid);
        tokio::time::sleep(Duration::from_secs(5)).await;
        ((cpu_secs(pid) - before) * 100.0 / 5.0, rss_kib(pid), status_kib(pid, "RssAnon:"))
    };
    let (cpu_parked, rss_parked, anon_parked) = idle(harness.id()).await;
    let _ = harness.kill();
    let _ = harness.wait();
    let mut harness = start_harness(&http, &bin, &config, &data_dir, &base).await?;
    // The reconciler asks each open task once after a start: let it finish first.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (cpu_restarted, rss_restarted, anon_restarted) = idle(harness.id()).await;
    // Issue 15: one long conversation on the restarted harness.
    let long_messages = arg("--long", 10_000) as usize;
    let long = if long_messages > 1 {
        eprintln!("bench: one conversation of {long_messages} messages");
        Some(long::long_conversation(&http, &base, harness.id(), long_messages).await)
    } else {
        None
    };
    let _ = harness.kill();
    let _ = harness.wait();
    let model_samples = arg("--openai", samples);
    let mut model = if model_samples > 0 {
        eprintln!("bench: {model_samples} streamed turns on an OpenAI-compatible endpoint");
        Some(openai::first_chunk(dir.path(), &bin, &server.address, &client, model_samples).await?)
    } else {
        None
    };
    let tool_samples = arg("--tools", samples);
    let rounds = if tool_samples > 0 {
        eprintln!("bench: {tool_samples} tool rounds, each beside the Temporal floor of its shape");
        Some(tools::measure(dir.path(), &server.address, &client, tool_samples).await?)
    } else {
        None
    };
    let observability_secs = arg("--observability", seconds);
    let cost = if observability_secs > 0 {
        eprintln!("bench: CPU per message with metrics and traces off / metrics on / traces on too, 16 tasks each");
        Some(observability::measure(&http, &bin, &server.address, dir.path(), observability_secs).await?)
    } else {
        None
    };
    let scale = match std::env::var("TINY_HARNESS_BENCH_POSTGRES") {
        Ok(url) if !url.is_empty() => {
            eprintln!("bench: two instances on one Postgres: subscriber lag, then messages/s on one and two instances");
            Some(instances::measure(dir.path(), &bin, &server.address, &url, samples, seconds).await?)
        }
        _ => None,
    };
    stop_worker();
    server.stop().await;

    let first_p50 = percentile(&mut firsts, 0.5);
    let final_p50 = percentile(&mut finals, 0.5);
    let block_p50 = percentile(&mut blocking, 0.5);
    let block_p95 = percentile(&mut blocking, 0.95);
    let f = ms(floor_p50);
    println!("| measure | value | ratio | aim |");
    println!("|---|---|---|---|");
    println!(
        "| floor: update-with-start, trivial workflow (p50 / p95) | {:.1} / {:.1} ms | 1.00 | |",
        f,
        ms(floor_p95)
    );
    println!(
        "| streaming, new task: first event (p50) | {:.1} ms | {:.2}x floor | <= 1.1x |",
        ms(first_p50),
        ms(first_p50) / f
    );
    let [apart, after] = firsts_after_floor.map(|mut d| (!d.is_empty()).then(|| ms(percentile(&mut d, 0.5))));
    let shown = |d: Option<f64>| d.map_or("-".to_string(), |d| format!("{d:.1} ms ({:.2}x)", d / f));
    println!(
        "| of it: first event when not right after a floor sample / right after one (p50) | {} / {} | | |",
        shown(apart),
        shown(after)
    );
    println!(
        "| streaming, new task: final event (p50) | {:.1} ms | {:.2}x floor | |",
        ms(final_p50),
        ms(final_p50) / f
    );
    println!(
        "| blocking SendMessage, new task (p50 / p95) | {:.1} / {:.1} ms | {:.2}x / {:.2}x floor | <= 2x |",
        ms(block_p50),
        ms(block_p95),
        ms(block_p50) / f,
        ms(block_p95) / f
    );
    println!("| raw updates/s, 16 trivial workflows | {raw:.0} /s | 1.00 | |");
    println!(
        "| raw update-with-start/s, 16 running trivial workflows | {raw_uws:.0} /s | {:.2}x raw | |",
        raw_uws / raw
    );
    println!(
        "| turn-shaped updates/s: 16 trivial workflows, each update answered after three no-op local activities | {raw_turn:.0} /s | {:.2}x raw | |",
        raw_turn / raw
    );
    println!("| harness messages/s, 16 tasks | {harness_rate:.0} /s | {:.2}x raw | >= 0.8x |", harness_rate / raw);
    println!(
        "| harness RSS idle after one conversation of three messages (of which anonymous: the rest is the binary's pages) | {:.1} MiB ({:.1} MiB) | | <= 30 MiB |",
        rss_idle as f64 / 1024.0,
        anon_idle as f64 / 1024.0
    );
    println!("| harness peak RSS | {:.1} MiB | | |", rss as f64 / 1024.0);
    println!(
        "| reads/s, 16 loops: the agent card / GetTask of an ended task (JSON-RPC), and the harness's CPU per read | {:.0} / {:.0} /s, {:.3} / {:.3} ms | {:.2}x the card | >= 0.6x |",
        reads.card,
        reads.get_task,
        reads.cpu.0,
        reads.cpu.1,
        reads.get_task / reads.card.max(1.0),
    );
    match reads_wrk {
        Some(w) => println!(
            "| the same reads driven by wrk (2 threads, 16 connections): the agent card / GetTask, and the harness's CPU per read | {:.0} / {:.0} /s, {:.3} / {:.3} ms | {:.2}x the card | >= 0.6x |",
            w.card,
            w.get_task,
            w.cpu.0,
            w.cpu.1,
            w.get_task / w.card.max(1.0),
        ),
        None => println!("| the same reads driven by wrk | not measured: `wrk` is not on PATH | | >= 0.6x |"),
    }
    println!(
        "| harness RSS with {} parked tasks: idle / after a SIGKILL and restart (of which anonymous) | {:.1} / {:.1} MiB ({:.1} / {:.1} MiB) | {:.2}x | <= 1.10x |",
        opened.len(),
        rss_parked as f64 / 1024.0,
        rss_restarted as f64 / 1024.0,
        anon_parked as f64 / 1024.0,
        anon_restarted as f64 / 1024.0,
        rss_restarted as f64 / rss_parked.max(1) as f64
    );
    println!(
        "| harness CPU idle with {} parked tasks: before / after the restart | {:.1} / {:.1} % of a core | | |",
        opened.len(),
        cpu_parked,
        cpu_restarted
    );
    if let Some(l) = &long {
        println!(
            "| one conversation of {} messages: p50 and messages/s of messages 2-{} / the last {} | {:.1} / {:.1} ms, {:.0} / {:.0} /s | {:.2}x / {:.2}x | 1.0x |",
            l.messages,
            l.window + 1,
            l.window,
            ms(l.first.0),
            ms(l.last.0),
            l.first.1,
            l.last.1,
            ms(l.last.0) / ms(l.first.0),
            l.last.1 / l.first.1,
        );
        println!(
            "| harness RSS before / after that conversation | {:.1} / {:.1} MiB | {:.2}x | |",
            l.rss_before_kib as f64 / 1024.0,
            l.rss_after_kib as f64 / 1024.0,
            l.rss_after_kib as f64 / l.rss_before_kib.max(1) as f64,
        );
    }
    if let Some(model) = model.as_mut() {
        println!(
            "| openai model: endpoint's first byte to the first artifact chunk at the SSE client (p50 / p95), beside the endpoint's own time to first byte (p50) | {:.1} / {:.1} ms, beside {:.1} ms | | <= 5 ms p50 |",
            ms(percentile(&mut model.added, 0.5)),
            ms(percentile(&mut model.added, 0.95)),
            ms(percentile(&mut model.endpoint, 0.5)),
        );
        let (first, floor) = (ms(percentile(&mut model.first_event, 0.5)), ms(percentile(&mut model.floor, 0.5)));
        println!(
            "| openai model: streaming, new task: first event (p50), beside a floor sample taken before each | {first:.1} ms, beside {floor:.1} ms | {:.2}x floor | <= 1.1x |",
            first / floor.max(0.001),
        );
        let chunk = ms(percentile(&mut model.added, 0.5));
        let surface = ms(percentile(&mut model.surface, 0.5));
        println!(
            "| A2UI: endpoint's first byte of an `emit_ui` call to the surface's artifact at the SSE client (p50 / p95), beside the first-chunk row (p50) | {:.1} / {:.1} ms, beside {:.1} ms | {:.2}x the first chunk | |",
            surface,
            ms(percentile(&mut model.surface, 0.95)),
            chunk,
            surface / chunk.max(0.001),
        );
    }
    if let Some(mut r) = rounds {
        let (h50, h95) = (percentile(&mut r.harness, 0.5), percentile(&mut r.harness, 0.95));
        let floor = ms(percentile(&mut r.shaped, 0.5)) - ms(percentile(&mut r.empty, 0.5));
        println!(
            "| tool round: the harness's time (model's tool call to the tool's start, plus its end to the next model request; p50 / p95), beside the tool's own time (p50) and the Temporal floor of the round's shape (two activities and two local ones, p50) | {:.1} / {:.1} ms, beside {:.1} ms and {:.1} ms | {:+.1} ms above the floor (p50) | <= 5 ms above the floor |",
            ms(h50),
            ms(h95),
            ms(percentile(&mut r.tool, 0.5)),
            floor,
            ms(h50) - floor,
        );
    }
    if let Some(mut s) = scale {
        let (l50, l95) = (percentile(&mut s.local, 0.5), percentile(&mut s.local, 0.95));
        let (c50, c95) = (percentile(&mut s.cross, 0.5), percentile(&mut s.cross, 0.95));
        println!(
            "| subscriber lag, send to the turn's final event: on the instance that runs it / on another (p50, p95) | {:.1}, {:.1} / {:.1}, {:.1} ms | {:.2}x / {:.2}x | 1.0x |",
            ms(l50),
            ms(l95),
            ms(c50),
            ms(c95),
            ms(c50) / ms(l50),
            ms(c95) / ms(l95)
        );
        println!(
            "| messages/s, 16 tasks on Postgres: one instance / two (alternating) | {:.0} / {:.0} /s | {:.2}x | |",
            s.one.0,
            s.two.0,
            s.two.0 / s.one.0
        );
        println!(
            "| harness CPU per message, one instance / two (both together) | {:.2} / {:.2} ms | {:.2}x | |",
            s.one.1,
            s.two.1,
            s.two.1 / s.one.1
        );
    }
    if let Some((pg_n, pg_cpu)) = on_postgres {
        let (sqlite_ms, pg_ms) = (cpu.0 * 1000.0 / harness_n.max(1) as f64, pg_cpu * 1000.0 / pg_n.max(1) as f64);
        println!(
            "| harness CPU per message, 16 tasks, SQLite / Postgres in the same 2 s turns (messages/s) | {sqlite_ms:.2} / {pg_ms:.2} ms ({:.0} / {:.0} /s) | {:.2}x SQLite | <= 1.0x |",
            rate(harness_n),
            rate(pg_n),
            pg_ms / sqlite_ms.max(1e-9),
        );
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let busy = |c: (f64, f64, f64)| (c.0 + c.1 + c.2) * 100.0 / (measured * cores as f64);
    let per_turn = |c: f64| c * 1000.0 / turn_n.max(1) as f64;
    println!(
        "| CPU per update in the turn-shaped phase: harness (idle) / Temporal server / bench client and worker | {:.2} / {:.2} / {:.2} ms | {:.0}% of {} core-seconds used | |",
        per_turn(turn_cpu.0),
        per_turn(turn_cpu.1),
        per_turn(turn_cpu.2),
        busy(turn_cpu),
        turns * 2 * cores,
    );
    let per = |c: f64| c * 1000.0 / harness_n.max(1) as f64;
    if let Some(cost) = cost {
        let [off, metrics, traces] = cost.cpu_ms;
        println!(
            "| harness CPU per message, 16 tasks: metrics and traces off / metrics on (default) / metrics and traces on ({} spans exported) | {off:.2} / {metrics:.2} / {traces:.2} ms ({:.0} / {:.0} / {:.0} messages/s) | {:.2}x / {:.2}x off | |",
            cost.spans,
            cost.rate[0],
            cost.rate[1],
            cost.rate[2],
            metrics / off.max(1e-9),
            traces / off.max(1e-9),
        );
    }
    println!(
        "| CPU per message in the 16-task phase: harness / Temporal server / bench client | {:.2} / {:.2} / {:.2} ms | {:.0}% of {} core-seconds used | |",
        per(cpu.0),
        per(cpu.1),
        per(cpu.2),
        busy(cpu),
        turns * 2 * cores,
    );
    println!(
        "| harness CPU per new task (the latency rounds' streamed and blocking first messages), beside its CPU per message to an open task (16-task phase) | {new_task_cpu:.2} ms, beside {:.2} ms | {:.2}x | |",
        per(cpu.0),
        new_task_cpu / per(cpu.0).max(1e-9),
    );
    // Issue 31: where the harness's CPU per message goes, by thread.
    println!();
    // A context switch per message costs the kernel's scheduling and a thread's caches: the
    // column says how often a message puts each thread to sleep or off its core.
    println!(
        "| harness thread (16-task phase) | CPU per message | share of the harness's | context switches per message |"
    );
    println!("|---|---|---|---|");
    let mut by_cpu: Vec<(String, (f64, f64))> = threads.into_iter().filter(|(_, (secs, _))| *secs > 0.0).collect();
    by_cpu.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
    let counted: f64 = by_cpu.iter().map(|(_, (secs, _))| secs).sum();
    let switches: f64 = by_cpu.iter().map(|(_, (_, n))| n).sum();
    let per_message = |n: f64| n / (harness_n as f64).max(1.0);
    for (name, (secs, n)) in by_cpu {
        println!("| {name} | {:.2} ms | {:.0}% | {:.1} |", per(secs), secs * 100.0 / cpu.0.max(1e-9), per_message(n));
    }
    println!(
        "| (threads that ended within a slice) | {:.2} ms | {:.0}% | |",
        per((cpu.0 - counted).max(0.0)),
        (cpu.0 - counted).max(0.0) * 100.0 / cpu.0.max(1e-9)
    );
    println!("| all | {:.2} ms | 100% | {:.1} |", per(cpu.0), per_message(switches));
    Ok(())
}

/// One of the latency rounds' three measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Latency {
    Floor,
    Stream,
    Blocking,
}

/// The six orders of the three, taken in turn by the latency rounds: each measure comes
/// first, second and third, and after each other one, equally often.
const ORDERS: [[Latency; 3]; 6] = {
    use Latency::*;
    [
        [Floor, Stream, Blocking],
        [Stream, Blocking, Floor],
        [Blocking, Floor, Stream],
        [Floor, Blocking, Stream],
        [Blocking, Stream, Floor],
        [Stream, Floor, Blocking],
    ]
};
