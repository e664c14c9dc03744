//! CNI orchestration for one pod: which networks it joins (`--net`), planning them (each
//! plugin resolved to its binary once), the ownership checks of what will run, setting them
//! up with the CNI library, recording what was done, tearing it down again and checking it.
//!
//! - [`selection`]: the `--net` parser.
//! - [`builtin`]: the built-in `default` and `default-restricted` networks.
//! - [`plan`]: turning a selection into the ordered list of configurations to set up, with
//!   the binary each plugin resolves to.
//! - [`record`]: `<pod>/net-info.json` and the configuration copies teardown uses.
//! - [`admission`]: the host-wide queue every ADD and DEL waits in.
//! - [`rp_filter`]: strict reverse-path filtering on the host side of the built-in
//!   networks' links, so that a pod cannot send with another source address.
//! - `teardown.rs`: teardown and check from the record; `runtime.rs`: the calls into the CNI
//!   library; `error.rs`: [`NetError`] and [`NetFailure`].
//!
//! [`preflight`], [`setup`], [`teardown`] and [`check`] are the operations; the pod's life
//! cycle calls them with the pod's UUID, directory and network namespace ([`PodNet`]).
//!
//! Takes from: [`crate::etc_files`] (it writes the pod's resolv.conf and hosts from the
//! results), [`crate::firewall`] (the sweep after DEL, port forwarding), [`crate::security`]
//! (given the files and binaries it planned), [`crate::podstore`], [`crate::fsutil`]. May
//! not touch: the pod's life cycle, its state record or the stage; the pod tells it what
//! to do and keeps what it returns.

pub mod admission;
pub mod builtin;
pub mod plan;
pub mod record;
pub mod rp_filter;
pub mod selection;

mod error;
mod runtime;
mod teardown;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::etc_files as dns;
use crate::firewall::ports;
use crate::security;

pub use crate::etc_files::{DnsError, DnsOptions, HostsOptions};
pub use crate::firewall::host_ports::HostPorts;
pub use crate::firewall::ports::{PortError, PortMapping, PortsLock};
pub use error::{NetError, NetFailure};
pub use plan::PlannedNet;
pub use record::{NetInfo, RecordError};
pub use selection::{NetRequest, NetSelection, SelectionError};
pub use teardown::{check, needs_sweep, teardown, CheckReport};

use teardown::{teardown_entries, Mode};

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
    /// `--port`: forwarded by the first selected network whose plugins declare
    /// `portMappings`.
    pub ports: Vec<PortMapping>,
    /// Refuse configuration and plugins that a user other than root could change
    /// ([`crate::security`]); off with `--insecure-options=net-plugins`.
    pub check_ownership: bool,
}

/// Checks everything about `opts` that can be checked before a pod exists: the DNS and
/// hosts options, that every named network exists, the ownership of what they would use
/// (when `check_ownership`), and that `--port` has a network able to forward it. Returns
/// the networks that would be set up.
pub fn preflight(opts: &NetOptions) -> Result<Vec<PlannedNet>, NetError> {
    opts.dns.validate()?;
    opts.hosts.validate()?;
    if opts.selection.is_host() {
        dns::check_host_net(&opts.dns, &opts.hosts)?;
    }
    let planned = plan_checked(
        &opts.selection,
        &opts.conf_dir,
        &opts.plugin_path,
        opts.check_ownership,
    )?;
    check_ports_possible(opts, &planned)?;
    Ok(planned)
}

/// Holds the host ports `opts.ports` forwards, for the pod's runner to keep until the pod's
/// networks are torn down ([`crate::firewall::host_ports`]). Called before the pod exists, so
/// that a busy port leaves nothing behind: a port another pod of `pods_dir` (other than
/// `own_uuid`) forwards names that pod; one a host process serves names the process. The
/// ports lock taken for the check comes with the ports, for [`setup_planned`] to keep until
/// the pod's record names them: a pod started at the same time then finds that record.
pub fn reserve_ports(
    opts: &NetOptions,
    pods_dir: &Path,
    own_uuid: &str,
) -> Result<HostPorts, NetError> {
    if opts.ports.is_empty() {
        return Ok(HostPorts::default());
    }
    let lock = ports::PortsLock::acquire(pods_dir)?;
    ports::check_taken(pods_dir, own_uuid, &opts.ports, |dir| {
        Some(record::forwarded_ports(&record::load(dir).ok()?))
    })?;
    Ok(crate::firewall::host_ports::reserve(&opts.ports)?.with_lock(lock))
}

