//! Plugin results: parsing a plugin's stdout for any supported spec version, checking its
//! shape, and converting between versions the way libcni does.
//!
//! There are three result families:
//! - `0.1.0`/`0.2.0` ([`Result020`]): `ip4`, `ip6` (each with its own routes) and `dns`;
//! - `0.3.0`/`0.3.1`/`0.4.0` ([`Result040`]): `interfaces`, `ips` with a `version`, `routes`, `dns`;
//! - `1.0.0`/`1.1.0` ([`Result100`]): like 0.4.0 without `ips[].version`, with richer
//!   interfaces and routes.
//!
//! Converting down to 0.2.0 keeps the first address of each family and the destination
//! and gateway of the routes of a family that has an address; interfaces are lost, and a
//! result with no address cannot be converted. Converting 1.x to 0.4.0 drops the
//! interface fields 0.4.0 lacks.

use std::net::IpAddr;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::version;

/// A result that could not be parsed or converted.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// Not JSON at all.
    #[error("result is not valid JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Valid JSON, but not an object.
    #[error("result must be a JSON object, found {0}")]
    NotAnObject(&'static str),
    /// `cniVersion` is present but not a string.
    #[error("result field \"cniVersion\" must be a string")]
    VersionNotString,
    /// The result's version (or the configuration's, if the result has none) is not supported.
    #[error("result has unsupported cniVersion {version:?}; supported: {}", version::SUPPORTED.join(", "))]
    UnsupportedVersion {
        /// The version that was found.
        version: String,
    },
    /// The fields do not fit the shape of the version family.
    #[error("result (cniVersion {version}) is malformed: {message}")]
    Shape {
        /// The result's version.
        version: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The result cannot be expressed in the requested version.
    #[error("cannot convert result from cniVersion {from} to {to}: {reason}")]
    Convert {
        /// The result's version.
        from: String,
        /// The requested version.
        to: String,
        /// Why not.
        reason: String,
    },
}

/// DNS settings of a result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Dns {
    /// Name servers, in priority order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Local domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Search domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    /// Resolver options.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.nameservers.is_empty()
            && self.domain.as_deref().unwrap_or("").is_empty()
            && self.search.is_empty()
            && self.options.is_empty()
    }
}

/// A route. `0.x` results use only `dst` and `gw`; the rest is spec 1.1.0.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Route {
    /// Destination, in CIDR form.
    pub dst: String,
    /// Next hop; absent means the default gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
    /// Route MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Advertised MSS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advmss: Option<u32>,
    /// Route priority (metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Routing table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// Route scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u32>,
}

/// An interface of a 1.x result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Interface {
    /// Interface name.
    #[serde(default)]
    pub name: String,
    /// Hardware address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Network namespace path; empty for host interfaces.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
    /// Socket path of a vhost-user style interface.
    #[serde(
        rename = "socketPath",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub socket_path: Option<String>,
    /// PCI ID of a device interface.
    #[serde(rename = "pciID", default, skip_serializing_if = "Option::is_none")]
    pub pci_id: Option<String>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// An address of a 1.x result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct IpConfig {
    /// Address and prefix length, e.g. `10.1.2.3/24`.
    pub address: String,
    /// Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Index into the result's `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

/// Splits `ADDR/PREFIX`, checking the prefix fits the family.
fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, prefix) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix: u8 = prefix.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some((ip, prefix))
}

impl IpConfig {
    /// The address without its prefix length.
    pub fn ip(&self) -> Option<IpAddr> {
        parse_cidr(&self.address).map(|(ip, _)| ip)
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> Option<u8> {
        parse_cidr(&self.address).map(|(_, p)| p)
    }

    /// True for an IPv4 address.
    pub fn is_v4(&self) -> bool {
        self.ip().is_some_and(|ip| ip.is_ipv4())
    }
}

/// A 1.0.0/1.1.0 result, the typed view every other version converts to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Result100 {
    /// The result's version.
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub cni_version: String,
    /// Interfaces the plugins created or used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// Addresses assigned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig>,
    /// Routes added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// DNS settings.
    #[serde(default, skip_serializing_if = "Dns::is_empty")]
    pub dns: Dns,
}

/// An interface of a 0.3.x/0.4.0 result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Interface040 {
    /// Interface name.
    #[serde(default)]
    pub name: String,
    /// Hardware address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// Network namespace path; empty for host interfaces.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
}

/// An address of a 0.3.x/0.4.0 result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct IpConfig040 {
    /// `"4"` or `"6"`.
    pub version: String,
    /// Address and prefix length.
    pub address: String,
    /// Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Index into the result's `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

