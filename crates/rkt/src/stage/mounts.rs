//! The pod's mount namespace: what the app sees instead of the host's files.
//!
//! Done by the stage in its new mount namespace, after making `/` a recursive slave (host
//! mounts still propagate in, nothing propagates out), so the host's files are never
//! changed:
//! - the host's `/run/netns` is detached (see [`detach_netns_mounts`]);
//! - for a host-command pod, the host's tree is made read-only with every mount in it,
//!   rkt's own state is hidden, and `/tmp` and `/var/tmp` are private tmpfs mounts (see
//!   [`read_only_host`]);
//! - `<pod>/etc/resolv.conf` and `<pod>/etc/hosts` are bind-mounted over the root's
//!   `/etc/resolv.conf` and `/etc/hosts`: on the host's root those networking wrote, under
//!   a rootfs always (copies of the host's where networking wrote none), without writing
//!   into the rootfs (see [`bind_etc_files`]);
//! - with its own network namespace, a fresh read-only `sysfs` on `/sys`, so
//!   `/sys/class/net` lists the pod's interfaces;
//! - with `--rootfs`, and for every pod whose kernel paths are protected
//!   ([`crate::isolation::paths`]): a `nodev` tmpfs `/dev` holding bind mounts of the host's
//!   `null`, `zero`, `full`, `random`, `urandom` and `tty` (the only device nodes that open
//!   in the pod), a new `devpts` instance on `/dev/pts` and a private tmpfs `/dev/shm`;
//!   with `--rootfs`, the directory is first bind-mounted onto itself (to become the root),
//!   and when it lacks a mount point (`dev`, `proc`, `sys`, `etc`) replaced by a tmpfs with
//!   a bind of each of its entries and the missing ones, so nothing is written into it
//!   (see [`provide_mount_points`]);
//! - in the pod's PID namespace (by its init): a new `/proc`, then `pivot_root` into the
//!   rootfs.

use std::fs::{self, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::MsFlags;
use nix::unistd::chdir;

use super::StageError;
use crate::isolation::syscall::Mounts;

const DEV_NODES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

fn do_mount(
    sys: &dyn Mounts,
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), StageError> {
    sys.mount(source, target, fstype, flags, data)
        .map_err(|errno| StageError::Mount {
            target: target.to_path_buf(),
            source: errno,
        })
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StageError {
    let path = path.to_path_buf();
    move |source| StageError::Io { what, path, source }
}

/// Stops mount propagation from the pod to the host.
pub fn make_root_slave(sys: &dyn Mounts) -> Result<(), StageError> {
    do_mount(
        sys,
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None,
    )
}

/// Drops the host's network namespace mounts (`/run/netns` and the bind mounts under it)
/// from the pod's mount namespace; done after [`make_root_slave`], so the detach does not
/// propagate to the host. The pod needs none of them (its own namespace is entered through
/// the stage's `setns`), and without them its mount namespace is no longer a slave copy
/// of `/run/netns`: every namespace mounted or unmounted on the host afterwards (a pod
/// started or stopped, `ip netns add`) would otherwise be copied into, or removed from,
/// every running pod's mount namespace, a cost that grows with the pods running. Nothing
/// to do where `/run/netns` is not a mount point (or does not exist).
pub fn detach_netns_mounts(sys: &dyn Mounts) -> Result<(), StageError> {
    let dir = Path::new(crate::netns::NETNS_RUN_DIR);
    match sys.detach(dir) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => Ok(()),
        Err(errno) => Err(StageError::Mount {
            target: dir.to_path_buf(),
            source: errno,
        }),
    }
}

/// Makes `rootfs` a mount point of its own, so that it can become the root later.
pub fn bind_rootfs(sys: &dyn Mounts, rootfs: &Path) -> Result<(), StageError> {
    do_mount(
        sys,
        Some(rootfs),
        rootfs,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
    )
}

/// The files of `/etc` that the pod gets its own of (`hostname` always written, see
/// [`crate::etc_files`]).
const ETC_FILES: [&str; 3] = ["resolv.conf", "hosts", "hostname"];

/// Bind-mounts the pod's `etc/resolv.conf` and `etc/hosts` over the root's.
///
/// On the host's root, only the files networking wrote are mounted, over existing targets
/// (a missing target is skipped: the host's `/etc` is never written); the app sees the
/// host's file otherwise, as the host does.
///
/// Under a rootfs the app always gets both files, and the rootfs is never written: a file
/// the pod has none of (`--dns=host`, `--hosts-entry=host`, `--net=host`, no DNS from the
/// networks) is first copied from the host's `/etc` into `<pod>/etc`, so that the app sees
/// what it would see on the host's root. A target that is a regular file is mounted over;
/// when one is missing (or a symlink, which would resolve on the host), the rootfs's `/etc`
/// is replaced in the pod's mount namespace by a tmpfs holding a bind mount of each of its
/// entries (`shadow_dir`), in which the pod's files are mounted; a rootfs without `/etc`
/// gets one that way on its root.
///
/// Returns the mounts of the rootfs's own content made that way (the tmpfs and its binds),
/// which `--readonly-rootfs` makes read-only with the root.
pub fn bind_etc_files(
    sys: &dyn Mounts,
    pod_dir: &Path,
    root: &Path,
    is_rootfs: bool,
) -> Result<Vec<ShadowMount>, StageError> {
    if !is_rootfs {
        for name in ETC_FILES {
            let source = pod_dir.join("etc").join(name);
            let target = root.join("etc").join(name);
            if source.is_file() && fs::metadata(&target).is_ok() {
                do_mount(sys, Some(&source), &target, None, MsFlags::MS_BIND, None)?;
            }
        }
        return Ok(Vec::new());
    }
    let pod_etc = pod_dir.join("etc");
    fs::create_dir_all(&pod_etc).map_err(io_err("create", &pod_etc))?;
    for name in ETC_FILES {
        let own = pod_etc.join(name);
        if !own.is_file() {
            let host = Path::new("/etc").join(name);
            // A host without the file: the app sees none there either, here an empty one.
            let text = match fs::read(&host) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                other => other.map_err(io_err("read the host's", &host))?,
            };
            fs::write(&own, text).map_err(io_err("write", &own))?;
        }
    }
    let etc = root.join("etc");
    let is_file = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file());
    let mut shadows = Vec::new();
    match fs::symlink_metadata(&etc) {
        Ok(m) if m.file_type().is_dir() => {
            if !ETC_FILES.iter().all(|name| is_file(&etc.join(name))) {
                shadows = shadow_dir(sys, &etc, &pod_dir.join("rootfs-etc"), &ETC_FILES, &[])?;
            }
        }
        Ok(_) => {
            return Err(StageError::Io {
                what: "provide /etc/resolv.conf and /etc/hosts under",
                path: etc,
                source: std::io::Error::other("it is not a directory (a symlink?)"),
            })
        }
        Err(_) => {
            shadows = shadow_dir(sys, root, &pod_dir.join("rootfs-root"), &[], &["etc"])?;
            // `etc` is now a directory of the shadow's tmpfs: the targets go there.
            for name in ETC_FILES {
                let to = etc.join(name);
                fs::write(&to, b"").map_err(io_err("create", &to))?;
            }
        }
    }
    for name in ETC_FILES {
        do_mount(
            sys,
            Some(&pod_etc.join(name)),
            &etc.join(name),
            None,
            MsFlags::MS_BIND,
            None,
        )?;
    }
    Ok(shadows)
}

