//! Working beneath a root directory on Linux, for container runtimes and image unpackers:
//! nothing here knows of pods, images or command lines.
//!
//! - [`resolve`]: a path opened beneath a root directory's descriptor with `openat2(2)` and
//!   `RESOLVE_IN_ROOT`, so `..` and symlinks, absolute or relative, resolve as if the root
//!   were `/` and never lead out of it; magic links (`/proc/self/fd/…`) are refused;
//! - [`at`]: the `*at` calls on one entry of a directory descriptor (stat, create, link,
//!   remove, list, owner, mode, times), none of which follows a symlink in that entry;
//! - [`xattr`]: extended attributes of an entry opened with `O_PATH`;
//! - [`mount`]: mount flags (read-only, `nodev`) changed with `mount_setattr(2)`, or on
//!   kernels before 5.12 by remounting each mount, and mount trees cloned and attached by
//!   descriptor (`open_tree(2)`, `move_mount(2)`).
//!
//! The calls of [`resolve`], [`at`] and [`xattr`] return the system's [`std::io::Error`]:
//! the caller knows which entry of what it was working on and names it in its own error.
//! [`mount`]'s calls, which may touch other mounts than the one named, return a
//! [`MountAttrError`] that says which.

#![warn(missing_docs)]

pub mod at;
mod error;
pub mod mount;
pub mod resolve;
pub mod xattr;

pub use error::MountAttrError;
pub use resolve::{open_beneath, open_path, Kind};
