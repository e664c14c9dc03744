//! `rkt stage1-init`: the process `rkt run` re-executes (`/proc/self/exe`) to become the pod.
//!
//! It starts single-threaded, so every `fork` here is an ordinary fork of a one-thread
//! process and the children may do anything, not only async-signal-safe calls. In order:
//! 1. the stage joins the pod's network namespace (unless `--net=host`), enters the mount
//!    template on a busy host ([`crate::mount_template`]), unshares mount, UTS, IPC
//!    (unless `--ipc=parent`) and PID namespaces, prepares the mounts ([`super::mounts`]) and sets the hostname;
//! 2. it forks the pod's init, PID 1 of the new PID namespace, reports the init's host PID
//!    to the runner (`pid <n>` on the status pipe) and waits for it, passing signals on;
//! 3. the init mounts `/proc` (masking and write-protecting its kernel paths, see
//!    [`crate::isolation::paths`]), enters the rootfs if any, and forks the app, which
//!    narrows its capabilities, identity and syscalls ([`crate::isolation::apply`]) and
//!    execs; the init passes signals on to it, reaps every child, and exits with the
//!    app's status (128 + signal number when a signal killed it) as soon as the app is
//!    gone; leaving PID 1 makes the kernel kill whatever else still runs in the pod.
//!
//! A pod of several apps differs from step 1 on: the stage mounts no app's root, and the
//! init forks one process per app, each with its own mount namespace and root, and starts
//! them together (`stage::apps`); what one app's process does is in `stage::app`.
//!
//! With `--private-users` the init, once in the rootfs, joins the pod's user namespace (the
//! one that owns the pod's network namespace, made with it by the runner) or, with
//! `--net=host`, creates it and the stage writes its id maps ([`crate::isolation::user_ns`]);
//! the app is forked inside it.
//!
//! The status pipe is close-on-exec everywhere, so the runner reads end-of-file once the
//! app has been executed; any failure before that is reported on it as `error <message>`.
//! Each process sets a parent-death signal (SIGKILL), so a pod never outlives its runner;
//! the stage then checks that its parent is still the runner (`--runner-pid`), which the
//! runner passes so that it can start the stage without a pre-exec step (see
//! [`super::start`]).

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sched::{setns, unshare, CloneFlags};
use nix::sys::prctl::{set_name, set_pdeathsig};
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::{fork, getppid, pipe2, sethostname, ForkResult, Pid};

use super::app::{enter_app, mount_app_root, read_byte, report, ExecPlan, PreparedApp};
pub use super::app::{exit_code, SETUP_FAILED};
use super::{mounts, signals, volumes, StageError};
use crate::podstore::{ExitPolicy, IpcMode, PodManifest, PodState, Volume};
use crate::{isolation, mount_template};

/// An app's index and the write ends of its logged stdout and stderr (`None`: not logged).
pub type AppLogFds = (usize, [Option<RawFd>; 2]);

/// What the runner tells the stage: the hidden `stage1-init` command's arguments, `--pod-dir
/// DIR --hostname NAME --status-fd FD --runner-pid PID [--netns PATH]`, each value in the
/// next argument. Parsed by hand: the binary's `main` hands them over before building its
/// command line parser, which the stage does not need.
#[derive(Debug, Clone)]
pub struct InitArgs {
    pub pod_dir: PathBuf,
    pub hostname: String,
    /// The pod's network namespace; `None` with `--net=host`.
    pub netns: Option<PathBuf>,
    /// The write end of the status pipe, inherited from the runner.
    pub status_fd: RawFd,
    /// The runner's PID: the stage exits if its parent is not that process once its
    /// parent-death signal is set (the runner died in between).
    pub runner_pid: i32,
    /// A pod of several apps: the write end of the pipe on which the init reports each
    /// app's exit status (`exit INDEX STATUS`), inherited from the runner.
    pub exits_fd: Option<RawFd>,
    /// The systemd socket-activation descriptors (3 to 3 + N - 1) the apps get; 0: none.
    pub listen_fds: i32,
    /// The apps whose stdout or stderr go to their logs: by app index, the write ends of
    /// the pipes the runner copies into the logs (`--log-fds INDEX:OUT:ERR,…`, -1 for a
    /// stream that is not logged), inherited from the runner.
    pub log_fds: Vec<AppLogFds>,
    /// A sandbox (`--sandbox 1`): the init starts no app and ends only when stopped.
    pub sandbox: bool,
}

