//! The small mount namespace a busy host's pods are copied from.
//!
//! A pod's stage makes the pod's mount namespace with `unshare(CLONE_NEWNS)`, which copies
//! the mount namespace it is in. On the host that holds one bind mount per running pod
//! under `/run/netns` (and an overlay per running image app), so the copy, and detaching
//! `/run/netns` from it afterwards, costs about 2 ms per pod at 1,000 pods, and more with
//! every pod (the stage's CPU time, measured: docs/PERFORMANCE.md). With
//! [`MIN_NAMESPACES`] or more namespaces mounted under `/run/netns`, the
//! stage instead enters a *template* first: a mount namespace made from the host's without
//! `/run/netns` and without the pods' overlays, a slave of the host's mounts, kept by a bind
//! mount at `/run/rkt/mount-template/ns` (in a private mount of that directory, which a
//! mount namespace's bind mount needs). Its copy costs what a host without pods costs.
//!
//! The template is exact or unused. Each stage compares the host's mounts, by their unique
//! ids (`listmount(2)`: ids are never reused), with those the template was made from, which
//! `/run/rkt/mount-template/mounts` records: besides the namespaces under `/run/netns`,
//! pods' overlays (an overlay on `<pods>/<uuid>/rootfs`, or on an app's) and the
//! template's own two mounts, the host must hold exactly the recorded mounts, each still at
//! its place with its flags and propagation (a digest of what `statmount(2)` says), and the
//! same `/run/netns` mount.
//! Otherwise (a file system mounted, unmounted, moved or remounted on the host since, or
//! more than `MAX_NEW_OVERLAYS` pods' overlays to look at one by one), the stage makes a new
//! template under `/run/rkt/mount-template.lock`; a stage that finds the lock taken, or
//! any step failing, goes without one, as on a quiet host. A pod's own overlays are not in
//! the template: the stage clones them (`open_tree(2)`) before it enters the template and
//! attaches the clones in the pod's namespace ([`clone_pod_overlay`], [`attach`]).
//!
//! Removed ([`remove_if_unused`]) by the teardown or gc that leaves fewer than
//! [`MIN_NAMESPACES`] namespaces mounted under `/run/netns`, so a quiet host keeps nothing
//! of it but its lock file.
//!
//! Needs Linux 6.8 (`listmount`, `statmount`); on older kernels the stage goes without.
//! May not touch pods: it deals in mounts and namespaces, and knows a pod's overlay only by
//! where the pod store puts it.

use std::fs::{self, File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};

use crate::netns::NETNS_RUN_DIR;

/// The directory of the template: `ns` (the namespace's bind mount) and `mounts` (what it
/// was made from).
pub const TEMPLATE_DIR: &str = "/run/rkt/mount-template";
const LOCK_FILE: &str = "/run/rkt/mount-template.lock";
const NS_FILE: &str = "ns";
const RECORD_FILE: &str = "mounts";

/// Below this many namespaces under `/run/netns` the host's mount table is small enough
/// that copying it costs less than checking a template (about 0.1 ms at 32).
pub const MIN_NAMESPACES: usize = 32;

/// Why a template could not be made, entered, removed or a pod's overlay cloned or attached;
/// names the path. The stage goes without a template on any of them but the last.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {path}")]
pub struct TemplateError {
    what: &'static str,
    path: PathBuf,
    source: Errno,
}

fn err(what: &'static str, path: &Path) -> impl FnOnce(Errno) -> TemplateError {
    let path = path.to_path_buf();
    move |source| TemplateError { what, path, source }
}

