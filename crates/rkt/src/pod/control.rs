//! Acting on a running pod from outside: `rkt stop` and `rkt status --wait`.
//!
//! A pod is `running` from the moment its runner creates it, while the runner still sets up
//! its networks and before there is an init to signal. `rkt stop` of such a pod signals the
//! runner itself (found as the holder of the pod's lock in `/proc/locks`): the runner
//! abandons the start — the plugin it runs is let finish for a moment, then killed with its
//! children; a start still queued for its turn gives up — and tears down what it set up.

use std::path::Path;
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
    #[error("pod {uuid} has no init and no runner to stop (gc or rm is releasing it)")]
    NoInit { uuid: String },
    #[error("cannot send {signal} to pod {uuid} (init PID {pid})")]
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
    // The recorded PID must still be the pod's init (not a reused PID after it ended).
    let init = status.record.pid.filter(|pid| is_pod_init(*pid, &pod.uuid));
    let (pid, signal) = match (init, force) {
        (Some(pid), false) => (pid, Signal::SIGTERM),
        (Some(pid), true) => (pid, Signal::SIGKILL),
        // Starting (or, after its app ended, tearing down): the runner aborts the start on
        // SIGTERM, also for --force (killing it would leave the teardown to gc).
        (None, _) => {
            // Only a runner: gc or rm releasing a pod also hold its lock, and must finish.
            let runner = lock_holder(&pod.dir)
                .filter(|pid| is_runner(*pid))
                .ok_or_else(|| StopError::NoInit {
                    uuid: pod.uuid.clone(),
                })?;
            (runner, Signal::SIGTERM)
        }
    };
    kill(Pid::from_raw(pid), signal).map_err(|source| StopError::Kill {
        uuid: pod.uuid.clone(),
        pid,
        signal,
        source,
    })
}

/// The process holding the exclusive `flock` on `dir` (a pod's runner), from `/proc/locks`,
/// confirmed by finding `dir` among its open files (so a lock line of another file with
/// the same inode number on another device is not taken for it).
fn lock_holder(dir: &Path) -> Option<i32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks
        .lines()
        .filter_map(|line| parse_lock_line(line, meta.ino()))
        .find(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten().any(|fd| {
                    std::fs::metadata(fd.path())
                        .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
                })
            })
        })
}

/// The commands whose processes hold a pod as its runner: `rkt run`, `rkt run-prepared`,
/// `rkt app sandbox` (the words `app sandbox`, detached or not) and rkt-cri's
/// `sandbox-runner`, which holds a CRI pod sandbox (`crates/cri/src/runner.rs`). gc and rm,
/// which hold a pod's lock while they release it, are none of these.
pub const RUNNER_COMMANDS: [&[&str]; 4] = [
    &["run"],
    &["run-prepared"],
    &["app", "sandbox"],
    &["sandbox-runner"],
];

/// Whether process `pid` is a pod's runner: its command line has one of
/// [`RUNNER_COMMANDS`] as whole, consecutive arguments.
fn is_runner(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| names_runner(&cmdline.split(|b| *b == 0).collect::<Vec<_>>()))
}

/// Whether the arguments `args` name one of [`RUNNER_COMMANDS`].
fn names_runner(args: &[&[u8]]) -> bool {
    RUNNER_COMMANDS.iter().any(|words| {
        args.windows(words.len())
            .any(|w| w.iter().zip(words.iter()).all(|(a, b)| *a == b.as_bytes()))
    })
}

/// The PID of a granted exclusive `FLOCK` line of `/proc/locks` on inode `ino`
/// (`1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF`; waiters' lines carry `->`).
fn parse_lock_line(line: &str, ino: u64) -> Option<i32> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    match fields.as_slice() {
        [_, "FLOCK", _, "WRITE", pid, dev_ino, ..] => {
            let line_ino: u64 = dev_ino.rsplit(':').next()?.parse().ok()?;
            (line_ino == ino).then(|| pid.parse().ok()).flatten()
        }
        _ => None,
    }
}

/// Whether host process `pid` is pod `uuid`'s init: PID 1 of a PID namespace below ours
/// (its `NSpid` line in `/proc/<pid>/status` ends in 1), or, for a host-PID sandbox, rkt's
/// stage for that pod (a subreaper in our namespace, `stage1-init ... --pod UUID`).
pub fn is_pod_init(pid: i32, uuid: &str) -> bool {
    let ids = crate::procfs::ns_pids(pid);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    (is_stage_of(&cmdline, uuid) && ids.len() == 1) || (ids.len() >= 2 && ids.last() == Some(&1))
}

