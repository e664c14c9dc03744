//! The leak checker of rkt's tests: the `leak-check` crate (`crates/leak-check`, shared
//! with the CNI runtime's tests), re-exported so tests write `leaks::Guard`, `leaks::Ctx`,
//! plus [`lab`], a temporary rkt world driving the `rkt` binary, which only rkt's tests can
//! have (`env!("CARGO_BIN_EXE_rkt")`).
//!
//! ```ignore
//! mod leaks;
//! let lab = leaks::lab::Lab::new();
//! let _g = leaks::Guard::new(lab.ctx(&[&net]).subnet("10.77.3.0/24"));
//! ```

#![allow(dead_code)] // Each test file uses its own subset.

pub mod lab;

pub use leak_check::*;
