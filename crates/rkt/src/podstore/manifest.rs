//! The pod manifest (`<pod>/pod.json`): what to run. Written once when the pod is created
//! (by `rkt run` or `rkt prepare`) and never changed afterwards.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::time::Timestamp;
use super::volume::{Mount, Volume};
use crate::isolation::cgroups::CgroupParent;
use crate::isolation::Isolators;

/// One app of a pod: a command from the host, from a root filesystem directory, or from an
/// image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct App {
    /// The app's name (`--name`, default the command's base name).
    pub name: String,
    /// The command and its arguments; `exec[0]` is looked up in the app's `PATH`.
    pub exec: Vec<String>,
    /// `--set-env` variables, in the order given; they override inherited ones.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// `--inherit-env`: start from the environment of the process that runs the pod.
    #[serde(default)]
    pub inherit_env: bool,
    /// `--working-dir`: the directory the app starts in (over an image's `WorkingDir`);
    /// created when missing in the app's own root filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// `--rootfs`: the app's root directory (absolute); `None` means the host's root.
    #[serde(default)]
    pub rootfs: Option<PathBuf>,
    /// `--ipc`: whether the pod gets an IPC namespace of its own (the default).
    #[serde(default, skip_serializing_if = "IpcMode::is_private")]
    pub ipc: IpcMode,
    /// A PID namespace of the app's own inside the pod's, whose PID 1 the app is (the
    /// CRI's `CONTAINER` PID mode; rkt's command line sets none): it sees only its own
    /// processes, and the pod's init still reaps it and reports its exit. Honoured for a
    /// sandbox's apps ([`crate::stage::sandbox`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_pid_ns: bool,
    /// `--oom-score-adj` (or `--oom-score-adjust`): the app's `oom_score_adj` (-1000 to
    /// 1000), set in its process ([`crate::isolation::oom`]); `None` leaves the runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adjust: Option<i16>,
    /// The image the app runs from (`rkt run IMAGE`); its root directory is then
    /// `<pod>/rootfs`, built from the image when the pod starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<AppImage>,
    /// `--annotation=K=V`: the app's annotations, rkt 1.30's (appc's `annotations` of an
    /// app in a pod manifest): kept here for the tools that read the manifest
    /// (`rkt cat-manifest`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `--user-annotation=K=V`: free-form facts about the app for the user's tools; rkt
    /// only stores and shows them (status, JSON `user_annotations`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_annotations: BTreeMap<String, String>,
    /// `--user-label=K=V`: like annotations, for selecting pods (JSON `user_labels`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_labels: BTreeMap<String, String>,
    /// `--caps-retain`, `--caps-remove`, `--seccomp` (absent: the defaults).
    #[serde(default, skip_serializing_if = "Isolators::is_default")]
    pub isolators: Isolators,
    /// `--mount`: the pod's volumes this app sees, and where.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    /// A sandbox's app (`rkt app add`): which of its streams go to its log, and how the
    /// log rotates. `None`: its stdout and stderr are `/dev/null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<AppLog>,
}

/// Which of a sandbox app's output streams go to its log, and how the log rotates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppLog {
    pub stdout: bool,
    pub stderr: bool,
    /// The size at which the log rotates; 0: never.
    pub max_size: u64,
    /// How many files the log keeps, the current one included.
    pub max_files: u32,
    /// The streams `rkt attach` reaches (`stream` or `tty` modes).
    #[serde(default, skip_serializing_if = "AttachModes::is_none")]
    pub attach: AttachModes,
    /// Where the log is written (an absolute path: a CRI container's, which kubelet
    /// chooses); `None`: `logs/<app>.log` in the pod's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// Which of a sandbox app's streams attached clients reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachModes {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    /// The streams are a terminal of the app's (`tty`).
    pub tty: bool,
}

impl AttachModes {
    pub fn is_none(&self) -> bool {
        !(self.stdin || self.stdout || self.stderr || self.tty)
    }
}

/// The pod's IPC namespace (`--ipc`, upstream rkt's values; its `auto` is `private`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IpcMode {
    /// An IPC namespace of the pod's own: System V IPC objects and POSIX message queues
    /// are the pod's.
    #[default]
    Private,
    /// The IPC namespace of the process that runs the pod (the host's, usually).
    Parent,
}

impl IpcMode {
    pub fn is_private(&self) -> bool {
        *self == IpcMode::Private
    }
}

/// A `--user-annotation` or `--user-label` that is not `KEY=VALUE` with a usable key/value.
#[derive(Debug, thiserror::Error)]
#[error("--{flag}={given:?}: {why}")]
pub struct UserMetaError {
    pub flag: &'static str,
    pub given: String,
    pub why: &'static str,
}

