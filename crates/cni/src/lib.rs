//! A CNI runtime library, shaped like the reference Go `libcni`.
//!
//! It loads network configurations ([`conf`]), finds and runs plugins ([`invoke`]),
//! keeps libcni-compatible attachment caches ([`cache`]) and offers the operations of a
//! runtime over a network list ([`api`]): add, check, del, gc, status, validate and
//! version info. It knows nothing of pods or command lines.

pub mod api;
pub mod cache;
pub mod conf;
pub mod error;
pub mod invoke;
pub mod result;
pub mod types;
pub mod validate;
pub mod version;