fn io_errno(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// An open template, ready to enter.
#[derive(Debug)]
pub struct Template {
    ns: OwnedFd,
}

impl Template {
    /// Makes the template the calling process's mount namespace; an `unshare(CLONE_NEWNS)`
    /// after it copies the template. The caller must be single-threaded.
    pub fn enter(&self) -> Result<(), TemplateError> {
        setns(self.ns.as_fd(), CloneFlags::CLONE_NEWNS)
            .map_err(err("enter the mount namespace", Path::new(TEMPLATE_DIR)))
    }
}

/// The template for a pod about to get its mount namespace: `None` on a quiet host
/// (fewer than [`MIN_NAMESPACES`] namespaces), or where it cannot be used or made right now
/// (the stage then copies the host's namespace). Makes a new one when the host's mounts
/// changed since the last was made.
pub fn for_new_pod() -> Option<Template> {
    let netns = mount_root_id(Path::new(NETNS_RUN_DIR))?;
    if listmount(netns, 0, MIN_NAMESPACES).ok()?.len() < MIN_NAMESPACES {
        return None;
    }
    if let Some(t) = open_if_current(netns) {
        return Some(t);
    }
    let _lock = try_lock()?;
    // Another stage may have made one while this one waited for the lock's turn.
    if let Some(t) = open_if_current(netns) {
        return Some(t);
    }
    make(netns).ok()
}

/// Opens the template if the host's mounts are still those it was made from.
fn open_if_current(netns: u64) -> Option<Template> {
    let dir = Path::new(TEMPLATE_DIR);
    let record = Record::parse(&fs::read_to_string(dir.join(RECORD_FILE)).ok()?)?;
    if record.netns != netns || !record.matches(&HostMounts::read(netns).ok()?) {
        return None;
    }
    let file = File::open(dir.join(NS_FILE)).ok()?;
    Some(Template { ns: file.into() })
}

/// What the template was made from, as unique mount ids of the host's namespace.
#[derive(Debug, Default, PartialEq, Eq)]
struct Record {
    /// `/run/netns`, detached in the template.
    netns: u64,
    /// The template's own mounts on the host: its directory and its namespace.
    own: Vec<u64>,
    /// Every other mount of the host but pods' overlays, sorted.
    kept: Vec<u64>,
    /// Pods' overlays on the host then (detached in the template), sorted.
    overlays: Vec<u64>,
    /// The kept mounts' places, flags and propagation ([`fingerprint`]): a remount
    /// read-only, a move or a `--make-shared` keeps a mount's id but changes this.
    state: u64,
}

/// Pods' overlays mounted on the host since the template was made that the check looks at
/// one by one (`statmount`); with more, a new template is made, which records them.
const MAX_NEW_OVERLAYS: usize = 64;

impl Record {
    fn render(&self) -> String {
        let list = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
        format!(
            "netns {}\nown {}\nkept {}\noverlays {}\nstate {}\n",
            self.netns,
            list(&self.own),
            list(&self.kept),
            list(&self.overlays),
            self.state
        )
    }

    fn parse(text: &str) -> Option<Record> {
        let mut record = Record::default();
        let mut seen = 0;
        for line in text.lines() {
            let (key, values) = line.split_once(' ').unwrap_or((line, ""));
            let ids = values
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<Vec<u64>, _>>()
                .ok()?;
            match key {
                "netns" => record.netns = *ids.first()?,
                "own" => record.own = ids,
                "kept" => record.kept = ids,
                "overlays" => record.overlays = ids,
                "state" => record.state = *ids.first()?,
                _ => return None,
            }
            seen += 1;
        }
        (seen == 5
            && record.netns != 0
            && record.own.len() == 2
            && record.kept.is_sorted()
            && record.overlays.is_sorted())
        .then_some(record)
    }

    /// Whether `host` holds exactly the kept mounts, unchanged, the template's own, and
    /// otherwise only namespaces under `/run/netns` and pods' overlays (at most
    /// [`MAX_NEW_OVERLAYS`] of them new).
    fn matches(&self, host: &HostMounts) -> bool {
        self.same_mounts(host, is_pod_overlay) && fingerprint(&self.kept) == Some(self.state)
    }

    /// The id comparison of [`Record::matches`], with `pod_overlay` telling a pod's overlay
    /// from another mount.
    fn same_mounts(&self, host: &HostMounts, pod_overlay: impl Fn(u64) -> bool) -> bool {
        let mut kept = self.kept.iter().peekable();
        let mut own_seen = 0;
        let mut new_overlays = 0;
        for &id in &host.others {
            if kept.peek() == Some(&&id) {
                kept.next();
            } else if self.own.contains(&id) {
                own_seen += 1;
            } else if kept.peek().is_some_and(|&&k| k < id) {
                // A kept mount is gone.
                return false;
            } else if self.overlays.binary_search(&id).is_err() {
                new_overlays += 1;
                if new_overlays > MAX_NEW_OVERLAYS || !pod_overlay(id) {
                    return false;
                }
            }
        }
        kept.next().is_none() && own_seen == self.own.len()
    }
}

/// The host's mounts but `/run/netns` and those under it.
struct HostMounts {
    others: Vec<u64>,
}

impl HostMounts {
    fn read(netns: u64) -> Result<HostMounts, Errno> {
        let all = listmount_all(LSMT_ROOT)?;
        let mut under = listmount_all(netns)?;
        under.push(netns);
        under.sort_unstable();
        let others = all
            .into_iter()
            .filter(|id| under.binary_search(id).is_err())
            .collect();
        Ok(HostMounts { others })
    }
}

/// A pod's overlay root filesystem, by what `statmount` says of mount `id`.
fn is_pod_overlay(id: u64) -> bool {
    statmount(id).is_ok_and(|m| is_overlay_root(m.sb_magic, &m.point))
}

/// A digest (FNV-1a) of each mount's id, parent, flags (its own and its file system's),
/// propagation and mount point, or `None` if one cannot be read.
fn fingerprint(ids: &[u64]) -> Option<u64> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for &id in ids {
        let m = statmount(id).ok()?;
        for value in [
            id,
            m.parent,
            m.attr,
            m.propagation,
            m.peer_group,
            m.master,
            u64::from(m.sb_flags),
        ] {
            eat(&value.to_le_bytes());
        }
        eat(m.point.as_os_str().as_bytes());
        eat(&[0]);
    }
    Some(hash)
}

