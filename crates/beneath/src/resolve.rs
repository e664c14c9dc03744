//! Opening a path beneath a root directory: `openat2(2)` with `RESOLVE_IN_ROOT |
//! RESOLVE_NO_MAGICLINKS`. The kernel resolves every component, `..` and symlinks
//! (absolute or relative) included, as if the root's descriptor were `/`: a link that
//! points out of the tree lands inside it, as it would for a process chrooted there. A
//! magic link (`/proc/self/fd/…`, `/proc/self/exe`) is refused (`ELOOP`), and so is a
//! symlink loop.
//!
//! Everything is opened `O_PATH`: a descriptor that names the entry, for the `*at` calls of
//! [`crate::at`], for [`crate::xattr`], or as the target of a mount.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// What an opened path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Anything: a directory, a file, a device (never a symlink's own inode beneath a root:
    /// a symlink is followed).
    Any,
    /// A directory (`ENOTDIR` otherwise).
    Directory,
}

impl Kind {
    fn flags(self) -> OFlags {
        let base = OFlags::PATH | OFlags::CLOEXEC;
        match self {
            Kind::Any => base,
            Kind::Directory => base | OFlags::DIRECTORY,
        }
    }
}

/// Opens `path` (relative; an empty path or `.` is the root itself) beneath the directory
/// `root` is open on, `O_PATH`. `..` never climbs above `root`, an absolute symlink starts
/// from it. A rename racing the resolution (`EAGAIN`) resolves again.
pub fn open_beneath(
    root: BorrowedFd<'_>,
    path: impl AsRef<Path>,
    kind: Kind,
) -> io::Result<OwnedFd> {
    let path = path.as_ref();
    let path = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    let resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    loop {
        match rustix::fs::openat2(root, path, kind.flags(), Mode::empty(), resolve) {
            Err(Errno::AGAIN | Errno::INTR) => continue,
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Opens `path` as given, `O_PATH`, following symlinks: a root directory, or a source on
/// the host that the user named.
pub fn open_path(path: impl AsRef<Path>, kind: Kind) -> io::Result<OwnedFd> {
    rustix::fs::open(path.as_ref(), kind.flags(), Mode::empty()).map_err(io::Error::from)
}