/// Parses repeated `--<flag>=KEY=VALUE` values (a later KEY replaces an earlier one). A key
/// is a non-empty word of printable characters without whitespace; a value may be empty
/// but holds no control characters, so that `rkt status` shows it on one line.
pub fn parse_user_meta(
    flag: &'static str,
    given: &[String],
) -> Result<BTreeMap<String, String>, UserMetaError> {
    let mut map = BTreeMap::new();
    for kv in given {
        let err = |why| UserMetaError {
            flag,
            given: kv.clone(),
            why,
        };
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| err("expected KEY=VALUE"))?;
        if k.is_empty() || k.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err("the key must be a non-empty word without spaces"));
        }
        if v.chars().any(char::is_control) {
            return Err(err(
                "the value must not hold control characters (newlines, tabs)",
            ));
        }
        map.insert(k.to_string(), v.to_string());
    }
    Ok(map)
}

impl App {
    /// An app named `name` running `exec` from the host, every other setting at its
    /// default (set the fields for the rest).
    pub fn new(name: impl Into<String>, exec: impl IntoIterator<Item = impl Into<String>>) -> App {
        App {
            name: name.into(),
            exec: exec.into_iter().map(Into::into).collect(),
            ..App::default()
        }
    }

    /// The default app name for a command: its base name.
    pub fn default_name(exec0: &str) -> String {
        let base = exec0.rsplit('/').next().unwrap_or(exec0);
        if base.is_empty() {
            "app".to_string()
        } else {
            base.to_string()
        }
    }
}

/// What a pod runs: its apps, in the order given, and when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSpec {
    /// One or more apps; the pod-wide settings (IPC namespace, OOM score, resource limits,
    /// user namespace) are the first app's.
    pub apps: Vec<App>,
    pub exit_policy: ExitPolicy,
    /// `--volume`: the volumes the apps may mount.
    pub volumes: Vec<Volume>,
    /// A sandbox (`rkt app sandbox`): a pod made without apps, whose apps are added,
    /// started, stopped and removed while it runs, and which ends only when stopped. Its
    /// pod-wide settings (resource limits, user namespace) are these, not an app's.
    pub sandbox: Option<Isolators>,
    /// The pod's own annotations and labels (`rkt app sandbox --annotation`, …).
    pub meta: PodMeta,
    /// `--cgroup-parent` of `rkt prepare`: where `rkt run-prepared` makes the pod's cgroup
    /// unless its own flag says otherwise.
    pub cgroup_parent: Option<CgroupParent>,
    /// `--port` of `rkt prepare` (`NAME:[HOSTIP:]HOSTPORT` or `[HOSTIP:]HOSTPORT:PODPORT`),
    /// as given and checked then: `rkt run-prepared` forwards them with its own.
    pub ports: Vec<String>,
}

impl From<App> for PodSpec {
    fn from(app: App) -> PodSpec {
        PodSpec {
            apps: vec![app],
            exit_policy: ExitPolicy::default(),
            volumes: Vec::new(),
            sandbox: None,
            meta: PodMeta::default(),
            cgroup_parent: None,
            ports: Vec::new(),
        }
    }
}

/// A pod's own annotations and labels, beside its apps' (`rkt app sandbox --annotation`,
/// `--user-annotation`, `--user-label`): shown by `rkt status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user_labels: BTreeMap<String, String>,
}

impl PodMeta {
    pub fn is_empty(&self) -> bool {
        self.annotations.is_empty()
            && self.user_annotations.is_empty()
            && self.user_labels.is_empty()
    }
}

/// When a pod of several apps ends (`--exit-policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ExitPolicy {
    /// rkt's behaviour: the pod runs until every app has exited, unless one fails (exits
    /// non-zero): then the others are stopped and the pod exits with the failed app's
    /// status.
    #[default]
    OnAnyFailure,
    /// The first app to exit, successfully or not, stops the others; the pod exits with
    /// its status.
    OnAny,
    /// The pod runs until every app has exited, whatever their statuses; it exits with the
    /// status of the first app that failed, or 0.
    UntilAll,
}

impl ExitPolicy {
    pub fn is_default(&self) -> bool {
        *self == ExitPolicy::default()
    }

    /// The name `--exit-policy` takes and `rkt status` shows.
    pub fn name(&self) -> &'static str {
        match self {
            ExitPolicy::OnAnyFailure => "onAnyFailure",
            ExitPolicy::OnAny => "onAny",
            ExitPolicy::UntilAll => "untilAll",
        }
    }
}

