//! Pods whose runner died (`kill -9`, an orchestrator's SIGKILL after its stop timeout, a
//! crash), released without an operator.
//!
//! A runner marks its pod before recording it `running` and unmarks it once released
//! ([`crate::podstore::store::RUNNING_DIR`]); it holds the pod's lock all along. So a mark
//! whose pod's lock is free is a pod whose runner died, and [`dead_runners`] finds those
//! with one directory read and one lock probe per running pod, whatever the number of
//! exited pods kept: cheap enough for every command that starts or lists pods. Releasing
//! ([`release_dead`]) skips a pod whose lock is held exclusively: a live runner, `rkt gc`,
//! `rkt rm` or another releaser holding it wins (only a reader's instant probe is waited
//! out). A pod
//! being made (`.new-<uuid>`) or taken by `rkt run-prepared` is locked by its runner; a
//! prepared pod carries no mark.
//!
//! A releaser holds the lock of the pod's mark too while it works, so that gc and rm, finding
//! the pod locked, can tell it from a live runner and wait for it ([`wait_for_releaser`])
//! instead of skipping the pod.
//!
//! The release is gc's ([`release_dead_pod`], which gc uses too): the pod is recorded
//! `exited` first (so `rkt status` shows it exited while its networks go), then everything
//! it holds is released as [`super::cleanup::release_pod`] does, then the mark goes. A
//! releaser that dies half-way leaves the mark, and the next one releases again (every step
//! is idempotent); one that completes removes it even when a step failed, leaving the retry
//! of that teardown to gc, as for a pod whose own runner's teardown failed.

use std::time::Duration;

use super::cleanup::{release_pod, CleanupError};
use super::lock::PodLock;
use super::state::{PodState, State};
use super::store::{Pod, PodStore};
use super::time::Timestamp;
use super::PodError;

/// The pods of `store` whose runner is gone: marked, their lock free. A hint, read without
/// taking any lock exclusively; [`release_dead`] decides under the lock.
pub fn dead_runners(store: &PodStore) -> Vec<String> {
    store
        .running_marks()
        .into_iter()
        .filter(|uuid| {
            // A pod directory not there (yet, or any more) is no dead runner's.
            matches!(
                PodLock::try_lock(&store.dir().join(uuid), false),
                Ok(Some(_))
            )
        })
        .collect()
}

/// What [`release_dead`] did.
#[derive(Debug, Default)]
pub struct ReapReport {
    /// The pods released.
    pub released: Vec<String>,
    /// What failed, for every pod.
    pub errors: Vec<CleanupError>,
}

/// Releases every marked pod of `store` whose lock it can take at once (see the module's
/// docs); each plugin call of a teardown may take `plugin_timeout`.
pub fn release_dead(store: &PodStore, plugin_timeout: Duration) -> ReapReport {
    let mut report = ReapReport::default();
    for uuid in store.running_marks() {
        let pod = Pod {
            dir: store.dir().join(&uuid),
            uuid,
        };
        release_marked(store, &pod, plugin_timeout, &mut report);
    }
    report.released.sort();
    report
}

/// Pod `uuid` of `store` when its runner is gone: released now, or once the releaser at
/// work on it is done. For a command that finds the pod in its way (a host port it still
/// forwards) and would otherwise fail until the background releaser is through. True when
/// the pod was released here or by that releaser; false for a live runner's pod (or one
/// that could not be released, which gc reports).
pub fn release_now_if_dead(store: &PodStore, uuid: &str, plugin_timeout: Duration) -> bool {
    let pod = Pod {
        dir: store.dir().join(uuid),
        uuid: uuid.to_string(),
    };
    if !pod.is_marked_running() {
        return false;
    }
    match wait_for_releaser(&pod) {
        Ok(Some(_lock)) => return true,
        Ok(None) => {}
        Err(_) => return false,
    }
    let mut report = ReapReport::default();
    release_marked(store, &pod, plugin_timeout, &mut report) && report.errors.is_empty()
}

