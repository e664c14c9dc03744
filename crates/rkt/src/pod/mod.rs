//! Pods on disk: the store under `<data>/pods/<uuid>/`, manifests, states, locks, and the
//! operations that move a pod through its life (run, gc, rm, stop).
//!
//! A pod directory holds:
//! - `pod.json`: the [`PodManifest`] (the app), written once;
//! - `state.json`: the [`PodState`] (state, times, init PID, exit status, netns path),
//!   replaced atomically by the holder of the pod's exclusive lock;
//! - what networking records (`net-info.json`, `net/`, `etc/resolv.conf`, `etc/hosts`).
//!
//! Locking (see [`lock`]): the runner holds an exclusive `flock` on the pod directory for the
//! pod's whole life. A pod recorded as `running` whose lock is free has lost its runner
//! (killed, machine crash): it counts as exited, and gc tears down what it left behind.

pub mod cleanup;
pub mod control;
pub mod gc;
pub mod lock;
pub mod manifest;
pub mod run;
pub mod state;
pub mod status;
pub mod store;
pub mod time;

use std::path::PathBuf;

pub use lock::PodLock;
pub use manifest::{App, IpcMode, PodManifest};
pub use state::{PodState, State};
pub use status::PodStatus;
pub use store::{Pod, PodStore};
pub use time::Timestamp;

/// `pod <uuid>: <error>`, or the error alone when it already starts by naming the pod (a
/// networking error such as `pod <uuid>: teardown failed ...`): a pod is named once.
pub(crate) fn about_pod(uuid: &str, error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    match text.strip_prefix("pod ") {
        Some(rest) if rest.starts_with(uuid) => text,
        _ => format!("pod {uuid}: {text}"),
    }
}

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
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is corrupt: {source}")]
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
