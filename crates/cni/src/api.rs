//! The runtime operations over a network configuration list, shaped like libcni's
//! `CNIConfig` (`libcni/api.go`): add, del, check, status, gc, validate, version info and
//! the cached attachments; and the single-network forms (`add_network` and the others),
//! which run the list operations on a one-plugin list.
//!
//! # What each operation sends
//! * ADD, CHECK, DEL: plugins get their config with `name`, `cniVersion` (the negotiated
//!   version), `prevResult` and `runtimeConfig` (the capability arguments the plugin declares)
//!   injected, and `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS` (required for ADD and
//!   CHECK, [`Error::MissingNetns`] without it; DEL may go without), `CNI_IFNAME`,
//!   `CNI_ARGS` (`K=V;K=V`, when there are any) and `CNI_PATH` (every plugin directory,
//!   `:`-joined).
//! * STATUS and GC: the config with `name` and `cniVersion` only (GC adds the valid
//!   attachments), and only `CNI_COMMAND` and `CNI_PATH`.
//! * VERSION: `{"cniVersion":"1.1.0"}` with dummy `CNI_NETNS`, `CNI_IFNAME` and `CNI_PATH`,
//!   like libcni, for plugins built on old versions of `skel`.
//!
//! # Lifecycle rules callers must follow
//! * **DEL after a failed ADD.** The CNI spec requires a DEL for every ADD, including one
//!   that failed part-way (the failed plugin may have allocated an address before failing).
//!   A failed [`CniConfig::add_network_list`] writes no cache entry, and
//!   [`CniConfig::del_network_list`] works without one: callers must call it after a failed
//!   ADD with the same list and [`RuntimeConf`].
//! * No two operations on the same container at once, and GC exclusive of ADD and DEL; this
//!   library does not lock, the runtime does.
//!
//! Plugins are run through an [`Exec`] ([`RawExec`] unless [`CniConfig::with_exec`] says
//! otherwise), each call bounded by [`CniConfig::timeout`] ([`DEFAULT_TIMEOUT`] unless
//! changed).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::cache::{Cache, CachedAttachment};
use crate::conf::{self, NetworkConfig, NetworkConfigList};
use crate::error::Error;
use crate::invoke::{find_in_path, Exec, ExecError, RawExec};
use crate::result::CniResult;
use crate::types::{Attachment, VersionInfo};
use crate::validate;
use crate::version::{self, Version};

/// How long one plugin call may take before it is killed: 60 seconds, the value CRI-O
/// hardcodes. Setting up a network seldom takes more than a second; a plugin stuck on a
/// lock or a dead DHCP server should not hang the runtime forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The message of plugins too old to know the VERSION command.
const UNKNOWN_VERSION_COMMAND: &str = "unknown CNI_COMMAND: VERSION";

