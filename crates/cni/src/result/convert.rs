//! Conversions between the result families, following libcni's converters, and which
//! family a version belongs to.

use super::common::{parse_cidr, Route};
use super::v020::{Ip020, Result020};
use super::v040::{Interface040, IpConfig040, Result040};
use super::v100::{Interface, IpConfig, Result100};

/// The result families: the versions that share a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Family {
    Legacy,
    Spec04,
    Spec1,
}

pub(super) fn family(v: &str) -> Option<Family> {
    match v {
        "0.1.0" | "0.2.0" => Some(Family::Legacy),
        "0.3.0" | "0.3.1" | "0.4.0" => Some(Family::Spec04),
        "1.0.0" | "1.1.0" => Some(Family::Spec1),
        _ => None,
    }
}

pub(super) fn legacy_to_04(r: &Result020) -> Result040 {
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

pub(super) fn spec04_to_1(r: &Result040) -> Result100 {
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

pub(super) fn spec1_to_04(r: &Result100) -> Result040 {
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
pub(super) fn spec04_to_legacy(r: &Result040) -> Option<Result020> {
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