/// The ownership checks of [`preflight`] on their own, for the networks `selection` names
/// (`rkt net status` runs their plugins as root too). Returns the networks checked, with
/// the plugin binaries that were examined and are to be run; none when the checks do not
/// apply, or when the networks cannot be planned (left to the command, which reports it).
pub fn check_ownership(
    selection: &NetSelection,
    conf_dir: &Path,
    plugin_path: &[PathBuf],
) -> Result<Vec<PlannedNet>, NetError> {
    if !checks_apply(selection, true) {
        return Ok(Vec::new());
    }
    match plan_checked(selection, conf_dir, plugin_path, true) {
        Err(NetError::Untrusted(e)) => Err(NetError::Untrusted(e)),
        Err(_) => Ok(Vec::new()),
        Ok(planned) => Ok(planned),
    }
}

/// Whether the ownership checks apply: asked for, to networks a pod would set up, and as
/// root ([`security::applies`]).
fn checks_apply(selection: &NetSelection, wanted: bool) -> bool {
    wanted && !selection.is_host() && !selection.is_none() && security::applies()
}

/// Plans the networks of `selection`, resolving each plugin once, and, when `check` and
/// the checks apply, refuses what a user other than root could change: the directories
/// first, then each planned network's file and the plugin binaries it resolved to.
/// Networks or plugins that cannot be found are left to setup, which reports them.
fn plan_checked(
    selection: &NetSelection,
    conf_dir: &Path,
    plugin_path: &[PathBuf],
    check: bool,
) -> Result<Vec<PlannedNet>, NetError> {
    let check = checks_apply(selection, check);
    if check {
        security::check_dirs(conf_dir, plugin_path)?;
    }
    let planned = plan::plan(selection, conf_dir, plugin_path)?;
    if check {
        for net in &planned {
            if !net.builtin {
                security::check_conf_file(&conf_dir.join(&net.file_name))?;
            }
            for plugin in &net.list.plugins {
                if let Some(binary) = net.binaries.get(&plugin.plugin_type) {
                    security::check_plugin(binary)?;
                }
            }
        }
    }
    Ok(planned)
}

/// `--port` needs networks, and at least one of them declaring the capability.
fn check_ports_possible(opts: &NetOptions, planned: &[PlannedNet]) -> Result<(), NetError> {
    if opts.ports.is_empty() {
        return Ok(());
    }
    if opts.selection.is_host() || opts.selection.is_none() {
        return Err(PortError::NoNetwork {
            net: opts.selection.to_string(),
        }
        .into());
    }
    let Some(forwarder) = planned.iter().find(|n| forwards_ports(n)) else {
        return Err(PortError::NoCapableNetwork {
            nets: planned.iter().map(|n| n.list.name.clone()).collect(),
        }
        .into());
    };
    if let Some(families) = ports::ipam_families(&forwarder.list.plugins) {
        ports::check_families(&opts.ports, &forwarder.list.name, &families)?;
    }
    Ok(())
}

/// Whether a plugin of the network declares the `portMappings` capability.
fn forwards_ports(net: &PlannedNet) -> bool {
    net.list
        .plugins
        .iter()
        .any(|p| p.has_capability(ports::CAPABILITY))
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
    /// How long each plugin call may take (`$RKT_NET_PLUGIN_TIMEOUT`, which the command
    /// line reads once: [`crate::security::plugin_timeout`]).
    pub plugin_timeout: Duration,
}

