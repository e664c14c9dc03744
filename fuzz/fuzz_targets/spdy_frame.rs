//! cargo-fuzz target: `cargo fuzz run spdy_frame` (see crates/spdy/README.md).
#![no_main]

// Each target uses one of the bodies.
#[allow(dead_code)]
#[path = "../src/spdy.rs"]
mod spdy;

libfuzzer_sys::fuzz_target!(|data: &[u8]| spdy::spdy_frame(data));
