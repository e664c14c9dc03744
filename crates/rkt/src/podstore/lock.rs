//! Pod locks: `flock(2)` on the pod directory itself.
//!
//! `rkt run` holds an exclusive lock on its pod for the pod's whole life, so "the lock can be
//! taken" means "no runner is alive". Everyone who changes a pod's state (run, gc, rm) holds the
//! exclusive lock while doing so; readers (status, list) only probe with a shared,
//! non-blocking lock and let go at once. The lock lives on the directory's inode, so it survives
//! the renames the store does, and it is released by the kernel when the holder dies.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::PodError;

/// How long writers keep retrying a lock that a reader may be probing at this instant.
const WRITER_RETRY: Duration = Duration::from_millis(1500);

/// A held lock on a pod directory; released on drop.
#[derive(Debug)]
pub struct PodLock {
    lock: Flock<File>,
    dir: PathBuf,
}

impl PodLock {
    /// Tries once to take the lock; `Ok(None)` when someone else holds a conflicting lock.
    pub fn try_lock(dir: &Path, exclusive: bool) -> Result<Option<PodLock>, PodError> {
        let file = File::open(dir).map_err(|source| PodError::Io {
            what: "open pod directory for locking",
            path: dir.to_path_buf(),
            source,
        })?;
        let arg = if exclusive {
            FlockArg::LockExclusiveNonblock
        } else {
            FlockArg::LockSharedNonblock
        };
        match Flock::lock(file, arg) {
            Ok(lock) => Ok(Some(PodLock {
                lock,
                dir: dir.to_path_buf(),
            })),
            Err((_, Errno::EWOULDBLOCK)) => Ok(None),
            Err((_, errno)) => Err(PodError::Io {
                what: "lock pod directory",
                path: dir.to_path_buf(),
                source: errno.into(),
            }),
        }
    }

    /// Takes the exclusive lock, retrying briefly: a reader's probe holds a shared lock for an
    /// instant, which must not make a writer conclude that the pod is in use.
    pub fn lock_exclusive_soon(dir: &Path) -> Result<Option<PodLock>, PodError> {
        let deadline = Instant::now() + WRITER_RETRY;
        loop {
            if let Some(lock) = Self::try_lock(dir, true)? {
                return Ok(Some(lock));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether a runner (or another writer) holds the pod's lock right now.
    pub fn is_held(dir: &Path) -> Result<bool, PodError> {
        Ok(Self::try_lock(dir, false)?.is_none())
    }

    /// The locked directory (as it was named when locked).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Remembers the directory's new name after the store renamed it.
    pub(crate) fn renamed(&mut self, dir: PathBuf) {
        self.dir = dir;
    }

    /// The locked file, e.g. to fsync the directory.
    pub fn file(&self) -> &File {
        &self.lock
    }
}

/// The lock of a running sandbox's apps: `flock(2)` on `apps.lock` in the pod's directory,
/// held by whoever changes the apps' records (`rkt app add`, `start`, `stop`, `rm`, and the
/// runner recording an app's exit) for the read, change and write of `pod.json` and
/// `state.json`, so that no change is lost to another made at the same moment. The runner
/// keeps the pod's own lock throughout; this one is taken and let go around each change.
#[derive(Debug)]
pub struct AppsLock {
    _lock: Flock<File>,
}

/// The file of [`AppsLock`] in a pod's directory.
pub const APPS_LOCK_FILE: &str = "apps.lock";

impl AppsLock {
    /// Waits for the lock of the apps of the pod in `dir`.
    pub fn lock(dir: &Path) -> Result<AppsLock, PodError> {
        let path = dir.join(APPS_LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| PodError::Io {
                what: "open the apps' lock",
                path: path.clone(),
                source,
            })?;
        let lock =
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| PodError::Io {
                what: "lock the apps of",
                path: path.clone(),
                source: errno.into(),
            })?;
        Ok(AppsLock { _lock: lock })
    }
}
