//! The networks in effect, examined without a pod: for `rkt net list`, every network that
//! can be selected (built-ins included) with its file, CNI version, plugin chain and the
//! binary each plugin resolves to, plus the definitions that were shadowed or failed to
//! load; for `rkt net status`, each network's readiness (CNI STATUS).
//!
//! A network is *usable* when its version negotiates and every plugin (and IPAM plugin) is
//! found in the search path and, asked with VERSION, supports that version.
//!
//! Takes from [`crate::networking`] (the candidates and plans); nothing takes from it but
//! the command line. May not touch: pods or their records; it never sets a network up.

use std::path::{Path, PathBuf};

use cni::api::CniConfig;
use serde::Serialize;
use serde_json::Value;

use crate::networking::plan::{self, PlannedNet};
use crate::networking::NetError;

/// One plugin of a network, as it would be run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginCheck {
    /// The plugin `type`.
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// `true` for the IPAM plugin a main plugin delegates to (`ipam.type`).
    pub ipam: bool,
    /// The binary that would run, if one is found.
    pub binary: Option<PathBuf>,
    /// Capabilities the plugin declares.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Why it cannot be used (not found, version not supported), if it cannot.
    pub problem: Option<String>,
}

/// One network in effect.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkCheck {
    pub name: String,
    /// The configuration file, or `None` for a built-in network.
    pub file: Option<PathBuf>,
    /// The file name deciding the setup order (rkt's name for a built-in).
    pub order_name: String,
    pub builtin: bool,
    /// `cniVersion` as written.
    pub cni_version: Option<String>,
    /// The version the plugins will be spoken to in, if one negotiates.
    pub negotiated_version: Option<String>,
    /// The plugin chain, each followed by its IPAM plugin if it has one.
    pub plugins: Vec<PluginCheck>,
    /// Problems of the network itself (its version, no plugins); its plugins' problems are
    /// theirs.
    pub problems: Vec<String>,
    /// Whether a pod could use this network: no problem of its own or of a plugin.
    pub usable: bool,
}

impl NetworkCheck {
    /// Whether a pod could use this network.
    pub fn usable(&self) -> bool {
        self.usable
    }

    /// Every problem of the network and of its plugins, `; `-separated, each plugin named:
    /// `plugin "ptp": not found in /usr/lib/cni`.
    pub fn problems_text(&self) -> String {
        let own = self.problems.iter().cloned();
        let plugins = self.plugins.iter().filter_map(|p| {
            let kind = if p.ipam { "IPAM plugin" } else { "plugin" };
            let problem = p.problem.as_ref()?;
            Some(format!("{kind} {:?}: {problem}", p.plugin_type))
        });
        own.chain(plugins).collect::<Vec<_>>().join("; ")
    }
}

/// A definition that lost to an earlier file defining the same network.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowedFile {
    pub name: String,
    pub file: PathBuf,
    pub shadowed_by: PathBuf,
}

/// A file that failed to load.
#[derive(Debug, Clone, Serialize)]
pub struct FailedFile {
    pub file: Option<PathBuf>,
    pub error: String,
}

/// Everything `rkt net list` reports about a configuration directory and plugin path.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    pub networks: Vec<NetworkCheck>,
    pub shadowed: Vec<ShadowedFile>,
    pub failed: Vec<FailedFile>,
}

impl Listing {
    /// Whether every network in effect is usable and every file loaded.
    pub fn all_usable(&self) -> bool {
        self.failed.is_empty() && self.networks.iter().all(NetworkCheck::usable)
    }
}

/// Examines the networks of `conf_dir` (plus the built-ins) against `plugin_path`. Plugins
/// that are found are asked for their versions (VERSION); nothing else runs.
pub fn list(conf_dir: &Path, plugin_path: &[PathBuf]) -> Result<Listing, NetError> {
    let cands = plan::candidates(conf_dir)?;
    // VERSION writes nothing to the cache; a throwaway directory keeps it that way.
    let cni = CniConfig::new(
        plugin_path.to_vec(),
        std::env::temp_dir().join("rkt-net-list"),
    );
    let networks = cands
        .nets
        .iter()
        .map(|n| check_network(n, plugin_path, &cni))
        .collect();
    Ok(Listing {
        networks,
        shadowed: cands
            .shadowed
            .into_iter()
            .map(|s| ShadowedFile {
                name: s.name,
                file: s.file,
                shadowed_by: s.shadowed_by,
            })
            .collect(),
        failed: cands
            .failed
            .into_iter()
            .map(|e| FailedFile {
                file: e.path().map(Path::to_path_buf),
                error: crate::error::chain(&e),
            })
            .collect(),
    })
}