/// Releases marked pod `pod` when its lock can be taken at once (see the module's docs),
/// adding to `report`; true when it was released here.
fn release_marked(
    store: &PodStore,
    pod: &Pod,
    plugin_timeout: Duration,
    report: &mut ReapReport,
) -> bool {
    if store.remove_stale_mark(&pod.uuid) {
        return false;
    }
    // A live runner (or gc, rm, another releaser) holds the pod's lock exclusively.
    if !matches!(PodLock::try_lock(&pod.dir, false), Ok(Some(_))) {
        return false;
    }
    // Held until the pod is released, so that gc and rm wait for this releaser rather
    // than take the pod for a live runner's. Another releaser holding it: its pod.
    let Ok(Some(releasing)) = PodLock::try_lock(&pod.mark_path(), true) else {
        return false;
    };
    // Retried briefly: a reader's probe (`rkt status`) holds it shared for an instant.
    let lock = match PodLock::lock_exclusive_soon(&pod.dir) {
        Ok(Some(lock)) => lock,
        Ok(None) => return false,
        Err(e) if e.is_gone() => return false,
        Err(e) => {
            report.errors.push(e.into());
            return false;
        }
    };
    // Another releaser (or gc) was here first and finished.
    if !pod.is_marked_running() {
        return false;
    }
    let released = match reap_locked(pod, plugin_timeout) {
        Ok(Some(errors)) => {
            let clean = errors.is_empty();
            if clean {
                report.released.push(pod.uuid.clone());
            }
            report.errors.extend(errors);
            clean
        }
        Ok(None) => false,
        Err(e) if e.is_gone() => false,
        Err(e) => {
            report.errors.push(e.into());
            false
        }
    };
    drop(lock);
    drop(releasing);
    released
}

/// How long gc and rm wait for a releaser to finish with a pod.
const RELEASER_WAIT: Duration = Duration::from_secs(60);

