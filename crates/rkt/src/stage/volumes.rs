//! The pod's volumes in an app's root: the `empty` volumes' directories, made once per pod
//! ([`create_empty_volumes`]), and the bind mounts of an app's `--mount`s, made in the
//! app's mount namespace before it enters its root ([`mount_app_volumes`]).
//!
//! A mount target is resolved beneath the app's root with `openat2(2)` and
//! `RESOLVE_IN_ROOT` ([`beneath::open_beneath`]), one component at a time, so a symlink in the root (absolute, or with
//! `..`) resolves as it would for the app, inside the root, never to the host's files.
//! Missing components are created (directories 0755, a last component that receives a file
//! an empty 0644 file; a symlink to a missing path is followed from the root, its `..`
//! stopping there, and what it names is created) in an image's root, the pod's own overlay;
//! elsewhere only in the pod's own tmpfs mounts: on the host's root its `/tmp` and
//! `/var/tmp`, in a `--rootfs` the tmpfs that provides what the directory lacks at its top
//! level ([`super::mounts::provide_mount_points`]). Anything else missing is an error: rkt
//! creates nothing on the host, and writes nothing into a `--rootfs` directory. The mount is attached onto the resolved
//! descriptor, so nothing can swap the path in between.
//!
//! Each source is cloned first ([`take_sources`], open_tree(2)), with its submounts unless
//! `recursive=false`, before the app's root changes: a host-command pod's host tree turns
//! read-only, and the clone keeps the flags the source's mounts have on the host;
//! `readOnly=true` makes the new mount read-only, and with `recursive` every mount below it
//! too (`mount_setattr(2)` with `AT_RECURSIVE`). When the pod's kernel paths are protected
//! (the default), every volume mount is also `nodev`, as the rest of the root is
//! ([`crate::isolation::paths::nodev_tree`]). Everything happens in the app's mount
//! namespace, which goes away with the pod: nothing is mounted on the host. A host volume
//! with a propagation (the CRI's) is cloned by a sandbox app's helper in the host's mount
//! namespace instead ([`take_host_sources`]), so that it follows the host's mounts.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use beneath::mount::{Attr, Flag};
use beneath::{at, open_beneath, Kind, MountAttrError};
use nix::errno::Errno;
use nix::sys::stat::fstat;

use crate::isolation::syscall::{errno_of, Mounts};
use crate::isolation::user_ns::IdMap;
use crate::podstore::volume::{empty_dir, Mount, Propagation, Volume, VolumeKind};
use crate::podstore::App;

/// Why a volume could not be made or mounted. Every variant names the volume and the path.
#[derive(Debug, thiserror::Error)]
pub enum VolumeMountError {
    #[error("volume {volume}: cannot {what} {path}")]
    Sys {
        volume: String,
        what: &'static str,
        path: PathBuf,
        source: Errno,
    },
    #[error(
        "volume {volume}: the target {target} does not exist on the host's root ({missing} is \
         missing; the app has no --rootfs): rkt creates nothing on the host, give an existing \
         path (or one in the pod's own /tmp or /var/tmp)"
    )]
    MissingOnHost {
        volume: String,
        target: String,
        missing: String,
    },
    #[error(
        "volume {volume}: the target {target} does not exist in --rootfs {rootfs} ({missing} \
         is missing): rkt writes nothing into the rootfs; create it there, or mount at an \
         existing path or one whose first component is missing at the rootfs's top level"
    )]
    MissingInRootfs {
        volume: String,
        target: String,
        missing: String,
        rootfs: PathBuf,
    },
    #[error(transparent)]
    Propagation(Box<PropagationUnmet>),
    #[error("--mount of volume {volume}: the pod declares no such volume")]
    Undeclared { volume: String },
    #[error(
        "volume {volume}: making mounts read-only or nodev needs mount_setattr(2) (Linux 5.12 \
         or later)"
    )]
    Unsupported { volume: String },
}

/// A host volume's propagation its source's mount on the host does not allow
/// ([`check_propagation`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "volume {volume}: propagation {propagation} needs its source {source_path} on a {needs} \
     mount of the host, and {mount_point} is not (make it so first, as `mount \
     --make-rshared {mount_point}` does)"
)]
pub struct PropagationUnmet {
    pub volume: String,
    pub propagation: &'static str,
    pub source_path: PathBuf,
    pub mount_point: PathBuf,
    pub needs: &'static str,
}

