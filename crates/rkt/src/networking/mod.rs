//! Pod networking: which networks a pod joins (`--net`), setting them up with CNI plugins,
//! recording what was done, tearing it down again, and the pod's resolv.conf and hosts.
//!
//! - [`selection`]: the `--net` parser.
//! - [`builtin`]: the built-in `default` and `default-restricted` networks.
//! - [`plan`]: turning a selection into the ordered list of configurations to set up.
//! - [`record`]: `<pod>/net-info.json` and the configuration copies teardown uses.
//! - [`dns`]: `--dns*` / `--hosts-entry` and the pod's `/etc/resolv.conf` and `/etc/hosts`.
//! - [`sweep`]: firewall rules a plugin's DEL left behind for the pod.
//!
//! [`setup`], [`teardown`] and [`check`] are the operations; the pod code calls them with
//! the pod's UUID, directory and network namespace.

pub mod builtin;
pub mod dns;
pub mod plan;
pub mod record;
pub mod selection;
pub mod sweep;

mod runtime;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use cni::conf::NetworkConfigList;

pub use dns::{DnsError, DnsOptions, HostsOptions};
pub use plan::PlannedNet;
pub use record::{NetInfo, RecordError};
pub use selection::{NetRequest, NetSelection, SelectionError};

/// Everything setup needs besides the pod itself: the selection and the directories in
/// effect, DNS and hosts options, and the pod's hostname (for `/etc/hosts`).
#[derive(Debug, Clone)]
pub struct NetOptions {
    /// What `--net` selected.
    pub selection: NetSelection,
    /// The network configuration directory (`--net-conf-dir` or configuration).
    pub conf_dir: PathBuf,
    /// The plugin search path, in order.
    pub plugin_path: Vec<PathBuf>,
    /// The CNI cache directory (libcni's `/var/lib/cni` unless told otherwise).
    pub cache_dir: PathBuf,
    /// `--dns`, `--dns-search`, `--dns-opt`, `--dns-domain`.
    pub dns: DnsOptions,
    /// `--hosts-entry`.
    pub hosts: HostsOptions,
    /// The pod's hostname.
    pub hostname: String,
}

/// The pod, as networking sees it.
#[derive(Debug, Clone, Copy)]
pub struct PodNet<'a> {
    /// The pod UUID, passed to the plugins as `CNI_CONTAINERID`.
    pub uuid: &'a str,
    /// The pod directory, where the record and the generated files go.
    pub pod_dir: &'a Path,
    /// The pod's network namespace (`None` with `--net=host`, or when it is already gone at
    /// teardown).
    pub netns: Option<&'a Path>,
}

/// One recorded network that an operation (teardown, check) failed on, and why.
#[derive(Debug, thiserror::Error)]
pub enum NetFailure {
    /// Its record entry or configuration copy could not be used.
    #[error("network {net:?} ({if_name}): {source}")]
    Record {
        net: String,
        if_name: String,
        source: RecordError,
    },
    /// Its saved configuration does not parse.
    #[error("network {net:?} ({if_name}): saved configuration: {source}")]
    Conf {
        net: String,
        if_name: String,
        source: Box<cni::conf::ConfError>,
    },
    /// The record file itself could not be rewritten or removed.
    #[error(transparent)]
    RecordFile(RecordError),
    /// Plugins of the network are no longer in its recorded plugin directories; the others
    /// were DELeted.
    #[error(
        "network {net:?} ({if_name}): plugin(s) {} not found in {}; what they set up may be left behind (reinstall them and tear down again)",
        plugins.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", "),
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(":")
    )]
    PluginMissing {
        net: String,
        if_name: String,
        plugins: Vec<String>,
        dirs: Vec<PathBuf>,
    },
    /// The DEL succeeded but the firewall rules it left behind could not be removed.
    #[error("network {net:?} ({if_name}): {source}")]
    Sweep {
        net: String,
        if_name: String,
        source: sweep::SweepError,
    },
    /// The CNI operation (DEL, CHECK) failed.
    #[error("network {net:?} ({if_name}): {source}")]
    Cni {
        net: String,
        if_name: String,
        source: Box<cni::error::Error>,
    },
}