/// Whether a mount with file system magic `magic` at `point` is a pod's overlay: at
/// `<pods>/<uuid>/rootfs` or `<pods>/<uuid>/apps/<app>/rootfs` (`image_pod::app_dir`).
fn is_overlay_root(magic: u64, point: &Path) -> bool {
    if magic != OVERLAYFS_SUPER_MAGIC || point.file_name() != Some("rootfs".as_ref()) {
        return false;
    }
    let Some(app_dir) = point.parent() else {
        return false;
    };
    let pod_dir = match app_dir.parent() {
        Some(apps) if apps.file_name() == Some("apps".as_ref()) => apps.parent(),
        _ => Some(app_dir),
    };
    pod_dir.is_some_and(|pod| {
        pod.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(crate::podstore::store::is_uuid)
            && pod.parent().and_then(Path::file_name) == Some("pods".as_ref())
    })
}

/// Makes a new template from the host's mounts now; the caller holds the lock.
fn make(netns: u64) -> Result<Template, TemplateError> {
    let dir = Path::new(TEMPLATE_DIR);
    fs::create_dir_all(dir).map_err(|e| err("create", dir)(io_errno(e)))?;
    // A mount namespace cannot be bind-mounted where the mount would propagate.
    crate::netns::set_propagation(dir, MsFlags::MS_PRIVATE)
        .map_err(|(what, source)| err(what, dir)(source))?;
    let ns_file = dir.join(NS_FILE);
    match umount2(&ns_file, MntFlags::MNT_DETACH) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(err("unmount the old template", &ns_file)(e)),
    }
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o000)
        .open(&ns_file)
        .map_err(|e| err("create", &ns_file)(io_errno(e)))?;
    let dir_id = mount_root_id(dir).ok_or_else(|| err("find the mount of", dir)(Errno::EINVAL))?;
    let host = HostMounts::read(netns).map_err(err("list the mounts of", Path::new("/")))?;
    let mut kept = Vec::with_capacity(host.others.len());
    let mut overlays = Vec::new();
    // Pods copied from the template need neither the namespaces nor the template itself.
    let mut detach = vec![PathBuf::from(NETNS_RUN_DIR), dir.to_path_buf()];
    for &id in host.others.iter().filter(|&&id| id != dir_id) {
        match statmount(id) {
            Ok(m) if is_overlay_root(m.sb_magic, &m.point) => {
                overlays.push(id);
                detach.push(m.point);
            }
            _ => kept.push(id),
        }
    }
    let state = fingerprint(&kept)
        .ok_or_else(|| err("read the mounts of", Path::new("/"))(Errno::EINVAL))?;
    let ns = std::thread::Builder::new()
        .name("rkt-mnt-template".into())
        .spawn(move || new_namespace_on_this_thread(&detach))
        .map_err(|e| err("start a thread for", dir)(io_errno(e)))?
        .join()
        .unwrap_or(Err(TemplateError {
            what: "make (the thread panicked)",
            path: dir.to_path_buf(),
            source: Errno::EIO,
        }))?;
    let source = format!("/proc/self/fd/{}", ns.as_raw_fd());
    mount(
        Some(source.as_str()),
        &ns_file,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(err("bind-mount the mount namespace on", &ns_file))?;
    let ns_id =
        mount_root_id(&ns_file).ok_or_else(|| err("find the mount of", &ns_file)(Errno::EINVAL))?;
    let own = vec![dir_id, ns_id];
    let record = Record {
        netns,
        own,
        kept,
        overlays,
        state,
    };
    let record_file = dir.join(RECORD_FILE);
    crate::fsutil::replace(
        &record_file,
        record.render().as_bytes(),
        0o600,
        crate::fsutil::Durability::Rename,
    )
    .map_err(|e| err("write", &record_file)(io_errno(e.source)))?;
    Ok(Template { ns })
}

