//! The apps' logs, on the runner's side: for each app whose stdout or stderr is `log`, a pipe
//! per stream whose write end the stage gives the app (`--log-fds`, see [`super::init`]) and
//! whose read end a thread of the runner copies into the app's log file
//! ([`crate::logs::writer`]), until every process holding the write end is gone.
//!
//! A log is `logs/<app>.log` in the pod's directory, so it lives as long as the pod and
//! `rkt logs` finds it there; the copy never stops reading while the app writes, so the app
//! never blocks on a reader that went away.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use nix::fcntl::OFlag;
use nix::unistd::pipe2;

use super::init::AppLogFds;
use super::launch::{Launch, Launcher};
use super::StageError;
use crate::logs::writer::{copy_pipe, LogFile};
use crate::logs::{LogConfig, LogStream};

/// Which of the apps' output streams go to their logs, and how the logs rotate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStreams {
    pub stdout: bool,
    pub stderr: bool,
    pub config: LogConfig,
}

impl LogStreams {
    /// Whether any stream is logged.
    pub fn any(&self) -> bool {
        self.stdout || self.stderr
    }
}

/// The directory of a pod's logs.
pub fn logs_dir(pod_dir: &Path) -> PathBuf {
    pod_dir.join("logs")
}

/// Where the log of the app `name` of the pod in `pod_dir` is.
pub fn log_path(pod_dir: &Path, name: &str) -> PathBuf {
    logs_dir(pod_dir).join(format!("{name}.log"))
}

/// The pipes of the apps' logged streams, made before the stage starts.
#[derive(Debug, Default)]
pub(super) struct AppLogs {
    /// By app index: the write ends the stage inherits (not close-on-exec).
    inherited: Vec<(usize, [Option<OwnedFd>; 2])>,
    /// The read ends, each with its stream and log.
    copies: Vec<(OwnedFd, LogStream, Arc<LogFile>)>,
}

fn sys<'a>(what: &'static str, path: &'a Path) -> impl Fn(nix::errno::Errno) -> StageError + 'a {
    move |source| StageError::Sys {
        what,
        path: path.to_path_buf(),
        source,
    }
}

impl AppLogs {
    /// Opens each app's log and makes its pipes; nothing when no stream is logged.
    pub(super) fn plan(
        pod_dir: &Path,
        apps: &[String],
        streams: LogStreams,
    ) -> Result<AppLogs, StageError> {
        let mut logs = AppLogs::default();
        if !streams.any() {
            return Ok(logs);
        }
        let dir = logs_dir(pod_dir);
        std::fs::create_dir_all(&dir).map_err(|e| StageError::Sys {
            what: "create",
            path: dir.clone(),
            source: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
        })?;
        for (index, name) in apps.iter().enumerate() {
            let path = log_path(pod_dir, name);
            let log = Arc::new(LogFile::create(&path, streams.config)?);
            let mut fds = [None, None];
            for (slot, (logged, stream)) in fds.iter_mut().zip([
                (streams.stdout, LogStream::Stdout),
                (streams.stderr, LogStream::Stderr),
            ]) {
                if !logged {
                    continue;
                }
                let (read, write) =
                    pipe2(OFlag::O_CLOEXEC).map_err(sys("make a pipe for", &path))?;
                // The stage's copy, without close-on-exec; the runner starts no other
                // process before the stage (see `super::start`).
                let inherited =
                    nix::unistd::dup(write.as_raw_fd()).map_err(sys("duplicate", &path))?;
                // SAFETY: dup(2) returned a new descriptor that nothing else owns.
                *slot = Some(unsafe { OwnedFd::from_raw_fd(inherited) });
                logs.copies.push((read, stream, log.clone()));
            }
            logs.inherited.push((index, fds));
        }
        Ok(logs)
    }

