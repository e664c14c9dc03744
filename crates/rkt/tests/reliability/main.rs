//! Reliability: crashes, plugin faults, fuzzed parsers, hostile input, the leak checker itself, permissions.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`reliability::crash::…`). Tests of one binary run in parallel threads.

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