/// Runs on a thread of its own, which ends right after (its namespace lives on in the
/// returned descriptor): a copy of the host's mounts, slave of them, without `detach`.
fn new_namespace_on_this_thread(detach: &[PathBuf]) -> Result<OwnedFd, TemplateError> {
    let root = Path::new("/");
    unshare(CloneFlags::CLONE_NEWNS).map_err(err("unshare a mount namespace for", root))?;
    mount(
        None::<&str>,
        root,
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(err("make a slave mount", root))?;
    for path in detach {
        match umount2(path, MntFlags::MNT_DETACH) {
            Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(err("detach", path)(e)),
        }
    }
    let own = Path::new("/proc/thread-self/ns/mnt");
    File::open(own)
        .map(OwnedFd::from)
        .map_err(|e| err("open", own)(io_errno(e)))
}

/// Removes the template once fewer than [`MIN_NAMESPACES`] namespaces are mounted under
/// `/run/netns` (when no stage would use it: a template kept on a host with a few
/// namespaces of other runtimes would only hold on to the host's mounts of the time).
/// Safe to call at any time; does nothing when there is no template, or while another
/// process holds its lock (it is then being made or removed).
pub fn remove_if_unused() -> Result<(), TemplateError> {
    let dir = Path::new(TEMPLATE_DIR);
    // The directory, not the record: a template whose making failed half-way goes too.
    if !dir.exists() || busy() {
        return Ok(());
    }
    let Some(_lock) = try_lock() else {
        return Ok(());
    };
    if busy() {
        return Ok(());
    }
    // The record first: a template without one is never used.
    match fs::remove_file(dir.join(RECORD_FILE)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err("remove", &dir.join(RECORD_FILE))(io_errno(e))),
    }
    for path in [dir.join(NS_FILE), dir.to_path_buf()] {
        match umount2(&path, MntFlags::MNT_DETACH) {
            Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(err("unmount", &path)(e)),
        }
    }
    // With whatever a stage killed half-way through making one left (a temporary record).
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err("remove", dir)(io_errno(e))),
    }
}

/// Whether [`MIN_NAMESPACES`] or more mounts are under `/run/netns`.
fn busy() -> bool {
    match mount_root_id(Path::new(NETNS_RUN_DIR)) {
        Some(netns) => {
            listmount(netns, 0, MIN_NAMESPACES).map_or(true, |ids| ids.len() >= MIN_NAMESPACES)
        }
        None => false,
    }
}

fn try_lock() -> Option<Flock<File>> {
    fs::create_dir_all(Path::new(TEMPLATE_DIR).parent()?).ok()?;
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(LOCK_FILE)
        .ok()?;
    Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()
}

/// A pod's overlay at `rootfs`, cloned from the host's mount namespace so that it can be
/// attached in the pod's ([`attach`]), which is copied from the template that lacks it.
/// `None` when `rootfs` is no pod overlay (a directory, or a mount the template holds).
pub fn clone_pod_overlay(rootfs: &Path) -> Result<Option<OwnedFd>, TemplateError> {
    let Some(id) = mount_root_id(rootfs) else {
        return Ok(None);
    };
    if !is_pod_overlay(id) {
        return Ok(None);
    }
    beneath::mount::clone_tree(crate::netns::at_cwd(), Some(rootfs), true)
        .map(Some)
        .map_err(|e| err("clone the mount", rootfs)(io_errno(e)))
}

