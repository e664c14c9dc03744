//! The init of a pod of several apps.
//!
//! The init (PID 1 of the pod) stays in the stage's mount namespace and forks one process
//! per app. Each app's process makes a mount namespace of its own (a slave copy of the
//! stage's), mounts its root there as a pod of one app would ([`super::init`]), enters it,
//! and tells the init it is ready on a pipe of its own. Only when every app is ready does
//! the init let them all execute their programs, so an app that cannot start fails the
//! whole pod before any app runs; the init then kills the others and exits with
//! [`SETUP_FAILED`].
//!
//! Once they run, the init forwards signals to every app, reaps every process of the pod,
//! reports each app's exit status to the runner (`exit INDEX STATUS` lines on the exits
//! pipe), and ends the pod as the [`ExitPolicy`] says: when it calls for the others to
//! stop, they get SIGTERM, and SIGKILL after [`STOP_GRACE`].

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe2, ForkResult, Pid};

use super::app::{exit_code, own_root, read_byte, report, PreparedApp, SETUP_FAILED};
use super::{signals, StageError};
use crate::isolation;
use crate::isolation::user_ns::IdMap;
use crate::podstore::{ExitPolicy, Volume};

/// How long the apps a policy stops have between SIGTERM and SIGKILL: as long as those of a
/// pod being stopped.
pub use super::signals::STOP_GRACE;

/// What the init needs to start the apps: the pod's directory (its `/etc` files) and
/// whether the pod has a network namespace of its own (its `/sys`).
pub(super) struct PodContext<'a> {
    pub pod_dir: &'a Path,
    pub own_netns: bool,
    /// The pod's volumes: each app mounts those its `--mount`s name.
    pub volumes: &'a [Volume],
    /// `--private-users`: the pod's host ids. Each app gets a user namespace of its own,
    /// all mapped to this range, so that the apps' files have the same owners...
    pub user_ns: Option<IdMap>,
    /// ... unless the pod's network namespace belongs to the pod's user namespace (made
    /// with it by the runner): then every app joins that one, already mapped.
    pub join_user_ns: Option<std::os::fd::RawFd>,
}

/// PID 1 of a pod of several apps: starts them together, then reaps them under `policy`;
/// returns the pod's exit status. It closes its copy of the status pipe once every app
/// has been let go, so that the runner sees end-of-file when they have been executed.
pub(super) fn pod_init(
    pod: &PodContext,
    apps: Vec<PreparedApp>,
    policy: ExitPolicy,
    exits: Option<File>,
    status: &mut Option<File>,
) -> Result<i32, StageError> {
    let sys = |what: &'static str| {
        let path = pod.pod_dir.to_path_buf();
        move |source| StageError::Sys { what, path, source }
    };
    let (go_read, go_write) = pipe2(OFlag::O_CLOEXEC).map_err(sys("create the start pipe of"))?;
    // Where the init writes the apps' id maps: a /proc of the pod's PID namespace, in the
    // stage's mount namespace (nothing mounted there reaches the host).
    let pod_proc = match (pod.user_ns, pod.join_user_ns) {
        (Some(_), None) => Some(pod_proc()?),
        _ => None,
    };
    let names: Vec<String> = apps.iter().map(|a| a.app.name.clone()).collect();
    let mut started: Vec<(Pid, OwnedFd)> = Vec::with_capacity(apps.len());
    let app_err = |name: &str, what: &'static str| {
        let (name, path) = (name.to_string(), pod.pod_dir.to_path_buf());
        move |source| StageError::App {
            name,
            source: Box::new(StageError::Sys { what, path, source }),
        }
    };
    // Until every app is forked and forwarded to (see `signals::block`).
    signals::block();
    for app in apps {
        let (ready_read, ready_write) = match pipe2(OFlag::O_CLOEXEC) {
            Ok(ends) => ends,
            Err(e) => {
                kill_all(started.iter().map(|(pid, _)| *pid), Signal::SIGKILL);
                signals::unblock();
                return Err(app_err(&app.app.name, "create the ready pipe in")(e));
            }
        };
        // SAFETY: the init is single-threaded (see the stage's module docs).
        match unsafe { fork() } {
            Err(e) => {
                kill_all(started.iter().map(|(pid, _)| *pid), Signal::SIGKILL);
                signals::unblock();
                return Err(app_err(&app.app.name, "fork the process of the app in")(e));
            }
            Ok(ForkResult::Child) => {
                // Only the init lets the apps go: end of file if it dies.
                drop((ready_read, go_write));
                app_process(pod, app, ready_write, &go_read, status)
            }
            Ok(ForkResult::Parent { child }) => {
                drop(ready_write);
                started.push((child, ready_read));
            }
        }
    }
    drop(go_read);
    let pids: Vec<Pid> = started.iter().map(|(pid, _)| *pid).collect();
    signals::forward_to_all(&pids.iter().map(|p| p.as_raw()).collect::<Vec<_>>());
    signals::unblock();

    // Every app ready (and its user namespace mapped), or the pod does not start.
    let mut not_ready = None;
    for (index, (pid, ready)) in started.iter().enumerate() {
        if !matches!(read_byte(ready), Ok(1)) {
            not_ready = Some((index, false));
            break;
        }
        if let (Some(map), Some(proc)) = (&pod.user_ns, &pod_proc) {
            if let Err(e) = isolation::user_ns::write_maps(proc, *pid, map) {
                if let Some(status) = status.as_mut() {
                    let name = names[index].clone();
                    let source = Box::new(StageError::Isolation(e));
                    report(status, &StageError::App { name, source });
                }
                not_ready = Some((index, true));
                break;
            }
        }
    }
    if let Some((index, reported)) = not_ready {
        kill_all(pids.iter().copied(), Signal::SIGKILL);
        let failed = pids[index];
        for pid in &pids {
            let ended = wait(*pid);
            // An app that could not report its own failure (killed before it was ready).
            if *pid == failed && !reported {
                if let (Some(WaitStatus::Signaled(_, signal, _)), Some(status)) =
                    (ended, status.as_mut())
                {
                    let err = StageError::App {
                        name: names[index].clone(),
                        source: Box::new(StageError::Reported(format!(
                            "killed by {signal} before it ran"
                        ))),
                    };
                    report(status, &err);
                }
            }
        }
        return Ok(SETUP_FAILED);
    }
    if let Some(status) = status.as_mut() {
        // The runner records each app's PID in the pod (for `rkt enter --app`).
        let lines: String = pids
            .iter()
            .enumerate()
            .map(|(index, pid)| format!("app {index} {pid}\n"))
            .collect();
        let _ = status.write_all(lines.as_bytes());
    }
    let _ = nix::unistd::write(&go_write, &vec![b'g'; pids.len()]);
    drop(status.take());
    Ok(reap(&pids, policy, exits))
}

