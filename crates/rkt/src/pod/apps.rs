//! The apps of a running sandbox (`rkt app sandbox`), one at a time: added (prepared and
//! recorded, state `created`), started, stopped, removed, and their exits recorded.
//!
//! Every change reads, changes and writes the pod's manifest (`pod.json`, the apps) and state
//! record (`state.json`, each app's isolation, PID, times and exit status) under the apps'
//! lock ([`crate::podstore::lock::AppsLock`]), each file replaced whole, so that several
//! `rkt app` commands at once and the runner recording an exit never lose each other's
//! change; a change that fails writes nothing. The pod's runner holds the pod; the commands
//! reach its processes through its init ([`crate::stage::sandbox`]).
//!
//! An app's root directory is `apps/<name>` in the pod's directory, whatever its place in
//! the list, so that removing one app never moves another's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::isolation::{self, Isolation};
use crate::podstore::lock::AppsLock;
use crate::podstore::state::{AppRecord, PodState, State};
use crate::podstore::store::{write_atomic_manifest, Pod};
use crate::podstore::time::Timestamp;
use crate::podstore::{App, PodError, PodManifest, Volume};
use crate::stage::app_logs::{log_path, start_copier, LogStreams, MonitorSpec};
use crate::stage::launch::Launcher;
use crate::stage::sandbox::{start_app, unmount_in_pod, AppStart};
use crate::stage::StageError;

/// What can go wrong with a sandbox's app. Each names the pod and the app.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error("pod {uuid} is not a sandbox: its apps were fixed when it started (`rkt app sandbox` makes one whose apps come and go)")]
    NotSandbox { uuid: String },
    #[error("pod {uuid} is {state}: its apps can be changed only while it runs")]
    NotRunning { uuid: String, state: String },
    #[error("pod {uuid} has no app {name} (its apps: {})", if apps.is_empty() { "none".to_string() } else { apps.join(", ") })]
    NoSuchApp {
        uuid: String,
        name: String,
        apps: Vec<String>,
    },
    #[error("pod {uuid}: {name:?} cannot be an app's name (it names the app's directory, log and socket): choose another --name")]
    BadName { uuid: String, name: String },
    #[error("pod {uuid} already has an app {name}: remove it first (`rkt app rm`) or choose another --name")]
    NameTaken { uuid: String, name: String },
    #[error("pod {uuid}, app {name}: --mount names volume {volume}, which the pod does not have (its volumes are given to `rkt app sandbox --volume`)")]
    NoVolume {
        uuid: String,
        name: String,
        volume: String,
    },
    #[error("pod {uuid}, app {name}: volume {volume:?} is not the app's own (its name must start with \"{name}/\")")]
    NotOwnVolume {
        uuid: String,
        name: String,
        volume: String,
    },
    #[error("pod {uuid}, app {name}")]
    Isolation {
        uuid: String,
        name: String,
        source: isolation::IsolationError,
    },
    #[error("pod {uuid}: cannot start app {name}")]
    Start {
        uuid: String,
        name: String,
        source: Box<StageError>,
    },
    #[error("pod {uuid}, app {name}: still running {seconds} s after SIGKILL")]
    Unkillable {
        uuid: String,
        name: String,
        seconds: u64,
    },
    #[error("pod {uuid}, app {name}: no log is being written (the app never started, keeps no log, or its streams are closed)")]
    NoLogCopier { uuid: String, name: String },
    #[error("pod {uuid}, app {name}: cannot release its root filesystem")]
    Release {
        uuid: String,
        name: String,
        source: Box<StageError>,
    },
}

/// A sandbox's app as its records show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppState {
    /// Added, never started.
    Created,
    Running,
    Exited,
}

impl AppState {
    pub fn as_str(self) -> &'static str {
        match self {
            AppState::Created => "created",
            AppState::Running => "running",
            AppState::Exited => "exited",
        }
    }

    /// The state the record `app` shows.
    pub fn of(app: &AppRecord) -> AppState {
        match (app.started, app.exit_status, app.pid) {
            (None, None, None) => AppState::Created,
            (_, Some(_), _) => AppState::Exited,
            // Ended with the pod, its exit never reported.
            (_, None, None) if app.finished.is_some() => AppState::Exited,
            _ => AppState::Running,
        }
    }
}

