//! `rkt` as scripts and users drive it: the defects found (issues 16 and 22), rkt 1.30's flags
//! and output, completion and manual pages, a reader that went away.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`cli::defects::…`). Tests of one binary run in parallel threads.

#[path = "../../../image/tests/common/mod.rs"]
mod image_common;
#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../pod_support/mod.rs"]
mod pod_support;
#[path = "../support/mod.rs"]
mod support;

mod completion_man;
mod defects;
mod flags;
mod nomad_cli;
mod output;
mod rkt_compat;
