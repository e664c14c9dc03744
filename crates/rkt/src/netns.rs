//! Network namespaces: created and bind-mounted at `/run/netns/<name>` (where `ip netns`
//! finds them), entered with an RAII guard, and removed.
//!
//! - [`create`] runs on a dedicated thread: `unshare(CLONE_NEWNET)` changes only the calling
//!   thread's namespace, so the thread makes the namespace, bind-mounts its
//!   `/proc/self/task/<tid>/ns/net` onto the target file, brings `lo` up inside it, writes
//!   the namespace's own sysctls it was given ([`create_with`], e.g. a pod's
//!   `net.ipv4.ping_group_range`; `/proc/sys/net` is the namespace of the thread that opens
//!   it, so the host's are never touched) and ends; the caller's threads never leave their
//!   namespace. Like iproute2, it first makes
//!   `/run/netns` a shared mount point, so the bind mounts propagate to every mount namespace
//!   and a pod's own mount namespace cannot keep one alive after it is deleted (a pod's
//!   stage then detaches `/run/netns` from its namespace altogether:
//!   `stage::mounts::detach_netns_mounts`).
//! - [`NetnsGuard`] enters a namespace on the current thread and returns to the original one
//!   when dropped; it is `!Send`, so it cannot be dropped on another thread.
//! - [`delete`] detaches the mount and unlinks the file; deleting twice is fine.
//!   [`delete_interfaces`] first removes what the kernel would only free later.
//!
//! Interfaces are brought up with the `SIOCGIFFLAGS`/`SIOCSIFFLAGS` ioctls on a datagram
//! socket, not by running `ip`.
//!
//! May not touch: pods, their records or networks: it deals in namespaces by path, and
//! only names the path of a pod's ([`pod_netns_path`]).

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};

/// Where named network namespaces live (iproute2's `NETNS_RUN_DIR`).
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// The namespace path of a pod: `/run/netns/rkt-<uuid>`.
pub fn pod_netns_path(uuid: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(format!("rkt-{uuid}"))
}

/// What can go wrong with a network namespace; every variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespace {path} already exists")]
    Exists { path: PathBuf },
    #[error("cannot {what} for network namespace {path}{}", root_hint(*source))]
    Sys {
        what: &'static str,
        path: PathBuf,
        source: Errno,
    },
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot bring up interface {ifname:?}")]
    LinkUp { ifname: String, source: Errno },
    #[error("the thread creating network namespace {path} panicked")]
    ThreadPanicked { path: PathBuf },
}

/// A hint for permission errors: namespaces and mounts need root (CAP_SYS_ADMIN).
pub fn root_hint(errno: Errno) -> &'static str {
    if errno == Errno::EPERM {
        " (namespaces and mounts need root)"
    } else {
        ""
    }
}

/// Creates a new network namespace with `lo` up, bind-mounted at `path` (a file in a
/// directory such as [`NETNS_RUN_DIR`]). On failure nothing is left at `path`.
pub fn create(path: &Path) -> Result<(), NetnsError> {
    create_with(path, &[])
}

