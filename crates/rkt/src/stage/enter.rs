//! `rkt enter`: run a command inside a running pod's namespaces (network, mount, UTS, IPC
//! and PID of the pod's init) and root directory.
//!
//! Two processes, as for `rkt run`: `rkt enter` itself stays on the host, holding the
//! caller's terminal and descriptors, and starts the hidden helper `rkt stage1-enter`
//! ([`helper_main_from_args`]) from a copy of rkt the pod cannot write
//! ([`super::sealed_exe`]), with relayed streams ([`super::stdio`]): a pseudo-terminal of
//! the pod's when rkt's stdin is a terminal, pipes in place of any other terminal, never
//! the caller's own descriptors beyond its files and pipes on 0 to 2. So no process of the
//! pod can type into the caller's terminal, nor reach the host's rkt binary through
//! `/proc/<pid>/exe` or a `#!/proc/self/exe` script.
//!
//! The helper closes every other descriptor, starts a session of its own, joins the pod's
//! namespaces (joining a mount namespace requires a single-threaded caller, which a fresh
//! helper is; the PID namespace applies to children, so the command is spawned after
//! joining), narrows itself as the pod's app was narrowed (capabilities, user and groups,
//! seccomp filter: [`crate::isolation::apply`]; the masked paths are the pod's mount
//! namespace's already), so that the command inherits exactly the app's restrictions, and
//! spawns the command in a session of its own, with the pod's terminal as its controlling
//! terminal when it has one. Failures before the command runs come back to `rkt enter` on a
//! status pipe, as the stage's do.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use nix::errno::Errno;
use nix::sched::{setns, CloneFlags};
use nix::unistd::{chdir, chroot, fchdir};

use super::{exit_status_code, signals, StageError};
use crate::isolation::Isolation;

/// Namespaces joined, in this order (mount last: it changes the root).
pub(super) const NAMESPACES: [(&str, CloneFlags); 5] = [
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
            Err(_) => crate::procfs::children(init_pid),
        };
    // The pod's namespace is the init's innermost: a child's PID there is at the init's
    // depth of its `NSpid` (an app in a PID namespace of its own has one more, its 1).
    use crate::procfs::ns_pids;
    let depth = ns_pids(init_pid).len().checked_sub(1)?;
    children
        .into_iter()
        .find(|child| ns_pids(*child).get(depth) == Some(&pod_pid))
}

/// The hidden command `rkt enter` starts its helper with.
pub const ENTER_COMMAND: &str = "stage1-enter";

/// What to enter, and how.
#[derive(Debug, Clone)]
pub struct EnterSpec<'a> {
    /// The `rkt` binary (normally `/proc/self/exe`), executed from a sealed copy.
    pub exe: &'a std::path::Path,
    /// The host PID of the process whose namespaces and root are entered.
    pub pid: i32,
    /// The pod's cgroup, as its record places it: the command runs in it, counted against
    /// its pids and memory limits like the pod's own processes.
    pub cgroup: Option<&'a crate::isolation::cgroups::PodCgroup>,
    pub argv: &'a [String],
    /// The command's whole environment.
    pub env: &'a [(OsString, OsString)],
    /// The pod's app's isolation, which the command gets too.
    pub isolation: &'a Isolation,
    /// A pseudo-terminal for the command: yes, no, or when rkt's stdin is a terminal.
    pub tty: Option<bool>,
}

/// Runs `spec.argv` in the pod through the helper and relays its streams; returns the
/// command's exit status.
pub fn enter(spec: &EnterSpec) -> Result<i32, StageError> {
    let (argv, pid) = (spec.argv, spec.pid);
    if argv.is_empty() {
        return Err(StageError::NoCommand);
    }
    let isolation = serde_json::to_string(spec.isolation)
        .map_err(|e| StageError::Reported(format!("cannot pass the pod's isolation: {e}")))?;
    let spawn_err = |source| StageError::Spawn {
        exe: spec.exe.to_path_buf(),
        source,
    };
    let (status_read, status_write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| spawn_err(e.into()))?;
    // The helper keeps the status pipe's end, made inheritable in it alone (a CRI server
    // execs from many threads at once).
    let inherited = status_write;
    let sealed = super::sealed_exe::seal(spec.exe)?;
    let mut cmd = Command::new(sealed.path());
    super::inherit_in_child(&mut cmd, vec![inherited.as_raw_fd()]);
    cmd.arg0("rkt")
        .arg(ENTER_COMMAND)
        .args(["--status-fd", &inherited.as_raw_fd().to_string()])
        .args(["--pid", &pid.to_string()])
        .args(["--isolation", &isolation]);
    if let Some(cgroup) = spec.cgroup {
        let cgroup = serde_json::to_string(cgroup)
            .map_err(|e| StageError::Reported(format!("cannot pass the pod's cgroup: {e}")))?;
        cmd.args(["--cgroup", &cgroup]);
    }
    for (key, value) in spec.env {
        let mut kv = key.clone();
        kv.push("=");
        kv.push(value);
        cmd.arg("--env").arg(kv);
    }
    cmd.arg("--").args(argv).env_clear();
    let streams = super::stdio::PodStdio::plan_relayed_tty(spec.tty)?;
    streams.apply(&mut cmd)?;
    signals::install().map_err(|source| StageError::Sys {
        what: "install signal forwarding for",
        path: "rkt enter".into(),
        source,
    })?;
    let spawned = cmd.spawn();
    // The command keeps its copies of the child's stream ends until dropped: with them
    // open the relay would see no end of the output before its grace ran out.
    drop((cmd, inherited, sealed));
    let relay = streams.start();
    let mut child = spawned.map_err(spawn_err)?;
    signals::forward_to(child.id() as i32);
    let mut report = String::new();
    let _ = File::from(status_read).read_to_string(&mut report);
    let status = child.wait().map_err(|source| StageError::Wait { source });
    signals::stop_forwarding();
    // A process the command left in the background may hold its streams: what it writes
    // after the command ended is not waited for long.
    relay.finish(Some(std::time::Duration::from_millis(500)));
    let errors: Vec<&str> = report
        .lines()
        .filter_map(|l| l.strip_prefix("error "))
        .collect();
    if !errors.is_empty() {
        return Err(StageError::Reported(errors.join("; ")));
    }
    Ok(exit_status_code(status?))
}

