//! Test support shared by the workspace's integration tests, one of each: the root check
//! and the skip of a test that needs root ([`require_root!`]), unique names for what tests
//! share with the host ([`unique`]), the one polling loop ([`wait_for`]), a command helper
//! that runs a binary as a user would and asserts on its outcome ([`Rkt`], [`Outcome`]), a
//! temporary rkt world with directories of its own ([`World`]), the workspace's helper
//! binaries built on demand ([`workspace_bin`]), a pseudo-terminal no other child
//! inherits ([`pty`]), and a child process killed when the test ends, also when it fails
//! ([`KillOnDrop`]).
//!
//! A dev-dependency only. It knows no rkt type: the tests of `crates/rkt` pass the binary
//! under test in (`env!("CARGO_BIN_EXE_rkt")` exists only in that package's tests), through
//! the thin wrappers of `crates/rkt/tests/support`.
//!
//! ```ignore
//! #[test]
//! fn a_pod_runs() {
//!     test_kit::require_root!();
//!     let world = test_kit::World::new(env!("CARGO_BIN_EXE_rkt"));
//!     world.rkt(&["run", "--net=none", "--", "true"]).run().assert_success();
//! }
//! ```

mod build;
mod child;
mod command;
mod names;
pub mod pty;
mod root;
mod wait;
mod world;

pub use build::workspace_bin;
pub use child::KillOnDrop;
pub use command::{output_with_stdin, Outcome, Rkt};
pub use names::unique;
pub use root::is_root;
pub use wait::{wait_for, PATIENCE};
pub use world::World;