/// Creates the directory of every `empty` volume, `<pod>/volumes/NAME`, with its mode and
/// owner; with `--private-users` (`user_ns`), the owner is the host id the pod's id maps
/// to. A directory already there is left as it is. Called once per pod, before any app's
/// mounts.
pub fn create_empty_volumes(
    pod_dir: &Path,
    volumes: &[Volume],
    user_ns: Option<&IdMap>,
) -> Result<(), VolumeMountError> {
    for volume in volumes {
        let VolumeKind::Empty { mode, uid, gid } = volume.kind else {
            continue;
        };
        let err = |what, path: &Path| {
            let err = sys_error(&volume.name, what, path);
            move |e: std::io::Error| err(errno_of(e))
        };
        let dir = empty_dir(pod_dir, &volume.name);
        let parent = dir.parent().unwrap_or(pod_dir);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(err("create", parent))?;
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            other => other.map_err(err("create", &dir))?,
        }
        let shift = |id: u32| user_ns.map_or(id, |map| map.host_base + id);
        std::os::unix::fs::chown(&dir, Some(shift(uid)), Some(shift(gid)))
            .map_err(err("set the owner of", &dir))?;
        // After chown, which clears set-id bits.
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode))
            .map_err(err("set the mode of", &dir))?;
    }
    Ok(())
}

/// For each of an app's `mounts` of the pod's `volumes`: a host volume's source taken here
/// (cloned with open_tree(2), with its submounts unless the volume says otherwise) and set
/// to its [`Propagation`] when it has one, else `None`. A sandbox app's helper calls it in
/// the host's mount namespace, before it joins the pod's, so that the clone of a shared or
/// slave mount of the host stays in (or under) its peer group and follows the host's mounts
/// made after the pod started; the app's process attaches it ([`take_sources`],
/// [`mount_app_volumes`]). `rslave` needs the source on a shared or slave mount, `rshared`
/// on a shared one (the host's side of the propagation: made private, the app's copy could
/// follow nothing), else an error says which mount to change.
pub fn take_host_sources(
    volumes: &[Volume],
    mounts: &[Mount],
) -> Result<Vec<Option<Source>>, VolumeMountError> {
    let mut sources = Vec::with_capacity(mounts.len());
    for m in mounts {
        let volume = volumes.iter().find(|v| v.name == m.volume);
        let Some((source, read_only, recursive, propagation)) =
            volume.and_then(|v| match &v.kind {
                VolumeKind::Host {
                    source,
                    read_only,
                    recursive,
                    propagation: Some(p),
                } => Some((source, *read_only, *recursive, *p)),
                _ => None,
            })
        else {
            sources.push(None);
            continue;
        };
        let name = m.volume.as_str();
        let err = |what| sys_error(name, what, source);
        check_propagation(name, source, propagation)?;
        let source_fd = beneath::open_path(source, Kind::Any)
            .map_err(|e| err("open the source")(errno_of(e)))?;
        let is_dir = is_dir(&source_fd).map_err(err("inspect the source"))?;
        let tree = beneath::mount::clone_tree(source_fd.as_fd(), None, recursive)
            .map_err(|e| err("clone the mount of the source")(errno_of(e)))?;
        let kind = match propagation {
            Propagation::Private => beneath::mount::Propagation::Private,
            Propagation::Rslave => beneath::mount::Propagation::Slave,
            Propagation::Rshared => beneath::mount::Propagation::Shared,
        };
        beneath::mount::set_propagation(tree.as_fd(), kind, true)
            .map_err(|e| err("set the propagation of the clone of")(errno_of(e)))?;
        sources.push(Some(Source {
            volume: name.to_string(),
            tree,
            is_dir,
            read_only,
            recursive,
        }));
    }
    Ok(sources)
}

