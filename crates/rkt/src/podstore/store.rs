//! The pod store: `<data>/pods/<uuid>/`, one directory per pod (0700, files 0600).
//!
//! A pod becomes visible only once complete: it is built in `.new-<uuid>` (manifest and state
//! written, exclusive lock already held) and renamed to `<uuid>` in one step. Nobody reads
//! a `.new-` directory, so its files are written directly, without temporary files. Removal is the
//! reverse: under the exclusive lock the state becomes `garbage`, the directory is renamed to
//! `.rm-<uuid>` and only then deleted. Readers list only names that are UUIDs, so they never
//! see a half-built or half-deleted pod.
//!
//! `.running/<uuid>` (an empty file) marks a pod a runner has taken: made before the pod is
//! recorded `running`, removed once it is released. A mark whose pod's lock is free is a
//! pod whose runner died (or one still to be unmarked), so finding those costs a look at
//! the pods that run, not at every pod the store keeps ([`PodStore::running_marks`],
//! used by [`crate::pod::reap`]).

use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use uuid::Uuid;

use super::lock::PodLock;
use super::manifest::{PodManifest, PodSpec};
use super::state::{PodState, State, STATE_FILE};
use super::time::Timestamp;
use super::PodError;

/// The manifest's file name inside a pod directory.
pub const MANIFEST_FILE: &str = "pod.json";
const NEW_PREFIX: &str = ".new-";
const RM_PREFIX: &str = ".rm-";
/// The directory of the runners' marks, in the pods directory.
pub const RUNNING_DIR: &str = ".running";

/// All pods under one data directory.
#[derive(Debug, Clone)]
pub struct PodStore {
    dir: PathBuf,
}

/// One pod: its UUID and directory. Cheap; reads its files on demand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub uuid: String,
    pub dir: PathBuf,
}

impl Pod {
    /// Reads `pod.json`.
    pub fn manifest(&self) -> Result<PodManifest, PodError> {
        let path = self.dir.join(MANIFEST_FILE);
        let bytes = fs::read(&path).map_err(|source| PodError::Io {
            what: "read pod manifest",
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|source| PodError::Corrupt { path, source })
    }

    /// Reads `state.json`.
    pub fn state(&self) -> Result<PodState, PodError> {
        PodState::load(&self.dir)
    }

    /// The state for gc and rm, which hold the pod's exclusive lock: see
    /// [`PodState::load_for_cleanup`].
    pub fn state_for_cleanup(&self) -> Result<PodState, PodError> {
        PodState::load_for_cleanup(&self.dir, crate::netns::pod_netns_path(&self.uuid))
    }

    /// The pod's mark in its store's [`RUNNING_DIR`] (a releaser holds its lock while it
    /// releases the pod: see [`crate::pod::reap`]).
    pub fn mark_path(&self) -> PathBuf {
        running_mark(self.dir.parent().unwrap_or(Path::new(".")), &self.uuid)
    }

    /// Marks the pod as taken by a runner, before it is recorded `running`. The caller
    /// holds the pod's exclusive lock.
    pub fn mark_running(&self) -> Result<(), PodError> {
        let pods = self.dir.parent().unwrap_or(Path::new("."));
        mark_running(pods, &self.uuid)
    }

    /// Whether the pod carries a runner's mark.
    pub fn is_marked_running(&self) -> bool {
        self.mark_path().exists()
    }

    /// Removes the runner's mark once the pod is released (gone already is fine). The caller
    /// holds the pod's exclusive lock.
    pub fn unmark_running(&self) -> Result<(), PodError> {
        let path = self.mark_path();
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(source) => Err(PodError::Io {
                what: "remove the runner's mark",
                path,
                source,
            }),
        }
    }

    /// Makes the pod directory's name in the pods directory survive a machine crash
    /// (fsync of the pods directory), so that gc after a reboot finds what is recorded in
    /// it durably. Pods are created without it; the runner calls it before the first
    /// network record, and only pods with networks need it.
    pub fn sync_entry(&self) -> Result<(), PodError> {
        Ok(crate::fsutil::sync_dir(
            self.dir.parent().unwrap_or(Path::new(".")),
        )?)
    }
}

