//! Issue 29: the workflow crate stays deterministic and its modules stay layered.
//! - `[dependencies]` names nothing that does I/O or brings its own runtime (tokio, an HTTP
//!   client, the store, push delivery): what activities run lives in harness-agent.
//! - the modules of `src/workflow/` import only the layers below them
//!   (`emit` <- `delegate` <- `dispatch` <- `builtin` <- `turn`), so no two of them import
//!   each other.

use std::path::Path;

const LAYERS: &[&str] = &["emit", "delegate", "dispatch", "builtin", "turn"];

#[test]
fn the_workflow_crate_depends_on_nothing_that_does_io() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap().split("\n[").next().unwrap();
    for banned in ["tokio", "reqwest", "harness-store", "harness-push", "eventsource-stream", "sqlx", "hyper"] {
        assert!(
            !deps
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{banned} ")) || l.starts_with(&format!("{banned}."))),
            "harness-workflow depends on `{banned}`: I/O belongs in harness-agent"
        );
    }
}

#[test]
fn workflow_modules_import_only_the_layers_below_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workflow");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), LAYERS.len(), "a module was added to src/workflow: give it a layer in LAYERS");
    for file in files {
        let name = file.file_stem().unwrap().to_str().unwrap().to_string();
        let level = LAYERS.iter().position(|l| *l == name).unwrap_or_else(|| panic!("{name} has no layer"));
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, other) in LAYERS.iter().enumerate() {
            let uses = text.contains(&format!("super::{other}::")) || text.contains(&format!("super::{other};"));
            assert!(
                !uses || i < level,
                "workflow/{name}.rs imports `{other}`, which is not below it (layers: {})",
                LAYERS.join(" <- ")
            );
        }
    }
}
