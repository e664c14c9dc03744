//! The container RPCs: CreateContainer (an app added to the sandbox: `pod::apps::add`),
//! StartContainer, StopContainer, RemoveContainer, ContainerStatus, ListContainers,
//! ReopenContainerLog. The conversion of a `ContainerConfig` into an rkt app is
//! [`app_for`]; what it cannot honour is refused by name, never ignored.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tonic::Status;

use rkt::image_pod::app::{app_from_image, Overrides};
use rkt::image_pod::user::AppRoot;
use rkt::isolation::capabilities::{CapSet, CapsFlag};
use rkt::isolation::seccomp::{Mode, SeccompSpec};
use rkt::isolation::{cgroups, user, Disabled, Isolators};
use rkt::pod::apps::{self, AppError};
use rkt::pod::App;
use rkt::podstore::{AppLog, Mount, Propagation, Volume, VolumeKind};

use crate::error::{internal, invalid, lib, not_found};
use crate::images;
use crate::meta::{self, ContainerMeta, MountMeta};
use crate::options::Config;
use crate::proto;
use crate::sandbox::{self, Sandbox};

use rkt::stage::app_logs::LOG_COMMAND;

/// How long an exited container is shown running while its log copier drains its output.
const LOG_DRAIN_GRACE: Duration = Duration::from_secs(2);

/// A container: its sandbox, app name and facts.
pub struct Container {
    pub sandbox: Sandbox,
    pub app: String,
    pub meta: ContainerMeta,
}

impl Container {
    /// The app's index in the sandbox's manifest (and, aligned, its records).
    fn index(&self) -> Option<usize> {
        self.sandbox
            .status
            .manifest
            .apps
            .iter()
            .position(|a| a.name == self.app)
    }

    pub fn state(&self) -> proto::ContainerState {
        let Some(index) = self.index() else {
            return proto::ContainerState::ContainerUnknown;
        };
        match self.sandbox.status.app_state(index) {
            "created" => proto::ContainerState::ContainerCreated,
            "running" => proto::ContainerState::ContainerRunning,
            _ if self.log_draining(index) => proto::ContainerState::ContainerRunning,
            _ => proto::ContainerState::ContainerExited,
        }
    }

    /// The app exited a moment ago and its log copier still writes what it printed last:
    /// the container is shown exited only once its log is whole (as containerd waits for
    /// a container's output before it reports the exit), or after [`LOG_DRAIN_GRACE`] (a
    /// process the app left behind may hold its output open).
    fn log_draining(&self, index: usize) -> bool {
        let Some(record) = self.sandbox.status.record.apps.get(index) else {
            return false;
        };
        let recent = record.finished.is_some_and(|t| t.age() < LOG_DRAIN_GRACE);
        recent
            && record.log_copier.is_some_and(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(LOG_COMMAND.as_bytes()))
            })
    }
}

/// The containers of `sandbox`.
pub fn of_sandbox(sandbox: &Sandbox) -> Vec<(String, ContainerMeta)> {
    sandbox
        .status
        .manifest
        .apps
        .iter()
        .filter_map(|a| {
            meta::read_container(&sandbox.pod.dir, &a.name).map(|m| (a.name.clone(), m))
        })
        .collect()
}

/// The container `id` names: a whole ID (found directly through its pod), or a unique
/// prefix of one.
pub fn find(config: &Config, id: &str) -> Result<Option<Container>, Status> {
    if id.is_empty() {
        return Err(invalid("no container ID given"));
    }
    let candidates: Vec<Sandbox> = match (id.len() >= 32)
        .then(|| sandbox::by_uuid(config, id))
        .transpose()?
        .flatten()
    {
        Some(s) => vec![s],
        None => sandbox::list(&rkt::pod::PodStore::new(config.pods_dir()))?,
    };
    let mut found = Vec::new();
    for s in candidates {
        for (app, m) in of_sandbox(&s) {
            if m.id.starts_with(id) {
                found.push((app, m));
            }
        }
        if found.len() == 1 {
            let (app, meta) = found.pop().expect("one");
            return Ok(Some(Container {
                sandbox: s,
                app,
                meta,
            }));
        }
        if found.len() > 1 {
            break;
        }
    }
    match found.len() {
        0 => Ok(None),
        n => Err(invalid(format!(
            "container ID {id:?} is ambiguous: {n} containers start with it"
        ))),
    }
}

