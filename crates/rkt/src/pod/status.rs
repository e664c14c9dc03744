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
        let mut record = pod.state()?;
        // A sandbox's records line up with its manifest's apps by name (a change that failed
        // half way can leave them apart), so that everything here finds an app's by index.
        if manifest.sandbox.is_some() {
            let mut by_name = std::mem::take(&mut record.apps);
            record.apps = manifest
                .apps
                .iter()
                .filter_map(|app| {
                    let at = by_name.iter().position(|r| r.name == app.name)?;
                    Some(by_name.swap_remove(at))
                })
                .collect();
        }
        let runner_died = probe.is_some() && record.state == State::Running;
        drop(probe);
        let state = if runner_died {
            State::Exited
        } else {
            record.state
        };
        let live = networking::load_record(&pod.dir).unwrap_or_default();
        let ports = networking::record::forwarded_ports(&live);
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

/// A pod's state as rkt 1.30 named it in `status`, `list` and JSON. Pods are created whole
/// (a temporary directory renamed into place) and deleted by gc or rm under the pod's lock,
/// so rkt's `embryo`, `preparing` and `deleting` are never seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RktState {
    Prepared,
    Running,
    Exited,
    /// Marked garbage after it ran.
    ExitedGarbage,
    /// Marked garbage without having run.
    Garbage,
}

impl RktState {
    pub fn as_str(self) -> &'static str {
        match self {
            RktState::Prepared => "prepared",
            RktState::Running => "running",
            RktState::Exited => "exited",
            RktState::ExitedGarbage => "exited garbage",
            RktState::Garbage => "garbage",
        }
    }
}

impl std::fmt::Display for RktState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PodStatus {
    /// The state under rkt 1.30's name.
    pub fn rkt_state(&self) -> RktState {
        match self.state {
            State::Prepared => RktState::Prepared,
            State::Running => RktState::Running,
            State::Exited => RktState::Exited,
            State::Garbage if self.record.started.is_some() => RktState::ExitedGarbage,
            State::Garbage => RktState::Garbage,
        }
    }

    /// Whether the pod ran and ended (`exited` or `exited garbage`).
    fn has_exited(&self) -> bool {
        matches!(self.rkt_state(), RktState::Exited | RktState::ExitedGarbage)
    }

    /// The PID of the pod's init: the live one while it runs, the last one after it exited.
    fn shown_pid(&self) -> Option<i32> {
        match self.state {
            State::Running => self.record.pid.or(self.record.init_pid),
            _ if self.has_exited() => self.record.init_pid,
            _ => None,
        }
    }

    /// rkt's short network list: `name:ip4=ADDR, …`.
    pub fn networks_short(&self) -> String {
        self.networks
            .iter()
            .map(|n| n.short())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `rkt status` lines, as `(key, value)`, those rkt 1.30 printed first and in its order:
    /// `state`, `created`, `started` (once started), `networks` (running and exited pods,
    /// even when empty), then for pods that ran: `pid` (also after exit), `exited`, and
    /// `app-<name>=<exit status>` (once exited). Ours follow: `ports` (while running),
    /// `user-annotation-<key>` and `user-label-<key>`.
    pub fn key_values(&self) -> Vec<(String, String)> {
        let state = self.rkt_state();
        let mut kv = vec![
            ("state".to_string(), state.to_string()),
            ("created".to_string(), self.manifest.created.go_layout()),
        ];
        if let Some(started) = self.record.started {
            kv.push(("started".into(), started.go_layout()));
        }
        if matches!(state, RktState::Running | RktState::Exited) {
            kv.push(("networks".into(), self.networks_short()));
        }
        if matches!(
            state,
            RktState::Running | RktState::Exited | RktState::ExitedGarbage
        ) {
            if let Some(pid) = self.shown_pid() {
                kv.push(("pid".into(), pid.to_string()));
            }
            kv.push(("exited".into(), self.has_exited().to_string()));
            for (index, app) in self.manifest.apps.iter().enumerate() {
                // In a pod of several apps, one that ended is shown while the others run.
                let shown = state != RktState::Running || !self.record.apps.is_empty();
                if let Some(code) = self.record.app_exit_status(index).filter(|_| shown) {
                    kv.push((format!("app-{}", app.name), code.to_string()));
                }
            }
        }
        if self.state == State::Running && !self.ports.is_empty() {
            let ports: Vec<String> = self.ports.iter().map(ToString::to_string).collect();
            kv.push(("ports".into(), ports.join(", ")));
        }
        // In a pod of several apps each key names its app: `user-label-<app>/<key>`.
        let several = self.manifest.apps.len() > 1;
        for app in &self.manifest.apps {
            let of = |k: &str| match several {
                true => format!("{}/{k}", app.name),
                false => k.to_string(),
            };
            for (k, v) in &app.user_annotations {
                kv.push((format!("user-annotation-{}", of(k)), v.clone()));
            }
            for (k, v) in &app.user_labels {
                kv.push((format!("user-label-{}", of(k)), v.clone()));
            }
        }
        // The pod's own (a sandbox's): keys without an app.
        let meta = &self.manifest.meta;
        for (prefix, map) in [
            ("annotation", &meta.annotations),
            ("pod-user-annotation", &meta.user_annotations),
            ("pod-user-label", &meta.user_labels),
        ] {
            for (k, v) in map {
                kv.push((format!("{prefix}-{k}"), v.clone()));
            }
        }
        kv
    }

    /// App `index`'s state in rkt's API (`created`, `running`, `exited`).
    pub fn app_state(&self, index: usize) -> &'static str {
        // A sandbox's app has a life of its own, in its own record.
        if let (Some(_), Some(app)) = (&self.manifest.sandbox, self.record.apps.get(index)) {
            return match (super::apps::AppState::of(app), self.state) {
                (super::apps::AppState::Running, State::Exited | State::Garbage) => "exited",
                (state, _) => state.as_str(),
            };
        }
        match self.state {
            _ if self.record.app_exit_status(index).is_some() => "exited",
            State::Prepared => "created",
            State::Running => "running",
            State::Exited | State::Garbage => "exited",
        }
    }

