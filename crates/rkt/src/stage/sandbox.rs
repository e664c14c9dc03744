//! A sandbox's processes: its init, and the helper that starts one of its apps.
//!
//! A sandbox (`rkt app sandbox`) is a pod made without apps. Its init is PID 1 of the pod's
//! PID namespace, in the stage's mount namespace, as in a pod of several apps ([`init`]):
//! it reaps every process of the pod, reports each exit to the runner by PID on the exits
//! pipe (`exit-pid PID STATUS`, the PID in the pod's namespace), and on SIGTERM, SIGINT,
//! SIGHUP or SIGQUIT stops the pod: SIGTERM to every process in it, SIGKILL after
//! [`super::apps::STOP_GRACE`], and it exits once none is left.
//!
//! `rkt app start` starts an app with the hidden helper `rkt stage1-app`
//! ([`helper_main_from_args`]), executed from a sealed copy of rkt like `rkt enter`'s. The
//! helper joins the pod's cgroup, clones the sources of the app's host volumes that have a
//! propagation in the host's mount namespace ([`super::volumes::take_host_sources`]), joins
//! the init's IPC, UTS, network, PID and mount namespaces, mounts an image app's root
//! filesystem there (in the pod's mount namespace: never on the host, and gone with the
//! pod), and forks the app's process, which makes a mount namespace of its own and enters
//! its root exactly as an app of a pod of several apps does ([`super::app`]). The helper
//! then reports the app's PID on the status pipe and waits for `rkt app start` to record it
//! before the app executes its program, so that an exit is never reported for a PID nobody
//! recorded; then it exits, and the app, now an orphan of the pod's PID namespace, is the
//! init's to reap.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::setns;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, pipe2, ForkResult, Pid};

use super::app::{exit_code, own_root, prepare_app, read_byte, report, SETUP_FAILED};
use super::{signals, StageError};
use crate::isolation;
use crate::podstore::{PodManifest, PodState};

/// The signals that stop a sandbox.
const STOPS: [Signal; 4] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// PID 1 of a sandbox: reaps and reports until stopped; returns the pod's exit status (0).
/// With `host_pid` (the pod's directory: a sandbox in the host's PID namespace) it is no
/// namespace's PID 1 but a subreaper that starts each app's helper itself, on request on
/// its socket ([`HostPidInit`]), so that the apps are its descendants; it stops the pod by
/// signalling its descendants rather than every process it can see.
pub(super) fn init(
    exits: Option<File>,
    status: &mut Option<File>,
    host_pid: Option<&Path>,
) -> Result<i32, StageError> {
    let sys = |what: &'static str| {
        move |source| StageError::Sys {
            what,
            path: PathBuf::from("the sandbox's init"),
            source,
        }
    };
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    for signal in STOPS {
        mask.add(signal);
    }
    mask.thread_block().map_err(sys("block the signals of"))?;
    // Non-blocking: poll also wakes for start requests, and a read must never wait for a
    // signal that is not there.
    let signal_fd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(sys("make the signalfd of"))?;
    let mut host = host_pid.map(HostPidInit::listen).transpose()?;
    // Ready: the runner reads the end of the status pipe.
    drop(status.take());
    let mut exits = exits;
    let mut kill_at: Option<Instant> = None;
    loop {
        loop {
            match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(ended) => {
                    // The helpers it started are no apps.
                    let helper = ended.pid().is_some_and(|pid| {
                        host.as_mut()
                            .is_some_and(|h| h.helpers.remove(&pid.as_raw()))
                    });
                    if helper {
                        continue;
                    }
                    if let (Some(pid), Some(code)) = (ended.pid(), exit_code(ended)) {
                        if let Some(pipe) = exits.as_mut() {
                            // One short write: atomic on a pipe.
                            let line = format!("exit-pid {pid} {code}\n");
                            if pipe.write_all(line.as_bytes()).is_err() {
                                exits = None;
                            }
                        }
                    }
                }
                Err(Errno::EINTR) => continue,
                // No process left: a stopping sandbox ends.
                Err(Errno::ECHILD) if kill_at.is_some() => return Ok(0),
                Err(_) => break,
            }
        }
        let wait = kill_at.map(|at| at.saturating_duration_since(Instant::now()));
        if wait == Some(Duration::ZERO) {
            signal_pod(host.is_some(), Signal::SIGKILL);
            // In the host's PID namespace the descendants are found by a scan of /proc, which
            // a process forked meanwhile escapes: sweep again until none is left. In a PID
            // namespace of its own, kill(-1) reaches all at once.
            let again = if host.is_some() {
                Duration::from_millis(100)
            } else {
                Duration::from_secs(3600)
            };
            kill_at = Some(Instant::now() + again);
            continue;
        }
        let timeout = wait.map_or(nix::poll::PollTimeout::NONE, |w| {
            nix::poll::PollTimeout::try_from(w.as_millis().min(60_000) as i32 + 1)
                .unwrap_or(nix::poll::PollTimeout::MAX)
        });
        let mut fds = vec![nix::poll::PollFd::new(
            signal_fd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if let Some(listener) = host.as_ref().and_then(|h| h.listener.as_ref()) {
            fds.push(nix::poll::PollFd::new(
                listener.as_fd(),
                nix::poll::PollFlags::POLLIN,
            ));
        }
        match nix::poll::poll(&mut fds, timeout) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(sys("wait for signals in")(e)),
        }
        let ready = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLIN))
        };
        let (signalled, requested) = (ready(0), ready(1));
        if let (true, Some(h)) = (requested, host.as_mut()) {
            h.serve_one();
        }
        if !signalled {
            continue;
        }
        let Ok(Some(info)) = signal_fd.read_signal() else {
            continue;
        };
        let stop = STOPS.iter().any(|s| *s as u32 == info.ssi_signo);
        if stop && kill_at.is_none() {
            // A stopping pod starts no more apps: requests still queued, and later ones,
            // find the socket closed rather than waiting for an answer.
            if let Some(h) = host.as_mut() {
                h.listener = None;
            }
            signal_pod(host.is_some(), Signal::SIGTERM);
            kill_at = Some(Instant::now() + super::apps::STOP_GRACE);
            // With nothing to stop, the reaping above sees ECHILD and ends the pod.
        }
    }
}

