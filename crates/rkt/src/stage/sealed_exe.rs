//! What runs inside a pod's namespaces is never the host's `rkt` inode.
//!
//! The stage (`rkt stage1-init`, whose init is PID 1 of the pod) and `rkt enter`'s helper
//! (`rkt stage1-enter`, whose child executes the entered command) are rkt itself. A process
//! of the pod that reaches them through `/proc/<pid>/exe` (or a `#!/proc/self/exe` script
//! that makes them execute it) would otherwise hold a descriptor to the host's binary, and
//! overwrite it once no pod runs it (runc's CVE-2019-5736). So they are executed from a
//! copy the pod cannot change:
//!
//! 1. a read-only overlay of the binary's directory, mounted nowhere (`fsopen`/`fsmount`
//!    make a detached mount that lives only as long as a descriptor or a process's
//!    executable refers to it): another inode, on a read-only mount, so an open for
//!    writing through `/proc/<pid>/exe` fails with `EROFS`; it costs one overlay superblock,
//!    no copy and no memory (runc does the same since 1.2);
//! 2. where the kernel has no `fsopen` or overlayfs, or the binary on disk is no longer the
//!    one running (replaced by an upgrade), a sealed `memfd` copy of the running binary:
//!    writes fail with `EPERM`; it costs the binary's size in memory for each pod.
//!
//! Either way the caller gets a descriptor and executes it as `/proc/self/fd/N` ([`Sealed`]),
//! which works with a close-on-exec descriptor (the kernel opens the file before it closes
//! those), so nothing of it is left open in the new program.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::StageError;

/// An executable copy of rkt that a pod cannot write, and how it was made.
#[derive(Debug)]
pub struct Sealed {
    fd: OwnedFd,
    /// `true`: a sealed memfd copy; `false`: the file on a read-only detached overlay.
    pub copied: bool,
}

impl Sealed {
    /// The path to execute it by, valid in this process (and its children up to exec).
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }
}

/// A copy of `exe` (normally `/proc/self/exe`) to execute in a pod's namespaces: the
/// overlay when this kernel can make it and it shows the running binary, else a sealed
/// memfd.
pub fn seal(exe: &Path) -> Result<Sealed, StageError> {
    let err = |what: &'static str| {
        move |source: std::io::Error| StageError::Io {
            what,
            path: exe.to_path_buf(),
            source,
        }
    };
    let running = File::open(exe).map_err(err("open"))?;
    let meta = running.metadata().map_err(err("read the metadata of"))?;
    // The binary's path on disk (`/proc/self/exe` resolved); a binary deleted or replaced
    // since it started has none.
    if let Ok(on_disk) = std::fs::canonicalize(exe) {
        if let Some(fd) = overlay_view(&on_disk).filter(|fd| same_file(fd, &meta)) {
            return Ok(Sealed { fd, copied: false });
        }
    }
    let fd = memfd_copy(running).map_err(err("make a sealed copy of"))?;
    Ok(Sealed { fd, copied: true })
}

/// Whether `fd` shows the same file as `meta` (an overlay keeps the lower file's inode
/// number; size and modification time guard against a file replaced in place).
fn same_file(fd: &OwnedFd, meta: &std::fs::Metadata) -> bool {
    nix::sys::stat::fstat(fd.as_raw_fd()).is_ok_and(|st| {
        st.st_ino == meta.ino() && st.st_size == meta.size() as i64 && st.st_mtime == meta.mtime()
    })
}

/// The file at `path` opened on a read-only overlay of its directory mounted nowhere;
/// `None` when the kernel cannot (no `fsopen`, no overlayfs, a directory overlayfs refuses).
fn overlay_view(path: &Path) -> Option<OwnedFd> {
    let name = path.file_name()?;
    let dir = path.parent()?;
    // An overlay without an upper directory needs two lower ones: the second is an empty
    // tmpfs, also mounted nowhere, reached through its descriptor.
    let empty = detached_mount("tmpfs", &[("size", "4k"), ("mode", "0500")])?;
    let lower = format!(
        "{}:/proc/self/fd/{}",
        escape_layer(dir.as_os_str()),
        empty.as_raw_fd()
    );
    let overlay = detached_mount("overlay", &[("lowerdir", lower.as_str())])?;
    open_at(&overlay, name)
}

