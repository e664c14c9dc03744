//! The overlay mount of an image pod's root filesystem: the image's unpacked layers as lower
//! directories (read-only, shared by every pod of the image), an upper and a work directory
//! in the pod's directory (`<pod>/overlay/{upper,work}`), mounted at `<pod>/rootfs` in the
//! host's mount namespace by the runner before the stage starts, so that gc finds and
//! unmounts it even when the runner was killed. The image is never modified: the pod's
//! writes land in its upper directory and go with the pod.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};

/// Why an overlay could not be mounted or unmounted.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    #[error("cannot create {path}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot mount an overlay at {target}")]
    Mount { target: PathBuf, source: Errno },
    #[error(
        "the overlay options for {target} are {len} bytes, more than a mount takes ({MAX_DATA})"
    )]
    TooLong { target: PathBuf, len: usize },
    #[error("cannot unmount the overlay at {target}")]
    Unmount { target: PathBuf, source: Errno },
    #[error("cannot read /proc/self/mountinfo: {0}")]
    MountInfo(io::Error),
}

impl OverlayError {
    /// The kernel or the filesystem under the pod directory cannot do this overlay: a copy
    /// of the image serves instead.
    pub fn unsupported(&self) -> bool {
        matches!(
            self,
            OverlayError::Mount {
                source: Errno::ENODEV | Errno::EINVAL | Errno::EOPNOTSUPP,
                ..
            } | OverlayError::TooLong { .. }
        )
    }
}

/// What the kernel takes as mount data: one page, with its terminating NUL.
const MAX_DATA: usize = 4095;

/// Mounts an overlay of `lowers` (bottom layer first) at `target`, with its upper and work
/// directories under `state_dir`.
pub fn mount_overlay(
    lowers: &[PathBuf],
    state_dir: &Path,
    target: &Path,
) -> Result<(), OverlayError> {
    let upper = state_dir.join("upper");
    let work = state_dir.join("work");
    for dir in [&upper, &work, &target.to_path_buf()] {
        fs::create_dir_all(dir).map_err(|source| OverlayError::Create {
            path: dir.clone(),
            source,
        })?;
    }
    // The merged root's owner and mode are the upper directory's.
    let _ = fs::set_permissions(&upper, std::os::unix::fs::PermissionsExt::from_mode(0o755));
    // overlayfs lists the top layer first; ':' and ',' in a path would need escaping, but
    // these paths are the store's (hex names) under the data directory.
    let lowerdir: Vec<String> = lowers
        .iter()
        .rev()
        .map(|p| p.display().to_string())
        .collect();
    let data = format!(
        "lowerdir={},upperdir={},workdir={}",
        lowerdir.join(":"),
        upper.display(),
        work.display()
    );
    if data.len() > MAX_DATA {
        return Err(OverlayError::TooLong {
            target: target.to_path_buf(),
            len: data.len(),
        });
    }
    mount(
        Some("overlay"),
        target,
        Some("overlay"),
        MsFlags::MS_NODEV,
        Some(data.as_str()),
    )
    .map_err(|source| OverlayError::Mount {
        target: target.to_path_buf(),
        source,
    })
}

/// Whether something is mounted at `path` (per `/proc/self/mountinfo`).
pub fn is_mounted(path: &Path) -> Result<bool, OverlayError> {
    let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let info = fs::read_to_string("/proc/self/mountinfo").map_err(OverlayError::MountInfo)?;
    let wanted = path.display().to_string();
    Ok(info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| unescape(m) == wanted))
}

/// A mountinfo field with its octal escapes (`\040` for a space) decoded.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let octal = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(v) = octal.and_then(|o| u8::from_str_radix(o, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Unmounts whatever is mounted at `target` (every layer of it), if anything. A mount still
/// busy (a process of the pod somehow still inside) is detached instead. Unmounting what is
/// not mounted is fine.
///
/// `umount2` itself says when nothing is left (`EINVAL`: not a mount point), so the host's
/// mount table is never read: `/proc/self/mountinfo` on a host with a thousand mounts costs
/// milliseconds to generate, which every image pod's end paid twice.
pub fn unmount_all(target: &Path) -> Result<(), OverlayError> {
    // Each round removes one mount stacked at `target`; a bound keeps a kernel that kept
    // answering success from looping forever.
    for _ in 0..MAX_STACKED {
        match umount2(target, MntFlags::empty()) {
            Ok(()) => {}
            Err(Errno::EBUSY) => {
                umount2(target, MntFlags::MNT_DETACH).map_err(|source| OverlayError::Unmount {
                    target: target.to_path_buf(),
                    source,
                })?
            }
            Err(Errno::EINVAL | Errno::ENOENT) => return Ok(()),
            Err(source) => {
                return Err(OverlayError::Unmount {
                    target: target.to_path_buf(),
                    source,
                })
            }
        }
    }
    if is_mounted(target)? {
        return Err(OverlayError::Unmount {
            target: target.to_path_buf(),
            source: Errno::EBUSY,
        });
    }
    Ok(())
}

/// More mounts stacked at one pod's root than rkt ever makes there.
const MAX_STACKED: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mount stacked at the target goes, and a target with none is fine.
    #[test]
    fn unmount_all_removes_stacked_mounts() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping unmount_all_removes_stacked_mounts: needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("rootfs");
        fs::create_dir(&target).unwrap();
        for _ in 0..2 {
            mount(
                Some("tmpfs"),
                &target,
                Some("tmpfs"),
                MsFlags::empty(),
                Some("size=64k"),
            )
            .unwrap();
        }
        assert!(is_mounted(&target).unwrap());
        unmount_all(&target).unwrap();
        assert!(!is_mounted(&target).unwrap());
        unmount_all(&target).unwrap();
        unmount_all(&dir.path().join("missing")).unwrap();
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\"), "/end\\");
    }
}
