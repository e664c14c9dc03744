//! OCI and Docker images for container runtimes: references ([`mod@reference`]), a verified
//! content-addressed store ([`store`]), transports that read images from registries, OCI
//! layouts and archives ([`transport`]) in front of one verified copy ([`copy`]), fetching
//! by reference with a pull policy ([`mod@fetch`]), layer unpacking that never writes outside
//! its target ([`unpack`]), each layer unpacked once on its own for overlay mounts
//! ([`layers`], with files looked up across them in [`merged`]), and gc ([`gc`]).
//! It knows nothing of pods or of rkt's command line.
//!
//! The crate's `README.md` maps its API, says how another runtime would use it and has a
//! runnable example (run as a doctest).

#![warn(missing_docs)]

pub mod copy;
pub mod digest;
pub mod error;
pub mod fetch;
pub mod gc;
pub mod layers;
pub mod lock;
pub mod merged;
pub mod partial;
pub mod platform;
pub mod reference;
pub mod store;
pub mod transport;
pub mod unpack;

pub use digest::Digest;
pub use fetch::{fetch, FetchError, FetchOptions, PullPolicy};
pub use gc::GcReport;
pub use partial::{NoProgress, Progress};
pub use platform::Platform;
pub use reference::{DockerRef, ImageRef, ReferenceError, Target};
pub use store::{ImageRecord, Removed, Store, StoreError};

/// The code blocks of `README.md`, run as doctests so the example there keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