/// Where the log of `app`, a sandbox's app in `pod_dir`, is written: the path its settings
/// give, else `logs/<name>.log` in the pod's directory.
pub fn log_file(pod_dir: &Path, app: &App) -> PathBuf {
    match app.log.as_ref().and_then(|l| l.path.clone()) {
        Some(path) => path,
        None => log_path(pod_dir, &app.name),
    }
}

/// The start of the names of app `name`'s own volumes ([`add_with_volumes`]).
fn own_volume_prefix(name: &str) -> String {
    format!("{name}/")
}

/// Where app `name` of a sandbox in `pod_dir` keeps its root filesystem.
pub fn app_dir(pod_dir: &Path, name: &str) -> PathBuf {
    pod_dir.join("apps").join(name)
}

/// The running sandbox `pod`: its manifest, state and the init's host PID. The apps' lock
/// is the caller's.
fn running_sandbox(pod: &Pod) -> Result<(PodManifest, PodState, i32), AppError> {
    let manifest = pod.manifest()?;
    if manifest.sandbox.is_none() {
        return Err(AppError::NotSandbox {
            uuid: pod.uuid.clone(),
        });
    }
    let state = pod.state()?;
    match (state.state, state.pid) {
        (State::Running, Some(pid)) => Ok((manifest, state, pid)),
        (State::Running, None) => Err(AppError::NotRunning {
            uuid: pod.uuid.clone(),
            state: "starting or stopping".into(),
        }),
        (other, _) => Err(AppError::NotRunning {
            uuid: pod.uuid.clone(),
            state: other.to_string(),
        }),
    }
}

/// The position of app `name`'s record in `state` (records are found by name: the
/// manifest's and the state's lists need not line up after a change failed half way).
fn record_of(pod: &Pod, state: &PodState, name: &str) -> Result<usize, AppError> {
    state
        .apps
        .iter()
        .position(|a| a.name == name)
        .ok_or_else(|| AppError::NoSuchApp {
            uuid: pod.uuid.clone(),
            name: name.to_string(),
            apps: state.apps.iter().map(|a| a.name.clone()).collect(),
        })
}

fn index_of(pod: &Pod, manifest: &PodManifest, name: &str) -> Result<usize, AppError> {
    manifest
        .apps
        .iter()
        .position(|a| a.name == name)
        .ok_or_else(|| AppError::NoSuchApp {
            uuid: pod.uuid.clone(),
            name: name.to_string(),
            apps: manifest.apps.iter().map(|a| a.name.clone()).collect(),
        })
}

/// `rkt app add`: records `app` in the running sandbox `pod`, state `created`, its isolation
/// settled (less what `off` turns off). Nothing is written when it is refused.
pub fn add(pod: &Pod, app: App, off: isolation::Disabled) -> Result<(), AppError> {
    add_with_volumes(pod, app, Vec::new(), off)
}