/// The process of one app: its own mount namespace and root, then, once the init lets it
/// go, the app's program. Never returns.
fn app_process(
    pod: &PodContext,
    mut app: PreparedApp,
    ready: OwnedFd,
    go: &OwnedFd,
    status: &mut Option<File>,
) -> ! {
    // Default dispositions, then unblocked: a stop that arrived since the fork, or arrives
    // before the app runs, ends this process.
    signals::reset_for_exec();
    let name = app.app.name.clone();
    let prepared = (|| {
        let plan = own_root(pod.pod_dir, &mut app, pod.own_netns, pod.volumes)?;
        match (pod.user_ns, pod.join_user_ns) {
            // Last, as for a pod of one app: the pod's, or one the init maps once this app
            // is ready.
            (Some(_), Some(fd)) => isolation::user_ns::join(fd).map_err(StageError::Isolation)?,
            (Some(_), None) => isolation::user_ns::unshare().map_err(StageError::Isolation)?,
            _ => {}
        }
        Ok(plan)
    })();
    let err = match prepared {
        Ok(plan) => {
            let _ = nix::unistd::write(&ready, b"r");
            drop(ready);
            if !matches!(read_byte(go), Ok(1)) {
                // The pod does not start (another app failed): nothing to report.
                // SAFETY: _exit(2) ends this child without running the init's exit handlers.
                unsafe { libc::_exit(SETUP_FAILED) }
            }
            match pod.user_ns.map(|_| isolation::user_ns::become_root()) {
                Some(Err(e)) => StageError::Isolation(e),
                _ => plan.exec(&app.isolation),
            }
        }
        Err(err) => err,
    };
    if let Some(status) = status.as_mut() {
        let err = StageError::App {
            name,
            source: Box::new(err),
        };
        report(status, &err);
    }
    // SAFETY: as above.
    unsafe { libc::_exit(SETUP_FAILED) }
}

/// Mounts a `/proc` of the pod's PID namespace over the init's `/proc` and opens it.
fn pod_proc() -> Result<OwnedFd, StageError> {
    let target = Path::new("/proc");
    nix::mount::mount(
        Some("proc"),
        target,
        Some("proc"),
        nix::mount::MsFlags::MS_NOSUID
            | nix::mount::MsFlags::MS_NODEV
            | nix::mount::MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|source| StageError::Mount {
        target: target.to_path_buf(),
        source,
    })?;
    isolation::user_ns::open_host_proc().map_err(StageError::Isolation)
}

