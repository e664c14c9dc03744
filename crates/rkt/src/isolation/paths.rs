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
//! remounted instead, with its own flags ([`beneath::mount`]). Every mount goes through the
//! [`Mounts`] seam, so the stage's order of them is tested without root.

use std::os::fd::BorrowedFd;
use std::path::Path;

use beneath::mount::{Attr, Flag};
use beneath::MountAttrError;
use nix::errno::Errno;
use nix::mount::MsFlags;

use super::syscall::{errno_of, Mounts};
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

/// Which paths an app has masked and read-only: rkt's lists ([`MASKED`], [`READ_ONLY`]), or
/// lists of the caller's in their place (a CRI container's `masked_paths` and
/// `readonly_paths`, which kubelet gives whole).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelPaths {
    /// `None`: [`MASKED`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masked: Option<Vec<String>>,
    /// `None`: [`READ_ONLY`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<Vec<String>>,
}

impl KernelPaths {
    pub fn is_default(&self) -> bool {
        self.masked.is_none() && self.read_only.is_none()
    }

    /// Every path absolute, without `..`; an error names the first that is not.
    pub fn check(&self) -> Result<(), IsolationError> {
        let lists = [("masked", &self.masked), ("read-only", &self.read_only)];
        for (what, list) in lists {
            for path in list.iter().flatten() {
                let p = Path::new(path);
                if !p.is_absolute() || p.components().any(|c| c.as_os_str() == "..") {
                    return Err(IsolationError::BadValue {
                        flag: "kernel paths",
                        value: path.clone(),
                        why: format!("a {what} path must be absolute, without \"..\""),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Masks [`MASKED`] and write-protects [`READ_ONLY`] under `root` (whose `/proc`, and
/// `/sys` if any, are mounted). A path this kernel does not have is skipped.
pub fn protect_kernel_paths(sys: &dyn Mounts, root: &Path) -> Result<(), IsolationError> {
    protect_paths(sys, root, &KernelPaths::default())
}

/// [`protect_kernel_paths`] with `paths`' lists where they are given. A path the app's root
/// does not have, or that is a symbolic link there (which the mount would follow out of the
/// root), is skipped.
pub fn protect_paths(
    sys: &dyn Mounts,
    root: &Path,
    paths: &KernelPaths,
) -> Result<(), IsolationError> {
    let list = |given: &Option<Vec<String>>, default: &[&str]| -> Vec<String> {
        match given {
            Some(list) => list.clone(),
            None => default.iter().map(|p| p.to_string()).collect(),
        }
    };
    for path in list(&paths.masked, &MASKED) {
        let target = root.join(path.trim_start_matches('/'));
        let Ok(meta) = std::fs::symlink_metadata(&target) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            mask_dir(sys, &target)?;
        } else {
            let null = Some(Path::new("/dev/null"));
            sys.mount(null, &target, None, MsFlags::MS_BIND, None)
                .map_err(mount_err(&target))?;
        }
    }
    for path in list(&paths.read_only, &READ_ONLY) {
        let target = root.join(path.trim_start_matches('/'));
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if !meta.file_type().is_symlink() => {}
            _ => continue,
        }
        read_only_bind(sys, &target)?;
    }
    Ok(())
}

/// Covers directory `target` with an empty read-only tmpfs: a masked kernel directory, or
/// rkt's own state hidden from a host-command pod ([`crate::stage::mounts`]).
pub fn mask_dir(sys: &dyn Mounts, target: &Path) -> Result<(), IsolationError> {
    sys.mount(
        Some(Path::new("tmpfs")),
        target,
        Some("tmpfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("size=4k,mode=0555"),
    )
    .map_err(mount_err(target))
}

/// Binds `target` onto itself and makes that mount read-only.
pub fn read_only_bind(sys: &dyn Mounts, target: &Path) -> Result<(), IsolationError> {
    let bind = MsFlags::MS_BIND | MsFlags::MS_REC;
    sys.mount(Some(target), target, None, bind, None)
        .map_err(mount_err(target))?;
    let read_only = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | MsFlags::MS_NOEXEC;
    sys.mount(None, target, None, read_only, None)
        .map_err(mount_err(target))
}

/// Makes `path` and every mount below it `nodev`.
pub fn nodev_tree(sys: &dyn Mounts, path: &Path) -> Result<(), IsolationError> {
    let attr = Attr::set(Flag::NoDev).recursive();
    sys.set_attr(path, attr).map_err(attr_err(path, "nodev"))
}

/// Makes the mount at `path` (not those below it) read-only, keeping its other flags:
/// `--readonly-rootfs`, once the pod's `/dev`, `/sys` and files are mounted on it.
pub fn read_only_mount(sys: &dyn Mounts, path: &Path) -> Result<(), IsolationError> {
    let attr = Attr::set(Flag::ReadOnly);
    sys.set_attr(path, attr)
        .map_err(attr_err(path, "read-only"))
}

/// Makes the mount `mount_fd` was opened on (an `O_PATH` descriptor of its root, taken when
/// it was mounted) read-only, keeping its other flags, wherever it is now and whatever has
/// been mounted over it since: under `--readonly-rootfs`, the binds of a rootfs's own
/// entries that the stage made to add mount points without writing into it
/// ([`crate::stage::mounts`]). By path, such a bind could by then be a volume mounted over
/// it. `path` names it in errors.
pub fn read_only_mount_fd(
    sys: &dyn Mounts,
    mount_fd: BorrowedFd<'_>,
    path: &Path,
) -> Result<(), IsolationError> {
    let attr = Attr::set(Flag::ReadOnly);
    sys.set_attr_fd(mount_fd, attr, path)
        .map_err(attr_err(path, "read-only"))
}

/// Makes `path` and every mount below it read-only: the host's tree for a host-command pod
/// ([`crate::stage::mounts`]), and the host's `/sys` for a pod on the host's network, whose
/// sysfs cannot be mounted afresh (it would be the same superblock on the same mount
/// point) and whose submounts (cgroups, debugfs, ...) must not stay writable.
pub fn read_only_tree(sys: &dyn Mounts, path: &Path) -> Result<(), IsolationError> {
    let attr = Attr::set(Flag::ReadOnly).recursive();
    sys.set_attr(path, attr)
        .map_err(attr_err(path, "read-only"))
}

/// Makes the mount at `path` (not those below it) writable again, keeping its other flags.
pub fn writable_mount(sys: &dyn Mounts, path: &Path) -> Result<(), IsolationError> {
    let attr = Attr::clear(Flag::ReadOnly);
    sys.set_attr(path, attr).map_err(attr_err(path, "writable"))
}

/// The isolation's error for making the mounts under `path` `what` (read-only, ...): on a
/// kernel without mount_setattr(2) whose remount failed, what to pass to run without it.
fn attr_err<'a>(
    path: &'a Path,
    what: &'a str,
) -> impl FnOnce(MountAttrError) -> IsolationError + 'a {
    move |e| match e {
        MountAttrError::Set { path, source } => IsolationError::Mount {
            target: path,
            source: errno_of(source),
        },
        MountAttrError::Remount {
            path: target,
            source,
        } => IsolationError::Unsupported {
            what: format!(
                "making the mounts under {} {what}: mount_setattr(2) is missing \
                 (Linux before 5.12) and remounting {} failed: {}; pass \
                 --insecure-options=paths to run without it",
                path.display(),
                target.display(),
                errno_of(source)
            ),
        },
        MountAttrError::Mountinfo { path, source } => IsolationError::Io {
            what: "read",
            path,
            source,
        },
        unsupported @ MountAttrError::Unsupported { .. } => IsolationError::Unsupported {
            what: format!("{unsupported}; pass --insecure-options=paths to run without it"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::syscall::test::{Call, Recorder};
    use std::path::PathBuf;

    #[test]
    fn given_lists_replace_rkts_and_symbolic_links_are_skipped() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("proc/acpi")).unwrap();
        std::fs::create_dir_all(r.join("bin")).unwrap();
        std::fs::write(r.join("bin/ls"), "").unwrap();
        std::fs::write(r.join("etc-file"), "").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", r.join("bin/link")).unwrap();
        let paths = KernelPaths {
            masked: Some(vec![
                "/bin/ls".into(),
                "/bin/link".into(),
                "/missing".into(),
            ]),
            read_only: Some(vec!["/etc-file".into()]),
        };
        let sys = Recorder::default();
        protect_paths(&sys, r, &paths).unwrap();
        let targets: Vec<PathBuf> = sys
            .calls
            .take()
            .into_iter()
            .filter_map(|call| match call {
                Call::Mount { target, .. } => Some(target),
                _ => None,
            })
            .collect();
        // /bin/ls masked (not /proc/acpi: rkt's list is replaced), /etc-file bound and made
        // read-only; the link and the missing path skipped.
        assert_eq!(
            targets,
            [r.join("bin/ls"), r.join("etc-file"), r.join("etc-file")]
        );
        let relative = KernelPaths {
            masked: Some(vec!["proc/kcore".into()]),
            read_only: None,
        };
        assert!(relative.check().is_err());
        assert!(paths.check().is_ok());
    }

    #[test]
    fn kernel_paths_are_masked_then_write_protected_where_they_exist() {
        let root = tempfile::tempdir().unwrap();
        let proc = root.path().join("proc");
        std::fs::create_dir_all(proc.join("acpi")).unwrap();
        std::fs::create_dir_all(proc.join("sys")).unwrap();
        std::fs::write(proc.join("kcore"), "").unwrap();
        let sys = Recorder::default();
        protect_kernel_paths(&sys, root.path()).unwrap();
        let calls: Vec<_> = sys
            .calls
            .take()
            .into_iter()
            .map(|call| match call {
                Call::Mount {
                    source,
                    target,
                    fstype,
                    ..
                } => (
                    target
                        .strip_prefix(root.path())
                        .unwrap()
                        .display()
                        .to_string(),
                    fstype.or(source.map(|s| s.display().to_string())),
                ),
                other => panic!("{other:?}"),
            })
            .collect();
        let bind = |to: &str| Some(root.path().join(to).display().to_string());
        assert_eq!(
            calls,
            [
                ("proc/acpi".to_string(), Some("tmpfs".to_string())),
                ("proc/kcore".to_string(), Some("/dev/null".to_string())),
                ("proc/sys".to_string(), bind("proc/sys")),
                ("proc/sys".to_string(), None),
            ]
        );
    }

    #[test]
    fn a_failed_remount_without_mount_setattr_says_how_to_run_without() {
        let e = MountAttrError::Remount {
            path: "/sys/kernel".into(),
            source: std::io::Error::from_raw_os_error(libc::EPERM),
        };
        let text = attr_err(Path::new("/sys"), "read-only")(e).to_string();
        assert_eq!(
            text,
            "making the mounts under /sys read-only: mount_setattr(2) is missing (Linux \
             before 5.12) and remounting /sys/kernel failed: EPERM: Operation not permitted; \
             pass --insecure-options=paths to run without it"
        );
    }
}
