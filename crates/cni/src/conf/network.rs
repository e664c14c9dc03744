//! The typed view of a network configuration: [`NetworkConfigList`] (a network and its
//! plugins) and [`NetworkConfig`] (one plugin object, kept as raw JSON beside its `type`
//! and `capabilities`), and what loading a directory gives ([`LoadedDir`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::error::ConfError;
use crate::version::{self, VersionError};

/// One plugin object of a network.
#[derive(Clone, Debug)]
pub struct NetworkConfig {
    /// The plugin's `type`: the executable's file name.
    pub plugin_type: String,
    /// `capabilities` as written; only `true` entries are declared capabilities.
    pub capabilities: BTreeMap<String, bool>,
    /// The plugin's whole JSON object, every key as written.
    pub raw: Map<String, Value>,
}

impl NetworkConfig {
    /// True when the plugin declares capability `name`.
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.get(name).copied().unwrap_or(false)
    }
}

/// A network: a name and the plugins that set it up, in order.
#[derive(Clone, Debug)]
pub struct NetworkConfigList {
    /// The network's name.
    pub name: String,
    /// `cniVersion` as written, if present.
    pub cni_version: Option<String>,
    /// `cniVersions` as written (spec 1.1.0), possibly empty.
    pub cni_versions: Vec<String>,
    /// `disableCheck`: CHECK always succeeds without running plugins.
    pub disable_check: bool,
    /// `disableGC`: GC does nothing for this network.
    pub disable_gc: bool,
    /// `loadOnlyInlinedPlugins`: ignore `<dir>/<name>/*.conf` plugin files.
    pub load_only_inlined_plugins: bool,
    /// The plugins, inlined ones first, then aggregated ones.
    pub plugins: Vec<NetworkConfig>,
    /// The file the network came from.
    pub source: Option<PathBuf>,
    /// The file's bytes (for a single `.conf`, those bytes too).
    pub bytes: Vec<u8>,
}

impl NetworkConfigList {
    /// The version to speak to this network's plugins (see [`version::negotiate`]).
    pub fn negotiated_version(&self) -> Result<String, VersionError> {
        version::negotiate(self.cni_version.as_deref(), &self.cni_versions)
    }
}

/// A configuration whose name another file already defined.
#[derive(Debug)]
pub struct Shadowed {
    /// The network name.
    pub name: String,
    /// The file that lost.
    pub file: PathBuf,
    /// The earlier file that defines the name.
    pub shadowed_by: PathBuf,
}

/// The result of loading a configuration directory.
#[derive(Debug, Default)]
pub struct LoadedDir {
    /// The networks, in file-name order, one per name.
    pub networks: Vec<NetworkConfigList>,
    /// Files skipped because an earlier file defines the same name.
    pub shadowed: Vec<Shadowed>,
    /// Files that could not be loaded.
    pub failed: Vec<ConfError>,
}

impl LoadedDir {
    /// The network called `name`.
    pub fn find(&self, name: &str) -> Option<&NetworkConfigList> {
        self.networks.iter().find(|n| n.name == name)
    }
}