impl InitArgs {
    /// Parses the arguments after `stage1-init`.
    pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<InitArgs, String> {
        let (mut pod_dir, mut hostname, mut netns, mut status_fd, mut runner_pid) =
            (None, None, None, None, None);
        let (mut exits_fd, mut listen_fds, mut log_fds) = (None, 0, Vec::new());
        let mut sandbox = false;
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let flag = flag.to_string_lossy().into_owned();
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = |v: &OsString| {
                v.to_str()
                    .and_then(|v| v.parse::<i32>().ok())
                    .ok_or_else(|| format!("{flag}: {v:?} is not a number"))
            };
            match flag.as_str() {
                "--pod-dir" => pod_dir = Some(PathBuf::from(value)),
                "--hostname" => {
                    hostname = Some(
                        value
                            .into_string()
                            .map_err(|v| format!("--hostname: {v:?} is not UTF-8"))?,
                    )
                }
                "--netns" => netns = Some(PathBuf::from(value)),
                "--status-fd" => status_fd = Some(number(&value)?),
                "--runner-pid" => runner_pid = Some(number(&value)?),
                "--exits-fd" => exits_fd = Some(number(&value)?),
                "--listen-fds" => listen_fds = number(&value)?,
                "--log-fds" => log_fds = parse_log_fds(&value)?,
                "--sandbox" => sandbox = number(&value)? != 0,
                _ => return Err(format!("unknown argument {flag:?}")),
            }
        }
        let missing = |name: &str| format!("--{name} is required");
        Ok(InitArgs {
            pod_dir: pod_dir.ok_or_else(|| missing("pod-dir"))?,
            hostname: hostname.ok_or_else(|| missing("hostname"))?,
            netns,
            status_fd: status_fd.ok_or_else(|| missing("status-fd"))?,
            runner_pid: runner_pid.ok_or_else(|| missing("runner-pid"))?,
            exits_fd,
            listen_fds,
            log_fds,
            sandbox,
        })
    }

    /// The arguments for `spec`, in the form [`InitArgs::parse`] reads.
    pub(super) fn to_args(
        spec: &super::StageSpec,
        status_fd: RawFd,
        exits_fd: Option<RawFd>,
        runner_pid: u32,
        listen_fds: i32,
        log_fds: &[AppLogFds],
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--pod-dir".into(),
            spec.pod_dir.into(),
            "--hostname".into(),
            spec.hostname.into(),
            "--status-fd".into(),
            status_fd.to_string().into(),
            "--runner-pid".into(),
            runner_pid.to_string().into(),
        ];
        if let Some(netns) = spec.netns {
            args.extend(["--netns".into(), netns.into()]);
        }
        if let Some(fd) = exits_fd {
            args.extend(["--exits-fd".into(), fd.to_string().into()]);
        }
        if listen_fds > 0 {
            args.extend(["--listen-fds".into(), listen_fds.to_string().into()]);
        }
        if spec.sandbox {
            args.extend(["--sandbox".into(), "1".into()]);
        }
        if !log_fds.is_empty() {
            let fd = |fd: Option<RawFd>| fd.unwrap_or(-1);
            let list = log_fds
                .iter()
                .map(|(index, [out, err])| format!("{index}:{}:{}", fd(*out), fd(*err)))
                .collect::<Vec<_>>()
                .join(",");
            args.extend(["--log-fds".into(), list.into()]);
        }
        args
    }
}

/// `INDEX:OUT:ERR,…` of `--log-fds`.
fn parse_log_fds(value: &OsString) -> Result<Vec<AppLogFds>, String> {
    let text = value
        .to_str()
        .ok_or_else(|| format!("--log-fds: {value:?} is not UTF-8"))?;
    text.split(',')
        .map(|entry| {
            let bad = || format!("--log-fds: {entry:?} is not INDEX:OUT:ERR");
            let mut fields = entry.split(':');
            let mut next = || {
                fields
                    .next()
                    .and_then(|f| f.parse::<i64>().ok())
                    .ok_or_else(bad)
            };
            let (index, out, err) = (next()?, next()?, next()?);
            let fd = |n: i64| RawFd::try_from(n).ok().filter(|n| *n >= 0);
            let index = usize::try_from(index).map_err(|_| bad())?;
            Ok((index, [fd(out), fd(err)]))
        })
        .collect()
}

