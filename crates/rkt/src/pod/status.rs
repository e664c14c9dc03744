//! A consistent view of one pod for `status` and `list`: the manifest, the recorded state,
//! and whether its runner is alive, which together give the state users see.

use serde::Serialize;

use super::lock::PodLock;
use super::manifest::PodManifest;
use super::state::{NetSummary, PodState, State};
use super::store::Pod;
use super::PodError;
use crate::networking;

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
    /// The pod's networks: the live record while it has one, else the copy kept at setup.
    pub networks: Vec<NetSummary>,
    /// The host ports forwarded to the pod (`--port`), from the live record.
    pub ports: Vec<networking::PortMapping>,
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
        let live = networking::load_record(&pod.dir).unwrap_or_default();
        let ports = networking::ports::recorded(&live);
        let networks = if live.is_empty() {
            record.networks.clone()
        } else {
            live.iter().map(NetSummary::from).collect()
        };
        Ok(PodStatus {
            uuid: pod.uuid.clone(),
            manifest,
            record,
            state,
            runner_died,
            networks,
            ports,
        })
    }

    /// The app's exit status, if the pod exited normally.
    pub fn exit_status(&self) -> Option<i32> {
        self.record.exit_status
    }
}

impl PodStatus {
    /// Whether `networks=` applies: rkt shows networks of running and exited pods.
    fn shows_networks(&self) -> bool {
        matches!(self.state, State::Running | State::Exited)
    }

    /// rkt's short network list: `name:ip4=ADDR, …`.
    pub fn networks_short(&self) -> String {
        self.networks
            .iter()
            .map(|n| n.short())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `rkt status` lines, as `(key, value)` in rkt's order: `state`, `created`, `started`,
    /// `networks`, `pid`, `exited`, `app-<name>`.
    pub fn key_values(&self) -> Vec<(String, String)> {
        let mut kv = vec![
            ("state".to_string(), self.state.to_string()),
            ("created".to_string(), self.manifest.created.to_string()),
        ];
        if let Some(started) = self.record.started {
            kv.push(("started".into(), started.to_string()));
        }
        if self.shows_networks() && !self.networks.is_empty() {
            kv.push(("networks".into(), self.networks_short()));
        }
        if self.state == State::Running && !self.ports.is_empty() {
            let ports: Vec<String> = self.ports.iter().map(ToString::to_string).collect();
            kv.push(("ports".into(), ports.join(", ")));
        }
        if self.state == State::Running {
            if let Some(pid) = self.record.pid {
                kv.push(("pid".into(), pid.to_string()));
            }
        }
        let exited = matches!(self.state, State::Exited | State::Garbage);
        kv.push(("exited".into(), exited.to_string()));
        if let Some(code) = self.record.exit_status {
            kv.push((format!("app-{}", self.manifest.app.name), code.to_string()));
        }
        kv
    }

    /// The JSON form of `rkt status --format=json` (one element of `rkt list --format=json`).
    pub fn to_json(&self) -> serde_json::Value {
        let networks: Vec<_> = if self.shows_networks() {
            self.networks.clone()
        } else {
            Vec::new()
        };
        serde_json::json!({
            "uuid": self.uuid,
            "state": self.state,
            "created": self.manifest.created,
            "started": self.record.started,
            "exitedAt": self.record.exited,
            "pid": if self.state == State::Running { self.record.pid } else { None },
            "exited": matches!(self.state, State::Exited | State::Garbage),
            "hostname": self.record.hostname,
            "apps": [{
                "name": self.manifest.app.name,
                "exec": self.manifest.app.exec,
                "exitCode": self.record.exit_status,
            }],
            "networks": networks,
            "ports": if self.state == State::Running { self.ports.clone() } else { Vec::new() },
            "runnerDied": self.runner_died,
            "error": self.record.error,
            "isolation": self.record.isolation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::state::NetSummary;
    use crate::pod::{App, PodStore, Timestamp};

    fn exited_pod() -> (tempfile::TempDir, PodStatus) {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let app = App {
            name: "web".into(),
            exec: vec!["/bin/true".into()],
            env: vec![],
            inherit_env: false,
            rootfs: None,
            isolators: Default::default(),
        };
        let mut st = PodState::new(State::Exited);
        st.started = Some(Timestamp::now());
        st.exited = Some(Timestamp::now());
        st.exit_status = Some(3);
        st.networks = vec![NetSummary {
            net_name: "default".into(),
            net_conf: "net/99-default.conf".into(),
            plugin_path: "/usr/lib/cni/ptp".into(),
            if_name: "eth0".into(),
            ip: Some("172.16.28.5".parse().unwrap()),
            args: String::new(),
            mask: Some("255.255.255.0".parse().unwrap()),
        }];
        let (pod, lock) = store.create(app, &st).unwrap();
        drop(lock);
        let status = PodStatus::read(&pod).unwrap();
        (tmp, status)
    }

    #[test]
    fn key_values_follow_rkt() {
        let (_tmp, status) = exited_pod();
        let kv = status.key_values();
        let keys: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["state", "created", "started", "networks", "exited", "app-web"]
        );
        let get = |k: &str| kv.iter().find(|(key, _)| key == k).unwrap().1.clone();
        assert_eq!(get("state"), "exited");
        assert_eq!(get("networks"), "default:ip4=172.16.28.5");
        assert_eq!(get("exited"), "true");
        assert_eq!(get("app-web"), "3");
    }

    #[test]
    fn json_carries_rkt_network_fields() {
        let (_tmp, status) = exited_pod();
        let json = status.to_json();
        assert_eq!(json["state"], "exited");
        assert_eq!(json["apps"][0]["exitCode"], 3);
        let net = &json["networks"][0];
        for key in [
            "netName",
            "netConf",
            "pluginPath",
            "ifName",
            "ip",
            "args",
            "mask",
        ] {
            assert!(net.get(key).is_some(), "missing {key} in {net}");
        }
        assert_eq!(net["ip"], "172.16.28.5");
    }

    #[test]
    fn a_running_record_without_a_runner_reads_as_exited() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let app = App {
            name: "x".into(),
            exec: vec!["x".into()],
            env: vec![],
            inherit_env: false,
            rootfs: None,
            isolators: Default::default(),
        };
        let (pod, lock) = store.create(app, &PodState::new(State::Running)).unwrap();
        assert_eq!(PodStatus::read(&pod).unwrap().state, State::Running);
        drop(lock);
        let status = PodStatus::read(&pod).unwrap();
        assert_eq!(status.state, State::Exited);
        assert!(status.runner_died);
    }
}
