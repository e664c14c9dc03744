//! The 0.1.0/0.2.0 result family: [`Result020`], one address per family (`ip4`,
//! `ip6`), each with its own routes.

use serde::{Deserialize, Serialize};

use super::common::{Dns, Route};

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
