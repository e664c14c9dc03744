//! What the CRI knows of a pod sandbox or a container beyond what rkt keeps, and where it is
//! kept (all of it in the pod store, so that a restarted server finds it again):
//!
//! - a **pod sandbox** is an rkt sandbox whose manifest's `meta` holds the CRI's labels (as
//!   the pod's `user_labels`), its annotations (as `annotations`) and the CRI's own facts
//!   (`user_annotations` named `io.rkt.cri/…`: metadata name, uid, namespace, attempt, log
//!   directory, network mode). A pod without `io.rkt.cri/name` is not the CRI's (made by
//!   `rkt run` or `rkt app sandbox`) and is not listed.
//! - a **container** is an app of that sandbox, named `<metadata name>-<attempt>`, whose CRI
//!   facts (id, labels, annotations, image, log path, mounts) are a file of the CRI's own,
//!   `cri/<app>.json` in the pod's directory, written (atomically) before the app is added.
//!   A file whose app is gone (a server killed between the two) is ignored and overwritten.
//!
//! IDs: a sandbox's is its pod's UUID as 32 hex digits; a container's is its sandbox's
//! followed by 32 random hex digits, so the pod of a container is found from its ID alone.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use rkt::podstore::manifest::PodMeta;

const PREFIX: &str = "io.rkt.cri/";
const NAME: &str = "io.rkt.cri/name";
const UID: &str = "io.rkt.cri/uid";
const NAMESPACE: &str = "io.rkt.cri/namespace";
const ATTEMPT: &str = "io.rkt.cri/attempt";
const LOG_DIRECTORY: &str = "io.rkt.cri/log-directory";
const NETWORK: &str = "io.rkt.cri/network";
const RUNTIME_HANDLER: &str = "io.rkt.cri/runtime-handler";

/// A pod sandbox's CRI facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxMeta {
    pub name: String,
    pub uid: String,
    pub namespace: String,
    pub attempt: u32,
    pub log_directory: String,
    /// `host`, or the name of the CNI network it joined.
    pub network: String,
    pub runtime_handler: String,
    pub labels: HashMap<String, String>,
    pub annotations: HashMap<String, String>,
}

impl SandboxMeta {
    /// As the pod's manifest keeps it.
    pub fn to_pod_meta(&self) -> PodMeta {
        let own = [
            (NAME, self.name.clone()),
            (UID, self.uid.clone()),
            (NAMESPACE, self.namespace.clone()),
            (ATTEMPT, self.attempt.to_string()),
            (LOG_DIRECTORY, self.log_directory.clone()),
            (NETWORK, self.network.clone()),
            (RUNTIME_HANDLER, self.runtime_handler.clone()),
        ];
        PodMeta {
            annotations: self.annotations.clone().into_iter().collect(),
            user_annotations: own
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            user_labels: self.labels.clone().into_iter().collect(),
        }
    }