    /// The JSON of `rkt status --format=json` (one element of `rkt list --format=json`):
    /// rkt's API v1 pod object (`name` is the UUID; times of the pod in Unix seconds, of its
    /// apps in Unix nanoseconds; empty fields left out as rkt did), plus our own keys:
    /// `pid`, `hostname`, `ports`, `runner_died`, `error`, `exit_policy` and `volumes`
    /// (when not the default, when any), `cgroups` (the pod's cgroup in each hierarchy, by
    /// controller or `unified`, once a runner placed it) and `cgroup_parent` (when given),
    /// and the app's `exec` and `rootfs`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{json, Map, Value};
        let apps: Vec<Value> = (0..self.manifest.apps.len())
            .map(|index| Value::Object(self.app_json(index)))
            .collect();
        let names: Vec<&str> = self.manifest.apps.iter().map(|a| a.name.as_str()).collect();
        let mut pod = Map::new();
        pod.insert("name".into(), json!(self.uuid));
        pod.insert("state".into(), json!(self.rkt_state().as_str()));
        if matches!(self.state, State::Running | State::Exited) && !self.networks.is_empty() {
            pod.insert("networks".into(), json!(self.networks));
        }
        pod.insert("app_names".into(), json!(names));
        pod.insert("apps".into(), Value::Array(apps));
        pod.insert(
            "created_at".into(),
            json!(self.manifest.created.unix_secs()),
        );
        if let Some(t) = self.record.started {
            pod.insert("started_at".into(), json!(t.unix_secs()));
        }
        insert_present(&mut pod, "pid", json!(self.shown_pid()));
        insert_present(&mut pod, "hostname", json!(self.record.hostname));
        let ports = if self.state == State::Running {
            self.ports.clone()
        } else {
            Vec::new()
        };
        pod.insert("ports".into(), json!(ports));
        pod.insert("runner_died".into(), json!(self.runner_died));
        insert_present(&mut pod, "error", json!(self.record.error));
        insert_present(&mut pod, "isolation", json!(self.record.isolation));
        if let Some(cgroup) = &self.record.cgroup {
            pod.insert("cgroups".into(), json!(cgroup.paths));
        }
        insert_present(
            &mut pod,
            "cgroup_parent",
            json!(self.manifest.cgroup_parent),
        );
        if !self.manifest.exit_policy.is_default() {
            pod.insert(
                "exit_policy".into(),
                json!(self.manifest.exit_policy.name()),
            );
        }
        if !self.manifest.volumes.is_empty() {
            pod.insert("volumes".into(), json!(self.manifest.volumes));
        }
        let meta = &self.manifest.meta;
        for (key, map) in [
            ("annotations", &meta.annotations),
            ("user_annotations", &meta.user_annotations),
            ("user_labels", &meta.user_labels),
        ] {
            if !map.is_empty() {
                pod.insert(key.into(), json!(map));
            }
        }
        Value::Object(pod)
    }

    /// App `index` in rkt's API v1 app object, plus our `exec` and `rootfs` (when it has one).
    fn app_json(&self, index: usize) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::{json, Map};
        let app = &self.manifest.apps[index];
        let mut a = Map::new();
        a.insert("name".into(), json!(app.name));
        a.insert("state".into(), json!(self.app_state(index)));
        // A sandbox's app's times are its own; the others' are the pod's.
        let own = self
            .manifest
            .sandbox
            .as_ref()
            .and_then(|_| self.record.apps.get(index));
        let created = own.and_then(|r| r.created).unwrap_or(self.manifest.created);
        a.insert("created_at".into(), json!(created.unix_nanos() as u64));
        let started = own.map_or(self.record.started, |r| r.started);
        if let Some(t) = started {
            a.insert("started_at".into(), json!(t.unix_nanos() as u64));
        }
        let finished = match (own, self.state) {
            (Some(r), _) => r.finished,
            (None, State::Exited | State::Garbage) => self.record.exited.or(self.record.garbage),
            (None, _) => None,
        };
        if let Some(t) = finished {
            a.insert("finished_at".into(), json!(t.unix_nanos() as u64));
        }
        if let Some(code) = self.record.app_exit_status(index) {
            a.insert("exit_code".into(), json!(code));
        }
        // Empty for a host command or a root directory.
        let image_id = app.image.as_ref().map_or("", |i| i.id.as_str());
        a.insert("image_id".into(), json!(image_id));
        if let Some(image) = &app.image {
            a.insert("image_name".into(), json!(image.name));
        }
        if !app.user_annotations.is_empty() {
            a.insert("user_annotations".into(), json!(app.user_annotations));
        }
        if !app.user_labels.is_empty() {
            a.insert("user_labels".into(), json!(app.user_labels));
        }
        a.insert("exec".into(), json!(app.exec));
        insert_present(&mut a, "rootfs", json!(app.rootfs));
        if !app.mounts.is_empty() {
            a.insert("mounts".into(), json!(self.api_mounts(app)));
        }
        a
    }

    /// `app`'s mounts in rkt's API v1 shape: `name` (the volume's), `container_path`,
    /// `host_path` (a host volume's source) and `read_only`.
    fn api_mounts(&self, app: &crate::pod::App) -> Vec<serde_json::Value> {
        use crate::podstore::volume::VolumeKind;
        app.mounts
            .iter()
            .map(|m| {
                let volume = self.manifest.volumes.iter().find(|v| v.name == m.volume);
                let (host_path, read_only) = match volume.map(|v| &v.kind) {
                    Some(VolumeKind::Host {
                        source, read_only, ..
                    }) => (Some(source.clone()), *read_only),
                    _ => (None, false),
                };
                let mut mount = serde_json::json!({
                    "name": m.volume,
                    "container_path": m.target,
                    "read_only": read_only,
                });
                if let Some(path) = host_path {
                    mount["host_path"] = serde_json::json!(path);
                }
                mount
            })
            .collect()
    }
}