/// Whether `cmdline` (NUL-separated) is pod `uuid`'s stage: `rkt stage1-init ... --pod UUID`.
fn is_stage_of(cmdline: &[u8], uuid: &str) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let pod = crate::stage::init::POD_UUID.as_bytes();
    args.get(1) == Some(&crate::stage::INIT_COMMAND.as_bytes())
        && args
            .windows(2)
            .any(|w| w[0] == pod && w[1] == uuid.as_bytes())
}

/// Waits until the pod is no longer prepared or running (its runner released it), or until
/// `timeout`; returns whether it ended.
pub fn wait_exited(pod: &Pod, timeout: Option<Duration>) -> Result<bool, PodError> {
    let deadline = timeout.map(|t| Instant::now() + t);
    // A pod told to stop usually ends within tens of milliseconds (its network's teardown):
    // look again after 1 ms, then twice as long each time up to 50 ms, rather than every
    // 100 ms (rkt-cri's StopPodSandbox waited 100 ms for nearly every pod).
    let mut pause = Duration::from_millis(1);
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
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// What [`wait_ready`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// The pod runs its app: state `running` with its init's PID recorded.
    Ready,
    /// The pod ended (or went away) first; its state then.
    Ended(State),
    /// The timeout passed first.
    TimedOut,
}

/// Waits until the pod runs its app (state `running`, init PID known), until it ends, or
/// until `timeout`.
pub fn wait_ready(pod: &Pod, timeout: Option<Duration>) -> Result<Readiness, PodError> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        match PodStatus::read(pod) {
            Ok(status) => match status.state {
                State::Running if status.record.pid.is_some() => return Ok(Readiness::Ready),
                State::Exited | State::Garbage => return Ok(Readiness::Ended(status.state)),
                _ => {}
            },
            Err(e) if e.is_gone() => return Ok(Readiness::Ended(State::Garbage)),
            Err(e) => return Err(e),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Readiness::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::{App, PodState, PodStore};

    #[test]
    fn runners_are_known_by_their_command_words() {
        let args = |line: &'static str| -> Vec<&'static [u8]> {
            line.split(' ').map(str::as_bytes).collect()
        };
        for runner in [
            "rkt --dir=/d run --net=none -- true",
            "rkt run-prepared 1234",
            "rkt --dir=/d app sandbox --net=default",
            "/proc/self/exe sandbox-runner {}",
        ] {
            assert!(names_runner(&args(runner)), "{runner}");
        }
        for other in [
            "rkt gc --grace-period=0s",
            "rkt rm 1234",
            "rkt --dir=/run app rm 1234 --app=sandbox",
            "rkt app rm 1234 --app sandbox",
        ] {
            assert!(!names_runner(&args(other)), "{other}");
        }
    }

    #[test]
    fn stop_refuses_pods_that_do_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let app = App::new("a", ["a"]);
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
    fn lock_lines_name_the_holder_of_a_granted_exclusive_flock() {
        assert_eq!(
            parse_lock_line("1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF", 1234),
            Some(4242)
        );
        assert_eq!(
            parse_lock_line("1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF", 99),
            None
        );
        assert_eq!(
            parse_lock_line("1: -> FLOCK  ADVISORY  WRITE 77 08:01:1234 0 EOF", 1234),
            None
        );
        assert_eq!(
            parse_lock_line("2: POSIX  ADVISORY  WRITE 4242 08:01:1234 0 EOF", 1234),
            None
        );
        assert_eq!(
            parse_lock_line("3: FLOCK  ADVISORY  READ 4242 08:01:1234 0 EOF", 1234),
            None
        );
    }

    /// This process, holding a pod's lock, is found as its holder.
    #[test]
    fn the_holder_of_a_pod_lock_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(lock_holder(tmp.path()), None);
        let _lock = PodLock::try_lock(tmp.path(), true).unwrap().unwrap();
        assert_eq!(lock_holder(tmp.path()), Some(std::process::id() as i32));
    }

    #[test]
    fn only_pid_namespace_inits_and_the_pods_stage_count_as_pod_inits() {
        let uuid = "7f1c0b5e-0000-4000-8000-000000000000";
        assert!(!is_pod_init(std::process::id() as i32, uuid));
        assert!(!is_pod_init(1, uuid));
        assert!(!is_pod_init(i32::MAX, uuid));
        // A stage's command line: the pod's own only.
        let stage = |pod: &str| format!("rkt\0stage1-init\0--args-fd\x003\0--pod\0{pod}\0");
        assert!(is_stage_of(stage(uuid).as_bytes(), uuid));
        assert!(!is_stage_of(stage("another").as_bytes(), uuid));
        assert!(!is_stage_of(b"rkt\0stage1-log\0--pod\0x\0", "x"));
        assert!(!is_stage_of(b"", uuid));
    }
}
