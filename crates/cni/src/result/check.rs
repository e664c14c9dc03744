//! The shape checker: decodes a result's fields one by one so an error names the field
//! (`ips[1].address`), and checks addresses, gateways and routes.

use std::net::IpAddr;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::common::{kind, parse_cidr, Route};
use super::error::ResultError;
use super::v020::Result020;
use super::v040::Result040;
use super::v100::Result100;

/// Collects shape problems as messages naming the field.
pub(super) struct Checker<'a> {
    pub(super) version: &'a str,
}

impl Checker<'_> {
    pub(super) fn fail(&self, message: String) -> ResultError {
        ResultError::Shape {
            version: self.version.to_string(),
            message,
        }
    }

    /// Decodes `m[key]`; absent or null gives the default.
    pub(super) fn one<T: DeserializeOwned + Default>(
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
    pub(super) fn list<T: DeserializeOwned>(
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

    pub(super) fn cidr(&self, field: &str, s: &str) -> Result<IpAddr, ResultError> {
        parse_cidr(s).map(|(ip, _)| ip).ok_or_else(|| {
            self.fail(format!(
                "{field} {s:?} is not an address with a prefix length, like 10.1.2.3/24"
            ))
        })
    }

    pub(super) fn ip(&self, field: &str, s: &Option<String>) -> Result<(), ResultError> {
        match s {
            Some(s) if s.parse::<IpAddr>().is_err() => {
                Err(self.fail(format!("{field} {s:?} is not an IP address")))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn routes(&self, prefix: &str, routes: &[Route]) -> Result<(), ResultError> {
        for (i, r) in routes.iter().enumerate() {
            self.cidr(&format!("{prefix}routes[{i}].dst"), &r.dst)?;
            self.ip(&format!("{prefix}routes[{i}].gw"), &r.gw)?;
        }
        Ok(())
    }

    pub(super) fn legacy(&self, r: &Result020) -> Result<(), ResultError> {
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

    pub(super) fn spec04(&self, r: &Result040) -> Result<(), ResultError> {
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

    pub(super) fn spec1(&self, r: &Result100) -> Result<(), ResultError> {
        for (i, ip) in r.ips.iter().enumerate() {
            self.cidr(&format!("ips[{i}].address"), &ip.address)?;
            self.ip(&format!("ips[{i}].gateway"), &ip.gateway)?;
        }
        self.routes("", &r.routes)
    }
}
