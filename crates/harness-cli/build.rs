//! Link options of the `tiny-harness` binary.
//!
//! On Linux with glibc the binary is linked with `-z pack-relative-relocs` (issue 31): a
//! position-independent executable carries one 24-byte record per pointer the loader must
//! adjust at start-up (`.rela.dyn`, 1.2 MB here), and the loader reads all of it, so it
//! stays resident for the life of the process. Packed (DT_RELR, glibc 2.36 and GNU ld 2.38 or
//! lld 15 onwards) the same relocations take a few kilobytes. The executable stays
//! position-independent (ASLR is unchanged).
//!
//! A release build for x86_64 Linux with glibc also gives lld (Rust's default linker there
//! since 1.90) the link order of `symbol-order.txt`, which `cargo xtask symbol-order`
//! measures: the functions that start-up and a conversation run come first in `.text`, so
//! an idle harness keeps a few megabytes of its code resident instead of most of it. Names
//! the file lists that a build does not have are skipped without a warning; the order only
//! moves code, never changes it. `TINY_HARNESS_SYMBOL_ORDER=0` leaves it out (for a build
//! linked by GNU ld, which has no such option). docs/performance.md has the figures.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.contains("-linux-gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let ordered = std::env::var("TINY_HARNESS_SYMBOL_ORDER").map_or(true, |v| v != "0");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if ordered && release && target == "x86_64-unknown-linux-gnu" {
        let order =
            std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("symbol-order.txt");
        if order.exists() {
            println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=TINY_HARNESS_SYMBOL_ORDER");
}