/// Why setting up or tearing down a pod's networks failed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Named networks that are neither configured nor built in.
    #[error("networks not found: {}", names.join(", "))]
    NotFound { names: Vec<String> },
    /// The configuration directory exists but cannot be read.
    #[error("cannot load network configurations: {source}")]
    ConfDir {
        dir: PathBuf,
        source: Box<cni::conf::ConfError>,
    },
    /// A built-in configuration failed to parse (a bug).
    #[error("built-in network {net:?}: {source}")]
    Builtin {
        net: String,
        source: Box<cni::conf::ConfError>,
    },
    /// Networks were selected but the pod has no network namespace.
    #[error("pod {uuid}: networks need a network namespace, but none was given")]
    NoNetns { uuid: String },
    /// The pod already has networks recorded; they must be torn down first.
    #[error("pod {uuid} already has networks set up ({}); tear them down first", nets.join(", "))]
    AlreadySetUp { uuid: String, nets: Vec<String> },
    /// A DNS or hosts option, or writing the files.
    #[error(transparent)]
    Dns(#[from] DnsError),
    /// Reading or writing the record.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// ADD failed for `net`; everything set up before it (and `net` itself) was torn down,
    /// except what `cleanup` lists.
    #[error(
        "cannot set up network {net:?} (plugin {plugin:?}): {source}{}",
        cleanup_suffix(cleanup)
    )]
    Add {
        net: String,
        plugin: String,
        source: Box<cni::error::Error>,
        cleanup: Vec<NetFailure>,
    },
    /// Setup failed for a reason other than a plugin (writing the record or the DNS files);
    /// what was set up was torn down, except what `cleanup` lists.
    #[error("{source}{}", cleanup_suffix(cleanup))]
    Aborted {
        source: Box<NetError>,
        cleanup: Vec<NetFailure>,
    },
    /// Some networks could not be torn down; every one was tried. The record keeps them, so
    /// teardown can be retried.
    #[error("pod {uuid}: teardown failed for {} network(s): {}", failures.len(), join_failures(failures))]
    Teardown {
        uuid: String,
        failures: Vec<NetFailure>,
    },
}