/// Attaches a tree cloned by [`clone_pod_overlay`] at `target` in the current namespace.
pub fn attach(tree: OwnedFd, target: &Path) -> Result<(), TemplateError> {
    beneath::mount::attach_tree(tree, crate::netns::at_cwd(), Some(target))
        .map_err(|e| err("attach the cloned mount at", target)(io_errno(e)))
}

fn cstring(path: &Path) -> std::ffi::CString {
    // Paths from the pod's manifest and directories never hold a NUL byte; one that did
    // would fail to resolve, as an empty path.
    std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}

// System call numbers from 424 on are the same on every architecture.
const SYS_STATMOUNT: libc::c_long = 457;
const SYS_LISTMOUNT: libc::c_long = 458;
const LSMT_ROOT: u64 = u64::MAX;
const STATX_MNT_ID_UNIQUE: u32 = 0x4000;
const STATMOUNT_SB_BASIC: u64 = 0x1;
const STATMOUNT_MNT_BASIC: u64 = 0x2;
const STATMOUNT_MNT_POINT: u64 = 0x10;
const OVERLAYFS_SUPER_MAGIC: u64 = 0x794c_7630;

/// `struct mnt_id_req`, version 0.
#[repr(C)]
struct MntIdReq {
    size: u32,
    spare: u32,
    mnt_id: u64,
    param: u64,
}

/// The unique id of the mount whose root `path` is, or `None` (not a mount point, or no
/// unique ids: Linux before 6.8).
fn mount_root_id(path: &Path) -> Option<u64> {
    let c = cstring(path);
    // SAFETY: statx is plain old data, all-zero valid.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path that outlives the call and a statx buffer to fill.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            STATX_MNT_ID_UNIQUE,
            &mut stx,
        )
    };
    let attr = libc::STATX_ATTR_MOUNT_ROOT as u64;
    (rc == 0
        && stx.stx_mask & STATX_MNT_ID_UNIQUE != 0
        && stx.stx_attributes_mask & attr != 0
        && stx.stx_attributes & attr != 0)
        .then_some(stx.stx_mnt_id)
}

/// Up to `max` ids of the mounts under mount `id` (or every mount, [`LSMT_ROOT`]) whose
/// ids are above `after`, in ascending order.
fn listmount(id: u64, after: u64, max: usize) -> Result<Vec<u64>, Errno> {
    let req = MntIdReq {
        size: std::mem::size_of::<MntIdReq>() as u32,
        spare: 0,
        mnt_id: id,
        param: after,
    };
    let mut ids = vec![0u64; max];
    // SAFETY: a request struct and an id buffer of `max` entries, both outliving the call.
    let n = unsafe {
        libc::syscall(
            SYS_LISTMOUNT,
            &req as *const MntIdReq,
            ids.as_mut_ptr(),
            max,
            0,
        )
    };
    ids.truncate(Errno::result(n)? as usize);
    Ok(ids)
}

/// Every id under mount `id` (or every mount), in ascending order.
fn listmount_all(id: u64) -> Result<Vec<u64>, Errno> {
    const BATCH: usize = 4096;
    let mut all = Vec::new();
    loop {
        let batch = listmount(id, all.last().copied().unwrap_or(0), BATCH)?;
        let done = batch.len() < BATCH;
        all.extend(batch);
        if done {
            return Ok(all);
        }
    }
}

/// What `statmount(2)` says of a mount that the template cares about.
#[derive(Debug)]
struct MountInfo {
    sb_magic: u64,
    sb_flags: u32,
    parent: u64,
    attr: u64,
    propagation: u64,
    peer_group: u64,
    master: u64,
    point: PathBuf,
}

