//! `rkt enter`: run a command inside a running pod's namespaces (network, mount, UTS, IPC
//! and PID of the pod's init) and root directory.
//!
//! Joining a mount namespace requires a single-threaded caller, which `rkt enter` is. The
//! PID namespace applies to children, so the command is spawned after joining. Before
//! spawning, `rkt enter` narrows itself as the pod's app was narrowed (capabilities, user
//! and groups, seccomp filter: [`crate::isolation::apply`]; the masked paths are the pod's
//! mount namespace's already), so the command inherits exactly the app's restrictions.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::process::Command;

use nix::errno::Errno;
use nix::sched::{setns, CloneFlags};
use nix::unistd::{chdir, chroot, fchdir};

use super::{exit_status_code, StageError};
use crate::isolation::Isolation;

/// Namespaces joined, in this order (mount last: it changes the root).
const NAMESPACES: [(&str, CloneFlags); 5] = [
    ("ipc", CloneFlags::CLONE_NEWIPC),
    ("uts", CloneFlags::CLONE_NEWUTS),
    ("net", CloneFlags::CLONE_NEWNET),
    ("pid", CloneFlags::CLONE_NEWPID),
    ("mnt", CloneFlags::CLONE_NEWNS),
];

/// The host PID of the init's child whose PID in the pod's namespace is `pod_pid` (an app
/// of a pod of several apps), from `/proc/<init>/task/<init>/children` and each child's
/// `NSpid`; `None` once it is gone.
pub fn app_host_pid(init_pid: i32, pod_pid: i32) -> Option<i32> {
    let children: Vec<i32> =
        match std::fs::read_to_string(format!("/proc/{init_pid}/task/{init_pid}/children")) {
            Ok(text) => text
                .split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect(),
            // A kernel without CONFIG_PROC_CHILDREN: every process whose parent it is.
            Err(_) => children_by_scan(init_pid),
        };
    children.into_iter().find(|child| {
        let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|ids| ids.split_whitespace().last())
            .and_then(|id| id.parse::<i32>().ok())
            == Some(pod_pid)
    })
}

/// The processes whose parent is `pid`, from each `/proc/<pid>/status`.
fn children_by_scan(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/status"))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .and_then(|p| p.trim().parse::<i32>().ok())
                == Some(pid)
        })
        .collect()
}

/// Runs `argv` in the namespaces of the process `init_pid` with `env`, restricted by
/// `isolation` (the pod's); returns its exit status.
pub fn enter(
    init_pid: i32,
    argv: &[String],
    env: &[(OsString, OsString)],
    isolation: &Isolation,
) -> Result<i32, StageError> {
    // Compiled before joining anything, so that a failure leaves the pod untouched.
    let prepared = isolation.prepare()?;
    let fail = |what: String, source: Errno| StageError::Enter {
        pid: init_pid,
        what,
        source,
    };
    let open = |name: &str| {
        let path = format!("/proc/{init_pid}/{name}");
        File::open(&path).map_err(|e| {
            fail(
                format!("open {path}"),
                Errno::from_raw(e.raw_os_error().unwrap_or(0)),
            )
        })
    };
    let root = open("root")?;
    let namespaces = NAMESPACES
        .iter()
        .map(|(name, flag)| open(&format!("ns/{name}")).map(|f| (*name, *flag, f)))
        .collect::<Result<Vec<_>, _>>()?;
    let user = isolation.user_ns.map(|_| open("ns/user")).transpose()?;
    for (name, flag, file) in &namespaces {
        setns(file.as_fd(), *flag).map_err(|e| fail(format!("join its {name} namespace"), e))?;
    }
    fchdir(root.as_raw_fd()).map_err(|e| fail("change to its root".into(), e))?;
    chroot(".").map_err(|e| fail("chroot to its root".into(), e))?;
    chdir("/").map_err(|e| fail("change directory to /".into(), e))?;
    if let Some(user) = &user {
        // Last, as the init did: the other namespaces belong to the host's user namespace.
        setns(user.as_fd(), CloneFlags::CLONE_NEWUSER)
            .map_err(|e| fail("join its user namespace".into(), e))?;
        crate::isolation::user_ns::become_root()?;
    }
    crate::isolation::apply(&crate::isolation::syscall::Linux, &prepared)?;

    let (program, args) = argv.split_first().ok_or(StageError::NoCommand)?;
    let status = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .status()
        .map_err(|source| StageError::EnterSpawn {
            program: program.clone(),
            source,
        })?;
    Ok(exit_status_code(status))
}