/// When pod `pod`'s lock is held by a releaser (not by a live runner): waits, at most a
/// minute, until it is done, and returns the pod's lock then. `None`: no releaser holds it
/// (a runner does), or it did not finish in time. For gc and rm, so that `rkt status; rkt
/// gc` deletes a pod the status started releasing.
pub fn wait_for_releaser(pod: &Pod) -> Result<Option<PodLock>, PodError> {
    let releasing = || matches!(PodLock::try_lock(&pod.mark_path(), false), Ok(None));
    if !releasing() {
        return Ok(None);
    }
    let deadline = std::time::Instant::now() + RELEASER_WAIT;
    loop {
        if let Some(lock) = PodLock::try_lock(&pod.dir, true)? {
            return Ok(Some(lock));
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        if !releasing() {
            // Done, its mark removed: the pod's lock follows at once.
            std::thread::sleep(Duration::from_millis(50));
            return PodLock::try_lock(&pod.dir, true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A marked pod whose lock the caller holds: released, or only unmarked when its runner
/// died before taking it from `prepared` (nothing was set up). `None`: nothing released.
fn reap_locked(pod: &Pod, plugin_timeout: Duration) -> Result<Option<Vec<CleanupError>>, PodError> {
    let mut state = pod.state_for_cleanup()?;
    if state.state == State::Prepared {
        pod.unmark_running()?;
        return Ok(None);
    }
    release_dead_pod(pod, &mut state, plugin_timeout).map(Some)
}

/// Releases pod `pod`, whose runner is gone and whose exclusive lock the caller holds, its
/// record `state` (`running`, or `exited` or `garbage` when the runner or a releaser died
/// during the teardown): recorded `exited` first, keeping the init's PID until the release
/// has killed what may be left of it; then released; then unmarked. Returns what failed.
/// Each plugin call of the teardown may take `plugin_timeout`.
pub fn release_dead_pod(
    pod: &Pod,
    state: &mut PodState,
    plugin_timeout: Duration,
) -> Result<Vec<CleanupError>, PodError> {
    // As gc releases a pod its runner left `running`: plugins it left running are killed
    // first, and an init that somehow survived it.
    let as_left = PodState {
        state: State::Running,
        ..state.clone()
    };
    if state.state == State::Running {
        state.state = State::Exited;
        state.exited = Some(Timestamp::now());
        state.store(&pod.dir)?;
    }
    let errors = release_pod(pod, &as_left, plugin_timeout);
    if state.pid.take().is_some() {
        state.store(&pod.dir)?;
    }
    pod.unmark_running()?;
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::App;

    const T: Duration = cni::api::DEFAULT_TIMEOUT;

    fn app() -> App {
        App::new("a", ["a"])
    }

    fn running(store: &PodStore) -> (Pod, PodLock) {
        store.create(app(), &PodState::new(State::Running)).unwrap()
    }

    #[test]
    fn a_running_pod_is_marked_from_its_creation_and_found_only_once_its_runner_is_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (alive, alive_lock) = running(&store);
        let (dead, lock) = running(&store);
        drop(lock);
        let (prepared, lock) = store
            .create(app(), &PodState::new(State::Prepared))
            .unwrap();
        drop(lock);
        assert!(alive.is_marked_running() && dead.is_marked_running());
        assert!(
            !prepared.is_marked_running(),
            "a prepared pod holds nothing"
        );
        assert_eq!(dead_runners(&store), vec![dead.uuid.clone()]);

        let report = release_dead(&store, T);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.released, vec![dead.uuid.clone()]);
        let st = dead.state().unwrap();
        assert_eq!(st.state, State::Exited);
        assert!(st.exited.is_some() && st.pid.is_none());
        assert!(!dead.is_marked_running());
        assert!(dead_runners(&store).is_empty());
        // The live runner's pod and the prepared one are untouched.
        assert_eq!(alive.state().unwrap().state, State::Running);
        assert!(alive.is_marked_running());
        assert_eq!(prepared.state().unwrap().state, State::Prepared);
        // Nothing left to do: a second releaser finds nothing.
        assert!(release_dead(&store, T).released.is_empty());
        drop(alive_lock);
        assert_eq!(dead_runners(&store), vec![alive.uuid.clone()]);
    }

    #[test]
    fn a_pod_another_holds_is_skipped_and_one_released_meanwhile_is_not_released_again() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (dead, lock) = running(&store);
        drop(lock);
        // gc (or another releaser) holds the lock: skipped, still marked.
        let held = PodLock::try_lock(&dead.dir, true).unwrap().unwrap();
        assert!(release_dead(&store, T).released.is_empty());
        assert!(dead.is_marked_running());
        // ... and released it meanwhile: its mark is gone, so nothing is done twice.
        let mut state = dead.state().unwrap();
        release_dead_pod(&dead, &mut state, T).unwrap();
        drop(held);
        assert!(release_dead(&store, T).released.is_empty());
        assert_eq!(dead.state().unwrap().state, State::Exited);
    }

    #[test]
    fn gc_and_rm_wait_for_a_releaser_but_not_for_a_runner() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (pod, runner) = running(&store);
        assert!(wait_for_releaser(&pod).unwrap().is_none(), "a runner's pod");
        drop(runner);
        // A releaser: the mark's lock, then the pod's, let go 200 ms later.
        let releasing = PodLock::try_lock(&pod.mark_path(), true).unwrap().unwrap();
        let held = PodLock::try_lock(&pod.dir, true).unwrap().unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(held);
            drop(releasing);
        });
        let started = std::time::Instant::now();
        assert!(wait_for_releaser(&pod).unwrap().is_some());
        assert!(started.elapsed() >= Duration::from_millis(150));
        releaser.join().unwrap();
    }

    #[test]
    fn a_pod_being_made_keeps_its_mark_and_a_gone_pods_mark_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (dead, lock) = running(&store);
        drop(lock);
        // A pod being built: `.new-<uuid>`, marked before the rename.
        let building = "0a1b2c3d-0000-4000-8000-000000000001";
        std::fs::create_dir(store.dir().join(format!(".new-{building}"))).unwrap();
        std::fs::write(store.dir().join(".running").join(building), b"").unwrap();
        assert_eq!(dead_runners(&store), vec![dead.uuid.clone()]);
        release_dead(&store, T);
        assert!(store.running_marks().contains(&building.to_string()));
        // Once that directory is gone with no pod made, the mark is stale.
        std::fs::remove_dir(store.dir().join(format!(".new-{building}"))).unwrap();
        release_dead(&store, T);
        assert!(store.running_marks().is_empty());
    }

    #[test]
    fn a_runner_that_died_before_taking_a_prepared_pod_leaves_it_prepared() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (pod, lock) = store
            .create(app(), &PodState::new(State::Prepared))
            .unwrap();
        pod.mark_running().unwrap();
        drop(lock);
        let report = release_dead(&store, T);
        assert!(report.released.is_empty() && report.errors.is_empty());
        assert_eq!(pod.state().unwrap().state, State::Prepared);
        assert!(!pod.is_marked_running());
    }

    #[test]
    fn a_pod_whose_release_was_interrupted_is_released_again() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (pod, lock) = running(&store);
        // A releaser that recorded it exited and died before the end.
        let mut state = pod.state().unwrap();
        state.state = State::Exited;
        state.pid = Some(i32::MAX);
        state.store(&pod.dir).unwrap();
        drop(lock);
        assert_eq!(dead_runners(&store), vec![pod.uuid.clone()]);
        let report = release_dead(&store, T);
        assert_eq!(report.released, vec![pod.uuid.clone()]);
        let st = pod.state().unwrap();
        assert_eq!(st.state, State::Exited);
        assert_eq!(st.pid, None);
        assert!(!pod.is_marked_running());
    }
}
