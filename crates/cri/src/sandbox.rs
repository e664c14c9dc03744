//! The pod sandbox RPCs: RunPodSandbox (an rkt sandbox, held by a runner of its own),
//! StopPodSandbox, RemovePodSandbox, PodSandboxStatus, ListPodSandbox. Each maps CRI types
//! to the library's and back; every fact is read from the pod store.

use std::time::Duration;

use tonic::Status;

use rkt::firewall::ports::{PortMapping, Protocol};
use rkt::pod::{Pod, PodStatus, PodStore, State};

use crate::error::{internal, invalid, lib, not_found};
use crate::meta::{pod_uuid, sandbox_id, SandboxMeta};
use crate::options::Config;
use crate::proto;
use crate::runner::{self, RunnerSpec};

/// How long a sandbox's init has to end after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A CRI sandbox of the store: its pod, status and facts.
pub struct Sandbox {
    pub pod: Pod,
    pub status: PodStatus,
    pub meta: SandboxMeta,
}

impl Sandbox {
    pub fn id(&self) -> String {
        sandbox_id(&self.pod.uuid)
    }

    pub fn ready(&self) -> bool {
        self.status.state == State::Running && self.status.record.pid.is_some()
    }

    pub fn created_ns(&self) -> i64 {
        self.status.manifest.created.unix_nanos() as i64
    }

    pub fn cri_state(&self) -> proto::PodSandboxState {
        if self.ready() {
            proto::PodSandboxState::SandboxReady
        } else {
            proto::PodSandboxState::SandboxNotready
        }
    }
}

/// The sandbox `id` names (its whole ID or a unique prefix of at least one character).
pub fn find(config: &Config, id: &str) -> Result<Option<Sandbox>, Status> {
    if id.is_empty() {
        return Err(invalid("no pod sandbox ID given"));
    }
    // A whole ID (kubelet's and crictl's case) names its pod's UUID: that pod alone is
    // read, not every pod of the store (50 StopPodSandbox at once read 2,500 pods' records
    // and left the server's heap at 30 MiB).
    if pod_uuid(id).is_some() {
        return Ok(by_uuid(config, id)?.filter(|s| s.id().starts_with(id)));
    }
    let store = PodStore::new(config.pods_dir());
    let matching: Vec<Sandbox> = list(&store)?
        .into_iter()
        .filter(|s| s.id().starts_with(id))
        .collect();
    match matching.len() {
        0 => Ok(None),
        1 => Ok(matching.into_iter().next()),
        n => Err(invalid(format!(
            "pod sandbox ID {id:?} is ambiguous: {n} sandboxes start with it"
        ))),
    }
}

/// [`find`], or NotFound.
pub fn get(config: &Config, id: &str) -> Result<Sandbox, Status> {
    find(config, id)?.ok_or_else(|| not_found(format!("pod sandbox {id} not found")))
}

/// The sandbox of a full sandbox ID or container ID, found directly by its UUID.
pub fn by_uuid(config: &Config, id: &str) -> Result<Option<Sandbox>, Status> {
    let Some(uuid) = pod_uuid(id) else {
        return Ok(None);
    };
    let store = PodStore::new(config.pods_dir());
    match store.lookup(&uuid) {
        Ok(pod) => Ok(load(pod)),
        Err(rkt::podstore::PodError::NotFound { .. }) => Ok(None),
        Err(e) => Err(lib(e)),
    }
}

fn load(pod: Pod) -> Option<Sandbox> {
    let status = PodStatus::read(&pod).ok()?;
    status.manifest.sandbox.as_ref()?;
    let meta = SandboxMeta::from_pod_meta(&status.manifest.meta)?;
    Some(Sandbox { pod, status, meta })
}

/// Every CRI sandbox of the store.
pub fn list(store: &PodStore) -> Result<Vec<Sandbox>, Status> {
    Ok(store
        .list()
        .map_err(lib)?
        .into_iter()
        .filter_map(load)
        .collect())
}

