//! The attachment cache: what was added, so it can be checked, deleted and garbage
//! collected later (libcni `cachedInfo`).
//!
//! The layout is libcni's, so its tools and ours read each other's entries: one file per
//! attachment at `<cache_dir>/results/<network>-<containerID>-<ifname>`, holding
//! `{"kind":"cniCacheV1","containerId","config","ifName","networkName","netns","cniArgs",
//! "capabilityArgs","result"}` where `config` is the base64 of the network list's bytes and
//! empty fields are left out as Go's `omitempty` does. Directories are created `0700`,
//! files `0600`.
//!
//! Unlike libcni, entries are written atomically: a hidden temporary file in the same
//! directory, fsynced, renamed over the entry, and the directory fsynced. Hidden files
//! (names starting with `.`) are never entries.
//!
//! Serialising operations on one container is the caller's job (the CNI spec forbids
//! parallel operations on a container); the cache itself only guarantees that a reader sees
//! either the old or the new entry.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `kind` of entries this module reads and writes.
pub const CACHE_KIND: &str = "cniCacheV1";

/// The sub-directory of the cache dir that holds the entries.
pub const RESULTS_DIR: &str = "results";

/// One cached attachment of a network list to a container interface.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedAttachment {
    /// `CNI_CONTAINERID` of the ADD.
    pub container_id: String,
    /// The network list's name.
    pub network: String,
    /// `CNI_IFNAME` of the ADD.
    pub ifname: String,
    /// The bytes of the network list as it was when added.
    pub config: Vec<u8>,
    /// `CNI_NETNS` of the ADD, if it had one.
    pub netns: Option<PathBuf>,
    /// `CNI_ARGS` of the ADD, in order.
    pub cni_args: Vec<(String, String)>,
    /// The runtime's capability arguments of the ADD (before per-plugin filtering).
    pub capability_args: Map<String, Value>,
    /// The final result of the ADD, in the version it was returned in.
    pub result: Option<Value>,
}

/// Reading or writing the cache failed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A name would not make a safe file name in the results directory.
    #[error("cannot name a cache entry for network {network:?}, container {container_id:?}, interface {ifname:?}: {reason}")]
    InvalidKey {
        /// The network.
        network: String,
        /// The container ID.
        container_id: String,
        /// The interface name.
        ifname: String,
        /// Why not.
        reason: &'static str,
    },
    /// A file operation on the cache failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done (`reading`, `writing`, ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// An entry is not valid JSON.
    #[error("cache entry {} is not valid JSON", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

impl CacheError {
    /// The file or directory the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            CacheError::InvalidKey { .. } => None,
            CacheError::Io { path, .. } | CacheError::Decode { path, .. } => Some(path),
        }
    }
}

/// The on-disk form, field for field libcni's `cachedInfo`.
#[derive(Serialize, Deserialize)]
struct Wire {
    kind: String,
    #[serde(rename = "containerId", default)]
    container_id: String,
    #[serde(default, with = "go_bytes")]
    config: Vec<u8>,
    #[serde(rename = "ifName", default)]
    if_name: String,
    #[serde(rename = "networkName", default)]
    network_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    netns: String,
    #[serde(rename = "cniArgs", default, skip_serializing_if = "is_none_or_empty")]
    cni_args: Option<Vec<(String, String)>>,
    #[serde(
        rename = "capabilityArgs",
        default,
        skip_serializing_if = "is_none_or_empty_map"
    )]
    capability_args: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
}

fn is_none_or_empty(v: &Option<Vec<(String, String)>>) -> bool {
    v.as_ref().is_none_or(Vec::is_empty)
}

fn is_none_or_empty_map(v: &Option<Map<String, Value>>) -> bool {
    v.as_ref().is_none_or(Map::is_empty)
}

