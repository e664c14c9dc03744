//! Mounts by path and by descriptor: their flags changed ([`set_attr`], [`set_attr_fd`]),
//! trees of them cloned and attached elsewhere ([`clone_tree`], [`attach_tree`]), their
//! propagation set ([`set_propagation`]) and read ([`mount_of`]).
//!
//! Flags change with `mount_setattr(2)` (Linux 5.12). On older kernels each mount is
//! remounted instead (a bind remount), with its own flags read from `/proc/self/mountinfo`
//! or, by descriptor, from `fstatvfs(2)`: a remount replaces the per-mount flags, so the
//! ones it had are given again.

use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::StatVfsMountFlags;
use rustix::io::Errno;
use rustix::mount::{MountFlags, MoveMountFlags, OpenTreeFlags};

use crate::MountAttrError;

/// A per-mount flag [`set_attr`] changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// `MOUNT_ATTR_RDONLY` / `MS_RDONLY`: nothing is written through the mount.
    ReadOnly,
    /// `MOUNT_ATTR_NODEV` / `MS_NODEV`: no device node opens through the mount.
    NoDev,
}

/// A change to the flags of a mount, and of the mounts below it with `recursive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// The flag.
    pub flag: Flag,
    /// Set (`true`) or clear (`false`) it.
    pub set: bool,
    /// On every mount below too (`AT_RECURSIVE`).
    pub recursive: bool,
}

impl Attr {
    /// Sets `flag` on the one mount.
    pub fn set(flag: Flag) -> Attr {
        Attr {
            flag,
            set: true,
            recursive: false,
        }
    }

    /// Clears `flag` on the one mount.
    pub fn clear(flag: Flag) -> Attr {
        Attr {
            flag,
            set: false,
            recursive: false,
        }
    }

    /// The same change on every mount below too.
    pub fn recursive(self) -> Attr {
        Attr {
            recursive: true,
            ..self
        }
    }

    fn mount_attr(self) -> MountAttr {
        let bit = match self.flag {
            Flag::ReadOnly => MOUNT_ATTR_RDONLY,
            Flag::NoDev => MOUNT_ATTR_NODEV,
        };
        let (attr_set, attr_clr) = if self.set { (bit, 0) } else { (0, bit) };
        MountAttr {
            attr_set,
            attr_clr,
            propagation: 0,
            userns_fd: 0,
        }
    }

    /// `flags` changed as this says.
    fn apply(self, flags: MountFlags) -> MountFlags {
        let flag = match self.flag {
            Flag::ReadOnly => MountFlags::RDONLY,
            Flag::NoDev => MountFlags::NODEV,
        };
        if self.set {
            flags | flag
        } else {
            flags - flag
        }
    }
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `mount_setattr(dirfd, path, flags, attr)`.
fn mount_setattr(
    dirfd: libc::c_int,
    path: &CString,
    flags: libc::c_uint,
    attr: Attr,
) -> io::Result<()> {
    let flags = if attr.recursive {
        flags | AT_RECURSIVE
    } else {
        flags
    };
    sys_mount_setattr(dirfd, path, flags, &attr.mount_attr())
}

/// The mount_setattr(2) system call itself. `dirfd` is AT_FDCWD or a descriptor the
/// caller borrows for the call.
fn sys_mount_setattr(
    dirfd: libc::c_int,
    path: &CStr,
    flags: libc::c_uint,
    attr: &MountAttr,
) -> io::Result<()> {
    // SAFETY: a NUL-terminated path and a mount_attr of the size passed, both alive for the
    // call; the kernel only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Changes the flags of the mount at `path` (and with [`Attr::recursive`] of every mount
/// below it), keeping the others; without mount_setattr(2), by remounting each of them.
pub fn set_attr(path: &Path, attr: Attr) -> Result<(), MountAttrError> {
    let set_err = |source| MountAttrError::Set {
        path: path.to_path_buf(),
        source,
    };
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| set_err(Errno::INVAL.into()))?;
    match mount_setattr(libc::AT_FDCWD, &c_path, 0, attr) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => remount_each(path, attr),
        other => other.map_err(set_err),
    }
}

