//! Issue 30 (S20): the web UI at `/ui` in a real headless Chromium. Two `tiny-harness serve`
//! processes on the test dev server (the echo model; a scripted model that streams slowly and
//! shows an A2UI surface) and `ui/tests/browser.mjs`, which drives Debian's `chromium` with
//! playwright-core (nothing downloaded): who you are, chosen once; a conversation with the
//! streamed echo; `/help`; cancel, and the task list following; an error as the server worded
//! it; a reload mid-stream that resumes without duplicates; a surface rendered by the
//! official renderer whose button's action reaches the task. A failure keeps a screenshot
//! under `target/ui-test-artifacts/`.

use contract_tests::{HarnessOptions, HarnessProcess};
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script() -> String {
    let ui = contract_tests::button_surface();
    format!(
        r#"[[reply]]
when = "[A2UI action] go"
chunks = ["You ", "pressed ", "go."]

[[reply]]
when = "form"
chunks = ["Here is a form."]
ui = '''{ui}'''
after = ["Press it."]

[[reply]]
when = "slow"
chunks = ["one ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight"]
delay_ms = 500
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_uses_the_web_ui_in_a_real_browser() {
    let ui = root().join("ui");
    assert!(
        ui.join("node_modules/playwright-core").is_dir(),
        "ui/node_modules is missing: run `npm ci` in ui/ (cargo xtask test does)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        std::path::Path::new(&chromium).is_file(),
        "{chromium} is missing: install Debian's `chromium` package (.ci/run does), or set CHROMIUM"
    );
    let echo = HarnessProcess::start(HarnessOptions::default()).await;
    let scripted = HarnessProcess::start(HarnessOptions { script: Some(script()), ..Default::default() }).await;
    let artifacts = root().join("target/ui-test-artifacts");
    let out = tokio::task::spawn_blocking({
        let (ui, echo, scripted) = (ui.clone(), echo.base_url.clone(), scripted.base_url.clone());
        move || {
            Command::new("node")
                .arg(ui.join("tests/browser.mjs"))
                .current_dir(&ui)
                .env("ECHO_BASE", echo)
                .env("SCRIPT_BASE", scripted)
                .env("ARTIFACTS", &artifacts)
                .env("CHROMIUM", chromium)
                .output()
                .expect("node runs")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the browser test failed:\n{stdout}\n{stderr}\n--- echo harness log:\n{}\n--- scripted harness log:\n{}",
        echo.log(),
        scripted.log()
    );
    assert!(stdout.contains("the UI passed every step"), "{stdout}");
}