/// RunPodSandbox: returns the new sandbox's ID once it is ready.
pub fn run(config: &Config, req: proto::RunPodSandboxRequest) -> Result<String, Status> {
    let cfg = req
        .config
        .ok_or_else(|| invalid("RunPodSandbox: no config"))?;
    let metadata = cfg
        .metadata
        .clone()
        .ok_or_else(|| invalid("RunPodSandbox: the config has no metadata"))?;
    if metadata.name.is_empty() {
        return Err(invalid("RunPodSandbox: the metadata has no name"));
    }
    if !req.runtime_handler.is_empty() {
        return Err(invalid(format!(
            "runtime handler {:?}: rkt-cri has one runtime, the default (\"\")",
            req.runtime_handler
        )));
    }
    let linux = cfg.linux.clone().unwrap_or_default();
    let security = linux.security_context.clone().unwrap_or_default();
    let namespaces = security.namespace_options.clone().unwrap_or_default();
    let host_network = namespaces.network == proto::NamespaceMode::Node as i32;
    let host_ipc = namespaces.ipc == proto::NamespaceMode::Node as i32;
    // NODE: the host's PID namespace; CONTAINER: the pod's, each container asking for its
    // own (container.rs).
    let host_pid = namespaces.pid == proto::NamespaceMode::Node as i32;
    let mut sysctls = Vec::new();
    for (key, value) in &linux.sysctls {
        sysctls.push((
            sysctl_namespace(key, (host_network, host_ipc))?,
            key.clone(),
            value.clone(),
        ));
    }
    if security.selinux_options.is_some() {
        return Err(invalid(
            "SELinux options: SELinux is not enabled on this host",
        ));
    }
    let network = if host_network {
        "host".to_string()
    } else {
        crate::network::pod_network(&config.dirs.net_conf.value, config.net_name.as_deref())
            .map_err(invalid)?
    };
    let dns = cfg.dns_config.clone().unwrap_or_default();
    let mut ports = Vec::new();
    for p in &cfg.port_mappings {
        if p.host_port == 0 {
            continue; // only a container port: nothing to forward
        }
        let protocol = match proto::Protocol::try_from(p.protocol) {
            Ok(proto::Protocol::Tcp) => Protocol::Tcp,
            Ok(proto::Protocol::Udp) => Protocol::Udp,
            _ => {
                return Err(invalid(format!(
                    "port mapping {}:{}: protocol SCTP is not supported",
                    p.host_port, p.container_port
                )))
            }
        };
        let port = |n: i32, what: &str| {
            u16::try_from(n)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid(format!("port mapping: {what} port {n} is not 1-65535")))
        };
        let host_ip = match p.host_ip.as_str() {
            "" => None,
            ip => Some(ip.parse().map_err(|_| {
                invalid(format!("port mapping: host_ip {ip:?} is not an IP address"))
            })?),
        };
        ports.push(PortMapping {
            host_port: port(p.host_port, "host")?,
            container_port: port(p.container_port, "container")?,
            protocol,
            host_ip,
        });
    }
    let meta = SandboxMeta {
        name: metadata.name.clone(),
        uid: metadata.uid.clone(),
        namespace: metadata.namespace.clone(),
        attempt: metadata.attempt,
        log_directory: cfg.log_directory.clone(),
        network: network.clone(),
        runtime_handler: req.runtime_handler.clone(),
        labels: cfg.labels.clone(),
        annotations: cfg.annotations.clone(),
    };
    if !cfg.log_directory.is_empty() {
        std::fs::create_dir_all(&cfg.log_directory).map_err(|e| {
            invalid(format!(
                "cannot create the log directory {}: {e}",
                cfg.log_directory
            ))
        })?;
    }
    let cgroup_parent = Some(linux.cgroup_parent.clone()).filter(|p| !p.is_empty());
    let dirs = &config.dirs;
    let spec = RunnerSpec {
        pods_dir: config.pods_dir(),
        network,
        conf_dir: dirs.net_conf.value.clone(),
        plugin_path: dirs.plugin_path(),
        cache_dir: dirs.cni_cache_dir(),
        dns_servers: dns.servers.clone(),
        dns_search: dns.searches.clone(),
        dns_options: dns.options.clone(),
        hostname: cfg.hostname.clone(),
        ports,
        meta: meta.to_pod_meta(),
        cgroup_parent,
        isolators: rkt::isolation::Isolators {
            host_ipc,
            host_pid,
            ..Default::default()
        },
        plugin_timeout_ms: config.plugin_timeout.as_millis() as u64,
        net_operations: dirs.net_operations.value,
    };
    let uuid = runner::start(config.spawner.as_ref(), &spec).map_err(|e| internal(&e))?;
    if !sysctls.is_empty() {
        let store = PodStore::new(config.pods_dir());
        let set = store
            .lookup(&uuid)
            .map_err(lib)
            .and_then(|pod| set_sysctls(&pod, &sysctls).map(|()| pod));
        if let Err(e) = set {
            // The pod goes: it was asked for with settings it cannot have.
            if let Ok(pod) = store.lookup(&uuid) {
                let _ = stop_pod(&pod);
                let _ = rkt::pod::gc::remove(&store, &pod, config.plugin_timeout);
            }
            return Err(e);
        }
    }
    Ok(sandbox_id(&uuid))
}