/// Sends `signal` to every process of the pod but the init: in its own PID namespace,
/// every process the init sees (`kill(-1)`); in the host's (`host_pid`), the init's
/// descendants, which every process of the pod is (the init is their subreaper).
fn signal_pod(host_pid: bool, signal: Signal) {
    if !host_pid {
        let _ = kill(Pid::from_raw(-1), signal);
        return;
    }
    for pid in descendants(std::process::id() as i32) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// The descendants of process `root`, from each process's parent in `/proc/<pid>/stat`.
fn descendants(root: i32) -> Vec<i32> {
    let parent_of: Vec<(i32, i32)> = crate::procfs::pids()
        .filter_map(|pid| Some((pid, crate::procfs::Stat::of(pid)?.ppid()?)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// The socket a host-PID sandbox's init takes start requests on, in the pod's directory.
pub const INIT_SOCKET: &str = "init.sock";

/// A host-PID sandbox's init's side of starting apps: its socket, and the helpers it
/// started (reaped, not reported).
struct HostPidInit {
    /// Gone once the pod is stopping.
    listener: Option<std::os::unix::net::UnixListener>,
    helpers: std::collections::HashSet<i32>,
}

impl HostPidInit {
    /// Becomes a subreaper and listens on the pod's [`INIT_SOCKET`].
    fn listen(pod_dir: &Path) -> Result<HostPidInit, StageError> {
        let path = pod_dir.join(INIT_SOCKET);
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(StageError::Sys {
                what: "become the subreaper of",
                path: pod_dir.to_path_buf(),
                source: Errno::last(),
            });
        }
        let _ = std::fs::remove_file(&path);
        let listener =
            std::os::unix::net::UnixListener::bind(&path).map_err(|source| StageError::Io {
                what: "listen on",
                path: path.clone(),
                source,
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| StageError::Io {
                what: "listen on",
                path,
                source,
            })?;
        Ok(HostPidInit {
            listener: Some(listener),
            helpers: Default::default(),
        })
    }

    /// Takes one request ([`request_start`]): the helper's arguments and descriptors, and
    /// starts the helper as its child. A request it cannot read is dropped: the requester
    /// then reads the end of its status pipe.
    fn serve_one(&mut self) {
        use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
        let Some(Ok((conn, _))) = self.listener.as_ref().map(|l| l.accept()) else {
            return;
        };
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buf = vec![0u8; 64 * 1024];
        let mut space = nix::cmsg_space!([RawFd; 8]);
        let (len, fds) = {
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            let Ok(msg) = recvmsg::<()>(
                conn.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) else {
                return;
            };
            let mut fds = Vec::new();
            for cmsg in msg.cmsgs().into_iter().flatten() {
                if let ControlMessageOwned::ScmRights(received) = cmsg {
                    // SAFETY: SCM_RIGHTS gives this process new descriptors it alone owns.
                    fds.extend(
                        received
                            .into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
            (msg.bytes, fds)
        };
        let mut args: Vec<OsString> = buf[..len]
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| {
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(a).to_os_string()
            })
            .collect();
        // The descriptors, by their numbers here: status, go, the requester's mount
        // namespace, then a stream for each `1` of the `--streams` mask.
        let Some(mask) = args
            .iter()
            .position(|a| a == "--streams")
            .and_then(|i| args.get(i + 1).cloned())
        else {
            return;
        };
        let mut numbers = fds.iter().map(|f| f.as_raw_fd().to_string());
        for flag in ["--status-fd", "--go-fd", "--host-mnt-fd"] {
            let Some(n) = numbers.next() else { return };
            args.extend([flag.into(), n.into()]);
        }
        let mask = mask.to_string_lossy().into_owned();
        for (flag, given) in ["--stdin-fd", "--stdout-fd", "--stderr-fd"]
            .into_iter()
            .zip(mask.chars())
        {
            let n = match given {
                '1' => numbers.next().unwrap_or_else(|| "-1".into()),
                _ => "-1".into(),
            };
            args.extend([flag.into(), n.into()]);
        }
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("rkt")
            .arg(START_COMMAND)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        super::inherit_in_child(&mut cmd, fds.iter().map(|f| f.as_raw_fd()).collect());
        if let Ok(child) = cmd.spawn() {
            self.helpers.insert(child.id() as i32);
        }
        drop(fds);
    }
}

/// Asks the init of the host-PID sandbox in `pod_dir` to start `rkt stage1-app` with
/// `args` and the descriptors `fds` (the status pipe's write end, the go pipe's read end,
/// this process's mount namespace, the app's streams), in that order.
fn request_start(pod_dir: &Path, args: &[OsString], fds: &[RawFd]) -> std::io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    use std::os::unix::ffi::OsStrExt;
    let conn = std::os::unix::net::UnixStream::connect(pod_dir.join(INIT_SOCKET))?;
    let mut data = Vec::new();
    for arg in args {
        data.extend_from_slice(arg.as_bytes());
        data.push(0);
    }
    let iov = [std::io::IoSlice::new(&data)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    sendmsg::<()>(conn.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)?;
    Ok(())
}

/// The hidden command `rkt app start` runs its helper with.
pub const START_COMMAND: &str = "stage1-app";

/// What to start: app `name` of the sandbox in `pod_dir`, whose init is `init_pid`.
#[derive(Debug, Clone)]
pub struct AppStart<'a> {
    /// The `rkt` binary (normally `/proc/self/exe`), executed from a sealed copy.
    pub exe: &'a Path,
    pub pod_dir: &'a Path,
    pub name: &'a str,
    /// Where the app's root filesystem is, for an image app ([`crate::image_pod::app_dir`]).
    pub app_dir: &'a Path,
    /// The host PID of the pod's init.
    pub init_pid: i32,
    /// The app's stdin, stdout and stderr when its monitor holds them: pipes' ends or a
    /// terminal ([`super::app_logs`]); `/dev/null` otherwise.
    pub log_fds: [Option<&'a OwnedFd>; 3],
    /// The sandbox is in the host's PID namespace: its init starts the helper
    /// ([`INIT_SOCKET`]), so that the app is its descendant.
    pub host_pid: bool,
}

/// Starts the app: returns its PID in the pod's namespace once it runs. `record` is called
/// with that PID before the app executes its program (to record it); an error from it
/// stops the start (the app's process is killed before it runs anything).
pub fn start_app(
    spec: &AppStart,
    record: impl FnOnce(i32) -> Result<(), String>,
) -> Result<i32, StageError> {
    let spawn_err = |source| StageError::Spawn {
        exe: spec.exe.to_path_buf(),
        source,
    };
    let pipe = || pipe2(OFlag::O_CLOEXEC).map_err(|e| spawn_err(e.into()));
    let (status_read, status_write) = pipe()?;
    let (go_read, go_write) = pipe()?;
    // Distinct copies (close-on-exec here), the helper owning each under its number.
    let log_fds = spec
        .log_fds
        .iter()
        .map(|fd| fd.map(OwnedFd::try_clone).transpose())
        .collect::<Result<Vec<_>, _>>()
        .map_err(spawn_err)?;
    let (status_fd, go_fd) = (status_write, go_read);
    let raw = |fd: &Option<OwnedFd>| fd.as_ref().map_or(-1, |f| f.as_raw_fd());
    if spec.host_pid {
        // The init starts the helper with these (its copies), in its own mount namespace:
        // the helper returns to this one (the host's) first.
        let mnt = File::open("/proc/self/ns/mnt").map_err(spawn_err)?;
        let mask: String = log_fds
            .iter()
            .map(|fd| if fd.is_some() { '1' } else { '0' })
            .collect();
        let args: Vec<OsString> = [
            "--pod-dir".into(),
            spec.pod_dir.as_os_str().to_os_string(),
            "--app-dir".into(),
            spec.app_dir.as_os_str().to_os_string(),
            "--app".into(),
            spec.name.into(),
            "--init-pid".into(),
            spec.init_pid.to_string().into(),
            "--streams".into(),
            mask.into(),
        ]
        .into();
        let mut fds = vec![status_fd.as_raw_fd(), go_fd.as_raw_fd(), mnt.as_raw_fd()];
        fds.extend(log_fds.iter().flatten().map(|fd| fd.as_raw_fd()));
        let sent = request_start(spec.pod_dir, &args, &fds).map_err(|source| StageError::Io {
            what: "ask the sandbox's init to start the app through",
            path: spec.pod_dir.join(INIT_SOCKET),
            source,
        });
        drop((status_fd, go_fd, log_fds, mnt));
        sent?;
        return wait_started(None, status_read, go_write, record);
    }
    let sealed = super::sealed_exe::seal(spec.exe)?;
    let mut cmd = Command::new(sealed.path());
    let mut kept = vec![status_fd.as_raw_fd(), go_fd.as_raw_fd()];
    kept.extend(log_fds.iter().flatten().map(|fd| fd.as_raw_fd()));
    super::inherit_in_child(&mut cmd, kept);
    cmd.arg0("rkt")
        .arg(START_COMMAND)
        .arg("--pod-dir")
        .arg(spec.pod_dir)
        .arg("--app-dir")
        .arg(spec.app_dir)
        .args(["--app", spec.name])
        .args(["--init-pid", &spec.init_pid.to_string()])
        .args(["--status-fd", &status_fd.as_raw_fd().to_string()])
        .args(["--go-fd", &go_fd.as_raw_fd().to_string()])
        .args(["--stdin-fd", &raw(&log_fds[0]).to_string()])
        .args(["--stdout-fd", &raw(&log_fds[1]).to_string()])
        .args(["--stderr-fd", &raw(&log_fds[2]).to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let spawned = cmd.spawn();
    drop((status_fd, go_fd, log_fds, sealed));
    let helper = spawned.map_err(spawn_err)?;
    wait_started(Some(helper), status_read, go_write, record)
}

/// What the helper says on the status pipe: its app's PID, recorded by `record` before the
/// app runs, or why it failed; then waits for the helper, when it is our child.
fn wait_started(
    helper: Option<std::process::Child>,
    status_read: OwnedFd,
    go_write: OwnedFd,
    record: impl FnOnce(i32) -> Result<(), String>,
) -> Result<i32, StageError> {
    let mut status = std::io::BufReader::new(File::from(status_read));
    let mut line = String::new();
    let _ = std::io::BufRead::read_line(&mut status, &mut line);
    let pid = line
        .strip_prefix("pid ")
        .and_then(|p| p.trim().parse::<i32>().ok());
    let outcome = match pid {
        Some(pid) => match record(pid) {
            Ok(()) => {
                let _ = File::from(go_write).write_all(b"g");
                Ok(pid)
            }
            // Closing the go pipe unsent: the app's process ends before it runs.
            Err(message) => Err(StageError::Reported(message)),
        },
        None => Err(StageError::Reported(
            line.strip_prefix("error ")
                .unwrap_or("the app's helper ended before the app was ready")
                .trim_end()
                .to_string(),
        )),
    };
    let mut rest = String::new();
    let _ = status.read_to_string(&mut rest);
    if let Some(mut helper) = helper {
        let _ = helper.wait();
    }
    let errors: Vec<&str> = rest
        .lines()
        .filter_map(|l| l.strip_prefix("error "))
        .collect();
    match outcome {
        Ok(_) if !errors.is_empty() => Err(StageError::Reported(errors.join("; "))),
        other => other,
    }
}

/// `rkt stage1-app`'s arguments.
struct HelperArgs {
    pod_dir: PathBuf,
    app_dir: PathBuf,
    name: String,
    init_pid: i32,
    status_fd: RawFd,
    go_fd: RawFd,
    log_fds: [Option<RawFd>; 3],
    /// A host-PID sandbox's: the mount namespace of the process that asked for the start
    /// (the host's), which the helper, started by the init, returns to first.
    host_mnt_fd: Option<RawFd>,
}

impl HelperArgs {
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<HelperArgs, String> {
        let mut values = std::collections::HashMap::new();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .ok_or_else(|| format!("{flag:?} needs a value"))?;
            values.insert(flag.to_string_lossy().into_owned(), value);
        }
        let mut take = |name: &str| {
            values
                .remove(name)
                .ok_or_else(|| format!("{name} is required"))
        };
        let number = |name: &str, v: OsString| {
            v.to_str()
                .and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| format!("{name}: {v:?} is not a number"))
        };
        let fd = |n: i64| RawFd::try_from(n).ok().filter(|n| *n >= 0);
        Ok(HelperArgs {
            pod_dir: take("--pod-dir")?.into(),
            app_dir: take("--app-dir")?.into(),
            name: take("--app")?.to_string_lossy().into_owned(),
            init_pid: number("--init-pid", take("--init-pid")?)? as i32,
            status_fd: fd(number("--status-fd", take("--status-fd")?)?)
                .ok_or("--status-fd: not a descriptor")?,
            go_fd: fd(number("--go-fd", take("--go-fd")?)?).ok_or("--go-fd: not a descriptor")?,
            log_fds: [
                fd(number("--stdin-fd", take("--stdin-fd")?)?),
                fd(number("--stdout-fd", take("--stdout-fd")?)?),
                fd(number("--stderr-fd", take("--stderr-fd")?)?),
            ],
            host_mnt_fd: match take("--host-mnt-fd") {
                Ok(v) => {
                    Some(fd(number("--host-mnt-fd", v)?).ok_or("--host-mnt-fd: not a descriptor")?)
                }
                Err(_) => None,
            },
        })
    }
}

/// `rkt stage1-app ARGS`: starts app `--index` of the sandbox (see the module docs).
/// Returns this helper's exit status.
pub fn helper_main_from_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args = match HelperArgs::parse(args) {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("rkt {START_COMMAND}: {msg}");
            return SETUP_FAILED;
        }
    };
    let keep: Vec<RawFd> = [args.status_fd, args.go_fd]
        .into_iter()
        .chain(args.log_fds.iter().flatten().copied())
        .chain(args.host_mnt_fd)
        .collect();
    super::stdio::close_inherited(&keep);
    let _ = nix::unistd::setsid();
    for fd in &keep {
        let _ = nix::fcntl::fcntl(
            *fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
    // SAFETY: the caller passes these descriptors for this process alone.
    let mut status = unsafe { File::from_raw_fd(args.status_fd) };
    // SAFETY: as above.
    let go = unsafe { OwnedFd::from_raw_fd(args.go_fd) };
    match helper(&args, &mut status, &go) {
        Ok(()) => 0,
        Err(err) => {
            report(&mut status, &err);
            SETUP_FAILED
        }
    }
}

fn helper(args: &HelperArgs, status: &mut File, go: &OwnedFd) -> Result<(), StageError> {
    if let Some(fd) = args.host_mnt_fd {
        // SAFETY: the init passes this descriptor for this process alone.
        let mnt = unsafe { OwnedFd::from_raw_fd(fd) };
        setns(mnt.as_fd(), nix::sched::CloneFlags::CLONE_NEWNS).map_err(|source| {
            StageError::Sys {
                what: "return to the host's mount namespace from",
                path: args.pod_dir.clone(),
                source,
            }
        })?;
    }
    let read_json = |name: &str| -> Result<Vec<u8>, StageError> {
        let path = args.pod_dir.join(name);
        std::fs::read(&path).map_err(|source| StageError::Io {
            what: "read",
            path,
            source,
        })
    };
    let manifest_path = args.pod_dir.join(crate::podstore::store::MANIFEST_FILE);
    let manifest: PodManifest = serde_json::from_slice(&read_json(
        crate::podstore::store::MANIFEST_FILE,
    )?)
    .map_err(|source| StageError::Manifest {
        path: manifest_path,
        source,
    })?;
    let record =
        PodState::load(&args.pod_dir).map_err(|e| StageError::Reported(crate::error::chain(&e)))?;
    let gone = || StageError::Reported(format!("the pod has no app {}", args.name));
    let app = manifest
        .apps
        .iter()
        .find(|a| a.name == args.name)
        .cloned()
        .ok_or_else(gone)?;
    // Its record, by name (the two lists need not line up after a change failed).
    let index = record
        .apps
        .iter()
        .position(|a| a.name == args.name)
        .ok_or_else(gone)?;
    let uuid = args
        .pod_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The app's own cgroup when it has limits of its own, else the pod's.
    let cgroup = record
        .apps
        .get(index)
        .and_then(|a| a.cgroup.clone())
        .unwrap_or_else(|| record.pod_cgroup(&uuid));
    isolation::cgroups::detect()
        .join(&cgroup)
        .map_err(StageError::Isolation)?;
    // Host volumes with a propagation are cloned here, in the host's mount namespace.
    let host_sources = super::volumes::take_host_sources(&manifest.volumes, &app.mounts)?;
    join_namespaces(args.init_pid)?;
    let own_netns = record.netns.is_some();
    let user_ns = record.app_isolation(index).user_ns;
    let join_user_ns = match user_ns {
        Some(_) if own_netns => {
            let net = File::open("/proc/self/ns/net").map_err(|source| StageError::Io {
                what: "open",
                path: "/proc/self/ns/net".into(),
                source,
            })?;
            crate::netns::owner_of(net.as_fd()).map_err(|source| StageError::Sys {
                what: "find the user namespace owning the network namespace of",
                path: args.pod_dir.clone(),
                source,
            })?
        }
        Some(_) => {
            return Err(StageError::Reported(
                "--private-users with --net=host: a sandbox's apps cannot be started in a \
                 user namespace of their own yet"
                    .into(),
            ))
        }
        None => None,
    };
    // Mounted already when the app ran before (started again): its root, with what the
    // app wrote in it, is kept.
    let rootfs = crate::image_pod::rootfs_dir(&args.app_dir);
    let built = crate::image_pod::overlay::is_mounted(&rootfs).unwrap_or(false)
        || std::fs::read_dir(&rootfs).is_ok_and(|mut d| d.next().is_some());
    if let (Some(image), false) = (&app.image, built) {
        let shift = user_ns.map(|m| image::unpack::IdShift {
            base: m.host_base,
            size: m.size,
        });
        crate::image_pod::rootfs::build(&args.app_dir, image, shift)
            .map_err(|e| StageError::Reported(crate::error::chain(&e)))?;
    }
    let mut prepared = prepare_app(app, &args.app_dir, &record, index, (0, args.log_fds))?;
    prepared.host_sources = host_sources;
    let (ready_read, ready_write) = pipe2(OFlag::O_CLOEXEC).map_err(|source| StageError::Sys {
        what: "make the ready pipe of",
        path: args.pod_dir.clone(),
        source,
    })?;
    let (go_child, go_child_write) = pipe2(OFlag::O_CLOEXEC).map_err(|source| StageError::Sys {
        what: "make the start pipe of",
        path: args.pod_dir.clone(),
        source,
    })?;
    // The app must be the init's to reap: a process whose parent is outside the pod's PID
    // namespace is left, when that parent exits, to the host's init. So the helper forks
    // a go-between inside the namespace, which forks the app and exits at once: the app,
    // orphaned inside the pod's namespace, becomes the pod's init's child. (In the host's
    // PID namespace the init started the helper itself, and is the subreaper of its
    // descendants.) The go-between
    // says the app's PID (in the pod's namespace: what its fork returned) on a pipe.
    let (pid_read, pid_write) = pipe2(OFlag::O_CLOEXEC).map_err(|source| StageError::Sys {
        what: "make the PID pipe of",
        path: args.pod_dir.clone(),
        source,
    })?;
    // SAFETY: this helper is single-threaded, so the child may do anything.
    let between = match unsafe { fork() } {
        Err(source) => {
            return Err(StageError::Sys {
                what: "fork the app's process in",
                path: args.pod_dir.clone(),
                source,
            })
        }
        Ok(ForkResult::Child) => {
            drop((ready_read, go_child_write, pid_read));
            // An app of its own PID namespace is its PID 1; the go-between stays in the
            // pod's, so the app, orphaned, is still the pod's init's to reap, by the PID
            // it has in the pod's namespace (what the fork returns).
            if prepared.app.own_pid_ns {
                if let Err(source) = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWPID) {
                    report(
                        status,
                        &StageError::Sys {
                            what: "unshare a PID namespace for the app in",
                            path: args.pod_dir.clone(),
                            source,
                        },
                    );
                    // SAFETY: _exit(2) ends this child without running exit handlers.
                    unsafe { libc::_exit(SETUP_FAILED) }
                }
            }
            // SAFETY: the go-between is single-threaded too.
            let code = match unsafe { fork() } {
                Err(_) => SETUP_FAILED,
                Ok(ForkResult::Child) => {
                    drop(pid_write);
                    let err = app_process(
                        args,
                        &mut prepared,
                        own_netns,
                        &manifest,
                        join_user_ns.as_ref().map(|fd| fd.as_raw_fd()),
                        ready_write,
                        &go_child,
                    );
                    report(status, &(err));
                    SETUP_FAILED
                }
                Ok(ForkResult::Parent { child }) => {
                    let _ = nix::unistd::write(&pid_write, child.as_raw().to_string().as_bytes());
                    0
                }
            };
            // SAFETY: _exit(2) ends this child without running the helper's exit handlers.
            unsafe { libc::_exit(code) }
        }
        Ok(ForkResult::Parent { child }) => child,
    };
    drop((ready_write, go_child, pid_write));
    let _ = waitpid(between, None);
    let mut pid_text = String::new();
    let _ = File::from(pid_read).read_to_string(&mut pid_text);
    let Ok(pod_pid) = pid_text.trim().parse::<i32>() else {
        return Err(StageError::Reported(
            "its process could not be forked in the pod".into(),
        ));
    };
    if !matches!(read_byte(&ready_read), Ok(1)) {
        // The app's process failed and said why on the status pipe.
        return Ok(());
    }
    let _ = status.write_all(format!("pid {pod_pid}\n").as_bytes());
    // Recorded: let the app run. Anything else (end of file): it ends unrun, as its
    // process does when the go pipe closes unsent.
    if matches!(read_byte(go), Ok(1)) {
        let _ = nix::unistd::write(&go_child_write, b"g");
    }
    Ok(())
}

/// In the app's process: a mount namespace and root of its own, the app's isolation, then
/// the program once the helper lets it go. Returns only on failure.
fn app_process(
    args: &HelperArgs,
    app: &mut super::app::PreparedApp,
    own_netns: bool,
    manifest: &PodManifest,
    join_user_ns: Option<RawFd>,
    ready: OwnedFd,
    go: &OwnedFd,
) -> StageError {
    signals::reset_for_exec();
    let prepared = (|| {
        let plan = own_root(&args.pod_dir, app, own_netns, &manifest.volumes)?;
        if let Some(fd) = join_user_ns {
            isolation::user_ns::join(fd).map_err(StageError::Isolation)?;
        }
        Ok(plan)
    })();
    let plan = match prepared {
        Ok(plan) => plan,
        Err(err) => return err,
    };
    let _ = nix::unistd::write(&ready, b"r");
    drop(ready);
    if !matches!(read_byte(go), Ok(1)) {
        // Not recorded: the app does not run.
        // SAFETY: _exit(2) ends this child without running the helper's exit handlers.
        unsafe { libc::_exit(SETUP_FAILED) }
    }
    if join_user_ns.is_some() {
        if let Err(e) = isolation::user_ns::become_root() {
            return StageError::Isolation(e);
        }
    }
    plan.exec(&app.isolation)
}

/// Joins the IPC, UTS, network, PID (for children) and mount namespaces of the process
/// `init_pid`; the mount namespace last, as it changes what paths mean.
fn join_namespaces(init_pid: i32) -> Result<(), StageError> {
    // The recorded PID must still be a PID namespace's init (the sandbox's), not a process
    // that took the number after the sandbox ended.
    let in_pod = crate::procfs::ns_pids(init_pid).last() == Some(&1);
    // A host-PID sandbox's init is no namespace's init: it started this helper.
    let started_us = nix::unistd::getppid().as_raw() == init_pid;
    if !in_pod && !started_us {
        return Err(StageError::Enter {
            pid: init_pid,
            what: "find the sandbox's init (the pod has ended)".into(),
            source: Errno::ESRCH,
        });
    }
    let files = super::enter::NAMESPACES
        .iter()
        .map(|(name, flag)| {
            let path = format!("/proc/{init_pid}/ns/{name}");
            File::open(&path)
                .map(|f| (*name, *flag, f))
                .map_err(|e| StageError::Enter {
                    pid: init_pid,
                    what: format!("open {path}"),
                    source: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (name, flag, file) in &files {
        setns(file.as_fd(), *flag).map_err(|source| StageError::Enter {
            pid: init_pid,
            what: format!("join its {name} namespace"),
            source,
        })?;
    }
    Ok(())
}

/// Unmounts what `rkt app start` mounted for an app at `rootfs` in the sandbox whose init
/// is `init_pid` (its image's root filesystem, in the pod's mount namespace), from a child
/// process that joins that namespace; nothing when nothing is mounted there.
pub fn unmount_in_pod(init_pid: i32, rootfs: &Path) -> Result<(), StageError> {
    use std::os::unix::ffi::OsStrExt;
    let ns = format!("/proc/{init_pid}/ns/mnt");
    let file = File::open(&ns).map_err(|source| StageError::Io {
        what: "open",
        path: ns.clone().into(),
        source,
    })?;
    let target = std::ffi::CString::new(rootfs.as_os_str().as_bytes())
        .map_err(|_| StageError::Reported(format!("{} holds a NUL byte", rootfs.display())))?;
    // SAFETY: the child makes only system calls (setns, umount2, _exit) on what was made
    // before the fork: no allocation, no lock, so it is sound even from a multi-threaded
    // caller.
    match unsafe { fork() } {
        Err(source) => Err(StageError::Sys {
            what: "fork to unmount",
            path: rootfs.to_path_buf(),
            source,
        }),
        Ok(ForkResult::Child) => {
            // SAFETY: plain system calls on a descriptor and a C string that stay valid.
            let code = unsafe {
                if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNS) != 0 {
                    1
                } else {
                    // Every mount stacked there, until none is left (EINVAL).
                    loop {
                        if libc::umount2(target.as_ptr(), libc::MNT_DETACH) != 0 {
                            let errno = *libc::__errno_location();
                            break if errno == libc::EINVAL || errno == libc::ENOENT {
                                0
                            } else {
                                2
                            };
                        }
                    }
                }
            };
            // SAFETY: ends the child without the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        Ok(ForkResult::Parent { child }) => match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, 0)) => Ok(()),
            Ok(WaitStatus::Exited(_, 1)) => Err(StageError::Reported(format!(
                "cannot join the mount namespace of the pod's init ({init_pid})"
            ))),
            _ => Err(StageError::Reported(format!(
                "cannot unmount {} in the pod",
                rootfs.display()
            ))),
        },
    }
}

/// `exit-pid PID STATUS` lines of a sandbox's init, as `(pid, status)`; iterating blocks
/// until the next, and ends when the init is gone.
pub fn parse_exit(line: &str) -> Option<(i32, i32)> {
    let (pid, code) = line.strip_prefix("exit-pid ")?.trim().split_once(' ')?;
    Some((pid.parse().ok()?, code.parse().ok()?))
}