/// [`add`], with volumes of the app's own added to the pod's (a CRI container's host
/// mounts, known only when it is created): each is named `<app>/<anything>`, a name no
/// other app's or sandbox volume can have (app names hold no `/`), and goes with the app
/// when it is removed.
pub fn add_with_volumes(
    pod: &Pod,
    app: App,
    volumes: Vec<Volume>,
    off: isolation::Disabled,
) -> Result<(), AppError> {
    let _lock = AppsLock::lock(&pod.dir)?;
    let (mut manifest, mut state, _) = running_sandbox(pod)?;
    let (uuid, name) = (pod.uuid.clone(), app.name.clone());
    // The name is a directory's (`apps/<name>`), a log's and a socket's.
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(AppError::BadName { uuid, name });
    }
    if manifest.apps.iter().any(|a| a.name == app.name) {
        return Err(AppError::NameTaken { uuid, name });
    }
    let own = own_volume_prefix(&name);
    if let Some(volume) = volumes.iter().find(|v| !v.name.starts_with(&own)) {
        return Err(AppError::NotOwnVolume {
            uuid,
            name,
            volume: volume.name.clone(),
        });
    }
    // Left by an app of the same name that was not removed whole.
    manifest.volumes.retain(|v| !v.name.starts_with(&own));
    manifest.volumes.extend(volumes);
    if let Some(mount) = app
        .mounts
        .iter()
        .find(|m| !manifest.volumes.iter().any(|v| v.name == m.volume))
    {
        let volume = mount.volume.clone();
        return Err(AppError::NoVolume { uuid, name, volume });
    }
    if let Err(source) = app.isolators.check_for_app() {
        return Err(AppError::Isolation { uuid, name, source });
    }
    let settled = Isolation::new(&app.isolators, off).map_err(|source| AppError::Isolation {
        uuid: uuid.clone(),
        name: name.clone(),
        source,
    })?;
    // Compiled now, so that a filter or capability this kernel cannot take is refused here.
    settled.prepare().map_err(|source| AppError::Isolation {
        uuid,
        name: name.clone(),
        source,
    })?;
    // A record whose app the manifest does not name (a change that failed half way) goes.
    state
        .apps
        .retain(|r| manifest.apps.iter().any(|a| a.name == r.name));
    manifest.apps.push(app);
    state.apps.push(AppRecord {
        name,
        isolation: settled,
        pid: None,
        exit_status: None,
        created: Some(Timestamp::now()),
        started: None,
        finished: None,
        log_copier: None,
        cgroup: None,
    });
    // The state first: an app in the state but not the manifest is ignored, never started.
    state.store(&pod.dir)?;
    write_atomic_manifest(&pod.dir, &manifest)?;
    Ok(())
}

/// `rkt app start`: starts app `name` (created or exited) of the running sandbox `pod`
/// from the `rkt` binary `exe`, its log monitor (if any) by `monitors`; does nothing when
/// it runs. Returns its PID in the pod.
pub fn start(pod: &Pod, name: &str, exe: &Path, monitors: &dyn Launcher) -> Result<i32, AppError> {
    let lock = AppsLock::lock(&pod.dir)?;
    let (manifest, state, init_pid) = running_sandbox(pod)?;
    let index = index_of(pod, &manifest, name)?;
    let at = record_of(pod, &state, name)?;
    let record = &state.apps[at];
    if let (AppState::Running, Some(pid)) = (AppState::of(record), record.pid) {
        return Ok(pid);
    }
    let start_err = |source| AppError::Start {
        uuid: pod.uuid.clone(),
        name: name.to_string(),
        source: Box::new(source),
    };
    let app = &manifest.apps[index];
    // Limits of its own: a cgroup of its own, below the pod's.
    let limits = record.isolation.limits;
    let app_cgroup = if limits.memory.is_some() || limits.uses_cpu() {
        let pod_cgroup = state.pod_cgroup(&pod.uuid);
        if pod_cgroup.is_unified() {
            return Err(start_err(StageError::Reported(
                "--memory, --cpu and --cpu-shares of a sandbox's app need cgroup v1 here (on cgroup v2 the \
                 pod's cgroup holds its init, so it cannot give controllers to an app's); give \
                 the limits to `rkt app sandbox`"
                    .into(),
            )));
        }
        let cgroup = pod_cgroup.child(&isolation::cgroups::app_leaf(name));
        let own = isolation::cgroups::Limits {
            pids: Some(isolation::cgroups::PidsLimit::Unlimited),
            ..limits
        };
        isolation::cgroups::detect()
            .create(&cgroup, &own)
            .map_err(|e| start_err(StageError::Isolation(e)))?;
        Some(cgroup)
    } else {
        None
    };
    // Recorded before the helper starts: it joins the cgroup the record names.
    if state.apps[at].cgroup != app_cgroup {
        let mut state = state.clone();
        state.apps[at].cgroup = app_cgroup;
        state.store(&pod.dir)?;
    }
    let log = app.log.clone().unwrap_or_default();
    let monitor = MonitorSpec {
        log: LogStreams {
            stdout: log.stdout,
            stderr: log.stderr,
            config: crate::logs::LogConfig {
                max_size: log.max_size,
                max_files: log.max_files.max(1),
                ..Default::default()
            },
        },
        attach: crate::attach::Endpoints {
            stdin: log.attach.stdin,
            stdout: log.attach.stdout,
            stderr: log.attach.stderr,
            tty: log.attach.tty,
        },
    };
    let attach_dir = crate::attach::attach_dir(&pod.dir);
    let log = log_file(&pod.dir, app);
    let pipes = start_copier(monitors, (&pod.dir, &log), (&attach_dir, name), monitor)
        .map_err(start_err)?;
    let app_dir = app_dir(&pod.dir, name);
    let spec = AppStart {
        exe,
        pod_dir: &pod.dir,
        name,
        app_dir: &app_dir,
        init_pid,
        log_fds: [
            pipes.writers[0].as_ref(),
            pipes.writers[1].as_ref(),
            pipes.writers[2].as_ref(),
        ],
        host_pid: manifest.host_pid(),
    };
    let dir = pod.dir.clone();
    let copier = pipes.copier;
    let started = start_app(&spec, |pid| {
        let mut state = PodState::load(&dir).map_err(|e| crate::error::chain(&e))?;
        let app = state
            .apps
            .iter_mut()
            .find(|a| a.name == name)
            .ok_or_else(|| format!("app {name}'s record is gone"))?;
        app.pid = Some(pid);
        app.started = Some(Timestamp::now());
        app.exit_status = None;
        app.finished = None;
        app.log_copier = copier;
        state.store(&dir).map_err(|e| crate::error::chain(&e))
    });
    drop(pipes);
    drop(lock);
    started.map_err(start_err)
}