/// The helper's arguments: `--status-fd FD --pid PID --isolation JSON [--env K=V]... --
/// ARGV...`.
#[derive(Debug)]
struct HelperArgs {
    status_fd: i32,
    pid: i32,
    isolation: Isolation,
    /// The pod's cgroup.
    cgroup: Option<crate::isolation::cgroups::PodCgroup>,
    env: Vec<(OsString, OsString)>,
    argv: Vec<String>,
}

impl HelperArgs {
    fn parse(args: impl IntoIterator<Item = OsString>) -> Result<HelperArgs, String> {
        let (mut status_fd, mut pid, mut isolation) = (None, None, None);
        let mut cgroup = None;
        let mut env = Vec::new();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let flag = flag.to_string_lossy().into_owned();
            if flag == "--" {
                break;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let text = value.to_string_lossy().into_owned();
            let number = || {
                text.parse::<i32>()
                    .map_err(|_| format!("{flag}: {text:?} is not a number"))
            };
            match flag.as_str() {
                "--status-fd" => status_fd = Some(number()?),
                "--pid" => pid = Some(number()?),
                "--isolation" => {
                    isolation =
                        Some(serde_json::from_str(&text).map_err(|e| format!("--isolation: {e}"))?)
                }
                "--cgroup" => {
                    cgroup =
                        Some(serde_json::from_str(&text).map_err(|e| format!("--cgroup: {e}"))?)
                }
                "--env" => {
                    let (k, v) = text
                        .split_once('=')
                        .ok_or_else(|| format!("--env: {text:?} is not NAME=VALUE"))?;
                    env.push((k.into(), v.into()));
                }
                _ => return Err(format!("unknown argument {flag:?}")),
            }
        }
        let argv: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        let missing = |name: &str| format!("--{name} is required");
        Ok(HelperArgs {
            status_fd: status_fd.ok_or_else(|| missing("status-fd"))?,
            pid: pid.ok_or_else(|| missing("pid"))?,
            isolation: isolation.ok_or_else(|| missing("isolation"))?,
            cgroup,
            env,
            argv,
        })
    }
}

/// `rkt stage1-enter ARGS`: the helper; returns its exit status (the command's, or
/// [`super::init::SETUP_FAILED`] having reported why it could not run it).
pub fn helper_main_from_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args = match HelperArgs::parse(args) {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("rkt stage1-enter: {msg}");
            return super::init::SETUP_FAILED;
        }
    };
    super::stdio::close_inherited(&[args.status_fd]);
    let _ = nix::unistd::setsid();
    // SAFETY: `rkt enter` passes the write end of its status pipe under this number and
    // nothing else in this process uses or closes it.
    let mut status = unsafe { File::from_raw_fd(args.status_fd) };
    let _ = nix::fcntl::fcntl(
        args.status_fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    let child = join_cgroup(args.cgroup.as_ref())
        .and_then(|()| join(args.pid, &args.isolation))
        .and_then(|()| spawn(&args.argv, &args.env));
    match child {
        Ok(mut child) => {
            drop(status);
            if signals::install().is_ok() {
                signals::forward_to(child.id() as i32);
            }
            match child.wait() {
                Ok(code) => exit_status_code(code),
                Err(_) => super::init::SETUP_FAILED,
            }
        }
        Err(err) => {
            super::app::report(&mut status, &err);
            super::init::SETUP_FAILED
        }
    }
}

/// In the helper, first: moves into the pod's cgroup, so that the command is counted
/// against the pod's limits. A pod started by an rkt that made no cgroup for every pod has
/// none to join.
fn join_cgroup(cgroup: Option<&crate::isolation::cgroups::PodCgroup>) -> Result<(), StageError> {
    let Some(cgroup) = cgroup else {
        return Ok(());
    };
    match crate::isolation::cgroups::detect().join(cgroup) {
        Err(crate::isolation::IsolationError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(())
        }
        other => other.map_err(StageError::Isolation),
    }
}

/// In the helper: joins the namespaces of the process `init_pid` and its root, then
/// narrows this process by `isolation` (the pod's).
fn join(init_pid: i32, isolation: &Isolation) -> Result<(), StageError> {
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
    Ok(())
}

/// In the helper, once joined: the command, in a session of its own.
fn spawn(argv: &[String], env: &[(OsString, OsString)]) -> Result<Child, StageError> {
    let (program, args) = argv.split_first().ok_or(StageError::NoCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    // SAFETY: the helper is single-threaded; own_session only makes async-signal-safe
    // system calls.
    unsafe {
        cmd.pre_exec(|| {
            signals::reset_for_exec();
            super::stdio::own_session().map_err(std::io::Error::from)
        });
    }
    cmd.spawn().map_err(|source| StageError::EnterSpawn {
        program: program.clone(),
        source,
    })
}