/// `:` separates overlay layers and `\` escapes: both escaped in a directory's name.
fn escape_layer(dir: &OsStr) -> String {
    let mut out = String::new();
    for c in dir.to_string_lossy().chars() {
        if matches!(c, ':' | '\\' | ',') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A new `fstype` superblock with `options`, as a read-only, nosuid, nodev detached mount.
fn detached_mount(fstype: &str, options: &[(&str, &str)]) -> Option<OwnedFd> {
    let fstype = CString::new(fstype).ok()?;
    // SAFETY: a NUL-terminated string; the call returns a new descriptor or -1.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), libc::FSOPEN_CLOEXEC) };
    let fs = owned(fs)?;
    for (key, value) in options {
        let (key, value) = (CString::new(*key).ok()?, CString::new(*value).ok()?);
        // SAFETY: NUL-terminated strings that outlive the call; aux 0 as for a string.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                libc::FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr(),
                0,
            )
        };
        if rc != 0 {
            return None;
        }
    }
    // SAFETY: no pointers; creates the superblock.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            libc::FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if rc != 0 {
        return None;
    }
    let attrs = libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;
    // SAFETY: no pointers; returns a new descriptor or -1.
    let mnt = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            libc::FSMOUNT_CLOEXEC,
            attrs,
        )
    };
    owned(mnt)
}

fn open_at(dir: &OwnedFd, name: &OsStr) -> Option<OwnedFd> {
    let name = CString::new(name.as_bytes()).ok()?;
    // SAFETY: a NUL-terminated string; returns a new descriptor or -1.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    owned(fd as libc::c_long)
}

fn owned(rc: libc::c_long) -> Option<OwnedFd> {
    // SAFETY: a descriptor a system call just returned, owned by nobody else.
    (rc >= 0).then(|| unsafe { OwnedFd::from_raw_fd(rc as RawFd) })
}

/// A memfd holding a copy of `running`, sealed against any change.
fn memfd_copy(mut running: File) -> std::io::Result<OwnedFd> {
    let name = c"rkt-stage";
    // SAFETY: a NUL-terminated name; returns a new descriptor or -1.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    let fd = owned(fd as libc::c_long).ok_or_else(std::io::Error::last_os_error)?;
    let mut copy = File::from(fd);
    std::io::copy(&mut running, &mut copy)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor we own, with an integer argument.
    if unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(OwnedFd::from(copy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn layer_names_are_escaped() {
        assert_eq!(escape_layer(OsStr::new("/usr/bin")), "/usr/bin");
        assert_eq!(escape_layer(OsStr::new("/a:b\\c,d")), "/a\\:b\\\\c\\,d");
    }

    #[test]
    fn neither_view_of_the_binary_can_be_written() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root (fsopen)");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let script = tmp.path().join("tool");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o755)
            .open(&script)
            .unwrap();
        f.write_all(b"#!/bin/sh\necho sealed $0\n").unwrap();
        drop(f);
        let sealed = seal(&script).unwrap();
        assert!(!sealed.copied, "this kernel makes the overlay view");
        let host = std::fs::metadata(&script).unwrap();
        let view = std::fs::metadata(sealed.path()).unwrap();
        assert_eq!(view.ino(), host.ino());
        assert_ne!(
            view.dev(),
            host.dev(),
            "another file system: not the host's inode"
        );
        let write = std::fs::OpenOptions::new().append(true).open(sealed.path());
        assert_eq!(write.unwrap_err().raw_os_error(), Some(libc::EROFS));

        let copy = memfd_copy(File::open(&script).unwrap()).unwrap();
        let path = format!("/proc/self/fd/{}", copy.as_raw_fd());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            std::fs::read(&script).unwrap()
        );
        // A sealed memfd opens for writing, but refuses every write.
        let mut write = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let refused = write.write_all(b"x").unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EPERM));
    }
}
