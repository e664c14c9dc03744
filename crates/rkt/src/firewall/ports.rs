//! Port forwarding: `--port=[HOSTIP:]HOSTPORT:PODPORT[/tcp|/udp]`, the CNI `portMappings`
//! capability argument it becomes, and the checks made before a pod's networks are set up.
//!
//! The mappings travel as the capability argument `portMappings` (a list of
//! `{hostPort, containerPort, protocol, hostIP?}`, the CNI conventions' format) to the
//! plugins that declare the capability, such as `portmap`, of the first selected network
//! that has one. They are recorded in the pod's `net-info.json` (`capabilityArgs`) with
//! that network, which is where teardown, `rkt status` and the conflict check of other pods
//! find them.
//!
//! A host port is taken when another pod's record forwards the same protocol and port on an
//! overlapping host address (a missing host IP means every address). The check and the
//! writing of the new pod's record happen under one lock file in the pods directory
//! ([`PortsLock`]), so two pods started at once cannot both take a port. A host port a host
//! process serves is refused, and the pod's runner holds the port while the pod runs
//! ([`super::host_ports`]).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The CNI capability that carries port mappings.
pub const CAPABILITY: &str = "portMappings";

/// The lock file, in the pods directory, that serializes port checks.
pub const LOCK_FILE: &str = ".ports.lock";

/// A transport protocol of a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        })
    }
}

/// One forwarded port, in the shape of the `portMappings` capability argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: Protocol,
    /// The host address to forward on; `None` forwards on every address of the host.
    #[serde(rename = "hostIP", default, skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<IpAddr>,
}