fn check_network(net: &PlannedNet, plugin_path: &[PathBuf], cni: &CniConfig) -> NetworkCheck {
    let mut problems = Vec::new();
    let negotiated = match net.list.negotiated_version() {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(crate::error::chain(&e));
            None
        }
    };
    let mut plugins = Vec::new();
    for p in &net.list.plugins {
        let caps = p
            .capabilities
            .iter()
            .filter(|(_, on)| **on)
            .map(|(k, _)| k.clone())
            .collect();
        plugins.push(check_plugin(
            &p.plugin_type,
            false,
            caps,
            negotiated.as_deref(),
            plugin_path,
            cni,
        ));
        if let Some(ipam) = p
            .raw
            .get("ipam")
            .and_then(|i| i.get("type"))
            .and_then(Value::as_str)
        {
            plugins.push(check_plugin(
                ipam,
                true,
                Vec::new(),
                negotiated.as_deref(),
                plugin_path,
                cni,
            ));
        }
    }
    if net.list.plugins.is_empty() {
        problems.push("it has no plugins".to_string());
    }
    let usable = problems.is_empty() && plugins.iter().all(|p| p.problem.is_none());
    NetworkCheck {
        name: net.list.name.clone(),
        file: (!net.builtin).then(|| net.list.source.clone()).flatten(),
        order_name: net.file_name.clone(),
        builtin: net.builtin,
        cni_version: net.list.cni_version.clone(),
        negotiated_version: negotiated,
        plugins,
        problems,
        usable,
    }
}

fn check_plugin(
    plugin_type: &str,
    ipam: bool,
    capabilities: Vec<String>,
    version: Option<&str>,
    plugin_path: &[PathBuf],
    cni: &CniConfig,
) -> PluginCheck {
    let (binary, mut problem) = match cni::invoke::find_in_path(plugin_type, plugin_path) {
        Ok(bin) => (Some(bin), None),
        Err(cni::invoke::FindError::NotFound { dirs, .. }) => (
            None,
            Some(format!(
                "not found in {}",
                if dirs.is_empty() {
                    "(no plugin directories)".to_string()
                } else {
                    dirs.iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(":")
                }
            )),
        ),
        Err(e) => (None, Some(crate::error::chain(&e))),
    };
    if let (Some(_), Some(version)) = (&binary, version) {
        problem = match cni.get_version_info(plugin_type) {
            Ok(info) if info.supports(version) => None,
            Ok(info) => Some(format!(
                "does not support cniVersion {version} (supports {})",
                info.supported_versions.join(", ")
            )),
            Err(e) => Some(format!("VERSION failed: {}", crate::error::chain(&e))),
        };
    }
    PluginCheck {
        plugin_type: plugin_type.to_string(),
        ipam,
        binary,
        capabilities,
        problem,
    }
}

/// One network's readiness, from CNI STATUS.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    pub name: String,
    pub builtin: bool,
    /// The negotiated version, if one negotiates.
    pub cni_version: Option<String>,
    /// Whether the plugins say they can serve ADD.
    pub ready: bool,
    /// Why not, or a note (STATUS not supported before 1.1.0).
    pub message: Option<String>,
}

/// The version that introduced STATUS.
const STATUS_VERSION: &str = "1.1.0";