/// `rkt stage1-init ARGS`: parses `args` (those after the command name) and runs the stage;
/// returns the exit status for the process.
pub fn main_from_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let args = match &args[..] {
        [flag, fd, uuid_flag, _] if flag == ARGS_FD && uuid_flag == POD_UUID => match read_args(fd)
        {
            Ok(args) => args,
            Err(msg) => {
                eprintln!("rkt stage1-init: {ARGS_FD}: {msg}");
                return SETUP_FAILED;
            }
        },
        _ => args,
    };
    match InitArgs::parse(args) {
        Ok(args) => run(&args),
        Err(msg) => {
            eprintln!("rkt stage1-init: {msg}");
            SETUP_FAILED
        }
    }
}

/// `stage1-init --args-fd FD`: the arguments are on a pipe, NUL-terminated, so that the
/// command line of the stage and the pod's init (which `ps` in the pod shows) holds no host
/// path.
pub const ARGS_FD: &str = "--args-fd";

/// `stage1-init --args-fd FD --pod UUID`: the pod's UUID, shown by `ps` (not read).
pub const POD_UUID: &str = "--pod";

/// A pipe holding `args` for [`ARGS_FD`]: its read end, to be inherited by the stage (not
/// close-on-exec; the caller starts no other process before the stage).
pub(super) fn args_pipe(args: &[OsString]) -> std::io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
    let mut bytes = Vec::new();
    for arg in args {
        bytes.extend_from_slice(arg.as_bytes());
        bytes.push(0);
    }
    // Far below a pipe's capacity: written whole before anyone reads.
    File::from(write).write_all(&bytes)?;
    let inherited = read.try_clone()?;
    fcntl(inherited.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::empty()))?;
    Ok(inherited)
}

fn read_args(fd: &OsString) -> Result<Vec<OsString>, String> {
    use std::io::Read;
    use std::os::unix::ffi::OsStringExt;
    let fd: RawFd = fd
        .to_str()
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("{fd:?} is not a number"))?;
    // SAFETY: the runner passes the read end of the arguments' pipe under this number;
    // nothing else in this process uses it, and it is closed here.
    let mut file = unsafe { File::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    // Each argument ends with a NUL, an empty one included.
    if bytes.pop().is_some_and(|last| last != 0) {
        return Err("the arguments end without a NUL".into());
    }
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    Ok(bytes
        .split(|b| *b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect())
}

fn run(args: &InitArgs) -> i32 {
    // Nothing of the caller's reaches the pod but its standard streams (the runner's
    // relays, see `super::stdio`) and the socket-activation descriptors; and no process of
    // the pod is in the caller's session, where `/dev/tty` would be the caller's terminal.
    let listen = (3..3 + args.listen_fds).collect::<Vec<_>>();
    let logs = args
        .log_fds
        .iter()
        .flat_map(|(_, fds)| fds.iter().flatten().copied());
    let keep = [args.status_fd]
        .into_iter()
        .chain(args.exits_fd)
        .chain(listen)
        .chain(logs.clone())
        .collect::<Vec<_>>();
    super::stdio::close_inherited(&keep);
    let _ = nix::unistd::setsid();
    // SAFETY: the runner passes us the write end of its status pipe under this number and
    // nothing else in this process uses or closes it.
    let status = unsafe { File::from_raw_fd(args.status_fd) };
    for fd in std::iter::once(args.status_fd)
        .chain(args.exits_fd)
        .chain(logs)
    {
        if let Err(errno) = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)) {
            eprintln!("rkt stage1-init: fd {fd}: {errno}");
            return SETUP_FAILED;
        }
    }
    match stage(args, status) {
        Ok(code) => code,
        Err((mut status, err)) => {
            report(&mut status, &err);
            SETUP_FAILED
        }
    }
}