/// A mount the stage made of a rootfs's own content (`shadow_dir`): where it is, and an
/// `O_PATH` descriptor of its root, which names that mount even once another is mounted
/// over it.
#[derive(Debug)]
pub struct ShadowMount {
    pub path: PathBuf,
    pub fd: fs::File,
}

impl ShadowMount {
    /// The mount whose root `path` is, now.
    fn open(path: &Path) -> Result<ShadowMount, StageError> {
        use std::os::unix::fs::OpenOptionsExt;
        let fd = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io_err("open", path))?;
        Ok(ShadowMount {
            path: path.to_path_buf(),
            fd,
        })
    }
}

/// The mount points a `--rootfs` pod's root gets: `/dev`, `/proc` and `/etc` always, `/sys`
/// with the pod's own network namespace.
pub fn rootfs_mount_points(own_netns: bool) -> Vec<&'static str> {
    let mut names = vec!["dev", "proc", "etc"];
    if own_netns {
        names.push("sys");
    }
    names
}

/// Provides, without writing into `rootfs` (a `--rootfs` directory, already a mount point
/// of its own: [`bind_rootfs`]), the top-level `mount_points` it lacks: when any is missing,
/// or `shadow` asks for room at the top level anyway (a volume target whose first component
/// is missing), the rootfs is replaced in this mount namespace by a tmpfs holding a bind
/// mount of each of its entries and the missing mount points as empty directories
/// (`shadow_dir`). What the app writes into the entries still goes to the rootfs; only a
/// new entry at the top level would stay in the tmpfs. Returns the tmpfs's device, where
/// volume targets may be created (`None` when the rootfs had everything), and the mounts
/// made, which `--readonly-rootfs` makes read-only with the root.
pub fn provide_mount_points(
    sys: &dyn Mounts,
    pod_dir: &Path,
    rootfs: &Path,
    mount_points: &[&str],
    shadow: bool,
) -> Result<(Option<u64>, Vec<ShadowMount>), StageError> {
    use std::os::unix::fs::MetadataExt;
    let missing: Vec<&str> = mount_points
        .iter()
        .copied()
        .filter(|name| {
            fs::symlink_metadata(rootfs.join(name))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        })
        .collect();
    if missing.is_empty() && !shadow {
        return Ok((None, Vec::new()));
    }
    let staging = pod_dir.join("rootfs-mount-points");
    let made = shadow_dir(sys, rootfs, &staging, &[], &missing)?;
    let meta = fs::metadata(rootfs).map_err(io_err("read", rootfs))?;
    Ok((Some(meta.dev()), made))
}

