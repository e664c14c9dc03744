//! Running a pod, start to end: `rkt run` and `rkt run-prepared`.
//!
//! Under the pod's exclusive lock, held throughout: record `running` (with the namespace
//! path, before the namespace exists) → build an image pod's root filesystem (see
//! [`crate::image_pod::rootfs`]) → create the network namespace (not for
//! `--net=host`) → set up the networks → start the stage and record the init's PID → wait →
//! tear the networks down → delete the namespace → record `exited` with the app's status.
//! Before the pod is recorded, what can be checked without it is (the networks, the host's
//! `--mount` targets) and the `--port` host ports are bound, held by this runner until the
//! pod's networks are torn down; a failure there leaves no pod at all.
//! When any step fails, everything set up so far is released, the pod is recorded `exited`
//! with the error, and the error names what failed. SIGINT, SIGTERM and friends sent to the
//! runner are forwarded to the pod (see [`crate::stage::signals`]: a SIGINT from a process,
//! not the terminal, as SIGTERM, which stops the pod: the apps are killed if they have not
//! ended 10 s later); one that arrives before the app runs aborts the start. Either way the
//! runner itself always gets to tear down.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::isolation::{self, Isolation, IsolationError};
use crate::netns::{self, NetnsError};
use crate::networking::{
    self, HostPorts, NetError, NetInfo, NetOptions, NetSelection, PlannedNet, PodNet, PortError,
    PortsLock,
};
use crate::stage::{self, signals, StageError, StageSpec};

use super::cleanup::{release, CleanupError};
use super::lock::PodLock;
use super::manifest::{App, PodSpec};
use super::state::{AppRecord, NetSummary, PodState, State};
use super::store::{Pod, PodStore};
use super::time::Timestamp;
use super::PodError;

/// How to run a pod.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Networks, directories in effect, DNS, hosts and hostname. An empty hostname means
    /// `rkt-<uuid>` (the host's hostname with `--net=host`).
    pub net: NetOptions,
    /// The `rkt` binary to re-execute as the stage (normally `/proc/self/exe`).
    pub exe: PathBuf,
    /// `--uuid-file-save`: where to write the UUID once the pod exists.
    pub uuid_file_save: Option<PathBuf>,
    /// How long each plugin call may take (setup and teardown).
    pub plugin_timeout: Duration,
    /// The app's standard streams that are `/dev/null` instead of the runner's.
    pub null_stdio: stage::NullStdio,
    /// The apps' output streams that go to their logs (`--stdout=log`, `--stderr=log`).
    pub log_streams: stage::app_logs::LogStreams,
    /// The parts of pod isolation `--insecure-options` turned off.
    pub isolation_off: isolation::Disabled,
    /// Told once the pod's apps run (`rkt run --detach`).
    pub started_notice: Option<StartedNotice>,
    /// `--cgroup-parent`: where the pod's cgroup is made, over what `rkt prepare` kept;
    /// neither: below the cgroup of this process (see [`isolation::cgroups`]).
    pub cgroup_parent: Option<isolation::cgroups::CgroupParent>,
}

/// Where a runner says that its pod's apps run: one line, `started <uuid>`, on a descriptor
/// that is then closed. `rkt run --detach` returns when its detached runner says so; the
/// runner goes on holding the pod.
#[derive(Debug, Clone)]
pub struct StartedNotice(std::sync::Arc<std::sync::Mutex<Option<std::fs::File>>>);

impl StartedNotice {
    /// A notice written to `file`.
    pub fn new(file: std::fs::File) -> StartedNotice {
        StartedNotice(std::sync::Arc::new(std::sync::Mutex::new(Some(file))))
    }

    fn take(&self) -> Option<std::fs::File> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Says the apps of pod `uuid` run, once; later calls do nothing.
    pub fn started(&self, uuid: &str) {
        if let Some(mut file) = self.take() {
            let _ = file.write_all(format!("started {uuid}\n").as_bytes());
        }
    }

    /// Says why the pod did not start (one line), unless it was already told it started.
    pub fn failed(&self, message: &str) {
        if let Some(mut file) = self.take() {
            let line = message.replace('\n', " ");
            let _ = file.write_all(format!("error {line}\n").as_bytes());
        }
    }

