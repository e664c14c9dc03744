//! The calls into the CNI library for one pod attachment: ADD and DEL of a network list,
//! and what the pod keeps from a result (address, netmask, DNS).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cni::conf::NetworkConfigList;
use cni::error::Error;
use cni::result::CniResult;
use serde_json::{Map, Value};

use super::prefix_to_mask;
use crate::etc_files::ResolvConf;

/// libcni's cache directory, for records written without one.
pub const DEFAULT_CACHE_DIR: &str = "/var/lib/cni";

/// One pod interface on one network, as the plugins see it.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    /// `CNI_CONTAINERID`: the pod UUID.
    pub uuid: &'a str,
    /// `CNI_NETNS`.
    pub netns: Option<&'a Path>,
    /// `CNI_IFNAME`.
    pub if_name: &'a str,
    /// `CNI_ARGS` as given in `--net` (`K=V;K2=V2`).
    pub args: &'a str,
    /// Capability arguments (`runtimeConfig`).
    pub capability_args: &'a Map<String, Value>,
    /// `CNI_PATH`.
    pub plugin_dirs: &'a [PathBuf],
    /// The CNI cache directory.
    pub cache_dir: &'a Path,
    /// The limit for each plugin call.
    pub timeout: Duration,
}

impl<'a> Attachment<'a> {
    /// The attachment of a recorded network.
    pub fn recorded(
        uuid: &'a str,
        netns: Option<&'a Path>,
        entry: &'a super::NetInfo,
        cache_dir: &'a Path,
        timeout: Duration,
    ) -> Attachment<'a> {
        Attachment {
            uuid,
            netns,
            if_name: &entry.if_name,
            args: &entry.args,
            capability_args: &entry.capability_args,
            plugin_dirs: &entry.plugin_dirs,
            cache_dir,
            timeout,
        }
    }
}

/// What the pod keeps from a successful ADD.
#[derive(Debug, Clone)]
pub struct Added {
    pub ip: Option<IpAddr>,
    /// Every address the result gives the pod.
    pub ips: Vec<IpAddr>,
    pub mask: Option<IpAddr>,
    pub result: Value,
}

/// The `CNI_ARGS` key that tells a plugin built on the reference `LoadArgs` to skip the
/// keys it does not know instead of failing (`ARGS: unknown args [...]`).
pub const IGNORE_UNKNOWN: &str = "IgnoreUnknown";

/// The `--net` argument text as libcni's `(key, value)` pairs (parsed leniently: a record
/// from an older run is not re-validated here), led by `IgnoreUnknown=1` when there are any
/// and the user did not set `IgnoreUnknown`: args are meant for whichever plugin of the
/// list reads them, and every other plugin of the list must not refuse them (as CRI-O's
/// ocicni and Podman do).
fn arg_pairs(args: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = args
        .split(';')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (p.to_string(), String::new()),
        })
        .collect();
    if !pairs.is_empty() && !pairs.iter().any(|(k, _)| k == IGNORE_UNKNOWN) {
        pairs.insert(0, (IGNORE_UNKNOWN.to_string(), "1".to_string()));
    }
    pairs
}

fn runtime_conf(att: &Attachment) -> cni::api::RuntimeConf {
    cni::api::RuntimeConf {
        container_id: att.uuid.to_string(),
        netns: att.netns.map(Path::to_path_buf),
        ifname: att.if_name.to_string(),
        args: arg_pairs(att.args),
        capability_args: att.capability_args.clone(),
        cache_dir: None,
    }
}

fn cni_config(att: &Attachment) -> cni::api::CniConfig {
    cni::api::CniConfig::new(att.plugin_dirs.to_vec(), att.cache_dir.to_path_buf())
        .with_timeout(att.timeout)
}