/// Changes the flags of the mount `fd` is open on (an `O_PATH` descriptor of its root,
/// taken when it was mounted), wherever it is now and whatever has been mounted over it
/// since, keeping its other flags; with [`Attr::recursive`], of every mount below it too.
/// Without mount_setattr(2), one mount is remounted through the descriptor's
/// `/proc/self/fd` entry, which resolves to the mount itself; a tree of them is
/// [`MountAttrError::Unsupported`]. `path` names the mount in errors.
pub fn set_attr_fd(fd: BorrowedFd<'_>, attr: Attr, path: &Path) -> Result<(), MountAttrError> {
    let set_err = |source| MountAttrError::Set {
        path: path.to_path_buf(),
        source,
    };
    let empty_path = libc::AT_EMPTY_PATH as libc::c_uint;
    match mount_setattr(fd.as_raw_fd(), &CString::default(), empty_path, attr) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
        other => return other.map_err(set_err),
    }
    if attr.recursive {
        return Err(MountAttrError::Unsupported {
            path: path.to_path_buf(),
        });
    }
    let has = rustix::fs::fstatvfs(fd)
        .map_err(|e| set_err(e.into()))?
        .f_flag;
    let mut flags = MountFlags::empty();
    for (bit, flag) in [
        (StatVfsMountFlags::RDONLY, MountFlags::RDONLY),
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
    ] {
        if has.contains(bit) {
            flags |= flag;
        }
    }
    let link = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    bind_remount(&link, attr.apply(flags)).map_err(set_err)
}

/// `mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL)`.
fn bind_remount(target: &Path, flags: MountFlags) -> io::Result<()> {
    Ok(rustix::mount::mount_remount(
        target,
        MountFlags::BIND | flags,
        c"",
    )?)
}

/// Without mount_setattr(2): remounts the mount at `path`, and with `recursive` every
/// mount below it, with its own flags (from `/proc/self/mountinfo`) changed by `attr`
/// (a bind remount; the atime flags, left out, stay as they are). A mount whose mount point
/// no longer resolves (hidden below another mount) is skipped: nothing reaches it.
fn remount_each(path: &Path, attr: Attr) -> Result<(), MountAttrError> {
    let info_path = Path::new("/proc/self/mountinfo");
    let info = std::fs::read_to_string(info_path).map_err(|source| MountAttrError::Mountinfo {
        path: info_path.to_path_buf(),
        source,
    })?;
    let mut found = false;
    for (point, flags) in parse_mountinfo(&info) {
        if !(point == path || (attr.recursive && point.starts_with(path))) {
            continue;
        }
        found = true;
        match bind_remount(&point, attr.apply(flags)) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {}
            other => other.map_err(|source| MountAttrError::Remount {
                path: point,
                source,
            })?,
        }
    }
    if found {
        Ok(())
    } else {
        Err(MountAttrError::Remount {
            path: path.to_path_buf(),
            source: Errno::INVAL.into(),
        })
    }
}

/// Each mount of a `/proc/self/mountinfo` text, in its order (parents before the mounts
/// below them): its mount point and the per-mount flags a bind remount takes (`ro`,
/// `nosuid`, `nodev`, `noexec`).
fn parse_mountinfo(text: &str) -> Vec<(PathBuf, MountFlags)> {
    let mut mounts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let mut flags = MountFlags::empty();
        for option in options.split(',') {
            flags |= match option {
                "ro" => MountFlags::RDONLY,
                "nosuid" => MountFlags::NOSUID,
                "nodev" => MountFlags::NODEV,
                "noexec" => MountFlags::NOEXEC,
                _ => MountFlags::empty(),
            };
        }
        mounts.push((unescape(point), flags));
    }
    mounts
}