    /// In a runner started by [`StartedNotice::launch_runner`]: the notice named by the
    /// environment variable `var` (removed from the environment), owned from here and
    /// close-on-exec again; `None` when the variable is not set.
    pub fn from_env(var: &str) -> std::io::Result<Option<StartedNotice>> {
        Ok(stage::launch::take_inherited(var)?.map(|fd| StartedNotice::new(fd.into())))
    }

    /// Starts `launch` by `launcher` as a runner (its standard streams on `/dev/null`) that
    /// says on a notice pipe, named to it by the environment variable `var` and inherited
    /// by it alone, when its pod's apps run; returns what it said first.
    ///
    /// A launcher that failed after all may have started it (a fork server that died
    /// before it answered): what the runner says is read either way, so that a pod that
    /// runs is never reported as failed (and started again by a retrying caller).
    pub fn launch_runner(
        launcher: &dyn stage::launch::Launcher,
        mut launch: stage::launch::Launch,
        var: &str,
    ) -> std::io::Result<RunnerSaid> {
        use std::os::fd::AsRawFd;
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        launch
            .env
            .push((var.into(), write.as_raw_fd().to_string().into()));
        launch.fds.push(write.as_raw_fd());
        let launched = launcher.launch(&launch);
        drop(write);
        let said = RunnerSaid::read(read)?;
        match (launched, said) {
            (Err(e), RunnerSaid::Nothing) => Err(e),
            (_, said) => Ok(said),
        }
    }
}

/// What a runner said on its [`StartedNotice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunnerSaid {
    /// Its pod's apps run: the pod's UUID.
    Started(String),
    /// Why its pod did not start.
    Failed(String),
    /// Nothing: it ended first.
    Nothing,
}

impl RunnerSaid {
    /// The first line on the read end of a notice pipe (end of file: [`RunnerSaid::Nothing`]).
    fn read(pipe: std::os::fd::OwnedFd) -> std::io::Result<RunnerSaid> {
        use std::io::BufRead;
        let mut said = String::new();
        std::io::BufReader::new(std::fs::File::from(pipe)).read_line(&mut said)?;
        let said = said.trim_end();
        Ok(
            match (said.strip_prefix("started "), said.strip_prefix("error ")) {
                (Some(uuid), _) => RunnerSaid::Started(uuid.to_string()),
                (None, Some(message)) => RunnerSaid::Failed(message.to_string()),
                (None, None) => RunnerSaid::Nothing,
            },
        )
    }
}

/// How a pod run ended.
#[derive(Debug)]
pub struct RunOutcome {
    pub uuid: String,
    /// The app's exit status (128 + signal number if a signal killed it).
    pub exit_status: i32,
    /// What could not be released after the app ended (gc retries it).
    pub cleanup_errors: Vec<CleanupError>,
}

/// Why a pod did not run. Every variant names the pod.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Pod(#[from] PodError),
    #[error("pod {uuid}: cannot write the UUID to {path}")]
    UuidFile {
        uuid: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", super::about_pod(uuid, source))]
    Netns { uuid: String, source: NetnsError },
    #[error("{}", super::about_pod(uuid, source))]
    Network { uuid: String, source: NetError },
    /// Bad network, DNS or hosts options, found before any pod was created.
    #[error(transparent)]
    Options(NetError),
    /// Isolation flags that cannot be applied, found before the pod runs.
    #[error(transparent)]
    Isolation(IsolationError),
    /// A `--mount` target the host lacks, found before any pod was created.
    #[error(transparent)]
    Mounts(stage::volumes::VolumeMountError),
    #[error("{}", super::about_pod(uuid, source))]
    Stage { uuid: String, source: StageError },
    #[error("pod {uuid}: interrupted by {signal} before the app started")]
    Interrupted { uuid: String, signal: Signal },
    #[error("pod {uuid}")]
    Rootfs {
        uuid: String,
        source: Box<crate::image_pod::rootfs::RootfsError>,
    },
    #[error("pod {uuid}: cannot install signal forwarding")]
    Signals {
        uuid: String,
        source: nix::errno::Errno,
    },
}

