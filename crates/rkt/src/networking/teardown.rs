//! Taking a pod's networks down again, and checking them, from the pod's record alone:
//! each network with its saved configuration, plugin path and cache directory, so it works
//! after the configuration or the flags changed. Teardown tries every network and collects
//! every failure; rollback of a failed setup goes through the same path.

use std::path::{Path, PathBuf};

use cni::conf::NetworkConfigList;

use super::error::{NetError, NetFailure};
use super::record::{self, NetInfo};
use super::{admission, plan, runtime, PodNet};
use crate::firewall::{ports, sweep};

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
pub(crate) enum Mode<'a> {
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
pub(crate) fn teardown_entries(pod: &PodNet, entries: Vec<NetInfo>, mode: Mode) -> Vec<NetFailure> {
    // A namespace that is already gone is not passed on: plugins then only release what
    // they hold on the host side.
    let netns = pod.netns.filter(|p| p.exists());
    let mut failures = Vec::new();
    let mut kept = Vec::new();
    let mut down = Vec::new();
    for (i, entry) in entries.into_iter().rev().enumerate() {
        // Only the network whose ADD failed (the last one) may have refused its config.
        let add_failure = match mode {
            Mode::Rollback { failed } if i == 0 => failed,
            _ => None,
        };
        match teardown_one(pod, netns, &entry, mode, add_failure) {
            Ok(()) => down.push(entry),
            Err(f) => {
                failures.push(f);
                kept.push(entry);
            }
        }
    }
    // The record first, then the copies of the networks that came down: killed in between,
    // rkt leaves copies that nothing names, never a record naming a copy that is gone
    // (which no later teardown could DEL).
    if kept.is_empty() {
        // Only the record: the copies stay until the pod directory goes (see
        // `record::remove`).
        if let Err(e) = record::remove(pod.pod_dir) {
            failures.push(NetFailure::RecordFile(e));
        }
        return failures;
    }
    kept.reverse();
    // Durable, since the copies go next: a machine crash must not bring back a record
    // that names them.
    if let Err(e) = record::save(pod.pod_dir, &kept) {
        failures.push(NetFailure::RecordFile(e));
        return failures;
    }
    for entry in down {
        if let Err(source) = record::remove_conf(pod.pod_dir, &entry) {
            failures.push(NetFailure::Record {
                net: entry.net_name.clone(),
                if_name: entry.if_name.clone(),
                source,
            });
        }
    }
    failures
}