/// What is wrong with port forwarding for a pod.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// A `--port` value that does not parse.
    #[error("--port={value:?}: {reason} (expected [HOSTIP:]HOSTPORT:PODPORT[/tcp|/udp])")]
    Malformed { value: String, reason: String },
    /// `--port=NAME:…` with a name no app's image exposes.
    #[error("--port={value}: no app of the pod exposes a port named {name:?} ({})",
        if exposed.is_empty() { "its image exposes no ports".to_string() } else { exposed.join("; ") })]
    UnknownName {
        value: String,
        name: String,
        /// `app web exposes 80-tcp, 53-udp`, one per app that exposes any.
        exposed: Vec<String>,
    },
    /// The same host port given twice.
    #[error("--port: host port {port} is given twice")]
    Duplicate { port: String },
    /// `--port` with `--net=host` or `--net=none`.
    #[error("--port cannot be used with --net={net}: the pod has no network to forward to")]
    NoNetwork { net: String },
    /// None of the selected networks has a plugin declaring the capability.
    #[error(
        "--port: none of the selected networks ({}) has a plugin declaring the \"{CAPABILITY}\" capability (add e.g. {{\"type\": \"portmap\", \"capabilities\": {{\"portMappings\": true}}}} to one)",
        nets.join(", ")
    )]
    NoCapableNetwork { nets: Vec<String> },
    /// A host address of a family (IPv4/IPv6) the pod has no address of on the network that
    /// forwards the ports: portmap would set up nothing for it.
    #[error("--port={port}: the host address is {family} but network {net:?} gives the pod no {family} address, so nothing would be forwarded (use a host address of the pod's family, or none)")]
    FamilyMismatch {
        port: String,
        net: String,
        family: &'static str,
    },
    /// Another pod already forwards the host port.
    #[error("--port: host port {port} is already forwarded by pod {uuid}{}",
        if *running { "" } else { " (whose runner is gone: `rkt gc` releases it)" })]
    Taken {
        port: String,
        uuid: String,
        running: bool,
    },
    /// A host process already serves the host port: forwarding it would take the port
    /// over (see [`super::host_ports`]).
    #[error("--port={port}: host port {host_side} is in use on the host by {holder}: stop it, or forward another host port")]
    InUse {
        port: String,
        host_side: String,
        /// `process 1234 (busybox), listening on 127.0.0.1:8082`.
        holder: String,
    },
    /// The host port could not be held for the pod.
    #[error("--port={port}: cannot hold host port {host_side} for the pod")]
    Reserve {
        port: String,
        host_side: String,
        source: nix::errno::Errno,
    },
    /// The pods directory or a lock could not be used.
    #[error("cannot {action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl PortMapping {
    /// Parses one `--port` value: `[HOSTIP:]HOSTPORT:PODPORT[/tcp|/udp]`, TCP by default. An
    /// IPv6 host address may be written bare or in brackets (`[::1]:8080:80`).
    pub fn parse(value: &str) -> Result<PortMapping, PortError> {
        let bad = |reason: &str| PortError::Malformed {
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let (rest, protocol) = match value.rsplit_once('/') {
            Some((rest, "tcp")) => (rest, Protocol::Tcp),
            Some((rest, "udp")) => (rest, Protocol::Udp),
            Some((_, other)) => return Err(bad(&format!("unknown protocol {other:?}"))),
            None => (value, Protocol::Tcp),
        };
        let mut parts = rest.rsplitn(3, ':');
        let pod = parts.next().unwrap_or("");
        let host = parts.next().ok_or_else(|| bad("missing the host port"))?;
        let host_ip = match parts.next() {
            None => None,
            Some(ip) => {
                let ip = ip
                    .strip_prefix('[')
                    .and_then(|i| i.strip_suffix(']'))
                    .unwrap_or(ip);
                Some(
                    ip.parse::<IpAddr>()
                        .map_err(|_| bad(&format!("{ip:?} is not an IP address")))?,
                )
            }
        };
        let port = |text: &str, what: &str| match text.parse::<u16>() {
            Ok(p) if p > 0 => Ok(p),
            _ => Err(bad(&format!("{what} {text:?} is not a port (1-65535)"))),
        };
        Ok(PortMapping {
            host_port: port(host, "host port")?,
            container_port: port(pod, "pod port")?,
            protocol,
            host_ip,
        })
    }

    /// The host side, for messages: `tcp:8080` or `tcp:127.0.0.1:8080`.
    pub fn host_side(&self) -> String {
        match self.host_ip {
            Some(IpAddr::V6(ip)) => format!("{}:[{ip}]:{}", self.protocol, self.host_port),
            Some(ip) => format!("{}:{ip}:{}", self.protocol, self.host_port),
            None => format!("{}:{}", self.protocol, self.host_port),
        }
    }

    /// The mapping as a `--port` value: `[::1]:8080:80/udp`.
    pub fn flag_value(&self) -> String {
        let host = match self.host_ip {
            Some(IpAddr::V6(ip)) => format!("[{ip}]:"),
            Some(ip) => format!("{ip}:"),
            None => String::new(),
        };
        let proto = match self.protocol {
            Protocol::Tcp => "",
            Protocol::Udp => "/udp",
        };
        format!("{host}{}:{}{proto}", self.host_port, self.container_port)
    }

    /// Whether both mappings would take the same host port.
    pub fn clashes_with(&self, other: &PortMapping) -> bool {
        self.protocol == other.protocol
            && self.host_port == other.host_port
            && match (self.host_ip, other.host_ip) {
                (Some(a), Some(b)) => a == b || a.is_unspecified() || b.is_unspecified(),
                _ => true,
            }
    }
}

/// `tcp:8080->80` (`tcp:127.0.0.1:8080->80` with a host address), as `rkt status` shows it.
impl fmt::Display for PortMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.host_side(), self.container_port)
    }
}