fn join_failures(failures: &[NetFailure]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn cleanup_suffix(cleanup: &[NetFailure]) -> String {
    if cleanup.is_empty() {
        String::new()
    } else {
        format!(" (and cleaning up failed too: {})", join_failures(cleanup))
    }
}

/// Sets up the pod's networks as `opts` says and writes its resolv.conf and hosts files.
///
/// - `host`: nothing (no plugins, no files, the host's `/etc` files are visible).
/// - `none`: no plugins; `/etc/hosts` (unless `--hosts-entry=host`), and `/etc/resolv.conf`
///   only from `--dns` addresses.
/// - networks: each selected network is ADDed in configuration file-name order on `eth0`,
///   `eth1`, …; its record entry is written before its ADD. When an ADD fails, that network
///   and every earlier one are DELeted in reverse, and the error names the network and plugin.
///
/// Returns the recorded networks (empty for `host` and `none`).
pub fn setup(pod: &PodNet, opts: &NetOptions) -> Result<Vec<NetInfo>, NetError> {
    let dns_mode = opts.dns.mode()?;
    let hosts = opts.hosts.parse()?;
    let nets = match &opts.selection {
        NetSelection::Host => return Ok(Vec::new()),
        NetSelection::None => Vec::new(),
        selection => {
            let netns = pod.netns.ok_or_else(|| NetError::NoNetns {
                uuid: pod.uuid.to_string(),
            })?;
            let planned = plan::plan(selection, &opts.conf_dir)?;
            let existing = record::load(pod.pod_dir)?;
            if !existing.is_empty() {
                return Err(NetError::AlreadySetUp {
                    uuid: pod.uuid.to_string(),
                    nets: existing.into_iter().map(|n| n.net_name).collect(),
                });
            }
            add_all(pod, netns, opts, &planned)?
        }
    };
    if let Err(e) = write_dns_files(pod, opts, &dns_mode, &hosts, &nets) {
        return Err(abort(pod, nets, e));
    }
    Ok(nets)
}

/// ADDs `planned` in order, recording each before its ADD; rolls back on failure.
fn add_all(
    pod: &PodNet,
    netns: &Path,
    opts: &NetOptions,
    planned: &[PlannedNet],
) -> Result<Vec<NetInfo>, NetError> {
    let mut entries: Vec<NetInfo> = Vec::new();
    for (i, net) in planned.iter().enumerate() {
        let if_name = format!("eth{i}");
        let (file_name, bytes) = net.saved_copy();
        let net_conf = match record::save_conf(pod.pod_dir, &file_name, &bytes, &entries) {
            Ok(rel) => rel,
            Err(e) => return Err(abort(pod, entries, e.into())),
        };
        entries.push(NetInfo {
            net_name: net.list.name.clone(),
            net_conf,
            plugin_path: main_plugin_path(net, &opts.plugin_path),
            if_name: if_name.clone(),
            ip: None,
            args: net.args.clone(),
            mask: None,
            plugin_dirs: opts.plugin_path.clone(),
            cache_dir: Some(opts.cache_dir.clone()),
            cni_version: net.list.cni_version.clone(),
            capability_args: Default::default(),
            result: None,
        });
        if let Err(e) = record::save(pod.pod_dir, &entries) {
            return Err(abort(pod, entries, e.into()));
        }
        let rt = runtime::Attachment {
            uuid: pod.uuid,
            netns: Some(netns),
            if_name: &if_name,
            args: &entries[i].args,
            capability_args: &entries[i].capability_args,
            plugin_dirs: &opts.plugin_path,
            cache_dir: &opts.cache_dir,
        };
        match runtime::add(&net.list, &rt) {
            Ok(added) => {
                let entry = &mut entries[i];
                entry.ip = added.ip;
                entry.mask = added.mask;
                entry.result = Some(added.result);
                if let Err(e) = record::save(pod.pod_dir, &entries) {
                    return Err(abort(pod, entries, e.into()));
                }
            }
            Err(source) => {
                let plugin = runtime::failed_plugin(&source)
                    .unwrap_or_else(|| net.main_plugin_type().to_string());
                let cleanup = teardown_entries(
                    pod,
                    entries,
                    Mode::Rollback {
                        failed: Some(&source),
                    },
                );
                return Err(NetError::Add {
                    net: net.list.name.clone(),
                    plugin,
                    source,
                    cleanup,
                });
            }
        }
    }
    Ok(entries)
}

/// Tears down `entries` after setup failed for a reason other than a plugin (`error`).
fn abort(pod: &PodNet, entries: Vec<NetInfo>, error: NetError) -> NetError {
    let cleanup = teardown_entries(pod, entries, Mode::Rollback { failed: None });
    NetError::Aborted {
        source: Box::new(error),
        cleanup,
    }
}

/// The binary the network's first plugin resolves to, or its type when it is not found
/// (the ADD will then fail with the full search path).
fn main_plugin_path(net: &PlannedNet, dirs: &[PathBuf]) -> String {
    let ty = net.main_plugin_type();
    match cni::invoke::find_in_path(ty, dirs) {
        Ok(p) => p.display().to_string(),
        Err(_) => ty.to_string(),
    }
}

/// Writes `<pod>/etc/resolv.conf` and `<pod>/etc/hosts` as the DNS mode and the network
/// results say.
fn write_dns_files(
    pod: &PodNet,
    opts: &NetOptions,
    mode: &dns::DnsMode,
    hosts: &[dns::HostsEntry],
    nets: &[NetInfo],
) -> Result<(), NetError> {
    match mode {
        dns::DnsMode::Servers(ips) => {
            let text = dns::ResolvConf::from_flags(ips, &opts.dns).render(dns::RUN_HEADER);
            dns::write_resolv_conf(pod.pod_dir, &text)?;
        }
        dns::DnsMode::Cni => {
            let mut chosen: Option<&str> = None;
            for net in nets {
                let Some(rc) = net.result.as_ref().and_then(runtime::result_dns) else {
                    continue;
                };
                match chosen {
                    None => {
                        let text = rc.render(&dns::network_header(&net.net_name));
                        dns::write_resolv_conf(pod.pod_dir, &text)?;
                        chosen = Some(&net.net_name);
                    }
                    Some(first) => eprintln!(
                        "rkt: warning: network {:?} also returned DNS settings; using those of network {first:?}",
                        net.net_name
                    ),
                }
            }
        }
        dns::DnsMode::Host | dns::DnsMode::None => {}
    }
    if !opts.hosts.is_host() {
        dns::write_hosts(pod.pod_dir, &dns::render_hosts(&opts.hostname, hosts))?;
    }
    Ok(())
}

/// Tears down every network recorded for the pod, in reverse order, each with its recorded
/// configuration copy, plugin path and cache directory. Every network is tried; failures are
/// collected. Networks that came down leave the record; when all did, the record and the
/// copies are removed. Calling it again (or on a pod without networks) is fine.
pub fn teardown(pod: &PodNet) -> Result<(), NetError> {
    let entries = record::load(pod.pod_dir)?;
    let failures = teardown_entries(pod, entries, Mode::Teardown);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(NetError::Teardown {
            uuid: pod.uuid.to_string(),
            failures,
        })
    }
}