impl PodStore {
    /// The store rooted at `pods_dir` (normally `<data>/pods`). Nothing is created yet.
    pub fn new(pods_dir: impl Into<PathBuf>) -> Self {
        PodStore {
            dir: pods_dir.into(),
        }
    }

    /// The pods directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn mkdir(path: &Path, recursive: bool) -> Result<(), PodError> {
        DirBuilder::new()
            .recursive(recursive)
            .mode(0o700)
            .create(path)
            .map_err(|source| PodError::Io {
                what: "create directory",
                path: path.to_path_buf(),
                source,
            })
    }

    /// Creates a complete pod in `state` and returns it with its exclusive lock held.
    pub fn create(
        &self,
        spec: impl Into<PodSpec>,
        state: &PodState,
    ) -> Result<(Pod, PodLock), PodError> {
        let (pod, lock, _) = self.create_with(spec, |_| state.clone())?;
        Ok((pod, lock))
    }

    /// Creates a complete pod in the state `state_of` gives for its UUID and returns it, its
    /// exclusive lock held, and that state.
    ///
    /// Nothing here is fsynced: a pod that a machine crash takes away had nothing set up
    /// outside its directory yet. A runner calls [`Pod::sync_entry`] before it records
    /// anything teardown after a reboot needs.
    pub fn create_with(
        &self,
        spec: impl Into<PodSpec>,
        state_of: impl FnOnce(&str) -> PodState,
    ) -> Result<(Pod, PodLock, PodState), PodError> {
        Self::mkdir(&self.dir, true)?;
        let uuid = Uuid::new_v4().hyphenated().to_string();
        let tmp = self.dir.join(format!("{NEW_PREFIX}{uuid}"));
        Self::mkdir(&tmp, false)?;
        let spec = spec.into();
        let mark = running_mark(&self.dir, &uuid);
        let built = (|| {
            let mut lock = PodLock::try_lock(&tmp, true)?
                .ok_or_else(|| PodError::InUse { uuid: uuid.clone() })?;
            let manifest = PodManifest {
                uuid: uuid.clone(),
                created: Timestamp::now(),
                apps: spec.apps,
                exit_policy: spec.exit_policy,
                volumes: spec.volumes,
                sandbox: spec.sandbox,
                meta: spec.meta,
                cgroup_parent: spec.cgroup_parent,
                ports: spec.ports,
            };
            let bytes = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
            create_new(&tmp, MANIFEST_FILE, &bytes)?;
            let state = state_of(&uuid);
            create_new(&tmp, STATE_FILE, &state.to_bytes())?;
            if state.state == State::Running {
                // Before the pod can be seen: a runner that dies from here on is found.
                mark_running(&self.dir, &uuid)?;
            }
            let dir = self.dir.join(&uuid);
            fs::rename(&tmp, &dir).map_err(|source| PodError::Io {
                what: "move new pod into place",
                path: dir.clone(),
                source,
            })?;
            lock.renamed(dir.clone());
            Ok((Pod { uuid, dir }, lock, state))
        })();
        if built.is_err() {
            let _ = fs::remove_dir_all(&tmp);
            let _ = fs::remove_file(&mark);
        }
        built
    }

    /// Every pod, sorted by UUID. A missing pods directory holds no pods.
    pub fn list(&self) -> Result<Vec<Pod>, PodError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(PodError::Io {
                    what: "list pods",
                    path: self.dir.clone(),
                    source,
                })
            }
        };
        let mut pods = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| PodError::Io {
                what: "list pods",
                path: self.dir.clone(),
                source,
            })?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if is_uuid(&name) {
                pods.push(Pod {
                    dir: entry.path(),
                    uuid: name,
                });
            }
        }
        pods.sort_by(|a, b| a.uuid.cmp(&b.uuid));
        Ok(pods)
    }

    /// The one pod whose UUID starts with `prefix` (case-insensitive).
    pub fn lookup(&self, prefix: &str) -> Result<Pod, PodError> {
        let wanted = prefix.trim().to_ascii_lowercase();
        if wanted.is_empty() || !wanted.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(PodError::BadUuid {
                given: prefix.to_string(),
            });
        }
        let mut matches: Vec<Pod> = self
            .list()?
            .into_iter()
            .filter(|p| p.uuid.starts_with(&wanted))
            .collect();
        match matches.len() {
            0 => Err(PodError::NotFound {
                prefix: wanted,
                dir: self.dir.clone(),
            }),
            1 => Ok(matches.remove(0)),
            _ => Err(PodError::Ambiguous {
                prefix: wanted,
                candidates: matches.into_iter().map(|p| p.uuid).collect(),
            }),
        }
    }

    /// Marks the pod garbage and deletes it. The caller holds its exclusive lock, and has
    /// already torn down whatever the pod left behind.
    pub fn remove(&self, pod: &Pod, mut lock: PodLock) -> Result<(), PodError> {
        let mut state = pod.state()?;
        if state.state != State::Garbage {
            state.state = State::Garbage;
            state.garbage = Some(Timestamp::now());
            state.store(&pod.dir)?;
        }
        pod.unmark_running()?;
        let doomed = self.dir.join(format!("{RM_PREFIX}{}", pod.uuid));
        fs::rename(&pod.dir, &doomed).map_err(|source| PodError::Io {
            what: "move pod out of the way for deletion",
            path: pod.dir.clone(),
            source,
        })?;
        lock.renamed(doomed.clone());
        fs::remove_dir_all(&doomed).map_err(|source| PodError::Io {
            what: "delete pod directory",
            path: doomed.clone(),
            source,
        })?;
        drop(lock);
        Ok(())
    }

    /// The UUIDs of the pods marked as taken by a runner (see [`RUNNING_DIR`]), in no
    /// particular order: one directory read, however many pods the store keeps.
    pub fn running_marks(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.dir.join(RUNNING_DIR)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|name| is_uuid(name))
            .collect()
    }

    /// Removes the mark of pod `uuid` when no pod of that UUID exists, nor one being built
    /// (`.new-<uuid>`, marked before it is renamed into place); returns whether it did.
    pub fn remove_stale_mark(&self, uuid: &str) -> bool {
        // In this order: the rename from `.new-<uuid>` to `<uuid>` is atomic, so a pod
        // being built is seen under one of the two names.
        if self.dir.join(format!("{NEW_PREFIX}{uuid}")).exists() || self.dir.join(uuid).exists() {
            return false;
        }
        fs::remove_file(running_mark(&self.dir, uuid)).is_ok()
    }

    /// Deletes what interrupted creations and deletions left behind (`.new-*`, `.rm-*`)
    /// once nobody holds their lock and, for `.new-*`, they are older than `min_age`.
    /// Returns the paths it removed and the failures.
    pub fn sweep_leftovers(&self, min_age: Duration) -> (Vec<PathBuf>, Vec<PodError>) {
        let mut removed = Vec::new();
        let mut errors = Vec::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return (removed, errors);
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            let is_new = name.starts_with(NEW_PREFIX);
            if !is_new && !name.starts_with(RM_PREFIX) {
                continue;
            }
            if is_new {
                let old_enough = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .map(|t| Timestamp(t).age() >= min_age)
                    .unwrap_or(false);
                if !old_enough {
                    continue;
                }
            }
            match PodLock::try_lock(&path, true) {
                Ok(Some(_lock)) => match fs::remove_dir_all(&path) {
                    Ok(()) => removed.push(path),
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(source) => errors.push(PodError::Io {
                        what: "delete leftover pod directory",
                        path,
                        source,
                    }),
                },
                Ok(None) => {}
                Err(PodError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
                Err(e) => errors.push(e),
            }
        }
        // Marks of pods that are gone (a deletion by hand, or an older rkt's).
        for uuid in self.running_marks() {
            if self.remove_stale_mark(&uuid) {
                removed.push(running_mark(&self.dir, &uuid));
            }
        }
        (removed, errors)
    }
}