/// The namespace a sysctl belongs to (`ipc` or `net`), or why the pod cannot have it:
/// a sysctl no namespace of the pod's holds would change the host's.
fn sysctl_namespace(
    key: &str,
    (host_network, host_ipc): (bool, bool),
) -> Result<&'static str, Status> {
    const IPC: [&str; 8] = [
        "kernel.shmmax",
        "kernel.shmall",
        "kernel.shmmni",
        "kernel.shm_rmid_forced",
        "kernel.msgmax",
        "kernel.msgmnb",
        "kernel.msgmni",
        "kernel.sem",
    ];
    if key.contains(['/', '\0']) || key.split('.').any(|part| part.is_empty() || part == "..") {
        return Err(invalid(format!("sysctl {key:?}: not a sysctl name")));
    }
    if IPC.contains(&key) || key.starts_with("fs.mqueue.") {
        if host_ipc {
            return Err(invalid(format!(
                "sysctl {key}: the pod is in the host's IPC namespace, whose settings are the \
                 host's"
            )));
        }
        return Ok("ipc");
    }
    if key.starts_with("net.") {
        if host_network {
            return Err(invalid(format!(
                "sysctl {key}: the pod is in the host's network namespace, whose settings \
                 are the host's"
            )));
        }
        return Ok("net");
    }
    Err(invalid(format!(
        "sysctl {key}: not in a namespace of the pod's (IPC: kernel.shm*, kernel.msg*, \
         kernel.sem, fs.mqueue.*; network: net.*), so setting it would change the host's"
    )))
}