/// A failed start, plus whatever releasing the pod afterwards could not do.
#[derive(Debug, thiserror::Error)]
#[error("{}{}", crate::error::chain(error.as_ref()), cleanup_suffix(cleanup))]
pub struct StartFailure {
    pub error: Box<RunError>,
    pub cleanup: Vec<CleanupError>,
}

fn cleanup_suffix(cleanup: &[CleanupError]) -> String {
    if cleanup.is_empty() {
        return String::new();
    }
    let list: Vec<String> = cleanup.iter().map(|e| crate::error::chain(e)).collect();
    format!(
        " (cleaning up also failed: {}; `rkt gc` retries)",
        list.join("; ")
    )
}

impl From<PodError> for StartFailure {
    fn from(e: PodError) -> Self {
        StartFailure {
            error: Box::new(RunError::Pod(e)),
            cleanup: Vec::new(),
        }
    }
}

/// `rkt run`: creates a pod for `spec` (one app, or several) and runs it.
pub fn run_new(
    store: &PodStore,
    spec: impl Into<PodSpec>,
    opts: &RunOptions,
) -> Result<RunOutcome, StartFailure> {
    let spec = spec.into();
    let planned = preflight(&opts.net)?;
    // Before the pod exists: `rkt stop` of a pod this young signals this runner, which must
    // then abort the start rather than die of it (a failure here is reported by `start`).
    let _ = signals::install();
    signals::interrupt_stops_pod();
    let mut isolation = settle_isolation(&spec.apps, spec.sandbox.as_ref(), opts)?;
    let cgroups = place_cgroup(&isolation, &spec.apps, opts, spec.cgroup_parent.as_ref())?;
    let host_ports = before_create(&spec.apps, opts, store.dir(), "")?;
    let private_users = match &spec.sandbox {
        Some(pod) => pod.private_users,
        None => spec.apps[0].isolators.private_users,
    };
    let in_use = if private_users {
        id_ranges_in_use(store)
    } else {
        Vec::new()
    };
    let sandbox = isolation.sandbox;
    // The pod appears already `running`, with the namespace path it is about to get.
    let (pod, lock, state) = store.create_with(spec, |uuid| {
        let mut state = start_running(uuid, PodState::new(State::Running), opts);
        state.cgroup = Some(cgroups.pod(uuid));
        if private_users {
            isolation.pod.user_ns = Some(isolation::user_ns::allocate(uuid, &in_use));
        }
        isolation.record(&mut state);
        state
    })?;
    run_locked(&pod, lock, opts, state, (planned, host_ports), sandbox)
}

/// `rkt run-prepared`: runs a pod `rkt prepare` made.
pub fn run_prepared(pod: &Pod, opts: &RunOptions) -> Result<RunOutcome, StartFailure> {
    let planned = preflight(&opts.net)?;
    let _ = signals::install(); // as in `run_new`
    signals::interrupt_stops_pod();
    let lock = PodLock::lock_exclusive_soon(&pod.dir)?.ok_or_else(|| PodError::InUse {
        uuid: pod.uuid.clone(),
    })?;
    let state = pod.state()?;
    if state.state != State::Prepared {
        return Err(PodError::WrongState {
            uuid: pod.uuid.clone(),
            state: state.state,
            action: "run-prepared",
            wanted: "prepared",
        }
        .into());
    }
    let manifest = pod.manifest()?;
    let apps = manifest.apps;
    let mut isolation = settle_isolation(&apps, None, opts)?;
    let cgroups = place_cgroup(&isolation, &apps, opts, manifest.cgroup_parent.as_ref())?;
    let pods = pod.dir.parent().unwrap_or(Path::new("/"));
    let host_ports = before_create(&apps, opts, pods, &pod.uuid)?;
    if apps[0].isolators.private_users {
        let in_use = id_ranges_in_use(&PodStore::new(pods));
        isolation.pod.user_ns = Some(isolation::user_ns::allocate(&pod.uuid, &in_use));
    }
    let mut state = start_running(&pod.uuid, state, opts);
    state.cgroup = Some(cgroups.pod(&pod.uuid));
    isolation.record(&mut state);
    // Marked before it is recorded running: if this runner dies from here on, the next
    // command that starts or lists pods releases it (see `super::reap`).
    pod.mark_running()?;
    state.store(&pod.dir)?;
    // A prepared pod is never a sandbox.
    run_locked(pod, lock, opts, state, (planned, host_ports), false)
}

