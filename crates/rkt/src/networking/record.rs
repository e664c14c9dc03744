//! The pod's network record: `<pod>/net-info.json` and the configuration copies under
//! `<pod>/net/`.
//!
//! The record holds everything teardown needs, so teardown works after the configuration
//! directory, the plugin directories or the flags changed: per network the exact
//! configuration used (a copy, referenced pod-relative like rkt's `net/99-default.conf`),
//! the plugin search path, the CNI cache directory, the interface name, the CNI arguments,
//! and, once ADD succeeded, the result and the address. rkt's fields (`netName`, `netConf`,
//! `pluginPath`, `ifName`, `ip`, `args`, `mask`) keep their names and meaning.
//!
//! Every write is atomic (temp file, fsync, rename) and, where a machine crash must not lose
//! it, durable (fsync of the directory too: [`save`], the copies), and an entry is written
//! *before* its ADD, so a crash in the middle of setup leaves a record that `gc` can tear
//! down, also after a reboot.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::firewall::ports::{self, PortMapping};
use crate::fsutil::Durability;
use crate::podstore::state::NetSummary;

/// The record's file name inside the pod directory.
pub const FILE: &str = "net-info.json";
/// The directory (inside the pod directory) holding the configuration copies.
pub const CONF_DIR: &str = "net";

/// Reading or writing the record failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid network record")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A `netConf` that would leave the pod's `net/` directory.
    #[error("network {net:?} in {path}: configuration copy {conf:?} is not inside {CONF_DIR}/")]
    BadConfPath {
        path: PathBuf,
        net: String,
        conf: String,
    },
}

impl From<crate::fsutil::WriteError> for RecordError {
    fn from(e: crate::fsutil::WriteError) -> Self {
        RecordError::Io {
            action: e.action,
            path: e.path,
            source: e.source,
        }
    }
}

/// One network of a pod, as recorded at setup (one element of `net-info.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetInfo {
    /// The network's name.
    pub net_name: String,
    /// The configuration copy, relative to the pod directory (`net/<file>`).
    pub net_conf: String,
    /// The binary of the network's first (main) plugin that was found when setting up, or
    /// the plugin type when it was not found.
    pub plugin_path: String,
    /// The interface inside the pod (`eth0`, `eth1`, …).
    pub if_name: String,
    /// The pod's address on this network (IPv4 preferred), once ADD succeeded.
    pub ip: Option<IpAddr>,
    /// The CNI arguments as given after `name:` in `--net`.
    pub args: String,
    /// The netmask of `ip`, in address form (`255.255.255.0`) like rkt.
    pub mask: Option<IpAddr>,
    /// The plugin search path used (CNI_PATH).
    #[serde(default)]
    pub plugin_dirs: Vec<PathBuf>,
    /// The CNI cache directory used.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// The configuration's `cniVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_version: Option<String>,
    /// CNI capability arguments passed to the plugins (e.g. `portMappings`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub capability_args: serde_json::Map<String, serde_json::Value>,
    /// The ADD result, as the plugins returned it (absent until ADD succeeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

impl NetInfo {
    /// The pod's IPv4 address on this network, if it has one.
    pub fn ip4(&self) -> Option<Ipv4Addr> {
        match self.ip {
            Some(IpAddr::V4(ip)) => Some(ip),
            _ => None,
        }
    }

    /// The path of the configuration copy inside `pod_dir`, checked to stay in `net/`.
    pub fn conf_path(&self, pod_dir: &Path) -> Result<PathBuf, RecordError> {
        let rel = Path::new(&self.net_conf);
        let mut comps = rel.components();
        let ok = comps.next() == Some(Component::Normal(CONF_DIR.as_ref()))
            && matches!(comps.next(), Some(Component::Normal(_)))
            && comps.next().is_none();
        if !ok {
            return Err(RecordError::BadConfPath {
                path: record_path(pod_dir),
                net: self.net_name.clone(),
                conf: self.net_conf.clone(),
            });
        }
        Ok(pod_dir.join(rel))
    }
}