/// Inserts `value` unless it is `null`: as rkt's API (Go's `omitempty`), a field the pod or
/// app does not have is left out.
fn insert_present(
    map: &mut serde_json::Map<String, serde_json::Value>,
    key: &str,
    value: serde_json::Value,
) {
    if !value.is_null() {
        map.insert(key.into(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::state::NetSummary;
    use crate::pod::{App, PodStore, Timestamp};

    fn web_app() -> App {
        let mut app = App::new("web", ["/bin/true"]);
        app.user_annotations.insert("team".into(), "net".into());
        app.user_labels.insert("tier".into(), "front".into());
        app
    }

    fn default_net() -> NetSummary {
        NetSummary {
            net_name: "default".into(),
            net_conf: "net/99-default.conf".into(),
            plugin_path: "/usr/lib/cni/ptp".into(),
            if_name: "eth0".into(),
            ip: Some("172.16.28.5".parse().unwrap()),
            args: String::new(),
            mask: Some("255.255.255.0".parse().unwrap()),
            ips: Vec::new(),
        }
    }

    /// A pod recorded in `state`, read while its lock is held (as a runner holds it).
    fn pod_in(state: State, edit: impl FnOnce(&mut PodState)) -> (tempfile::TempDir, PodStatus) {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let mut st = PodState::new(state);
        edit(&mut st);
        let (pod, _lock) = store.create(web_app(), &st).unwrap();
        let status = PodStatus::read(&pod).unwrap();
        (tmp, status)
    }

    #[test]
    fn in_a_pod_of_several_apps_each_annotation_and_label_key_names_its_app() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let mut db = web_app();
        db.name = "db".into();
        let spec = crate::pod::PodSpec {
            apps: vec![web_app(), db],
            ..crate::pod::PodSpec::from(web_app())
        };
        let (pod, _lock) = store.create(spec, &PodState::new(State::Prepared)).unwrap();
        let keys: Vec<String> = PodStatus::read(&pod)
            .unwrap()
            .key_values()
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| k.starts_with("user-"))
            .collect();
        assert_eq!(
            keys,
            [
                "user-annotation-web/team",
                "user-label-web/tier",
                "user-annotation-db/team",
                "user-label-db/tier"
            ]
        );
    }

    #[test]
    fn json_shows_the_pods_volumes_and_each_apps_mounts() {
        use crate::podstore::volume::{Mount, Volume, VolumeKind};
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let mut app = web_app();
        app.mounts = vec![Mount {
            volume: "data".into(),
            target: "/data".into(),
        }];
        let spec = crate::pod::PodSpec {
            volumes: vec![Volume {
                name: "data".into(),
                kind: VolumeKind::Empty {
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                },
            }],
            ..crate::pod::PodSpec::from(app)
        };
        let (pod, _lock) = store.create(spec, &PodState::new(State::Prepared)).unwrap();
        let json = PodStatus::read(&pod).unwrap().to_json();
        assert_eq!(json["volumes"][0]["name"], "data");
        assert_eq!(json["volumes"][0]["kind"], "empty");
        assert_eq!(
            json["apps"][0]["mounts"][0],
            serde_json::json!({"name": "data", "container_path": "/data", "read_only": false})
        );
        let (_tmp, plain) = pod_in(State::Prepared, |_| {});
        let plain = plain.to_json();
        assert!(plain.get("volumes").is_none() && plain["apps"][0].get("mounts").is_none());
    }

    fn ran(st: &mut PodState) {
        st.started = Some(Timestamp::now());
        st.init_pid = Some(4242);
        st.networks = vec![default_net()];
    }

    fn exited(st: &mut PodState) {
        ran(st);
        st.exited = Some(Timestamp::now());
        st.exit_status = Some(3);
    }

    fn exited_pod() -> (tempfile::TempDir, PodStatus) {
        pod_in(State::Exited, exited)
    }

    fn keys(status: &PodStatus) -> Vec<String> {
        status.key_values().into_iter().map(|(k, _)| k).collect()
    }

    /// rkt 1.30's `status` of an exited pod: networks, pid (after exit too), exited and the
    /// app's status in its order; our lines after them.
    #[test]
    fn status_text_of_an_exited_pod_has_rkts_lines_in_rkts_order() {
        let (_tmp, status) = exited_pod();
        let kv = status.key_values();
        assert_eq!(
            keys(&status),
            [
                "state",
                "created",
                "started",
                "networks",
                "pid",
                "exited",
                "app-web",
                "user-annotation-team",
                "user-label-tier"
            ]
        );
        let get = |k: &str| kv.iter().find(|(key, _)| key == k).unwrap().1.clone();
        assert_eq!(get("state"), "exited");
        assert_eq!(get("networks"), "default:ip4=172.16.28.5");
        assert_eq!(get("pid"), "4242");
        assert_eq!(get("exited"), "true");
        assert_eq!(get("app-web"), "3");
        assert_eq!(get("user-annotation-team"), "net");
        assert_eq!(get("user-label-tier"), "front");
    }

    /// rkt printed `networks=` for running and exited pods even when there were none.
    #[test]
    fn status_text_prints_networks_even_when_empty() {
        let (_tmp, status) = pod_in(State::Exited, |st| {
            exited(st);
            st.networks.clear();
        });
        let kv = status.key_values();
        assert!(kv.contains(&("networks".into(), String::new())), "{kv:?}");
    }

    /// A running pod: pid, exited=false, and no app exit status yet.
    #[test]
    fn status_text_of_a_running_pod() {
        let (_tmp, status) = pod_in(State::Running, |st| {
            ran(st);
            st.pid = Some(4242);
        });
        let kv = status.key_values();
        assert_eq!(
            &keys(&status)[..6],
            ["state", "created", "started", "networks", "pid", "exited"]
        );
        assert!(kv.contains(&("exited".into(), "false".into())));
        assert!(!keys(&status).iter().any(|k| k.starts_with("app-")));
    }

    /// A prepared pod shows only state and created (then ours), as rkt did.
    #[test]
    fn status_text_of_a_prepared_pod_stops_after_created() {
        let (_tmp, status) = pod_in(State::Prepared, |_| {});
        assert_eq!(
            keys(&status),
            [
                "state",
                "created",
                "user-annotation-team",
                "user-label-tier"
            ]
        );
    }

    /// rkt's state names for pods marked garbage: `exited garbage` once it ran (pid,
    /// exited=true and the app's status still shown, networks not), else `garbage`.
    #[test]
    fn status_text_uses_rkts_garbage_state_names() {
        let (_tmp, status) = pod_in(State::Garbage, exited);
        assert_eq!(status.rkt_state(), RktState::ExitedGarbage);
        let k = keys(&status);
        assert!(k.contains(&"pid".to_string()) && k.contains(&"app-web".to_string()));
        assert!(!k.contains(&"networks".to_string()));
        let (_tmp, status) = pod_in(State::Garbage, |_| {});
        assert_eq!(status.rkt_state(), RktState::Garbage);
        assert_eq!(&keys(&status)[..2], ["state", "created"]);
        assert!(!keys(&status).contains(&"exited".to_string()));
    }

    /// rkt's API v1 pod object: names and JSON types of every field it had, plus ours.
    #[test]
    fn status_json_has_rkt_api_v1_fields_and_types() {
        let (_tmp, status) = exited_pod();
        let json = status.to_json();
        assert_eq!(json["name"], status.uuid.as_str());
        assert_eq!(json["state"], "exited");
        assert_eq!(json["app_names"], serde_json::json!(["web"]));
        let created = json["created_at"].as_i64().unwrap();
        assert_eq!(created, status.manifest.created.unix_secs());
        assert!(json["started_at"].as_i64().unwrap() >= created);
        let app = &json["apps"][0];
        assert_eq!(app["name"], "web");
        assert_eq!(app["state"], "exited");
        assert_eq!(app["exit_code"], 3);
        assert_eq!(app["image_id"], "");
        // Apps' times are nanoseconds, the pod's seconds.
        let app_created = app["created_at"].as_u64().unwrap();
        assert_eq!(app_created / 1_000_000_000, created as u64);
        assert!(app["started_at"].is_u64() && app["finished_at"].is_u64());
        assert!(app.get("mounts").is_none(), "rkt left out empty mounts");
        assert_eq!(app["user_annotations"]["team"], "net");
        assert_eq!(app["user_labels"]["tier"], "front");
        // Ours, as extra keys.
        assert_eq!(json["pid"], 4242);
        assert_eq!(app["exec"][0], "/bin/true");
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

    /// rkt left out what a pod does not have yet (omitempty): a prepared pod has no
    /// `started_at`, `networks` or app `exit_code`; its app is `created`.
    #[test]
    fn status_json_leaves_out_what_a_prepared_pod_lacks() {
        let (_tmp, status) = pod_in(State::Prepared, |_| {});
        let json = status.to_json();
        assert_eq!(json["state"], "prepared");
        for key in ["started_at", "networks"] {
            assert!(json.get(key).is_none(), "{key} in {json}");
        }
        let app = &json["apps"][0];
        assert_eq!(app["state"], "created");
        for key in ["started_at", "finished_at", "exit_code"] {
            assert!(app.get(key).is_none(), "{key} in {app}");
        }
    }

    /// Issue 22, defect 10: no `null` in `status --format=json` for what a pod lacks (a
    /// prepared host-command pod has no PID, error or rootfs), as pods.md says.
    #[test]
    fn status_json_has_no_nulls_for_absent_fields() {
        let (_tmp, status) = pod_in(State::Prepared, |_| {});
        let json = status.to_json();
        let app = &json["apps"][0];
        for (object, key) in [(&json, "pid"), (&json, "error"), (app, "rootfs")] {
            assert!(object.get(key).is_none(), "{key} in {object}");
        }
        let nulls: Vec<&String> = json
            .as_object()
            .unwrap()
            .iter()
            .chain(app.as_object().unwrap())
            .filter(|(_, v)| v.is_null())
            .map(|(k, _)| k)
            .collect();
        assert!(nulls.is_empty(), "null fields {nulls:?} in {json}");
    }

    #[test]
    fn a_running_record_without_a_runner_reads_as_exited() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PodStore::new(tmp.path().join("pods"));
        let app = App::new("x", ["x"]);
        let (pod, lock) = store.create(app, &PodState::new(State::Running)).unwrap();
        assert_eq!(PodStatus::read(&pod).unwrap().state, State::Running);
        drop(lock);
        let status = PodStatus::read(&pod).unwrap();
        assert_eq!(status.state, State::Exited);
        assert!(status.runner_died);
    }
}