/// `<pod>/pod.json`. A manifest written before pods had several apps holds one `app`;
/// it reads as a pod of that one app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "ManifestFile")]
pub struct PodManifest {
    /// The pod's UUID (also its directory name).
    pub uuid: String,
    /// When the pod was created.
    pub created: Timestamp,
    /// The apps, in the order given on the command line (a sandbox's: in the order they
    /// were added); never empty but in a sandbox.
    pub apps: Vec<App>,
    #[serde(default, skip_serializing_if = "ExitPolicy::is_default")]
    pub exit_policy: ExitPolicy,
    /// `--volume`: the volumes the pod's apps may mount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// A sandbox's pod-wide settings (see [`PodSpec::sandbox`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Isolators>,
    /// The pod's own annotations and labels.
    #[serde(default, skip_serializing_if = "PodMeta::is_empty")]
    pub meta: PodMeta,
    /// `--cgroup-parent`, as given to `rkt prepare` or `rkt run` (see [`PodSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_parent: Option<CgroupParent>,
    /// `--port` of `rkt prepare` (see [`PodSpec::ports`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<String>,
}

impl PodManifest {
    /// The first app, whose settings are the pod's (see [`PodSpec::apps`]).
    pub fn first_app(&self) -> &App {
        &self.apps[0]
    }

    /// Whether the pod is a sandbox in the host's PID namespace.
    pub fn host_pid(&self) -> bool {
        self.sandbox.as_ref().is_some_and(|s| s.host_pid)
    }

    /// Whether the pod is a sandbox in the host's IPC namespace.
    pub fn host_ipc(&self) -> bool {
        self.sandbox.as_ref().is_some_and(|s| s.host_ipc)
    }
}

/// `pod.json` as read: `apps`, or the single `app` of an older rkt.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestFile {
    uuid: String,
    created: Timestamp,
    #[serde(default)]
    apps: Vec<App>,
    #[serde(default)]
    app: Option<App>,
    #[serde(default)]
    exit_policy: ExitPolicy,
    #[serde(default)]
    volumes: Vec<Volume>,
    #[serde(default)]
    sandbox: Option<Isolators>,
    #[serde(default)]
    meta: PodMeta,
    cgroup_parent: Option<CgroupParent>,
    #[serde(default)]
    ports: Vec<String>,
}

impl From<ManifestFile> for PodManifest {
    fn from(file: ManifestFile) -> PodManifest {
        let mut apps = file.apps;
        apps.extend(file.app);
        if apps.is_empty() && file.sandbox.is_none() {
            // Nothing to run; the stage reports that the pod has no command.
            apps.push(App::default());
        }
        PodManifest {
            uuid: file.uuid,
            created: file.created,
            apps,
            exit_policy: file.exit_policy,
            volumes: file.volumes,
            sandbox: file.sandbox,
            meta: file.meta,
            cgroup_parent: file.cgroup_parent,
            ports: file.ports,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_of_one_app_reads_as_a_pod_of_that_app() {
        let old = r#"{"uuid":"u","created":"2026-01-01T00:00:00Z","app":{"name":"a","exec":["/bin/true"]}}"#;
        let m: PodManifest = serde_json::from_str(old).unwrap();
        assert_eq!(m.apps.len(), 1);
        assert_eq!(m.first_app().name, "a");
        assert_eq!(m.exit_policy, ExitPolicy::OnAnyFailure);
        let again: PodManifest = serde_json::from_slice(&serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn default_name_is_the_base_name() {
        assert_eq!(App::default_name("/bin/sleep"), "sleep");
        assert_eq!(App::default_name("true"), "true");
        assert_eq!(App::default_name("/"), "app");
    }

    #[test]
    fn user_annotations_are_key_value_and_a_later_key_wins() {
        let given = ["a=1", "b=x=y", "a=2", "empty="].map(String::from);
        let map = parse_user_meta("user-annotation", &given).unwrap();
        let pairs: Vec<_> = map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(pairs, [("a", "2"), ("b", "x=y"), ("empty", "")]);
        for bad in ["novalue", "=v", "a b=c", "k=line\nbreak"] {
            let err = parse_user_meta("user-label", &[bad.to_string()]).unwrap_err();
            assert!(err.to_string().starts_with("--user-label="), "{err}");
        }
    }
}

/// The image an app runs from, as recorded in the pod manifest when the pod is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppImage {
    /// The image ID (`sha256:` of its config).
    pub id: String,
    /// The name it was given by (`docker.io/library/busybox:latest`, `oci:/path:tag`).
    pub name: String,
    /// The image store it is in (`<data dir>/images`).
    pub store: PathBuf,
    /// The image's `WorkingDir`: the app starts there (created when missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// The image's `User` (`uid[:gid]` or `name[:group]`), resolved in the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `--no-overlay`: unpack a copy of the image into the pod instead of an overlay mount.
    #[serde(default)]
    pub no_overlay: bool,
    /// Neither the image's Env nor `--set-env` sets `HOME`: the app gets its user's home
    /// directory from the pod's `/etc/passwd` (`/` for a user without one), as in Docker.
    #[serde(default)]
    pub home_from_user: bool,
    /// The image's `ExposedPorts` (`80/tcp`, `53/udp`), which `--port=80-tcp:HOSTPORT`
    /// forwards by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed_ports: Vec<String>,
}
