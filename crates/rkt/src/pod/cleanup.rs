//! Releasing what a pod holds outside its directory: its networks (torn down from the pod's
//! own record, so it works after configuration or flags changed), its network namespace, and
//! an image pod's overlay mount.
//! Used by `rkt run` at exit, and by gc and rm for pods whose runner died. Every step is
//! tried; all failures are returned together. Releasing twice is fine.

use std::path::{Path, PathBuf};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::netns::{self, NetnsError};
use crate::networking::{self, NetError, PodNet};

use super::state::PodState;
use super::store::Pod;
use super::PodError;

/// One step of releasing a pod that failed.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error("pod {uuid}: {source}")]
    Network { uuid: String, source: NetError },
    #[error("pod {uuid}: {source}")]
    Netns { uuid: String, source: NetnsError },
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error("pod {uuid}: {source}")]
    Rootfs {
        uuid: String,
        source: crate::image_pod::rootfs::RootfsError,
    },
}

/// Tears down the networks recorded in `pod_dir`, then deletes the namespace at `netns`
/// (when a teardown failed, the interfaces in it first), then unmounts an image pod's
/// overlay root filesystem.
pub fn release(uuid: &str, pod_dir: &Path, netns: Option<&Path>) -> Vec<CleanupError> {
    let mut errors = Vec::new();
    let pod = PodNet {
        uuid,
        pod_dir,
        netns,
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
pub fn release_pod(pod: &Pod, state: &PodState) -> Vec<CleanupError> {
    if let (Some(pid), Some(netns)) = (state.pid, state.netns.as_deref()) {
        kill_stray_init(pid, netns);
    }
    release(&pod.uuid, &pod.dir, state.netns.as_deref())
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
