//! Garbage collection (`rkt gc`) and removal (`rkt rm`).
//!
//! gc visits every pod it can lock exclusively (a locked pod is running):
//! - `running` (its runner died), or still marked by a runner that died during its
//!   teardown: record `exited`, kill the plugins it left running, release its networks and
//!   namespace (as [`super::reap`] does for every command that starts or lists pods);
//! - `exited` with networks still recorded or its namespace still there (its teardown
//!   failed): release them again, on every run, whatever the grace period (which only
//!   delays deleting the pod's directory);
//! - `exited` longer than the grace period: release again (idempotent), then delete;
//! - `prepared` for longer than the expiry: delete;
//! - `garbage` (a deletion that failed earlier): release, delete; marked by `--mark-only`:
//!   as `exited`.
//!
//! With `--mark-only` ([`GcOptions::mark_only`]) gc deletes nothing: it releases as above
//! and marks every exited pod garbage, recording when (rkt's way of stamping exit times
//! from a timer); prepared pods are left alone.
//!
//! A pod is released at most once per run, so each failure is reported once, and deleted
//! only once its release succeeded: its record goes only after every DEL of every network
//! succeeded. Pods are visited by as many threads as network operations may run at once
//! ([`crate::networking::admission`]), whose queue they share with every other command.
//! It also deletes what interrupted creations and deletions left. Nothing stops gc early:
//! every failure is collected in the report.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::cleanup::{release_pod, CleanupError};
use super::lock::PodLock;
use super::reap::release_dead_pod;
use super::state::{PodState, State};
use super::store::{Pod, PodStore};
use super::time::Timestamp;
use super::PodError;

/// gc's thresholds.
#[derive(Debug, Clone, Copy)]
pub struct GcOptions {
    /// `--grace-period`: how long exited pods are kept.
    pub grace_period: Duration,
    /// `--expire-prepared`: how long prepared pods are kept.
    pub expire_prepared: Duration,
    /// How long each plugin call of a teardown may take.
    pub plugin_timeout: Duration,
    /// `--mark-only`: mark exited pods garbage instead of deleting anything.
    pub mark_only: bool,
}

/// What gc did.
#[derive(Debug, Default)]
pub struct GcReport {
    /// Pods whose runner had died and whose networks and namespace gc released.
    pub released: Vec<String>,
    /// Exited pods whose failed teardown gc completed.
    pub retried: Vec<String>,
    /// Pods gc deleted.
    pub removed: Vec<String>,
    /// Exited pods `--mark-only` marked garbage.
    pub marked: Vec<String>,
    /// Everything that failed, for every pod, once.
    pub errors: Vec<CleanupError>,
}

/// Leftover `.new-*` directories younger than this may still be being built.
const LEFTOVER_AGE: Duration = Duration::from_secs(600);

/// Runs gc over every pod in `store`.
pub fn gc(store: &PodStore, opts: &GcOptions) -> GcReport {
    let pods = match store.list() {
        Ok(pods) => pods,
        Err(e) => {
            return GcReport {
                errors: vec![e.into()],
                ..GcReport::default()
            }
        }
    };
    let report = Mutex::new(GcReport::default());
    let next = AtomicUsize::new(0);
    let workers = crate::networking::admission::limit().clamp(1, pods.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let Some(pod) = pods.get(next.fetch_add(1, Ordering::SeqCst)) else {
                    return;
                };
                let mut mine = GcReport::default();
                if let Err(e) = gc_pod(store, pod, opts, &mut mine) {
                    if !e.is_gone() {
                        mine.errors.push(e.into());
                    }
                }
                let mut all = report.lock().unwrap_or_else(|e| e.into_inner());
                all.released.extend(mine.released);
                all.retried.extend(mine.retried);
                all.removed.extend(mine.removed);
                all.marked.extend(mine.marked);
                all.errors.extend(mine.errors);
            });
        }
    });
    let mut report = report.into_inner().unwrap_or_else(|e| e.into_inner());
    report.released.sort();
    report.retried.sort();
    report.removed.sort();
    report.marked.sort();
    let (_, errors) = store.sweep_leftovers(LEFTOVER_AGE);
    report
        .errors
        .extend(errors.into_iter().map(CleanupError::from));
    // A template whose last pod went without a teardown (its namespace deleted by hand).
    let _ = crate::mount_template::remove_if_unused();
    report
}

