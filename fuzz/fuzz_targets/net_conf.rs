//! cargo-fuzz target: `cargo fuzz run net_conf` (see docs/RELIABILITY.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rkt_fuzz::net_conf(data));