type Failure = (File, StageError);

/// The pod as [`prepare`] left it: its namespaces entered, its apps prepared.
struct PreparedPod {
    /// `--private-users` with a network namespace of the pod's: the user namespace that
    /// owns it, which the init (or each app) joins.
    user_ns_fd: Option<OwnedFd>,
    /// `--private-users`: the pod's host ids.
    user_ns: Option<isolation::user_ns::IdMap>,
    apps: Vec<PreparedApp>,
    exit_policy: ExitPolicy,
    /// The pod's volumes, which each app mounts ([`super::volumes`]).
    volumes: Vec<Volume>,
    /// A sandbox in the host's PID namespace.
    host_pid: bool,
}

fn stage(args: &InitArgs, status: File) -> Result<i32, Failure> {
    let prepared = match prepare(args) {
        Ok(p) => p,
        Err(e) => return Err((status, e)),
    };
    // The init is PID 1 of its own namespace (or, in the host's, may be reparented to a
    // subreaper), so getppid() cannot tell it whether the stage died before the init's
    // parent-death signal was set: it holds the read end of a pipe whose only write end the
    // stage keeps open for as long as it lives.
    let (alive_read, alive_write) = match pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
        Ok(ends) => ends,
        Err(source) => {
            let what = "create the liveness pipe of";
            let path = args.pod_dir.clone();
            return Err((status, StageError::Sys { what, path, source }));
        }
    };
    // `--private-users`: the stage maps the init's user namespace in a pod of one app; in
    // a pod of several, the init maps each app's (see [`super::apps`]).
    // When the pod's network namespace belongs to the pod's user namespace (the runner made
    // them together), the init or each app joins that one instead, already mapped.
    let pod_user_ns = prepared.user_ns;
    let joined = prepared.user_ns_fd.as_ref().map(|fd| fd.as_raw_fd());
    let user_ns = pod_user_ns.filter(|_| prepared.apps.len() == 1 && joined.is_none());
    let handshake = match user_ns.map(|_| UserNsHandshake::new()).transpose() {
        Ok(h) => h,
        Err(e) => return Err((status, StageError::Isolation(e))),
    };
    // SAFETY: this process is single-threaded (nothing here starts threads), so the child
    // may continue as a normal process.
    match unsafe { fork() } {
        Err(errno) => Err((
            status,
            StageError::Sys {
                what: "fork the pod's init for",
                path: args.pod_dir.clone(),
                source: errno,
            },
        )),
        Ok(ForkResult::Child) => {
            drop(alive_write);
            let mut status = Some(status);
            // A sandbox's init stops its pod its own way (`super::sandbox`).
            let init = match follow_stage(&alive_read, !args.sandbox) {
                Err(err) => Err(err),
                Ok(()) if args.sandbox => {
                    // SAFETY: the runner passes the exits pipe's write end under this number
                    // to a sandbox; nothing else in this process uses it.
                    let exits = args.exits_fd.map(|fd| unsafe { File::from_raw_fd(fd) });
                    let host_pid = prepared.host_pid.then_some(args.pod_dir.as_path());
                    super::sandbox::init(exits, &mut status, host_pid)
                }
                Ok(()) if prepared.apps.len() == 1 => {
                    let app = prepared.apps.into_iter().next().expect("one app");
                    let entry = match (&handshake, joined) {
                        (Some(h), _) => Some(UserNsEntry::Create(h)),
                        (None, Some(fd)) if pod_user_ns.is_some() => Some(UserNsEntry::Join(fd)),
                        _ => None,
                    };
                    pod_init(app, entry, &mut status)
                }
                Ok(()) => {
                    // SAFETY: the runner passes the exits pipe's write end under this number
                    // to a pod of several apps; nothing else in this process uses it.
                    let exits = args.exits_fd.map(|fd| unsafe { File::from_raw_fd(fd) });
                    let pod = super::apps::PodContext {
                        pod_dir: &args.pod_dir,
                        own_netns: args.netns.is_some(),
                        volumes: &prepared.volumes,
                        user_ns: pod_user_ns,
                        join_user_ns: joined,
                    };
                    super::apps::pod_init(
                        &pod,
                        prepared.apps,
                        prepared.exit_policy,
                        exits,
                        &mut status,
                    )
                }
            };
            let code = match init {
                Ok(code) => code,
                Err(err) => {
                    if let Some(status) = status.as_mut() {
                        report(status, &err);
                    }
                    SETUP_FAILED
                }
            };
            std::process::exit(code)
        }
        Ok(ForkResult::Parent { child }) => {
            let mut status = status;
            // The runner learns the init's host PID (for stop and enter).
            // One write(2) of less than PIPE_BUF bytes: atomic, never interleaved with an
            // error line the init may be writing at the same time.
            let _ = status.write_all(format!("pid {child}\n").as_bytes());
            if let (Some(handshake), Some(map)) = (handshake, user_ns) {
                if let Err(err) = handshake.map_child(child, &map) {
                    report(&mut status, &StageError::Isolation(err));
                    let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
                }
            }
            drop(status);
            drop(alive_read);
            if let Some(fd) = args.exits_fd {
                // Only the init reports exits: the runner reads end-of-file when it is gone.
                let _ = nix::unistd::close(fd);
            }
            signals::forward_to(child.as_raw());
            let code = wait_for(child);
            drop(alive_write);
            Ok(code)
        }
    }
}