/// A mountinfo field with its octal escapes (`\040` for a space, ...) decoded.
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(u8::is_ascii_digit));
        match (bytes[i], octal) {
            (b'\\', Some(digits)) => {
                let text = std::str::from_utf8(digits).unwrap_or("0");
                out.push(u8::from_str_radix(text, 8).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// A detached copy (open_tree(2) with `OPEN_TREE_CLONE`) of the mount at `path` beneath
/// `at` (`None`: the one `at` is open on), with the mounts below it when `recursive`. The
/// copy keeps the flags the mounts have now; attach it with [`attach_tree`].
pub fn clone_tree(at: BorrowedFd<'_>, path: Option<&Path>, recursive: bool) -> io::Result<OwnedFd> {
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
    if path.is_none() {
        flags |= OpenTreeFlags::AT_EMPTY_PATH;
    }
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    Ok(rustix::mount::open_tree(
        at,
        path.unwrap_or(Path::new("")),
        flags,
    )?)
}

/// Attaches a tree [`clone_tree`] made onto `path` beneath `at` (`None`: what `at` is open
/// on) in the current mount namespace (move_mount(2)).
pub fn attach_tree(tree: OwnedFd, at: BorrowedFd<'_>, path: Option<&Path>) -> io::Result<()> {
    let mut flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH;
    if path.is_none() {
        flags |= MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH;
    }
    let to = path.unwrap_or(Path::new(""));
    Ok(rustix::mount::move_mount(&tree, c"", at, to, flags)?)
}

/// How mount and unmount events pass between a mount and its copies (mount_namespaces(7)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// `MS_PRIVATE`: none, either way.
    Private,
    /// `MS_SLAVE`: from the mount's peer group to it, not back.
    Slave,
    /// `MS_SHARED`: both ways, with every mount of its peer group.
    Shared,
}

/// Sets the propagation of the mount `fd` is open on (an `O_PATH` descriptor of its root,
/// or a tree [`clone_tree`] made, attached or not), and with `recursive` of every mount
/// below it, with mount_setattr(2) (Linux 5.12; `ENOSYS` before). A shared mount made a
/// slave receives its former peers' events; a private one made a slave stays private.
pub fn set_propagation(
    fd: BorrowedFd<'_>,
    propagation: Propagation,
    recursive: bool,
) -> io::Result<()> {
    let bit = match propagation {
        Propagation::Private => libc::MS_PRIVATE,
        Propagation::Slave => libc::MS_SLAVE,
        Propagation::Shared => libc::MS_SHARED,
    };
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: 0,
        propagation: bit,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    sys_mount_setattr(fd.as_raw_fd(), c"", flags, &attr)
}

/// The peer-group relations of a mount, from `/proc/self/mountinfo`'s optional fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerState {
    /// `shared:N`: it is in a peer group, its events reach the group and back.
    pub shared: bool,
    /// `master:N`: it is the slave of a peer group.
    pub slave: bool,
}

/// The mount `path` is on in the caller's mount namespace, by its mount ID (`statx(2)`'s
/// `STATX_MNT_ID`, Linux 5.8): its mount point and [`PeerState`].
pub fn mount_of(path: &Path) -> io::Result<(PathBuf, PeerState)> {
    let stat = rustix::fs::statx(
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::empty(),
        rustix::fs::StatxFlags::MNT_ID,
    )?;
    if stat.stx_mask & rustix::fs::StatxFlags::MNT_ID.bits() == 0 {
        return Err(Errno::NOSYS.into());
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    parse_peer_state(&info, stat.stx_mnt_id).ok_or_else(|| Errno::NOENT.into())
}

/// The mount point and [`PeerState`] of the mount with ID `id` in a mountinfo text.
fn parse_peer_state(text: &str, id: u64) -> Option<(PathBuf, PeerState)> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.first()?.parse::<u64>().ok()? != id {
            return None;
        }
        let mut state = PeerState::default();
        for optional in fields.iter().skip(6).take_while(|f| **f != "-") {
            state.shared |= optional.starts_with("shared:");
            state.slave |= optional.starts_with("master:");
        }
        Some((unescape(fields.get(4)?), state))
    })
}

#[cfg(test)]
mod tests;
