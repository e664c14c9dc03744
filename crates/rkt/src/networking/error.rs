//! The errors of pod networking: [`NetError`] for an operation, [`NetFailure`] for one
//! recorded network that teardown or check failed on. Every variant names the pod or the
//! network (and interface) it is about.

use std::path::PathBuf;

use super::record::RecordError;
use crate::etc_files::DnsError;
use crate::firewall::ports::PortError;
use crate::firewall::sweep;

/// One recorded network that an operation (teardown, check) failed on, and why.
#[derive(Debug, thiserror::Error)]
pub enum NetFailure {
    /// Its record entry or configuration copy could not be used.
    #[error("network {net:?} ({if_name})")]
    Record {
        net: String,
        if_name: String,
        source: RecordError,
    },
    /// Its saved configuration does not parse.
    #[error("network {net:?} ({if_name}): saved configuration")]
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
    #[error("network {net:?} ({if_name})")]
    Sweep {
        net: String,
        if_name: String,
        source: sweep::SweepError,
    },
    /// Waiting for the turn to run the plugins failed.
    #[error("network {net:?} ({if_name})")]
    Admission {
        net: String,
        if_name: String,
        source: super::admission::AdmissionError,
    },
    /// The CNI operation (DEL, CHECK) failed.
    #[error("network {net:?} ({if_name})")]
    Cni {
        net: String,
        if_name: String,
        source: Box<cni::error::Error>,
    },
}

/// Why setting up or tearing down a pod's networks failed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A configuration or plugin that a user other than root could change.
    #[error(transparent)]
    Untrusted(#[from] crate::security::SecurityError),
    /// Waiting for the turn to run the plugins failed (or was interrupted).
    #[error(transparent)]
    Admission(#[from] super::admission::AdmissionError),
    /// Named networks that are neither configured nor built in.
    #[error("networks not found: {} (searched {} and the built-in networks)", names.join(", "), conf_dir.display())]
    NotFound {
        names: Vec<String>,
        conf_dir: std::path::PathBuf,
    },
    /// The configuration directory exists but cannot be read.
    #[error("cannot load network configurations")]
    ConfDir {
        dir: PathBuf,
        source: Box<cni::conf::ConfError>,
    },
    /// The built-in network's source-address check could not be set up.
    #[error(transparent)]
    RpFilter(#[from] super::rp_filter::RpFilterError),
    /// A built-in configuration failed to parse (a bug).
    #[error("built-in network {net:?}")]
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
    /// `--port` cannot be honoured.
    #[error(transparent)]
    Ports(#[from] PortError),
    /// ADD failed for `net`; everything set up before it (and `net` itself) was torn down,
    /// except what `cleanup` lists.
    #[error(
        "cannot set up network {net:?} (plugin {plugin:?}): {}{}{}",
        crate::error::chain(error.as_ref()),
        dhcp_daemon_hint(error),
        cleanup_suffix(cleanup)
    )]
    Add {
        net: String,
        plugin: String,
        /// Why (not a `source`: what to do and the cleanup's failures follow it).
        error: Box<cni::error::Error>,
        cleanup: Vec<NetFailure>,
    },
    /// Setup failed for a reason other than a plugin (writing the record or the DNS files);
    /// what was set up was torn down, except what `cleanup` lists.
    #[error("{}{}", crate::error::chain(error.as_ref()), cleanup_suffix(cleanup))]
    Aborted {
        /// Why (not a `source`: the cleanup's failures follow it).
        error: Box<NetError>,
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
        .map(|f| crate::error::chain(f))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The CNI `dhcp` plugin's default daemon socket.
const DHCP_DEFAULT_SOCKET: &str = "/run/cni/dhcp.sock";

/// When a plugin failed because the CNI `dhcp` daemon cannot be reached (the `dhcp` IPAM
/// plugin only says "error dialing DHCP daemon: dial unix <socket>: ..."), says so and how to
/// start the daemon on that socket.
fn dhcp_daemon_hint(source: &cni::error::Error) -> String {
    let text = crate::error::chain(source);
    let Some((_, rest)) = text.split_once("error dialing DHCP daemon: dial unix ") else {
        return String::new();
    };
    let socket = rest.split(": ").next().unwrap_or(DHCP_DEFAULT_SOCKET);
    let option = if socket == DHCP_DEFAULT_SOCKET {
        String::new()
    } else {
        format!(" -socketpath {socket}")
    };
    format!(
        "; the CNI dhcp daemon is not running (or not listening on {socket}): start it on this \
         host before rkt run with `dhcp daemon{option}`, the dhcp plugin binary from the \
         plugin directories (such as /usr/lib/cni/dhcp), and keep it running"
    )
}

fn cleanup_suffix(cleanup: &[NetFailure]) -> String {
    if cleanup.is_empty() {
        String::new()
    } else {
        format!(" (and cleaning up failed too: {})", join_failures(cleanup))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin_error(msg: &str) -> Box<cni::error::Error> {
        Box::new(cni::error::Error::Plugin {
            network: "lan".into(),
            plugin: "macvlan".into(),
            command: "ADD",
            code: 999,
            msg: msg.into(),
            details: String::new(),
        })
    }

    fn add_failure(msg: &str) -> String {
        NetError::Add {
            net: "lan".into(),
            plugin: "macvlan".into(),
            error: plugin_error(msg),
            cleanup: Vec::new(),
        }
        .to_string()
    }

    #[test]
    fn an_unreachable_dhcp_daemon_gets_how_to_start_it_on_its_socket() {
        let text = add_failure(
            "error dialing DHCP daemon: dial unix /srv/dhcp.sock: connect: no such file or directory",
        );
        assert!(
            text.contains("the CNI dhcp daemon is not running"),
            "{text}"
        );
        assert!(
            text.contains("`dhcp daemon -socketpath /srv/dhcp.sock`"),
            "{text}"
        );
        let default = add_failure(
            "error dialing DHCP daemon: dial unix /run/cni/dhcp.sock: connect: connection refused",
        );
        assert!(
            default.contains("with `dhcp daemon`, the dhcp plugin"),
            "{default}"
        );
    }

    #[test]
    fn other_plugin_failures_get_no_dhcp_hint() {
        let text = add_failure("failed to find master interface");
        assert!(!text.contains("dhcp daemon"), "{text}");
    }
}