/// In the init: sets its parent-death signal and checks that the stage did not die before
/// (end of file on the liveness pipe: nobody would reap or stop this pod). With
/// `stop_grace`, a SIGTERM to the pod is followed by SIGKILL to the apps still running
/// [`signals::STOP_GRACE`] later.
fn follow_stage(stage_alive: &OwnedFd, stop_grace: bool) -> Result<(), StageError> {
    set_pdeathsig(Signal::SIGKILL).map_err(|source| StageError::Sys {
        what: "set the parent-death signal",
        path: PathBuf::from("/"),
        source,
    })?;
    if matches!(
        nix::unistd::read(stage_alive.as_raw_fd(), &mut [0u8]),
        Ok(0)
    ) {
        return Err(StageError::Sys {
            what: "follow the stage, which is gone, as init of",
            path: PathBuf::from("/"),
            source: Errno::ESRCH,
        });
    }
    let _ = set_name(c"rkt-init");
    if stop_grace {
        signals::kill_after_stop(signals::STOP_GRACE).map_err(|source| StageError::Sys {
            what: "set the stop grace period's signal handler in",
            path: PathBuf::from("/"),
            source,
        })?;
    }
    Ok(())
}

/// How the init of a pod of one app enters the pod's user namespace.
enum UserNsEntry<'a> {
    /// Creates it, and the stage maps it.
    Create(&'a UserNsHandshake),
    /// Joins the one the runner made with the pod's network namespace (descriptor).
    Join(RawFd),
}

/// The two pipes between the init, which creates the pod's user namespace, and the stage,
/// its parent, which maps it from outside: the init writes a byte once it has unshared, the
/// stage one once the maps are written (or closes its end, having failed).
struct UserNsHandshake {
    unshared: (OwnedFd, OwnedFd),
    mapped: (OwnedFd, OwnedFd),
    /// The host's `/proc`, where the stage finds the init's maps.
    host_proc: OwnedFd,
}

impl UserNsHandshake {
    fn new() -> Result<UserNsHandshake, isolation::IsolationError> {
        let pipe = || {
            pipe2(OFlag::O_CLOEXEC).map_err(|source| isolation::IsolationError::Io {
                what: "create the user namespace pipes of",
                path: PathBuf::from("the pod"),
                source: source.into(),
            })
        };
        Ok(UserNsHandshake {
            unshared: pipe()?,
            mapped: pipe()?,
            host_proc: isolation::user_ns::open_host_proc()?,
        })
    }

    /// In the stage: waits for the init `child` to unshare, then writes its maps.
    fn map_child(
        self,
        child: Pid,
        map: &isolation::user_ns::IdMap,
    ) -> Result<(), isolation::IsolationError> {
        let UserNsHandshake {
            unshared: (unshared, unshared_w),
            mapped: (mapped_r, mapped),
            host_proc,
        } = self;
        drop((unshared_w, mapped_r));
        // End of file: the init failed before unsharing and reports that itself.
        if !matches!(read_byte(&unshared), Ok(1)) {
            return Ok(());
        }
        isolation::user_ns::write_maps(&host_proc, child, map)?;
        let _ = nix::unistd::write(&mapped, b"m");
        Ok(())
    }