/// `IPv4` or `IPv6`.
fn family(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// The first mapping whose host address is of a family not in `pod_ips`, as the error for
/// network `net`.
pub fn check_families(
    mappings: &[PortMapping],
    net: &str,
    pod_ips: &[IpAddr],
) -> Result<(), PortError> {
    for m in mappings {
        let Some(host_ip) = m.host_ip else { continue };
        if !pod_ips.iter().any(|ip| ip.is_ipv4() == host_ip.is_ipv4()) {
            return Err(PortError::FamilyMismatch {
                port: m.flag_value(),
                net: net.to_string(),
                family: family(&host_ip),
            });
        }
    }
    Ok(())
}

/// The address families a network's IPAM will give, when its configuration says so without
/// running it: a `host-local` IPAM's `subnet` and `ranges`. `None` when it cannot be told.
pub fn ipam_families(plugins: &[cni::conf::NetworkConfig]) -> Option<Vec<IpAddr>> {
    let ipam = plugins.iter().find_map(|p| p.raw.get("ipam"))?;
    if ipam.get("type").and_then(Value::as_str) != Some("host-local") {
        return None;
    }
    let subnet_ip = |v: &Value| -> Option<IpAddr> { v.as_str()?.split_once('/')?.0.parse().ok() };
    let mut out: Vec<IpAddr> = ipam.get("subnet").and_then(subnet_ip).into_iter().collect();
    for set in ipam
        .get("ranges")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for range in set.as_array().into_iter().flatten() {
            out.extend(range.get("subnet").and_then(subnet_ip));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// True when `value` is a `--port` of the named form, `NAME:[HOSTIP:]HOSTPORT` with NAME an
/// exposed port's name, `PORT-tcp` or `PORT-udp` (the only names images give). Anything
/// else is the numeric form, whose parse errors stay as they are (`host:8080:80` names a
/// bad host address, not a port name).
pub fn is_named(value: &str) -> bool {
    let first = value.split(':').next().unwrap_or("");
    let Some((port, protocol)) = first.rsplit_once('-') else {
        return false;
    };
    matches!(protocol, "tcp" | "udp")
        && !port.is_empty()
        && port.chars().all(|c| c.is_ascii_digit())
}

/// Parses every numeric `--port` value and rejects a host port given twice. The named form,
/// `NAME:[HOSTIP:]HOSTPORT`, is skipped here: it needs the pod's apps
/// ([`super::port_names::resolve`]).
pub fn parse_all(values: &[String]) -> Result<Vec<PortMapping>, PortError> {
    let mut out: Vec<PortMapping> = Vec::new();
    for v in values.iter().filter(|v| !is_named(v)) {
        push_unique(&mut out, PortMapping::parse(v)?)?;
    }
    Ok(out)
}

/// Adds `m` to `out` unless it takes a host port one of them takes.
pub fn push_unique(out: &mut Vec<PortMapping>, m: PortMapping) -> Result<(), PortError> {
    if let Some(prev) = out.iter().find(|p| p.clashes_with(&m)) {
        return Err(PortError::Duplicate {
            port: prev.host_side(),
        });
    }
    out.push(m);
    Ok(())
}

/// The capability arguments carrying `ports` (empty when there are none).
pub fn capability_args(ports: &[PortMapping]) -> Map<String, Value> {
    let mut m = Map::new();
    if !ports.is_empty() {
        m.insert(
            CAPABILITY.to_string(),
            serde_json::to_value(ports).expect("port mappings serialize"),
        );
    }
    m
}

/// The mappings in recorded capability arguments (entries that do not parse are skipped).
pub fn from_capability_args(args: &Map<String, Value>) -> Vec<PortMapping> {
    args.get(CAPABILITY)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|v| serde_json::from_value(v.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The mappings in several attachments' capability arguments, each once, in order.
pub fn recorded<'a>(args: impl IntoIterator<Item = &'a Map<String, Value>>) -> Vec<PortMapping> {
    let mut out: Vec<PortMapping> = Vec::new();
    for m in args.into_iter().flat_map(from_capability_args) {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// An exclusive lock on `<pods dir>/.ports.lock`, held from the conflict check until the
/// new pod's record names its ports.
#[derive(Debug)]
pub struct PortsLock {
    _lock: Flock<File>,
}

impl PortsLock {
    /// Waits for the lock of the pods directory `pods_dir`, which is made (as the pod store
    /// makes it, mode 0700) when the first pod of the host forwards ports.
    pub fn acquire(pods_dir: &Path) -> Result<PortsLock, PortError> {
        use std::os::unix::fs::DirBuilderExt;
        let path = pods_dir.join(LOCK_FILE);
        let io = |action, source| PortError::Io {
            action,
            path: path.clone(),
            source,
        };
        if !pods_dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(pods_dir)
                .map_err(|e| io("create the directory of", e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io("open", e))?;
        let lock = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| io("lock", errno.into()))?;
        Ok(PortsLock { _lock: lock })
    }
}

/// Fails when a pod in `pods_dir` other than `own_uuid` forwards one of `ports`; the error
/// names that pod. Pods are the directories named by a UUID; `forwarded_by` reads what a
/// pod directory's record forwards (`None` when it cannot be read: the pod is being
/// removed), so that this room needs no knowledge of the record.
pub fn check_taken(
    pods_dir: &Path,
    own_uuid: &str,
    ports: &[PortMapping],
    forwarded_by: impl Fn(&Path) -> Option<Vec<PortMapping>>,
) -> Result<(), PortError> {
    if ports.is_empty() {
        return Ok(());
    }
    let entries = match std::fs::read_dir(pods_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(PortError::Io {
                action: "list",
                path: pods_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            (name != own_uuid && crate::podstore::store::is_uuid(&name)).then(|| (name, e.path()))
        })
        .collect();
    dirs.sort();
    for (uuid, dir) in dirs {
        let Some(theirs) = forwarded_by(&dir) else {
            continue;
        };
        let Some(mine) = ports
            .iter()
            .find(|p| theirs.iter().any(|t| t.clashes_with(p)))
        else {
            continue;
        };
        let running = crate::podstore::PodLock::is_held(&dir).unwrap_or(true);
        return Err(PortError::Taken {
            port: mine.host_side(),
            uuid,
            running,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PortMapping {
        PortMapping::parse(s).unwrap()
    }

    #[test]
    fn host_address_families_must_be_the_pods() {
        let v4: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap()];
        let mappings = [p("8080:80"), p("127.0.0.1:8081:81")];
        assert!(check_families(&mappings, "n", &v4).is_ok());
        let err = check_families(&[p("[::1]:8082:82/udp")], "n", &v4).unwrap_err();
        assert!(matches!(
            err,
            PortError::FamilyMismatch { family: "IPv6", .. }
        ));
        assert!(
            err.to_string().starts_with("--port=[::1]:8082:82/udp: "),
            "{err}"
        );
        assert!(check_families(&[p("127.0.0.1:1:2")], "n", &[]).is_err());
    }

    #[test]
    fn host_local_ipam_tells_the_families_ahead() {
        let plugins = |ipam: Value| {
            let list = cni::conf::parse_list(
                serde_json::json!({"cniVersion": "1.0.0", "name": "n",
                    "plugins": [{"type": "ptp", "ipam": ipam}]})
                .to_string()
                .as_bytes(),
                None,
            )
            .unwrap();
            list.plugins
        };
        let got = ipam_families(&plugins(serde_json::json!(
            {"type": "host-local", "ranges": [[{"subnet": "fd00::/64"}], [{"subnet": "10.1.0.0/24"}]]}
        )))
        .unwrap();
        assert_eq!(got.len(), 2);
        assert!(got[0].is_ipv6() && got[1].is_ipv4());
        assert!(ipam_families(&plugins(serde_json::json!({"type": "static"}))).is_none());
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(
            p("8080:80"),
            PortMapping {
                host_port: 8080,
                container_port: 80,
                protocol: Protocol::Tcp,
                host_ip: None
            }
        );
        let u = p("127.0.0.1:5353:53/udp");
        assert_eq!(u.protocol, Protocol::Udp);
        assert_eq!(u.host_ip, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(u.to_string(), "udp:127.0.0.1:5353->53");
        assert_eq!(p("8080:80/tcp").to_string(), "tcp:8080->80");
        for v6 in ["::1:8080:80", "[::1]:8080:80"] {
            let m = p(v6);
            assert_eq!(m.host_ip, Some("::1".parse().unwrap()), "{v6}");
            assert_eq!(m.to_string(), "tcp:[::1]:8080->80");
        }
    }

    #[test]
    fn malformed_values_name_the_value() {
        for bad in [
            "80",
            "",
            "a:80",
            "8080:b",
            "0:80",
            "8080:70000",
            "x:8080:80",
            "8080:80/sctp",
            "8080:80/",
        ] {
            let e = PortMapping::parse(bad).unwrap_err();
            assert!(matches!(e, PortError::Malformed { .. }), "{bad}: {e:?}");
            assert!(e.to_string().starts_with(&format!("--port={bad:?}")), "{e}");
        }
    }

    #[test]
    fn json_is_the_capability_format() {
        let args = capability_args(&[p("127.0.0.1:8080:80"), p("9090:90/udp")]);
        assert_eq!(
            Value::Object(args.clone()),
            serde_json::json!({"portMappings": [
                {"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "127.0.0.1"},
                {"hostPort": 9090, "containerPort": 90, "protocol": "udp"}
            ]})
        );
        assert_eq!(
            from_capability_args(&args),
            [p("127.0.0.1:8080:80"), p("9090:90/udp")]
        );
        assert!(capability_args(&[]).is_empty());
    }

    #[test]
    fn clashes_need_same_protocol_port_and_overlapping_address() {
        assert!(p("8080:80").clashes_with(&p("127.0.0.1:8080:81")));
        assert!(p("0.0.0.0:8080:80").clashes_with(&p("127.0.0.1:8080:81")));
        assert!(!p("127.0.0.2:8080:80").clashes_with(&p("127.0.0.1:8080:81")));
        assert!(!p("8080:80/udp").clashes_with(&p("8080:80")));
        assert!(!p("8081:80").clashes_with(&p("8080:80")));
        let e = parse_all(&["8080:80".into(), "127.0.0.1:8080:90".into()]).unwrap_err();
        assert_eq!(e.to_string(), "--port: host port tcp:8080 is given twice");
        assert_eq!(
            parse_all(&["8080:80".into(), "8080:80/udp".into()])
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn taken_ports_name_the_other_pod() {
        let pods = tempfile::tempdir().unwrap();
        let other = "0b9a3a0e-5f6e-4a8e-9d0e-1c2b3a4d5e6f";
        let mine = "1b9a3a0e-5f6e-4a8e-9d0e-1c2b3a4d5e6f";
        let dir = pods.path().join(other);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(pods.path().join("not-a-pod")).unwrap();
        let args = capability_args(&[p("8080:80")]);
        let forwarded_by = |d: &Path| {
            assert_ne!(d.file_name().unwrap(), "not-a-pod");
            (d == dir).then(|| recorded([&args]))
        };
        check_taken(pods.path(), mine, &[p("8081:80")], forwarded_by).unwrap();
        // its own record does not count
        check_taken(pods.path(), other, &[p("8080:80")], forwarded_by).unwrap();
        let e =
            check_taken(pods.path(), mine, &[p("127.0.0.1:8080:80")], forwarded_by).unwrap_err();
        assert!(
            matches!(&e, PortError::Taken { uuid, running: false, .. } if uuid == other),
            "{e:?}"
        );
        assert!(e.to_string().contains(other), "{e}");
        check_taken(
            &pods.path().join("missing"),
            mine,
            &[p("8080:80")],
            forwarded_by,
        )
        .unwrap();
        let _lock = PortsLock::acquire(pods.path()).unwrap();
        assert!(pods.path().join(LOCK_FILE).exists());
    }
}
