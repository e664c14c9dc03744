//! Images as users fetch, list, remove and run them, against a real registry on loopback.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`image::cli::…`). Tests of one binary run in parallel threads.

#[path = "../../../image/tests/common/mod.rs"]
mod image_common;
#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../pod_support/mod.rs"]
mod pod_support;
#[path = "../support/mod.rs"]
mod support;

mod cli;
mod run;