/// The error of a system call that failed with `what` on volume `volume`'s `path`.
fn sys_error(
    volume: &str,
    what: &'static str,
    path: &Path,
) -> impl FnOnce(Errno) -> VolumeMountError {
    let (volume, path) = (volume.to_string(), path.to_path_buf());
    move |source| VolumeMountError::Sys {
        volume,
        what,
        path,
        source,
    }
}

/// Whether the host's mount that `source` is on lets volume `volume` have `propagation`:
/// `rslave` needs it shared or slave, `rshared` shared ([`take_host_sources`]; a CRI server
/// checks it when a container is created, the helper again when it starts).
pub fn check_propagation(
    volume: &str,
    source: &Path,
    propagation: Propagation,
) -> Result<(), VolumeMountError> {
    // A private copy asks nothing of the host's side: no mount to look up.
    let (word, needs) = match propagation {
        Propagation::Private => return Ok(()),
        Propagation::Rslave => ("rslave", "shared or slave"),
        Propagation::Rshared => ("rshared", "shared"),
    };
    let (mount_point, state) = beneath::mount::mount_of(source)
        .map_err(|e| sys_error(volume, "find the mount of", source)(errno_of(e)))?;
    let ok = match propagation {
        Propagation::Rslave => state.shared || state.slave,
        _ => state.shared,
    };
    if ok {
        return Ok(());
    }
    Err(VolumeMountError::Propagation(Box::new(PropagationUnmet {
        volume: volume.to_string(),
        propagation: word,
        source_path: source.to_path_buf(),
        mount_point,
        needs,
    })))
}

/// The source of one of an app's `--mount`s, taken by [`take_sources`].
pub struct Source {
    volume: String,
    /// A detached copy of the source's mount (and those below it when recursive).
    tree: OwnedFd,
    is_dir: bool,
    read_only: bool,
    recursive: bool,
}

/// The source of each of an app's `mounts` of the pod's `volumes`, in their order, cloned
/// (open_tree(2)) with the flags its mounts have now: call it before the app's root
/// changes them (a host-command pod's host tree turns read-only, and a bind mount would
/// copy that), after [`create_empty_volumes`]. A mount whose source `host_sources` holds
/// (by index: [`take_host_sources`]) takes that one instead.
pub fn take_sources(
    sys: &dyn Mounts,
    pod_dir: &Path,
    volumes: &[Volume],
    mounts: &[Mount],
    host_sources: Vec<Option<Source>>,
) -> Result<Vec<Source>, VolumeMountError> {
    let mut sources = Vec::with_capacity(mounts.len());
    let mut host_sources = host_sources.into_iter();
    for m in mounts {
        if let Some(taken) = host_sources.next().flatten() {
            sources.push(taken);
            continue;
        }
        let volume = volumes.iter().find(|v| v.name == m.volume).ok_or_else(|| {
            VolumeMountError::Undeclared {
                volume: m.volume.clone(),
            }
        })?;
        let (source, recursive, read_only) = match &volume.kind {
            VolumeKind::Host {
                source,
                read_only,
                recursive,
                ..
            } => (source.clone(), *recursive, *read_only),
            VolumeKind::Empty { .. } => (empty_dir(pod_dir, &volume.name), false, false),
        };
        let err = |what| sys_error(&volume.name, what, &source);
        let source_fd = beneath::open_path(&source, Kind::Any)
            .map_err(|e| err("open the source")(errno_of(e)))?;
        let is_dir = is_dir(&source_fd).map_err(err("inspect the source"))?;
        let tree = sys
            .clone_tree(source_fd.as_fd(), None, recursive)
            .map_err(err("clone the mount of the source"))?;
        sources.push(Source {
            volume: volume.name.clone(),
            tree,
            is_dir,
            read_only,
            recursive,
        });
    }
    Ok(sources)
}

/// Where the missing components of a mount target may be created.
#[derive(Debug, Clone, Copy)]
pub enum Creatable<'a> {
    /// Anywhere in the root: an image's root, the pod's own overlay.
    Anywhere,
    /// The host's root: only on these devices (the pod's own tmpfs mounts).
    HostRoot(&'a [u64]),
    /// A `--rootfs` directory, never written: only on these devices (the tmpfs that
    /// provides its missing top-level entries, see
    /// [`super::mounts::provide_mount_points`]).
    Rootfs(&'a Path, &'a [u64]),
}

