//! The pod store: pods on disk under `<data>/pods/<uuid>/`, their manifests, state records,
//! locks and timestamps. The pod's life cycle ([`crate::pod`]), the stage (which reads the
//! manifest) and networking (whose port check looks at other pods) all build on it.
//!
//! May not touch: networks, plugins, processes or the stage. It takes only
//! [`crate::fsutil`] and the namespace path naming of [`crate::netns`].
//!
//! A pod directory holds:
//! - `pod.json`: the [`PodManifest`] (the app, the volumes), written once;
//! - `volumes/NAME`: the pod's `empty` volumes ([`volume`]), created when it starts;
//! - `state.json`: the [`PodState`] (state, times, init PID, exit status, netns path),
//!   replaced atomically by the holder of the pod's exclusive lock;
//! - what networking records (`net-info.json`, `net/`, `etc/resolv.conf`, `etc/hosts`).
//!
//! Locking (see [`lock`]): the runner holds an exclusive `flock` on the pod directory for the
//! pod's whole life. A pod recorded as `running` whose lock is free has lost its runner
//! (killed, machine crash): it counts as exited, and gc tears down what it left behind.

pub mod lock;
pub mod manifest;
pub mod state;
pub mod store;
pub mod time;
pub mod volume;

use std::path::PathBuf;

pub use lock::PodLock;
pub use manifest::{App, AppLog, AttachModes, ExitPolicy, IpcMode, PodManifest, PodSpec};
pub use state::{PodState, State};
pub use store::{Pod, PodStore};
pub use time::Timestamp;
pub use volume::{Mount, Propagation, Volume, VolumeKind};

impl From<crate::fsutil::WriteError> for PodError {
    fn from(e: crate::fsutil::WriteError) -> Self {
        PodError::Io {
            what: e.action,
            path: e.path,
            source: e.source,
        }
    }
}

/// What can go wrong with a pod. Every variant names the pod or the path it is about.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is corrupt")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{given:?} is not a pod UUID or UUID prefix (hexadecimal digits and '-')")]
    BadUuid { given: String },
    #[error("no pod matches {prefix:?} in {dir} (see `rkt list`)")]
    NotFound { prefix: String, dir: PathBuf },
    #[error("{prefix:?} matches several pods, give more digits: {}", candidates.join(", "))]
    Ambiguous {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("pod {uuid} is in use by another rkt process (running, or being changed)")]
    InUse { uuid: String },
    #[error("pod {uuid} is {state}, but {action} needs a {wanted} pod")]
    WrongState {
        uuid: String,
        state: State,
        action: &'static str,
        wanted: &'static str,
    },
}

impl PodError {
    /// The pod vanished while being read (removed concurrently).
    pub fn is_gone(&self) -> bool {
        matches!(self, PodError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}