/// [`MountInfo`] of mount `id` (`struct statmount`: the fields' offsets are the kernel's
/// ABI; the strings start at byte 512).
fn statmount(id: u64) -> Result<MountInfo, Errno> {
    const STR_OFFSET: usize = 512;
    const WANTED: u64 = STATMOUNT_SB_BASIC | STATMOUNT_MNT_BASIC | STATMOUNT_MNT_POINT;
    let req = MntIdReq {
        size: std::mem::size_of::<MntIdReq>() as u32,
        spare: 0,
        mnt_id: id,
        param: WANTED,
    };
    let mut buf = vec![0u64; 1024];
    let len = buf.len() * 8;
    // SAFETY: a request struct and a buffer of `len` bytes, both outliving the call.
    let rc = unsafe {
        libc::syscall(
            SYS_STATMOUNT,
            &req as *const MntIdReq,
            buf.as_mut_ptr(),
            len,
            0,
        )
    };
    Errno::result(rc)?;
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let u32_at = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap_or_default());
    let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap_or_default());
    if u64_at(8) & WANTED != WANTED {
        return Err(Errno::EOPNOTSUPP);
    }
    let start = STR_OFFSET + u32_at(108) as usize;
    let text = bytes.get(start..).ok_or(Errno::EOVERFLOW)?;
    let end = text.iter().position(|&b| b == 0).ok_or(Errno::EOVERFLOW)?;
    Ok(MountInfo {
        sb_magic: u64_at(24),
        sb_flags: u32_at(32),
        parent: u64_at(48),
        attr: u64_at(64),
        propagation: u64_at(72),
        peer_group: u64_at(80),
        master: u64_at(88),
        point: PathBuf::from(std::ffi::OsStr::from_bytes(&text[..end])),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            netns: 7,
            own: vec![40, 41],
            kept: vec![1, 2, 3],
            overlays: vec![30],
            state: 99,
        }
    }

    #[test]
    fn the_record_reads_back() {
        assert_eq!(Record::parse(&record().render()), Some(record()));
    }

    #[test]
    fn a_damaged_record_is_none() {
        for text in [
            "",
            "netns 7\nown 40\nkept 1\noverlays\nstate 9\n",
            "netns 7\nown 40 41\nkept 3 1\noverlays\nstate 9\n",
            "netns x\nown 40 41\nkept\noverlays\nstate 9\n",
            "netns 7\nown 40 41\nkept 1\noverlays\nstate 9\nother 2\n",
            "netns 7\nown 40 41\nkept 1\n",
        ] {
            assert_eq!(Record::parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_host_must_hold_exactly_the_kept_and_own_mounts() {
        let record = record();
        let host = |others: &[u64]| HostMounts {
            others: others.to_vec(),
        };
        let overlay = |id: u64| id >= 100;
        assert!(record.same_mounts(&host(&[1, 2, 3, 40, 41]), overlay));
        // The recorded overlay, gone or still there, and new pods' overlays.
        assert!(record.same_mounts(&host(&[1, 2, 3, 30, 40, 41, 100, 101]), overlay));
        // A kept mount gone, an own mount gone, a mount that is no pod's overlay.
        assert!(!record.same_mounts(&host(&[1, 3, 40, 41]), overlay));
        assert!(!record.same_mounts(&host(&[1, 2, 3, 40]), overlay));
        assert!(!record.same_mounts(&host(&[1, 2, 3, 40, 41, 50]), overlay));
        // Too many new overlays to look at one by one: a new template.
        let many: Vec<u64> = [1, 2, 3, 40, 41]
            .into_iter()
            .chain(100..100 + MAX_NEW_OVERLAYS as u64 + 1)
            .collect();
        assert!(!record.same_mounts(&host(&many), overlay));
    }

    #[test]
    fn only_overlays_where_pods_have_them_are_pods_overlays() {
        let uuid = "0b9f6a36-4c1e-4f0c-9d7e-2f1c3a5b7d90";
        for (magic, point, pods) in [
            (
                OVERLAYFS_SUPER_MAGIC,
                format!("/var/lib/rkt/pods/{uuid}/rootfs"),
                true,
            ),
            (
                OVERLAYFS_SUPER_MAGIC,
                format!("/d/pods/{uuid}/apps/web/rootfs"),
                true,
            ),
            (0xef53, format!("/var/lib/rkt/pods/{uuid}/rootfs"), false),
            (OVERLAYFS_SUPER_MAGIC, "/mnt/rootfs".to_string(), false),
            (
                OVERLAYFS_SUPER_MAGIC,
                format!("/d/other/{uuid}/rootfs"),
                false,
            ),
            (
                OVERLAYFS_SUPER_MAGIC,
                format!("/d/pods/{uuid}/merged"),
                false,
            ),
            (
                OVERLAYFS_SUPER_MAGIC,
                "/d/pods/not-a-uuid/rootfs".to_string(),
                false,
            ),
        ] {
            assert_eq!(is_overlay_root(magic, Path::new(&point)), pods, "{point}");
        }
    }
}