/// Why networks are being DELeted.
#[derive(Debug, Clone, Copy)]
enum Mode<'a> {
    /// Regular teardown (pod exit, `rm`, `gc`).
    Teardown,
    /// Rolling back a setup whose last network's ADD just failed with `failed`.
    ///
    /// A plugin that is missing now was missing at ADD too, so it never ran and has nothing
    /// to undo. And when the failed plugin refuses the DEL exactly as it refused the ADD
    /// (typically a configuration it cannot parse), it never got to set anything up: it is
    /// left out so the plugins before it in the list still get their DEL.
    Rollback {
        failed: Option<&'a cni::error::Error>,
    },
}

/// DELs `entries` in reverse; returns every failure (empty when all came down).
fn teardown_entries(pod: &PodNet, entries: Vec<NetInfo>, mode: Mode) -> Vec<NetFailure> {
    // A namespace that is already gone is not passed on: plugins then only release what
    // they hold on the host side.
    let netns = pod.netns.filter(|p| p.exists());
    let mut failures = Vec::new();
    let mut kept = Vec::new();
    for (i, entry) in entries.into_iter().rev().enumerate() {
        // Only the network whose ADD failed (the last one) may have refused its config.
        let add_failure = match mode {
            Mode::Rollback { failed } if i == 0 => failed,
            _ => None,
        };
        let skip_missing = matches!(mode, Mode::Rollback { .. });
        match teardown_one(pod, netns, &entry, skip_missing, add_failure) {
            Ok(()) => {
                if let Err(source) = record::remove_conf(pod.pod_dir, &entry) {
                    failures.push(NetFailure::Record {
                        net: entry.net_name.clone(),
                        if_name: entry.if_name.clone(),
                        source,
                    });
                }
            }
            Err(f) => {
                failures.push(f);
                kept.push(entry);
            }
        }
    }
    let done = if failures.is_empty() {
        record::remove(pod.pod_dir)
    } else {
        kept.reverse();
        record::save(pod.pod_dir, &kept)
    };
    if let Err(e) = done {
        failures.push(NetFailure::RecordFile(e));
    }
    failures
}