/// The mark of pod `uuid` in the pods directory `pods`.
fn running_mark(pods: &Path, uuid: &str) -> PathBuf {
    pods.join(RUNNING_DIR).join(uuid)
}

/// Makes the mark of pod `uuid` in the pods directory `pods` (and its directory).
fn mark_running(pods: &Path, uuid: &str) -> Result<(), PodError> {
    let dir = pods.join(RUNNING_DIR);
    if let Err(source) = DirBuilder::new().mode(0o700).create(&dir) {
        if source.kind() != ErrorKind::AlreadyExists {
            return Err(PodError::Io {
                what: "create the runners' marks directory",
                path: dir,
                source,
            });
        }
    }
    let path = running_mark(pods, uuid);
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map(drop)
        .map_err(|source| PodError::Io {
            what: "mark as taken by a runner",
            path,
            source,
        })
}

/// Writes `dir/name` of a pod directory nobody sees yet (see [`crate::fsutil::create_new`]).
fn create_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), PodError> {
    Ok(crate::fsutil::create_new(&dir.join(name), bytes, 0o600)?)
}

/// Whether `name` is a pod directory name: a lowercase hyphenated UUID.
pub fn is_uuid(name: &str) -> bool {
    name.len() == 36
        && Uuid::try_parse(name).is_ok()
        && !name.chars().any(|c| c.is_ascii_uppercase())
}