fn teardown_one(
    pod: &PodNet,
    netns: Option<&Path>,
    entry: &NetInfo,
    mode: Mode,
    add_failure: Option<&cni::error::Error>,
) -> Result<(), NetFailure> {
    let net = || entry.net_name.clone();
    let if_name = || entry.if_name.clone();
    let skip_missing = matches!(mode, Mode::Rollback { .. });
    let mut list = saved_list(pod.pod_dir, entry)?;
    let may_leave_rules = needs_sweep(&list);
    // Decided before the DEL, which removes the interface.
    let plugins_clean = may_leave_rules && plugins_clean_up(&list, entry, mode, netns);
    // Rolling back an ADD that failed on a missing binary: that plugin never ran, so the
    // others are DELeted and the attachment forgotten. Otherwise the library's DEL passes
    // over a missing binary, so the plugins before it still clean up, and fails naming it,
    // keeping the cached ADD result for the retry once the plugin is back.
    if skip_missing {
        list.plugins
            .retain(|p| cni::invoke::find_in_path(&p.plugin_type, &entry.plugin_dirs).is_ok());
    }
    let cache_dir = cache_dir_of(entry);
    let rt = runtime::Attachment::recorded(pod.uuid, netns, entry, &cache_dir, pod.plugin_timeout);
    // The DEL and the sweep run in their turn (never given up: a teardown must happen).
    let _slot = admission::Queue::for_pod_dir(pod.pod_dir)
        .admit(None)
        .map_err(|source| NetFailure::Admission {
            net: net(),
            if_name: if_name(),
            source,
        })?;
    let mut missing = Vec::new();
    while !list.plugins.is_empty() {
        let Err(source) = runtime::del(&list, &rt) else {
            break;
        };
        if let Some(names) = missing_plugins(&source) {
            missing = names; // reported below, with the directories searched
            break;
        }
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
    // Skipped only when every plugin really ran its DEL (none was missing).
    if may_leave_rules && !(plugins_clean && missing.is_empty()) {
        sweep::sweep(&entry.net_name, pod.uuid).map_err(|source| NetFailure::Sweep {
            net: net(),
            if_name: if_name(),
            source,
        })?;
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(NetFailure::PluginMissing {
        net: net(),
        if_name: if_name(),
        plugins: missing,
        dirs: entry.plugin_dirs.clone(),
    })
}

/// The plugins whose binaries were missing, when that is all a DEL failed for (every other
/// plugin's DEL succeeded).
fn missing_plugins(e: &cni::error::Error) -> Option<Vec<String>> {
    use cni::error::Error;
    use cni::invoke::FindError;
    match e {
        Error::PluginNotFound { source, .. } => Some(vec![match source {
            FindError::NotFound { plugin, .. } => plugin.clone(),
            other => other.to_string(),
        }]),
        Error::Multiple(all) => all
            .iter()
            .map(missing_plugins)
            .collect::<Option<Vec<_>>>()
            .map(|names| names.concat()),
        _ => None,
    }
}

/// Whether the plugins' own DEL is known to remove every NAT rule of the attachment, so the
/// sweep (two whole-table dumps, whose cost grows with every other pod's rules: 40 ms at
/// 1,000 pods) can be skipped on the clean path. True only when all of these hold:
/// - a regular teardown (not the rollback of a failed or interrupted ADD);
/// - the ADD had completed (the record holds its result): no plugin was killed half-way;
/// - every plugin is a reference plugin whose DEL removes its own rules ([`SELF_CLEANING`]:
///   ptp and bridge from the interface's addresses, portmap by the attachment's chain
///   names) or makes none, and none delegates to other plugins;
/// - the pod's interface is still in its namespace, so ptp and bridge can read those
///   addresses (after a crash or a vanished namespace they cannot, and leave their chain).
///
/// The DEL must then also succeed, with every plugin present, for the sweep to be skipped;
/// every other path (killed ADD, failed DEL retried, gc after a crash or reboot) still
/// sweeps exactly.
fn plugins_clean_up(
    list: &NetworkConfigList,
    entry: &NetInfo,
    mode: Mode,
    netns: Option<&Path>,
) -> bool {
    matches!(mode, Mode::Teardown)
        && entry.result.is_some()
        && list.plugins.iter().all(|p| {
            SELF_CLEANING.contains(&p.plugin_type.as_str())
                && !p.raw.contains_key("delegate")
                && !p.raw.contains_key("delegates")
        })
        && netns.is_some_and(|ns| has_interface(ns, &entry.if_name))
}

/// Reference plugins that make no NAT rule, or remove theirs on DEL (see
/// [`plugins_clean_up`]).
const SELF_CLEANING: &[&str] = &[
    "ptp",
    "bridge",
    "portmap",
    "host-local",
    "static",
    "dhcp",
    "loopback",
    "tuning",
    "bandwidth",
    "firewall",
    "sbr",
    "vrf",
    "macvlan",
    "ipvlan",
    "vlan",
    "host-device",
];

/// Whether interface `if_name` exists in the namespace at `netns` (looked up from a thread
/// inside it).
fn has_interface(netns: &Path, if_name: &str) -> bool {
    std::thread::scope(|s| {
        s.spawn(|| {
            let Ok(_inside) = crate::netns::NetnsGuard::enter(netns) else {
                return false;
            };
            crate::netns::link_flags(if_name).is_ok()
        })
        .join()
        .unwrap_or(false)
    })
}

/// Whether a network's plugins could have left firewall rules for [`sweep::sweep`] to
/// remove: some plugin masquerades (`"ipMasq": true`, as ptp and bridge read it: their
/// `CNI-` chain; also nested, or through a plugin it delegates to) or forwards ports
/// (`portmap`, or a plugin declaring the `portMappings` capability: the `CNI-DN-` chain and
/// the jump to it). Decided from the pod's copy of the configuration, so it holds whatever
/// the configuration directory says now. Networks without any of these make no NAT rule,
/// and their teardown skips the two `nat` table dumps (1.5–9 ms per pod, see
/// docs/PERFORMANCE.md).
pub fn needs_sweep(list: &NetworkConfigList) -> bool {
    list.plugins.iter().any(|p| {
        may_masquerade(&p.raw) || p.plugin_type == "portmap" || p.has_capability(ports::CAPABILITY)
    })
}

/// Whether a configuration turns masquerading on at any depth (`"ipMasq": true`), or hands
/// the work to other plugins (`delegate`, `delegates`: flannel and other meta plugins run
/// bridge with masquerading they decide at run time).
fn may_masquerade(config: &serde_json::Map<String, serde_json::Value>) -> bool {
    use serde_json::Value;
    fn nested(value: &Value) -> bool {
        match value {
            Value::Object(map) => may_masquerade(map),
            Value::Array(items) => items.iter().any(nested),
            _ => false,
        }
    }
    config.iter().any(|(key, v)| {
        (key == "ipMasq" && *v == Value::Bool(true))
            || key == "delegate"
            || key == "delegates"
            || nested(v)
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
    /// Something worth saying about a passed check.
    pub note: Option<String>,
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
            let mut note = None;
            let result = saved_list(pod.pod_dir, entry)
                .and_then(|list| check_one(pod, netns, entry, list, &mut note));
            CheckReport {
                net_name: entry.net_name.clone(),
                if_name: entry.if_name.clone(),
                result,
                note,
            }
        })
        .collect();
    Ok(reports)
}

/// CHECKs one recorded network. portmap 1.1.1's CHECK, once it has verified the IPv4
/// rules, looks for IPv6 rules even for a pod without an IPv6 address and fails
/// (containernetworking/plugins#819); for such a pod that failure is noted in `note`, and
/// the plugins after portmap are still checked.
fn check_one(
    pod: &PodNet,
    netns: &Path,
    entry: &NetInfo,
    mut list: NetworkConfigList,
    note: &mut Option<String>,
) -> Result<(), NetFailure> {
    let cache_dir = cache_dir_of(entry);
    let rt =
        runtime::Attachment::recorded(pod.uuid, Some(netns), entry, &cache_dir, pod.plugin_timeout);
    loop {
        let Err(source) = runtime::check(&list, &rt) else {
            return Ok(());
        };
        let skip_to = is_portmap_ipv6_bug(&source, entry)
            .then(|| list.plugins.iter().position(|p| p.plugin_type == "portmap"))
            .flatten();
        let Some(pos) = skip_to else {
            return Err(NetFailure::Cni {
                net: entry.net_name.clone(),
                if_name: entry.if_name.clone(),
                source,
            });
        };
        *note = Some(PORTMAP_BUG_NOTE.to_string());
        list.plugins.drain(..=pos);
        if list.plugins.is_empty() {
            return Ok(());
        }
    }
}

/// What `check` says when it passed over portmap's IPv6 CHECK bug.
pub const PORTMAP_BUG_NOTE: &str = "portmap checked the IPv4 port forwarding, then failed looking for IPv6 rules this pod does not have (containernetworking/plugins#819); ignored";

fn is_portmap_ipv6_bug(e: &cni::error::Error, entry: &NetInfo) -> bool {
    let has_ipv6 = entry
        .result
        .as_ref()
        .and_then(|r| r.get("ips"))
        .and_then(|ips| ips.as_array())
        .is_some_and(|ips| {
            ips.iter().any(|ip| {
                ip.get("address")
                    .and_then(|a| a.as_str())
                    .is_some_and(|a| a.contains(':'))
            })
        });
    matches!(e, cni::error::Error::Plugin { plugin, command, msg, .. }
        if plugin == "portmap" && *command == "CHECK" && msg.contains("could not check ipv6 dnat"))
        && !has_ipv6
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::networking::builtin::{Builtin, DEFAULT, DEFAULT_RESTRICTED};

    fn list(plugins: &str) -> NetworkConfigList {
        let text = format!(r#"{{"cniVersion":"1.0.0","name":"n","plugins":[{plugins}]}}"#);
        plan::parse_saved(text.as_bytes(), Path::new("net/n.conflist")).unwrap()
    }

    #[test]
    fn a_del_that_only_missed_binaries_names_them() {
        use cni::error::Error;
        let missing = |plugin: &str| Error::PluginNotFound {
            network: "n".into(),
            source: cni::invoke::FindError::NotFound {
                plugin: plugin.into(),
                dirs: vec![],
            },
        };
        assert_eq!(missing_plugins(&missing("a")), Some(vec!["a".to_string()]));
        let both = Error::Multiple(vec![missing("a"), missing("b")]);
        assert_eq!(
            missing_plugins(&both),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        let timeout = Error::NotAdded {
            network: "n".into(),
            container_id: "c".into(),
            ifname: "eth0".into(),
        };
        assert_eq!(missing_plugins(&timeout), None);
        assert_eq!(
            missing_plugins(&Error::Multiple(vec![missing("a"), timeout])),
            None
        );
    }

    #[test]
    fn only_masquerading_or_port_forwarding_networks_are_swept() {
        let ptp = r#"{"type":"ptp","ipam":{"type":"host-local","subnet":"10.1.0.0/16"}}"#;
        assert!(!needs_sweep(&list(ptp)));
        assert!(!needs_sweep(&list(
            r#"{"type":"bridge","ipMasq":false},{"type":"tuning"}"#
        )));
        // Masquerading a meta plugin asks of the plugin it delegates to, or may decide.
        assert!(needs_sweep(&list(
            r#"{"type":"meta","delegate":{"type":"bridge","ipMasq":true}}"#
        )));
        assert!(needs_sweep(&list(
            r#"{"type":"flannel","delegate":{"isDefaultGateway":true}}"#
        )));
        assert!(needs_sweep(&list(
            r#"{"type":"m","delegates":[{"type":"ptp"}]}"#
        )));
        assert!(!needs_sweep(&list(
            r#"{"type":"x","opts":[{"ipMasq":false}],"ipam":{"type":"host-local"}}"#
        )));
        // Only a JSON true masquerades, as the plugins decode it.
        assert!(!needs_sweep(&list(r#"{"type":"ptp","ipMasq":"true"}"#)));
        assert!(needs_sweep(&list(r#"{"type":"ptp","ipMasq":true}"#)));
        assert!(needs_sweep(&list(&format!(
            r#"{ptp},{{"type":"bridge","ipMasq":true}}"#
        ))));
        // portmap sets up nothing without --port, but a teardown cannot tell.
        assert!(needs_sweep(&list(&format!(
            r#"{ptp},{{"type":"portmap"}}"#
        ))));
        assert!(needs_sweep(&list(&format!(
            r#"{ptp},{{"type":"my-portmap","capabilities":{{"portMappings":true}}}}"#
        ))));
        assert!(!needs_sweep(&list(&format!(
            r#"{ptp},{{"type":"my-portmap","capabilities":{{"portMappings":false}}}}"#
        ))));
    }

    #[test]
    fn a_single_plugin_copy_is_decided_the_same_way() {
        let single = |text: &str| plan::parse_saved(text.as_bytes(), Path::new("net/n.conf"));
        let masq = single(r#"{"cniVersion":"0.4.0","name":"n","type":"bridge","ipMasq":true}"#);
        assert!(needs_sweep(&masq.unwrap()));
        let plain = single(r#"{"cniVersion":"0.4.0","name":"n","type":"bridge"}"#);
        assert!(!needs_sweep(&plain.unwrap()));
    }

    #[test]
    fn builtin_default_is_swept_and_default_restricted_is_not() {
        let config = |name| Builtin::named(name).unwrap().config().unwrap();
        assert!(needs_sweep(&config(DEFAULT)));
        assert!(!needs_sweep(&config(DEFAULT_RESTRICTED)));
    }
}