/// ADDs `list` for the attachment, running its plugins from `binaries` (as planning
/// resolved them) and no others. A SIGINT or SIGTERM to rkt meanwhile (`rkt stop` of a
/// starting pod, Ctrl-C) abandons the ADD: the running plugin gets the library's grace to
/// finish ([`cni::invoke::INTERRUPT_GRACE`], so it is not cut between creating a record and
/// writing it), then is killed with everything it started before this returns, so the
/// rollback DEL that follows undoes all of it.
pub fn add(
    list: &NetworkConfigList,
    binaries: &BTreeMap<String, PathBuf>,
    att: &Attachment,
) -> Result<Added, Box<Error>> {
    let exec = cni::invoke::InterruptibleExec::new(crate::pending_signal::interrupted);
    let result = cni_config(att)
        .with_plugin_binaries(binaries.clone())
        .with_exec(std::sync::Arc::new(exec))
        .add_network_list(list, &runtime_conf(att))?;
    Ok(added(&result))
}

/// DELs `list` for the attachment (plugins are told even when ADD never finished).
pub fn del(list: &NetworkConfigList, att: &Attachment) -> Result<(), Box<Error>> {
    Ok(cni_config(att).del_network_list(list, &runtime_conf(att))?)
}

/// CHECKs `list` for the attachment.
pub fn check(list: &NetworkConfigList, att: &Attachment) -> Result<(), Box<Error>> {
    Ok(cni_config(att).check_network_list(list, &runtime_conf(att))?)
}

/// The address rkt reports: the first IPv4 one, else the first one.
fn added(result: &CniResult) -> Added {
    let current = result.current();
    let chosen = current
        .ips
        .iter()
        .find(|ip| ip.is_v4())
        .or_else(|| current.ips.first());
    let ip = chosen.and_then(|c| c.ip());
    let mask = chosen.and_then(|c| Some(prefix_to_mask(&c.ip()?, c.prefix_len()?)));
    Added {
        ip,
        ips: current.ips.iter().filter_map(|c| c.ip()).collect(),
        mask,
        result: result.to_value(),
    }
}