/// Replaces `<dir>/pod.json` with `manifest`, whole (a sandbox's apps change while it runs;
/// the caller holds the apps' lock).
pub fn write_atomic_manifest(dir: &Path, manifest: &PodManifest) -> Result<(), PodError> {
    let bytes = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
    super::state::write_atomic(dir, MANIFEST_FILE, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podstore::App;
    use std::os::unix::fs::PermissionsExt;

    fn app() -> App {
        App::new("true", ["true"])
    }

    #[test]
    fn create_makes_a_locked_complete_pod_with_private_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (pod, lock) = store
            .create(app(), &PodState::new(State::Prepared))
            .unwrap();
        assert!(is_uuid(&pod.uuid));
        assert_eq!(lock.dir(), pod.dir);
        assert!(PodLock::is_held(&pod.dir).unwrap());
        assert_eq!(pod.manifest().unwrap().apps, vec![app()]);
        assert_eq!(pod.state().unwrap().state, State::Prepared);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&pod.dir), 0o700);
        assert_eq!(mode(&pod.dir.join(MANIFEST_FILE)), 0o600);
        drop(lock);
        assert!(!PodLock::is_held(&pod.dir).unwrap());
        assert_eq!(store.list().unwrap(), vec![pod]);
    }

    #[test]
    fn lookup_by_unique_prefix_and_reports_ambiguity() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let mut pods = Vec::new();
        for _ in 0..20 {
            pods.push(
                store
                    .create(app(), &PodState::new(State::Prepared))
                    .unwrap()
                    .0,
            );
        }
        let first = &pods[0];
        assert_eq!(&store.lookup(&first.uuid).unwrap(), first);
        assert_eq!(
            &store.lookup(&first.uuid[..20].to_uppercase()).unwrap(),
            first
        );
        // 20 pods over 16 hex digits: some first digit is shared.
        let mut counts = std::collections::HashMap::new();
        for p in &pods {
            *counts.entry(&p.uuid[..1]).or_insert(0) += 1;
        }
        let (shared, _) = counts.iter().find(|(_, n)| **n > 1).unwrap();
        match store.lookup(shared) {
            Err(PodError::Ambiguous { candidates, .. }) => assert!(candidates.len() > 1),
            other => panic!("expected ambiguity, got {other:?}"),
        }
        assert!(matches!(store.lookup("zz"), Err(PodError::BadUuid { .. })));
    }

    #[test]
    fn lookup_in_a_missing_store_is_not_found() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("nope"));
        assert!(store.list().unwrap().is_empty());
        let err = store.lookup("abc").unwrap_err();
        assert!(matches!(err, PodError::NotFound { .. }), "{err:?}");
    }

    #[test]
    fn remove_deletes_the_pod_and_listing_ignores_leftovers() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let (pod, lock) = store.create(app(), &PodState::new(State::Exited)).unwrap();
        fs::create_dir(store.dir().join(".new-leftover")).unwrap();
        store.remove(&pod, lock).unwrap();
        assert!(!pod.dir.exists());
        assert!(store.list().unwrap().is_empty());
        let (removed, errors) = store.sweep_leftovers(Duration::ZERO);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(removed, vec![store.dir().join(".new-leftover")]);
    }

    #[test]
    fn a_manifest_of_an_older_rkt_without_volumes_still_reads() {
        let old =
            r#"{"uuid":"u","created":"2026-01-01T00:00:00Z","app":{"name":"a","exec":["true"]}}"#;
        let manifest: PodManifest = serde_json::from_str(old).unwrap();
        assert!(manifest.volumes.is_empty());
        assert!(manifest.first_app().mounts.is_empty());
    }
}
