//! cargo-fuzz target: `cargo fuzz run upgrade_head` (see crates/spdy/README.md).
#![no_main]

#[path = "../src/spdy.rs"]
mod spdy;

libfuzzer_sys::fuzz_target!(|data: &[u8]| spdy::upgrade_head(data));