/// The DNS settings in a recorded result, if it carries nameservers.
pub fn result_dns(result: &Value) -> Option<ResolvConf> {
    let version = result
        .get("cniVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let dns = CniResult::from_value(result.clone(), &version)
        .ok()?
        .current()
        .dns;
    if dns.nameservers.is_empty() {
        return None;
    }
    Some(ResolvConf {
        nameservers: dns.nameservers,
        search: dns.search,
        options: dns.options,
        domain: dns.domain,
    })
}

/// CNI's "try again later" code: a failure that says nothing about the input.
const TRY_AGAIN_LATER: u32 = 11;

/// Whether a plugin failure is a transient one that a busy host produces (the kernel's
/// xtables lock held by other callers, "try again later"). Such a failure can come after
/// the plugin allocated an address or made rules, and can hit ADD and DEL alike.
fn is_transient(code: u32, msg: &str) -> bool {
    code == TRY_AGAIN_LATER || msg.contains("xtables lock")
}

/// When `del` is the same failure as `add` (same plugin, code and message), the plugin's
/// type: it rejects its input the same way whatever the command, so it set nothing up
/// (an invalid subnet, a DHCP daemon that is not running). Reference plugins report such
/// refusals with code 999 as often as with the spec's codes, so the code alone cannot tell.
/// A transient failure twice ([`is_transient`]) is no proof of that: the caller keeps the
/// attachment for gc's retry instead.
pub fn same_refusal(add: &Error, del: &Error) -> Option<String> {
    match (add, del) {
        (
            Error::Plugin {
                plugin: p1,
                code: c1,
                msg: m1,
                ..
            },
            Error::Plugin {
                plugin: p2,
                code: c2,
                msg: m2,
                ..
            },
        ) if p1 == p2 && c1 == c2 && m1 == m2 && !is_transient(*c1, m1) => Some(p1.clone()),
        _ => None,
    }
}

/// The plugin an error is about, when it names one.
pub fn failed_plugin(e: &Error) -> Option<String> {
    match e {
        Error::Plugin { plugin, .. }
        | Error::Timeout { plugin, .. }
        | Error::Signal { plugin, .. }
        | Error::Exec { plugin, .. }
        | Error::InvalidResult { plugin, .. }
        | Error::UnsupportedByPlugin { plugin, .. } => Some(plugin.clone()),
        Error::PluginNotFound {
            source: cni::invoke::FindError::NotFound { plugin, .. },
            ..
        } => Some(plugin.clone()),
        Error::Multiple(errors) => errors.iter().find_map(failed_plugin),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rejected input, failing ADD and DEL alike, lets a rollback pass over the plugin,
    /// whatever its code; the same transient failure twice does not.
    #[test]
    fn only_refusals_of_the_input_count_as_refusals() {
        let failure = |code: u32, msg: &str| Error::Plugin {
            network: "n".into(),
            plugin: "ptp".into(),
            command: "ADD",
            code,
            msg: msg.into(),
            details: String::new(),
        };
        let bad_conf = failure(7, "invalid CIDR address");
        assert_eq!(same_refusal(&bad_conf, &bad_conf), Some("ptp".into()));
        let busy = failure(999, "Another app is currently holding the xtables lock");
        assert_eq!(same_refusal(&busy, &busy), None);
        let bad_cidr = failure(999, "invalid CIDR address: 10.300.0.0/24");
        assert_eq!(same_refusal(&bad_cidr, &bad_cidr), Some("ptp".into()));
        let later = failure(11, "address pool busy");
        assert_eq!(same_refusal(&later, &later), None);
        assert_eq!(same_refusal(&bad_conf, &failure(7, "other")), None);
    }

    #[test]
    fn args_become_pairs() {
        assert_eq!(
            arg_pairs("IP=fd00::1;K=a=b;;X"),
            vec![
                ("IgnoreUnknown".into(), "1".into()),
                ("IP".into(), "fd00::1".into()),
                ("K".into(), "a=b".into()),
                ("X".into(), "".into())
            ]
        );
        assert!(arg_pairs("").is_empty());
    }

    #[test]
    fn ignore_unknown_leads_the_args_unless_the_user_set_it() {
        let pairs = |s: &str| -> Vec<(String, String)> {
            s.split(';')
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect()
        };
        assert_eq!(
            arg_pairs("IP=10.0.0.9"),
            pairs("IgnoreUnknown=1;IP=10.0.0.9")
        );
        assert_eq!(
            arg_pairs("IP=10.0.0.9;IgnoreUnknown=0"),
            pairs("IP=10.0.0.9;IgnoreUnknown=0")
        );
    }

    #[test]
    fn address_and_mask_prefer_ipv4() {
        let r = CniResult::from_value(
            serde_json::json!({"cniVersion":"1.0.0","ips":[
                {"address":"fd00::5/64"},{"address":"172.16.28.5/24","gateway":"172.16.28.1"}]}),
            "1.0.0",
        )
        .unwrap();
        let a = added(&r);
        assert_eq!(a.ip, Some("172.16.28.5".parse().unwrap()));
        assert_eq!(a.mask, Some("255.255.255.0".parse().unwrap()));
        let r = CniResult::from_value(
            serde_json::json!({"cniVersion":"0.4.0","ips":[{"version":"6","address":"fd00::5/64"}]}),
            "0.4.0",
        )
        .unwrap();
        let a = added(&r);
        assert_eq!(a.ip, Some("fd00::5".parse().unwrap()));
        assert_eq!(a.mask, Some("ffff:ffff:ffff:ffff::".parse().unwrap()));
        assert_eq!(
            added(&CniResult::from_value(Value::Null, "1.0.0").unwrap()).ip,
            None
        );
    }

    #[test]
    fn dns_from_results_of_any_version() {
        let v = serde_json::json!({"cniVersion":"0.3.1","dns":{"nameservers":["10.0.0.53"],"search":["lan"]}});
        let rc = result_dns(&v).unwrap();
        assert_eq!(rc.nameservers, ["10.0.0.53"]);
        assert_eq!(rc.search, ["lan"]);
        assert!(
            result_dns(&serde_json::json!({"cniVersion":"1.0.0","dns":{"domain":"x"}})).is_none()
        );
        assert!(result_dns(&serde_json::json!({"cniVersion":"1.0.0"})).is_none());
    }
}
