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
pub mod run;
pub mod status;

// The records on disk live in the pod store, below networking and the stage, which take
// them from there; they are part of the pod's API.
pub use crate::podstore::{lock, manifest, state, store, time};
pub use crate::podstore::{
    App, Pod, PodError, PodLock, PodManifest, PodState, PodStore, State, Timestamp,
};
pub use status::PodStatus;