/// [`find`], or NotFound.
pub fn get(config: &Config, id: &str) -> Result<Container, Status> {
    find(config, id)?.ok_or_else(|| not_found(format!("container {id} not found")))
}

fn app_err(e: AppError) -> Status {
    match e {
        AppError::NameTaken { .. } => Status::already_exists(rkt::error::chain(&e)),
        AppError::NoSuchApp { .. } => not_found(rkt::error::chain(&e)),
        AppError::NotRunning { .. } => Status::failed_precondition(rkt::error::chain(&e)),
        e => lib(e),
    }
}

/// CreateContainer: returns the new container's ID.
pub fn create(config: &Config, req: proto::CreateContainerRequest) -> Result<String, Status> {
    let sandbox = sandbox::get(config, &req.pod_sandbox_id)?;
    if !sandbox.ready() {
        return Err(Status::failed_precondition(format!(
            "pod sandbox {} is not ready: containers are created only in a running sandbox",
            sandbox.id()
        )));
    }
    let cfg = req
        .config
        .ok_or_else(|| invalid("CreateContainer: no config"))?;
    let metadata = cfg
        .metadata
        .clone()
        .ok_or_else(|| invalid("CreateContainer: the config has no metadata"))?;
    if metadata.name.is_empty() || metadata.name.contains(['/', '\0']) || metadata.name == "." {
        return Err(invalid(format!(
            "CreateContainer: {:?} cannot be a container's name",
            metadata.name
        )));
    }
    let app_name = meta::app_name(&metadata.name, metadata.attempt);
    let image_name = cfg
        .image
        .as_ref()
        .map(|i| i.image.clone())
        .filter(|i| !i.is_empty())
        .ok_or_else(|| invalid("CreateContainer: no image"))?;
    let store = images::store(config).map_err(|e| internal(&e))?;
    let record = images::find(&store, &image_name)
        .map_err(|e| internal(&e))?
        .ok_or_else(|| {
            not_found(format!(
                "image {image_name} is not pulled (PullImage first)"
            ))
        })?;
    let id = meta::new_container_id(&sandbox.id());
    let log_path = match (sandbox.meta.log_directory.as_str(), cfg.log_path.as_str()) {
        (_, "") => None,
        (dir, path) => Some(Path::new(dir).join(path)),
    };
    let (app, volumes, mounts, off) = app_for(
        &cfg,
        (
            sandbox.meta.network == "host",
            sandbox.status.manifest.host_ipc(),
            sandbox.status.manifest.host_pid(),
        ),
        &app_name,
        &store,
        &record,
        &image_name,
        log_path.clone(),
    )?;
    let image_ref = {
        let cri = images::to_cri(&store, &record);
        cri.repo_digests
            .first()
            .cloned()
            .unwrap_or_else(|| record.id.to_string())
    };
    let facts = ContainerMeta {
        id: id.clone(),
        name: metadata.name.clone(),
        attempt: metadata.attempt,
        image: image_name,
        image_id: record.id.to_string(),
        image_ref,
        log_path: log_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        log_path_given: cfg.log_path.clone(),
        labels: cfg.labels.clone().into_iter().collect(),
        annotations: cfg.annotations.clone().into_iter().collect(),
        mounts,
        created_ns: images::now_ns(),
    };
    meta::write_container(&sandbox.pod.dir, &app_name, &facts).map_err(|e| internal(&e))?;
    if let Err(e) = apps::add_with_volumes(&sandbox.pod, app, volumes, off) {
        // The facts of a container that was not made go (unless an app of that name
        // exists: they are then its own, which this request did not replace).
        if !matches!(e, AppError::NameTaken { .. }) {
            meta::remove_container(&sandbox.pod.dir, &app_name);
        }
        return Err(app_err(e));
    }
    Ok(id)
}