fn kill_all(pids: impl IntoIterator<Item = Pid>, signal: Signal) {
    for pid in pids {
        let _ = kill(pid, signal);
    }
}

/// Waits for `pid` to end; its final wait status.
fn wait(pid: Pid) -> Option<WaitStatus> {
    loop {
        match waitpid(pid, None) {
            Ok(status) if exit_code(status).is_some() => return Some(status),
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
}

/// What the policy makes of the apps' exits so far.
#[derive(Debug, Default)]
struct Outcome {
    /// The pod's status, once an exit decided it.
    decided: Option<i32>,
    /// The first failure (`untilAll`).
    first_failure: Option<i32>,
}

impl Outcome {
    /// Takes an app's exit `code` into account; true when the other apps must stop.
    fn on_exit(&mut self, policy: ExitPolicy, code: i32) -> bool {
        if self.decided.is_some() {
            return false;
        }
        match policy {
            ExitPolicy::OnAny => {
                self.decided = Some(code);
                true
            }
            ExitPolicy::OnAnyFailure if code != 0 => {
                self.decided = Some(code);
                true
            }
            ExitPolicy::OnAnyFailure => false,
            ExitPolicy::UntilAll => {
                if code != 0 && self.first_failure.is_none() {
                    self.first_failure = Some(code);
                }
                false
            }
        }
    }

    fn status(&self) -> i32 {
        self.decided.or(self.first_failure).unwrap_or(0)
    }
}

/// As PID 1: reaps every process until each app has ended, stopping the others when the
/// policy says so; reports each app's status on `exits`. Returns the pod's status.
fn reap(apps: &[Pid], policy: ExitPolicy, mut exits: Option<File>) -> i32 {
    let mut running: Vec<Option<Pid>> = apps.iter().copied().map(Some).collect();
    let mut outcome = Outcome::default();
    let mut kill_at: Option<Instant> = None;
    while running.iter().any(Option::is_some) {
        // Blocking until a stop is under way; then polling, to send SIGKILL on time.
        let flags = kill_at.map(|_| WaitPidFlag::WNOHANG);
        let status = match waitpid(None::<Pid>, flags) {
            Ok(WaitStatus::StillAlive) => {
                if kill_at.is_some_and(|at| Instant::now() >= at) {
                    kill_all(running.iter().flatten().copied(), Signal::SIGKILL);
                    kill_at = None;
                } else {
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            Ok(status) => status,
            Err(Errno::EINTR) => continue,
            Err(_) => return SETUP_FAILED,
        };
        let (Some(pid), Some(code)) = (status.pid(), exit_code(status)) else {
            continue;
        };
        let Some(index) = running.iter().position(|p| *p == Some(pid)) else {
            continue; // a process the app left behind
        };
        running[index] = None;
        signals::forget(pid.as_raw());
        if let Some(exits) = exits.as_mut() {
            // One write(2) of less than PIPE_BUF bytes per app.
            let _ = exits.write_all(format!("exit {index} {code}\n").as_bytes());
        }
        if outcome.on_exit(policy, code) {
            kill_all(running.iter().flatten().copied(), Signal::SIGTERM);
            kill_at = Some(Instant::now() + STOP_GRACE);
        }
    }
    drop(exits.take());
    outcome.status()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: ExitPolicy, codes: &[i32]) -> (i32, Vec<bool>) {
        let mut outcome = Outcome::default();
        let stops = codes.iter().map(|c| outcome.on_exit(policy, *c)).collect();
        (outcome.status(), stops)
    }

    #[test]
    fn on_any_failure_stops_the_pod_at_the_first_failure() {
        assert_eq!(
            run(ExitPolicy::OnAnyFailure, &[0, 0]),
            (0, vec![false, false])
        );
        // The others, stopped, end with 143: the first failure is the pod's status.
        assert_eq!(
            run(ExitPolicy::OnAnyFailure, &[0, 3, 143]),
            (3, vec![false, true, false])
        );
    }

    #[test]
    fn on_any_stops_the_pod_at_the_first_exit() {
        assert_eq!(run(ExitPolicy::OnAny, &[0, 143]), (0, vec![true, false]));
        assert_eq!(run(ExitPolicy::OnAny, &[5, 0]), (5, vec![true, false]));
    }

    #[test]
    fn until_all_waits_for_every_app_and_keeps_the_first_failure() {
        assert_eq!(
            run(ExitPolicy::UntilAll, &[0, 4, 7]),
            (4, vec![false, false, false])
        );
        assert_eq!(run(ExitPolicy::UntilAll, &[0, 0]), (0, vec![false, false]));
    }
}
