//! From a `--net` selection to the ordered list of network configurations to set up.
//!
//! Candidates are the networks in the configuration directory (first definition of a name
//! wins, as `cni::conf::load_dir` decides) plus the built-in ones whose name no user network
//! takes. The selected ones (all of them with `all`) are set up in configuration file-name
//! order, byte-wise, with the built-ins counting as `99-default.conf` and
//! `99-default-restricted.conf`. Names that match nothing fail the whole plan with
//! `networks not found: a, b` before anything is set up.
//!
//! [`candidates`] is also what a listing of the networks in effect needs: it keeps the
//! shadowed definitions and the files that failed to load.
//!
//! This module also decides what the pod keeps as "the configuration used": the file's
//! own bytes when they describe the network completely, else an equivalent configuration
//! list (for a `.conflist` whose `<dir>/<name>/*.conf` plugins were appended).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cni::conf::{ConfError, NetworkConfigList};
use serde_json::{Map, Value};

use super::builtin::{Builtin, BUILTINS};
use super::selection::NetSelection;
use super::NetError;

/// One network to set up.
#[derive(Debug, Clone)]
pub struct PlannedNet {
    /// The configuration.
    pub list: NetworkConfigList,
    /// The file name that decides the order (the real file, or rkt's name for a built-in).
    pub file_name: String,
    /// Whether this is a built-in network.
    pub builtin: bool,
    /// The CNI arguments from `--net` (`K=V;K2=V2`, possibly empty).
    pub args: String,
    /// The binary each plugin type of the network resolves to in the plugin path, found
    /// once by [`plan`]: the ownership check examines these, the record names the first,
    /// and the CNI library runs exactly these (types not found are absent, and their ADD
    /// fails naming the path). Empty in [`candidates`].
    pub binaries: BTreeMap<String, PathBuf>,
}

impl PlannedNet {
    /// The `type` of the first plugin, the one that makes the interface.
    pub fn main_plugin_type(&self) -> &str {
        self.list
            .plugins
            .first()
            .map(|p| p.plugin_type.as_str())
            .unwrap_or("")
    }

    /// The file name and bytes to keep in the pod as the configuration used.
    pub fn saved_copy(&self) -> (String, Vec<u8>) {
        if self.builtin {
            // rkt's name, with the extension that says what it is.
            let stem = self.file_name.trim_end_matches(".conf");
            return (format!("{stem}.conflist"), self.list.bytes.clone());
        }
        let path = Path::new(&self.file_name);
        if let Ok(again) = parse_as(&self.list.bytes, path) {
            let same = again.plugins.len() == self.list.plugins.len()
                && again
                    .plugins
                    .iter()
                    .zip(&self.list.plugins)
                    .all(|(a, b)| a.raw == b.raw);
            if same {
                return (self.file_name.clone(), self.list.bytes.clone());
            }
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.list.name.clone());
        (format!("{stem}.conflist"), synthesize(&self.list))
    }
}

/// A configuration list equivalent to `list`, with every plugin inlined.
fn synthesize(list: &NetworkConfigList) -> Vec<u8> {
    let mut m = Map::new();
    if let Some(v) = &list.cni_version {
        m.insert("cniVersion".into(), Value::String(v.clone()));
    }
    if !list.cni_versions.is_empty() {
        m.insert("cniVersions".into(), list.cni_versions.clone().into());
    }
    m.insert("name".into(), Value::String(list.name.clone()));
    if list.disable_check {
        m.insert("disableCheck".into(), Value::Bool(true));
    }
    if list.disable_gc {
        m.insert("disableGC".into(), Value::Bool(true));
    }
    m.insert("loadOnlyInlinedPlugins".into(), Value::Bool(true));
    m.insert(
        "plugins".into(),
        Value::Array(
            list.plugins
                .iter()
                .map(|p| Value::Object(p.raw.clone()))
                .collect(),
        ),
    );
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(m)).expect("JSON serializes");
    bytes.push(b'\n');
    bytes
}