/// What can still fail before the pod is recorded running, and must then leave nothing
/// behind: the host's `--mount` targets of apps on the host's root, and the host ports
/// `--port` forwards, which are held from here for the pod's life (see
/// [`networking::reserve_ports`]; `own_uuid` is a prepared pod's, or empty).
fn before_create(
    apps: &[App],
    opts: &RunOptions,
    pods_dir: &Path,
    own_uuid: &str,
) -> Result<HostPorts, StartFailure> {
    let failed = |error| StartFailure {
        error: Box::new(error),
        cleanup: Vec::new(),
    };
    stage::volumes::check_host_targets(apps).map_err(|e| failed(RunError::Mounts(e)))?;
    let reserve = || networking::reserve_ports(&opts.net, pods_dir, own_uuid);
    match reserve() {
        // A pod whose runner died still forwards the port: released now (the command's
        // background releaser may be at it already), then the ports are tried again.
        Err(NetError::Ports(PortError::Taken {
            uuid,
            running: false,
            ..
        })) if super::reap::release_now_if_dead(
            &PodStore::new(pods_dir),
            &uuid,
            opts.plugin_timeout,
        ) =>
        {
            reserve()
        }
        other => other,
    }
    .map_err(|e| failed(RunError::Options(e)))
}

/// What the apps of a pod run with: the first app's isolation, which also holds the pod's
/// own settings (limits, user namespace), and the others'.
struct Settled {
    pod: Isolation,
    /// A sandbox's (its apps come later).
    sandbox: bool,
    others: Vec<(String, Isolation)>,
    first_name: String,
}

impl Settled {
    /// Into the pod's record: one isolation for a pod of one app, one per app record for
    /// several.
    fn record(self, state: &mut PodState) {
        if !self.others.is_empty() {
            state.apps = std::iter::once((self.first_name, self.pod.clone()))
                .chain(self.others)
                .map(|(name, isolation)| AppRecord {
                    name,
                    isolation,
                    pid: None,
                    exit_status: None,
                    created: None,
                    started: None,
                    finished: None,
                    log_copier: None,
                    cgroup: None,
                })
                .collect();
        }
        state.isolation = Some(self.pod);
    }
}

/// What the apps will run with: their flags, less what `--insecure-options` turned off.
/// With `--private-users`, checks first that this host can create user namespaces.
fn settle_isolation(
    apps: &[App],
    sandbox: Option<&isolation::Isolators>,
    opts: &RunOptions,
) -> Result<Settled, StartFailure> {
    let failed = |e| StartFailure {
        error: Box::new(RunError::Isolation(e)),
        cleanup: Vec::new(),
    };
    // A sandbox's own settings, or the first app's (whose settings are the pod's).
    let (pod_isolators, others) = match sandbox {
        Some(isolators) => (isolators, apps),
        None => (&apps[0].isolators, &apps[1..]),
    };
    if pod_isolators.private_users {
        isolation::user_ns::check_available(Path::new(isolation::user_ns::MAX_USER_NAMESPACES))
            .map_err(failed)?;
    }
    for app in apps {
        app.isolators.check_for_app().map_err(failed)?;
    }
    let pod = Isolation::new(pod_isolators, opts.isolation_off).map_err(failed)?;
    let others = others
        .iter()
        .map(|app| {
            Isolation::new(&app.isolators, opts.isolation_off).map(|i| (app.name.clone(), i))
        })
        .collect::<Result<_, _>>()
        .map_err(failed)?;
    Ok(Settled {
        pod,
        sandbox: sandbox.is_some(),
        others,
        first_name: apps.first().map(|a| a.name.clone()).unwrap_or_default(),
    })
}