/// A 0.3.0/0.3.1/0.4.0 result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Result040 {
    /// The result's version.
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub cni_version: String,
    /// Interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface040>,
    /// Addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig040>,
    /// Routes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// DNS settings.
    #[serde(default, skip_serializing_if = "Dns::is_empty")]
    pub dns: Dns,
}

/// The address of one family in a 0.1.0/0.2.0 result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Ip020 {
    /// Address and prefix length.
    pub ip: String,
    /// Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Routes of this family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
}

/// A 0.1.0/0.2.0 result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Result020 {
    /// The result's version.
    #[serde(
        rename = "cniVersion",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub cni_version: String,
    /// The IPv4 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip4: Option<Ip020>,
    /// The IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip6: Option<Ip020>,
    /// DNS settings.
    #[serde(default, skip_serializing_if = "Dns::is_empty")]
    pub dns: Dns,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Legacy,
    Spec04,
    Spec1,
}

fn family(v: &str) -> Option<Family> {
    match v {
        "0.1.0" | "0.2.0" => Some(Family::Legacy),
        "0.3.0" | "0.3.1" | "0.4.0" => Some(Family::Spec04),
        "1.0.0" | "1.1.0" => Some(Family::Spec1),
        _ => None,
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Body {
    Legacy(Result020),
    Spec04(Result040),
    Spec1(Result100),
}

/// A plugin result of any supported version, kept in its own version's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct CniResult {
    version: String,
    body: Body,
}

/// Collects shape problems as messages naming the field.
struct Checker<'a> {
    version: &'a str,
}

impl Checker<'_> {
    fn fail(&self, message: String) -> ResultError {
        ResultError::Shape {
            version: self.version.to_string(),
            message,
        }
    }

    /// Decodes `m[key]`; absent or null gives the default.
    fn one<T: DeserializeOwned + Default>(
        &self,
        m: &Map<String, Value>,
        key: &str,
    ) -> Result<T, ResultError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => T::deserialize(v).map_err(|e| self.fail(format!("{key}: {e}"))),
        }
    }

    /// Decodes the array `m[key]` element by element, so errors name the index.
    fn list<T: DeserializeOwned>(
        &self,
        m: &Map<String, Value>,
        key: &str,
    ) -> Result<Vec<T>, ResultError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| T::deserialize(v).map_err(|e| self.fail(format!("{key}[{i}]: {e}"))))
                .collect(),
            Some(other) => Err(self.fail(format!("{key} must be an array, found {}", kind(other)))),
        }
    }

    fn cidr(&self, field: &str, s: &str) -> Result<IpAddr, ResultError> {
        parse_cidr(s).map(|(ip, _)| ip).ok_or_else(|| {
            self.fail(format!(
                "{field} {s:?} is not an address with a prefix length, like 10.1.2.3/24"
            ))
        })
    }

    fn ip(&self, field: &str, s: &Option<String>) -> Result<(), ResultError> {
        match s {
            Some(s) if s.parse::<IpAddr>().is_err() => {
                Err(self.fail(format!("{field} {s:?} is not an IP address")))
            }
            _ => Ok(()),
        }
    }

    fn routes(&self, prefix: &str, routes: &[Route]) -> Result<(), ResultError> {
        for (i, r) in routes.iter().enumerate() {
            self.cidr(&format!("{prefix}routes[{i}].dst"), &r.dst)?;
            self.ip(&format!("{prefix}routes[{i}].gw"), &r.gw)?;
        }
        Ok(())
    }

    fn legacy(&self, r: &Result020) -> Result<(), ResultError> {
        for (field, ip, want_v4) in [("ip4", &r.ip4, true), ("ip6", &r.ip6, false)] {
            if let Some(ip) = ip {
                let addr = self.cidr(&format!("{field}.ip"), &ip.ip)?;
                if addr.is_ipv4() != want_v4 {
                    return Err(self.fail(format!(
                        "{field}.ip {:?} is of the wrong address family",
                        ip.ip
                    )));
                }
                self.ip(&format!("{field}.gateway"), &ip.gateway)?;
                self.routes(&format!("{field}."), &ip.routes)?;
            }
        }
        Ok(())
    }

    fn spec04(&self, r: &Result040) -> Result<(), ResultError> {
        for (i, ip) in r.ips.iter().enumerate() {
            let addr = self.cidr(&format!("ips[{i}].address"), &ip.address)?;
            let want = if addr.is_ipv4() { "4" } else { "6" };
            if ip.version != want {
                return Err(self.fail(format!(
                    "ips[{i}].version is {:?} but address {:?} needs \"{want}\"",
                    ip.version, ip.address
                )));
            }
            self.ip(&format!("ips[{i}].gateway"), &ip.gateway)?;
        }
        self.routes("", &r.routes)
    }

    fn spec1(&self, r: &Result100) -> Result<(), ResultError> {
        for (i, ip) in r.ips.iter().enumerate() {
            self.cidr(&format!("ips[{i}].address"), &ip.address)?;
            self.ip(&format!("ips[{i}].gateway"), &ip.gateway)?;
        }
        self.routes("", &r.routes)
    }
}

