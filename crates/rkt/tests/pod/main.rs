//! Pods through their life as users run them: apps, networks end to end, volumes, the stage's
//! checks.
//!
//! One test binary of the room; each former file is a module, so a test keeps its name
//! behind the module's (`pod::apps::…`). Tests of one binary run in parallel threads.

#[path = "../../../image/tests/common/mod.rs"]
mod image_common;
#[path = "../leaks/mod.rs"]
mod leaks;
#[path = "../pod_support/mod.rs"]
mod pod_support;
#[path = "../support/mod.rs"]
mod support;

mod apps;
mod attach;
mod cgroup_parent;
mod detach;
mod dual_stack;
mod lifecycle;
mod logs;
mod net_e2e;
mod perf_behaviour;
mod run;
mod sandbox;
mod stop_reap;
mod volumes;
