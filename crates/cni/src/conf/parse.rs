//! Parsing configuration bytes: a `.conflist` into a [`NetworkConfigList`], a single
//! `.conf`/`.json` into a one-plugin list, and a plugin object on its own (the drop-in
//! files of `<dir>/<network>/*.conf`). Nothing here reads the disk.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::error::{ConfError, Origin};
use super::network::{NetworkConfig, NetworkConfigList};
use crate::validate;
use crate::version::Version;

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn field_type(origin: &Origin, field: &str, expected: &'static str, found: &Value) -> ConfError {
    let found = match found {
        Value::String(s) => format!("{s:?}"),
        other => json_kind(other).to_string(),
    };
    ConfError::FieldType {
        origin: origin.clone(),
        field: field.to_string(),
        expected,
        found,
    }
}

pub(super) fn parse_object(bytes: &[u8], origin: &Origin) -> Result<Map<String, Value>, ConfError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
        ConfError::Json {
            origin: origin.clone(),
            line: e.line(),
            column: e.column(),
            message,
        }
    })?;
    match value {
        Value::Object(m) => Ok(m),
        other => Err(ConfError::NotAnObject {
            origin: origin.clone(),
            what: "the configuration".into(),
            found: json_kind(&other),
        }),
    }
}

fn opt_string(
    m: &Map<String, Value>,
    key: &str,
    origin: &Origin,
) -> Result<Option<String>, ConfError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(field_type(origin, key, "a string", other)),
    }
}

/// A boolean flag; like libcni, the strings "true" and "false" (any case) are
/// accepted too.
fn flag(m: &Map<String, Value>, key: &str, origin: &Origin) -> Result<bool, ConfError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v @ Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(field_type(origin, key, "a boolean", v)),
        },
        Some(other) => Err(field_type(origin, key, "a boolean", other)),
    }
}

/// Rejects a version string that does not parse; absent or empty is fine (it means 0.1.0).
fn check_version(v: Option<&str>, field: &str, origin: &Origin) -> Result<(), ConfError> {
    match v {
        Some(v) if !v.is_empty() => {
            Version::parse(v)
                .map(|_| ())
                .map_err(|source| ConfError::InvalidVersion {
                    origin: origin.clone(),
                    field: field.to_string(),
                    source,
                })
        }
        _ => Ok(()),
    }
}

fn network_name(m: &Map<String, Value>, origin: &Origin) -> Result<String, ConfError> {
    let name = opt_string(m, "name", origin)?.ok_or_else(|| ConfError::MissingName {
        origin: origin.clone(),
    })?;
    validate::network_name(&name).map_err(|source| ConfError::InvalidName {
        origin: origin.clone(),
        source,
    })?;
    Ok(name)
}

/// Builds the typed view of one plugin object.
pub(super) fn plugin(
    value: Value,
    index: usize,
    network: &str,
    field_prefix: &str,
    origin: &Origin,
) -> Result<NetworkConfig, ConfError> {
    let raw = match value {
        Value::Object(m) => m,
        other => {
            return Err(ConfError::NotAnObject {
                origin: origin.clone(),
                what: match field_prefix.strip_suffix('.') {
                    Some(field) => field.to_string(),
                    None => "the plugin".to_string(),
                },
                found: json_kind(&other),
            })
        }
    };
    let plugin_type = match raw.get("type") {
        None | Some(Value::Null) => {
            return Err(ConfError::MissingType {
                origin: origin.clone(),
                network: network.to_string(),
                index,
            })
        }
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(field_type(
                origin,
                &format!("{field_prefix}type"),
                "a string",
                other,
            ))
        }
    };
    validate::plugin_type(&plugin_type).map_err(|source| ConfError::InvalidType {
        origin: origin.clone(),
        network: network.to_string(),
        index,
        source,
    })?;
    let mut capabilities = BTreeMap::new();
    match raw.get("capabilities") {
        None | Some(Value::Null) => {}
        Some(Value::Object(caps)) => {
            for (k, v) in caps {
                match v {
                    Value::Bool(b) => {
                        capabilities.insert(k.clone(), *b);
                    }
                    other => {
                        return Err(field_type(
                            origin,
                            &format!("{field_prefix}capabilities.{k}"),
                            "a boolean",
                            other,
                        ))
                    }
                }
            }
        }
        Some(other) => {
            return Err(field_type(
                origin,
                &format!("{field_prefix}capabilities"),
                "an object",
                other,
            ))
        }
    }
    Ok(NetworkConfig {
        plugin_type,
        capabilities,
        raw,
    })
}