/// The rkt app a CRI container config describes, its own volumes (the host mounts), their
/// facts for ContainerStatus and the isolation it turns off (privileged).
#[allow(clippy::too_many_arguments)]
fn app_for(
    cfg: &proto::ContainerConfig,
    (host_network, host_ipc, host_pid): (bool, bool, bool),
    name: &str,
    store: &image::Store,
    record: &image::ImageRecord,
    image_name: &str,
    log_path: Option<PathBuf>,
) -> Result<(App, Vec<Volume>, Vec<MountMeta>, Disabled), Status> {
    if !cfg.devices.is_empty() {
        return Err(invalid("devices: not supported by rkt-cri yet"));
    }
    if let Some(dir) = Some(&cfg.working_dir).filter(|d| !d.is_empty() && !d.starts_with('/')) {
        return Err(invalid(format!(
            "working_dir {dir:?}: must be an absolute path"
        )));
    }
    let linux = cfg.linux.clone().unwrap_or_default();
    let security = linux.security_context.clone().unwrap_or_default();
    if security.selinux_options.is_some() {
        return Err(invalid(
            "SELinux options: SELinux is not enabled on this host",
        ));
    }
    if let Some(p) = security.apparmor.as_ref().filter(|p| p.profile_type != 0) {
        return Err(invalid(format!(
            "AppArmor profile {:?}: AppArmor is not enabled on this host",
            p.localhost_ref
        )));
    }
    #[allow(deprecated)]
    let apparmor_profile = &security.apparmor_profile;
    if !apparmor_profile.is_empty() && apparmor_profile != "unconfined" {
        return Err(invalid(format!(
            "AppArmor profile {apparmor_profile:?}: AppArmor is not enabled on this host"
        )));
    }
    // A container shares its sandbox's namespaces: a mode is accepted when it is the
    // sandbox's (kubelet repeats the pod's modes for each container), and for PID also a
    // namespace of the container's own, inside a pod's.
    let namespaces = security.namespace_options.clone().unwrap_or_default();
    let own_pid_ns = namespaces.pid == proto::NamespaceMode::Container as i32 && !host_pid;
    let node = proto::NamespaceMode::Node as i32;
    let pod = proto::NamespaceMode::Pod as i32;
    for (what, mode, sandbox_mode) in [
        (
            "network",
            namespaces.network,
            if host_network { node } else { pod },
        ),
        ("PID", namespaces.pid, if host_pid { node } else { pod }),
        ("IPC", namespaces.ipc, if host_ipc { node } else { pod }),
    ] {
        // POD: the sandbox's, whatever it is (crictl leaves the modes unset).
        if mode == sandbox_mode || mode == pod || (what == "PID" && own_pid_ns) {
            continue;
        }
        let which = match proto::NamespaceMode::try_from(mode) {
            Ok(proto::NamespaceMode::Node) => "the host's",
            Ok(proto::NamespaceMode::Container) => "a container's own",
            Ok(proto::NamespaceMode::Target) => "another container's",
            _ => "the pod's",
        };
        return Err(invalid(format!(
            "{which} {what} namespace for a container: not supported by rkt-cri yet (a \
             container has its sandbox's)"
        )));
    }
    let mut off = Disabled::default();
    if security.privileged {
        off = Disabled {
            capabilities: true,
            seccomp: true,
            paths: true,
        };
    }
    // Seccomp: the profile, else the deprecated path.
    let seccomp_path = match &security.seccomp {
        Some(p) => match proto::security_profile::ProfileType::try_from(p.profile_type) {
            Ok(proto::security_profile::ProfileType::RuntimeDefault) => "runtime/default".into(),
            Ok(proto::security_profile::ProfileType::Unconfined) => "unconfined".into(),
            Ok(proto::security_profile::ProfileType::Localhost) => {
                format!("localhost/{}", p.localhost_ref)
            }
            Err(_) => String::new(),
        },
        #[allow(deprecated)]
        None => security.seccomp_profile_path.clone(),
    };
    let mut seccomp = None;
    if !security.privileged {
        match seccomp_path.as_str() {
            "" | "unconfined" => off.seccomp = true,
            "runtime/default" | "docker/default" => {}
            other => match other.strip_prefix("localhost/") {
                Some(path) => seccomp = Some(docker_seccomp(Path::new(path))?),
                None => {
                    return Err(invalid(format!(
                        "seccomp profile {other:?}: expected unconfined, runtime/default or \
                         localhost/<absolute path of a Docker-format JSON profile>"
                    )))
                }
            },
        }
    }
    let caps = match security.capabilities.as_ref() {
        Some(c) if !security.privileged => capabilities(&c.add_capabilities, &c.drop_capabilities)?,
        _ => None,
    };
    // Resources.
    let resources = linux.resources.clone().unwrap_or_default();
    let limits = cgroups::Limits {
        memory: (resources.memory_limit_in_bytes > 0)
            .then_some(resources.memory_limit_in_bytes as u64),
        cpu_millis: (resources.cpu_quota > 0 && resources.cpu_period > 0)
            .then(|| (resources.cpu_quota as u64 * 1000).div_ceil(resources.cpu_period as u64)),
        cpu_shares: (resources.cpu_shares > 0).then_some(resources.cpu_shares as u64),
        pids: None,
    };
    // oom_score_adj: never lowered (root here may lack CAP_SYS_RESOURCE); a sandbox's apps
    // share its score, so a value is clamped to it (containerd's restrict_oom_score_adj).
    // Env, mounts.
    let env: Vec<(String, String)> = cfg
        .envs
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect();
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    let mut mount_facts = Vec::new();
    for (i, m) in cfg.mounts.iter().enumerate() {
        if !m.container_path.starts_with('/') {
            return Err(invalid(format!(
                "mount {:?}: the container path must be absolute",
                m.container_path
            )));
        }
        let source = PathBuf::from(&m.host_path);
        if !source.is_absolute() {
            return Err(invalid(format!(
                "mount {:?}: the host path must be absolute",
                m.host_path
            )));
        }
        // As containerd: a missing host path is made, a directory.
        if std::fs::symlink_metadata(&source).is_err() {
            std::fs::create_dir_all(&source).map_err(|e| {
                invalid(format!(
                    "mount: cannot create host path {}: {e}",
                    source.display()
                ))
            })?;
        }
        // A symlink is followed on the host (its target is mounted).
        let source = std::fs::canonicalize(&source)
            .map_err(|e| invalid(format!("mount: host path {}: {e}", source.display())))?;
        let volume = format!("{name}/{i}");
        // Cloned in the host's mount namespace when the container starts, as containerd
        // binds it then; rslave and rshared need the host's side shared (checked now, and
        // again at the start).
        let propagation = match proto::MountPropagation::try_from(m.propagation) {
            Ok(proto::MountPropagation::PropagationPrivate) => Propagation::Private,
            Ok(proto::MountPropagation::PropagationHostToContainer) => Propagation::Rslave,
            Ok(proto::MountPropagation::PropagationBidirectional) => Propagation::Rshared,
            Err(_) => {
                return Err(invalid(format!(
                    "mount {} → {}: unknown propagation {}",
                    m.host_path, m.container_path, m.propagation
                )))
            }
        };
        rkt::stage::volumes::check_propagation(&volume, &source, propagation)
            .map_err(|e| invalid(format!("mount {} → {}: {e}", m.host_path, m.container_path)))?;
        volumes.push(Volume {
            name: volume.clone(),
            kind: VolumeKind::Host {
                source,
                read_only: m.readonly,
                recursive: true,
                propagation: Some(propagation),
            },
        });
        mounts.push(Mount {
            volume,
            target: m.container_path.clone(),
        });
        mount_facts.push(MountMeta {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.readonly,
            propagation: m.propagation,
        });
    }
    // Command: CRI's command replaces the image's Entrypoint (and its Cmd), args its Cmd.
    let (exec, args) = match (cfg.command.split_first(), cfg.args.is_empty()) {
        (Some((first, rest)), _) => {
            let mut args = rest.to_vec();
            args.extend(cfg.args.iter().cloned());
            (Some(first.clone()), Some(args))
        }
        (None, false) => (None, Some(cfg.args.clone())),
        (None, true) => (None, None),
    };
    let overrides = Overrides {
        exec,
        args,
        named: true,
        no_overlay: false,
    };
    let reference = image::ImageRef::Docker(
        images::docker_ref(image_name)
            .unwrap_or_else(|_| images::docker_ref("invalid/name").expect("a valid name")),
    );
    let user_spec = identity_spec(&security)?;
    let image_user = store
        .config(record)
        .ok()
        .and_then(|c| c.config().clone())
        .and_then(|c| c.user().clone())
        .unwrap_or_default();
    let readonly_rootfs = security.readonly_rootfs;
    let no_new_privs = security.no_new_privs && !security.privileged;
    // kubelet gives the whole lists (its defaults, or none for a privileged container);
    // none given: rkt's own.
    let some = |l: &Vec<String>| (!l.is_empty()).then(|| l.clone());
    let kernel_paths = rkt::isolation::paths::KernelPaths {
        masked: some(&security.masked_paths),
        read_only: some(&security.readonly_paths),
    };
    kernel_paths
        .check()
        .map_err(|e| invalid(rkt::error::chain(&e)))?;
    let tty = cfg.tty;
    let stdin = cfg.stdin;
    let working_dir = Some(cfg.working_dir.clone()).filter(|d| !d.is_empty());
    let base = |argv: Vec<String>, root: AppRoot<'_>| -> Result<App, AppStatus> {
        let identity = match &user_spec {
            Some((u, g, s)) => {
                let accounts =
                    rkt::image_pod::user::accounts(root).map_err(|e| AppStatus(lib(e)))?;
                // Without a user of the request's, the image's (and its group).
                let (image_user, image_group) = match image_user.split_once(':') {
                    Some((u, g)) => (Some(u.to_string()), Some(g.to_string())),
                    None => (Some(image_user.clone()).filter(|u| !u.is_empty()), None),
                };
                let (u, g) = match u {
                    Some(u) => (Some(u.clone()), g.clone()),
                    None => (image_user, g.clone().or(image_group)),
                };
                let mut id = user::resolve(&accounts, u.as_deref(), g.as_deref(), s.as_deref())
                    .map_err(|e| AppStatus(invalid(rkt::error::chain(&e))))?;
                if let Some(id) = id.as_mut() {
                    member_groups(&accounts, id);
                }
                id
            }
            None => None,
        };
        let mut app = App::new(name, argv);
        app.own_pid_ns = own_pid_ns;
        app.env = env.clone();
        app.working_dir = working_dir.clone();
        app.mounts = mounts.clone();
        app.isolators = Isolators {
            caps: caps.clone(),
            seccomp: seccomp.clone(),
            readonly_rootfs,
            identity,
            limits,
            own_limits: Default::default(),
            private_users: false,
            no_new_privs,
            kernel_paths: kernel_paths.clone(),
            host_ipc: false,
            host_pid: false,
        };
        app.log = Some(AppLog {
            stdout: true,
            stderr: true,
            max_size: 0,
            max_files: 1,
            attach: rkt::podstore::AttachModes {
                stdin,
                // Attach (the CRI's) reads the output as it comes; the log keeps it too.
                stdout: true,
                stderr: true,
                tty,
            },
            path: log_path.clone(),
        });
        Ok(app)
    };
    let app = app_from_image(store, record, &reference, image_name, &overrides, base)
        .map_err(|AppStatus(e)| e)?;
    Ok((app, volumes, mount_facts, off))
}