/// Writes `sysctls` in the running pod's IPC and network namespaces, from a thread that
/// joins them (a thread of its own: a namespace joined is this thread's until it ends).
fn set_sysctls(pod: &Pod, sysctls: &[(&'static str, String, String)]) -> Result<(), Status> {
    let init = pod
        .state()
        .map_err(lib)?
        .pid
        .ok_or_else(|| internal(&anyhow::anyhow!("pod {} has no init", pod.uuid)))?;
    let sysctls = sysctls.to_vec();
    let uuid = pod.uuid.clone();
    std::thread::spawn(move || -> Result<(), String> {
        for ns in ["ipc", "net"] {
            let here: Vec<_> = sysctls.iter().filter(|(n, _, _)| *n == ns).collect();
            if here.is_empty() {
                continue;
            }
            let path = format!("/proc/{init}/ns/{ns}");
            let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            let kind = if ns == "ipc" {
                nix::sched::CloneFlags::CLONE_NEWIPC
            } else {
                nix::sched::CloneFlags::CLONE_NEWNET
            };
            nix::sched::setns(&file, kind).map_err(|e| format!("cannot join {path}: {e}"))?;
            for (_, key, value) in here {
                let file = format!("/proc/sys/{}", key.replace('.', "/"));
                std::fs::write(&file, value.as_bytes())
                    .map_err(|e| format!("sysctl {key}={value}: {e}"))?;
            }
        }
        Ok(())
    })
    .join()
    .map_err(|_| internal(&anyhow::anyhow!("setting the sysctls of pod {uuid} failed")))?
    .map_err(|e| invalid(format!("pod {uuid}: {e}")))
}

/// StopPodSandbox: stops its apps and init, releases its network; nothing when it is
/// stopped or gone.
pub fn stop(config: &Config, id: &str) -> Result<(), Status> {
    let Some(sandbox) = find(config, id)? else {
        return Ok(());
    };
    stop_pod(&sandbox.pod)
}

fn stop_pod(pod: &Pod) -> Result<(), Status> {
    use rkt::pod::control;
    let status = PodStatus::read(pod).map_err(lib)?;
    if status.state != State::Running {
        return Ok(());
    }
    match control::stop(pod, false) {
        // No init to signal (it has just ended) and no runner found holding the pod: it is
        // being released; the wait below says whether that ends.
        Ok(()) | Err(control::StopError::NoInit { .. }) => {}
        Err(control::StopError::NotRunning { .. }) => return Ok(()),
        Err(e) => return Err(lib(e)),
    }
    if control::wait_exited(pod, Some(STOP_GRACE)).map_err(lib)? {
        return Ok(());
    }
    match control::stop(pod, true) {
        // No init any more: it ended while we waited (its apps' grace is 10 s too) and the
        // runner is releasing the pod; waiting for that is all there is to do.
        Ok(())
        | Err(control::StopError::NotRunning { .. })
        | Err(control::StopError::NoInit { .. }) => {}
        Err(e) => return Err(lib(e)),
    }
    if control::wait_exited(pod, Some(STOP_GRACE)).map_err(lib)? {
        Ok(())
    } else {
        Err(internal(&anyhow::anyhow!(
            "pod {} still runs {} s after SIGKILL",
            pod.uuid,
            STOP_GRACE.as_secs() * 2
        )))
    }
}

/// RemovePodSandbox: stops it when it runs, then removes the pod and its containers'
/// logs' records; nothing when it is gone.
pub fn remove(config: &Config, id: &str) -> Result<(), Status> {
    let Some(sandbox) = find(config, id)? else {
        return Ok(());
    };
    stop_pod(&sandbox.pod)?;
    let store = PodStore::new(config.pods_dir());
    rkt::pod::gc::remove(&store, &sandbox.pod, config.plugin_timeout).map_err(lib)?;
    Ok(())
}

/// PodSandboxStatus.
pub fn status(sandbox: &Sandbox, verbose: bool) -> proto::PodSandboxStatusResponse {
    let ip = sandbox
        .status
        .networks
        .iter()
        .find_map(|n| n.ip)
        .map(|ip| ip.to_string())
        .unwrap_or_default();
    let additional: Vec<proto::PodIp> = sandbox
        .status
        .networks
        .iter()
        .flat_map(|n| n.ips.iter())
        .map(|ip| ip.to_string())
        .filter(|i| *i != ip)
        .map(|ip| proto::PodIp { ip })
        .collect();
    let host_network = sandbox.meta.network == "host";
    let mode = |host| {
        if host {
            proto::NamespaceMode::Node as i32
        } else {
            proto::NamespaceMode::Pod as i32
        }
    };
    let status = proto::PodSandboxStatus {
        id: sandbox.id(),
        metadata: Some(metadata(&sandbox.meta)),
        state: sandbox.cri_state() as i32,
        created_at: sandbox.created_ns(),
        network: Some(proto::PodSandboxNetworkStatus {
            ip: if host_network { String::new() } else { ip },
            additional_ips: additional,
        }),
        linux: Some(proto::LinuxPodSandboxStatus {
            namespaces: Some(proto::Namespace {
                options: Some(proto::NamespaceOption {
                    network: mode(host_network),
                    pid: mode(sandbox.status.manifest.host_pid()),
                    ipc: mode(sandbox.status.manifest.host_ipc()),
                    target_id: String::new(),
                    userns_options: None,
                }),
            }),
        }),
        labels: sandbox.meta.labels.clone(),
        annotations: sandbox.meta.annotations.clone(),
        runtime_handler: sandbox.meta.runtime_handler.clone(),
    };
    let mut info = std::collections::HashMap::new();
    if verbose {
        info.insert(
            "info".to_string(),
            serde_json::json!({
                "uuid": sandbox.pod.uuid,
                "podDir": sandbox.pod.dir,
                "pid": sandbox.status.record.pid,
                "network": sandbox.meta.network,
                "hostname": sandbox.status.record.hostname,
            })
            .to_string(),
        );
    }
    proto::PodSandboxStatusResponse {
        status: Some(status),
        info,
        containers_statuses: Vec::new(),
        timestamp: 0,
    }
}

pub fn metadata(meta: &SandboxMeta) -> proto::PodSandboxMetadata {
    proto::PodSandboxMetadata {
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        namespace: meta.namespace.clone(),
        attempt: meta.attempt,
    }
}

/// ListPodSandbox.
pub fn list_cri(
    config: &Config,
    filter: Option<proto::PodSandboxFilter>,
) -> Result<Vec<proto::PodSandbox>, Status> {
    let store = PodStore::new(config.pods_dir());
    let filter = filter.unwrap_or_default();
    Ok(list(&store)?
        .into_iter()
        .filter(|s| filter.id.is_empty() || s.id().starts_with(&filter.id))
        .filter(|s| {
            filter
                .state
                .as_ref()
                .is_none_or(|st| st.state == s.cri_state() as i32)
        })
        .filter(|s| {
            filter
                .label_selector
                .iter()
                .all(|(k, v)| s.meta.labels.get(k) == Some(v))
        })
        .map(|s| proto::PodSandbox {
            id: s.id(),
            metadata: Some(metadata(&s.meta)),
            state: s.cri_state() as i32,
            created_at: s.created_ns(),
            labels: s.meta.labels.clone(),
            annotations: s.meta.annotations.clone(),
            runtime_handler: s.meta.runtime_handler.clone(),
        })
        .collect())
}