/// The arguments of one attachment, apart from the network configuration (libcni
/// `RuntimeConf`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeConf {
    /// `CNI_CONTAINERID`: the container's ID.
    pub container_id: String,
    /// `CNI_NETNS`: the network namespace path. ADD and CHECK require it
    /// ([`Error::MissingNetns`]); DEL may go without it.
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME`: the interface to create inside the namespace.
    pub ifname: String,
    /// `CNI_ARGS`, passed as `K=V;K=V`.
    pub args: Vec<(String, String)>,
    /// Capability arguments (`portMappings`, `ips`, `mac`, `dns`, `bandwidth`, `ipRanges`,
    /// `aliases`, `cgroupPath`, ...); each plugin gets, in `runtimeConfig`, those it declares.
    pub capability_args: Map<String, Value>,
    /// The cache directory for this call, instead of [`CniConfig::cache_dir`] (libcni
    /// `RuntimeConf.CacheDir`).
    pub cache_dir: Option<PathBuf>,
}

impl RuntimeConf {
    /// A runtime configuration without args or capability arguments.
    pub fn new(
        container_id: impl Into<String>,
        netns: Option<PathBuf>,
        ifname: impl Into<String>,
    ) -> RuntimeConf {
        RuntimeConf {
            container_id: container_id.into(),
            netns,
            ifname: ifname.into(),
            ..RuntimeConf::default()
        }
    }

    /// `CNI_ARGS` as plugins read it.
    pub fn args_string(&self) -> String {
        self.args
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    }

    /// The `{containerID, ifname}` pair GC identifies this attachment by.
    pub fn attachment(&self) -> Attachment {
        Attachment {
            container_id: self.container_id.clone(),
            ifname: self.ifname.clone(),
        }
    }
}

/// The CNI runtime: where plugins and the cache live, how long plugins may run, and how
/// they are run (libcni `CNIConfig`).
#[derive(Clone)]
pub struct CniConfig {
    /// Plugin directories, searched in order.
    pub path: Vec<PathBuf>,
    /// The cache directory (libcni's default is `/var/lib/cni`); entries live in
    /// `<cache_dir>/results`.
    pub cache_dir: PathBuf,
    /// The limit for each plugin call.
    pub timeout: Duration,
    exec: Arc<dyn Exec>,
}

impl std::fmt::Debug for CniConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CniConfig")
            .field("path", &self.path)
            .field("cache_dir", &self.cache_dir)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The command names of the protocol.
mod cmd {
    pub const ADD: &str = "ADD";
    pub const DEL: &str = "DEL";
    pub const CHECK: &str = "CHECK";
    pub const STATUS: &str = "STATUS";
    pub const GC: &str = "GC";
    pub const VERSION: &str = "VERSION";
}

impl CniConfig {
    /// A runtime that finds plugins in `path`, caches under `cache_dir`, runs plugins with
    /// [`RawExec`] and gives each call [`DEFAULT_TIMEOUT`].
    pub fn new(path: Vec<PathBuf>, cache_dir: PathBuf) -> CniConfig {
        CniConfig {
            path,
            cache_dir,
            timeout: DEFAULT_TIMEOUT,
            exec: Arc::new(RawExec),
        }
    }

    /// Runs plugins through `exec` instead of [`RawExec`].
    pub fn with_exec(mut self, exec: Arc<dyn Exec>) -> CniConfig {
        self.exec = exec;
        self
    }

    /// Sets the limit for each plugin call.
    pub fn with_timeout(mut self, timeout: Duration) -> CniConfig {
        self.timeout = timeout;
        self
    }

    fn cache(&self) -> Cache {
        Cache::new(&self.cache_dir)
    }

    /// The cache of one call: [`RuntimeConf::cache_dir`] when set, else the runtime's.
    fn cache_for(&self, rt: &RuntimeConf) -> Cache {
        Cache::new(rt.cache_dir.as_deref().unwrap_or(&self.cache_dir))
    }

    /// The opening checks of ADD, CHECK and DEL, before any plugin runs: the container
    /// ID, network name and interface name are valid, ADD and CHECK have a network
    /// namespace, and a version can be negotiated, which is returned.
    fn begin(
        &self,
        command: &'static str,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<String, Error> {
        validate::container_id(&rt.container_id)?;
        validate::network_name(&list.name)?;
        validate::interface_name(&rt.ifname)?;
        let no_netns = rt.netns.as_deref().is_none_or(|p| p.as_os_str().is_empty());
        if no_netns && command != cmd::DEL {
            return Err(Error::MissingNetns {
                network: list.name.clone(),
                command,
            });
        }
        negotiated(list)
    }

    /// Adds the container to the network: every plugin's ADD in order, each given the
    /// previous plugin's result; the final result (in the negotiated version) is cached,
    /// atomically, before it is returned.
    ///
    /// On error nothing is cached, and the caller must still call
    /// [`CniConfig::del_network_list`] (see the module docs).
    pub fn add_network_list(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<CniResult, Error> {
        let version = self.begin(cmd::ADD, list, rt)?;

        let mut prev: Option<CniResult> = None;
        for plugin in &list.plugins {
            let prev_value = prev.as_ref().map(CniResult::to_value);
            let stdin = self.attachment_config(list, plugin, &version, prev_value.as_ref(), rt);
            let out = self.run(
                &list.name,
                plugin,
                cmd::ADD,
                &stdin,
                self.attachment_env(cmd::ADD, rt),
            )?;
            let invalid = |source: Box<dyn std::error::Error + Send + Sync>| Error::InvalidResult {
                network: list.name.clone(),
                plugin: plugin.plugin_type.clone(),
                command: cmd::ADD,
                source,
            };
            let result = CniResult::from_slice(&out, &version).map_err(|e| invalid(e.into()))?;
            let result = result.convert_to(&version).map_err(|e| invalid(e.into()))?;
            prev = Some(result);
        }
        let Some(result) = prev else {
            return Err(Error::Conf(conf::ConfError::NoPlugins {
                origin: conf::Origin(list.source.clone()),
                network: list.name.clone(),
            }));
        };

        let entry = CachedAttachment {
            container_id: rt.container_id.clone(),
            network: list.name.clone(),
            ifname: rt.ifname.clone(),
            config: cached_config_bytes(list),
            netns: rt.netns.clone(),
            cni_args: rt.args.clone(),
            capability_args: rt.capability_args.clone(),
            result: Some(result.to_value()),
        };
        self.cache_for(rt)
            .save(&entry)
            .map_err(|e| Error::cache(&list.name, e))?;
        Ok(result)
    }

    /// Deletes the container from the network: every plugin's DEL in reverse order, halting
    /// at the first plugin that fails (as the spec says).
    ///
    /// For versions 0.4.0 and later each plugin gets the cached ADD result as `prevResult`
    /// when there is one; without a cache entry (a failed or never-run ADD, or a second DEL)
    /// the DELs run without it. The cache entry is removed once every DEL succeeded, so a
    /// failed DEL can be retried. A plugin whose binary is missing is passed over so the
    /// plugins before it still clean up; the call then fails with
    /// [`Error::PluginNotFound`] and keeps the cache entry.
    pub fn del_network_list(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<(), Error> {
        let version = self.begin(cmd::DEL, list, rt)?;

        let prev = if at_least(&version, "0.4.0") {
            // A cached result that cannot be read or converted is not a reason to leave the
            // attachment in place: delete without it (libcni does the same).
            self.cached_result(list, rt, &version).ok().flatten()
        } else {
            None
        };
        let prev_value = prev.as_ref().map(CniResult::to_value);

        let mut missing = Vec::new();
        for plugin in list.plugins.iter().rev() {
            let stdin = self.attachment_config(list, plugin, &version, prev_value.as_ref(), rt);
            match self.run(
                &list.name,
                plugin,
                cmd::DEL,
                &stdin,
                self.attachment_env(cmd::DEL, rt),
            ) {
                Ok(_) => {}
                // A missing binary cannot clean up, but must not stop the plugins before it
                // from cleaning up theirs (an ADD that failed for the same reason ran them).
                Err(e @ Error::PluginNotFound { .. }) => missing.push(e),
                Err(e) => return Err(e),
            }
        }
        Error::from_all(missing)?;
        self.cache_for(rt)
            .remove(&list.name, &rt.container_id, &rt.ifname)
            .map_err(|e| Error::cache(&list.name, e))?;
        Ok(())
    }

    /// Checks the attachment: every plugin's CHECK in order with the cached ADD result,
    /// stopping at the first failure. Versions before 0.4.0 have no CHECK (an error);
    /// `disableCheck` makes it succeed without running anything; no cached result is an
    /// error.
    pub fn check_network_list(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<(), Error> {
        let version = self.begin(cmd::CHECK, list, rt)?;
        if !at_least(&version, "0.4.0") {
            return Err(Error::CheckUnsupported {
                network: list.name.clone(),
                version,
            });
        }
        if list.disable_check {
            return Ok(());
        }
        let Some(prev) = self.cached_result(list, rt, &version)? else {
            return Err(Error::NotAdded {
                network: list.name.clone(),
                container_id: rt.container_id.clone(),
                ifname: rt.ifname.clone(),
            });
        };
        let prev = prev.to_value();
        for plugin in &list.plugins {
            let stdin = self.attachment_config(list, plugin, &version, Some(&prev), rt);
            self.run(
                &list.name,
                plugin,
                cmd::CHECK,
                &stdin,
                self.attachment_env(cmd::CHECK, rt),
            )?;
        }
        Ok(())
    }

    /// Asks every plugin whether it is ready (STATUS, spec 1.1.0), stopping at the first
    /// that is not; its error carries code 50 (cannot serve ADD) or 51 (existing containers
    /// may also be affected). Below 1.1.0 there is no STATUS and this succeeds.
    pub fn get_status_network_list(&self, list: &NetworkConfigList) -> Result<(), Error> {
        let version = negotiated(list)?;
        if !at_least(&version, "1.1.0") {
            return Ok(());
        }
        for plugin in &list.plugins {
            let stdin = conf::inject(plugin, &list.name, &version, None, &Map::new());
            self.run(
                &list.name,
                plugin,
                cmd::STATUS,
                &stdin,
                self.bare_env(cmd::STATUS),
            )?;
        }
        Ok(())
    }

    /// Garbage-collects the network: DELs every cached attachment of this network that is not
    /// in `valid` (with the netns, args and capability arguments cached at ADD time), then,
    /// for 1.1.0 and later, runs every plugin's GC with the valid attachments under both
    /// `cni.dev/valid-attachments` and the older key `cni.dev/attachments`. Every step runs;
    /// all failures are returned together. `disableGC` makes it do nothing.
    ///
    /// The DEL uses the configuration cached with the attachment when it still names this
    /// network and `list` has no aggregated plugins (which the cached bytes would lack);
    /// otherwise `list`.
    pub fn gc_network_list(
        &self,
        list: &NetworkConfigList,
        valid: &[Attachment],
    ) -> Result<(), Error> {
        if list.disable_gc {
            return Ok(());
        }
        let version = negotiated(list)?;
        let mut errors = Vec::new();

        let cached = self
            .cache()
            .list(None)
            .map_err(|e| Error::cache(&list.name, e))?;
        for entry in cached.into_iter().filter(|e| e.network == list.name) {
            let rt = RuntimeConf {
                container_id: entry.container_id.clone(),
                netns: entry.netns.clone(),
                ifname: entry.ifname.clone(),
                args: entry.cni_args.clone(),
                capability_args: entry.capability_args.clone(),
                cache_dir: None,
            };
            if valid.contains(&rt.attachment()) {
                continue;
            }
            let cached_list = self.list_for_stale(list, &entry);
            if let Err(e) = self.del_network_list(cached_list.as_ref().unwrap_or(list), &rt) {
                errors.push(Error::StaleAttachment {
                    network: list.name.clone(),
                    container_id: rt.container_id,
                    ifname: rt.ifname,
                    source: Box::new(e),
                });
            }
        }

        if at_least(&version, "1.1.0") {
            let valid_json = serde_json::to_value(valid).unwrap_or_else(|_| json!([]));
            for plugin in &list.plugins {
                let mut stdin = conf::inject(plugin, &list.name, &version, None, &Map::new());
                if let Value::Object(m) = &mut stdin {
                    m.insert("cni.dev/valid-attachments".into(), valid_json.clone());
                    m.insert("cni.dev/attachments".into(), valid_json.clone());
                }
                if let Err(e) =
                    self.run(&list.name, plugin, cmd::GC, &stdin, self.bare_env(cmd::GC))
                {
                    errors.push(e);
                }
            }
        }
        Error::from_all(errors)
    }

    /// The network list to DEL a stale attachment with (see [`Self::gc_network_list`]).
    fn list_for_stale(
        &self,
        list: &NetworkConfigList,
        entry: &CachedAttachment,
    ) -> Option<NetworkConfigList> {
        if entry.config.is_empty() {
            return None;
        }
        let reparsed_current = conf::parse_list(&list.bytes, None)
            .or_else(|_| conf::parse_single(&list.bytes, None))
            .ok()?;
        if reparsed_current.plugins.len() != list.plugins.len() {
            return None; // aggregated plugins: the bytes alone do not describe the list
        }
        let cached = conf::parse_list(&entry.config, None)
            .or_else(|_| conf::parse_single(&entry.config, None))
            .ok()?;
        (cached.name == list.name).then_some(cached)
    }

    /// Checks that every plugin exists and supports the negotiated version, by asking each
    /// (VERSION). Returns the capabilities the plugins declare, sorted; all failures are
    /// reported together.
    pub fn validate_network_list(&self, list: &NetworkConfigList) -> Result<Vec<String>, Error> {
        let version = negotiated(list)?;
        let mut errors = Vec::new();
        let mut caps = BTreeSet::new();
        for plugin in &list.plugins {
            match self.version_info(&list.name, &plugin.plugin_type) {
                Ok(info) if info.supports(&version) => {}
                Ok(info) => errors.push(Error::UnsupportedByPlugin {
                    network: list.name.clone(),
                    plugin: plugin.plugin_type.clone(),
                    version: version.clone(),
                    supported: info.supported_versions,
                }),
                Err(e) => errors.push(e),
            }
            caps.extend(
                plugin
                    .capabilities
                    .iter()
                    .filter(|(_, on)| **on)
                    .map(|(k, _)| k.clone()),
            );
        }
        Error::from_all(errors)?;
        Ok(caps.into_iter().collect())
    }

    /// ADD of a single-plugin network (libcni `AddNetwork`), such as a `.conf` file's
    /// plugin: the network's name and `cniVersion` come from the plugin's own object.
    /// It runs as [`Self::add_network_list`] of the one-plugin list
    /// [`conf::conf_list_from_conf`] makes, so both cache the same entry.
    pub fn add_network(&self, net: &NetworkConfig, rt: &RuntimeConf) -> Result<CniResult, Error> {
        self.add_network_list(&single(net)?, rt)
    }

    /// CHECK of a single-plugin network (libcni `CheckNetwork`); see
    /// [`Self::check_network_list`].
    pub fn check_network(&self, net: &NetworkConfig, rt: &RuntimeConf) -> Result<(), Error> {
        self.check_network_list(&single(net)?, rt)
    }

    /// DEL of a single-plugin network (libcni `DelNetwork`); see
    /// [`Self::del_network_list`].
    pub fn del_network(&self, net: &NetworkConfig, rt: &RuntimeConf) -> Result<(), Error> {
        self.del_network_list(&single(net)?, rt)
    }

    /// The cached result of a single-plugin network's attachment (libcni
    /// `GetNetworkCachedResult`); see [`Self::get_network_list_cached_result`].
    pub fn get_network_cached_result(
        &self,
        net: &NetworkConfig,
        rt: &RuntimeConf,
    ) -> Result<Option<CniResult>, Error> {
        self.get_network_list_cached_result(&single(net)?, rt)
    }

    /// The cached configuration of a single-plugin network's attachment (libcni
    /// `GetNetworkCachedConfig`); see [`Self::get_network_list_cached_config`].
    pub fn get_network_cached_config(
        &self,
        net: &NetworkConfig,
        rt: &RuntimeConf,
    ) -> Result<Option<(Vec<u8>, RuntimeConf)>, Error> {
        self.get_network_list_cached_config(&single(net)?, rt)
    }

    /// Checks that a single-plugin network's plugin exists and supports its version
    /// (libcni `ValidateNetwork`); returns the capabilities it declares. See
    /// [`Self::validate_network_list`].
    pub fn validate_network(&self, net: &NetworkConfig) -> Result<Vec<String>, Error> {
        self.validate_network_list(&single(net)?)
    }

    /// Asks the plugin which versions it supports. A plugin that does not know the VERSION
    /// command is taken to support only 0.1.0, as libcni does.
    pub fn get_version_info(&self, plugin_type: &str) -> Result<VersionInfo, Error> {
        self.version_info("", plugin_type)
    }

    fn version_info(&self, network: &str, plugin_type: &str) -> Result<VersionInfo, Error> {
        let path =
            find_in_path(plugin_type, &self.path).map_err(|source| Error::PluginNotFound {
                network: network.to_owned(),
                source,
            })?;
        let stdin =
            serde_json::to_vec(&json!({ "cniVersion": version::CURRENT })).unwrap_or_default();
        let env = vec![
            env_var("CNI_COMMAND", cmd::VERSION),
            env_var("CNI_NETNS", "dummy"),
            env_var("CNI_IFNAME", "dummy"),
            env_var("CNI_PATH", "dummy"),
        ];
        let out = match self.exec.exec_plugin(&path, &stdin, &env, self.timeout) {
            Ok(out) => out,
            Err(ExecError::Plugin { msg, .. }) if msg.trim() == UNKNOWN_VERSION_COMMAND => {
                return Ok(VersionInfo::legacy())
            }
            Err(e) => return Err(Error::from_exec(network, plugin_type, cmd::VERSION, e)),
        };
        VersionInfo::from_slice(&out).map_err(|e| Error::InvalidResult {
            network: network.to_owned(),
            plugin: plugin_type.to_owned(),
            command: cmd::VERSION,
            source: e.into(),
        })
    }

    /// The cached attachments of one container, or of all containers when `container_id`
    /// is empty, sorted by cache file name.
    pub fn get_cached_attachments(
        &self,
        container_id: &str,
    ) -> Result<Vec<CachedAttachment>, Error> {
        let filter = (!container_id.is_empty()).then_some(container_id);
        self.cache().list(filter).map_err(|e| Error::cache("", e))
    }

    /// The cached result of the attachment, converted to the list's negotiated version;
    /// `None` when it is not cached.
    pub fn get_network_list_cached_result(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<Option<CniResult>, Error> {
        let version = negotiated(list)?;
        self.cached_result(list, rt, &version)
    }

    /// The configuration bytes cached for the attachment, and `rt` with the cached args and
    /// capability arguments (and netns, when `rt` has none); `None` when it is not cached.
    pub fn get_network_list_cached_config(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
    ) -> Result<Option<(Vec<u8>, RuntimeConf)>, Error> {
        let entry = self
            .cache_for(rt)
            .load(&list.name, &rt.container_id, &rt.ifname)
            .map_err(|e| Error::cache(&list.name, e))?;
        Ok(entry.map(|e| {
            let mut out = rt.clone();
            if !e.cni_args.is_empty() {
                out.args = e.cni_args;
            }
            out.capability_args = e.capability_args;
            if out.netns.is_none() {
                out.netns = e.netns;
            }
            (e.config, out)
        }))
    }

    fn cached_result(
        &self,
        list: &NetworkConfigList,
        rt: &RuntimeConf,
        version: &str,
    ) -> Result<Option<CniResult>, Error> {
        let entry = self
            .cache_for(rt)
            .load(&list.name, &rt.container_id, &rt.ifname)
            .map_err(|e| Error::cache(&list.name, e))?;
        let Some(value) = entry.and_then(|e| e.result) else {
            return Ok(None);
        };
        let unusable = |source: Box<dyn std::error::Error + Send + Sync>| Error::CachedResult {
            network: list.name.clone(),
            container_id: rt.container_id.clone(),
            ifname: rt.ifname.clone(),
            source,
        };
        let result = CniResult::from_value(value, version).map_err(|e| unusable(e.into()))?;
        let result = result.convert_to(version).map_err(|e| unusable(e.into()))?;
        Ok(Some(result))
    }

    /// The request for ADD, CHECK or DEL of one plugin.
    fn attachment_config(
        &self,
        list: &NetworkConfigList,
        plugin: &NetworkConfig,
        version: &str,
        prev: Option<&Value>,
        rt: &RuntimeConf,
    ) -> Value {
        let runtime_config = conf::runtime_config_for(plugin, &rt.capability_args);
        conf::inject(plugin, &list.name, version, prev, &runtime_config)
    }

    /// `CNI_*` variables for ADD, CHECK and DEL.
    fn attachment_env(&self, command: &str, rt: &RuntimeConf) -> Vec<(String, String)> {
        let mut env = vec![
            env_var("CNI_COMMAND", command),
            env_var("CNI_CONTAINERID", &rt.container_id),
        ];
        if let Some(netns) = &rt.netns {
            env.push(env_var("CNI_NETNS", &netns.to_string_lossy()));
        }
        env.push(env_var("CNI_IFNAME", &rt.ifname));
        if !rt.args.is_empty() {
            env.push(env_var("CNI_ARGS", &rt.args_string()));
        }
        env.push(env_var("CNI_PATH", &self.cni_path()));
        env
    }

    /// `CNI_*` variables for STATUS and GC.
    fn bare_env(&self, command: &str) -> Vec<(String, String)> {
        vec![
            env_var("CNI_COMMAND", command),
            env_var("CNI_PATH", &self.cni_path()),
        ]
    }

    fn cni_path(&self) -> String {
        self.path
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(":")
    }

    /// Finds and runs one plugin, attributing any failure to it.
    fn run(
        &self,
        network: &str,
        plugin: &NetworkConfig,
        command: &'static str,
        stdin: &Value,
        env: Vec<(String, String)>,
    ) -> Result<Vec<u8>, Error> {
        let path = find_in_path(&plugin.plugin_type, &self.path).map_err(|source| {
            Error::PluginNotFound {
                network: network.to_owned(),
                source,
            }
        })?;
        let stdin = serde_json::to_vec(stdin).unwrap_or_default();
        self.exec
            .exec_plugin(&path, &stdin, &env, self.timeout)
            .map_err(|e| Error::from_exec(network, &plugin.plugin_type, command, e))
    }
}

fn env_var(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

/// The configuration bytes to cache: the list's own bytes, or for a single-plugin `.conf`
/// network the list libcni makes of it (`ConfListFromConf`: `{"cniVersion", "name",
/// "plugins": [<the file's object>]}`), so every reader of the cache finds a list.
fn cached_config_bytes(list: &NetworkConfigList) -> Vec<u8> {
    match serde_json::from_slice::<Value>(&list.bytes) {
        Ok(Value::Object(single)) if !single.contains_key("plugins") => {
            let wrapped = json!({
                "cniVersion": list.cni_version.clone().unwrap_or_default(),
                "name": list.name,
                "plugins": [single],
            });
            serde_json::to_vec(&wrapped).unwrap_or_else(|_| list.bytes.clone())
        }
        _ => list.bytes.clone(),
    }
}

/// The one-plugin list a single-network operation runs as.
fn single(net: &NetworkConfig) -> Result<NetworkConfigList, Error> {
    Ok(conf::conf_list_from_conf(net)?)
}

fn negotiated(list: &NetworkConfigList) -> Result<String, Error> {
    list.negotiated_version().map_err(|source| Error::Version {
        network: list.name.clone(),
        source,
    })
}

fn at_least(version: &str, min: &str) -> bool {
    Version::parse(version).is_ok_and(|v| v.at_least(min))
}