    /// The descriptors for `--log-fds`.
    pub(super) fn fds(&self) -> Vec<AppLogFds> {
        self.inherited
            .iter()
            .map(|(index, [out, err])| {
                let raw = |fd: &Option<OwnedFd>| fd.as_ref().map(AsRawFd::as_raw_fd);
                (*index, [raw(out), raw(err)])
            })
            .collect()
    }

    /// Once the stage is spawned: closes the runner's copies of the write ends and starts
    /// copying.
    pub(super) fn start(self) -> LogCopies {
        drop(self.inherited);
        let threads = self
            .copies
            .into_iter()
            .filter_map(|(read, stream, log)| {
                std::thread::Builder::new()
                    .name(format!("log-{stream}"))
                    .spawn(move || copy_pipe(File::from(read), stream, &log))
                    .ok()
            })
            .collect();
        LogCopies { threads }
    }
}

/// The copies into the apps' logs, running.
#[derive(Debug)]
pub(super) struct LogCopies {
    threads: Vec<JoinHandle<Result<u64, crate::logs::LogError>>>,
}

impl LogCopies {
    /// Waits for every copy to end (the pod's processes are gone) and says what failed.
    pub(super) fn finish(self) -> Vec<String> {
        self.threads
            .into_iter()
            .filter_map(|t| match t.join() {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(crate::error::chain(&e)),
                Err(_) => Some("a log's copy panicked".into()),
            })
            .collect()
    }
}

/// The hidden command of a sandbox app's monitor (`rkt app start` runs one per app whose
/// streams are logged or attachable): a process of its own, in a session of its own, that
/// holds the app's streams (or its terminal) for as long as the app writes, copies its
/// output into its log and to attached clients ([`crate::attach`]), and gives it their
/// input; so the log and the streams outlive `rkt app start`.
pub const LOG_COMMAND: &str = "stage1-log";

/// What an app's monitor does with its streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonitorSpec {
    /// The output streams kept in the log, and how it rotates.
    pub log: LogStreams,
    /// The streams attached clients reach (`--stdin/--stdout/--stderr=stream|tty`).
    pub attach: crate::attach::Endpoints,
}

impl MonitorSpec {
    /// Whether the app needs a monitor at all.
    pub fn any(&self) -> bool {
        let a = self.attach;
        self.log.any() || a.stdin || a.stdout || a.stderr
    }
}

/// The app's ends of its monitored streams, and the monitor.
#[derive(Debug)]
pub struct AppLogPipes {
    /// For the app: its stdin, stdout and stderr (`None`: `/dev/null`); with a terminal,
    /// the terminal for each stream it uses.
    pub writers: [Option<OwnedFd>; 3],
    /// The monitor's PID: SIGHUP makes it reopen the log ([`reopen`]).
    pub copier: Option<i32>,
}

/// A copy of `fd` (close-on-exec) for the monitor to own under its own number.
fn copy(fd: &OwnedFd, path: &Path) -> Result<OwnedFd, StageError> {
    fd.try_clone().map_err(|e| StageError::Io {
        what: "pass a stream for",
        path: path.to_path_buf(),
        source: e,
    })
}

