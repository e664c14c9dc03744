//! The process that runs the app inside the pod's namespaces.
//!
//! Design: the runner (`rkt run`) re-executes its own binary (`/proc/self/exe`) as the hidden
//! command `rkt stage1-init` ([`init`]) instead of forking and continuing in Rust code. The
//! re-executed process starts single-threaded, with a clean address space, so it can unshare
//! namespaces (`CLONE_NEWNS` refuses multi-threaded callers) and fork freely; the runner,
//! which may have started threads (plugin I/O, netns creation), only starts it through
//! [`std::process::Command`] without a pre-exec step, which std turns into `posix_spawn`.
//! The hidden command's arguments are parsed by hand ([`init::InitArgs`]), before the
//! binary builds its command line parser.
//!
//! Process tree: runner → stage (host PID namespace; pod's net, mount, UTS, IPC namespaces)
//! → init (PID 1 of the pod) → app. The init's host PID is recorded in the pod state for
//! `rkt stop` and `rkt enter` ([`enter`]). Signals are forwarded down the chain
//! ([`signals`]). What runs in the pod never holds the caller's terminal or any other
//! descriptor of the caller's but its standard streams: the stage starts a session of its
//! own and closes what it inherited beyond them (keeping the systemd socket-activation
//! descriptors when `LISTEN_FDS` passes them), and the runner relays a terminal through a
//! pseudo-terminal of the pod's or a pipe ([`stdio`]). The stage is executed from a copy
//! of rkt the pod cannot write ([`sealed_exe`]), never from the host's inode.
//!
//! Takes from [`crate::podstore`] (the manifest) and [`crate::netns`]; may not touch the
//! pod's life cycle or networking, which the runner drives around it.

mod app;
pub mod app_logs;
mod apps;
pub mod enter;
pub mod env;
pub mod init;
pub mod launch;
pub mod mounts;
pub mod sandbox;
pub mod sealed_exe;
pub mod signals;
pub mod stdio;
pub mod volumes;

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::unistd::pipe2;

/// The hidden command name the runner re-executes itself with.
pub const INIT_COMMAND: &str = "stage1-init";

