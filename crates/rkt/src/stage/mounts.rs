//! The pod's mount namespace: what the app sees instead of the host's files.
//!
//! Done by the stage in its new mount namespace, after making `/` a recursive slave (host
//! mounts still propagate in, nothing propagates out), so the host's files are never
//! changed:
//! - `<pod>/etc/resolv.conf` and `<pod>/etc/hosts`, when networking wrote them, are
//!   bind-mounted over the root's `/etc/resolv.conf` and `/etc/hosts`;
//! - with its own network namespace, a fresh read-only `sysfs` on `/sys`, so
//!   `/sys/class/net` lists the pod's interfaces;
//! - with `--rootfs`, and for every pod whose kernel paths are protected
//!   ([`crate::isolation::paths`]): a `nodev` tmpfs `/dev` holding bind mounts of the host's
//!   `null`, `zero`, `full`, `random`, `urandom` and `tty` (the only device nodes that open
//!   in the pod), a new `devpts` instance on `/dev/pts` and a private tmpfs `/dev/shm`;
//!   with `--rootfs`, the directory is first bind-mounted onto itself (to become the root);
//! - in the pod's PID namespace (by its init): a new `/proc`, then `pivot_root` into the
//!   rootfs.

use std::fs::{self, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::unistd::{chdir, pivot_root};

use super::StageError;

const DEV_NODES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

fn do_mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), StageError> {
    mount(source, target, fstype, flags, data).map_err(|errno| StageError::Mount {
        target: target.to_path_buf(),
        source: errno,
    })
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StageError {
    let path = path.to_path_buf();
    move |source| StageError::Io { what, path, source }
}

/// Stops mount propagation from the pod to the host.
pub fn make_root_slave() -> Result<(), StageError> {
    do_mount(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None,
    )
}

/// Makes `rootfs` a mount point of its own, so that it can become the root later.
pub fn bind_rootfs(rootfs: &Path) -> Result<(), StageError> {
    do_mount(
        Some(rootfs),
        rootfs,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
    )
}

/// Bind-mounts the pod's `etc/resolv.conf` and `etc/hosts` (those that exist) over the
/// root's. Under a rootfs a missing target file is created; on the host root a missing
/// target is skipped (the host's `/etc` is never written).
pub fn bind_etc_files(pod_dir: &Path, root: &Path, is_rootfs: bool) -> Result<(), StageError> {
    for name in ["resolv.conf", "hosts"] {
        let source = pod_dir.join("etc").join(name);
        if !source.is_file() {
            continue;
        }
        let target = root.join("etc").join(name);
        if fs::metadata(&target).is_err() {
            if !is_rootfs {
                continue;
            }
            if fs::symlink_metadata(&target).is_ok() {
                // A dangling symlink: mount over the link's own path instead.
                fs::remove_file(&target).map_err(io_err("replace dangling symlink", &target))?;
            }
            fs::create_dir_all(root.join("etc")).map_err(io_err("create", &root.join("etc")))?;
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&target)
                .map_err(io_err("create", &target))?;
        }
        do_mount(Some(&source), &target, None, MsFlags::MS_BIND, None)?;
    }
    Ok(())
}

/// A fresh sysfs at `<root>/sys` showing the pod's network namespace.
pub fn mount_sysfs(root: &Path) -> Result<(), StageError> {
    let target = root.join("sys");
    fs::create_dir_all(&target).map_err(io_err("create", &target))?;
    do_mount(
        Some(Path::new("sysfs")),
        &target,
        Some("sysfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
        None,
    )
}

/// A minimal `/dev` under `root` (the host's root too): a `nodev` tmpfs with the host's
/// basic device nodes bound in (each bind made `dev` again, since `root`'s mounts may all
/// be `nodev`), a new devpts instance and a private `/dev/shm`.
pub fn populate_dev(root: &Path) -> Result<(), StageError> {
    let dev = root.join("dev");
    fs::create_dir_all(&dev).map_err(io_err("create", &dev))?;
    // Opened before the tmpfs hides them when `root` is the host's root.
    let mut sources = Vec::new();
    for node in DEV_NODES {
        let host = Path::new("/dev").join(node);
        if let Ok(fd) = nix::fcntl::open(
            &host,
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        ) {
            // SAFETY: open(2) just returned this descriptor; nothing else owns it.
            sources.push((node, unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }));
        }
    }
    do_mount(
        Some(Path::new("tmpfs")),
        &dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_STRICTATIME,
        Some("mode=755,size=65536k"),
    )?;
    for (node, fd) in &sources {
        let target = dev.join(node);
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&target)
            .map_err(io_err("create", &target))?;
        let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        do_mount(Some(&source), &target, None, MsFlags::MS_BIND, None)?;
        do_mount(
            None,
            &target,
            None,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            None,
        )?;
    }
    let pts = dev.join("pts");
    fs::create_dir(&pts).map_err(io_err("create", &pts))?;
    do_mount(
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    let shm = dev.join("shm");
    fs::create_dir(&shm).map_err(io_err("create", &shm))?;
    do_mount(
        Some(Path::new("tmpfs")),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    )?;
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        let link = dev.join(name);
        symlink(to, &link).map_err(io_err("create symlink", &link))?;
    }
    Ok(())
}

/// A `/proc` for the pod's PID namespace at `<root>/proc`. Run by the pod's init.
pub fn mount_proc(root: &Path) -> Result<(), StageError> {
    let target = root.join("proc");
    fs::create_dir_all(&target).map_err(io_err("create", &target))?;
    do_mount(
        Some(Path::new("proc")),
        &target,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    )
}

/// Makes `rootfs` (already a mount point, see [`bind_rootfs`]) the root, detaching the old
/// one. The current directory ends up at the new `/`.
pub fn enter_rootfs(rootfs: &Path) -> Result<(), StageError> {
    let errno =
        |what: &'static str, path: PathBuf| move |source| StageError::Sys { what, path, source };
    chdir(rootfs).map_err(errno("change directory to", rootfs.to_path_buf()))?;
    pivot_root(".", ".").map_err(errno("pivot_root into", rootfs.to_path_buf()))?;
    umount2(".", MntFlags::MNT_DETACH)
        .map_err(errno("detach the old root under", rootfs.to_path_buf()))?;
    chdir("/").map_err(errno("change directory to", PathBuf::from("/")))
}
