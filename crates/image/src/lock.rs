//! Advisory file locks (`flock`) that guard the store across processes: shared while an
//! image is fetched or read, exclusive while images are removed or garbage collected.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A held lock; released when dropped (closing the file releases the `flock`).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Which kind of lock to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Many holders at once; excludes an exclusive holder.
    Shared,
    /// One holder.
    Exclusive,
}

impl FileLock {
    /// Opens (creating it) and locks `path`, waiting for a conflicting holder to let go.
    pub fn acquire(path: &Path, kind: LockKind) -> io::Result<FileLock> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)?;
        let op = match kind {
            LockKind::Shared => libc::LOCK_SH,
            LockKind::Exclusive => libc::LOCK_EX,
        };
        loop {
            // SAFETY: the descriptor is valid for the lifetime of `file`; flock takes no
            // pointers.
            let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
            if rc == 0 {
                return Ok(FileLock { _file: file });
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}
