//! The thin layer over `test-kit` that only rkt's own tests can have: the binary under test
//! (`env!("CARGO_BIN_EXE_rkt")` exists only in this package's tests), run as a user would,
//! then asserted on.
//!
//! ```ignore
//! let out = support::rkt(&["config", "--local-config", dir]).run();
//! out.assert_success().assert_stdout_contains("\"net-conf\"");
//! ```

#![allow(dead_code)] // Each test binary uses its own subset of these helpers.

pub mod config_tree;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

#[allow(unused_imports)] // Each test binary uses its own subset.
pub use test_kit::{Outcome, Rkt, World};

/// The `rkt` binary under test.
pub const RKT: &str = env!("CARGO_BIN_EXE_rkt");

/// `rkt <args>`, run in the current directory with the inherited environment.
pub fn rkt<S: AsRef<OsStr>>(args: &[S]) -> Rkt {
    Rkt::new(RKT).args(args)
}

/// A world outside `/tmp`, under cargo's temporary directory for tests: a host-command pod
/// has a `/tmp` of its own, which would hide the world's directories, so a test of what
/// such a pod sees of the host's directories keeps them here.
pub fn world_off_tmp() -> World {
    World::new_in(RKT, Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// The `cni-test-plugin` binary, built once per test process on first use.
pub fn test_plugin() -> PathBuf {
    test_kit::workspace_bin("cni-test-plugin")
}
