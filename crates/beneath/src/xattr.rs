//! Extended attributes of an entry opened with `O_PATH` (by [`crate::at::open_entry`] or
//! [`crate::open_beneath`]). The `f*xattr` calls refuse `O_PATH` descriptors, so these go
//! through the descriptor's own `/proc/self/fd` entry, which names exactly the inode it is
//! open on: no path is resolved again, and opening never blocks (a FIFO) nor follows a
//! symlink that was not already followed.

use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use rustix::fs::XattrFlags;
use rustix::io::Errno;

fn proc_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Sets attribute `key` (`user.origin`, `trusted.overlay.opaque`, …) to `value` on what
/// `fd` is open on. A filesystem without that namespace fails with `ENOTSUP`
/// (`io::ErrorKind::Unsupported`).
pub fn set(fd: BorrowedFd<'_>, key: &CStr, value: &[u8]) -> io::Result<()> {
    Ok(rustix::fs::setxattr(
        proc_path(fd),
        key,
        value,
        XattrFlags::empty(),
    )?)
}

/// The value of attribute `key` on what `fd` is open on; `None` when it has none.
pub fn get(fd: BorrowedFd<'_>, key: &CStr) -> io::Result<Option<Vec<u8>>> {
    let path = proc_path(fd);
    loop {
        let size = match rustix::fs::getxattr_query(&path, key) {
            Err(Errno::NODATA) => return Ok(None),
            other => other?,
        };
        let mut value = vec![0u8; size];
        match rustix::fs::getxattr(&path, key, &mut value[..]) {
            Ok(n) => {
                value.truncate(n);
                return Ok(Some(value));
            }
            // It grew in between: ask its size again.
            Err(Errno::RANGE) => continue,
            Err(Errno::NODATA) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// The names of the attributes of what `fd` is open on, those the caller may see.
pub fn list(fd: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let path = proc_path(fd);
    loop {
        let size = rustix::fs::listxattr_query(&path)?;
        let mut names = vec![0u8; size];
        match rustix::fs::listxattr(&path, &mut names[..]) {
            Ok(n) => {
                names.truncate(n);
                return Ok(names
                    .split(|b| *b == 0)
                    .filter(|name| !name.is_empty())
                    .map(|name| OsString::from_vec(name.to_vec()))
                    .collect());
            }
            Err(Errno::RANGE) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