/// Whether an exited pod still holds something outside its directory: networks in its
/// record (a DEL failed) or its namespace.
fn release_pending(pod: &Pod, state: &PodState) -> bool {
    let recorded = crate::networking::load_record(&pod.dir).map_or(true, |r| !r.is_empty());
    recorded || state.netns.as_deref().is_some_and(|ns| ns.exists())
}

fn gc_pod(
    store: &PodStore,
    pod: &Pod,
    opts: &GcOptions,
    report: &mut GcReport,
) -> Result<(), PodError> {
    let lock = match PodLock::try_lock(&pod.dir, true)? {
        Some(lock) => lock,
        // Running, or being released by another command's releaser: gc goes on with it once
        // that is done.
        None => match super::reap::wait_for_releaser(pod)? {
            Some(lock) => lock,
            None => return Ok(()),
        },
    };
    let mut state = pod.state_for_cleanup()?;
    // Released in this run already: Some(whether it succeeded).
    let mut released = None;
    let marked = pod.is_marked_running();
    if state.state == State::Prepared && marked {
        // Its `run-prepared` died before taking it: nothing was set up.
        pod.unmark_running()?;
    }
    // Its runner died, maybe during its teardown (still marked), or a releaser did.
    if state.state == State::Running || (marked && state.state != State::Prepared) {
        let errors = release_dead_pod(pod, &mut state, opts.plugin_timeout)?;
        let ok = errors.is_empty();
        report.errors.extend(errors);
        if ok {
            report.released.push(pod.uuid.clone());
        }
        released = Some(ok);
    } else if matches!(state.state, State::Exited | State::Garbage) && release_pending(pod, &state)
    {
        let errors = release_pod(pod, &state, opts.plugin_timeout);
        let ok = errors.is_empty();
        report.errors.extend(errors);
        if ok {
            report.retried.push(pod.uuid.clone());
        }
        released = Some(ok);
    }
    if opts.mark_only {
        if state.state == State::Exited {
            state.state = State::Garbage;
            state.garbage = Some(Timestamp::now());
            state.marked_only = true;
            state.store(&pod.dir)?;
            report.marked.push(pod.uuid.clone());
        }
        return Ok(());
    }
    let exited_long_enough = state.exited.is_none_or(|t| t.age() >= opts.grace_period);
    let expired = match state.state {
        State::Exited => exited_long_enough,
        // A manifest a machine crash left corrupt (it is not fsynced) can never run.
        State::Prepared => match pod.manifest() {
            Ok(manifest) => manifest.created.age() >= opts.expire_prepared,
            Err(PodError::Corrupt { .. }) => true,
            Err(e) => return Err(e),
        },
        State::Garbage => !state.marked_only || exited_long_enough,
        State::Running => false,
    };
    if !expired {
        return Ok(());
    }
    let ok = match released {
        Some(ok) => ok,
        None => {
            let errors = release_pod(pod, &state, opts.plugin_timeout);
            let ok = errors.is_empty();
            report.errors.extend(errors);
            ok
        }
    };
    if ok {
        store.remove(pod, lock)?;
        report.removed.push(pod.uuid.clone());
    } else if state.state != State::Garbage || state.marked_only {
        state.state = State::Garbage;
        state.garbage = Some(Timestamp::now());
        state.marked_only = false;
        state.store(&pod.dir)?;
    }
    Ok(())
}

/// Why `rkt rm` could not remove a pod.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error("pod {uuid} is running; stop it first (`rkt stop {uuid}`)")]
    Running { uuid: String },
    #[error(
        "pod {uuid} was kept (marked garbage) because releasing it failed: {}",
        list(errors)
    )]
    Release {
        uuid: String,
        errors: Vec<CleanupError>,
    },
}

