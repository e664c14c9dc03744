//! `--private-users`: the pod's app in a user namespace of its own, whose root (and every
//! other id up to 65535) is an unprivileged range of host ids.
//!
//! Owns the pod's range ([`IdMap`], chosen by [`allocate`] when the pod starts), the check
//! that this host can create user namespaces ([`check_available`]), the mapping files
//! written from outside ([`write_maps`]), joining the namespace ([`join`]) and the switch
//! to its root ([`become_root`]).
//!
//! With a network namespace of the pod's own, the runner creates the user namespace with it
//! ([`crate::netns::create_owned`]), so that the pod's root holds over its own network the
//! capabilities it keeps (a raw socket for `ping`), while host root keeps every capability
//! over both (CNI plugins act on the network namespace from the host side as before); the
//! pod's init, or each app of several, joins it last, once its mounts are made. With
//! `--net=host` the init creates the user namespace itself, last, and the stage (still host
//! root) writes its maps. Either way the mount, UTS, IPC and PID namespaces stay owned by
//! the host's user namespace, out of the app's reach, and the maps are written by a process
//! privileged in the parent namespace, which need not deny `setgroups`, so the app's
//! `--supplementary-gids` keep working.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::unistd::{setgroups, setresgid, setresuid, Gid, Pid, Uid};
use serde::{Deserialize, Serialize};

use super::IsolationError;

/// Ids per pod: 0–65535 inside, as rkt shifted.
pub const SIZE: u32 = 65536;

/// The first and last slot a pod's range may start at (`slot * SIZE`): from host id 2^24,
/// above the ranges `/etc/subuid` usually hands out (100000 on) and any real user, to
/// 2^31 - 1, the last id that no tool takes for a negative number.
const FIRST_SLOT: u32 = 256;
const SLOTS: u32 = (1 << 15) - FIRST_SLOT;

/// The kernel's limit on user namespaces; 0 turns them off.
pub const MAX_USER_NAMESPACES: &str = "/proc/sys/user/max_user_namespaces";

/// The pod's ids: inside 0..size are host `host_base..host_base + size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdMap {
    pub host_base: u32,
    pub size: u32,
}

impl IdMap {
    /// The line for `uid_map` and `gid_map`.
    pub fn map_line(&self) -> String {
        format!("0 {} {}\n", self.host_base, self.size)
    }

    fn overlaps(&self, other: &IdMap) -> bool {
        self.host_base < other.host_base + other.size
            && other.host_base < self.host_base + self.size
    }
}

/// The range of pod `uuid`: a slot derived from the UUID (FNV-1a), moved on to the next free
/// one while it overlaps a range in `in_use` (the running pods'), so that two pods never
/// share host ids.
pub fn allocate(uuid: &str, in_use: &[IdMap]) -> IdMap {
    let hash = uuid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let start = (hash % u64::from(SLOTS)) as u32;
    let at = |i: u32| IdMap {
        host_base: (FIRST_SLOT + (start + i) % SLOTS) * SIZE,
        size: SIZE,
    };
    (0..SLOTS)
        .map(at)
        .find(|map| !in_use.iter().any(|used| used.overlaps(map)))
        // Every slot taken (32512 running pods): share the first; still never host root.
        .unwrap_or_else(|| at(0))
}

/// Fails with a message saying how to turn user namespaces on when the kernel's limit
/// (`limit_file`, normally [`MAX_USER_NAMESPACES`]) is 0.
pub fn check_available(limit_file: &Path) -> Result<(), IsolationError> {
    let text = match std::fs::read_to_string(limit_file) {
        Ok(text) => text,
        // A kernel without the file has no limit to check (or no user namespaces: then
        // creating one fails, with its own error).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(IsolationError::Io {
                what: "read",
                path: limit_file.to_path_buf(),
                source,
            })
        }
    };
    if text.trim() == "0" {
        return Err(IsolationError::Unsupported {
            what: format!(
                "--private-users: user namespaces are disabled on this host ({} is 0); \
                 set it above 0 (sysctl user.max_user_namespaces=15000) or run without \
                 --private-users",
                limit_file.display()
            ),
        });
    }
    Ok(())
}

/// Creates the calling process's user namespace (it must be single-threaded).
pub fn unshare() -> Result<(), IsolationError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER).map_err(|source| {
        let hint = match source {
            Errno::ENOSPC => format!(" (the limit in {MAX_USER_NAMESPACES} is reached)"),
            Errno::EPERM | Errno::EINVAL => {
                " (user namespaces may be disabled or this process is in a chroot)".into()
            }
            _ => String::new(),
        };
        IsolationError::Unsupported {
            what: format!("--private-users: cannot create a user namespace: {source}{hint}"),
        }
    })
}

/// Joins the user namespace open on `fd` (the pod's, which owns its network namespace:
/// already mapped); the caller must be single-threaded.
pub fn join(fd: std::os::fd::RawFd) -> Result<(), IsolationError> {
    // SAFETY: the descriptor is only borrowed for the call.
    let ns = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWUSER).map_err(|source| {
        IsolationError::Unsupported {
            what: format!("--private-users: cannot join the pod's user namespace: {source}"),
        }
    })
}

