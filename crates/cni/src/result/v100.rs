//! The 1.0.0/1.1.0 result family: [`Result100`], the typed view every other version
//! converts to, with its [`Interface`] and [`IpConfig`].

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::{parse_cidr, Dns, Route};

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