/// Where the pod's cgroup goes (see [`isolation::cgroups`]): below `--cgroup-parent`
/// (`run`'s or `run-prepared`'s flag, else `prepared`, what `rkt prepare` kept), or below
/// this process's cgroup. A place that cannot work fails here, before the pod runs.
fn place_cgroup(
    settled: &Settled,
    apps: &[App],
    opts: &RunOptions,
    prepared: Option<&isolation::cgroups::CgroupParent>,
) -> Result<isolation::cgroups::Placement, StartFailure> {
    let failed = |e| StartFailure {
        error: Box::new(RunError::Isolation(e)),
        cleanup: Vec::new(),
    };
    let parent = opts.cgroup_parent.as_ref().or(prepared);
    // Apps' own limits: a cgroup of each app's below the pod's, which must then be in the
    // hierarchies they need (with no limit of the pod's own there).
    let own: Vec<&isolation::cgroups::Limits> = apps
        .iter()
        .map(|a| &a.isolators.own_limits)
        .filter(|l| !l.is_none())
        .collect();
    if let Some(app) = apps.iter().find(|a| !a.isolators.own_limits.is_none()) {
        if isolation::cgroups::unified() {
            return Err(failed(isolation::IsolationError::Unsupported {
                what: format!(
                    "app {}: --memory, --cpu and --cpu-shares of one app (after its image, or \
                     with a later app) need cgroup v1 here: on cgroup v2 the pod's cgroup \
                     holds its init, so it cannot give controllers to an app's; give them \
                     before the first app, for the whole pod",
                    app.name
                ),
            }));
        }
    }
    let own_memory = own.iter().any(|l| l.memory.is_some());
    let own_cpu = own.iter().any(|l| l.uses_cpu());
    // A sandbox's cgroup is in every v1 hierarchy its apps' own limits may need (that the
    // host has: apps' own limits are v1's only, see `pod::apps`). Only the hierarchies are
    // chosen here; the limits written are the pod's own.
    let v1 = |controller: &str| {
        let root = Path::new("/sys/fs/cgroup");
        !root.join("cgroup.controllers").exists() && root.join(controller).join("tasks").exists()
    };
    let pod = &settled.pod.limits;
    let limits = isolation::cgroups::Limits {
        memory: pod
            .memory
            .or((settled.sandbox && v1("memory") || own_memory).then_some(u64::MAX)),
        cpu_millis: pod
            .cpu_millis
            .or((settled.sandbox && v1("cpu")).then_some(1000)),
        // Only to be placed in the cpu hierarchy: the pod's cgroup is made with its own.
        cpu_shares: pod
            .cpu_shares
            .or((own_cpu && !pod.uses_cpu()).then_some(1024)),
        ..*pod
    };
    isolation::cgroups::detect()
        .place(parent, &limits)
        .map_err(failed)
}

/// The host id ranges of the running pods' user namespaces (`--private-users`), which a
/// new pod's range must not overlap. A pod whose record cannot be read is skipped.
fn id_ranges_in_use(store: &PodStore) -> Vec<isolation::user_ns::IdMap> {
    store
        .list()
        .unwrap_or_default()
        .iter()
        .filter_map(|pod| pod.state().ok())
        .filter(|state| state.state == State::Running)
        .filter_map(|state| state.isolation.and_then(|i| i.user_ns))
        .collect()
}

/// Checks the options that can be checked without a pod: DNS and hosts flags, that every
/// named network exists, and `--port` (see [`networking::preflight`]). So a typo leaves
/// nothing behind, not even an exited pod. Returns the networks to set up.
pub fn preflight(net: &NetOptions) -> Result<Vec<PlannedNet>, StartFailure> {
    networking::preflight(net).map_err(|e| StartFailure {
        error: Box::new(RunError::Options(e)),
        cleanup: Vec::new(),
    })
}