fn legacy_to_04(r: &Result020) -> Result040 {
    let mut out = Result040 {
        dns: r.dns.clone(),
        ..Default::default()
    };
    for (ip, v) in [(&r.ip4, "4"), (&r.ip6, "6")] {
        if let Some(ip) = ip {
            out.ips.push(IpConfig040 {
                version: v.into(),
                address: ip.ip.clone(),
                gateway: ip.gateway.clone(),
                interface: None,
            });
            out.routes.extend(ip.routes.iter().cloned());
        }
    }
    out
}

fn spec04_to_1(r: &Result040) -> Result100 {
    Result100 {
        cni_version: String::new(),
        interfaces: r
            .interfaces
            .iter()
            .map(|i| Interface {
                name: i.name.clone(),
                mac: i.mac.clone(),
                sandbox: i.sandbox.clone(),
                ..Default::default()
            })
            .collect(),
        ips: r
            .ips
            .iter()
            .map(|ip| IpConfig {
                address: ip.address.clone(),
                gateway: ip.gateway.clone(),
                interface: ip.interface,
            })
            .collect(),
        routes: r.routes.clone(),
        dns: r.dns.clone(),
    }
}

fn spec1_to_04(r: &Result100) -> Result040 {
    Result040 {
        cni_version: String::new(),
        interfaces: r
            .interfaces
            .iter()
            .map(|i| Interface040 {
                name: i.name.clone(),
                mac: i.mac.clone(),
                sandbox: i.sandbox.clone(),
            })
            .collect(),
        ips: r
            .ips
            .iter()
            .map(|ip| IpConfig040 {
                version: if ip.is_v4() { "4" } else { "6" }.into(),
                address: ip.address.clone(),
                gateway: ip.gateway.clone(),
                interface: ip.interface,
            })
            .collect(),
        routes: r.routes.clone(),
        dns: r.dns.clone(),
    }
}