/// Go marshals `[]byte` as standard base64 and a nil slice as `null`.
mod go_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(Vec::new()),
            Some(s) => base64::engine::general_purpose::STANDARD
                .decode(s.as_bytes())
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The cache rooted at a cache directory (libcni's default is `/var/lib/cni`).
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache in `dir` (entries live in `<dir>/results`).
    pub fn new(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    /// The cache directory this cache lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<cache_dir>/results`.
    pub fn results_dir(&self) -> PathBuf {
        self.dir.join(RESULTS_DIR)
    }

    /// The entry file of one attachment. All three names must be non-empty and free of
    /// path separators.
    pub fn entry_path(
        &self,
        network: &str,
        container_id: &str,
        ifname: &str,
    ) -> Result<PathBuf, CacheError> {
        let bad = |reason| CacheError::InvalidKey {
            network: network.to_owned(),
            container_id: container_id.to_owned(),
            ifname: ifname.to_owned(),
            reason,
        };
        if network.is_empty() || container_id.is_empty() || ifname.is_empty() {
            return Err(bad(
                "network, container ID and interface name must all be set",
            ));
        }
        if [network, container_id, ifname]
            .iter()
            .any(|s| s.contains('/') || s.contains('\0'))
        {
            return Err(bad("names must not contain '/' or NUL"));
        }
        if network.starts_with('.') {
            return Err(bad("the network name must not start with '.'"));
        }
        Ok(self
            .results_dir()
            .join(format!("{network}-{container_id}-{ifname}")))
    }

    /// Writes `entry` atomically, replacing any previous entry for the same attachment.
    /// Returns the entry's path.
    pub fn save(&self, entry: &CachedAttachment) -> Result<PathBuf, CacheError> {
        let path = self.entry_path(&entry.network, &entry.container_id, &entry.ifname)?;
        let wire = Wire {
            kind: CACHE_KIND.to_owned(),
            container_id: entry.container_id.clone(),
            config: entry.config.clone(),
            if_name: entry.ifname.clone(),
            network_name: entry.network.clone(),
            netns: entry
                .netns
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            cni_args: Some(entry.cni_args.clone()),
            capability_args: Some(entry.capability_args.clone()),
            result: entry.result.clone(),
        };
        let bytes = serde_json::to_vec(&wire).map_err(|source| CacheError::Decode {
            path: path.clone(),
            source,
        })?;
        let dir = self.results_dir();
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|source| CacheError::Io {
                op: "creating cache directory",
                path: dir.clone(),
                source,
            })?;
        write_atomically(&path, &bytes)?;
        Ok(path)
    }

    /// Reads the entry of one attachment; `None` when there is none.
    ///
    /// A file that is a bare result rather than a `cniCacheV1` entry (what libcni wrote
    /// before 0.7) is returned with only `result` set, as libcni does.
    pub fn load(
        &self,
        network: &str,
        container_id: &str,
        ifname: &str,
    ) -> Result<Option<CachedAttachment>, CacheError> {
        let path = self.entry_path(network, container_id, ifname)?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(CacheError::Io {
                    op: "reading cache entry",
                    path,
                    source,
                })
            }
        };
        match decode(&bytes) {
            Ok(Some(entry)) => Ok(Some(entry)),
            Ok(None) | Err(_) => {
                let value: Value = serde_json::from_slice(&bytes)
                    .map_err(|source| CacheError::Decode { path, source })?;
                Ok(Some(CachedAttachment {
                    container_id: container_id.to_owned(),
                    network: network.to_owned(),
                    ifname: ifname.to_owned(),
                    config: Vec::new(),
                    netns: None,
                    cni_args: Vec::new(),
                    capability_args: Map::new(),
                    result: Some(value),
                }))
            }
        }
    }

    /// Removes the entry of one attachment. Returns whether there was one.
    pub fn remove(
        &self,
        network: &str,
        container_id: &str,
        ifname: &str,
    ) -> Result<bool, CacheError> {
        let path = self.entry_path(network, container_id, ifname)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(CacheError::Io {
                op: "removing cache entry",
                path,
                source,
            }),
        }
    }

    /// Every readable `cniCacheV1` entry, sorted by file name, optionally only those of one
    /// container. Unreadable or foreign files are skipped, as libcni does; a missing results
    /// directory means no entries.
    pub fn list(&self, container_id: Option<&str>) -> Result<Vec<CachedAttachment>, CacheError> {
        let dir = self.results_dir();
        let read_dir = match std::fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(CacheError::Io {
                    op: "listing cache directory",
                    path: dir,
                    source,
                })
            }
        };
        let mut names: Vec<String> = read_dir
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if let Some(cid) = container_id {
                if !name.contains(&format!("-{cid}-")) {
                    continue;
                }
            }
            let Ok(bytes) = std::fs::read(dir.join(&name)) else {
                continue;
            };
            let Ok(Some(entry)) = decode(&bytes) else {
                continue;
            };
            if container_id.is_some_and(|cid| cid != entry.container_id) {
                continue;
            }
            if entry.ifname.is_empty() || entry.network.is_empty() {
                continue;
            }
            out.push(entry);
        }
        Ok(out)
    }
}

