//! cargo-fuzz target: `cargo fuzz run cni_result` (see docs/RELIABILITY.md).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rkt_fuzz::cni_result(data));