/// Parses by extension, like the loader: `.conflist` a list, anything else a single plugin.
fn parse_as(bytes: &[u8], path: &Path) -> Result<NetworkConfigList, ConfError> {
    if path.extension().is_some_and(|e| e == "conflist") {
        cni::conf::parse_list(bytes, Some(path))
    } else {
        cni::conf::parse_single(bytes, Some(path))
    }
}

/// Parses a configuration copy saved in a pod: a list when it has `plugins`, else a single
/// plugin (rkt's own records hold single-plugin `.conf` files).
pub fn parse_saved(bytes: &[u8], path: &Path) -> Result<NetworkConfigList, ConfError> {
    let is_list = serde_json::from_slice::<Value>(bytes)
        .ok()
        .is_some_and(|v| v.get("plugins").is_some());
    if is_list {
        cni::conf::parse_list(bytes, Some(path))
    } else {
        cni::conf::parse_single(bytes, Some(path))
    }
}

/// The networks in effect for a configuration directory, and what did not make it.
#[derive(Debug)]
pub struct Candidates {
    /// Every network that can be selected: the directory's, then the built-ins whose name no
    /// configured network takes, sorted by file name.
    pub nets: Vec<PlannedNet>,
    /// Definitions that lost to an earlier file with the same network name.
    pub shadowed: Vec<cni::conf::Shadowed>,
    /// Files that failed to load.
    pub failed: Vec<ConfError>,
}

/// Loads `conf_dir` (a missing directory has no networks) and adds the built-ins.
pub fn candidates(conf_dir: &Path) -> Result<Candidates, NetError> {
    let loaded = cni::conf::load_dir(conf_dir).map_err(|source| NetError::ConfDir {
        dir: conf_dir.to_path_buf(),
        source: Box::new(source),
    })?;
    let mut nets: Vec<PlannedNet> = loaded
        .networks
        .into_iter()
        .map(|list| PlannedNet {
            file_name: list
                .source
                .as_deref()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| list.name.clone()),
            list,
            builtin: false,
            args: String::new(),
            binaries: BTreeMap::new(),
        })
        .collect();
    for b in BUILTINS {
        if nets.iter().any(|n| n.list.name == b.name) {
            continue;
        }
        nets.push(builtin_net(&b)?);
    }
    nets.sort_by(|a, b| a.file_name.as_bytes().cmp(b.file_name.as_bytes()));
    Ok(Candidates {
        nets,
        shadowed: loaded.shadowed,
        failed: loaded.failed,
    })
}

fn builtin_net(b: &Builtin) -> Result<PlannedNet, NetError> {
    let list = b.config().map_err(|source| NetError::Builtin {
        net: b.name.to_string(),
        source: Box::new(source),
    })?;
    Ok(PlannedNet {
        list,
        file_name: b.file_name.to_string(),
        builtin: true,
        args: String::new(),
        binaries: BTreeMap::new(),
    })
}

/// The networks `selection` asks for, in setup order, with their `--net` arguments and
/// their plugins' binaries as found in `plugin_path`. `host` and `none` plan nothing.
pub fn plan(
    selection: &NetSelection,
    conf_dir: &Path,
    plugin_path: &[PathBuf],
) -> Result<Vec<PlannedNet>, NetError> {
    if selection.is_host() || selection.is_none() {
        return Ok(Vec::new());
    }
    let Candidates {
        nets: candidates,
        shadowed,
        failed,
    } = candidates(conf_dir)?;
    // A file that failed to load may be the one that defines a selected network.
    for f in &failed {
        eprintln!(
            "rkt: warning: ignoring a network configuration: {}",
            crate::error::chain(f)
        );
    }
    let selected =
        |name: &str| selection.is_all() || selection.requests().iter().any(|r| r.name == name);
    for s in shadowed.iter().filter(|s| selected(&s.name)) {
        eprintln!(
            "rkt: warning: network {:?} in {} is ignored: {} defines it first",
            s.name,
            s.file.display(),
            s.shadowed_by.display()
        );
    }
    let missing: Vec<String> = selection
        .requests()
        .iter()
        .filter(|r| !candidates.iter().any(|c| c.list.name == r.name))
        .map(|r| r.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(NetError::NotFound {
            names: missing,
            conf_dir: conf_dir.to_path_buf(),
        });
    }
    Ok(candidates
        .into_iter()
        .filter(|c| {
            selection.is_all() || selection.requests().iter().any(|r| r.name == c.list.name)
        })
        .map(|mut c| {
            c.args = selection.args_for(&c.list.name).to_string();
            c.binaries = resolve(&c.list, plugin_path);
            c
        })
        .collect())
}