    /// The CRI facts of a pod's manifest; `None` when the pod is not the CRI's.
    pub fn from_pod_meta(meta: &PodMeta) -> Option<SandboxMeta> {
        let own = &meta.user_annotations;
        let get = |k: &str| own.get(k).cloned().unwrap_or_default();
        let name = own.get(NAME)?.clone();
        Some(SandboxMeta {
            name,
            uid: get(UID),
            namespace: get(NAMESPACE),
            attempt: get(ATTEMPT).parse().unwrap_or(0),
            log_directory: get(LOG_DIRECTORY),
            network: get(NETWORK),
            runtime_handler: get(RUNTIME_HANDLER),
            labels: meta.user_labels.clone().into_iter().collect(),
            annotations: meta
                .annotations
                .iter()
                .filter(|(k, _)| !k.starts_with(PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }
}

/// A container's CRI facts (`cri/<app>.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerMeta {
    pub id: String,
    pub name: String,
    pub attempt: u32,
    /// The image as the request named it.
    pub image: String,
    /// The stored image's ID (`sha256:…`).
    pub image_id: String,
    /// The image's digest reference (`repo@sha256:…`), when it has one.
    pub image_ref: String,
    /// Absolute path of the container's log.
    pub log_path: String,
    /// The request's log path (relative to the sandbox's log directory).
    pub log_path_given: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub mounts: Vec<MountMeta>,
    /// Creation time, in nanoseconds since the epoch.
    pub created_ns: i64,
}

/// A container's mount, as the request gave it (for ContainerStatus).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountMeta {
    pub container_path: String,
    pub host_path: String,
    pub readonly: bool,
    pub propagation: i32,
}

/// The app of a container named `name`, attempt `attempt`.
pub fn app_name(name: &str, attempt: u32) -> String {
    format!("{name}-{attempt}")
}

/// Where the CRI keeps its files in a pod's directory.
pub fn cri_dir(pod_dir: &Path) -> PathBuf {
    pod_dir.join("cri")
}

fn container_file(pod_dir: &Path, app: &str) -> PathBuf {
    cri_dir(pod_dir).join(format!("{app}.json"))
}

/// Writes app `app`'s facts, atomically.
pub fn write_container(pod_dir: &Path, app: &str, meta: &ContainerMeta) -> anyhow::Result<()> {
    let dir = cri_dir(pod_dir);
    std::fs::create_dir_all(&dir)?;
    let json = serde_json::to_vec(meta)?;
    let tmp = dir.join(format!(".{app}.json.tmp"));
    std::fs::write(&tmp, json)?;
    std::fs::rename(&tmp, container_file(pod_dir, app))?;
    Ok(())
}

/// App `app`'s facts, if it has some.
pub fn read_container(pod_dir: &Path, app: &str) -> Option<ContainerMeta> {
    let bytes = std::fs::read(container_file(pod_dir, app)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Removes app `app`'s facts.
pub fn remove_container(pod_dir: &Path, app: &str) {
    let _ = std::fs::remove_file(container_file(pod_dir, app));
}

/// A sandbox's ID: its pod's UUID without dashes.
pub fn sandbox_id(uuid: &str) -> String {
    uuid.replace('-', "")
}

/// The pod UUID (with dashes) a sandbox ID, or the start of a container ID, names; `None`
/// when it is no such ID.
pub fn pod_uuid(id: &str) -> Option<String> {
    let hex = id.get(..32)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// A new container ID in sandbox `sandbox_id`.
pub fn new_container_id(sandbox_id: &str) -> String {
    format!("{sandbox_id}{}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_facts_round_trip_through_the_manifest() {
        let meta = SandboxMeta {
            name: "web".into(),
            uid: "u1".into(),
            namespace: "ns".into(),
            attempt: 3,
            log_directory: "/var/log/pods/x".into(),
            network: "host".into(),
            runtime_handler: String::new(),
            labels: [("a".to_string(), "b".to_string())].into(),
            annotations: [("c".to_string(), "d".to_string())].into(),
        };
        let pod = meta.to_pod_meta();
        assert_eq!(pod.user_labels.get("a").map(String::as_str), Some("b"));
        assert_eq!(SandboxMeta::from_pod_meta(&pod), Some(meta));
        // Not the CRI's: no name.
        assert_eq!(SandboxMeta::from_pod_meta(&PodMeta::default()), None);
    }

    #[test]
    fn a_container_id_names_its_pod() {
        let uuid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
        let sandbox = sandbox_id(uuid);
        assert_eq!(sandbox.len(), 32);
        assert_eq!(pod_uuid(&sandbox).as_deref(), Some(uuid));
        let container = new_container_id(&sandbox);
        assert_eq!(container.len(), 64);
        assert_eq!(pod_uuid(&container).as_deref(), Some(uuid));
        assert_eq!(pod_uuid("short"), None);
        assert_eq!(pod_uuid(&"z".repeat(32)), None);
    }
}