/// A sysctl of a network namespace: its name under `/proc/sys/net` (`ipv4/ping_group_range`)
/// and the value written.
pub type NetSysctl = (&'static str, String);

/// [`create`], then writes `sysctls` inside the new namespace (from the creating thread, in
/// the caller's user namespace: ids in values are the caller's).
pub fn create_with(path: &Path, sysctls: &[NetSysctl]) -> Result<(), NetnsError> {
    create_owned(path, sysctls, None)
}

/// [`create_with`]; with `owner_map` (a `uid_map`/`gid_map` line, `0 BASE SIZE`), the
/// namespace belongs to a new user namespace with that map instead of the caller's: root of
/// that user namespace then holds its capabilities over the network namespace (a raw socket
/// with `CAP_NET_RAW`, as for a pod without a user namespace of its own), while the caller,
/// root of the parent, keeps every capability over both (CNI plugins act on it as before).
/// The user namespace lives as long as the network namespace; [`owner_of`] opens it.
pub fn create_owned(
    path: &Path,
    sysctls: &[NetSysctl],
    owner_map: Option<&str>,
) -> Result<(), NetnsError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(|source| NetnsError::Io {
        what: "create directory",
        path: dir.to_path_buf(),
        source,
    })?;
    make_shared_mount_point(dir)?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(path)
        .map_err(|source| {
            if source.kind() == ErrorKind::AlreadyExists {
                NetnsError::Exists {
                    path: path.to_path_buf(),
                }
            } else {
                NetnsError::Io {
                    what: "create mount point",
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
    let made = match owner_map {
        Some(map) => new_owned_netns(path, map).and_then(|()| configure(path, sysctls)),
        None => {
            let (target, sysctls) = (path.to_path_buf(), sysctls.to_vec());
            on_own_thread(path, move || new_netns_on_this_thread(&target, &sysctls))
        }
    };
    if made.is_err() {
        let _ = delete(path);
    }
    made
}

/// Runs `work` on a thread of its own, which ends right after: a namespace change it makes
/// dies with it.
fn on_own_thread(
    path: &Path,
    work: impl FnOnce() -> Result<(), NetnsError> + Send + 'static,
) -> Result<(), NetnsError> {
    std::thread::Builder::new()
        .name("rkt-netns".into())
        .spawn(work)
        .map_err(|source| NetnsError::Io {
            what: "start a thread",
            path: path.to_path_buf(),
            source,
        })?
        .join()
        .unwrap_or_else(|_| {
            Err(NetnsError::ThreadPanicked {
                path: path.to_path_buf(),
            })
        })
}

/// A child process creates the user namespace and the network namespace together (a
/// thread cannot create a user namespace in a multi-threaded process); this process writes
/// the user namespace's maps, bind-mounts the network namespace at `path`, and lets the
/// child go.
fn new_owned_netns(path: &Path, map: &str) -> Result<(), NetnsError> {
    let sys = |what| {
        move |source| NetnsError::Sys {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    let (ready_r, ready_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("create a pipe"))?;
    let (hold_r, hold_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("create a pipe"))?;
    // SAFETY: the child makes only async-signal-safe system calls (unshare, write, read,
    // _exit), so forking this possibly multi-threaded process is sound.
    let child = match unsafe { nix::unistd::fork() }.map_err(sys("fork"))? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: raw system calls on descriptors this process holds.
            unsafe {
                // The parent's ends: the hold pipe's end of file comes when it closes its own.
                libc::close(hold_w.as_raw_fd());
                libc::close(ready_r.as_raw_fd());
                let code = if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0 {
                    libc::write(ready_w.as_raw_fd(), b"r".as_ptr().cast(), 1);
                    let mut byte = 0u8;
                    // Until the parent closes its end: the maps and the bind mount need us.
                    while libc::read(hold_r.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) > 0 {}
                    0
                } else {
                    *libc::__errno_location()
                };
                libc::_exit(code)
            }
        }
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop((ready_w, hold_r));
    let result = (|| {
        let mut byte = [0u8];
        if nix::unistd::read(ready_r.as_raw_fd(), &mut byte) != Ok(1) {
            return Err(NetnsError::Sys {
                what: "create a user namespace owning the network namespace",
                path: path.to_path_buf(),
                source: Errno::ECHILD,
            });
        }
        for file in ["uid_map", "gid_map"] {
            let map_path = PathBuf::from(format!("/proc/{child}/{file}"));
            std::fs::write(&map_path, map).map_err(|source| NetnsError::Io {
                what: "write the id map",
                path: map_path,
                source,
            })?;
        }
        bind_netns(&format!("/proc/{child}/ns/net"), path)
    })();
    drop(hold_w);
    let status = nix::sys::wait::waitpid(child, None);
    if result.is_ok() {
        if let Ok(nix::sys::wait::WaitStatus::Exited(_, code)) = status {
            if code != 0 {
                return Err(NetnsError::Sys {
                    what: "create a user namespace owning the network namespace",
                    path: path.to_path_buf(),
                    source: Errno::from_raw(code),
                });
            }
        }
    }
    result
}

/// Brings `lo` up and writes `sysctls` in the namespace at `path`, from a thread that joins
/// it and ends right after.
fn configure(path: &Path, sysctls: &[NetSysctl]) -> Result<(), NetnsError> {
    let (target, sysctls) = (path.to_path_buf(), sysctls.to_vec());
    on_own_thread(path, move || {
        let _inside = NetnsGuard::enter(&target)?;
        set_up_inside(&sysctls)
    })
}

/// The user namespace that owns the network namespace at `path` (`NS_GET_USERNS`), unless
/// it is the caller's own: `None` for a namespace [`create_owned`] made without an owner.
pub fn owner_of(netns: BorrowedFd) -> Result<Option<OwnedFd>, Errno> {
    use std::os::unix::fs::MetadataExt;
    const NS_GET_USERNS: libc::c_ulong = 0xb701;
    // SAFETY: NS_GET_USERNS takes no argument and returns a new descriptor or -1.
    let fd = unsafe { libc::ioctl(netns.as_raw_fd(), NS_GET_USERNS as _) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the ioctl just returned this descriptor; nothing else owns it.
    let owner = unsafe { OwnedFd::from_raw_fd(fd) };
    let ours = std::fs::metadata("/proc/self/ns/user")
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let theirs = File::from(
        owner
            .try_clone()
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?,
    )
    .metadata()
    .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    Ok(((ours.dev(), ours.ino()) != (theirs.dev(), theirs.ino())).then_some(owner))
}

/// Runs on a thread of its own, which ends right after: its namespace change dies with it.
fn new_netns_on_this_thread(path: &Path, sysctls: &[NetSysctl]) -> Result<(), NetnsError> {
    let sys = |what| {
        move |source| NetnsError::Sys {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    unshare(CloneFlags::CLONE_NEWNET).map_err(sys("unshare the network namespace"))?;
    bind_netns(
        &format!("/proc/self/task/{}/ns/net", nix::unistd::gettid()),
        path,
    )?;
    set_up_inside(sysctls)
}

/// Bind-mounts the namespace file `ns` (a `/proc/.../ns/net`) at `path`, which keeps the
/// namespace alive.
fn bind_netns(ns: &str, path: &Path) -> Result<(), NetnsError> {
    mount(Some(ns), path, None::<&str>, MsFlags::MS_BIND, None::<&str>).map_err(|source| {
        NetnsError::Sys {
            what: "bind-mount the namespace",
            path: path.to_path_buf(),
            source,
        }
    })
}

/// In the new namespace: `lo` up, and `sysctls` written.
fn set_up_inside(sysctls: &[NetSysctl]) -> Result<(), NetnsError> {
    set_link_up("lo")?;
    for (name, value) in sysctls {
        let file = Path::new("/proc/sys/net").join(name);
        std::fs::write(&file, value).map_err(|source| NetnsError::Io {
            what: "set the namespace's sysctl",
            path: file,
            source,
        })?;
    }
    Ok(())
}

/// Makes `dir` a shared mount point (bind-mounting it onto itself first if it is not a mount
/// point yet), as `ip netns add` does.
fn make_shared_mount_point(dir: &Path) -> Result<(), NetnsError> {
    set_propagation(dir, MsFlags::MS_SHARED | MsFlags::MS_REC).map_err(|(what, source)| {
        NetnsError::Sys {
            what,
            path: dir.to_path_buf(),
            source,
        }
    })
}

/// Gives mount point `dir` the propagation `propagation` (`MS_SHARED`, `MS_PRIVATE`, with
/// `MS_REC` or not), bind-mounting the directory onto itself first if it is not a mount
/// point yet. On failure, says which step failed.
pub fn set_propagation(dir: &Path, propagation: MsFlags) -> Result<(), (&'static str, Errno)> {
    let change = || mount(None::<&str>, dir, None::<&str>, propagation, None::<&str>);
    match change() {
        Ok(()) => return Ok(()),
        // Not a mount point.
        Err(Errno::EINVAL) => {}
        Err(source) => return Err(("change the propagation of the mount", source)),
    }
    mount(
        Some(dir),
        dir,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .and_then(|()| change())
    .map_err(|source| ("make a mount point of", source))
}

/// The current directory as the descriptor of *at calls (`AT_FDCWD`), for a path.
pub fn at_cwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is no descriptor to close (nor -1); the kernel reads it as "the
    // current directory" in the calls it is passed to.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// Removes the namespace at `path`: detaches the bind mount and unlinks the file. A path
/// that is not mounted or does not exist is fine.
pub fn delete(path: &Path) -> Result<(), NetnsError> {
    match umount2(path, MntFlags::MNT_DETACH) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => {}
        Err(source) => {
            return Err(NetnsError::Sys {
                what: "unmount",
                path: path.to_path_buf(),
                source,
            })
        }
    }
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(NetnsError::Io {
            what: "remove",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Deletes every interface but `lo` inside the namespace at `path`, best effort (`ip link
/// del`, run from a thread inside it). The kernel frees a deleted namespace, and with it the
/// host ends of its veths, only some time after its last user is gone, and not at all while
/// a stray process still holds it: a caller about to delete a namespace whose plugins could
/// not tear their interfaces down calls this first, so nothing of the pod stays on the host
/// side. A namespace that no longer exists has nothing to delete.
pub fn delete_interfaces(path: &Path) -> Result<(), NetnsError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let _inside = NetnsGuard::enter(path)?;
            let names = nix::net::if_::if_nameindex().map_err(|source| NetnsError::Sys {
                what: "list the interfaces of",
                path: path.to_path_buf(),
                source,
            })?;
            for iface in names.iter() {
                let name = iface.name().to_string_lossy();
                if name != "lo" {
                    // A child starts in its parent thread's namespace.
                    let _ = std::process::Command::new("ip")
                        .args(["link", "del", "dev", &name])
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .status();
                }
            }
            Ok(())
        })
        .join()
        .expect("the interface deletion thread does not panic")
    })
}

/// The current thread is in the namespace at `path` until this guard is dropped.
#[derive(Debug)]
pub struct NetnsGuard {
    original: OwnedFd,
    /// setns(2) is per thread: the guard must be dropped on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

impl NetnsGuard {
    /// Enters the network namespace at `path` on the current thread.
    pub fn enter(path: &Path) -> Result<NetnsGuard, NetnsError> {
        let open = |p: &Path| {
            File::open(p).map_err(|source| NetnsError::Io {
                what: "open",
                path: p.to_path_buf(),
                source,
            })
        };
        let original: OwnedFd = open(Path::new(&format!(
            "/proc/self/task/{}/ns/net",
            nix::unistd::gettid()
        )))?
        .into();
        let target = open(path)?;
        setns(target.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Sys {
            what: "enter",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(NetnsGuard {
            original,
            _not_send: PhantomData,
        })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Returning to the namespace the thread came from cannot reasonably fail (the fd
        // keeps it alive); if it does, the thread must not go on in the wrong namespace.
        if let Err(e) = setns(self.original.as_fd(), CloneFlags::CLONE_NEWNET) {
            panic!("cannot return to the original network namespace: {e}");
        }
    }
}

fn ifreq_for(ifname: &str) -> Result<libc::ifreq, Errno> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(Errno::EINVAL);
    }
    // SAFETY: ifreq is a plain C struct (a name array and a union of integers and
    // pointers) for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    Ok(req)
}

/// The interface flags (`IFF_*`) of `ifname` in the current thread's network namespace.
pub fn link_flags(ifname: &str) -> Result<libc::c_short, Errno> {
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let mut req = ifreq_for(ifname)?;
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`, a valid,
    // exclusively borrowed ifreq that outlives the call; `sock` is an open socket.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    Errno::result(rc)?;
    // SAFETY: after a successful SIOCGIFFLAGS the kernel has set the `ifru_flags` member.
    Ok(unsafe { req.ifr_ifru.ifru_flags })
}

/// Brings `ifname` up in the current thread's network namespace.
pub fn set_link_up(ifname: &str) -> Result<(), NetnsError> {
    let err = |source| NetnsError::LinkUp {
        ifname: ifname.to_string(),
        source,
    };
    let flags = link_flags(ifname).map_err(err)?;
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(err)?;
    let mut req = ifreq_for(ifname).map_err(err)?;
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the name and flags from `req`, a valid ifreq that outlives
    // the call; `sock` is an open socket.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) };
    Errno::result(rc).map(drop).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = delete(&self.0);
        }
    }

    fn ns_inode(path: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().ino()
    }

    #[test]
    fn create_enter_and_delete_a_namespace_with_lo_up() {
        if !is_root() {
            eprintln!("skipping: needs root");
            return;
        }
        let path = pod_netns_path(&format!("test-{}", uuid::Uuid::new_v4()));
        let _cleanup = Cleanup(path.clone());
        create(&path).unwrap();
        assert!(matches!(create(&path), Err(NetnsError::Exists { .. })));
        let before = ns_inode("/proc/thread-self/ns/net");
        {
            let _guard = NetnsGuard::enter(&path).unwrap();
            assert_ne!(ns_inode("/proc/thread-self/ns/net"), before);
            let flags = link_flags("lo").unwrap();
            assert!(flags & libc::IFF_UP as libc::c_short != 0, "lo is down");
            assert!(link_flags("eth0").is_err(), "a new namespace has only lo");
        }
        assert_eq!(ns_inode("/proc/thread-self/ns/net"), before);
        delete(&path).unwrap();
        assert!(!path.exists());
        delete(&path).unwrap();
    }

    /// A veth whose inner end is in a namespace: deleting the namespace's interfaces removes
    /// the host end at once (deleting the namespace alone leaves that to the kernel, later).
    #[test]
    fn deleting_a_namespaces_interfaces_removes_their_host_ends_now() {
        if !is_root() {
            eprintln!("skipping: needs root");
            return;
        }
        let id = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let path = pod_netns_path(&format!("test-{id}"));
        let host = format!("vt{id}");
        let _cleanup = Cleanup(path.clone());
        struct DelLink<'a>(&'a str);
        impl Drop for DelLink<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("ip")
                    .args(["link", "del", "dev", self.0])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let _link = DelLink(&host);
        create(&path).unwrap();
        let ns = path.file_name().unwrap().to_str().unwrap();
        let ok = std::process::Command::new("ip")
            .args(["link", "add", &host, "type", "veth", "peer", "name", "eth0"])
            .args(["netns", ns])
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip link add");
        assert!(link_flags(&host).is_ok());
        delete_interfaces(&path).unwrap();
        assert_eq!(link_flags(&host).unwrap_err(), Errno::ENODEV);
        {
            let _inside = NetnsGuard::enter(&path).unwrap();
            assert!(link_flags("lo").is_ok(), "lo stays");
        }
        delete(&path).unwrap();
        assert!(
            delete_interfaces(&path).is_err(),
            "no namespace, nothing entered"
        );
    }

    #[test]
    fn interface_names_are_checked() {
        assert_eq!(ifreq_for("").unwrap_err(), Errno::EINVAL);
        assert_eq!(ifreq_for("a-very-long-ifname").unwrap_err(), Errno::EINVAL);
    }
}
