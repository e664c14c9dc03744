//! A consistent view of one pod for `status` and `list`: the manifest, the recorded state,
//! and whether its runner is alive, which together give the state users see.

use serde::Serialize;

use super::lock::PodLock;
use super::manifest::PodManifest;
use super::state::{PodState, State};
use super::store::Pod;
use super::PodError;

/// What `rkt status` and `rkt list` show about a pod.
#[derive(Debug, Clone, Serialize)]
pub struct PodStatus {
    pub uuid: String,
    pub manifest: PodManifest,
    pub record: PodState,
    /// The state users see: `running` only while a runner holds the pod's lock; a pod whose
    /// runner died shows as `exited` (gc will tear down what it left).
    pub state: State,
    /// The recorded state is `running` but the runner is gone.
    pub runner_died: bool,
}

impl PodStatus {
    /// Reads the pod consistently: with a shared lock when it can be had (no writer active),
    /// else the record as the lock holder last wrote it.
    pub fn read(pod: &Pod) -> Result<PodStatus, PodError> {
        let probe = PodLock::try_lock(&pod.dir, false)?;
        let manifest = pod.manifest()?;
        let record = pod.state()?;
        let runner_died = probe.is_some() && record.state == State::Running;
        drop(probe);
        let state = if runner_died {
            State::Exited
        } else {
            record.state
        };
        Ok(PodStatus {
            uuid: pod.uuid.clone(),
            manifest,
            record,
            state,
            runner_died,
        })
    }

    /// The app's exit status, if the pod exited normally.
    pub fn exit_status(&self) -> Option<i32> {
        self.record.exit_status
    }
}
