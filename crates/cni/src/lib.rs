//! A CNI runtime library, shaped like the reference Go `libcni`.
//!
//! It loads network configurations ([`conf`]), finds and runs plugins ([`invoke`]),
//! keeps libcni-compatible attachment caches ([`cache`]) and offers the operations of
//! libcni's `CNIConfig` ([`api`]): add, check, del, gc, status, validate and version
//! info, for a network list ([`api::CniConfig::add_network_list`]) or a single
//! network ([`api::CniConfig::add_network`]). It knows nothing of pods or command lines.
//!
//! The crate's `README.md` maps libcni's API to this one and has a runnable example
//! (run as a doctest).

#![warn(missing_docs)]

pub mod api;
pub mod cache;
pub mod conf;
pub mod error;
pub mod invoke;
pub mod result;
pub mod types;
pub mod validate;
pub mod version;

/// The code blocks of `README.md`, run as doctests so the example there keeps working.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
