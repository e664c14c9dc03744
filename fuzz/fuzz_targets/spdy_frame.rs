//! cargo-fuzz target: `cargo fuzz run spdy_frame` (see crates/spdy/README.md).
#![no_main]

#[path = "../src/spdy.rs"]
mod spdy;

libfuzzer_sys::fuzz_target!(|data: &[u8]| spdy::spdy_frame(data));