/// Whether the first component of some target of `mounts` is missing in `rootfs` (a
/// symlink there counts as present: it resolves in the root), so that the root needs room
/// of its own at the top level ([`super::mounts::provide_mount_points`]).
pub fn top_level_missing(rootfs: &Path, mounts: &[Mount]) -> bool {
    mounts.iter().any(|m| {
        let first = m
            .relative_target()
            .components()
            .find(|c| matches!(c, Component::Normal(_)));
        first.is_some_and(|c| {
            fs::symlink_metadata(rootfs.join(c))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        })
    })
}

/// Mounts each of an app's `mounts`, whose [`take_sources`] are `sources`, under `root`,
/// the app's root directory, in the current mount namespace. `creatable`: where a missing
/// target may be created (on the host's root and in a `--rootfs`, only in the pod's own
/// tmpfs mounts). `nodev` makes every volume mount `nodev` (protected kernel paths). Call
/// it per app in the app's own mount namespace once the root's own mounts (`/dev`, `/etc`
/// files) are in place, before the root is made read-only or entered.
pub fn mount_app_volumes(
    sys: &dyn Mounts,
    root: &Path,
    creatable: Creatable<'_>,
    mounts: &[Mount],
    sources: Vec<Source>,
    nodev: bool,
) -> Result<(), VolumeMountError> {
    let Some(first) = sources.first() else {
        return Ok(());
    };
    let root_fd = beneath::open_path(root, Kind::Directory)
        .map_err(|e| sys_error(&first.volume, "open the app's root", root)(errno_of(e)))?;
    for (m, source) in mounts.iter().zip(sources) {
        mount_one(sys, &root_fd, creatable, source, m, nodev)?;
    }
    Ok(())
}

fn mount_one(
    sys: &dyn Mounts,
    root_fd: &OwnedFd,
    creatable: Creatable<'_>,
    source: Source,
    m: &Mount,
    nodev: bool,
) -> Result<(), VolumeMountError> {
    let name = source.volume.as_str();
    let err = |what, path: &Path| sys_error(name, what, path);
    let target = Path::new(&m.target);
    let target_fd = resolve_target(root_fd, m, source.is_dir, creatable, name)?;
    sys.attach_tree(source.tree, target_fd.as_fd(), None)
        .map_err(err("bind-mount the source onto", target))?;
    drop(target_fd);
    let mut attrs = Vec::new();
    if source.read_only {
        let read_only = Attr::set(Flag::ReadOnly);
        attrs.push(match source.recursive {
            true => read_only.recursive(),
            false => read_only,
        });
    }
    if nodev {
        attrs.push(Attr::set(Flag::NoDev).recursive());
    }
    if attrs.is_empty() {
        return Ok(());
    }
    // The new mount's root: resolving the target again crosses into it.
    let rel = m.relative_target();
    let mounted =
        open_in_root(root_fd, rel, Kind::Any).map_err(err("open the new mount at", target))?;
    for attr in attrs {
        sys.set_attr_fd(mounted.as_fd(), attr, target)
            .map_err(|e| match e {
                MountAttrError::Unsupported { .. } => VolumeMountError::Unsupported {
                    volume: name.to_string(),
                },
                MountAttrError::Set { source, .. }
                | MountAttrError::Remount { source, .. }
                | MountAttrError::Mountinfo { source, .. } => VolumeMountError::Sys {
                    volume: name.to_string(),
                    what: "set the mount flags (read-only, nodev) of",
                    path: target.to_path_buf(),
                    source: errno_of(source),
                },
            })?;
    }
    Ok(())
}