fn list(errors: &[CleanupError]) -> String {
    errors
        .iter()
        .map(|e| crate::error::chain(e))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `rkt rm`: releases what the pod holds (if its runner died) and deletes it. A running pod
/// is refused. Each plugin call of the teardown may take `plugin_timeout`.
pub fn remove(store: &PodStore, pod: &Pod, plugin_timeout: Duration) -> Result<(), RemoveError> {
    let lock = match PodLock::lock_exclusive_soon(&pod.dir)? {
        Some(lock) => Some(lock),
        None => super::reap::wait_for_releaser(pod)?,
    };
    let lock = lock.ok_or_else(|| RemoveError::Running {
        uuid: pod.uuid.clone(),
    })?;
    let mut state = pod.state_for_cleanup()?;
    let errors = release_pod(pod, &state, plugin_timeout);
    if !errors.is_empty() {
        state.state = State::Garbage;
        state.garbage = Some(Timestamp::now());
        state.pid = None;
        state.store(&pod.dir)?;
        return Err(RemoveError::Release {
            uuid: pod.uuid.clone(),
            errors,
        });
    }
    store.remove(pod, lock)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::{App, PodState};

    fn app() -> App {
        App::new("a", ["a"])
    }

    fn opts(grace: u64) -> GcOptions {
        GcOptions {
            grace_period: Duration::from_secs(grace),
            expire_prepared: Duration::from_secs(3600),
            plugin_timeout: cni::api::DEFAULT_TIMEOUT,
            mark_only: false,
        }
    }

    #[test]
    fn gc_releases_dead_runners_keeps_young_pods_and_skips_locked_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (dead, lock) = store.create(app(), &PodState::new(State::Running)).unwrap();
        drop(lock);
        let (alive, alive_lock) = store.create(app(), &PodState::new(State::Running)).unwrap();
        let (prepared, lock) = store
            .create(app(), &PodState::new(State::Prepared))
            .unwrap();
        drop(lock);

        let report = gc(&store, &opts(1800));
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.released, vec![dead.uuid.clone()]);
        assert!(report.removed.is_empty());
        let st = dead.state().unwrap();
        assert_eq!(st.state, State::Exited);
        assert!(st.exited.is_some());
        assert_eq!(alive.state().unwrap().state, State::Running);
        assert_eq!(prepared.state().unwrap().state, State::Prepared);

        let report = gc(&store, &opts(0));
        assert_eq!(report.removed, vec![dead.uuid.clone()]);
        assert!(!dead.dir.exists());
        assert!(alive.dir.exists() && prepared.dir.exists());
        drop(alive_lock);
    }

    #[test]
    fn gc_removes_pods_whose_unsynced_files_a_machine_crash_left_corrupt() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (running, lock) = store.create(app(), &PodState::new(State::Running)).unwrap();
        drop(lock);
        std::fs::write(running.dir.join("state.json"), b"{\"state\":\"runn\0\0").unwrap();
        let (prepared, lock) = store
            .create(app(), &PodState::new(State::Prepared))
            .unwrap();
        drop(lock);
        std::fs::write(prepared.dir.join("pod.json"), b"\0\0\0").unwrap();

        let report = gc(&store, &opts(0));
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.released, vec![running.uuid.clone()]);
        assert!(!running.dir.exists() && !prepared.dir.exists());
    }

    #[test]
    fn rm_refuses_a_locked_pod_and_removes_an_exited_one() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (pod, lock) = store.create(app(), &PodState::new(State::Running)).unwrap();
        assert!(matches!(
            remove(&store, &pod, cni::api::DEFAULT_TIMEOUT),
            Err(RemoveError::Running { .. })
        ));
        drop(lock);
        remove(&store, &pod, cni::api::DEFAULT_TIMEOUT).unwrap();
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn mark_only_marks_exited_pods_garbage_and_deletes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (dead, lock) = store.create(app(), &PodState::new(State::Running)).unwrap();
        drop(lock);
        let (prepared, lock) = store
            .create(app(), &PodState::new(State::Prepared))
            .unwrap();
        drop(lock);
        let mark_only = GcOptions {
            mark_only: true,
            expire_prepared: Duration::ZERO,
            ..opts(0)
        };

        let report = gc(&store, &mark_only);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(report.released, vec![dead.uuid.clone()]);
        assert_eq!(report.marked, vec![dead.uuid.clone()]);
        assert!(report.removed.is_empty());
        let st = dead.state().unwrap();
        assert_eq!(st.state, State::Garbage);
        assert!(st.exited.is_some() && st.garbage.is_some() && st.marked_only);
        assert_eq!(prepared.state().unwrap().state, State::Prepared);

        // A marked pod keeps its grace period, counted from its exit; then it goes.
        let report = gc(&store, &opts(1800));
        assert!(report.removed.is_empty(), "{:?}", report.removed);
        assert!(dead.dir.exists());
        let report = gc(&store, &opts(0));
        assert_eq!(report.removed, vec![dead.uuid.clone()]);
        assert!(!dead.dir.exists());
    }
}