/// Makes the app's monitored streams (pipes, or a terminal) and starts their monitor
/// (`rkt stage1-log`, by `launcher`): its log at `path`, its attach socket for app `name`
/// in `attach_dir`. Nothing when no stream is monitored.
pub fn start_copier(
    launcher: &dyn Launcher,
    (pod_dir, path): (&Path, &Path),
    (attach_dir, name): (&Path, &str),
    spec: MonitorSpec,
) -> Result<AppLogPipes, StageError> {
    let mut pipes = AppLogPipes {
        writers: [None, None, None],
        copier: None,
    };
    if !spec.any() {
        return Ok(pipes);
    }
    if spec.log.any() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StageError::Io {
                what: "create",
                path: dir.to_path_buf(),
                source: e,
            })?;
        }
        // Opened here first, so that a log that cannot be written fails the start.
        drop(LogFile::create(path, spec.log.config)?);
    }
    let attach = spec.attach;
    // The monitor's ends: stdin (written), stdout and stderr (read).
    let mut monitor: [Option<OwnedFd>; 3] = [None, None, None];
    if attach.tty {
        let pty = nix::pty::openpty(None, None).map_err(sys("allocate a terminal for", path))?;
        for fd in [&pty.master, &pty.slave] {
            nix::fcntl::fcntl(
                fd.as_raw_fd(),
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )
            .map_err(sys("set close-on-exec on the terminal of", path))?;
        }
        let used = [
            attach.stdin,
            attach.stdout || spec.log.stdout,
            attach.stderr || spec.log.stderr,
        ];
        for (i, used) in used.into_iter().enumerate() {
            if used {
                pipes.writers[i] = Some(pty.slave.try_clone().map_err(|e| StageError::Io {
                    what: "duplicate the terminal of",
                    path: path.to_path_buf(),
                    source: e,
                })?);
            }
        }
        if attach.stdin {
            monitor[0] = Some(copy(&pty.master, path)?);
        }
        monitor[1] = Some(copy(&pty.master, path)?);
    } else {
        let wanted = [
            attach.stdin,
            attach.stdout || spec.log.stdout,
            attach.stderr || spec.log.stderr,
        ];
        for (i, wanted) in wanted.into_iter().enumerate() {
            if !wanted {
                continue;
            }
            let (read, write) = pipe2(OFlag::O_CLOEXEC).map_err(sys("make a pipe for", path))?;
            let (app_end, monitor_end) = if i == 0 { (read, write) } else { (write, read) };
            monitor[i] = Some(monitor_end);
            pipes.writers[i] = Some(app_end);
        }
    }
    // The monitor says it is ready (its socket listening) by closing this pipe.
    let (ready_read, ready_write) =
        pipe2(OFlag::O_CLOEXEC).map_err(sys("make the ready pipe of", path))?;
    let ready = Some(ready_write);
    let fd = |f: &Option<OwnedFd>| f.as_ref().map_or(-1, AsRawFd::as_raw_fd).to_string();
    let flag = |b: bool| if b { "1" } else { "0" }.to_string();
    let mut launch = Launch::new([LOG_COMMAND, "--log"]);
    launch.args.push(path.into());
    for (name, value) in [
        ("--split", spec.log.config.split.to_string()),
        ("--max-size", spec.log.config.max_size.to_string()),
        ("--max-files", spec.log.config.max_files.to_string()),
        ("--log-stdout", flag(spec.log.stdout)),
        ("--log-stderr", flag(spec.log.stderr)),
        ("--stdin-fd", fd(&monitor[0])),
        ("--stdout-fd", fd(&monitor[1])),
        ("--stderr-fd", fd(&monitor[2])),
    ] {
        launch.args.extend([name.into(), value.into()]);
    }
    launch
        .args
        .extend(["--attach-dir".into(), attach_dir.into()]);
    launch.args.extend(["--pod-dir".into(), pod_dir.into()]);
    for (name, value) in [
        ("--name", name.to_string()),
        ("--attach-stdin", flag(attach.stdin)),
        ("--attach-stdout", flag(attach.stdout)),
        ("--attach-stderr", flag(attach.stderr)),
        ("--tty", flag(attach.tty)),
        ("--ready-fd", fd(&ready)),
    ] {
        launch.args.extend([name.into(), value.into()]);
    }
    // Inherited by the monitor alone.
    launch.fds = monitor
        .iter()
        .chain([&ready])
        .flatten()
        .map(AsRawFd::as_raw_fd)
        .collect();
    let launched = launcher.launch(&launch);
    drop((monitor, ready));
    // Ready (or gone): end of file on the pipe. Not waited for beyond that: it ends with
    // the app's streams, and whoever is its parent then reaps it.
    let _ = std::io::Read::read(&mut File::from(ready_read), &mut [0u8]);
    let pid = launched.map_err(|source| StageError::Io {
        what: "start the log monitor of",
        path: path.to_path_buf(),
        source,
    })?;
    pipes.copier = i32::try_from(pid).ok();
    Ok(pipes)
}

