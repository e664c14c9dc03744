//! [`CniResult`]: a result of any supported version, kept in its own version's shape,
//! parsed and checked from a plugin's stdout and converted on demand.

use serde_json::{Map, Value};

use super::check::Checker;
use super::common::kind;
use super::convert::{family, legacy_to_04, spec04_to_1, spec04_to_legacy, spec1_to_04, Family};
use super::error::ResultError;
use super::v020::Result020;
use super::v040::Result040;
use super::v100::{IpConfig, Result100};
use crate::version;

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
