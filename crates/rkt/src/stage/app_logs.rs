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
use super::StageError;
use crate::logs::writer::{copy, LogFile};
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
                    .spawn(move || copy(File::from(read), stream, &log))
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

/// The hidden command of a sandbox app's log copier (`rkt app start` runs one per app whose
/// stdout or stderr is `log`): a process of its own, in a session of its own, that reads
/// the app's streams until every writer is gone, so the log outlives `rkt app start`.
pub const LOG_COMMAND: &str = "stage1-log";

/// The pipes of an app's logged streams and the copier that reads them.
#[derive(Debug)]
pub struct AppLogPipes {
    /// The write ends, for the app (stdout, stderr); `None` for a stream not logged.
    pub writers: [Option<OwnedFd>; 2],
    /// The copier's PID: SIGHUP makes it reopen the log ([`reopen`]).
    pub copier: Option<i32>,
}

/// Makes the pipes of the streams `streams` logs and starts their copier into `path`
/// (the `rkt` binary `exe`, normally `/proc/self/exe`); nothing when no stream is logged.
pub fn start_copier(
    exe: &Path,
    path: &Path,
    streams: LogStreams,
) -> Result<AppLogPipes, StageError> {
    let mut pipes = AppLogPipes {
        writers: [None, None],
        copier: None,
    };
    if !streams.any() {
        return Ok(pipes);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| StageError::Io {
            what: "create",
            path: dir.to_path_buf(),
            source: e,
        })?;
    }
    // Opened here first, so that a log that cannot be written fails the start.
    drop(LogFile::create(path, streams.config)?);
    let mut readers: [Option<OwnedFd>; 2] = [None, None];
    for (i, logged) in [streams.stdout, streams.stderr].into_iter().enumerate() {
        if !logged {
            continue;
        }
        let (read, write) = pipe2(OFlag::O_CLOEXEC).map_err(sys("make a pipe for", path))?;
        let inherited = read.try_clone().map_err(|e| StageError::Io {
            what: "duplicate a pipe for",
            path: path.to_path_buf(),
            source: e,
        })?;
        nix::fcntl::fcntl(
            inherited.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .map_err(sys("pass a pipe for", path))?;
        readers[i] = Some(inherited);
        pipes.writers[i] = Some(write);
    }
    let fd = |f: &Option<OwnedFd>| f.as_ref().map_or(-1, AsRawFd::as_raw_fd).to_string();
    let spawned = std::process::Command::new(exe)
        .arg(LOG_COMMAND)
        .arg("--log")
        .arg(path)
        .args(["--split", &streams.config.split.to_string()])
        .args(["--max-size", &streams.config.max_size.to_string()])
        .args(["--max-files", &streams.config.max_files.to_string()])
        .args(["--stdout-fd", &fd(&readers[0])])
        .args(["--stderr-fd", &fd(&readers[1])])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    drop(readers);
    // Not waited for: it ends with the app's streams, and init or the caller's parent
    // reaps it.
    let child = spawned.map_err(|source| StageError::Spawn {
        exe: exe.to_path_buf(),
        source,
    })?;
    pipes.copier = i32::try_from(child.id()).ok();
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

/// `rkt stage1-log ARGS`: copies the app's streams into its log until they end.
pub fn logger_main_from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let mut values = std::collections::HashMap::new();
    let mut args = args.into_iter();
    while let (Some(flag), Some(value)) = (args.next(), args.next()) {
        values.insert(flag.to_string_lossy().into_owned(), value);
    }
    let number = |name: &str| -> Option<i64> { values.get(name)?.to_str()?.parse().ok() };
    let (Some(path), Some(split), Some(max_size), Some(max_files)) = (
        values.get("--log").map(PathBuf::from),
        number("--split"),
        number("--max-size"),
        number("--max-files"),
    ) else {
        eprintln!("rkt {LOG_COMMAND}: --log, --split, --max-size and --max-files are required");
        return 2;
    };
    let fds: Vec<(RawFdNumber, LogStream)> = [
        (number("--stdout-fd"), LogStream::Stdout),
        (number("--stderr-fd"), LogStream::Stderr),
    ]
    .into_iter()
    .filter_map(|(fd, stream)| Some((i32::try_from(fd?).ok().filter(|f| *f >= 0)?, stream)))
    .collect();
    super::stdio::close_inherited(&fds.iter().map(|(fd, _)| *fd).collect::<Vec<_>>());
    let _ = nix::unistd::setsid();
    // SIGHUP: reopen the log. Blocked here, before any thread starts (they inherit the
    // mask), and taken by a thread of its own.
    let mut hangup = nix::sys::signal::SigSet::empty();
    hangup.add(nix::sys::signal::Signal::SIGHUP);
    let _ = hangup.thread_block();
    let config = LogConfig {
        split: usize::try_from(split).unwrap_or(16 * 1024),
        max_size: u64::try_from(max_size).unwrap_or(0),
        max_files: u32::try_from(max_files).unwrap_or(1),
    };
    let Ok(log) = LogFile::create(&path, config) else {
        return 1;
    };
    let log = Arc::new(log);
    {
        let log = log.clone();
        std::thread::spawn(move || loop {
            if hangup.wait().is_ok() {
                let _ = log.reopen();
            }
        });
    }
    let threads: Vec<_> = fds
        .into_iter()
        .map(|(fd, stream)| {
            // SAFETY: the descriptor was passed for this process alone.
            let file = unsafe { File::from_raw_fd(fd) };
            let log = log.clone();
            std::thread::spawn(move || copy(file, stream, &log))
        })
        .collect();
    let failed = threads.into_iter().any(|t| !matches!(t.join(), Ok(Ok(_))));
    i32::from(failed)
}

type RawFdNumber = i32;