/// Parses a `.conflist` without requiring plugins; the caller decides whether an
/// empty list is acceptable (aggregated plugins may still be appended).
pub(super) fn parse_list_inner(
    bytes: Vec<u8>,
    origin: &Origin,
) -> Result<NetworkConfigList, ConfError> {
    let mut m = parse_object(&bytes, origin)?;
    let name = network_name(&m, origin)?;
    let cni_version = opt_string(&m, "cniVersion", origin)?;
    check_version(cni_version.as_deref(), "cniVersion", origin)?;
    let cni_versions: Vec<String> = match m.get("cniVersions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(field_type(
                    origin,
                    &format!("cniVersions[{i}]"),
                    "a string",
                    other,
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(field_type(
                origin,
                "cniVersions",
                "an array of strings",
                other,
            ))
        }
    };
    for (i, v) in cni_versions.iter().enumerate() {
        check_version(Some(v), &format!("cniVersions[{i}]"), origin)?;
    }
    let disable_check = flag(&m, "disableCheck", origin)?;
    let disable_gc = flag(&m, "disableGC", origin)?;
    let load_only_inlined_plugins = flag(&m, "loadOnlyInlinedPlugins", origin)?;
    let raw_plugins = match m.remove("plugins") {
        None | Some(Value::Null) => {
            if load_only_inlined_plugins {
                return Err(ConfError::InlinedWithoutPlugins {
                    origin: origin.clone(),
                    network: name,
                });
            }
            Vec::new()
        }
        Some(Value::Array(items)) if items.is_empty() => {
            // libcni: an explicit empty list is an error even if aggregated files exist.
            return Err(ConfError::NoPlugins {
                origin: origin.clone(),
                network: name,
            });
        }
        Some(Value::Array(items)) => items,
        Some(other) => return Err(field_type(origin, "plugins", "an array of objects", &other)),
    };
    let plugins = raw_plugins
        .into_iter()
        .enumerate()
        .map(|(i, v)| plugin(v, i, &name, &format!("plugins[{i}]."), origin))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NetworkConfigList {
        name,
        cni_version,
        cni_versions,
        disable_check,
        disable_gc,
        load_only_inlined_plugins,
        plugins,
        source: origin.0.clone(),
        bytes,
    })
}

pub(super) fn require_plugins(
    list: NetworkConfigList,
    origin: &Origin,
) -> Result<NetworkConfigList, ConfError> {
    if list.plugins.is_empty() {
        return Err(ConfError::NoPlugins {
            origin: origin.clone(),
            network: list.name,
        });
    }
    Ok(list)
}

/// Parses the bytes of a `.conflist` file. `source` is only used for messages and
/// recorded in the result; nothing is read from disk, so aggregated plugin files are
/// not consulted and a list without plugins is an error (see [`super::load_file`]).
pub fn parse_list(bytes: &[u8], source: Option<&Path>) -> Result<NetworkConfigList, ConfError> {
    let origin = Origin::of(source);
    let list = parse_list_inner(bytes.to_vec(), &origin)?;
    require_plugins(list, &origin)
}

/// Parses the bytes of a single-plugin `.conf`/`.json` file and upgrades it to a
/// one-plugin list: the list's name and `cniVersion` are taken from the object, and the
/// plugin's raw object is the whole file.
pub fn parse_single(bytes: &[u8], source: Option<&Path>) -> Result<NetworkConfigList, ConfError> {
    parse_single_owned(bytes.to_vec(), source)
}

/// [`parse_single`] of bytes the caller gives away (no copy).
pub(super) fn parse_single_owned(
    bytes: Vec<u8>,
    source: Option<&Path>,
) -> Result<NetworkConfigList, ConfError> {
    let origin = Origin::of(source);
    let m = parse_object(&bytes, &origin)?;
    single_list(m, bytes, &origin)
}

/// The one-plugin list of a single-plugin object `m` whose bytes are `bytes`.
fn single_list(
    m: Map<String, Value>,
    bytes: Vec<u8>,
    origin: &Origin,
) -> Result<NetworkConfigList, ConfError> {
    if !m.contains_key("type") && m.contains_key("plugins") {
        return Err(ConfError::ListInSingleFile {
            origin: origin.clone(),
        });
    }
    let name = network_name(&m, origin)?;
    let cni_version = opt_string(&m, "cniVersion", origin)?;
    check_version(cni_version.as_deref(), "cniVersion", origin)?;
    let plugin = plugin(Value::Object(m), 0, &name, "", origin)?;
    Ok(NetworkConfigList {
        name,
        cni_version,
        cni_versions: Vec::new(),
        disable_check: false,
        disable_gc: false,
        load_only_inlined_plugins: false,
        plugins: vec![plugin],
        source: origin.0.clone(),
        bytes,
    })
}

/// Parses one plugin object on its own, such as a drop-in file of
/// `<dir>/<network>/*.conf` (libcni `NetworkPluginConfFromBytes`): a JSON object with a
/// `type`. `name` and `cniVersion` are not required (the list supplies them). `source`
/// is only used for messages.
pub fn parse_plugin(bytes: &[u8], source: Option<&Path>) -> Result<NetworkConfig, ConfError> {
    let origin = Origin::of(source);
    let m = parse_object(bytes, &origin)?;
    plugin(Value::Object(m), 0, "", "", &origin)
}

/// The one-plugin list of a single-plugin configuration (libcni `ConfListFromConf`):
/// the network's name and `cniVersion` are read from the plugin's own object, which
/// must have a valid `name`, as a `.conf` file has. This is how the single-network
/// operations ([`crate::api::CniConfig::add_network`] and the others) run through the
/// list operations.
pub fn conf_list_from_conf(net: &NetworkConfig) -> Result<NetworkConfigList, ConfError> {
    // Serialising a map of JSON values cannot fail.
    let bytes = serde_json::to_vec(&net.raw).unwrap_or_default();
    single_list(net.raw.clone(), bytes, &Origin(None))
}