/// The networks as `rkt list` and `rkt status` show them: `name:ip4=ADDR` (just `name` for a
/// network without an IPv4 address), joined with `", "`.
pub fn summary(nets: &[NetInfo]) -> String {
    nets.iter()
        .map(|n| match n.ip4() {
            Some(ip) => format!("{}:ip4={ip}", n.net_name),
            None => n.net_name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every address in a recorded result when it has several (a dual-stack network), IPv4
/// first, then IPv6, each in the result's order; empty for one address or none.
pub fn result_ips(result: &serde_json::Value) -> Vec<IpAddr> {
    let version = result
        .get("cniVersion")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
        .to_string();
    let Ok(parsed) = cni::result::CniResult::from_value(result.clone(), &version) else {
        return Vec::new();
    };
    let ips: Vec<IpAddr> = parsed.current().ips.iter().filter_map(|c| c.ip()).collect();
    if ips.len() < 2 {
        return Vec::new();
    }
    let (mut v4, v6): (Vec<IpAddr>, Vec<IpAddr>) = ips.into_iter().partition(IpAddr::is_ipv4);
    v4.extend(v6);
    v4
}

/// The ports the recorded networks forward (their `portMappings` capability arguments),
/// each once, in record order.
pub fn forwarded_ports(nets: &[NetInfo]) -> Vec<PortMapping> {
    ports::recorded(nets.iter().map(|n| &n.capability_args))
}

/// What the pod's state keeps of a network for `status` and `list` once its record is gone.
impl From<&NetInfo> for NetSummary {
    fn from(n: &NetInfo) -> Self {
        NetSummary {
            net_name: n.net_name.clone(),
            net_conf: n.net_conf.clone(),
            plugin_path: n.plugin_path.clone(),
            if_name: n.if_name.clone(),
            ip: n.ip,
            args: n.args.clone(),
            mask: n.mask,
            ips: n.result.as_ref().map(result_ips).unwrap_or_default(),
        }
    }
}

/// `<pod>/net-info.json`.
pub fn record_path(pod_dir: &Path) -> PathBuf {
    pod_dir.join(FILE)
}

/// The recorded networks, in setup order; a pod without a record has none.
pub fn load(pod_dir: &Path) -> Result<Vec<NetInfo>, RecordError> {
    let path = record_path(pod_dir);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RecordError::Io {
                action: "read",
                path,
                source,
            })
        }
    };
    serde_json::from_slice(&bytes).map_err(|source| RecordError::Parse { path, source })
}

/// Replaces the record with `nets`, atomically and durably: after a machine crash the
/// record names these networks. For a record that names a network about to be set up.
pub fn save(pod_dir: &Path, nets: &[NetInfo]) -> Result<(), RecordError> {
    write_record(pod_dir, nets, Durability::Directory)
}

/// Replaces the record with `nets`, atomically, where a machine crash may bring back the
/// previous record instead, because that one is just as good for teardown: after an ADD
/// (the previous record names the same networks and copies, without the result). Saves
/// the directory's fsync; the file's content is still fsynced, so whichever record
/// survives is complete.
pub fn update(pod_dir: &Path, nets: &[NetInfo]) -> Result<(), RecordError> {
    write_record(pod_dir, nets, Durability::File)
}

fn write_record(
    pod_dir: &Path,
    nets: &[NetInfo],
    durability: Durability,
) -> Result<(), RecordError> {
    let mut bytes = serde_json::to_vec_pretty(nets).expect("NetInfo serializes");
    bytes.push(b'\n');
    Ok(crate::fsutil::replace(
        &record_path(pod_dir),
        &bytes,
        0o600,
        durability,
    )?)
}

/// Removes the record file (a missing one is fine). The configuration copies in `net/` stay
/// until the pod directory goes (gc, rm): removed here, a machine crash could bring back
/// the record without them, which no later teardown could DEL, unless the pod directory
/// were fsynced in between.
pub fn remove(pod_dir: &Path) -> Result<(), RecordError> {
    let path = record_path(pod_dir);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RecordError::Io {
            action: "remove",
            path,
            source,
        }),
    }
}

/// Saves a configuration copy as `<pod>/net/<file_name>` (or, if that name is taken by
/// another entry in `taken`, a numbered variant) and returns its pod-relative path.
pub fn save_conf(
    pod_dir: &Path,
    file_name: &str,
    bytes: &[u8],
    taken: &[NetInfo],
) -> Result<String, RecordError> {
    let mut rel = format!("{CONF_DIR}/{file_name}");
    let mut n = 1;
    while taken.iter().any(|t| t.net_conf == rel) {
        rel = format!("{CONF_DIR}/{n}-{file_name}");
        n += 1;
    }
    write_atomic(&pod_dir.join(&rel), bytes)?;
    Ok(rel)
}

/// Reads the configuration copy of `net`.
pub fn read_conf(pod_dir: &Path, net: &NetInfo) -> Result<Vec<u8>, RecordError> {
    let path = net.conf_path(pod_dir)?;
    fs::read(&path).map_err(|source| RecordError::Io {
        action: "read",
        path,
        source,
    })
}

/// Removes the configuration copy of `net` (a missing one is fine).
pub fn remove_conf(pod_dir: &Path, net: &NetInfo) -> Result<(), RecordError> {
    let path = net.conf_path(pod_dir)?;
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RecordError::Io {
            action: "remove",
            path,
            source,
        }),
    }
}