/// The host PID of app `index` of the sandbox whose init is `init_pid`, while it runs.
fn host_pid(state: &PodState, name: &str, init_pid: i32) -> Option<i32> {
    let app = state.apps.iter().find(|a| a.name == name)?;
    match AppState::of(app) {
        AppState::Running => crate::stage::enter::app_host_pid(init_pid, app.pid?),
        _ => None,
    }
}

/// `rkt app stop`: SIGTERM to app `name` of the running sandbox `pod`, SIGKILL after
/// `timeout`; returns once its exit is recorded (at once when it does not run).
pub fn stop(pod: &Pod, name: &str, timeout: Duration) -> Result<(), AppError> {
    let (manifest, state, init_pid) = {
        let _lock = AppsLock::lock(&pod.dir)?;
        running_sandbox(pod)?
    };
    index_of(pod, &manifest, name)?;
    let Some(pid) = host_pid(&state, name, init_pid) else {
        return Ok(());
    };
    // The app leads a session and process group of its own: what it started in it is
    // stopped with it.
    let pid = Pid::from_raw(pid);
    let group = Pid::from_raw(-pid.as_raw());
    let signal = |s| {
        if kill(group, s).is_err() {
            let _ = kill(pid, s);
        }
    };
    signal(Signal::SIGTERM);
    if wait_exited(pod, name, pid, timeout)? {
        return Ok(());
    }
    // Still the app's (its number not reused since): then SIGKILL.
    let now = pod.state().ok().and_then(|s| host_pid(&s, name, init_pid));
    if now == Some(pid.as_raw()) {
        signal(Signal::SIGKILL);
    }
    let grace = Duration::from_secs(10);
    if wait_exited(pod, name, pid, grace)? {
        return Ok(());
    }
    Err(AppError::Unkillable {
        uuid: pod.uuid.clone(),
        name: name.to_string(),
        seconds: grace.as_secs(),
    })
}

