//! Link options of the `tiny-harness` binary.
//!
//! On Linux with glibc the binary is linked with `-z pack-relative-relocs` (issue 31): a
//! position-independent executable carries one 24-byte record per pointer the loader must
//! adjust at start-up (`.rela.dyn`, 1.2 MB here), and the loader reads all of it, so it
//! stays resident for the life of the process. Packed (DT_RELR, glibc 2.36 and GNU ld 2.38 or
//! lld 15 onwards) the same relocations take a few kilobytes. The executable stays
//! position-independent (ASLR is unchanged). docs/performance.md has the figures.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.contains("-linux-gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
