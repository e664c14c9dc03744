//! The `*at` calls on one entry, `name`, of a directory descriptor `dir` (an `O_PATH`
//! descriptor from [`crate::open_beneath`] serves). None of them follows a symlink that
//! `name` is: a symlink there is looked at, replaced or removed, never gone through. `name`
//! is one component; resolving a path is [`crate::resolve`]'s job.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Timespec, Timestamps};
use rustix::io::Errno;

use crate::resolve::Kind;

/// What [`lstat`] and [`fstat`] tell of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `st_mode`: the type and the permission bits.
    pub mode: u32,
    /// `st_dev`: the device of the filesystem it is on.
    pub dev: u64,
}

impl Stat {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        FileType::from_raw_mode(self.mode) == FileType::Directory
    }

    fn of(st: rustix::fs::Stat) -> Stat {
        Stat {
            mode: st.st_mode,
            dev: st.st_dev,
        }
    }
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`; `None` when there is nothing there.
pub fn lstat(dir: BorrowedFd<'_>, name: impl AsRef<Path>) -> io::Result<Option<Stat>> {
    match rustix::fs::statat(dir, name.as_ref(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Stat::of(st))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `fstat(fd)`: what `fd` (an `O_PATH` descriptor too) is open on.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    Ok(Stat::of(rustix::fs::fstat(fd)?))
}

/// Opens `name` itself `O_PATH | O_NOFOLLOW`: a symlink is opened as the symlink.
pub fn open_entry(dir: BorrowedFd<'_>, name: impl AsRef<Path>) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(
        dir,
        name.as_ref(),
        flags,
        Mode::empty(),
    )?)
}

/// The names in the directory `dir` is open on (`O_PATH` is fine: it is reopened for
/// reading through `.`), without `.` and `..`, in the order the filesystem gives them.
pub fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let reading = rustix::fs::openat(dir, c".", flags, Mode::empty())?;
    let mut names = Vec::new();
    for entry in Dir::new(reading)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name));
        }
    }
    Ok(names)
}

/// Removes `name`, and everything in it when it is a directory; nothing there is fine.
/// Never follows a symlink: one is removed, not what it points to.
pub fn remove(dir: BorrowedFd<'_>, name: impl AsRef<Path>) -> io::Result<()> {
    let name = name.as_ref();
    let Some(st) = lstat(dir, name)? else {
        return Ok(());
    };
    if st.is_dir() {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let inner = rustix::fs::openat(dir, name, flags, Mode::empty())?;
        for child in list(inner.as_fd())? {
            remove(inner.as_fd(), &child)?;
        }
        Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
    } else {
        Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
    }
}

/// `mkdirat(dir, name, mode)` (less the umask).
pub fn mkdir(dir: BorrowedFd<'_>, name: impl AsRef<Path>, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(
        dir,
        name.as_ref(),
        Mode::from_raw_mode(mode),
    )?)
}

/// Creates the regular file `name` for writing, `O_EXCL | O_NOFOLLOW`: whatever is there
/// already, a symlink included, makes it fail with `EEXIST`.
pub fn create_file(dir: BorrowedFd<'_>, name: impl AsRef<Path>, mode: u32) -> io::Result<File> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name.as_ref(), flags, Mode::from_raw_mode(mode))?;
    Ok(File::from(fd))
}

/// Creates `name` as a mount point unless something is there already (which may then be
/// anything, a symlink too): a directory (0755) for [`Kind::Directory`], else an empty
/// file (0644); both less the umask.
pub fn create_mount_point(
    dir: BorrowedFd<'_>,
    name: impl AsRef<Path>,
    kind: Kind,
) -> io::Result<()> {
    let made = match kind {
        Kind::Directory => mkdir(dir, name, 0o755),
        Kind::Any => create_file(dir, name, 0o644).map(drop),
    };
    match made {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// `symlinkat(target, dir, name)`: `name` points to `target`, which is not looked at.
pub fn symlink(
    target: impl AsRef<Path>,
    dir: BorrowedFd<'_>,
    name: impl AsRef<Path>,
) -> io::Result<()> {
    Ok(rustix::fs::symlinkat(target.as_ref(), dir, name.as_ref())?)
}

/// `linkat(from_dir, from, to_dir, to, 0)`: a hard link to `from` itself, a symlink's
/// own inode when it is one, never what it points to.
pub fn hard_link(
    from_dir: BorrowedFd<'_>,
    from: impl AsRef<Path>,
    to_dir: BorrowedFd<'_>,
    to: impl AsRef<Path>,
) -> io::Result<()> {
    Ok(rustix::fs::linkat(
        from_dir,
        from.as_ref(),
        to_dir,
        to.as_ref(),
        AtFlags::empty(),
    )?)
}

/// `readlinkat(dir, name)`: what the symlink `name` points to.
pub fn readlink(dir: BorrowedFd<'_>, name: impl AsRef<Path>) -> io::Result<PathBuf> {
    let target = rustix::fs::readlinkat(dir, name.as_ref(), Vec::new())?;
    Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
}

/// `mknodat(dir, name, S_IFIFO | mode)`: a named pipe.
pub fn make_fifo(dir: BorrowedFd<'_>, name: impl AsRef<Path>, mode: u32) -> io::Result<()> {
    let mode = Mode::from_raw_mode(mode);
    Ok(rustix::fs::mknodat(
        dir,
        name.as_ref(),
        FileType::Fifo,
        mode,
        0,
    )?)
}

/// `mknodat(dir, name, S_IFCHR, 0)`: a character device 0/0, which overlayfs reads as a
/// whiteout (the name is deleted in the layers below). Needs `CAP_MKNOD`.
pub fn make_whiteout(dir: BorrowedFd<'_>, name: impl AsRef<Path>) -> io::Result<()> {
    let mode = Mode::empty();
    Ok(rustix::fs::mknodat(
        dir,
        name.as_ref(),
        FileType::CharacterDevice,
        mode,
        0,
    )?)
}

/// `fchownat(dir, name, uid, gid, AT_SYMLINK_NOFOLLOW)`: a symlink's own owner.
pub fn chown(dir: BorrowedFd<'_>, name: impl AsRef<Path>, uid: u32, gid: u32) -> io::Result<()> {
    let (uid, gid) = (
        rustix::fs::Uid::from_raw(uid),
        rustix::fs::Gid::from_raw(gid),
    );
    Ok(rustix::fs::chownat(
        dir,
        name.as_ref(),
        Some(uid),
        Some(gid),
        AtFlags::SYMLINK_NOFOLLOW,
    )?)
}

/// `fchmodat(dir, name, mode, 0)`. It follows a symlink (Linux cannot change a symlink's
/// mode): call it on an entry known not to be one, such as one just created.
pub fn chmod(dir: BorrowedFd<'_>, name: impl AsRef<Path>, mode: u32) -> io::Result<()> {
    let mode = Mode::from_raw_mode(mode);
    Ok(rustix::fs::chmodat(
        dir,
        name.as_ref(),
        mode,
        AtFlags::empty(),
    )?)
}

/// Sets the access and modification times of `name` itself (a symlink's own, too) to
/// `seconds` since the epoch.
pub fn set_times(dir: BorrowedFd<'_>, name: impl AsRef<Path>, seconds: i64) -> io::Result<()> {
    let at = Timespec {
        tv_sec: seconds,
        tv_nsec: 0,
    };
    let times = Timestamps {
        last_access: at,
        last_modification: at,
    };
    Ok(rustix::fs::utimensat(
        dir,
        name.as_ref(),
        &times,
        AtFlags::SYMLINK_NOFOLLOW,
    )?)
}
