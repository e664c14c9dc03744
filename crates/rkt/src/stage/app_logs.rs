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