/// Has the copier `pid` of the log at `path` start a new file there (after someone else
/// renamed the current one); false when `pid` is no longer that copier.
pub fn reopen(pid: i32, path: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let ours = args.get(1) == Some(&LOG_COMMAND.as_bytes())
        && args
            .windows(2)
            .any(|w| w[0] == b"--log" && w[1] == path.as_os_str().as_encoded_bytes());
    ours && nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGHUP,
    )
    .is_ok()
}

/// `rkt stage1-log ARGS`: the app's monitor, until the app's output streams end.
pub fn logger_main_from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let mut values = std::collections::HashMap::new();
    let mut args = args.into_iter();
    while let (Some(flag), Some(value)) = (args.next(), args.next()) {
        values.insert(flag.to_string_lossy().into_owned(), value);
    }
    let number = |name: &str| -> Option<i64> { values.get(name)?.to_str()?.parse().ok() };
    let on = |name: &str| number(name) == Some(1);
    let fd = |name: &str| {
        number(name)
            .and_then(|n| i32::try_from(n).ok())
            .filter(|f| *f >= 0)
    };
    let (Some(path), Some(split), Some(max_size), Some(max_files), Some(attach_dir), Some(name)) = (
        values.get("--log").map(PathBuf::from),
        number("--split"),
        number("--max-size"),
        number("--max-files"),
        values.get("--attach-dir").map(PathBuf::from),
        values
            .get("--name")
            .and_then(|n| n.to_str())
            .map(str::to_string),
    ) else {
        eprintln!("rkt {LOG_COMMAND}: --log, --split, --max-size, --max-files, --attach-dir and --name are required");
        return 2;
    };
    let (stdin_fd, stdout_fd, stderr_fd) = (fd("--stdin-fd"), fd("--stdout-fd"), fd("--stderr-fd"));
    let ready_fd = fd("--ready-fd");
    let keep: Vec<i32> = [stdin_fd, stdout_fd, stderr_fd, ready_fd]
        .into_iter()
        .flatten()
        .collect();
    super::stdio::close_inherited(&keep);
    let _ = nix::unistd::setsid();
    // Counted with the pod, and stopped with it: in the pod's cgroup, joined while this
    // process is still single-threaded.
    if let Some(pod_dir) = values.get("--pod-dir").map(PathBuf::from) {
        let uuid = pod_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        if let (Ok(state), Some(uuid)) = (crate::podstore::PodState::load(&pod_dir), uuid) {
            let _ = crate::isolation::cgroups::detect().join(&state.pod_cgroup(&uuid));
        }
    }
    // SIGHUP: reopen the log. Blocked here, before any thread starts (they inherit the
    // mask), and taken by a thread of its own.
    let mut hangup = nix::sys::signal::SigSet::empty();
    hangup.add(nix::sys::signal::Signal::SIGHUP);
    let _ = hangup.thread_block();
    let endpoints = crate::attach::Endpoints {
        stdin: on("--attach-stdin"),
        stdout: on("--attach-stdout"),
        stderr: on("--attach-stderr"),
        tty: on("--tty"),
    };
    let logged = [on("--log-stdout"), on("--log-stderr")];
    let log = if logged.iter().any(|l| *l) {
        let config = LogConfig {
            split: usize::try_from(split).unwrap_or(16 * 1024),
            max_size: u64::try_from(max_size).unwrap_or(0),
            max_files: u32::try_from(max_files).unwrap_or(1),
        };
        let Ok(log) = LogFile::create(&path, config) else {
            return 1;
        };
        let log = Arc::new(log);
        let reopening = log.clone();
        std::thread::spawn(move || loop {
            if hangup.wait().is_ok() {
                let _ = reopening.reopen();
            }
        });
        Some(log)
    } else {
        None
    };
    // SAFETY: each descriptor was passed for this process alone, and is owned from here.
    let own = |fd: Option<i32>| fd.map(|fd| unsafe { File::from_raw_fd(fd) });
    let (stdin, stdout, stderr) = (own(stdin_fd), own(stdout_fd), own(stderr_fd));
    let hub = Arc::new(crate::attach::Hub::default());
    let attachable = endpoints.stdin || endpoints.stdout || endpoints.stderr;
    let mut socket = None;
    if attachable {
        if let Ok((listener, inode)) = crate::attach::listen(&attach_dir, &name) {
            socket = Some(inode);
            let master = stdout
                .as_ref()
                .map(AsRawFd::as_raw_fd)
                .filter(|_| endpoints.tty);
            let resize: Arc<dyn Fn(u16, u16) + Send + Sync> = Arc::new(move |rows, cols| {
                if let Some(master) = master {
                    let size = libc::winsize {
                        ws_row: rows,
                        ws_col: cols,
                        ws_xpixel: 0,
                        ws_ypixel: 0,
                    };
                    // SAFETY: TIOCSWINSZ reads a winsize from the pointer given.
                    unsafe { libc::ioctl(master, libc::TIOCSWINSZ, &size) };
                }
            });
            let input = Arc::new(std::sync::Mutex::new(stdin));
            let hub = hub.clone();
            std::thread::spawn(move || hub.serve(listener, endpoints, input, resize));
        }
    }
    // Listening (or not attachable): `rkt app start` may return.
    // SAFETY: the descriptor was passed for this process alone; closing it is the signal.
    drop(ready_fd.map(|fd| unsafe { File::from_raw_fd(fd) }));
    let mut outputs: Vec<_> = [
        (
            stdout,
            LogStream::Stdout,
            logged[0] || (endpoints.tty && logged[1]),
        ),
        (stderr, LogStream::Stderr, logged[1]),
    ]
    .into_iter()
    .filter_map(|(file, stream, logged)| Some((file?, stream, logged)))
    .collect();
    // The last stream is copied on this thread, each other one on a thread of its own (a
    // thread fewer to keep for the app's whole life).
    let last = outputs.pop();
    super::launch::release_idle_memory();
    let others: Vec<_> = outputs
        .into_iter()
        .map(|(file, stream, logged)| {
            let (log, hub) = (log.clone().filter(|_| logged), hub.clone());
            std::thread::spawn(move || monitor_output(file, stream, log.as_deref(), &hub))
        })
        .collect();
    let mut failed = last.is_some_and(|(file, stream, logged)| {
        let log = log.clone().filter(|_| logged);
        !monitor_output(file, stream, log.as_deref(), &hub)
    });
    for t in others {
        failed |= !matches!(t.join(), Ok(true));
    }
    hub.close_all(std::time::Duration::from_secs(2));
    if let Some(inode) = socket {
        crate::attach::unlisten(&attach_dir, &name, inode);
    }
    i32::from(failed)
}

/// Copies one of the app's output streams into its log (when kept) and to the attached
/// clients until it ends (end of file, or EIO: a terminal whose app side is closed); false
/// when the log could not be written (the stream is still drained, so the app never
/// blocks).
fn monitor_output(
    from: File,
    stream: LogStream,
    log: Option<&LogFile>,
    hub: &crate::attach::Hub,
) -> bool {
    let mut batches = crate::logs::writer::Batches::new(from);
    let tee = |data: &[u8]| {
        hub.broadcast(&match stream {
            LogStream::Stdout => crate::attach::Frame::Stdout(data.to_vec()),
            LogStream::Stderr => crate::attach::Frame::Stderr(data.to_vec()),
        })
    };
    crate::logs::writer::copy_from(|buf| batches.next(buf), stream, log, tee).is_ok()
}
