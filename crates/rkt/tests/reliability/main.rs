//! Reliability: crashes, plugin faults, fuzzed parsers, hostile input, the leak checker itself,
//! permissions.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`reliability::crash::…`). Tests of one binary run in parallel threads.
//! The tests that need the host to themselves are binaries of their own, since binaries run
//! one after another: `reliability_busy_host.rs` (hundreds of pods, the host-wide admission
//! of network operations), `reliability_concurrency.rs` (a storm of pods) and
//! `reliability_mount_template.rs` (the host-wide template).

#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../support/mod.rs"]
mod support;

mod crash;
mod faults;
mod fuzz;
mod input;
mod leak_checker;
mod perms;
mod reaper;