/// Before the pod exists: the first `--mount` target of an app on the host's root (no image,
/// no `--rootfs`) that the host lacks, as the error the app's start would end with, so that
/// it leaves no pod behind. Targets in the pod's own `/tmp` and `/var/tmp`
/// ([`super::mounts::PRIVATE_TMP`]) are left to the start, which creates them there.
pub fn check_host_targets(apps: &[App]) -> Result<(), VolumeMountError> {
    for app in apps
        .iter()
        .filter(|a| a.image.is_none() && a.rootfs.is_none())
    {
        for m in &app.mounts {
            let target = Path::new(&m.target);
            if super::mounts::PRIVATE_TMP
                .iter()
                .any(|tmp| target.starts_with(tmp))
            {
                continue;
            }
            let mut path = PathBuf::from("/");
            for part in m.relative_target().components() {
                path.push(part);
                if !path.try_exists().unwrap_or(true) {
                    return Err(VolumeMountError::MissingOnHost {
                        volume: m.volume.clone(),
                        target: m.target.clone(),
                        missing: path.display().to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The target of `m` beneath the root, opened `O_PATH`; missing components are created
/// where `creatable` allows: directories, and the last one a file when the source is not a
/// directory. A component that is a symlink to a missing path is followed as the app would
/// follow it, from the root (its `..` never above it), and what it names is created.
fn resolve_target(
    root_fd: &OwnedFd,
    m: &Mount,
    source_is_dir: bool,
    creatable: Creatable<'_>,
    name: &str,
) -> Result<OwnedFd, VolumeMountError> {
    let sys = |what, path: &Path| sys_error(name, what, path);
    let mut todo: VecDeque<OsString> = m
        .relative_target()
        .components()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    let mut done: Vec<OsString> = Vec::new();
    let joined = |parts: &[OsString]| parts.iter().collect::<PathBuf>();
    let mut links = 0;
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            done.pop();
            continue;
        }
        if part == "." || part.is_empty() {
            continue;
        }
        let want_dir = !todo.is_empty() || source_is_dir;
        let kind = if want_dir { Kind::Directory } else { Kind::Any };
        let parent = joined(&done);
        let path = parent.join(&part);
        let shown = Path::new("/").join(&path);
        match open_in_root(root_fd, &path, kind) {
            Ok(_) => {
                done.push(part);
                continue;
            }
            Err(Errno::ENOENT) => {
                let own = match creatable {
                    Creatable::Anywhere => None,
                    Creatable::HostRoot(own) | Creatable::Rootfs(_, own) => Some(own),
                };
                if let Some(own) = own {
                    // Only in the pod's own tmpfs mounts.
                    let parent_fd = open_in_root(root_fd, &parent, Kind::Directory);
                    let device = parent_fd.and_then(|fd| fstat(fd.as_raw_fd()));
                    if !device.is_ok_and(|st| own.contains(&st.st_dev)) {
                        let (volume, target) = (name.to_string(), m.target.clone());
                        let missing = shown.display().to_string();
                        return Err(match creatable {
                            Creatable::Rootfs(rootfs, _) => VolumeMountError::MissingInRootfs {
                                volume,
                                target,
                                missing,
                                rootfs: rootfs.to_path_buf(),
                            },
                            _ => VolumeMountError::MissingOnHost {
                                volume,
                                target,
                                missing,
                            },
                        });
                    }
                }
            }
            Err(Errno::ENOTDIR) if want_dir => {
                let what = if todo.is_empty() {
                    "mount a directory volume on the non-directory"
                } else {
                    "resolve (a component is not a directory)"
                };
                return Err(sys(what, &shown)(Errno::ENOTDIR));
            }
            Err(e) => return Err(sys("resolve", &shown)(e)),
        }
        // Missing: create it in its parent as resolved in the root.
        let parent_fd = open_in_root(root_fd, &parent, Kind::Directory)
            .map_err(sys("resolve", &Path::new("/").join(&parent)))?;
        at::create_mount_point(parent_fd.as_fd(), &part, kind)
            .map_err(|e| sys("create", &shown)(errno_of(e)))?;
        match open_in_root(root_fd, &path, kind) {
            Ok(_) => done.push(part),
            Err(Errno::ENOENT) => {
                // There already, yet missing: a symlink to a missing path. Its target
                // comes in its place, from the root when absolute.
                links += 1;
                if links > 40 {
                    return Err(sys("resolve", &shown)(Errno::ELOOP));
                }
                let link = at::readlink(parent_fd.as_fd(), &part)
                    .map_err(|e| sys("read the link", &shown)(errno_of(e)))?;
                if link.is_absolute() {
                    done.clear();
                }
                for c in link.components().rev() {
                    if c != Component::RootDir {
                        todo.push_front(c.as_os_str().to_os_string());
                    }
                }
            }
            Err(e) => return Err(sys("open the created", &shown)(e)),
        }
    }
    let kind = if source_is_dir {
        Kind::Directory
    } else {
        Kind::Any
    };
    open_in_root(root_fd, &joined(&done), kind).map_err(sys("resolve", Path::new(&m.target)))
}

/// `rel` beneath the root `root` is open on, `O_PATH` ([`beneath::open_beneath`]).
fn open_in_root(root: &OwnedFd, rel: &Path, kind: Kind) -> Result<OwnedFd, Errno> {
    open_beneath(root.as_fd(), rel, kind).map_err(errno_of)
}

fn is_dir(fd: &OwnedFd) -> Result<bool, Errno> {
    fstat(fd.as_raw_fd()).map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a forked child with a private mount namespace: a tmpfs made private, then
    /// shared, then a slave (of a shared bind of it); `check_propagation` of a directory
    /// in it for each of the three propagations, as `(rprivate, rslave, rshared)` allowed.
    #[test]
    fn a_propagation_needs_the_hosts_side_to_allow_it() {
        test_kit::require_root!();
        let dir = tempfile::tempdir().unwrap();
        let (top, copy) = (dir.path().join("top"), dir.path().join("copy"));
        fs::create_dir_all(top.join("data")).unwrap();
        fs::create_dir(&copy).unwrap();
        let report = dir.path().join("report");
        let child = || -> Result<String, String> {
            let fail = |what: &'static str| move |e: Errno| format!("{what}: {e}");
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(fail("unshare"))?;
            let change = |at: &Path, flags: nix::mount::MsFlags| {
                nix::mount::mount(None::<&str>, at, None::<&str>, flags, None::<&str>)
            };
            use nix::mount::MsFlags as F;
            change(Path::new("/"), F::MS_REC | F::MS_PRIVATE).map_err(fail("make / private"))?;
            nix::mount::mount(Some("tmpfs"), &top, Some("tmpfs"), F::empty(), None::<&str>)
                .map_err(fail("mount a tmpfs"))?;
            fs::create_dir(top.join("data")).map_err(|e| e.to_string())?;
            let allowed = |at: &Path| {
                [
                    Propagation::Private,
                    Propagation::Rslave,
                    Propagation::Rshared,
                ]
                .map(|p| match check_propagation("v", &at.join("data"), p) {
                    Ok(()) => "ok".to_string(),
                    Err(e) => e.to_string(),
                })
                .join("|")
            };
            let private = allowed(&top);
            change(&top, F::MS_SHARED).map_err(fail("make it shared"))?;
            let shared = allowed(&top);
            nix::mount::mount(Some(&top), &copy, None::<&str>, F::MS_BIND, None::<&str>)
                .map_err(fail("bind"))?;
            change(&copy, F::MS_SLAVE).map_err(fail("make the copy a slave"))?;
            let slave = allowed(&copy);
            Ok([private, shared, slave].join("\n"))
        };
        // SAFETY: the child makes system calls and small allocations, then _exits.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let text = child().unwrap_or_else(|e| format!("failed: {e}"));
                let _ = fs::write(&report, text);
                // SAFETY: ends the child without the harness's exit handlers.
                unsafe { libc::_exit(0) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                nix::sys::wait::waitpid(child, None).unwrap();
            }
        }
        let text = fs::read_to_string(&report).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
        assert_eq!(lines.len(), 3, "{text}");
        let (private, shared, slave) = (&lines[0], &lines[1], &lines[2]);
        assert_eq!(private[0], "ok", "{text}");
        assert!(
            private[1].contains("rslave needs its source")
                && private[1].contains("shared or slave mount")
                && private[1].contains(&format!("--make-rshared {}", top.display())),
            "{text}"
        );
        assert!(private[2].contains("rshared needs"), "{text}");
        assert_eq!(shared, &["ok", "ok", "ok"], "{text}");
        assert_eq!(slave[..2], ["ok", "ok"], "{text}");
        assert!(
            slave[2].contains(&format!("{} is not", copy.display())),
            "{text}"
        );
    }
}
