//! The error of changing mount flags; the calls on entries return [`std::io::Error`].

use std::io;
use std::path::PathBuf;

/// Why the flags of a mount could not be changed. Each variant names the mount at fault;
/// the system's reason is its source.
#[derive(Debug, thiserror::Error)]
pub enum MountAttrError {
    /// `mount_setattr(2)`, or the remount that stands in for it on a descriptor, failed.
    #[error("cannot change the flags of the mount at {}", path.display())]
    Set {
        /// The mount.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The kernel has no `mount_setattr(2)` (Linux before 5.12) and remounting `path`, one of
    /// the mounts to change, failed (`EINVAL` when no mount is at the path asked for).
    #[error(
        "mount_setattr(2) is missing (Linux before 5.12) and remounting {} failed",
        path.display()
    )]
    Remount {
        /// The mount that could not be remounted.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The kernel has no `mount_setattr(2)` (Linux before 5.12) and a tree of mounts named
    /// by a descriptor has no fallback.
    #[error("changing the flags of every mount below {} needs mount_setattr(2) (Linux 5.12 or later)", path.display())]
    Unsupported {
        /// The mount.
        path: PathBuf,
    },
    /// `/proc/self/mountinfo`, which the remount fallback reads, could not be read.
    #[error("cannot read {}", path.display())]
    Mountinfo {
        /// `/proc/self/mountinfo`.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}