/// What can go wrong running the app. Variants name the path, program or pod they are about.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("cannot start the pod stage {exe}")]
    Spawn {
        exe: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot {what} {path}{}", crate::netns::root_hint(*source))]
    Sys {
        what: &'static str,
        path: PathBuf,
        source: Errno,
    },
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot mount {target}{}", crate::netns::root_hint(*source))]
    Mount { target: PathBuf, source: Errno },
    #[error("{path} is not a valid pod manifest")]
    Manifest {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot set the hostname to {hostname:?}")]
    Hostname { hostname: String, source: Errno },
    #[error("the pod has no command to run")]
    NoCommand,
    #[error("command {program:?} not found in the app's PATH {path:?}")]
    NotFound { program: String, path: String },
    #[error("cannot execute {program}")]
    Exec { program: PathBuf, source: Errno },
    #[error("argument or variable contains a NUL byte: {text:?}")]
    NulByte { text: String },
    #[error("{0}")]
    Reported(String),
    #[error("app {name}")]
    App {
        name: String,
        source: Box<StageError>,
    },
    #[error("pod isolation")]
    Isolation(#[from] crate::isolation::IsolationError),
    #[error(transparent)]
    Volume(#[from] volumes::VolumeMountError),
    #[error(transparent)]
    Log(#[from] crate::logs::LogError),
    #[error(transparent)]
    ImageApp(#[from] crate::image_pod::process::ProcessError),
    #[error("the runner (PID {pid}) ended before the pod stage started")]
    RunnerGone { pid: i32 },
    #[error("the pod stage ended ({status}) before starting the app")]
    NoStart { status: ExitStatus },
    #[error("cannot wait for the pod stage")]
    Wait { source: std::io::Error },
    #[error("cannot run {program:?} in the pod")]
    EnterSpawn {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot enter pod (init PID {pid}): {what}")]
    Enter {
        pid: i32,
        what: String,
        source: Errno,
    },
}

/// How the runner starts the stage.
#[derive(Debug, Clone)]
pub struct StageSpec<'a> {
    /// The `rkt` binary to re-execute (normally `/proc/self/exe`), from a sealed copy.
    pub exe: &'a Path,
    pub pod_dir: &'a Path,
    pub hostname: &'a str,
    /// The pod's network namespace; `None` for `--net=host`.
    pub netns: Option<&'a Path>,
    /// The app's standard streams that are `/dev/null` instead of the runner's.
    pub null_stdio: NullStdio,
    /// The pod has several apps: the init reports each one's exit status.
    pub several_apps: bool,
    /// The apps' names, by index: their logs are named after them.
    pub app_names: &'a [String],
    /// Which of the apps' output streams go to their logs ([`app_logs`]).
    pub log_streams: app_logs::LogStreams,
    /// A sandbox: no app yet; the init reaps the apps `rkt app start` adds and reports
    /// each one's exit by PID ([`sandbox`]), and ends only when stopped.
    pub sandbox: bool,
}

/// Which of the app's standard streams are `/dev/null` instead of the runner's
/// (`--stdin=null`, `--interactive=false`, `--stdout=null`, `--stderr=null`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NullStdio {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

/// A stage whose apps have been executed.
#[derive(Debug)]
pub struct Started {
    child: Child,
    /// The relay of the pod's streams to the runner's terminal ([`stdio`]).
    relay: Option<stdio::Relay>,
    /// The copies of the apps' logged streams into their logs ([`app_logs`]).
    logs: Option<app_logs::LogCopies>,
    /// Host PID of the pod's init.
    pub init_pid: i32,
    /// In a pod of several apps: each app's PID in the pod's PID namespace, by index.
    pub app_pids: Vec<(usize, i32)>,
    /// In a pod of several apps: the read end of the pipe the init reports exits on.
    exits: Option<File>,
}

/// How a pod's stage ended.
#[derive(Debug)]
pub struct Ended {
    /// The pod's exit status: its app's, or in a pod of several apps the one its exit
    /// policy settled.
    pub status: i32,
    /// In a pod of several apps: each app's exit status, by index, in the order they
    /// ended (an app killed with the init is missing), unless they were taken with
    /// [`Started::take_exits`].
    pub app_exits: Vec<(usize, i32)>,
}

/// Starts the stage and returns once the app has been executed (or the stage failed, with
/// the stage's own message). Call [`signals::install`] first so that signals to the runner
/// reach the pod.
pub fn start(spec: &StageSpec) -> Result<Started, StageError> {
    let spawn_err = |source| StageError::Spawn {
        exe: spec.exe.to_path_buf(),
        source,
    };
    let (read_end, write_end) = pipe2(OFlag::O_CLOEXEC).map_err(|e| spawn_err(e.into()))?;
    // The stage inherits the write end as a copy without close-on-exec, made just for the
    // spawn: no other thread of the runner starts processes at this point (setup's threads
    // are joined), so none inherits it. No pre-exec step is needed (the stage sets its
    // parent-death signal itself and checks that the runner is still its parent), so std
    // starts the stage with posix_spawn (a vfork-style clone) instead of copying the
    // runner's page tables with fork.
    // SAFETY: dup(2) returns a new descriptor that nothing else owns.
    let inherited = unsafe {
        OwnedFd::from_raw_fd(
            nix::unistd::dup(write_end.as_raw_fd()).map_err(|e| spawn_err(e.into()))?,
        )
    };
    drop(write_end);
    let exits = if spec.several_apps || spec.sandbox {
        let (read_end, write_end) = pipe2(OFlag::O_CLOEXEC).map_err(|e| spawn_err(e.into()))?;
        if spec.sandbox {
            // A sandbox's init reports every process it reaps, and must not block on the
            // runner while an `rkt app` command holds the apps' lock: room for tens of
            // thousands of reports (a failure leaves the default 64 KiB).
            // SAFETY: F_SETPIPE_SZ takes an integer.
            unsafe { libc::fcntl(read_end.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        }
        // SAFETY: as above.
        let inherited = unsafe {
            OwnedFd::from_raw_fd(
                nix::unistd::dup(write_end.as_raw_fd()).map_err(|e| spawn_err(e.into()))?,
            )
        };
        Some((File::from(read_end), inherited))
    } else {
        None
    };
    let sealed = sealed_exe::seal(spec.exe)?;
    let logs = app_logs::AppLogs::plan(spec.pod_dir, spec.app_names, spec.log_streams)?;
    // The arguments, with their host paths, go on a pipe: the stage's command line is the
    // pod's init's too, which `ps` in the pod shows.
    let args = init::InitArgs::to_args(
        spec,
        inherited.as_raw_fd(),
        exits.as_ref().map(|(_, w)| w.as_raw_fd()),
        std::process::id(),
        listen_fds(),
        &logs.fds(),
    );
    let args = init::args_pipe(&args).map_err(spawn_err)?;
    let mut cmd = Command::new(sealed.path());
    cmd.arg0("rkt")
        .arg(INIT_COMMAND)
        .args([init::ARGS_FD, &args.as_raw_fd().to_string()])
        // Only the UUID is shown: for `ps` on the host and the leak checker.
        .args([
            init::POD_UUID.as_ref(),
            spec.pod_dir.file_name().unwrap_or_default(),
        ]);
    // The stage's streams are the app's (but those that go to the apps' logs); the stage
    // reports on the status pipe.
    let mut null = spec.null_stdio;
    null.stdout |= spec.log_streams.stdout;
    null.stderr |= spec.log_streams.stderr;
    let streams = stdio::PodStdio::plan(null)?;
    streams.apply(&mut cmd)?;
    let spawned = cmd.spawn();
    drop((inherited, sealed, args));
    let relay = streams.start();
    let logs = logs.start();
    let exits = exits.map(|(read_end, inherited)| {
        drop(inherited);
        read_end
    });
    let mut child = spawned.map_err(spawn_err)?;
    signals::forward_to(child.id() as i32);

    let mut report = String::new();
    let read = File::from(read_end).read_to_string(&mut report);
    let mut init_pid = None;
    let mut app_pids = Vec::new();
    let mut errors = Vec::new();
    for line in report.lines() {
        if let Some(pid) = line.strip_prefix("pid ") {
            init_pid = pid.trim().parse::<i32>().ok();
        } else if let Some(app) = line.strip_prefix("app ") {
            app_pids.extend(parse_pair(app));
        } else if let Some(msg) = line.strip_prefix("error ") {
            errors.push(msg.to_string());
        }
    }
    let failed = |child: &mut Child, logs: app_logs::LogCopies, err: StageError| {
        let _ = child.wait();
        signals::stop_forwarding();
        logs.finish();
        Err(err)
    };
    let relay = Some(relay);
    if let Err(source) = read {
        return failed(&mut child, logs, StageError::Wait { source });
    }
    if !errors.is_empty() {
        return failed(&mut child, logs, StageError::Reported(errors.join("; ")));
    }
    match init_pid {
        Some(init_pid) => Ok(Started {
            child,
            relay,
            logs: Some(logs),
            init_pid,
            app_pids,
            exits,
        }),
        None => {
            let status = child.wait().map_err(|source| StageError::Wait { source })?;
            signals::stop_forwarding();
            if let Some(relay) = relay {
                relay.finish(None);
            }
            logs.finish();
            Err(StageError::NoStart { status })
        }
    }
}

/// The apps' exits as the init reports them, in the order they ended: `(index, status)`.
/// Iterating blocks until the next one, and ends when the init is gone.
#[derive(Debug)]
pub struct AppExits(std::io::BufReader<File>);

impl Iterator for AppExits {
    type Item = (usize, i32);

    fn next(&mut self) -> Option<(usize, i32)> {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            match self.0.read_line(&mut line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {
                    if let Some(exit) = line.strip_prefix("exit ").and_then(parse_pair) {
                        return Some(exit);
                    }
                }
            }
        }
    }
}

impl Started {
    /// In a sandbox: the apps' exits as the init reports them, `(pid in the pod, status)`;
    /// iterating blocks until the next, and ends when the init is gone.
    pub fn take_sandbox_exits(&mut self) -> Option<impl Iterator<Item = (i32, i32)>> {
        use std::io::BufRead;
        self.exits.take().map(|f| {
            std::io::BufReader::new(f)
                .lines()
                .map_while(Result::ok)
                .filter_map(|line| sandbox::parse_exit(&line))
        })
    }

    /// In a pod of several apps: the apps' exits as they happen (then [`Started::wait`]
    /// reports none itself).
    pub fn take_exits(&mut self) -> Option<AppExits> {
        self.exits
            .take()
            .map(|f| AppExits(std::io::BufReader::new(f)))
    }

    /// Waits for the pod to end.
    pub fn wait(mut self) -> Result<Ended, StageError> {
        let status = self
            .child
            .wait()
            .map_err(|source| StageError::Wait { source })?;
        signals::stop_forwarding();
        // Every process of the pod is gone, and with them the ends of its streams.
        if let Some(relay) = self.relay.take() {
            relay.finish(None);
        }
        // Kept for what it wrote before: a log that could not be written to has no place
        // to say so but the runner's stderr.
        if let Some(logs) = self.logs.take() {
            for failure in logs.finish() {
                eprintln!("rkt: {failure}");
            }
        }
        // The init is gone, so the pipe holds all it will ever say.
        let app_exits = self.take_exits().map(Iterator::collect).unwrap_or_default();
        Ok(Ended {
            status: exit_status_code(status),
            app_exits,
        })
    }
}

/// The stage's own commands, which a binary serving as the stage (`rkt`, `rkt-cri`) runs
/// when it is executed as one of them: `cmd` is its first argument, `args` the rest. `None`:
/// `cmd` is none of them (the binary goes on with its own commands).
pub fn main_if_stage_command(
    cmd: &std::ffi::OsStr,
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Option<i32> {
    if cmd == INIT_COMMAND {
        Some(init::main_from_args(args))
    } else if cmd == enter::ENTER_COMMAND {
        Some(enter::helper_main_from_args(args))
    } else if cmd == sandbox::START_COMMAND {
        Some(sandbox::helper_main_from_args(args))
    } else if cmd == app_logs::LOG_COMMAND {
        Some(app_logs::logger_main_from_args(args))
    } else {
        None
    }
}

/// Has the child `cmd` spawns keep `fds` (close-on-exec in this process) across its exec,
/// under the same numbers (passed on its command line). The flag is cleared in the child
/// alone, between fork and exec: a copy without it in this process would be inherited by
/// any child another thread spawns meanwhile (a multi-threaded server such as rkt-cri),
/// which would hold the pipe open for its life. The caller keeps the descriptors open
/// until the spawn returns.
pub fn inherit_in_child(cmd: &mut Command, fds: Vec<RawFd>) {
    // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls
    // are allowed: fcntl(2) is one, on the child's copies of descriptors open in the parent.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::fcntl(*fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The systemd socket-activation descriptors passed to this process (`LISTEN_FDS=N` with
/// `LISTEN_PID` this process or unset): descriptors 3 to 3 + N - 1, which the pod's apps
/// get; 0 without.
pub fn listen_fds() -> i32 {
    let for_us = std::env::var("LISTEN_PID")
        .map(|pid| pid.trim() == std::process::id().to_string())
        .unwrap_or(true);
    let count = std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.trim().parse::<i32>().ok())
        .filter(|n| (1..=1024).contains(n));
    match count {
        Some(n) if for_us => n,
        _ => 0,
    }
}

/// `INDEX NUMBER`, as the init reports apps' PIDs and exit statuses.
fn parse_pair(text: &str) -> Option<(usize, i32)> {
    let (index, number) = text.trim().split_once(' ')?;
    Some((index.parse().ok()?, number.parse().ok()?))
}

/// The shell-style exit status: the code, or 128 + signal number.
pub fn exit_status_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(init::SETUP_FAILED)
}
