//! `rkt config`, `rkt version` and the `--help` texts: the layered paths configuration, its
//! origins and its errors.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`config::cli::…`). Tests of one binary run in parallel threads.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod errors;
mod show;
