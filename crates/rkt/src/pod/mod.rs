//! A pod's life: the operations that move a pod through it ([`run`], [`control`]'s stop,
//! [`gc`] and rm, [`cleanup`]'s release of what a pod holds) and the view `status` and
//! `list` show ([`status`]).
//!
//! Owns: the order of a pod's steps (record, namespace, networks, stage, teardown) and who
//! releases what when one fails. Takes from: [`crate::podstore`] (the records on disk,
//! re-exported here as the pod's API), [`crate::networking`], [`crate::netns`],
//! [`crate::stage`]. May not be taken from by any of them: nothing below calls back up
//! into a pod's life cycle.
//!
//! Locking (see [`lock`]): the runner holds an exclusive `flock` on the pod directory for the
//! pod's whole life. A pod recorded as `running` whose lock is free has lost its runner
//! (killed, machine crash): it counts as exited, and the next command that starts or lists
//! pods ([`reap`]) or gc tears down what it left behind.

pub mod apps;
pub mod cleanup;
pub mod control;
pub mod gc;
pub mod reap;
pub mod run;
pub mod status;

// The records on disk live in the pod store, below networking and the stage, which take
// them from there; they are part of the pod's API.
pub use crate::podstore::{lock, manifest, state, store, time, volume};
pub use crate::podstore::{
    App, ExitPolicy, IpcMode, Mount, Pod, PodError, PodLock, PodManifest, PodSpec, PodState,
    PodStore, State, Timestamp, Volume, VolumeKind,
};
pub use status::PodStatus;

/// The message of an error about pod `uuid` whose source is `error`: `pod <uuid>`, or nothing
/// when the source already starts by naming the pod (a networking error such as `pod <uuid>:
/// teardown failed ...`), so that the chain names a pod once.
pub(crate) fn about_pod(uuid: &str, error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    match text.strip_prefix("pod ") {
        Some(rest) if rest.starts_with(uuid) => String::new(),
        _ => format!("pod {uuid}"),
    }
}
