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

use std::path::Path;

use nix::errno::Errno;
use nix::mount::{mount, MsFlags};

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
            mount(
                Some("tmpfs"),
                &target,
                Some("tmpfs"),
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                Some("size=4k,mode=0555"),
            )
            .map_err(mount_err(&target))?;
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
    set_attr(path, MOUNT_ATTR_NODEV, AT_RECURSIVE, "nodev")
}

/// Makes the mount at `path` (not those below it) read-only, keeping its other flags:
/// `--readonly-rootfs`, once the pod's `/dev`, `/sys` and files are mounted on it.
pub fn read_only_mount(path: &Path) -> Result<(), IsolationError> {
    set_attr(path, MOUNT_ATTR_RDONLY, 0, "read-only")
}

/// Makes `path` and every mount below it read-only: the host's `/sys` for a pod on the
/// host's network, whose sysfs cannot be mounted afresh (it would be the same superblock
/// on the same mount point) and whose submounts (cgroups, debugfs, ...) must not stay
/// writable.
pub fn read_only_tree(path: &Path) -> Result<(), IsolationError> {
    set_attr(path, MOUNT_ATTR_RDONLY, AT_RECURSIVE, "read-only")
}

/// Sets `attr_set` on the mount at `path`, and with `AT_RECURSIVE` in `flags` on every
/// mount below it (mount_setattr(2), Linux 5.12 or later).
fn set_attr(
    path: &Path,
    attr_set: u64,
    flags: libc::c_uint,
    what: &str,
) -> Result<(), IsolationError> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
        IsolationError::Mount {
            target: path.to_path_buf(),
            source: Errno::EINVAL,
        }
    })?;
    let attr = MountAttr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and a mount_attr of the size passed, both alive for
    // the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    match Errno::result(rc) {
        Ok(_) => Ok(()),
        Err(Errno::ENOSYS) => Err(IsolationError::Unsupported {
            what: format!(
                "making the mounts under {} {what} needs mount_setattr(2) (Linux 5.12 or \
                 later); pass --insecure-options=paths to run without it",
                path.display()
            ),
        }),
        Err(source) => Err(IsolationError::Mount {
            target: path.to_path_buf(),
            source,
        }),
    }
}