/// A status the image's app could not be made with.
struct AppStatus(Status);

impl From<rkt::image_pod::app::ImageAppError> for AppStatus {
    fn from(e: rkt::image_pod::app::ImageAppError) -> AppStatus {
        AppStatus(invalid(rkt::error::chain(&e)))
    }
}

/// Adds to `id` the groups the image's `/etc/group` makes its user a member of (as the
/// image's own User would have them).
fn member_groups(accounts: &user::Accounts, id: &mut rkt::isolation::user::Identity) {
    let Some(name) = accounts
        .passwd
        .iter()
        .find(|p| p.uid == id.uid)
        .map(|p| p.name.clone())
    else {
        return;
    };
    for g in &accounts.groups {
        if g.gid != id.gid && g.members.contains(&name) && !id.supplementary_gids.contains(&g.gid) {
            id.supplementary_gids.push(g.gid);
        }
    }
}

/// A Docker-format seccomp profile (`defaultAction`, `syscalls` of `names` and `action`)
/// as rkt's filter: an allowing default with refused calls is rkt's `mode=remove`, a
/// refusing default with allowed calls its `mode=retain`. What rkt's filters cannot express
/// (argument conditions, other actions, another errno) is refused by name.
fn docker_seccomp(path: &Path) -> Result<SeccompSpec, Status> {
    let bad = |why: String| invalid(format!("seccomp profile {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let action = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let default = action(&json["defaultAction"]);
    let (mode, listed_action) = match default.as_str() {
        "SCMP_ACT_ALLOW" => (Mode::Remove, "SCMP_ACT_ERRNO"),
        "SCMP_ACT_ERRNO" => (Mode::Retain, "SCMP_ACT_ALLOW"),
        other => {
            return Err(bad(format!(
                "defaultAction {other:?}: rkt's filters take SCMP_ACT_ALLOW or SCMP_ACT_ERRNO"
            )))
        }
    };
    let not_eperm = |v: Option<&serde_json::Value>| v.is_some_and(|e| e.as_u64() != Some(1));
    if not_eperm(json.get("defaultErrnoRet")) {
        return Err(bad(
            "defaultErrnoRet other than EPERM (1) is not supported".into()
        ));
    }
    let mut set = Vec::new();
    for rule in json["syscalls"].as_array().into_iter().flatten() {
        let this = action(&rule["action"]);
        if this != listed_action {
            return Err(bad(format!(
                "action {this:?} with defaultAction {default:?}: rkt's filters take \
                 {listed_action} here"
            )));
        }
        let conditional = rule
            .get("args")
            .is_some_and(|a| !a.is_null() && a.as_array().is_none_or(|a| !a.is_empty()));
        if conditional {
            return Err(bad("argument conditions (args) are not supported".into()));
        }
        if not_eperm(rule.get("errnoRet")) {
            return Err(bad("errnoRet other than EPERM (1) is not supported".into()));
        }
        let names = rule["names"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![rule["name"].clone()]);
        for n in names {
            match n.as_str() {
                Some(n) if !n.is_empty() => set.push(n.to_string()),
                _ => return Err(bad("a syscall name that is not a string".into())),
            }
        }
    }
    if set.is_empty() {
        return Err(bad("no syscalls listed".into()));
    }
    Ok(SeccompSpec {
        mode,
        errno: None,
        set,
    })
}

/// The user, group and supplementary groups of a security context, as rkt's `--user`,
/// `--group` and `--supplementary-gids` would give them; `None` when none is given (the
/// image's User then applies).
#[allow(clippy::type_complexity)]
fn identity_spec(
    security: &proto::LinuxContainerSecurityContext,
) -> Result<Option<(Option<String>, Option<String>, Option<String>)>, Status> {
    let user = match (&security.run_as_user, security.run_as_username.as_str()) {
        (Some(uid), _) => Some(uid.value.to_string()),
        (None, "") => None,
        (None, name) => Some(name.to_string()),
    };
    let group = security.run_as_group.as_ref().map(|g| g.value.to_string());
    if group.is_some() && user.is_none() {
        return Err(invalid(
            "run_as_group without run_as_user or run_as_username: give the user too",
        ));
    }
    let supplementary = (!security.supplemental_groups.is_empty()).then(|| {
        security
            .supplemental_groups
            .iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>()
            .join(",")
    });
    if user.is_none() && supplementary.is_none() {
        return Ok(None);
    }
    Ok(Some((user, group, supplementary)))
}

/// CRI's capability names (no `CAP_`, `ALL`) added to and dropped from the default set.
fn capabilities(add: &[String], drop: &[String]) -> Result<Option<CapsFlag>, Status> {
    if add.is_empty() && drop.is_empty() {
        return Ok(None);
    }
    let canonical = |name: &str| {
        let upper = name.to_ascii_uppercase();
        if upper.starts_with("CAP_") {
            upper
        } else {
            format!("CAP_{upper}")
        }
    };
    // `ALL`: every capability this server holds (root here may lack some, such as
    // CAP_SYS_RESOURCE; an app cannot be given what its runtime lacks).
    let all: Vec<String> = rkt::isolation::capabilities::held().map_err(lib)?.names();
    let mut set: Vec<String> = CapSet::default_set().names();
    let is_all = |l: &[String]| l.iter().any(|c| c.eq_ignore_ascii_case("ALL"));
    if is_all(add) {
        set = all.clone();
    } else {
        for c in add {
            let c = canonical(c);
            if rkt::isolation::capabilities::number(&c).is_none() {
                return Err(invalid(format!("capability {c}: unknown")));
            }
            if !set.contains(&c) {
                set.push(c);
            }
        }
    }
    if is_all(drop) {
        set.clear();
        // Added ones survive `drop ALL` (CRI's order: drop, then add).
        for c in add.iter().filter(|c| !c.eq_ignore_ascii_case("ALL")) {
            set.push(canonical(c));
        }
    } else {
        for c in drop {
            let c = canonical(c);
            set.retain(|s| *s != c);
        }
    }
    if set.is_empty() {
        return Ok(Some(CapsFlag::Retain(Vec::new())));
    }
    Ok(Some(CapsFlag::Retain(set)))
}

/// StartContainer.
pub fn start(config: &Config, id: &str) -> Result<(), Status> {
    let c = get(config, id)?;
    if c.state() == proto::ContainerState::ContainerExited {
        return Err(Status::failed_precondition(format!(
            "container {id} has exited: a CRI container is not started again"
        )));
    }
    apps::start(
        &c.sandbox.pod,
        &c.app,
        Path::new("/proc/self/exe"),
        config.spawner.as_ref(),
    )
    .map_err(app_err)?;
    Ok(())
}

/// StopContainer: SIGTERM, SIGKILL after `timeout` seconds; nothing when it does not run.
pub fn stop(config: &Config, id: &str, timeout: i64) -> Result<(), Status> {
    let Some(c) = find(config, id)? else {
        return Err(not_found(format!("container {id} not found")));
    };
    if !c.sandbox.ready() || c.state() != proto::ContainerState::ContainerRunning {
        return Ok(());
    }
    let timeout = Duration::from_secs(timeout.max(0) as u64);
    match apps::stop(&c.sandbox.pod, &c.app, timeout) {
        Ok(()) | Err(AppError::NotRunning { .. }) => {}
        Err(e) => return Err(app_err(e)),
    }
    // Returns once the container shows exited: its log drained (or the grace passed).
    let deadline = std::time::Instant::now() + LOG_DRAIN_GRACE;
    while std::time::Instant::now() < deadline {
        match find(config, id)? {
            Some(now) if now.state() == proto::ContainerState::ContainerRunning => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => break,
        }
    }
    Ok(())
}

/// RemoveContainer: stops it (at once) if it runs and removes it; nothing when it is gone.
/// In a stopped sandbox only its CRI facts go (the pod's removal releases the rest).
pub fn remove(config: &Config, id: &str) -> Result<(), Status> {
    let Some(c) = find(config, id)? else {
        return Ok(());
    };
    if c.sandbox.ready() {
        match apps::remove(&c.sandbox.pod, &c.app, Duration::ZERO) {
            Ok(()) | Err(AppError::NotRunning { .. }) | Err(AppError::NoSuchApp { .. }) => {}
            Err(e) => return Err(app_err(e)),
        }
    }
    meta::remove_container(&c.sandbox.pod.dir, &c.app);
    Ok(())
}

/// ReopenContainerLog.
pub fn reopen_log(config: &Config, id: &str) -> Result<(), Status> {
    let c = get(config, id)?;
    if c.state() != proto::ContainerState::ContainerRunning {
        return Err(Status::failed_precondition(format!(
            "container {id} is not running: its log is not being written"
        )));
    }
    apps::reopen_log(&c.sandbox.pod, &c.app).map_err(app_err)
}

fn metadata(m: &ContainerMeta) -> proto::ContainerMetadata {
    proto::ContainerMetadata {
        name: m.name.clone(),
        attempt: m.attempt,
    }
}

fn nanos(t: Option<rkt::podstore::Timestamp>) -> i64 {
    t.map(|t| t.unix_nanos() as i64).unwrap_or(0)
}

/// ContainerStatus.
pub fn status(c: &Container, verbose: bool) -> proto::ContainerStatusResponse {
    let index = c.index();
    let record = index.and_then(|i| c.sandbox.status.record.apps.get(i));
    let state = c.state();
    let exit_code = record.and_then(|r| r.exit_status).unwrap_or(0);
    let finished = match state {
        proto::ContainerState::ContainerExited => nanos(
            record
                .and_then(|r| r.finished)
                .or(c.sandbox.status.record.exited),
        ),
        _ => 0,
    };
    let reason = match state {
        proto::ContainerState::ContainerExited if exit_code == 0 => "Completed",
        proto::ContainerState::ContainerExited => "Error",
        _ => "",
    };
    let m = &c.meta;
    let status = proto::ContainerStatus {
        id: m.id.clone(),
        metadata: Some(metadata(m)),
        state: state as i32,
        created_at: m.created_ns,
        started_at: nanos(record.and_then(|r| r.started)),
        finished_at: finished,
        exit_code,
        image: Some(proto::ImageSpec {
            image: m.image.clone(),
            annotations: Default::default(),
        }),
        image_ref: m.image_ref.clone(),
        reason: reason.into(),
        message: String::new(),
        labels: m.labels.clone().into_iter().collect(),
        annotations: m.annotations.clone().into_iter().collect(),
        mounts: m
            .mounts
            .iter()
            .map(|mm| proto::Mount {
                container_path: mm.container_path.clone(),
                host_path: mm.host_path.clone(),
                readonly: mm.readonly,
                selinux_relabel: false,
                propagation: mm.propagation,
            })
            .collect(),
        log_path: m.log_path.clone(),
        resources: None,
    };
    let mut info = std::collections::HashMap::new();
    if verbose {
        info.insert(
            "info".to_string(),
            serde_json::json!({
                "sandboxID": c.sandbox.id(),
                "podUUID": c.sandbox.pod.uuid,
                "app": c.app,
                "pid": record.and_then(|r| r.pid),
                "mounts": m.mounts.iter().map(|mm| serde_json::json!({
                    "containerPath": mm.container_path,
                    "hostPath": mm.host_path,
                    "readonly": mm.readonly,
                    "propagation": mm.propagation,
                })).collect::<Vec<_>>(),
            })
            .to_string(),
        );
    }
    proto::ContainerStatusResponse {
        status: Some(status),
        info,
    }
}

/// ListContainers.
pub fn list(
    config: &Config,
    filter: Option<proto::ContainerFilter>,
) -> Result<Vec<proto::Container>, Status> {
    let filter = filter.unwrap_or_default();
    let store = rkt::pod::PodStore::new(config.pods_dir());
    let mut out = Vec::new();
    for s in sandbox::list(&store)? {
        if !filter.pod_sandbox_id.is_empty() && !s.id().starts_with(&filter.pod_sandbox_id) {
            continue;
        }
        let sandbox_id = s.id();
        let apps = of_sandbox(&s);
        let mut c = Container {
            sandbox: s,
            app: String::new(),
            meta: ContainerMeta::default(),
        };
        for (app, m) in apps {
            c.app = app;
            c.meta = m;
            let state = c.state();
            let m = &c.meta;
            if !filter.id.is_empty() && !m.id.starts_with(&filter.id) {
                continue;
            }
            if let Some(f) = &filter.state {
                if f.state != state as i32 {
                    continue;
                }
            }
            if !filter
                .label_selector
                .iter()
                .all(|(k, v)| m.labels.get(k) == Some(v))
            {
                continue;
            }
            out.push(proto::Container {
                id: m.id.clone(),
                pod_sandbox_id: sandbox_id.clone(),
                metadata: Some(metadata(m)),
                image: Some(proto::ImageSpec {
                    image: m.image.clone(),
                    annotations: Default::default(),
                }),
                image_ref: m.image_ref.clone(),
                state: state as i32,
                created_at: m.created_ns,
                labels: m.labels.clone().into_iter().collect(),
                annotations: m.annotations.clone().into_iter().collect(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(flag: Option<CapsFlag>) -> Vec<String> {
        match flag {
            Some(CapsFlag::Retain(v)) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn capabilities_by_cri_names() {
        assert!(capabilities(&[], &[]).unwrap().is_none());
        let added = names(capabilities(&["SYS_ADMIN".into()], &[]).unwrap());
        assert!(added.contains(&"CAP_SYS_ADMIN".to_string()));
        assert!(added.contains(&"CAP_CHOWN".to_string()), "{added:?}");
        let dropped = names(capabilities(&[], &["CHOWN".into()]).unwrap());
        assert!(!dropped.contains(&"CAP_CHOWN".to_string()));
        let only = names(capabilities(&["NET_RAW".into()], &["ALL".into()]).unwrap());
        assert_eq!(only, vec!["CAP_NET_RAW".to_string()]);
        let all = names(capabilities(&["ALL".into()], &[]).unwrap());
        assert!(all.contains(&"CAP_SYS_MODULE".to_string()));
        assert!(capabilities(&["NOPE".into()], &[]).is_err());
    }

    #[test]
    fn a_group_needs_a_user() {
        let ctx = proto::LinuxContainerSecurityContext {
            run_as_group: Some(proto::Int64Value { value: 5 }),
            ..Default::default()
        };
        assert!(identity_spec(&ctx).is_err());
        let ctx = proto::LinuxContainerSecurityContext {
            run_as_username: "www-data".into(),
            run_as_group: Some(proto::Int64Value { value: 5 }),
            ..Default::default()
        };
        assert_eq!(
            identity_spec(&ctx).unwrap(),
            Some((Some("www-data".into()), Some("5".into()), None))
        );
    }
}
