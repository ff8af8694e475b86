//! The official Python client (a2a-sdk 1.3.0) as a peer (issue 3, S1): runs the pytest suite
//! in `interop/` against a running harness with the `conformance` model, a push key and an
//! extended card, over both bindings. The venv is built by `cargo xtask test` from
//! `interop/requirements.txt` (pinned) and named in TINY_HARNESS_INTEROP_PYTHON.

use contract_tests::{HarnessOptions, HarnessProcess};
use std::path::PathBuf;

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("TINY_HARNESS_INTEROP_PYTHON") {
        return PathBuf::from(p);
    }
    let fallback = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/interop-venv/bin/python");
    assert!(
        fallback.exists(),
        "no interop venv: run `cargo xtask test` (it builds target/interop-venv from \
         crates/contract-tests/interop/requirements.txt) or set TINY_HARNESS_INTEROP_PYTHON"
    );
    fallback
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_python_client_passes_every_scenario_on_both_bindings() {
    let harness = HarnessProcess::start(HarnessOptions {
        model: Some("conformance"),
        extra_config: "[card.extended]\ndescription = \"The extended card\"\n\n[[card.extended.skills]]\nid = \"internal-skill\"\nname = \"Internal\"\ndescription = \"Only for authenticated callers\"\ntags = [\"internal\"]\n".into(),
        ..Default::default()
    })
    .await;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("interop");
    let out = tokio::process::Command::new(python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "test_interop.py"])
        .current_dir(&dir)
        .env("HARNESS_URL", &harness.base_url)
        .output()
        .await
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}\n{stderr}");
    assert!(out.status.success(), "the interop suite failed:\n{stdout}\n{stderr}\nharness log:\n{}", harness.log());
    let passed: u32 = stdout
        .lines()
        .rev()
        .find_map(|l| l.split(" passed").next().and_then(|n| n.trim().rsplit(' ').next()?.parse().ok()))
        .unwrap_or(0);
    assert!(passed >= 30, "expected at least 30 interop scenarios, {passed} passed:\n{stdout}");
}
