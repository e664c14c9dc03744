//! Acting on a running pod from outside: `rkt stop` and `rkt status --wait`.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::lock::PodLock;
use super::state::State;
use super::status::PodStatus;
use super::store::Pod;
use super::PodError;

/// Why a pod could not be stopped.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error("pod {uuid} is not running (it is {state})")]
    NotRunning { uuid: String, state: State },
    #[error("pod {uuid} has no init right now (starting or stopping); try again")]
    NoInit { uuid: String },
    #[error("cannot send {signal} to pod {uuid} (init PID {pid}): {source}")]
    Kill {
        uuid: String,
        pid: i32,
        signal: Signal,
        source: nix::errno::Errno,
    },
}

/// Sends SIGTERM (SIGKILL with `force`) to the pod's init, which passes SIGTERM on to the
/// app; SIGKILL ends the whole pod at once. The runner then tears the pod down.
pub fn stop(pod: &Pod, force: bool) -> Result<(), StopError> {
    let status = PodStatus::read(pod)?;
    if status.state != State::Running || !PodLock::is_held(&pod.dir)? {
        return Err(StopError::NotRunning {
            uuid: pod.uuid.clone(),
            state: status.state,
        });
    }
    let pid = status.record.pid.ok_or_else(|| StopError::NoInit {
        uuid: pod.uuid.clone(),
    })?;
    // The recorded PID must still be the pod's init (not a reused PID after it ended).
    if !is_pid_namespace_init(pid) {
        return Err(StopError::NoInit {
            uuid: pod.uuid.clone(),
        });
    }
    let signal = if force {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    kill(Pid::from_raw(pid), signal).map_err(|source| StopError::Kill {
        uuid: pod.uuid.clone(),
        pid,
        signal,
        source,
    })
}

/// Whether host process `pid` is PID 1 of a PID namespace below ours, as a pod's init is
/// (its `NSpid` line in `/proc/<pid>/status` ends in 1).
pub fn is_pid_namespace_init(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|ids| {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            ids.len() >= 2 && ids.last() == Some(&"1")
        })
        .unwrap_or(false)
}

/// Waits until the pod is no longer prepared or running (its runner released it), or until
/// `timeout`; returns whether it ended.
pub fn wait_exited(pod: &Pod, timeout: Option<Duration>) -> Result<bool, PodError> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        match PodStatus::read(pod) {
            Ok(status) if matches!(status.state, State::Exited | State::Garbage) => {
                return Ok(true)
            }
            Ok(_) => {}
            Err(e) if e.is_gone() => return Ok(true),
            Err(e) => return Err(e),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::{App, PodState, PodStore};

    #[test]
    fn stop_refuses_pods_that_do_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let app = App {
            name: "a".into(),
            exec: vec!["a".into()],
            env: vec![],
            inherit_env: false,
            rootfs: None,
            image: None,
            user_annotations: Default::default(),
            user_labels: Default::default(),
        };
        let (pod, lock) = store.create(app, &PodState::new(State::Prepared)).unwrap();
        drop(lock);
        assert!(matches!(
            stop(&pod, false),
            Err(StopError::NotRunning {
                state: State::Prepared,
                ..
            })
        ));
        assert!(!wait_exited(&pod, Some(Duration::from_millis(10))).unwrap());
    }

    #[test]
    fn only_pid_namespace_inits_count_as_pod_inits() {
        assert!(!is_pid_namespace_init(std::process::id() as i32));
        assert!(!is_pid_namespace_init(1));
        assert!(!is_pid_namespace_init(i32::MAX));
    }
}
