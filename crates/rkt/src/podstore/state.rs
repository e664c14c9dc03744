//! The pod's state record (`<pod>/state.json`), replaced atomically (temporary file, rename)
//! and only by the holder of the pod's exclusive lock. It is not fsynced: it describes
//! processes and a namespace that a machine crash ends anyway, while what teardown after a
//! reboot needs (`net-info.json` and the configuration copies) is written durably by
//! [`crate::networking::record`].
//!
//! States move forward only: `prepared` → `running` → `exited` → `garbage` (gc or rm marks a
//! pod garbage just before deleting it, or `gc --mark-only` instead of deleting it). `rkt run` creates its pod directly in `running`.

use std::fmt;
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::time::Timestamp;
use super::PodError;
use crate::fsutil::Durability;

/// The file name of the state record inside a pod directory.
pub const STATE_FILE: &str = "state.json";

/// A pod's life-cycle state as recorded on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Created by `rkt prepare`, waiting for `rkt run-prepared`.
    Prepared,
    /// A runner owns it (or owned it and died: see [`crate::pod::PodStatus`]).
    Running,
    /// The app exited and everything the pod set up is gone.
    Exited,
    /// Marked for deletion by gc or rm.
    Garbage,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Prepared => "prepared",
            State::Running => "running",
            State::Exited => "exited",
            State::Garbage => "garbage",
        })
    }
}

/// `<pod>/state.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodState {
    pub state: State,
    /// When the runner took the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Timestamp>,
    /// When the pod exited (or gc found its runner dead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited: Option<Timestamp>,
    /// When gc or rm marked the pod garbage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub garbage: Option<Timestamp>,
    /// Marked garbage by `rkt gc --mark-only` (not by a deletion whose release failed): a
    /// later gc deletes it only once it has been exited for the grace period.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub marked_only: bool,
    /// Host PID of the pod's init (PID 1 of its PID namespace) while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The host PID the pod's init had, kept after it exited so that `rkt status` shows
    /// `pid=` for exited pods as rkt did. Never signalled: [`PodState::pid`] is the live one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_pid: Option<i32>,
    /// The app's exit status (128 + signal number when a signal killed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// The network namespace bind mount, recorded before it is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<PathBuf>,
    /// The `--net` selection the pod ran with, as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<String>,
    /// The pod's hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The networks set up for the pod (kept after teardown, for status and list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<NetSummary>,
    /// Why the pod failed to start, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the app runs with (capabilities, seccomp, paths), settled when the runner takes
    /// the pod; the stage and `rkt enter` apply it. Absent (a pod from before isolation
    /// existed): the defaults. In a pod of several apps, the first app's; the pod-wide
    /// settings (resource limits, user namespace) are read from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<crate::isolation::Isolation>,
    /// A pod of several apps: one record per app, in the manifest's order. Empty for a
    /// pod of one app, whose record is the pod's own fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppRecord>,
    /// Where the pod's cgroup is in each hierarchy, recorded when the runner takes the pod,
    /// before the cgroup is made (so that gc finds it); the stage, `rkt enter`, release
    /// and gc use it. Absent (a pod of an older rkt): see [`PodState::pod_cgroup`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::isolation::cgroups::PodCgroup>,
}

/// One app of a pod of several apps, as its runner records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppRecord {
    pub name: String,
    /// What this app runs with (see [`PodState::isolation`]).
    pub isolation: crate::isolation::Isolation,
    /// The app's PID inside the pod's PID namespace while it runs (`rkt enter --app`
    /// finds its host PID among the init's children).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The app's exit status once it exited (128 + signal number when a signal killed
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// A sandbox's app: when it was added (`rkt app add`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Timestamp>,
    /// A sandbox's app: when it was last started (`rkt app start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<Timestamp>,
    /// A sandbox's app: when it last exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Timestamp>,
    /// A sandbox's app: the host PID of the process copying its streams into its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_copier: Option<i32>,
    /// A sandbox's app with limits of its own (`--memory`, `--cpu`): its cgroup, below the
    /// pod's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::isolation::cgroups::PodCgroup>,
}