/// Writes `bytes` to `path` durably: teardown after a crash or reboot depends on it.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RecordError> {
    Ok(crate::fsutil::replace(
        path,
        bytes,
        0o600,
        Durability::Directory,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_of_a_dual_stack_result_ipv4_first() {
        let v = serde_json::json!({"cniVersion":"1.0.0","ips":[
            {"address":"fd00::5/64"},{"address":"10.1.0.5/24"},{"address":"fd00::6/64"}]});
        let want: Vec<IpAddr> = ["10.1.0.5", "fd00::5", "fd00::6"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(result_ips(&v), want);
        let v = serde_json::json!({"cniVersion":"0.4.0","ips":[
            {"version":"4","address":"10.1.0.5/24"},{"version":"6","address":"fd00::5/64"}]});
        assert_eq!(result_ips(&v).len(), 2);
        let one = serde_json::json!({"cniVersion":"1.0.0","ips":[{"address":"10.1.0.5/24"}]});
        assert!(result_ips(&one).is_empty());
        assert!(result_ips(&serde_json::json!({"cniVersion":"1.0.0"})).is_empty());
    }

    fn entry(name: &str, conf: &str) -> NetInfo {
        NetInfo {
            net_name: name.into(),
            net_conf: conf.into(),
            plugin_path: "/usr/lib/cni/ptp".into(),
            if_name: "eth0".into(),
            ip: Some("172.16.28.5".parse().unwrap()),
            args: "IP=172.16.28.5".into(),
            mask: Some("255.255.255.0".parse().unwrap()),
            plugin_dirs: vec!["/usr/lib/cni".into()],
            cache_dir: Some("/var/lib/cni".into()),
            cni_version: Some("1.0.0".into()),
            capability_args: Default::default(),
            result: Some(serde_json::json!({"cniVersion": "1.0.0", "ips": []})),
        }
    }

    #[test]
    fn round_trip_and_rkt_field_names() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), vec![]);
        let nets = vec![
            entry("default", "net/99-default.conflist"),
            entry("lan", "net/10-lan.conf"),
        ];
        save(dir.path(), &nets).unwrap();
        assert_eq!(load(dir.path()).unwrap(), nets);
        let v: serde_json::Value =
            serde_json::from_slice(&fs::read(record_path(dir.path())).unwrap()).unwrap();
        let first = v[0].as_object().unwrap();
        for key in [
            "netName",
            "netConf",
            "pluginPath",
            "ifName",
            "ip",
            "args",
            "mask",
        ] {
            assert!(first.contains_key(key), "{key} missing in {v}");
        }
        assert_eq!(first["ip"], "172.16.28.5");
        assert_eq!(first["mask"], "255.255.255.0");
        assert_eq!(nets[0].ip4(), Some(Ipv4Addr::new(172, 16, 28, 5)));
        update(dir.path(), &nets[1..]).unwrap();
        assert_eq!(load(dir.path()).unwrap(), &nets[1..]);
    }

    #[test]
    fn summary_is_rkt_list_style() {
        let mut b = entry("lan", "net/10-lan.conf");
        b.ip = Some("fd00::5".parse().unwrap());
        assert_eq!(
            summary(&[entry("default", "net/99-default.conflist"), b]),
            "default:ip4=172.16.28.5, lan"
        );
        assert_eq!(summary(&[]), "");
    }

    #[test]
    fn reads_rkt_style_record_without_our_extra_fields() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            record_path(dir.path()),
            r#"[{"netName":"default","netConf":"net/99-default.conf","pluginPath":"ptp",
                "ifName":"eth0","ip":"172.16.28.2","args":"","mask":"255.255.255.0"}]"#,
        )
        .unwrap();
        let nets = load(dir.path()).unwrap();
        assert_eq!(nets[0].ip4(), Some(Ipv4Addr::new(172, 16, 28, 2)));
        assert!(nets[0].plugin_dirs.is_empty() && nets[0].result.is_none());
    }

    #[test]
    fn conf_copies_and_collisions() {
        let dir = tempfile::tempdir().unwrap();
        let a = save_conf(dir.path(), "10-a.conf", b"{}", &[]).unwrap();
        assert_eq!(a, "net/10-a.conf");
        let taken = vec![entry("a", &a)];
        let b = save_conf(dir.path(), "10-a.conf", b"{\"x\":1}", &taken).unwrap();
        assert_eq!(b, "net/1-10-a.conf");
        assert_eq!(read_conf(dir.path(), &taken[0]).unwrap(), b"{}");
        remove_conf(dir.path(), &taken[0]).unwrap();
        remove_conf(dir.path(), &taken[0]).unwrap();
        assert!(read_conf(dir.path(), &taken[0]).is_err());
        save(dir.path(), &taken).unwrap();
        remove(dir.path()).unwrap();
        remove(dir.path()).unwrap();
        assert!(!record_path(dir.path()).exists());
        // The copies stay with the pod directory.
        assert_eq!(
            read_conf(dir.path(), &entry("b", &b)).unwrap(),
            b"{\"x\":1}"
        );
    }

    #[test]
    fn conf_path_must_stay_in_net_dir() {
        let dir = tempfile::tempdir().unwrap();
        for bad in [
            "../etc/passwd",
            "/etc/passwd",
            "net/../x",
            "net",
            "x/y",
            "net/a/b",
        ] {
            assert!(
                matches!(
                    entry("n", bad).conf_path(dir.path()),
                    Err(RecordError::BadConfPath { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn corrupt_record_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(record_path(dir.path()), "[{").unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(e.to_string().contains(FILE), "{e}");
    }
}