/// Replaces directory `dir`, in this mount namespace only, by a tmpfs (built at `staging`)
/// holding a bind mount of each of its entries (symlinks copied as symlinks), so that
/// entries can be added without writing into `dir`. Entries named in `files` become empty
/// files to mount over; `new_dirs` are added as empty directories (0755). Returns the mounts made
/// (the binds, then the tmpfs), each named by its place under `dir`.
fn shadow_dir(
    sys: &dyn Mounts,
    dir: &Path,
    staging: &Path,
    files: &[&str],
    new_dirs: &[&str],
) -> Result<Vec<ShadowMount>, StageError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = fs::metadata(dir).map_err(io_err("read", dir))?;
    fs::create_dir_all(staging).map_err(io_err("create", staging))?;
    do_mount(
        sys,
        Some(Path::new("tmpfs")),
        staging,
        Some("tmpfs"),
        MsFlags::MS_NOSUID,
        Some(&format!(
            "mode={:o},uid={},gid={}",
            meta.permissions().mode() & 0o7777,
            meta.uid(),
            meta.gid()
        )),
    )?;
    let mut made = Vec::new();
    let entries = fs::read_dir(dir).map_err(io_err("read", dir))?;
    for entry in entries {
        let entry = entry.map_err(io_err("read", dir))?;
        let name = entry.file_name();
        if files.iter().any(|f| name == *f) {
            continue;
        }
        let (from, to) = (entry.path(), staging.join(&name));
        let kind = entry.file_type().map_err(io_err("read", &from))?;
        if kind.is_symlink() {
            let target = fs::read_link(&from).map_err(io_err("read", &from))?;
            symlink(target, &to).map_err(io_err("create symlink", &to))?;
            continue;
        }
        if kind.is_dir() {
            fs::create_dir(&to).map_err(io_err("create", &to))?;
        } else {
            fs::write(&to, b"").map_err(io_err("create", &to))?;
        }
        do_mount(
            sys,
            Some(&from),
            &to,
            None,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None,
        )?;
        let mut bind = ShadowMount::open(&to)?;
        bind.path = dir.join(&name);
        made.push(bind);
    }
    for name in files {
        let to = staging.join(name);
        fs::write(&to, b"").map_err(io_err("create", &to))?;
    }
    for name in new_dirs {
        let to = staging.join(name);
        fs::create_dir(&to).map_err(io_err("create", &to))?;
        fs::set_permissions(&to, fs::Permissions::from_mode(0o755))
            .map_err(io_err("create", &to))?;
    }
    do_mount(sys, Some(staging), dir, None, MsFlags::MS_MOVE, None)?;
    made.push(ShadowMount::open(dir)?);
    Ok(made)
}

/// Directories of the host's tree on which a host-command pod gets a private, empty,
/// writable tmpfs (unless `--readonly-rootfs`), gone with the pod.
pub const PRIVATE_TMP: [&str; 2] = ["/tmp", "/var/tmp"];

/// How a host-command pod sees the host's tree ([`read_only_host`]).
#[derive(Debug, Clone, Copy)]
pub struct HostView {
    /// A private tmpfs on each of [`PRIVATE_TMP`] (not with `--readonly-rootfs`).
    pub private_tmp: bool,
    /// rkt's own state hidden ([`rkt_state_dirs`]), when the kernel paths are protected.
    pub hide_rkt_state: bool,
}