    /// In the init: creates the user namespace, has the stage map it and becomes its root.
    fn enter(&self) -> Result<(), isolation::IsolationError> {
        isolation::user_ns::unshare()?;
        let _ = nix::unistd::write(&self.unshared.1, b"u");
        if !matches!(read_byte(&self.mapped.0), Ok(1)) {
            return Err(isolation::IsolationError::Unsupported {
                what: "--private-users: the stage did not map the pod's user namespace".into(),
            });
        }
        isolation::user_ns::become_root()
    }
}

/// The pod's namespaces, and each app prepared: its environment, its isolation compiled
/// (so that a filter or capability this kernel cannot take fails the pod before anything
/// of it runs), and, in a pod of one app, its root mounted in the stage's own mount
/// namespace (each app of several gets a mount namespace of its own later).
fn prepare(args: &InitArgs) -> Result<PreparedPod, StageError> {
    set_pdeathsig(Signal::SIGKILL).map_err(|source| StageError::Sys {
        what: "set the parent-death signal for",
        path: args.pod_dir.clone(),
        source,
    })?;
    // The runner may have died before the signal was set: then it never comes.
    if getppid().as_raw() != args.runner_pid {
        return Err(StageError::RunnerGone {
            pid: args.runner_pid,
        });
    }
    // Shown by ps instead of "exe" (we run as /proc/self/exe); cosmetic, failure ignored.
    let _ = set_name(c"rkt-stage");
    let manifest_path = args.pod_dir.join(crate::podstore::store::MANIFEST_FILE);
    let bytes = std::fs::read(&manifest_path).map_err(|source| StageError::Io {
        what: "read",
        path: manifest_path.clone(),
        source,
    })?;
    let manifest: PodManifest =
        serde_json::from_slice(&bytes).map_err(|source| StageError::Manifest {
            path: manifest_path,
            source,
        })?;
    if manifest.apps.len() > signals::MAX_TARGETS {
        return Err(StageError::Reported(format!(
            "a pod runs at most {} apps, this one has {}",
            signals::MAX_TARGETS,
            manifest.apps.len()
        )));
    }
    // Settled by the runner before it started us (absent only for a pod recorded by an
    // older rkt: then the defaults).
    let record =
        PodState::load(&args.pod_dir).map_err(|e| StageError::Reported(crate::error::chain(&e)))?;
    let (host_pid, host_ipc) = (manifest.host_pid(), manifest.host_ipc());
    let mut apps = Vec::with_capacity(manifest.apps.len());
    for (index, app) in manifest.apps.into_iter().enumerate() {
        let app_dir = crate::image_pod::app_dir(&args.pod_dir, index, &app.name);
        let log_fds = args
            .log_fds
            .iter()
            .find(|(i, _)| *i == index)
            .map_or([None, None], |(_, fds)| *fds);
        let fds = (args.listen_fds, [None, log_fds[0], log_fds[1]]);
        apps.push(super::app::prepare_app(app, &app_dir, &record, index, fds)?);
    }
    // Before the init is forked: every process of the pod starts inside (every pod has a
    // cgroup, for its pids limit at least), where the runner recorded it.
    let uuid = args
        .pod_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    isolation::cgroups::detect()
        .join(&record.pod_cgroup(&uuid))
        .map_err(StageError::Isolation)?;

    // The pod-wide settings: the first app's, or a sandbox's own (it may have no app yet).
    let first = apps.first().map(|a| &a.app);
    let pod_user_ns = record.app_isolation(0).user_ns;
    let mut user_ns_fd = None;
    if let Some(netns) = &args.netns {
        let file = File::open(netns).map_err(|source| StageError::Io {
            what: "open network namespace",
            path: netns.clone(),
            source,
        })?;
        setns(file.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| StageError::Sys {
            what: "enter network namespace",
            path: netns.clone(),
            source,
        })?;
        if pod_user_ns.is_some() {
            isolation::user_ns::open_pod_network().map_err(StageError::Isolation)?;
            user_ns_fd =
                crate::netns::owner_of(file.as_fd()).map_err(|source| StageError::Sys {
                    what: "find the user namespace owning the network namespace",
                    path: netns.clone(),
                    source,
                })?;
        }
    }
    let mut namespaces = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWUTS;
    // A sandbox asked for the host's PID namespace keeps the runner's.
    if !host_pid {
        namespaces |= CloneFlags::CLONE_NEWPID;
    }
    // A sandbox asked for the host's IPC namespace keeps the runner's.
    if !host_ipc && first.map_or(IpcMode::Private, |a| a.ipc) == IpcMode::Private {
        namespaces |= CloneFlags::CLONE_NEWIPC;
    }
    let overlays = enter_mount_template(&apps);
    unshare(namespaces).map_err(|source| StageError::Sys {
        what: "unshare mount, UTS, IPC and PID namespaces for",
        path: args.pod_dir.clone(),
        source,
    })?;
    for (tree, rootfs) in overlays {
        mount_template::attach(tree, &rootfs)
            .map_err(|e| StageError::Reported(crate::error::chain(&e)))?;
    }
    mounts::make_root_slave(&isolation::syscall::Linux)?;
    mounts::detach_netns_mounts(&isolation::syscall::Linux)?;
    // Once for the pod; each app mounts what it uses with its root.
    volumes::create_empty_volumes(&args.pod_dir, &manifest.volumes, pod_user_ns.as_ref())?;
    if let [only] = &mut apps[..] {
        mount_app_root(
            &isolation::syscall::Linux,
            &args.pod_dir,
            only,
            args.netns.is_some(),
            &manifest.volumes,
        )?;
    }
    sethostname(&args.hostname).map_err(|source| StageError::Hostname {
        hostname: args.hostname.clone(),
        source,
    })?;
    signals::install().map_err(|source| StageError::Sys {
        what: "install signal handlers for",
        path: args.pod_dir.clone(),
        source,
    })?;
    Ok(PreparedPod {
        user_ns_fd,
        user_ns: pod_user_ns,
        apps,
        exit_policy: manifest.exit_policy,
        host_pid,
        volumes: manifest.volumes,
    })
}

