//! Pod isolation proved from inside pods: escapes, what of the caller and of the host a pod
//! reaches, user namespaces.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`isolation::escape::…`). Tests of one binary run in parallel threads.

#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../net_support/mod.rs"]
mod net_support;
#[path = "../pod_support/mod.rs"]
mod pod_support;
#[path = "../support/mod.rs"]
mod support;

mod escape;
mod host_reach;
mod host_root;
mod user_ns;
