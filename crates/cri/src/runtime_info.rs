//! Version, Status and UpdateRuntimeConfig: who answers, and whether it can run pods
//! (`RuntimeReady`) and network them (`NetworkReady`: a network in the CNI configuration
//! directory, read at each call).

use crate::options::Config;
use crate::proto;

/// The CRI version spoken.
pub const CRI_VERSION: &str = "v1";
/// The runtime's name, as `crictl version` shows it.
pub const RUNTIME_NAME: &str = "rkt";

pub fn version() -> proto::VersionResponse {
    proto::VersionResponse {
        version: "0.1.0".into(),
        runtime_name: RUNTIME_NAME.into(),
        runtime_version: env!("CARGO_PKG_VERSION").into(),
        runtime_api_version: CRI_VERSION.into(),
    }
}

pub fn status(config: &Config, verbose: bool) -> proto::StatusResponse {
    let network =
        crate::network::pod_network(&config.dirs.net_conf.value, config.net_name.as_deref());
    let runtime = proto::RuntimeCondition {
        r#type: "RuntimeReady".into(),
        status: true,
        reason: String::new(),
        message: String::new(),
    };
    let net = match &network {
        Ok(_) => proto::RuntimeCondition {
            r#type: "NetworkReady".into(),
            status: true,
            reason: String::new(),
            message: String::new(),
        },
        Err(why) => proto::RuntimeCondition {
            r#type: "NetworkReady".into(),
            status: false,
            reason: "NetworkPluginNotReady".into(),
            message: why.clone(),
        },
    };
    let mut info = std::collections::HashMap::new();
    if verbose {
        let dirs = &config.dirs;
        info.insert(
            "config".to_string(),
            serde_json::json!({
                "dataDir": dirs.data.value,
                "netConfDir": dirs.net_conf.value,
                "netConfDirFrom": dirs.net_conf.origin.to_string(),
                "pluginPath": dirs.plugin_path(),
                "podNetwork": network.as_ref().ok(),
                "podNetworkNamed": config.net_name,
                "registryHostsDirs": config.config_dirs.registry_hosts_dirs(),
                "socket": config.socket,
                "streamingAddress": config.streaming_address.to_string(),
            })
            .to_string(),
        );
    }
    proto::StatusResponse {
        status: Some(proto::RuntimeStatus {
            conditions: vec![runtime, net],
        }),
        info,
    }
}