/// On a busy host, enters the mount template ([`mount_template`]) so that the pod's mount
/// namespace is copied from it rather than from the host's, and returns the apps' overlays
/// cloned from the host's namespace beforehand, to attach in the pod's. Without a template,
/// or if cloning an overlay fails, stays in the host's namespace and returns none.
fn enter_mount_template(apps: &[PreparedApp]) -> Vec<(OwnedFd, PathBuf)> {
    let Some(template) = mount_template::for_new_pod() else {
        return Vec::new();
    };
    let mut overlays = Vec::new();
    for rootfs in apps.iter().filter_map(|a| a.app.rootfs.as_ref()) {
        match mount_template::clone_pod_overlay(rootfs) {
            Ok(Some(tree)) => overlays.push((tree, rootfs.clone())),
            Ok(None) => {}
            Err(_) => return Vec::new(),
        }
    }
    match template.enter() {
        Ok(()) => overlays,
        Err(_) => Vec::new(),
    }
}

/// PID 1 of a pod of one app: enters the app's root, then forks the app. It closes its copy
/// of the status pipe once the app is forked, so that the runner sees end-of-file when the
/// app has been executed.
fn pod_init(
    mut app: PreparedApp,
    user_ns: Option<UserNsEntry>,
    status: &mut Option<File>,
) -> Result<i32, StageError> {
    let env = enter_app(&isolation::syscall::Linux, &mut app)?;
    // Last: the pod's other namespaces stay the host's, out of the app's reach.
    match user_ns {
        Some(UserNsEntry::Create(handshake)) => handshake.enter(),
        Some(UserNsEntry::Join(fd)) => {
            isolation::user_ns::join(fd).and_then(|()| isolation::user_ns::become_root())
        }
        None => Ok(()),
    }
    .map_err(StageError::Isolation)?;
    let plan = ExecPlan::new(&app.app.exec, &env, app.isolation.prepared.identity())?;
    let exe = plan.exe.clone();

    signals::block(); // until the app is forwarded to (see `signals::block`)
                      // SAFETY: single-threaded process (see the module docs).
    let forked = unsafe { fork() }.map_err(|source| StageError::Sys {
        what: "fork the app",
        path: exe,
        source,
    });
    let forked = forked.inspect_err(|_| signals::unblock())?;
    match forked {
        ForkResult::Child => {
            let err = plan.exec(&app.isolation);
            if let Some(status) = status.as_mut() {
                report(status, &err);
            }
            // SAFETY: _exit(2) ends this child without running the parent's exit handlers.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            drop(status.take());
            signals::forward_to(child.as_raw());
            signals::unblock();
            Ok(reap_until(child))
        }
    }
}

