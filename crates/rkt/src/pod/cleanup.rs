//! Releasing what a pod holds outside its directory: its networks (torn down from the pod's
//! own record, so it works after configuration or flags changed), its network namespace,
//! its cgroup (the pids limit, `--memory`, `--cpu`) and an image pod's overlay mount.
//! Used by `rkt run` at exit, and by gc and rm for pods whose runner died (whose orphaned
//! plugins are killed first). Every step is
//! tried; all failures are returned together. Releasing twice is fine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::isolation::cgroups::PodCgroup;
use crate::netns::{self, NetnsError};
use crate::networking::{self, NetError, PodNet};

use super::state::PodState;
use super::store::Pod;
use super::PodError;

/// One step of releasing a pod that failed.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error("{}", super::about_pod(uuid, source))]
    Network { uuid: String, source: NetError },
    #[error("{}", super::about_pod(uuid, source))]
    Netns { uuid: String, source: NetnsError },
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error("{}", super::about_pod(uuid, source))]
    Cgroup {
        uuid: String,
        source: crate::isolation::IsolationError,
    },
    #[error("{}", super::about_pod(uuid, source))]
    Rootfs {
        uuid: String,
        source: crate::image_pod::rootfs::RootfsError,
    },
}

/// Tears down the networks recorded in `pod_dir`, then deletes the namespace at `netns`
/// (when a teardown failed, the interfaces in it first), removes the pod's cgroup at
/// `cgroup` (its record's place) and unmounts an image pod's overlay root filesystem. Each
/// plugin call may take `plugin_timeout`.
pub fn release(
    uuid: &str,
    pod_dir: &Path,
    netns: Option<&Path>,
    cgroup: &PodCgroup,
    plugin_timeout: Duration,
) -> Vec<CleanupError> {
    let mut errors = Vec::new();
    let pod = PodNet {
        uuid,
        pod_dir,
        netns,
        plugin_timeout,
    };
    if let Err(source) = networking::teardown(&pod) {
        errors.push(CleanupError::Network {
            uuid: uuid.to_string(),
            source,
        });
        // The namespace goes anyway (the retry DELs without it): take the interfaces the
        // plugins could not remove out now, rather than whenever the kernel frees it.
        if let Some(path) = netns {
            let _ = netns::delete_interfaces(path);
        }
    }
    if let Some(path) = netns {
        if let Err(source) = netns::delete(path) {
            errors.push(CleanupError::Netns {
                uuid: uuid.to_string(),
                source,
            });
        }
        // The last pod of a busy host takes the mount template with it. Not this pod's to
        // fail on: the next teardown or gc tries again.
        let _ = crate::mount_template::remove_if_unused();
    }
    // The pod's cgroup (every pod has one, for its pids limit).
    if let Err(source) = crate::isolation::cgroups::detect().remove(cgroup) {
        errors.push(CleanupError::Cgroup {
            uuid: uuid.to_string(),
            source,
        });
    }
    if let Err(source) = crate::image_pod::rootfs::release(pod_dir) {
        errors.push(CleanupError::Rootfs {
            uuid: uuid.to_string(),
            source,
        });
    }
    errors
}

/// [`release`] for a pod as its state records it. If the pod's init is somehow still alive
/// (its runner is gone; normally the init dies with it), it is killed first, which ends the
/// whole pod. The recorded PID is trusted only if that process is still in the pod's network
/// namespace (same nsfs inode), so a reused PID is never signalled.
///
/// A pod recorded `running` lost its runner, maybe in the middle of an ADD or a DEL whose
/// plugins still run (in process groups of their own): those groups are killed and awaited
/// first ([`kill_orphaned_plugins`]), so that no plugin of the pod writes a lease or a rule
/// after the DEL that releases them.
pub fn release_pod(pod: &Pod, state: &PodState, plugin_timeout: Duration) -> Vec<CleanupError> {
    if let (Some(pid), Some(netns)) = (state.pid, state.netns.as_deref()) {
        kill_stray_init(pid, netns);
    }
    if state.state == super::state::State::Running {
        kill_orphaned_plugins(&pod.uuid);
    }
    release(
        &pod.uuid,
        &pod.dir,
        state.netns.as_deref(),
        &state.pod_cgroup(&pod.uuid),
        plugin_timeout,
    )
}

/// Kills the process groups of every plugin still running for container `uuid` (found by
/// `CNI_CONTAINERID=<uuid>` in its environment, which plugins pass on to the IPAM plugins
/// they start), and waits, at most 10 s after the kill, until none of their members can run
/// again. They are first given [`cni::invoke::INTERRUPT_GRACE`] to end by themselves, as an
/// interrupted ADD gives its plugin: one killed between creating a record and writing it
/// leaves a record its DEL does not recognise.
pub fn kill_orphaned_plugins(uuid: &str) {
    use std::time::{Duration, Instant};
    let needle = format!("CNI_CONTAINERID={uuid}");
    let graced = Instant::now() + cni::invoke::INTERRUPT_GRACE;
    let mut groups = plugin_groups(&needle);
    while !groups.is_empty() && Instant::now() < graced {
        std::thread::sleep(Duration::from_millis(10));
        groups = plugin_groups(&needle);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !groups.is_empty() && Instant::now() < deadline {
        for pgid in groups {
            // Never our own group (a plugin is always the leader of a group of its own).
            if pgid > 1 && pgid != nix::unistd::getpgrp().as_raw() {
                let _ = nix::sys::signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
        groups = plugin_groups(&needle);
    }
}

/// The process groups of live (not zombie) processes whose environment holds `needle`.
fn plugin_groups(needle: &str) -> Vec<i32> {
    let mut groups = Vec::new();
    for pid in crate::procfs::pids() {
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            continue;
        }
        let stat = crate::procfs::Stat::of(pid);
        if let Some(pgrp) = stat.filter(|s| s.alive()).and_then(|s| s.pgrp()) {
            if !groups.contains(&pgrp) {
                groups.push(pgrp);
            }
        }
    }
    groups
}

fn kill_stray_init(pid: i32, netns: &Path) {
    if in_netns(pid, netns) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Whether process `pid` (not 1) is in the network namespace bind-mounted at `netns`.
fn in_netns(pid: i32, netns: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let proc_ns = PathBuf::from(format!("/proc/{pid}/ns/net"));
    match (std::fs::metadata(proc_ns), std::fs::metadata(netns)) {
        (Ok(a), Ok(b)) => pid > 1 && a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