/// `state` turned `running` with what the runner of pod `uuid` is about to set up (recorded
/// before it exists, so gc finds it), the pod's hostname settled.
fn start_running(uuid: &str, mut state: PodState, opts: &RunOptions) -> PodState {
    let is_host = matches!(opts.net.selection, NetSelection::Host);
    let hostname = match &opts.net.hostname {
        name if !name.is_empty() => name.clone(),
        // With the host's network the pod also keeps the host's name (its /etc/hosts is the
        // host's, where rkt-<uuid> would not resolve), as later rkt versions and Docker do.
        _ => match nix::unistd::gethostname() {
            Ok(name) if is_host => name.to_string_lossy().into_owned(),
            _ => format!("rkt-{uuid}"),
        },
    };
    state.state = State::Running;
    state.started = Some(Timestamp::now());
    state.netns = (!is_host).then(|| netns::pod_netns_path(uuid));
    state.net = Some(opts.net.selection.to_string());
    state.hostname = Some(hostname);
    state
}

fn write_uuid_file(path: &Path, uuid: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(path)?;
    f.write_all(uuid.as_bytes())?;
    f.sync_all()
}

/// Runs a pod recorded `running` in `state` (see [`start_running`]), its lock held.
///
/// `state.json` is written twice more: with the init's PID (and the networks) once the app
/// runs, with `exited` once everything is released; and in between, when the app has ended,
/// without the PID, so that stop and enter cannot reach a process that reused it during a
/// slow teardown.
fn run_locked(
    pod: &Pod,
    lock: PodLock,
    opts: &RunOptions,
    mut state: PodState,
    // The host ports are held until this returns, after the networks' teardown: nothing on
    // the host takes a forwarded port while portmap's rules still send it to the pod.
    (planned, mut host_ports): (Vec<PlannedNet>, HostPorts),
    // A sandbox's apps are recorded by `rkt app` commands as they come and go: this runner
    // writes the pod's own fields and keeps theirs.
    sandbox: bool,
) -> Result<RunOutcome, StartFailure> {
    let net = NetOptions {
        hostname: state.hostname.clone().unwrap_or_default(),
        ..opts.net.clone()
    };
    let uuid = pod.uuid.clone();
    let netns_path = state.netns.clone();
    let store = |state: &PodState| match sandbox {
        true => store_keeping_apps(state, &pod.dir),
        false => state.store(&pod.dir),
    };

    let ports_lock = host_ports.take_lock();
    let started = start(
        pod,
        &net,
        (planned, ports_lock),
        netns_path.as_deref(),
        opts,
        &mut state,
    );
    let mut stage = match started {
        Ok(stage) => stage,
        Err(error) => {
            let cleanup = release(
                &uuid,
                &pod.dir,
                netns_path.as_deref(),
                &state.pod_cgroup(&uuid),
                opts.plugin_timeout,
            );
            state.state = State::Exited;
            state.exited = Some(Timestamp::now());
            state.error = Some(crate::error::chain(&error));
            if let Err(e) = store(&state) {
                return Err(StartFailure {
                    error: Box::new(error),
                    cleanup: cleanup.into_iter().chain([CleanupError::Pod(e)]).collect(),
                });
            }
            unmark(pod);
            drop(lock);
            return Err(StartFailure {
                error: Box::new(error),
                cleanup,
            });
        }
    };

    state.pid = Some(stage.init_pid);
    state.init_pid = Some(stage.init_pid);
    for (index, pid) in &stage.app_pids {
        if let Some(app) = state.apps.get_mut(*index) {
            app.pid = Some(*pid);
        }
    }
    // The pod runs whether or not this record could be written; stop/enter need it.
    let record_err = store(&state).err();
    if let Some(notice) = &opts.started_notice {
        notice.started(&uuid);
    }
    // Each app's exit recorded as it happens, so that status shows an app that ended
    // while the others run. The main thread writes the record only once this is done.
    let sandbox_reporter = match sandbox {
        true => stage.take_sandbox_exits().map(|exits| {
            let dir = pod.dir.clone();
            std::thread::spawn(move || {
                for (pid, code) in exits {
                    let _ = super::apps::record_exit(&dir, pid, code);
                }
            })
        }),
        false => None,
    };
    let reporter = stage.take_exits().map(|exits| {
        let (mut live, dir) = (state.clone(), pod.dir.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for (index, code) in exits {
                if let Some(app) = live.apps.get_mut(index) {
                    app.exit_status = Some(code);
                    let _ = live.store(&dir);
                }
                seen.push((index, code));
            }
            seen
        })
    });
    // From here the runner only waits, for as long as the pod lives: what its start freed
    // goes back to the system rather than staying in its heap.
    stage::launch::release_idle_memory();
    let waited = stage.wait();
    if let Some(thread) = sandbox_reporter {
        let _ = thread.join();
    }
    let reported = reporter
        .and_then(|thread| thread.join().ok())
        .unwrap_or_default();
    // The init is gone: forget its PID before the (possibly slow) teardown, so that stop
    // and enter cannot reach a process that reused it.
    state.pid = None;
    for app in &mut state.apps {
        app.pid = None;
    }
    let _ = store(&state);
    let mut cleanup = release(
        &uuid,
        &pod.dir,
        netns_path.as_deref(),
        &state.pod_cgroup(&uuid),
        opts.plugin_timeout,
    );
    cleanup.extend(record_err.map(CleanupError::Pod));
    state.state = State::Exited;
    state.exited = Some(Timestamp::now());
    state.pid = None;
    let exit_status = match waited {
        Ok(ended) => {
            for (index, code) in reported.into_iter().chain(ended.app_exits) {
                if let Some(app) = state.apps.get_mut(index) {
                    app.exit_status = Some(code);
                }
            }
            state.exit_status = Some(ended.status);
            ended.status
        }
        Err(source) => {
            state.error = Some(crate::error::chain(&source));
            let error = RunError::Stage {
                uuid: uuid.clone(),
                source,
            };
            if store(&state).is_ok() {
                unmark(pod);
            }
            return Err(StartFailure {
                error: Box::new(error),
                cleanup,
            });
        }
    };
    match store(&state) {
        Ok(()) => unmark(pod),
        Err(e) => cleanup.push(CleanupError::Pod(e)),
    }
    drop(lock);
    Ok(RunOutcome {
        uuid,
        exit_status,
        cleanup_errors: cleanup,
    })
}