/// The binary of each of the list's plugins that is found in `plugin_path`.
pub fn resolve(list: &NetworkConfigList, plugin_path: &[PathBuf]) -> BTreeMap<String, PathBuf> {
    list.plugins
        .iter()
        .filter_map(|p| {
            let binary = cni::invoke::find_in_path(&p.plugin_type, plugin_path).ok()?;
            Some((p.plugin_type.clone(), binary))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn sel(flags: &[&str]) -> NetSelection {
        NetSelection::parse(&flags.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn names(p: &[PlannedNet]) -> Vec<&str> {
        p.iter().map(|n| n.list.name.as_str()).collect()
    }

    fn conf(name: &str, ty: &str) -> String {
        format!(r#"{{"cniVersion":"0.4.0","name":"{name}","type":"{ty}","x":1}}"#)
    }

    #[test]
    fn default_selection_uses_builtin_default() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&sel(&[]), &dir.path().join("missing"), &[]).unwrap();
        assert_eq!(names(&p), ["default"]);
        assert!(p[0].builtin);
        assert_eq!(p[0].main_plugin_type(), "ptp");
        assert_eq!(p[0].saved_copy().0, "99-default.conflist");
    }

    #[test]
    fn user_network_overrides_builtin() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("50-default.conf"),
            conf("default", "bridge"),
        )
        .unwrap();
        let p = plan(&sel(&["default"]), dir.path(), &[]).unwrap();
        assert_eq!(names(&p), ["default"]);
        assert!(!p[0].builtin);
        assert_eq!(p[0].main_plugin_type(), "bridge");
        assert_eq!(p[0].file_name, "50-default.conf");
        // the other built-in is still there with `all`
        let p = plan(&sel(&["all"]), dir.path(), &[]).unwrap();
        assert_eq!(names(&p), ["default", "default-restricted"]);
        assert_eq!(p[0].main_plugin_type(), "bridge");
    }

    #[test]
    fn order_is_by_file_name_not_by_flag_order() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("10-b.conf"), conf("b", "ptp")).unwrap();
        fs::write(dir.path().join("20-a.conf"), conf("a", "ptp")).unwrap();
        fs::write(dir.path().join("99-zzz.conf"), conf("zzz", "ptp")).unwrap();
        let p = plan(&sel(&["zzz,default,a:IP=10.0.0.9", "b"]), dir.path(), &[]).unwrap();
        // 99-default.conf < 99-zzz.conf
        assert_eq!(names(&p), ["b", "a", "default", "zzz"]);
        assert_eq!(p[1].args, "IP=10.0.0.9");
        assert_eq!(p[0].args, "");
        let p = plan(&sel(&["all"]), dir.path(), &[]).unwrap();
        // '-' sorts before '.', so rkt's 99-default-restricted.conf precedes 99-default.conf
        assert_eq!(
            names(&p),
            ["b", "a", "default-restricted", "default", "zzz"]
        );
    }

    #[test]
    fn all_missing_names_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("10-a.conf"), conf("a", "ptp")).unwrap();
        let e = plan(&sel(&["x,a", "default,y"]), dir.path(), &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "networks not found: x, y (searched {} and the built-in networks)",
                dir.path().display()
            )
        );
    }

    #[test]
    fn broken_file_does_not_hide_others() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("10-a.conf"), conf("a", "ptp")).unwrap();
        fs::write(dir.path().join("05-bad.conf"), "{").unwrap();
        assert_eq!(names(&plan(&sel(&["a"]), dir.path(), &[]).unwrap()), ["a"]);
    }

    #[test]
    fn candidates_keep_shadowed_and_failed_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("10-a.conf"), conf("a", "ptp")).unwrap();
        fs::write(dir.path().join("20-a.conf"), conf("a", "bridge")).unwrap();
        fs::write(dir.path().join("30-bad.conf"), "{").unwrap();
        let c = candidates(dir.path()).unwrap();
        assert_eq!(names(&c.nets), ["a", "default-restricted", "default"]);
        assert_eq!(c.nets[0].main_plugin_type(), "ptp");
        assert_eq!(c.shadowed.len(), 1);
        assert_eq!(c.shadowed[0].file, dir.path().join("20-a.conf"));
        assert_eq!(c.failed.len(), 1);
        assert!(c.failed[0].to_string().contains("30-bad.conf"));
    }

    #[test]
    fn plugins_resolve_once_to_the_first_directory_holding_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        for (d, names) in [(&first, &["ptp"][..]), (&second, &["ptp", "portmap"][..])] {
            fs::create_dir(d).unwrap();
            for n in names {
                fs::write(d.join(n), "").unwrap();
                fs::set_permissions(d.join(n), fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let missing = dir.path().join("missing");
        let p = plan(
            &sel(&["default"]),
            &missing,
            &[first.clone(), second.clone()],
        )
        .unwrap();
        // The built-in default is ptp (with host-local IPAM, which the plugin runs) + portmap.
        assert_eq!(
            p[0].binaries,
            BTreeMap::from([
                ("ptp".to_string(), first.join("ptp")),
                ("portmap".to_string(), second.join("portmap")),
            ])
        );
        let p = plan(&sel(&["default"]), &missing, std::slice::from_ref(&first)).unwrap();
        assert_eq!(p[0].binaries.keys().collect::<Vec<_>>(), ["ptp"]);
        assert!(candidates(&missing).unwrap().nets[0].binaries.is_empty());
    }

    #[test]
    fn host_and_none_plan_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(plan(&sel(&["host"]), dir.path(), &[]).unwrap().is_empty());
        assert!(plan(&sel(&["none"]), dir.path(), &[]).unwrap().is_empty());
    }

    #[test]
    fn saved_copy_keeps_file_bytes_or_inlines_aggregated_plugins() {
        let dir = tempfile::tempdir().unwrap();
        let single = conf("a", "ptp");
        fs::write(dir.path().join("10-a.conf"), &single).unwrap();
        let list = r#"{"cniVersion":"1.0.0","name":"l","plugins":[{"type":"bridge","k":[1,2]}]}"#;
        fs::write(dir.path().join("20-l.conflist"), list).unwrap();
        fs::create_dir(dir.path().join("l")).unwrap();
        fs::write(
            dir.path().join("l/1-tuning.conf"),
            r#"{"type":"tuning","m":true}"#,
        )
        .unwrap();
        let p = plan(&sel(&["a,l"]), dir.path(), &[]).unwrap();
        assert_eq!(p[0].saved_copy(), ("10-a.conf".into(), single.into_bytes()));
        let (name, bytes) = p[1].saved_copy();
        assert_eq!(name, "20-l.conflist");
        let again = parse_saved(&bytes, Path::new("net/20-l.conflist")).unwrap();
        assert_eq!(again.name, "l");
        assert_eq!(again.cni_version.as_deref(), Some("1.0.0"));
        let types: Vec<_> = again
            .plugins
            .iter()
            .map(|p| p.plugin_type.as_str())
            .collect();
        assert_eq!(types, ["bridge", "tuning"]);
        assert_eq!(again.plugins[0].raw, p[1].list.plugins[0].raw);
        assert_eq!(again.plugins[1].raw["m"], true);
    }

    #[test]
    fn parse_saved_detects_single_and_list() {
        let p = Path::new("net/x.conf");
        assert_eq!(
            parse_saved(conf("a", "ptp").as_bytes(), p)
                .unwrap()
                .plugins
                .len(),
            1
        );
        let b = BUILTINS[0].conflist.as_bytes();
        assert_eq!(parse_saved(b, p).unwrap().name, "default-restricted");
    }
}