/// Decodes a `cniCacheV1` entry; `Ok(None)` for JSON of another kind.
fn decode(bytes: &[u8]) -> Result<Option<CachedAttachment>, serde_json::Error> {
    let wire: Wire = serde_json::from_slice(bytes)?;
    if wire.kind != CACHE_KIND {
        return Ok(None);
    }
    Ok(Some(CachedAttachment {
        container_id: wire.container_id,
        network: wire.network_name,
        ifname: wire.if_name,
        config: wire.config,
        netns: (!wire.netns.is_empty()).then(|| PathBuf::from(wire.netns)),
        cni_args: wire.cni_args.unwrap_or_default(),
        capability_args: wire.capability_args.unwrap_or_default(),
        result: wire.result.filter(|v| !v.is_null()),
    }))
}

/// Writes `bytes` to `path` through a hidden temporary file in the same directory, with
/// mode 0600, fsync, rename and a directory fsync.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let io = |op, path: &Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Io { op, path, source }
    };
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io("creating temporary cache file", &tmp))?;
        f.write_all(bytes)
            .map_err(io("writing temporary cache file", &tmp))?;
        f.sync_all()
            .map_err(io("syncing temporary cache file", &tmp))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io("renaming temporary cache file over", path))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing cache directory", dir))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Encodes bytes as libcni stores `config` (standard base64).
