//! Nomad's built-in rkt driver (Nomad v0.10.9, `drivers/rkt`), unchanged, driving the rkt
//! under test: on one host (`nomad agent -dev` on loopback) and on a cluster of three
//! simulated hosts. Nomad is built from the source archive in the team's shared directory
//! (see `agent::nomad_binary`). Root only; each test makes and removes its own registry,
//! agents, namespaces and pods, and ends with the leak checker.
//!
//! One test binary of the room "orchestrators"; tests of one binary run in parallel threads
//! (the single host's pods use the host's namespace, the cluster's its own namespaces).

mod agent;
mod cluster;
#[path = "../../../image/tests/common/mod.rs"]
mod image_common;
#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../multi_host_support/mod.rs"]
mod multi_host_support;
#[path = "../pod_support/mod.rs"]
mod pod_support;
mod single_host;
#[path = "../support/mod.rs"]
mod support;
