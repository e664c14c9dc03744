//! An app's kept output, in the CRI's container log format: written as the app writes
//! ([`writer`]), read back by `rkt logs` ([`reader`]), and the same files kubelet reads.
//!
//! One record a line: `<time> <stream> <tag> <text>` and a newline, where `time` is RFC 3339
//! in UTC with nanoseconds, `stream` is `stdout` or `stderr`, and `tag` is `F` for the end of
//! a line of the app's (the record holds the line without its newline) or `P` for a part of a
//! line longer than the split size, whose rest follows in later records of the same stream.
//! A line the app left unfinished when its stream closed ends with an `F` record too.
//!
//! Files rotate at a size: `NAME` is renamed `NAME.1` (and `NAME.1` `NAME.2`, up to the
//! number of files kept), and a new `NAME` is started; [`writer::LogFile::reopen`] starts a
//! new file after someone else renamed it (what kubelet does when it rotates a container's
//! log itself). The room takes from nothing; callers say where the files are.

pub mod reader;
pub mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The `n`th older file of the log at `path`: `NAME.n`.
pub fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// A record's time: RFC 3339, UTC, nanoseconds.
pub fn timestamp(time: SystemTime) -> String {
    humantime::format_rfc3339_nanos(time).to_string()
}

/// Which of an app's output streams a record is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogStream {
    Stdout,
    Stderr,
}

impl LogStream {
    /// The word in a record.
    pub fn as_str(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        }
    }
}

impl fmt::Display for LogStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a log is split and rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// The longest text one record holds: a longer line becomes `P` records of this many
    /// bytes, then an `F` record with the rest. containerd's default, 16 KiB.
    pub split: usize,
    /// The size at which the file rotates; 0: never. kubelet's default, 10 MiB.
    pub max_size: u64,
    /// How many files a log keeps, the current one included (at least 1). kubelet's
    /// default, 5.
    pub max_files: u32,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            split: 16 * 1024,
            max_size: 10 * 1024 * 1024,
            max_files: 5,
        }
    }
}

/// What can go wrong writing or reading a log. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot {what} the log {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the log {path}, line {line}, is no CRI log record: {reason}")]
    Parse {
        path: PathBuf,
        line: u64,
        reason: &'static str,
    },
}

impl LogError {
    pub(crate) fn io(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> LogError {
        let path = path.to_path_buf();
        move |source| LogError::Io { what, path, source }
    }
}