/// Removes the runner's mark of `pod`, released and recorded `exited`. A mark that stays
/// only makes the next command release it again, which finds nothing to do.
fn unmark(pod: &Pod) {
    let _ = pod.unmark_running();
}

/// Writes `state` but for its apps, which are the on-disk record's: a sandbox's apps are
/// recorded by the `rkt app` commands (under the apps' lock, taken here too).
fn store_keeping_apps(state: &PodState, dir: &Path) -> Result<(), PodError> {
    let _apps = crate::podstore::lock::AppsLock::lock(dir)?;
    let mut state = state.clone();
    if let Ok(on_disk) = PodState::load(dir) {
        state.apps = on_disk.apps;
    }
    // The pod's init is gone: an app still recorded running ended with it, unreported.
    if state.pid.is_none() {
        for app in &mut state.apps {
            if app.pid.take().is_some() && app.exit_status.is_none() {
                app.finished = Some(Timestamp::now());
            }
        }
    }
    state.store(dir)
}

/// Everything up to the app running; on error the caller releases what was set up.
fn start(
    pod: &Pod,
    net: &NetOptions,
    (planned, ports_lock): (Vec<PlannedNet>, Option<PortsLock>),
    netns_path: Option<&Path>,
    opts: &RunOptions,
    state: &mut PodState,
) -> Result<stage::Started, RunError> {
    let uuid = || pod.uuid.clone();
    signals::install().map_err(|source| RunError::Signals {
        uuid: uuid(),
        source,
    })?;
    if let Some(path) = &opts.uuid_file_save {
        write_uuid_file(path, &pod.uuid).map_err(|source| RunError::UuidFile {
            uuid: uuid(),
            path: path.clone(),
            source,
        })?;
    }
    // Image apps' root filesystems, mounted here so that gc finds them if this runner dies.
    // In a user namespace of its own the pod gets copies owned by its id range.
    let shift = state
        .isolation
        .as_ref()
        .and_then(|i| i.user_ns.as_ref())
        .map(|m| image::unpack::IdShift {
            base: m.host_base,
            size: m.size,
        });
    let manifest = pod.manifest().map_err(RunError::Pod)?;
    for (index, app) in manifest.apps.iter().enumerate() {
        let Some(image) = &app.image else { continue };
        let app_dir = crate::image_pod::app_dir(&pod.dir, index, &app.name);
        crate::image_pod::rootfs::build(&app_dir, image, shift).map_err(|source| {
            RunError::Rootfs {
                uuid: uuid(),
                source: Box::new(source),
            }
        })?;
    }
    if let Some(path) = netns_path {
        // ICMP echo sockets for the pod's groups, in its own namespace only.
        let user_ns = state.isolation.as_ref().and_then(|i| i.user_ns.as_ref());
        let ping = (
            "ipv4/ping_group_range",
            isolation::user_ns::ping_group_range(user_ns),
        );
        // With --private-users the namespace belongs to the pod's user namespace, so that
        // its root has the capabilities it keeps over its own network (a raw socket for
        // ping), as a pod without one has; the stage and the apps join that user namespace.
        let owner = user_ns.map(isolation::user_ns::IdMap::map_line);
        netns::create_owned(path, &[ping], owner.as_deref()).map_err(|source| RunError::Netns {
            uuid: uuid(),
            source,
        })?;
    }
    let pod_net = PodNet {
        uuid: &pod.uuid,
        pod_dir: &pod.dir,
        netns: netns_path,
        plugin_timeout: opts.plugin_timeout,
    };
    if !planned.is_empty() {
        // gc after a reboot must find the pod to release what its plugins allocated.
        pod.sync_entry().map_err(RunError::Pod)?;
    }
    let nets: Vec<NetInfo> = networking::setup_planned(&pod_net, net, planned, ports_lock)
        .map_err(|source| {
            // Setup gave up because the runner was told to stop (its plugin killed, or its turn
            // not awaited): say so. What its rollback could not undo stays in the record, and
            // the release that follows retries and reports it.
            if signals::interrupted() {
                if let Some(signal) = signals::take_pending() {
                    return RunError::Interrupted {
                        uuid: uuid(),
                        signal,
                    };
                }
            }
            RunError::Network {
                uuid: uuid(),
                source,
            }
        })?;
    // Recorded with the init's PID: until then status shows the live network record.
    state.networks = nets.iter().map(NetSummary::from).collect();
    if let Some(signal) = signals::take_pending() {
        return Err(RunError::Interrupted {
            uuid: uuid(),
            signal,
        });
    }
    let limits = state
        .isolation
        .as_ref()
        .map(|i| i.limits)
        .unwrap_or_default();
    // Every pod's: at least its pids limit, where the record says. Joined by the stage
    // before it forks the pod's init; removed by `release`.
    let pod_cgroup = state.pod_cgroup(&pod.uuid);
    let cgroups = isolation::cgroups::detect();
    cgroups
        .create(&pod_cgroup, &limits)
        .map_err(|source| RunError::Stage {
            uuid: uuid(),
            source: StageError::Isolation(source),
        })?;
    // Each app with limits of its own: a cgroup of its own below the pod's, which its
    // process joins (`stage::app`); removed with the pod's.
    for app in manifest.apps.iter() {
        let own = app.isolators.own_limits;
        if own.is_none() {
            continue;
        }
        let limits = isolation::cgroups::Limits {
            pids: Some(isolation::cgroups::PidsLimit::Unlimited),
            ..own
        };
        cgroups
            .create(
                &pod_cgroup.child(&isolation::cgroups::app_leaf(&app.name)),
                &limits,
            )
            .map_err(|source| RunError::Stage {
                uuid: uuid(),
                source: StageError::Isolation(source),
            })?;
    }
    stage::start(&StageSpec {
        exe: &opts.exe,
        pod_dir: &pod.dir,
        hostname: &net.hostname,
        netns: netns_path,
        null_stdio: opts.null_stdio,
        several_apps: manifest.apps.len() > 1,
        app_names: &manifest
            .apps
            .iter()
            .map(|a| a.name.clone())
            .collect::<Vec<_>>(),
        log_streams: opts.log_streams,
        sandbox: manifest.sandbox.is_some(),
    })
    .map_err(|source| RunError::Stage {
        uuid: uuid(),
        source,
    })
}
