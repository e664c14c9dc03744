//! Pod networking: the `rkt net` commands, how plugins are called, port forwarding, setup and
//! teardown with the test plugin and with the real plugins.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`net::cli::…`). Tests of one binary run in parallel threads.

#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../net_support/mod.rs"]
mod net_support;
#[path = "../pod_support/mod.rs"]
mod pod_support;
#[path = "../support/mod.rs"]
mod support;

mod cli;
mod plugin_calls;
mod ports;
mod real;
mod setup;
