//! cargo-fuzz target: `cargo fuzz run paths_config` (see docs/RELIABILITY.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rkt_fuzz::paths_config(data));
