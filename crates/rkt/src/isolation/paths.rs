//! Kernel paths a pod's app must not reach: masked and read-only parts of `/proc` and
//! `/sys`, and device nodes only where the stage put them.
//!
//! All of it happens in the pod's own mount namespace (the host's mounts are never
//! changed), by the stage before the app runs; CNI plugins act on the pod's network
//! namespace from the host side, so `tuning` still sets the pod's sysctls.
//! - [`MASKED`]: files get `/dev/null` bound over them, directories an empty read-only
//!   tmpfs (the list Docker and runc use: kernel memory, keyrings, timer and scheduler
//!   internals, firmware).
//! - [`READ_ONLY`]: bound read-only onto themselves (`/proc/sys`, `/proc/sysrq-trigger`,
//!   ...). `/sys` is a fresh read-only sysfs (see [`crate::stage::mounts`]), or with the
//!   host's network the host's `/sys` made read-only with all its submounts
//!   ([`read_only_tree`]).
//! - [`nodev_tree`]: every mount of the pod's root becomes `nodev`, so a device node the
//!   app makes with `CAP_MKNOD` (kept by default, as in rkt and Docker) cannot be opened.
//!   Docker relies on its device cgroup for that; we have none, so the only usable nodes
//!   are the ones the stage binds into the pod's `/dev` ([`crate::stage::mounts`]).
//! - [`read_only_tree`]: a host-command pod's whole view of the host's tree is read-only
//!   ([`crate::stage::mounts::read_only_host`]); [`mask_dir`] hides rkt's own state.
//!
//! Mount flags change with mount_setattr(2) (Linux 5.12); on older kernels each mount is
//! remounted instead, with its own flags read from `/proc/self/mountinfo`.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{mount, MsFlags};
use nix::sys::statvfs::FsFlags;

use super::IsolationError;

/// Masked: unreadable kernel state.
pub const MASKED: [&str; 11] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
];

/// Read-only: kernel settings.
pub const READ_ONLY: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

fn mount_err(target: &Path) -> impl FnOnce(Errno) -> IsolationError + '_ {
    move |source| IsolationError::Mount {
        target: target.to_path_buf(),
        source,
    }
}