fn teardown_one(
    pod: &PodNet,
    netns: Option<&Path>,
    entry: &NetInfo,
    skip_missing: bool,
    add_failure: Option<&cni::error::Error>,
) -> Result<(), NetFailure> {
    let net = || entry.net_name.clone();
    let if_name = || entry.if_name.clone();
    let mut list = saved_list(pod.pod_dir, entry)?;
    // libcni's DEL stops at the first plugin it cannot run, which would skip the DEL of
    // every plugin before it; DEL the plugins that exist instead.
    let (present, absent): (Vec<_>, Vec<_>) = list
        .plugins
        .into_iter()
        .partition(|p| cni::invoke::find_in_path(&p.plugin_type, &entry.plugin_dirs).is_ok());
    list.plugins = present;
    let cache_dir = cache_dir_of(entry);
    let rt = runtime::Attachment::recorded(pod.uuid, netns, entry, &cache_dir);
    while !list.plugins.is_empty() {
        let Err(source) = runtime::del(&list, &rt) else {
            break;
        };
        let refused = add_failure.and_then(|add| runtime::same_refusal(add, &source));
        let Some(pos) = refused.and_then(|p| list.plugins.iter().rposition(|x| x.plugin_type == p))
        else {
            return Err(NetFailure::Cni {
                net: net(),
                if_name: if_name(),
                source,
            });
        };
        list.plugins.remove(pos);
    }
    sweep::sweep(&entry.net_name, pod.uuid).map_err(|source| NetFailure::Sweep {
        net: net(),
        if_name: if_name(),
        source,
    })?;
    if absent.is_empty() || skip_missing {
        return Ok(());
    }
    Err(NetFailure::PluginMissing {
        net: net(),
        if_name: if_name(),
        plugins: absent.into_iter().map(|p| p.plugin_type).collect(),
        dirs: entry.plugin_dirs.clone(),
    })
}

/// The configuration a network was set up with, from the pod's copy.
fn saved_list(pod_dir: &Path, entry: &NetInfo) -> Result<NetworkConfigList, NetFailure> {
    let bytes = record::read_conf(pod_dir, entry).map_err(|source| NetFailure::Record {
        net: entry.net_name.clone(),
        if_name: entry.if_name.clone(),
        source,
    })?;
    let path = pod_dir.join(&entry.net_conf);
    plan::parse_saved(&bytes, &path).map_err(|source| NetFailure::Conf {
        net: entry.net_name.clone(),
        if_name: entry.if_name.clone(),
        source: Box::new(source),
    })
}

/// The CNI cache directory a network was set up with (libcni's default for old records).
fn cache_dir_of(entry: &NetInfo) -> PathBuf {
    entry
        .cache_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(runtime::DEFAULT_CACHE_DIR))
}

/// One network's outcome of [`check`].
#[derive(Debug)]
pub struct CheckReport {
    /// The network.
    pub net_name: String,
    /// Its interface in the pod.
    pub if_name: String,
    /// `Ok` when every plugin's CHECK passed.
    pub result: Result<(), NetFailure>,
}

/// Runs CNI CHECK for every network recorded for the pod, in setup order, each with its
/// recorded configuration, plugin path and cache directory, and reports per network.
/// Networks whose configuration predates CHECK (`cniVersion` before 0.4.0) report that.
pub fn check(pod: &PodNet) -> Result<Vec<CheckReport>, NetError> {
    let netns = pod.netns.ok_or_else(|| NetError::NoNetns {
        uuid: pod.uuid.to_string(),
    })?;
    let reports = record::load(pod.pod_dir)?
        .iter()
        .map(|entry| {
            let result = saved_list(pod.pod_dir, entry).and_then(|list| {
                let cache_dir = cache_dir_of(entry);
                let rt = runtime::Attachment::recorded(pod.uuid, Some(netns), entry, &cache_dir);
                runtime::check(&list, &rt).map_err(|source| NetFailure::Cni {
                    net: entry.net_name.clone(),
                    if_name: entry.if_name.clone(),
                    source,
                })
            });
            CheckReport {
                net_name: entry.net_name.clone(),
                if_name: entry.if_name.clone(),
                result,
            }
        })
        .collect();
    Ok(reports)
}

/// The pod's recorded networks (empty when it has none), for `status` and `list`.
pub fn load_record(pod_dir: &Path) -> Result<Vec<NetInfo>, NetError> {
    Ok(record::load(pod_dir)?)
}

/// The netmask for a prefix length, in address form (`255.255.255.0`), as rkt records it.
pub(crate) fn prefix_to_mask(ip: &IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(_) => {
            let bits = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix.min(32)))
            };
            IpAddr::V4(bits.into())
        }
        IpAddr::V6(_) => {
            let bits = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix.min(128)))
            };
            IpAddr::V6(bits.into())
        }
    }
}
