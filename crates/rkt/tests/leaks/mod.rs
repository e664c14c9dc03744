//! The leak checker of rkt's tests: the `leak-check` crate (`crates/leak-check`, shared
//! with the CNI runtime's tests), re-exported so tests write `leaks::Guard`, `leaks::Ctx`,
//! plus [`lab`], the kit's temporary rkt world with networks of test plugins (it takes the
//! binary under test from `crate::support`, which every binary declaring this one declares).
//!
//! ```ignore
//! mod leaks;
//! let lab = leaks::lab::Lab::new();
//! let _g = leaks::Guard::new(lab.ctx(&[&net]).subnet("10.77.3.0/24"));
//! ```

#![allow(dead_code)] // Each test file uses its own subset.

pub mod lab;

pub use leak_check::*;