/// Masks [`MASKED`] and write-protects [`READ_ONLY`] under `root` (whose `/proc`, and
/// `/sys` if any, are mounted). A path this kernel does not have is skipped.
pub fn protect_kernel_paths(root: &Path) -> Result<(), IsolationError> {
    for path in MASKED {
        let target = root.join(&path[1..]);
        let Ok(meta) = std::fs::symlink_metadata(&target) else {
            continue;
        };
        if meta.is_dir() {
            mask_dir(&target)?;
        } else {
            mount(
                Some("/dev/null"),
                &target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(mount_err(&target))?;
        }
    }
    for path in READ_ONLY {
        let target = root.join(&path[1..]);
        if std::fs::symlink_metadata(&target).is_err() {
            continue;
        }
        read_only_bind(&target)?;
    }
    Ok(())
}

/// Covers directory `target` with an empty read-only tmpfs: a masked kernel directory, or
/// rkt's own state hidden from a host-command pod ([`crate::stage::mounts`]).
pub fn mask_dir(target: &Path) -> Result<(), IsolationError> {
    mount(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("size=4k,mode=0555"),
    )
    .map_err(mount_err(target))
}

/// Binds `target` onto itself and makes that mount read-only.
pub fn read_only_bind(target: &Path) -> Result<(), IsolationError> {
    mount(
        Some(target),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(mount_err(target))?;
    mount(
        None::<&str>,
        target,
        None::<&str>,
        MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(mount_err(target))
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

/// Makes `path` and every mount below it `nodev`.
pub fn nodev_tree(path: &Path) -> Result<(), IsolationError> {
    set_attr(path, MOUNT_ATTR_NODEV, Change::Set, true, "nodev")
}

/// Makes the mount at `path` (not those below it) read-only, keeping its other flags:
/// `--readonly-rootfs`, once the pod's `/dev`, `/sys` and files are mounted on it.
pub fn read_only_mount(path: &Path) -> Result<(), IsolationError> {
    set_attr(path, MOUNT_ATTR_RDONLY, Change::Set, false, "read-only")
}

/// Makes the mount `mount_fd` was opened on (an `O_PATH` descriptor of its root, taken when
/// it was mounted) read-only, keeping its other flags, wherever it is now and whatever has
/// been mounted over it since: under `--readonly-rootfs`, the binds of a rootfs's own
/// entries that the stage made to add mount points without writing into it
/// ([`crate::stage::mounts`]). By path, such a bind could by then be a volume mounted over
/// it. `path` names it in errors.
pub fn read_only_mount_fd(mount_fd: BorrowedFd<'_>, path: &Path) -> Result<(), IsolationError> {
    let attr_struct = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a live descriptor, an empty NUL-terminated path (AT_EMPTY_PATH: the
    // descriptor's own mount) and a mount_attr of the size passed, alive for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount_fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &attr_struct as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    match Errno::result(rc) {
        Ok(_) => Ok(()),
        // Before Linux 5.12: a bind remount through the descriptor's link in /proc, which
        // resolves to the mount itself, with the flags it has (a remount replaces them).
        Err(Errno::ENOSYS) => {
            let flags = nix::sys::statvfs::fstatvfs(mount_fd)
                .map_err(mount_err(path))?
                .flags();
            let mut keep = MsFlags::MS_RDONLY;
            for (has, flag) in [
                (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
                (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
                (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            ] {
                if flags.contains(has) {
                    keep |= flag;
                }
            }
            let link = PathBuf::from(format!("/proc/self/fd/{}", mount_fd.as_raw_fd()));
            mount(
                None::<&str>,
                &link,
                None::<&str>,
                MsFlags::MS_REMOUNT | MsFlags::MS_BIND | keep,
                None::<&str>,
            )
            .map_err(mount_err(path))
        }
        Err(source) => Err(IsolationError::Mount {
            target: path.to_path_buf(),
            source,
        }),
    }
}

/// Makes `path` and every mount below it read-only: the host's tree for a host-command pod
/// ([`crate::stage::mounts`]), and the host's `/sys` for a pod on the host's network, whose
/// sysfs cannot be mounted afresh (it would be the same superblock on the same mount
/// point) and whose submounts (cgroups, debugfs, ...) must not stay writable.
pub fn read_only_tree(path: &Path) -> Result<(), IsolationError> {
    set_attr(path, MOUNT_ATTR_RDONLY, Change::Set, true, "read-only")
}

/// Makes the mount at `path` (not those below it) writable again, keeping its other flags.
pub fn writable_mount(path: &Path) -> Result<(), IsolationError> {
    set_attr(path, MOUNT_ATTR_RDONLY, Change::Clear, false, "writable")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Set,
    Clear,
}

/// Sets or clears `attr` on the mount at `path`, and with `recursive` on every mount below
/// it: mount_setattr(2) (Linux 5.12 or later), or on older kernels a remount of each
/// mount ([`remount_each`]).
fn set_attr(
    path: &Path,
    attr: u64,
    change: Change,
    recursive: bool,
    what: &str,
) -> Result<(), IsolationError> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        IsolationError::Mount {
            target: path.to_path_buf(),
            source: Errno::EINVAL,
        }
    })?;
    let (attr_set, attr_clr) = match change {
        Change::Set => (attr, 0),
        Change::Clear => (0, attr),
    };
    let attr_struct = MountAttr {
        attr_set,
        attr_clr,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: a NUL-terminated path and a mount_attr of the size passed, both alive for
    // the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags,
            &attr_struct as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    match Errno::result(rc) {
        Ok(_) => Ok(()),
        Err(Errno::ENOSYS) => {
            let flag = match attr {
                MOUNT_ATTR_RDONLY => MsFlags::MS_RDONLY,
                _ => MsFlags::MS_NODEV,
            };
            remount_each(path, flag, change, recursive).map_err(|e| match e {
                IsolationError::Mount { target, source } => IsolationError::Unsupported {
                    what: format!(
                        "making the mounts under {} {what}: mount_setattr(2) is missing \
                         (Linux before 5.12) and remounting {} failed: {source}; pass \
                         --insecure-options=paths to run without it",
                        path.display(),
                        target.display()
                    ),
                },
                other => other,
            })
        }
        Err(source) => Err(IsolationError::Mount {
            target: path.to_path_buf(),
            source,
        }),
    }
}

/// Without mount_setattr(2): remounts the mount at `path`, and with `recursive` every
/// mount below it, with its own flags (from `/proc/self/mountinfo`) plus or minus `flag`
/// (a bind remount; the atime flags, left out, stay as they are). A mount whose mount point
/// no longer resolves (hidden below another mount) is skipped: nothing reaches it.
fn remount_each(
    path: &Path,
    flag: MsFlags,
    change: Change,
    recursive: bool,
) -> Result<(), IsolationError> {
    let info_path = Path::new("/proc/self/mountinfo");
    let info = std::fs::read_to_string(info_path).map_err(|source| IsolationError::Io {
        what: "read",
        path: info_path.to_path_buf(),
        source,
    })?;
    let mut found = false;
    for (point, flags) in parse_mountinfo(&info) {
        if !(point == path || (recursive && point.starts_with(path))) {
            continue;
        }
        found = true;
        let flags = match change {
            Change::Set => flags | flag,
            Change::Clear => flags - flag,
        };
        let remount = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | flags;
        match mount(None::<&str>, &point, None::<&str>, remount, None::<&str>) {
            Ok(()) | Err(Errno::ENOENT | Errno::ENOTDIR) => {}
            Err(source) => {
                return Err(IsolationError::Mount {
                    target: point,
                    source,
                })
            }
        }
    }
    if found {
        Ok(())
    } else {
        Err(IsolationError::Mount {
            target: path.to_path_buf(),
            source: Errno::EINVAL,
        })
    }
}

/// Each mount of a `/proc/self/mountinfo` text, in its order (parents before the mounts
/// below them): its mount point and the per-mount flags a bind remount takes (`ro`,
/// `nosuid`, `nodev`, `noexec`).
fn parse_mountinfo(text: &str) -> Vec<(PathBuf, MsFlags)> {
    let mut mounts = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(point), Some(options)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let mut flags = MsFlags::empty();
        for option in options.split(',') {
            flags |= match option {
                "ro" => MsFlags::MS_RDONLY,
                "nosuid" => MsFlags::MS_NOSUID,
                "nodev" => MsFlags::MS_NODEV,
                "noexec" => MsFlags::MS_NOEXEC,
                _ => MsFlags::empty(),
            };
        }
        mounts.push((unescape(point), flags));
    }
    mounts
}

/// A mountinfo field with its octal escapes (`\040` for a space, ...) decoded.
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
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
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_gives_each_mount_point_unescaped_with_its_own_flags() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:5 / /my\\040dir ro,nosuid master:2 - tmpfs tmpfs rw,size=4k
short line
";
        assert_eq!(
            parse_mountinfo(text),
            [
                (PathBuf::from("/"), MsFlags::empty()),
                (
                    PathBuf::from("/proc"),
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC
                ),
                (
                    PathBuf::from("/my dir"),
                    MsFlags::MS_RDONLY | MsFlags::MS_NOSUID
                ),
            ]
        );
        assert_eq!(unescape("/a\\011b\\134c\\0"), PathBuf::from("/a\tb\\c\\0"));
    }

    /// The fallback for kernels without mount_setattr(2), run for real as root in a child
    /// with a mount namespace of its own: a tree of two tmpfs mounts turns read-only, the
    /// other flags stay, and one mount turns writable again.
    #[test]
    fn without_mount_setattr_each_mount_is_remounted_keeping_its_flags() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipping: mounting needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (top, below) = (dir.path().join("top"), dir.path().join("top/below"));
        std::fs::create_dir(&top).unwrap();
        let child = || -> Result<(), String> {
            let fail = |what: &'static str| move |e: Errno| format!("{what}: {e}");
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(fail("unshare"))?;
            let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
            mount(None::<&str>, "/", None::<&str>, private, None::<&str>)
                .map_err(fail("make / private"))?;
            let tmpfs = |at: &Path, flags| {
                mount(Some("tmpfs"), at, Some("tmpfs"), flags, None::<&str>)
                    .map_err(fail("mount a tmpfs"))
            };
            tmpfs(&top, MsFlags::MS_NOSUID)?;
            std::fs::create_dir(&below).map_err(|e| e.to_string())?;
            tmpfs(&below, MsFlags::MS_NOEXEC)?;
            remount_each(&top, MsFlags::MS_RDONLY, Change::Set, true).map_err(|e| e.to_string())?;
            let flags = |at: &Path| {
                let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
                parse_mountinfo(&info)
                    .into_iter()
                    .rfind(|(point, _)| point == at)
                    .map(|(_, flags)| flags)
            };
            let ro = MsFlags::MS_RDONLY;
            if flags(&top) != Some(ro | MsFlags::MS_NOSUID)
                || flags(&below) != Some(ro | MsFlags::MS_NOEXEC)
            {
                return Err(format!("flags {:?} {:?}", flags(&top), flags(&below)));
            }
            if std::fs::write(below.join("f"), "x").is_ok() {
                return Err("wrote below the read-only tree".into());
            }
            remount_each(&top, ro, Change::Clear, false).map_err(|e| e.to_string())?;
            std::fs::write(top.join("f"), "x").map_err(|e| format!("top: {e}"))?;
            if std::fs::write(below.join("f"), "x").is_ok() {
                return Err("the mount below turned writable too".into());
            }
            Ok(())
        };
        // SAFETY: the child only makes system calls and small allocations, then _exits
        // without returning into the test harness.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let code = match child() {
                    Ok(()) => 0,
                    Err(msg) => {
                        let _ = std::fs::write(dir.path().join("error"), msg);
                        1
                    }
                };
                // SAFETY: ends the child without running the harness's exit handlers.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                let error = std::fs::read_to_string(dir.path().join("error")).unwrap_or_default();
                assert_eq!(
                    status,
                    nix::sys::wait::WaitStatus::Exited(child, 0),
                    "{error}"
                );
            }
        }
    }
}