/// libcni's down-conversion to 0.2.0: the first address of each family, and the
/// `dst`/`gw` of routes whose family has an address. Fails without any address.
fn spec04_to_legacy(r: &Result040) -> Option<Result020> {
    let mut out = Result020 {
        dns: r.dns.clone(),
        ..Default::default()
    };
    for ip in &r.ips {
        let slot = match ip.version.as_str() {
            "4" => &mut out.ip4,
            "6" => &mut out.ip6,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(Ip020 {
                ip: ip.address.clone(),
                gateway: ip.gateway.clone(),
                routes: Vec::new(),
            });
        }
    }
    for route in &r.routes {
        let is_v4 = parse_cidr(&route.dst).is_some_and(|(ip, _)| ip.is_ipv4());
        let slot = if is_v4 { &mut out.ip4 } else { &mut out.ip6 };
        if let Some(ip) = slot {
            ip.routes.push(Route {
                dst: route.dst.clone(),
                gw: route.gw.clone(),
                ..Default::default()
            });
        }
    }
    (out.ip4.is_some() || out.ip6.is_some()).then_some(out)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl CniResult {
    /// Parses a plugin's stdout. The result's own `cniVersion` wins; if it is absent or
    /// empty, `config_version` (the version the plugin was asked to speak) is used, and
    /// an empty `config_version` means `0.1.0`. The fields are checked against the shape
    /// of that version's family. `null` is read as an empty result, as libcni does.
    pub fn from_slice(bytes: &[u8], config_version: &str) -> Result<CniResult, ResultError> {
        let v: Value = serde_json::from_slice(bytes).map_err(ResultError::Json)?;
        CniResult::from_value(v, config_version)
    }

    /// Like [`CniResult::from_slice`], from parsed JSON.
    pub fn from_value(v: Value, config_version: &str) -> Result<CniResult, ResultError> {
        let m = match v {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => return Err(ResultError::NotAnObject(kind(&other))),
        };
        let own = match m.get("cniVersion") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(ResultError::VersionNotString),
        };
        let version = own.unwrap_or_else(|| {
            if config_version.is_empty() {
                version::IMPLICIT.to_string()
            } else {
                config_version.to_string()
            }
        });
        let fam = family(&version).ok_or_else(|| ResultError::UnsupportedVersion {
            version: version.clone(),
        })?;
        let checker = Checker { version: &version };
        let body = match fam {
            Family::Legacy => {
                let r = Result020 {
                    cni_version: version.clone(),
                    ip4: checker.one(&m, "ip4")?,
                    ip6: checker.one(&m, "ip6")?,
                    dns: checker.one(&m, "dns")?,
                };
                checker.legacy(&r)?;
                Body::Legacy(r)
            }
            Family::Spec04 => {
                let r = Result040 {
                    cni_version: version.clone(),
                    interfaces: checker.list(&m, "interfaces")?,
                    ips: checker.list(&m, "ips")?,
                    routes: checker.list(&m, "routes")?,
                    dns: checker.one(&m, "dns")?,
                };
                checker.spec04(&r)?;
                Body::Spec04(r)
            }
            Family::Spec1 => {
                let r = Result100 {
                    cni_version: version.clone(),
                    interfaces: checker.list(&m, "interfaces")?,
                    ips: checker.list(&m, "ips")?,
                    routes: checker.list(&m, "routes")?,
                    dns: checker.one(&m, "dns")?,
                };
                checker.spec1(&r)?;
                Body::Spec1(r)
            }
        };
        Ok(CniResult { version, body })
    }

    /// The result's version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Converts to any supported version, up or down, following libcni's converters.
    pub fn convert_to(&self, version: &str) -> Result<CniResult, ResultError> {
        let target = family(version).ok_or_else(|| ResultError::UnsupportedVersion {
            version: version.to_string(),
        })?;
        let mut body = match (&self.body, target) {
            (Body::Legacy(r), Family::Legacy) => Body::Legacy(r.clone()),
            (Body::Spec04(r), Family::Spec04) => Body::Spec04(r.clone()),
            (Body::Spec1(r), Family::Spec1) => Body::Spec1(r.clone()),
            (Body::Legacy(r), Family::Spec04) => Body::Spec04(legacy_to_04(r)),
            (Body::Legacy(r), Family::Spec1) => Body::Spec1(spec04_to_1(&legacy_to_04(r))),
            (Body::Spec04(r), Family::Spec1) => Body::Spec1(spec04_to_1(r)),
            (Body::Spec1(r), Family::Spec04) => Body::Spec04(spec1_to_04(r)),
            (Body::Spec04(r), Family::Legacy) => Body::Legacy(self.down_to_legacy(r, version)?),
            (Body::Spec1(r), Family::Legacy) => {
                Body::Legacy(self.down_to_legacy(&spec1_to_04(r), version)?)
            }
        };
        match &mut body {
            Body::Legacy(r) => r.cni_version = version.to_string(),
            Body::Spec04(r) => r.cni_version = version.to_string(),
            Body::Spec1(r) => r.cni_version = version.to_string(),
        }
        Ok(CniResult {
            version: version.to_string(),
            body,
        })
    }

    fn down_to_legacy(&self, r: &Result040, to: &str) -> Result<Result020, ResultError> {
        spec04_to_legacy(r).ok_or_else(|| ResultError::Convert {
            from: self.version.clone(),
            to: to.to_string(),
            reason: "versions before 0.3.0 need at least one IP address and the result has none"
                .into(),
        })
    }

    /// The JSON of the result in its own version's shape, with `cniVersion`.
    pub fn to_value(&self) -> Value {
        let v = match &self.body {
            Body::Legacy(r) => serde_json::to_value(r),
            Body::Spec04(r) => serde_json::to_value(r),
            Body::Spec1(r) => serde_json::to_value(r),
        };
        // Serialising these plain structs cannot fail: all keys are strings.
        v.unwrap_or(Value::Null)
    }

    /// The result as JSON bytes in its own version's shape.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_value().to_string().into_bytes()
    }

    /// The typed 1.x view. Its `cni_version` is the result's own for 1.x results and
    /// [`version::CURRENT`] for older ones (which were converted up).
    pub fn current(&self) -> Result100 {
        let mut r = match &self.body {
            Body::Spec1(r) => r.clone(),
            Body::Spec04(r) => spec04_to_1(r),
            Body::Legacy(r) => spec04_to_1(&legacy_to_04(r)),
        };
        r.cni_version = if family(&self.version) == Some(Family::Spec1) {
            self.version.clone()
        } else {
            version::CURRENT.to_string()
        };
        r
    }

    /// The IPv4 address of a result, the first one if several (as rkt reports it).
    pub fn first_ipv4(&self) -> Option<IpConfig> {
        self.current().ips.into_iter().find(IpConfig::is_v4)
    }
}

impl From<Result100> for CniResult {
    /// Wraps a 1.x result; an empty or non-1.x `cni_version` becomes [`version::CURRENT`].
    fn from(mut r: Result100) -> CniResult {
        if family(&r.cni_version) != Some(Family::Spec1) {
            r.cni_version = version::CURRENT.to_string();
        }
        CniResult {
            version: r.cni_version.clone(),
            body: Body::Spec1(r),
        }
    }
}