/// The host's `/proc`, opened before the pod's init mounts its own over it in the mount
/// namespace the stage shares with it: the init's maps are looked up beneath this one.
pub fn open_host_proc() -> Result<OwnedFd, IsolationError> {
    let path = Path::new("/proc");
    let fd = nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|source| IsolationError::Io {
        what: "open",
        path: path.to_path_buf(),
        source: source.into(),
    })?;
    // SAFETY: open(2) just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Writes `map` as the uid and gid map of process `pid` (looked up in `host_proc`), which
/// has just created its user namespace; called by a process privileged in the parent
/// namespace.
pub fn write_maps(host_proc: &OwnedFd, pid: Pid, map: &IdMap) -> Result<(), IsolationError> {
    for file in ["uid_map", "gid_map"] {
        let rel = format!("{pid}/{file}");
        let path = Path::new("/proc").join(&rel);
        let failed = |source: std::io::Error| IsolationError::Io {
            what: "write the pod's id map to",
            path: path.clone(),
            source,
        };
        let fd = nix::fcntl::openat(
            Some(host_proc.as_raw_fd()),
            rel.as_str(),
            OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| failed(e.into()))?;
        // SAFETY: openat(2) just returned this descriptor; nothing else owns it.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        // One write(2): the kernel takes a map in a single write only.
        file.write_all(map.map_line().as_bytes()).map_err(failed)?;
    }
    Ok(())
}

/// The pod's network sysctl that lets its root bind ports below 1024 without depending on
/// who owns the network namespace, as rootless podman does. (Its ICMP echo sockets come
/// from [`ping_group_range`], set when the namespace is made.)
const NET_SYSCTLS: [(&str, &str); 1] = [("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0")];

/// `net.ipv4.ping_group_range` for a pod's own network namespace, written from the host's
/// user namespace: the groups that may open ICMP echo sockets (`ping` without a raw socket).
/// In a user namespace of its own (`user_ns`), the pod's mapped groups (its host range,
/// which reads `0 <size-1>` inside); otherwise every group, as Docker sets since 20.10.
pub fn ping_group_range(user_ns: Option<&IdMap>) -> String {
    match user_ns {
        Some(map) => format!("{} {}", map.host_base, map.host_base + (map.size - 1)),
        None => "0 2147483647".to_string(),
    }
}

/// Sets that sysctl (`NET_SYSCTLS`) in the caller's network namespace, which must be the
/// pod's own (never the host's: `--net=host` keeps the host's settings).
pub fn open_pod_network() -> Result<(), IsolationError> {
    for (file, value) in NET_SYSCTLS {
        std::fs::write(file, value).map_err(|source| IsolationError::Io {
            what: "set the pod's",
            path: file.into(),
            source,
        })?;
    }
    Ok(())
}

/// Makes the caller, inside a mapped user namespace, root of it with no supplementary
/// groups (the host's would show as nobody).
pub fn become_root() -> Result<(), IsolationError> {
    let failed = |source| IsolationError::SetIdentity {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        source,
    };
    setgroups(&[]).map_err(failed)?;
    let (root_gid, root_uid) = (Gid::from_raw(0), Uid::from_raw(0));
    setresgid(root_gid, root_gid, root_gid).map_err(failed)?;
    setresuid(root_uid, root_uid, root_uid).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ping_group_range_is_the_pods_mapped_groups_or_all() {
        let map = IdMap {
            host_base: 1 << 24,
            size: SIZE,
        };
        assert_eq!(ping_group_range(Some(&map)), "16777216 16842751");
        assert_eq!(ping_group_range(None), "0 2147483647");
    }

    #[test]
    fn a_pods_range_is_unprivileged_stable_and_skips_those_in_use() {
        let uuid = "6f1b6a7e-2f7e-4d1c-9a53-1f0e2d3c4b5a";
        let map = allocate(uuid, &[]);
        assert_eq!(map, allocate(uuid, &[]));
        assert_eq!(map.size, SIZE);
        assert_eq!(map.host_base % SIZE, 0);
        assert!(map.host_base >= 1 << 24);
        assert!(u64::from(map.host_base) + u64::from(map.size) <= 1 << 31);
        assert_eq!(map.map_line(), format!("0 {} 65536\n", map.host_base));
        let next = allocate(uuid, &[map]);
        assert_ne!(next, map);
        assert!(!next.overlaps(&map));
        // A range in use that only overlaps part of the slot also moves it on.
        let partial = IdMap {
            host_base: map.host_base + 100,
            size: 10,
        };
        assert!(!allocate(uuid, &[partial]).overlaps(&partial));
        // Another pod most likely lands elsewhere.
        assert_ne!(allocate("11111111-2222-4333-8444-555555555555", &[]), map);
    }

    #[test]
    fn a_zero_limit_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("rkt-userns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("max_user_namespaces");
        std::fs::write(&file, "0\n").unwrap();
        let e = check_available(&file).unwrap_err().to_string();
        assert!(e.contains("user namespaces are disabled"), "{e}");
        assert!(e.contains(&file.display().to_string()), "{e}");
        std::fs::write(&file, "15000\n").unwrap();
        check_available(&file).unwrap();
        check_available(&dir.join("absent")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