pub fn encode_config(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entry() -> CachedAttachment {
        CachedAttachment {
            container_id: "c1".into(),
            network: "net".into(),
            ifname: "eth0".into(),
            config: br#"{"name":"net"}"#.to_vec(),
            netns: Some("/run/netns/x".into()),
            cni_args: vec![("IP".into(), "10.0.0.2".into())],
            capability_args: serde_json::from_str(r#"{"mac":"aa"}"#).unwrap(),
            result: Some(serde_json::json!({"cniVersion": "1.0.0"})),
        }
    }

    #[test]
    fn save_load_round_trip_with_libcni_field_names_and_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path().join("cache"));
        let path = cache.save(&entry()).unwrap();
        assert_eq!(path, tmp.path().join("cache/results/net-c1-eth0"));
        let raw: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let keys: Vec<&str> = raw
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "kind",
                "containerId",
                "config",
                "ifName",
                "networkName",
                "netns",
                "cniArgs",
                "capabilityArgs",
                "result"
            ]
        );
        assert_eq!(raw["config"], encode_config(br#"{"name":"net"}"#));
        assert_eq!(raw["cniArgs"], serde_json::json!([["IP", "10.0.0.2"]]));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&cache.results_dir()), 0o700);
        assert_eq!(mode(&tmp.path().join("cache")), 0o700);
        assert_eq!(cache.load("net", "c1", "eth0").unwrap(), Some(entry()));
        assert_eq!(cache.list(None).unwrap(), vec![entry()]);
    }

    #[test]
    fn empty_fields_are_omitted_like_go() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let mut e = entry();
        e.netns = None;
        e.cni_args.clear();
        e.capability_args.clear();
        e.result = None;
        let path = cache.save(&e).unwrap();
        let raw: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        for k in ["netns", "cniArgs", "capabilityArgs", "result"] {
            assert!(raw.get(k).is_none(), "{k} should be omitted: {raw}");
        }
        assert_eq!(cache.load("net", "c1", "eth0").unwrap(), Some(e));
    }

    #[test]
    fn reads_entries_written_by_go_with_nulls() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        std::fs::create_dir_all(cache.results_dir()).unwrap();
        std::fs::write(
            cache.results_dir().join("n-cid-eth1"),
            r#"{"kind":"cniCacheV1","containerId":"cid","config":"e30=","ifName":"eth1","networkName":"n","cniArgs":null,"capabilityArgs":null,"result":{"cniVersion":"0.4.0"}}"#,
        )
        .unwrap();
        let e = cache.load("n", "cid", "eth1").unwrap().unwrap();
        assert_eq!(e.config, b"{}");
        assert!(e.cni_args.is_empty() && e.capability_args.is_empty());
        assert_eq!(e.result.unwrap()["cniVersion"], "0.4.0");
    }

    #[test]
    fn legacy_bare_result_is_loaded_but_not_listed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        std::fs::create_dir_all(cache.results_dir()).unwrap();
        std::fs::write(
            cache.results_dir().join("n-cid-eth0"),
            r#"{"cniVersion":"0.3.1","ips":[]}"#,
        )
        .unwrap();
        let e = cache.load("n", "cid", "eth0").unwrap().unwrap();
        assert_eq!(e.result.unwrap()["cniVersion"], "0.3.1");
        assert!(cache.list(None).unwrap().is_empty());
    }

    #[test]
    fn list_filters_by_container_and_skips_junk_and_temp_files() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        assert!(cache.list(None).unwrap().is_empty(), "no results dir yet");
        let mut a = entry();
        cache.save(&a).unwrap();
        a.container_id = "c2".into();
        cache.save(&a).unwrap();
        a.network = "other".into();
        cache.save(&a).unwrap();
        std::fs::write(cache.results_dir().join("garbage"), "not json").unwrap();
        std::fs::write(
            cache.results_dir().join(".net-c9-eth0.tmp-1-1"),
            serde_json::to_vec(&serde_json::json!({"kind":"cniCacheV1","containerId":"c9","ifName":"eth0","networkName":"net"})).unwrap(),
        )
        .unwrap();
        let all = cache.list(None).unwrap();
        let keys: Vec<(String, String)> = all
            .iter()
            .map(|e| (e.network.clone(), e.container_id.clone()))
            .collect();
        assert_eq!(
            keys,
            [
                ("net".into(), "c1".into()),
                ("net".into(), "c2".into()),
                ("other".into(), "c2".into())
            ]
        );
        assert_eq!(cache.list(Some("c2")).unwrap().len(), 2);
        assert_eq!(cache.list(Some("c1")).unwrap().len(), 1);
        assert!(cache.list(Some("c")).unwrap().is_empty());
    }

    #[test]
    fn save_replaces_and_leaves_no_temp_files() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let mut e = entry();
        cache.save(&e).unwrap();
        e.result = Some(serde_json::json!({"cniVersion": "1.1.0"}));
        cache.save(&e).unwrap();
        let names: Vec<_> = std::fs::read_dir(cache.results_dir())
            .unwrap()
            .map(|d| d.unwrap().file_name())
            .collect();
        assert_eq!(names, ["net-c1-eth0"]);
        assert_eq!(cache.load("net", "c1", "eth0").unwrap(), Some(e));
        assert!(cache.remove("net", "c1", "eth0").unwrap());
        assert!(!cache.remove("net", "c1", "eth0").unwrap());
        assert_eq!(cache.load("net", "c1", "eth0").unwrap(), None);
    }

    #[test]
    fn unsafe_keys_are_refused() {
        let cache = Cache::new("/nonexistent");
        for (n, c, i) in [
            ("", "c", "i"),
            ("n", "", "i"),
            ("n", "c", ""),
            ("n", "../x", "i"),
            (".n", "c", "i"),
        ] {
            assert!(
                matches!(
                    cache.entry_path(n, c, i),
                    Err(CacheError::InvalidKey { .. })
                ),
                "{n:?} {c:?} {i:?}"
            );
        }
    }
}
