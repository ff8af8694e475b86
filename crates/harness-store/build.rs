//! `sqlx::migrate!` embeds the migrations at compile time; a migration added to the folder
//! must rebuild the crate, or a binary built before it runs without it (and refuses a
//! database another binary migrated further).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