/// Sets up the pod's networks as `opts` says and writes its resolv.conf and hosts files.
///
/// - `host`: nothing (no plugins, no files, the host's `/etc` files are visible).
/// - `none`: no plugins; `/etc/hosts` (unless `--hosts-entry=host`), and `/etc/resolv.conf`
///   only from `--dns` addresses.
/// - networks: each selected network is ADDed in configuration file-name order on `eth0`,
///   `eth1`, …; its record entry is written before its ADD. When an ADD fails, that network
///   and every earlier one are DELeted in reverse, and the error names the network and plugin.
///   `--port` goes to the first of them (in that order) whose plugins declare
///   `portMappings`, after checking that no other pod forwards those host ports.
///
/// Returns the recorded networks (empty for `host` and `none`).
pub fn setup(pod: &PodNet, opts: &NetOptions) -> Result<Vec<NetInfo>, NetError> {
    let planned = plan::plan(&opts.selection, &opts.conf_dir, &opts.plugin_path)?;
    setup_planned(pod, opts, planned, None)
}

/// [`setup`] with the networks [`preflight`] planned for the same options, so that the
/// configuration directory is read once per pod. `ports_lock`: the lock [`reserve_ports`]
/// checked other pods' ports under, held since (the check is then not repeated).
pub fn setup_planned(
    pod: &PodNet,
    opts: &NetOptions,
    planned: Vec<PlannedNet>,
    ports_lock: Option<ports::PortsLock>,
) -> Result<Vec<NetInfo>, NetError> {
    let dns_mode = opts.dns.mode()?;
    let hosts = opts.hosts.parse()?;
    if !opts.ports.is_empty() && (opts.selection.is_host() || opts.selection.is_none()) {
        check_ports_possible(opts, &[])?;
    }
    // The pod's UTS namespace is its own even on the host's network: its /etc/hostname
    // too, written with the other pod files (after the ADDs, which a failure rolls back).
    let write_hostname = || -> Result<(), NetError> {
        if !opts.hostname.is_empty() {
            dns::write_hostname(pod.pod_dir, &opts.hostname)?;
        }
        Ok(())
    };
    let nets = match &opts.selection {
        NetSelection::Host => return write_hostname().map(|()| Vec::new()),
        NetSelection::None => Vec::new(),
        _ => {
            let netns = pod.netns.ok_or_else(|| NetError::NoNetns {
                uuid: pod.uuid.to_string(),
            })?;
            let existing = record::load(pod.pod_dir)?;
            if !existing.is_empty() {
                return Err(NetError::AlreadySetUp {
                    uuid: pod.uuid.to_string(),
                    nets: existing.into_iter().map(|n| n.net_name).collect(),
                });
            }
            check_ports_possible(opts, &planned)?;
            // Held from the check of other pods' ports until our record names ours.
            let ports_lock = match (opts.ports.is_empty(), pod.pod_dir.parent()) {
                _ if ports_lock.is_some() => ports_lock,
                (false, Some(pods_dir)) => {
                    let lock = ports::PortsLock::acquire(pods_dir)?;
                    ports::check_taken(pods_dir, pod.uuid, &opts.ports, |dir| {
                        Some(record::forwarded_ports(&record::load(dir).ok()?))
                    })?;
                    Some(lock)
                }
                _ => None,
            };
            add_all(pod, netns, opts, &planned, ports_lock)?
        }
    };
    if let Err(e) =
        write_dns_files(pod, opts, &dns_mode, &hosts, &nets).and_then(|()| write_hostname())
    {
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
    mut ports_lock: Option<ports::PortsLock>,
) -> Result<Vec<NetInfo>, NetError> {
    let mut entries: Vec<NetInfo> = Vec::new();
    let port_args = ports::capability_args(&opts.ports);
    // One network forwards the ports: two portmaps would race for the same host port.
    let forwarder = planned.iter().position(forwards_ports);
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
            plugin_path: main_plugin_path(net),
            if_name: if_name.clone(),
            ip: None,
            args: net.args.clone(),
            mask: None,
            plugin_dirs: opts.plugin_path.clone(),
            cache_dir: Some(opts.cache_dir.clone()),
            cni_version: net.list.cni_version.clone(),
            capability_args: if forwarder == Some(i) {
                port_args.clone()
            } else {
                Default::default()
            },
            result: None,
        });
        if let Err(e) = record::save(pod.pod_dir, &entries) {
            return Err(abort(pod, entries, e.into()));
        }
        if !entries[i].capability_args.is_empty() {
            // The record now names our ports: other pods' checks see them.
            ports_lock.take();
        }
        let rt = runtime::Attachment {
            uuid: pod.uuid,
            netns: Some(netns),
            if_name: &if_name,
            args: &entries[i].args,
            capability_args: &entries[i].capability_args,
            plugin_dirs: &opts.plugin_path,
            cache_dir: &opts.cache_dir,
            timeout: pod.plugin_timeout,
        };
        // Queued until the host has room; interrupted (`rkt stop`, Ctrl-C) meanwhile, the
        // start is abandoned before any plugin ran.
        let slot = match admission::Queue::for_pod_dir(pod.pod_dir)
            .admit(Some(crate::pending_signal::interrupted))
        {
            Ok(slot) => slot,
            Err(e) => {
                // No plugin of this network ran: only the earlier ones need their DEL (a
                // DEL here would wait in the same queue for nothing).
                entries.pop();
                if let Err(save) = record::save(pod.pod_dir, &entries) {
                    return Err(abort(pod, entries, save.into()));
                }
                return Err(abort(pod, entries, e.into()));
            }
        };
        let added = runtime::add(&net.list, &net.binaries, &rt);
        drop(slot);
        match added {
            Ok(added) => {
                let entry = &mut entries[i];
                entry.ip = added.ip;
                entry.mask = added.mask;
                entry.result = Some(added.result);
                if let Err(e) = record::update(pod.pod_dir, &entries) {
                    return Err(abort(pod, entries, e.into()));
                }
                if net.builtin {
                    // Before the app runs: no packet of the pod's with another source.
                    let conf = Path::new(rp_filter::IPV4_CONF);
                    let result = entries[i]
                        .result
                        .as_ref()
                        .unwrap_or(&serde_json::Value::Null);
                    match rp_filter::protect(conf, &net.list.name, result) {
                        Ok(Some(warning)) => eprintln!("rkt: warning: {warning}"),
                        Ok(None) => {}
                        Err(e) => return Err(abort(pod, entries, e.into())),
                    }
                }
                if forwarder == Some(i) {
                    // What the configuration could not tell before: the addresses given.
                    if let Err(e) = ports::check_families(&opts.ports, &net.list.name, &added.ips) {
                        return Err(abort(pod, entries, e.into()));
                    }
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
                    error: source,
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
        error: Box::new(error),
        cleanup,
    }
}

/// The binary the network's first plugin resolved to, or its type when it was not found
/// (the ADD will then fail with the full search path).
fn main_plugin_path(net: &PlannedNet) -> String {
    let ty = net.main_plugin_type();
    match net.binaries.get(ty) {
        Some(p) => p.display().to_string(),
        None => ty.to_string(),
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
                        let rc = rc.with_flags(&opts.dns);
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
            if chosen.is_none() && opts.dns.has_extras() {
                write_host_resolv_conf_with_flags(pod, opts)?;
            }
        }
        dns::DnsMode::Host | dns::DnsMode::None if opts.dns.has_extras() => {
            write_host_resolv_conf_with_flags(pod, opts)?;
        }
        dns::DnsMode::Host | dns::DnsMode::None => {}
    }
    if !opts.hosts.is_host() {
        dns::write_hosts(pod.pod_dir, &dns::render_hosts(&opts.hostname, hosts))?;
    }
    Ok(())
}

/// `--dns-search`, `--dns-opt` or `--dns-domain` where the pod would see the host's
/// resolv.conf: the host's settings (its name servers) with those flags applied.
fn write_host_resolv_conf_with_flags(pod: &PodNet, opts: &NetOptions) -> Result<(), NetError> {
    let host = std::fs::read_to_string(HOST_RESOLV_CONF).unwrap_or_default();
    let rc = dns::ResolvConf::parse(&host).with_flags(&opts.dns);
    dns::write_resolv_conf(pod.pod_dir, &rc.render(dns::HOST_FLAGS_HEADER))?;
    Ok(())
}

/// The host's resolver configuration.
const HOST_RESOLV_CONF: &str = "/etc/resolv.conf";

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