/// Waits for `child`, returning its exit status (128 + signal number if killed).
fn wait_for(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(status) => {
                if let Some(code) = exit_code(status) {
                    return code;
                }
            }
            Err(Errno::EINTR) => continue,
            Err(_) => return SETUP_FAILED,
        }
    }
}

/// As PID 1: reaps every child until `app` is gone; returns the app's exit status.
fn reap_until(app: Pid) -> i32 {
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(status) if status.pid() == Some(app) => {
                if let Some(code) = exit_code(status) {
                    return code;
                }
            }
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return SETUP_FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::StageSpec;
    use std::path::Path;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_runners_arguments_parse_back() {
        let spec = StageSpec {
            exe: Path::new("/proc/self/exe"),
            pod_dir: Path::new("/var/lib/rkt/pods/x"),
            hostname: "rkt-x",
            netns: Some(Path::new("/run/netns/rkt-x")),
            null_stdio: Default::default(),
            several_apps: false,
            app_names: &[],
            log_streams: Default::default(),
            sandbox: false,
        };
        let argv = InitArgs::parse(InitArgs::to_args(&spec, 7, None, 4242, 0, &[])).unwrap();
        assert_eq!(argv.pod_dir, spec.pod_dir);
        assert_eq!(argv.hostname, "rkt-x");
        assert_eq!(argv.netns.as_deref(), spec.netns);
        assert_eq!(argv.status_fd, 7);
        assert_eq!(argv.runner_pid, 4242);
        let host = StageSpec {
            netns: None,
            ..spec
        };
        let log_fds = [(0, [Some(11), None]), (2, [Some(12), Some(13)])];
        let args = InitArgs::to_args(&host, 7, Some(9), 4242, 2, &log_fds);
        let fd = args_pipe(&args).unwrap();
        let read = read_args(&OsString::from(fd.as_raw_fd().to_string())).unwrap();
        std::mem::forget(fd); // closed by read_args
        assert_eq!(read, args, "the arguments' pipe gives them back");
        let argv = InitArgs::parse(read).unwrap();
        assert_eq!(argv.netns, None);
        assert_eq!(argv.exits_fd, Some(9));
        assert_eq!(argv.listen_fds, 2);
        assert_eq!(argv.log_fds, log_fds);
        assert!(parse_log_fds(&"0:3".into())
            .unwrap_err()
            .contains("\"0:3\""));
        assert!(parse_log_fds(&"x:3:4".into()).is_err());
    }

    #[test]
    fn bad_arguments_are_named() {
        let base = ["--pod-dir", "/p", "--hostname", "h", "--status-fd"];
        let err = |extra: &[&str]| {
            let mut args = base.to_vec();
            args.extend(extra);
            InitArgs::parse(os(&args)).unwrap_err()
        };
        assert_eq!(err(&[]), "--status-fd needs a value");
        assert!(err(&["x"]).contains("\"x\" is not a number"));
        assert!(err(&["3", "--bogus", "1"]).contains("\"--bogus\""));
        let e = InitArgs::parse(os(&["--status-fd", "3", "--hostname", "h"])).unwrap_err();
        assert_eq!(e, "--pod-dir is required");
        let e = InitArgs::parse(os(&[
            "--pod-dir",
            "/p",
            "--hostname",
            "h",
            "--status-fd",
            "3",
        ]))
        .unwrap_err();
        assert_eq!(e, "--runner-pid is required");
    }
}
