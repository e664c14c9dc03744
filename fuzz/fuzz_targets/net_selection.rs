//! cargo-fuzz target: `cargo fuzz run net_selection` (see docs/RELIABILITY.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rkt_fuzz::net_selection(data));
