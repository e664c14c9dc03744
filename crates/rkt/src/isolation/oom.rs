//! `--oom-score-adj=N` (rkt 1.30's per-app isolator): the app's `oom_score_adj`, -1000
//! (never killed for lack of memory) to 1000 (killed first), written in the app's own
//! process before it executes its program, so that the pod's init and other apps keep
//! theirs and what the app starts inherits it.
//!
//! The kernel lets any process raise its score, but lowering it below the floor its
//! ancestors set (`oom_score_adj_min`, not shown in `/proc`) takes `CAP_SYS_RESOURCE`, which
//! root inside a container or a restricted service often lacks: the write then fails with
//! `EACCES`. [`check`] finds that out in the calling process before a pod exists, so that
//! such a value is refused with the reason and nothing is left; [`set`], in the app's
//! process, says the same should the runner (`run-prepared`, perhaps another process than
//! `prepare`'s) be more restricted.

use std::path::PathBuf;

use super::IsolationError;

/// The flag, as errors name it.
pub const FLAG: &str = "--oom-score-adj";

const OWN: &str = "/proc/self/oom_score_adj";

/// The calling process's `oom_score_adj`.
fn current() -> Result<i16, IsolationError> {
    let text = std::fs::read_to_string(OWN).map_err(|source| IsolationError::Io {
        what: "read",
        path: PathBuf::from(OWN),
        source,
    })?;
    text.trim()
        .parse()
        .map_err(|_| IsolationError::Unsupported {
            what: format!("{OWN} holds {text:?}, not a number"),
        })
}

fn write(value: i16) -> std::io::Result<()> {
    std::fs::write(OWN, value.to_string())
}

/// Why `value` was refused, when the kernel said `EACCES`; `below` is the score of the
/// process that could not lower it.
fn refused(value: i16, below: i16) -> IsolationError {
    IsolationError::BadValue {
        flag: FLAG,
        value: value.to_string(),
        why: format!(
            "the kernel refuses to lower an OOM score adjustment below the floor set for \
             rkt's process (its own is {below}) without CAP_SYS_RESOURCE, which rkt does not \
             have here; give {below} or more, or run rkt with CAP_SYS_RESOURCE"
        ),
    }
}

/// Whether this process may give its children `value`: raising always works; lowering
/// is tried on this process, then undone (back up to where it was, which the kernel always
/// allows). Refused with the reason when the kernel says `EACCES`.
pub fn check(value: i16) -> Result<(), IsolationError> {
    let now = current()?;
    if value >= now {
        return Ok(());
    }
    match write(value) {
        Ok(()) => {
            let _ = write(now);
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => Err(refused(value, now)),
        Err(source) => Err(IsolationError::Io {
            what: "write",
            path: PathBuf::from(OWN),
            source,
        }),
    }
}

/// Sets the calling process's `oom_score_adj` (the app's, just before it executes).
pub fn set(value: i16) -> Result<(), IsolationError> {
    match write(value) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            Err(refused(value, current().unwrap_or(value)))
        }
        Err(source) => Err(IsolationError::Io {
            what: "write",
            path: PathBuf::from(OWN),
            source,
        }),
    }
}