/// Runs CNI STATUS for every network in effect (built-ins included). A network is not
/// ready when one of its plugins is missing or does not support its version (found as by
/// `list`, with VERSION); networks whose version predates STATUS are otherwise reported
/// ready, with a note. Each plugin runs from the binary in `checked` (what
/// [`crate::networking::check_ownership`] examined) when the network is there, else from
/// the one found in `plugin_path`.
pub fn status(
    conf_dir: &Path,
    plugin_path: &[PathBuf],
    cache_dir: &Path,
    checked: &[PlannedNet],
) -> Result<Vec<NetworkStatus>, NetError> {
    let cands = plan::candidates(conf_dir)?;
    let cni = CniConfig::new(plugin_path.to_vec(), cache_dir.to_path_buf());
    Ok(cands
        .nets
        .iter()
        .map(|n| {
            let mut st = NetworkStatus {
                name: n.list.name.clone(),
                builtin: n.builtin,
                cni_version: None,
                ready: false,
                message: None,
            };
            // A plugin that cannot run the network (missing, or not speaking its version)
            // makes it not ready, also below 1.1.0 where no STATUS runs; an old plugin
            // asked for STATUS would only answer with a confusing error.
            let check = check_network(n, plugin_path, &cni);
            if !check.usable() {
                st.cni_version = check.negotiated_version.clone();
                st.message = Some(check.problems_text());
                return st;
            }
            let version = match n.list.negotiated_version() {
                Ok(v) => v,
                Err(e) => {
                    st.message = Some(crate::error::chain(&e));
                    return st;
                }
            };
            let has_status =
                cni::version::Version::parse(&version).is_ok_and(|v| v.at_least(STATUS_VERSION));
            st.cni_version = Some(version.clone());
            // The binaries the ownership check examined, when it ran; else found now, once.
            let binaries = match checked.iter().find(|c| c.list.name == n.list.name) {
                Some(c) => c.binaries.clone(),
                None => plan::resolve(&n.list, plugin_path),
            };
            let cni = cni.clone().with_plugin_binaries(binaries);
            match cni.get_status_network_list(&n.list) {
                Ok(()) => {
                    st.ready = true;
                    if !has_status {
                        st.message = Some(format!("STATUS not supported by cniVersion {version}"));
                    }
                }
                Err(e) => st.message = Some(crate::error::chain(&e)),
            }
            st
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    /// A plugin that answers VERSION with `versions` and nothing else.
    fn plugin(dir: &Path, name: &str, versions: &[&str]) {
        let path = dir.join(name);
        let answer = serde_json::json!({"cniVersion": "1.0.0", "supportedVersions": versions});
        fs::write(&path, format!("#!/bin/sh\necho '{answer}'\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn plugins_are_resolved_and_versions_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let (conf, bin) = (tmp.path().join("conf"), tmp.path().join("bin"));
        fs::create_dir_all(&conf).unwrap();
        fs::create_dir_all(&bin).unwrap();
        plugin(&bin, "new", &["0.4.0", "1.0.0"]);
        plugin(&bin, "old", &["0.3.1"]);
        fs::write(
            conf.join("10-a.conflist"),
            r#"{"cniVersion":"1.0.0","name":"a","plugins":[
                {"type":"new","ipam":{"type":"gone"}},
                {"type":"old","capabilities":{"portMappings":true,"mac":false}}]}"#,
        )
        .unwrap();
        fs::write(
            conf.join("20-b.conf"),
            r#"{"cniVersion":"0.4.0","name":"b","type":"new"}"#,
        )
        .unwrap();
        let listing = list(&conf, std::slice::from_ref(&bin)).unwrap();
        let a = &listing.networks[0];
        assert_eq!(a.name, "a");
        assert_eq!(a.negotiated_version.as_deref(), Some("1.0.0"));
        let types: Vec<(&str, bool)> = a
            .plugins
            .iter()
            .map(|p| (p.plugin_type.as_str(), p.ipam))
            .collect();
        assert_eq!(types, [("new", false), ("gone", true), ("old", false)]);
        assert_eq!(a.plugins[0].binary, Some(bin.join("new")));
        assert_eq!(a.plugins[0].problem, None);
        assert_eq!(
            a.plugins[1].problem.as_deref(),
            Some(format!("not found in {}", bin.display()).as_str())
        );
        assert_eq!(
            a.plugins[2].problem.as_deref(),
            Some("does not support cniVersion 1.0.0 (supports 0.3.1)")
        );
        assert_eq!(a.plugins[2].capabilities, ["portMappings"]);
        assert!(!a.usable() && a.problems.is_empty());
        let b = &listing.networks[1];
        assert!(b.usable(), "{b:?}");
        assert_eq!(b.file, Some(conf.join("20-b.conf")));
        // the built-ins follow, their plugins not found in this path
        let names: Vec<&str> = listing.networks.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "default-restricted", "default"]);
        assert!(listing.networks[3].builtin && listing.networks[3].file.is_none());
        assert!(!listing.all_usable());
    }

    #[test]
    fn status_is_a_no_op_before_1_1_0_but_a_missing_plugin_is_never_ready() {
        let tmp = tempfile::tempdir().unwrap();
        let (conf, bin) = (tmp.path().join("conf"), tmp.path().join("bin"));
        fs::create_dir_all(&conf).unwrap();
        fs::create_dir_all(&bin).unwrap();
        plugin(&bin, "old", &["0.4.0"]);
        fs::write(
            conf.join("10-a.conf"),
            r#"{"cniVersion":"0.4.0","name":"a","type":"old"}"#,
        )
        .unwrap();
        fs::write(
            conf.join("20-b.conf"),
            r#"{"cniVersion":"1.1.0","name":"b","type":"missing"}"#,
        )
        .unwrap();
        fs::write(
            conf.join("30-c.conf"),
            r#"{"cniVersion":"0.4.0","name":"c","type":"missing"}"#,
        )
        .unwrap();
        let st = status(
            &conf,
            std::slice::from_ref(&bin),
            &tmp.path().join("cache"),
            &[],
        )
        .unwrap();
        assert!(st[0].ready);
        assert_eq!(
            st[0].message.as_deref(),
            Some("STATUS not supported by cniVersion 0.4.0")
        );
        for st in &st[1..3] {
            assert!(!st.ready);
            assert!(
                st.message
                    .as_deref()
                    .unwrap()
                    .starts_with("plugin \"missing\": not found in "),
                "{st:?}"
            );
        }
    }
}
