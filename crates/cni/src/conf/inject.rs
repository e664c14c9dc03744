//! The request body each plugin receives: its raw object with `name`, `cniVersion`,
//! `prevResult` and `runtimeConfig` injected (libcni `InjectConf`), and the capability
//! arguments a plugin declares.

use serde_json::{Map, Value};

use super::network::NetworkConfig;

/// Builds the request body for one plugin: its raw object with `name` and
/// `cniVersion` set, `prevResult` set when given, `runtimeConfig` set when non-empty,
/// and `capabilities` removed (the spec says a runtime must not pass it on). Every other
/// key, nested ones included, is passed through unchanged and in its original order.
pub fn inject(
    plugin: &NetworkConfig,
    name: &str,
    cni_version: &str,
    prev_result: Option<&Value>,
    runtime_config: &Map<String, Value>,
) -> Value {
    let mut m = plugin.raw.clone();
    m.shift_remove("capabilities");
    m.insert("name".into(), Value::String(name.to_string()));
    m.insert("cniVersion".into(), Value::String(cni_version.to_string()));
    if let Some(prev) = prev_result {
        m.insert("prevResult".into(), prev.clone());
    }
    if !runtime_config.is_empty() {
        m.insert(
            "runtimeConfig".into(),
            Value::Object(runtime_config.clone()),
        );
    }
    Value::Object(m)
}

/// The capability arguments this plugin declares (`capabilities[k] == true`), in the
/// order the runtime supplied them.
pub fn runtime_config_for(
    plugin: &NetworkConfig,
    capability_args: &Map<String, Value>,
) -> Map<String, Value> {
    capability_args
        .iter()
        .filter(|(k, _)| plugin.has_capability(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