/// Waits up to `limit` for app `name`'s exit to be recorded (by the runner, from the
/// init's report) or, should the pod have ended meanwhile, for its process to be gone.
fn wait_exited(pod: &Pod, name: &str, pid: Pid, limit: Duration) -> Result<bool, AppError> {
    let deadline = Instant::now() + limit;
    loop {
        let state = pod.state()?;
        let recorded = state
            .apps
            .iter()
            .find(|a| a.name == name)
            .is_none_or(|a| AppState::of(a) != AppState::Running);
        if recorded || (state.state != State::Running && kill(pid, None).is_err()) {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `rkt app rm`: stops app `name` if it runs (SIGKILL after `timeout`), releases its root
/// filesystem and removes it from the pod's records; its log stays until the pod is removed.
pub fn remove(pod: &Pod, name: &str, timeout: Duration) -> Result<(), AppError> {
    stop(pod, name, timeout)?;
    let lock = AppsLock::lock(&pod.dir)?;
    let (mut manifest, mut state, init_pid) = running_sandbox(pod)?;
    let index = index_of(pod, &manifest, name)?;
    if host_pid(&state, name, init_pid).is_some() {
        // Started again meanwhile: stop it once more, under the lock no start can pass.
        drop(lock);
        return remove(pod, name, timeout);
    }
    let dir = app_dir(&pod.dir, name);
    let release = |source| AppError::Release {
        uuid: pod.uuid.clone(),
        name: name.to_string(),
        source: Box::new(source),
    };
    // Every step is tried; the records go only when all of them worked, so that `rm` can
    // be tried again.
    let mut failed = Vec::new();
    if let Err(e) = unmount_in_pod(init_pid, &crate::image_pod::rootfs_dir(&dir)) {
        failed.push(release(e));
    }
    if failed.is_empty() && dir.exists() {
        if let Err(source) = std::fs::remove_dir_all(&dir) {
            failed.push(release(StageError::Io {
                what: "remove",
                path: dir.clone(),
                source,
            }));
        }
    }
    let record = state.apps.iter().position(|a| a.name == name);
    if let Some(cgroup) = record.and_then(|at| state.apps[at].cgroup.clone()) {
        if let Err(e) = isolation::cgroups::detect().remove(&cgroup) {
            failed.push(release(StageError::Isolation(e)));
        }
    }
    if let Some(first) = failed.into_iter().next() {
        return Err(first);
    }
    manifest.apps.remove(index);
    let own = own_volume_prefix(name);
    manifest.volumes.retain(|v| !v.name.starts_with(&own));
    if let Some(at) = record {
        state.apps.remove(at);
    }
    // The manifest first: an app in the state but not the manifest is ignored (and the
    // next `add` drops its record).
    write_atomic_manifest(&pod.dir, &manifest)?;
    state.store(&pod.dir)?;
    Ok(())
}

/// Has app `name`'s log copier start a new file at the log's path, after someone else (a
/// log rotator, kubelet) renamed the current one, and returns once that file exists.
/// Records already written stay in the renamed file; none is split or lost.
pub fn reopen_log(pod: &Pod, name: &str) -> Result<(), AppError> {
    let manifest = pod.manifest()?;
    let index = index_of(pod, &manifest, name)?;
    let state = pod.state()?;
    let copier = state
        .apps
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.log_copier);
    let path = log_file(&pod.dir, &manifest.apps[index]);
    let no_copier = || AppError::NoLogCopier {
        uuid: pod.uuid.clone(),
        name: name.to_string(),
    };
    match copier {
        Some(pid) if crate::stage::app_logs::reopen(pid, &path) => {
            // The copier reopens on its own thread: returns once the new file is there (a
            // log rotator, kubelet, goes on with it at once).
            let deadline = Instant::now() + Duration::from_secs(5);
            while !path.exists() {
                if Instant::now() >= deadline || kill(Pid::from_raw(pid), None).is_err() {
                    return Err(no_copier());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(())
        }
        _ => Err(no_copier()),
    }
}

/// Records the exit of the sandbox app whose PID in the pod was `pid` (the runner, from the
/// init's report); an exit of a process that is no app's is ignored.
pub fn record_exit(pod_dir: &Path, pid: i32, code: i32) -> Result<(), PodError> {
    let _lock = AppsLock::lock(pod_dir)?;
    let mut state = PodState::load(pod_dir)?;
    let Some(app) = state
        .apps
        .iter_mut()
        .find(|a| a.pid == Some(pid) && a.exit_status.is_none())
    else {
        return Ok(());
    };
    app.exit_status = Some(code);
    app.finished = Some(Timestamp::now());
    app.pid = None;
    state.store(pod_dir)
}