/// What status and list show of one network: rkt's `net-info.json` fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetSummary {
    pub net_name: String,
    pub net_conf: String,
    pub plugin_path: String,
    pub if_name: String,
    pub ip: Option<IpAddr>,
    pub args: String,
    pub mask: Option<IpAddr>,
    /// Every address the network gave the pod (`ip` is one of them), when there are
    /// several (dual stack): IPv4 first, then IPv6, each in the result's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpAddr>,
}

impl NetSummary {
    /// rkt's short form: `name:ip4=ADDR` (`ip6=` for an IPv6 address, just `name` without
    /// an address); every address of a dual-stack network, comma-separated:
    /// `name:ip4=10.0.0.2,ip6=fd00::2`.
    pub fn short(&self) -> String {
        let ips = if self.ips.is_empty() {
            self.ip.as_slice()
        } else {
            &self.ips[..]
        };
        if ips.is_empty() {
            return self.net_name.clone();
        }
        let addrs: Vec<String> = ips
            .iter()
            .map(|ip| match ip {
                IpAddr::V4(ip) => format!("ip4={ip}"),
                IpAddr::V6(ip) => format!("ip6={ip}"),
            })
            .collect();
        format!("{}:{}", self.net_name, addrs.join(","))
    }
}

impl PodState {
    /// A fresh record in `state`, nothing else set.
    pub fn new(state: State) -> Self {
        PodState {
            state,
            started: None,
            exited: None,
            garbage: None,
            marked_only: false,
            pid: None,
            init_pid: None,
            exit_status: None,
            netns: None,
            net: None,
            hostname: None,
            networks: Vec::new(),
            error: None,
            isolation: None,
            apps: Vec::new(),
            cgroup: None,
        }
    }

    /// Where pod `uuid`'s cgroup is: as recorded, or, for a pod of an older rkt that
    /// recorded nothing, `rkt/<uuid>` below each hierarchy's root, where it made them.
    pub fn pod_cgroup(&self, uuid: &str) -> crate::isolation::cgroups::PodCgroup {
        self.cgroup
            .clone()
            .unwrap_or_else(|| crate::isolation::cgroups::PodCgroup::legacy(uuid))
    }

    /// What app `index` of the pod runs with: its record's in a pod of several apps, else
    /// the pod's (the defaults for a pod from before isolation existed).
    pub fn app_isolation(&self, index: usize) -> crate::isolation::Isolation {
        let pod = self.isolation.clone().unwrap_or_default();
        match self.apps.get(index) {
            // The user namespace's range is the pod's, for every app.
            Some(app) => crate::isolation::Isolation {
                user_ns: pod.user_ns,
                ..app.isolation.clone()
            },
            None => pod,
        }
    }

    /// App `index`'s exit status, once it exited.
    pub fn app_exit_status(&self, index: usize) -> Option<i32> {
        match self.apps.get(index) {
            Some(app) => app.exit_status,
            None if self.apps.is_empty() && index == 0 => self.exit_status,
            None => None,
        }
    }

    /// Reads `<dir>/state.json`.
    pub fn load(dir: &Path) -> Result<Self, PodError> {
        let path = dir.join(STATE_FILE);
        let bytes = fs::read(&path).map_err(|source| PodError::Io {
            what: "read pod state",
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|source| PodError::Corrupt { path, source })
    }

    /// Reads `<dir>/state.json` for gc or rm, which hold the pod's exclusive lock, so its
    /// runner is gone. Readers never see a partial file (every write replaces it whole),
    /// but it is not fsynced, and a machine crash can leave it empty or filled with
    /// garbage: such a pod then reads as `running` in its own namespace (`netns`), with
    /// nothing else known, so that gc releases what the durable network record names and
    /// deletes the pod instead of failing on it at every run.
    pub fn load_for_cleanup(dir: &Path, netns: PathBuf) -> Result<Self, PodError> {
        match Self::load(dir) {
            Err(PodError::Corrupt { .. }) => Ok(PodState {
                netns: Some(netns),
                ..PodState::new(State::Running)
            }),
            other => other,
        }
    }

    /// Atomically replaces `<dir>/state.json`. The caller holds the pod's exclusive lock.
    pub fn store(&self, dir: &Path) -> Result<(), PodError> {
        write_atomic(dir, STATE_FILE, &self.to_bytes())
    }

    /// The file's content.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a pod state always serializes")
    }
}

