//! The map kept true by machine (issue 28; STYLE.md, rust-analyzer's tidy tests):
//! docs/architecture.md's crate edges ("In words") are exactly the workspace's normal
//! dependencies between its members as `cargo metadata` reports them, and its table of the
//! request handler's files is exactly the files of `crates/tiny-harness/src/handler/`.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md")
}

/// The names between backticks in `text`, in order.
fn ticked(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(String::from).collect()
}

/// The edges the map states: the paragraph that starts "In words:" (each clause
/// `` `a` -> `b`, `c` ``, clauses split by `;`).
fn documented_edges(doc: &str) -> BTreeSet<(String, String)> {
    let start = doc.find("In words:").expect("docs/architecture.md has an \"In words:\" paragraph");
    let paragraph = &doc[start + "In words:".len()..];
    let paragraph = &paragraph[..paragraph.find("\n\n").unwrap_or(paragraph.len())];
    let mut edges = BTreeSet::new();
    for clause in paragraph.split(';') {
        let Some((from, to)) = clause.split_once("->") else { continue };
        let from = ticked(from).pop().unwrap_or_else(|| panic!("no crate before `->` in {clause:?}"));
        for to in ticked(to) {
            edges.insert((from.clone(), to));
        }
    }
    edges
}

/// The normal dependencies between workspace members.
fn actual_edges() -> BTreeSet<(String, String)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages.iter().filter_map(|p| p["name"].as_str()).map(String::from).collect();
    let mut edges = BTreeSet::new();
    for p in packages {
        let from = p["name"].as_str().unwrap().to_string();
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let name = d["name"].as_str().unwrap_or_default();
            if d["kind"].is_null() && members.contains(name) {
                edges.insert((from.clone(), name.to_string()));
            }
        }
    }
    edges
}

#[test]
fn the_architecture_maps_crate_edges_are_the_workspaces_dependencies() {
    let documented = documented_edges(&architecture());
    let actual = actual_edges();
    let missing: Vec<_> = actual.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&actual).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/architecture.md (\"In words:\") disagrees with cargo metadata:\n  missing from the map: {missing:?}\n  \
         in the map, not in Cargo.toml: {extra:?}"
    );
}

#[test]
fn the_architecture_maps_handler_table_lists_every_handler_file() {
    let doc = architecture();
    let start = doc.find("The request handler (`crates/tiny-harness/src/handler/`)").expect("the handler table");
    let table = &doc[start..];
    let table = &table[..table.find("\n\n## ").unwrap_or(table.len())];
    let documented: BTreeSet<String> =
        table.lines().filter(|l| l.starts_with("| `")).filter_map(|l| ticked(l).into_iter().next()).collect();
    let dir = root().join("crates/tiny-harness/src/handler");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("the handler directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    assert_eq!(documented, files, "docs/architecture.md's handler table against {}", dir.display());
}