/// The host's tree as a host-command pod sees it, made in the pod's mount namespace after
/// its volumes' sources were taken ([`super::volumes::take_sources`]): a bind mount copies
/// its source's flags, so what the pod binds from the host is cloned before the host's
/// mounts turn read-only.
/// 1. the pod's `/etc/resolv.conf` and `/etc/hosts` are cloned from `<pod>/etc`;
/// 2. rkt's own state is covered by an empty read-only tmpfs ([`rkt_state_dirs`]);
/// 3. every mount of the tree is made read-only, the host's separate `/tmp` or `/run`
///    tmpfs too, except the host's `/proc` itself, which the pod's own `/proc` covers and
///    through which the stage still writes a `--private-users` init's id maps;
/// 4. the `/etc` files are attached over the host's (writable: they are the pod's);
/// 5. [`PRIVATE_TMP`] get a private tmpfs each.
///
/// Returns the devices of those tmpfs mounts, where volume targets may be created.
pub fn read_only_host(
    sys: &dyn Mounts,
    pod_dir: &Path,
    view: HostView,
) -> Result<Vec<u64>, StageError> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let err = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| StageError::Sys { what, path, source }
    };
    let cwd = crate::netns::at_cwd();
    let mut etc = Vec::new();
    for name in ETC_FILES {
        let source = pod_dir.join("etc").join(name);
        let target = Path::new("/etc").join(name);
        if source.is_file() && fs::metadata(&target).is_ok() {
            let tree = sys
                .clone_tree(cwd.as_fd(), Some(&source), false)
                .map_err(err("clone the mount of", &source))?;
            etc.push((tree, target));
        }
    }
    if view.hide_rkt_state {
        for dir in rkt_state_dirs(pod_dir) {
            if fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
                crate::isolation::paths::mask_dir(sys, &dir)?;
            }
        }
    }
    crate::isolation::paths::read_only_tree(sys, Path::new("/"))?;
    crate::isolation::paths::writable_mount(sys, Path::new("/proc"))?;
    for (tree, target) in etc {
        sys.attach_tree(tree, cwd, Some(&target))
            .map_err(err("bind-mount the pod's file over", &target))?;
    }
    let mut devices = Vec::new();
    if !view.private_tmp {
        return Ok(devices);
    }
    for dir in PRIVATE_TMP.map(Path::new) {
        if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        do_mount(
            sys,
            Some(Path::new("tmpfs")),
            dir,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777"),
        )?;
        devices.push(fs::metadata(dir).map_err(io_err("inspect", dir))?.dev());
    }
    Ok(devices)
}

/// rkt's own state under the host's tree, hidden from a host-command pod: the data
/// directory (`<pod>/../..`: every pod's files, the images, the CNI cache, the locks),
/// `/run/rkt` (the mount template and its lock), and `/var/lib/cni` (the `host-local`
/// leases of the pods' networks, and their locks).
pub fn rkt_state_dirs(pod_dir: &Path) -> Vec<PathBuf> {
    let data = pod_dir.parent().and_then(Path::parent);
    let run = Path::new(crate::mount_template::TEMPLATE_DIR).parent();
    let mut dirs: Vec<PathBuf> = data.into_iter().chain(run).map(Path::to_path_buf).collect();
    dirs.push(PathBuf::from("/var/lib/cni"));
    dirs.retain(|d| d.parent().is_some());
    dirs
}

/// Changes to the current directory again by its path, so that the app starts in it as
/// the pod sees it (its private `/tmp`, a volume, rkt's state hidden), not in the host's
/// directory it was opened on; in `/` when the pod has no such directory.
pub fn reenter_cwd() {
    let entered = std::env::current_dir().is_ok_and(|dir| chdir(&dir).is_ok());
    if !entered {
        let _ = chdir("/");
    }
}

/// A fresh sysfs at `<root>/sys` showing the pod's network namespace.
pub fn mount_sysfs(sys: &dyn Mounts, root: &Path) -> Result<(), StageError> {
    let target = root.join("sys");
    fs::create_dir_all(&target).map_err(io_err("create", &target))?;
    do_mount(
        sys,
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
pub fn populate_dev(sys: &dyn Mounts, root: &Path) -> Result<(), StageError> {
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
        sys,
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
        do_mount(sys, Some(&source), &target, None, MsFlags::MS_BIND, None)?;
        do_mount(
            sys,
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
        sys,
        Some(Path::new("devpts")),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    let shm = dev.join("shm");
    fs::create_dir(&shm).map_err(io_err("create", &shm))?;
    do_mount(
        sys,
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
pub fn mount_proc(sys: &dyn Mounts, root: &Path) -> Result<(), StageError> {
    let target = root.join("proc");
    fs::create_dir_all(&target).map_err(io_err("create", &target))?;
    do_mount(
        sys,
        Some(Path::new("proc")),
        &target,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    )
}

/// Makes `rootfs` (already a mount point, see [`bind_rootfs`]) the root, detaching the old
/// one. The current directory ends up at the new `/`.
pub fn enter_rootfs(sys: &dyn Mounts, rootfs: &Path) -> Result<(), StageError> {
    let errno =
        |what: &'static str, path: PathBuf| move |source| StageError::Sys { what, path, source };
    sys.chdir(rootfs)
        .map_err(errno("change directory to", rootfs.to_path_buf()))?;
    sys.pivot_root_here()
        .map_err(errno("pivot_root into", rootfs.to_path_buf()))?;
    sys.detach(Path::new("."))
        .map_err(errno("detach the old root under", rootfs.to_path_buf()))?;
    sys.chdir(Path::new("/"))
        .map_err(errno("change directory to", PathBuf::from("/")))
}