/// Writes `dir/name` so that readers see either the old or the new content, never a mix,
/// with mode 0600 and without fsync (see [`crate::fsutil::replace`], [`Durability::Rename`]).
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), PodError> {
    Ok(crate::fsutil::replace(
        &dir.join(name),
        bytes,
        0o600,
        Durability::Rename,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_short_form_shows_every_address_of_a_dual_stack_network() {
        let mut n = NetSummary {
            net_name: "ds".into(),
            net_conf: "net/10-ds.conflist".into(),
            plugin_path: "/usr/lib/cni/ptp".into(),
            if_name: "eth0".into(),
            ip: None,
            args: String::new(),
            mask: None,
            ips: Vec::new(),
        };
        assert_eq!(n.short(), "ds");
        n.ip = Some("10.0.0.2".parse().unwrap());
        assert_eq!(n.short(), "ds:ip4=10.0.0.2");
        n.ip = Some("fd00::2".parse().unwrap());
        assert_eq!(n.short(), "ds:ip6=fd00::2");
        n.ips = vec!["10.0.0.2".parse().unwrap(), "fd00::2".parse().unwrap()];
        assert_eq!(n.short(), "ds:ip4=10.0.0.2,ip6=fd00::2");
        // Records written before `ips` existed, and single-address ones, have none.
        let old: NetSummary = serde_json::from_str(
            r#"{"netName":"ds","netConf":"c","pluginPath":"p","ifName":"eth0","ip":"10.0.0.2","args":"","mask":null}"#,
        )
        .unwrap();
        assert_eq!(old.short(), "ds:ip4=10.0.0.2");
        assert!(!serde_json::to_string(&old).unwrap().contains("ips"));
    }

    #[test]
    fn store_then_load_round_trips_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut st = PodState::new(State::Running);
        st.pid = Some(42);
        st.netns = Some(PathBuf::from("/run/netns/rkt-x"));
        st.store(dir.path()).unwrap();
        assert_eq!(PodState::load(dir.path()).unwrap(), st);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![STATE_FILE.to_string()]);
        let mode = fs::metadata(dir.path().join(STATE_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn corrupt_state_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(STATE_FILE), b"{\"state\":").unwrap();
        let err = PodState::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("state.json"), "{err}");
    }

    #[test]
    fn a_state_a_machine_crash_left_empty_or_corrupt_is_released_as_running() {
        let dir = tempfile::tempdir().unwrap();
        let netns = PathBuf::from("/run/netns/rkt-x");
        for bytes in [&b""[..], b"{\"state\":\"runn\0\0\0\0", b"\0\0\0\0"] {
            fs::write(dir.path().join(STATE_FILE), bytes).unwrap();
            assert!(matches!(
                PodState::load(dir.path()),
                Err(PodError::Corrupt { .. })
            ));
            let st = PodState::load_for_cleanup(dir.path(), netns.clone()).unwrap();
            assert_eq!(st.state, State::Running);
            assert_eq!(st.netns.as_deref(), Some(netns.as_path()));
        }
    }

    #[test]
    fn a_record_without_a_cgroup_place_is_an_older_rkts_at_rkt_uuid() {
        let old: PodState = serde_json::from_str(r#"{"state":"running","pid":7}"#).unwrap();
        assert_eq!(old.cgroup, None);
        let place = old.pod_cgroup("u1");
        assert!(place.legacy);
        assert_eq!(place.paths["pids"], "/rkt/u1");
        let mut new = PodState::new(State::Running);
        new.cgroup = Some(crate::isolation::cgroups::PodCgroup {
            paths: [("pids".to_string(), "/kube/p/rkt-u1".to_string())].into(),
            legacy: false,
        });
        let back: PodState = serde_json::from_slice(&new.to_bytes()).unwrap();
        assert_eq!(back.pod_cgroup("u1"), new.cgroup.unwrap());
    }

    #[test]
    fn states_serialize_lowercase() {
        assert_eq!(
            serde_json::to_string(&State::Garbage).unwrap(),
            "\"garbage\""
        );
        assert_eq!(State::Prepared.to_string(), "prepared");
    }
}
