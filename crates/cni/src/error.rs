//! The crate-level error of the runtime operations in [`crate::api`].
//!
//! Every variant names the network, plugin and command it is about, so a message reads
//! like `network "n": plugin "ptp" failed (ADD): code 7: bad config; details`. Operations
//! that try every step before failing (GC, validation) report [`Error::Multiple`].

use std::path::PathBuf;

use crate::cache::CacheError;
use crate::conf::ConfError;
use crate::invoke::{signal_name, ExecError, FindError};
use crate::types::codes;
use crate::validate::ValidateError;
use crate::version::VersionError;

/// `network "n": ` or nothing when the operation is not about a network.
fn on(network: &str) -> String {
    if network.is_empty() {
        String::new()
    } else {
        format!("network {network:?}: ")
    }
}

/// `network "n"`, or nothing when the operation is not about a network (then the error is
/// its source's: [`chain`] skips an empty message).
fn named(network: &str) -> String {
    if network.is_empty() {
        String::new()
    } else {
        format!("network {network:?}")
    }
}

/// An error's message followed by each of its sources', joined with `": "`: how an error
/// of this crate is meant to be printed, since a message names its own subject and leaves
/// the cause to its source (`plugin "ptp" (ADD): cannot run plugin /opt/cni/bin/ptp:
/// Permission denied`). An empty message adds nothing.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        next = e.source();
    }
    out
}

/// `code 7: msg; details`, leaving out what the plugin did not say.
fn failure(code: u32, msg: &str, details: &str) -> String {
    let mut out = String::new();
    if code != 0 {
        out.push_str(&format!("code {code}: "));
    }
    out.push_str(msg);
    if !details.is_empty() {
        out.push_str("; ");
        out.push_str(details);
    }
    out
}

fn list(errors: &[Error]) -> String {
    let mut out = format!("{} errors:", errors.len());
    for (i, e) in errors.iter().enumerate() {
        out.push_str(&format!(" ({}) {}", i + 1, chain(e)));
    }
    out
}

/// Why a runtime operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A plugin exited non-zero. `code`, `msg` and `details` are from the error object it
    /// printed; `code` is 0 when it printed none (then `msg` says what it printed).
    #[error("{}plugin {plugin:?} failed ({command}): {}", on(network), failure(*code, msg, details))]
    Plugin {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command (`ADD`, `DEL`, ...).
        command: &'static str,
        /// The CNI error code, 0 when the plugin printed none.
        code: u32,
        /// The message.
        msg: String,
        /// The details, if any.
        details: String,
    },
    /// The plugin's binary was not found, or its `type` is not a valid file name.
    #[error("{}", named(network))]
    PluginNotFound {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The underlying error.
        #[source]
        source: FindError,
    },
    /// The plugin did not finish within the timeout and was killed.
    #[error(
        "{}plugin {plugin:?} ({command}) timed out after {secs}s and was killed",
        on(network)
    )]
    Timeout {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command (`ADD`, `DEL`, ...).
        command: &'static str,
        /// The timeout, in seconds.
        secs: f64,
    },
    /// The plugin was killed by a signal.
    #[error("{}plugin {plugin:?} ({command}) was killed by signal {signal} ({})", on(network), signal_name(*signal))]
    Signal {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command (`ADD`, `DEL`, ...).
        command: &'static str,
        /// The signal number.
        signal: i32,
    },
    /// The plugin could not be started or talked to.
    #[error("{}plugin {plugin:?} ({command})", on(network))]
    Exec {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command (`ADD`, `DEL`, ...).
        command: &'static str,
        /// The underlying error.
        #[source]
        source: Box<ExecError>,
    },
    /// The plugin succeeded but what it printed is not a valid answer (a result, or
    /// version information).
    #[error(
        "{}plugin {plugin:?} ({command}) printed an invalid answer",
        on(network)
    )]
    InvalidResult {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The plugin's `type`.
        plugin: String,
        /// The CNI command (`ADD`, `DEL`, ...).
        command: &'static str,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The cached result of an attachment could not be used.
    #[error(
        "{}cached result for container {container_id:?} interface {ifname:?} is unusable",
        on(network)
    )]
    CachedResult {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The container ID.
        container_id: String,
        /// The interface name.
        ifname: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An operation that needs the ADD's cached result (CHECK) found none.
    #[error("{}no cached result for container {container_id:?} interface {ifname:?}: the attachment was never added, or was deleted", on(network))]
    NotAdded {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The container ID.
        container_id: String,
        /// The interface name.
        ifname: String,
    },
    /// ADD or CHECK was asked without a network namespace (`CNI_NETNS`, which the spec
    /// requires for both); no plugin ran.
    #[error(
        "{}{command} needs the network namespace (CNI_NETNS), and none was given",
        on(network)
    )]
    MissingNetns {
        /// The network.
        network: String,
        /// `ADD` or `CHECK`.
        command: &'static str,
    },
    /// CHECK is not defined for the network's version (it needs 0.4.0 or later).
    #[error("{}configuration version {version:?} does not support the CHECK command (it needs 0.4.0 or later)", on(network))]
    CheckUnsupported {
        /// The network.
        network: String,
        /// The network's negotiated version.
        version: String,
    },
    /// A plugin does not support the version negotiated for the network.
    #[error("{}plugin {plugin:?} does not support CNI version {version:?} (it supports {})", on(network), supported.join(", "))]
    UnsupportedByPlugin {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The plugin's `type`.
        plugin: String,
        /// The negotiated version.
        version: String,
        /// The versions the plugin supports.
        supported: Vec<String>,
    },
    /// A stale attachment could not be deleted during GC.
    #[error(
        "{}deleting stale attachment of container {container_id:?} interface {ifname:?}",
        on(network)
    )]
    StaleAttachment {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The container ID.
        container_id: String,
        /// The interface name.
        ifname: String,
        /// The underlying error.
        #[source]
        source: Box<Error>,
    },
    /// The network configuration is invalid.
    #[error(transparent)]
    Conf(#[from] ConfError),
    /// No version could be negotiated for the network.
    #[error("{}", named(network))]
    Version {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The underlying error.
        #[source]
        source: VersionError,
    },
    /// A container ID, network name or interface name is invalid.
    #[error(transparent)]
    Validate(#[from] ValidateError),
    /// Reading or writing the attachment cache failed.
    #[error("{}result cache", on(network))]
    Cache {
        /// The network; empty when the operation is not about one.
        network: String,
        /// The file or directory.
        path: Option<PathBuf>,
        /// The underlying error.
        #[source]
        source: Box<CacheError>,
    },
    /// A file operation failed.
    #[error("{}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Several steps failed (GC, teardown, validation); every failure is kept.
    #[error("{}", list(.0))]
    Multiple(Vec<Error>),
}

impl Error {
    /// The CNI error code: the one a plugin reported, or, for a request rejected before
    /// any plugin ran, the one libcni gives the same mistake (3 for a missing container ID,
    /// 4 for a malformed container ID or interface name or a missing `CNI_NETNS`, 7 for a
    /// missing or malformed network name). For [`Error::Multiple`], the first.
    pub fn code(&self) -> Option<u32> {
        match self {
            Error::Plugin { code, .. } if *code != 0 => Some(*code),
            Error::Validate(e) => e.code(),
            Error::MissingNetns { .. } => Some(codes::INVALID_ENVIRONMENT),
            Error::Conf(ConfError::MissingName { .. } | ConfError::InvalidName { .. }) => {
                Some(codes::INVALID_CONFIG)
            }
            Error::StaleAttachment { source, .. } => source.code(),
            Error::Multiple(errors) => errors.iter().find_map(Error::code),
            _ => None,
        }
    }

    /// Folds collected errors: none is `Ok`, one is itself, more are [`Error::Multiple`].
    pub fn from_all(mut errors: Vec<Error>) -> Result<(), Error> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(Error::Multiple(errors)),
        }
    }

    /// Wraps a cache error of `network`.
    pub(crate) fn cache(network: &str, source: CacheError) -> Error {
        Error::Cache {
            network: network.to_owned(),
            path: source.path().map(PathBuf::from),
            source: Box::new(source),
        }
    }

    /// Attributes a plugin-execution failure to `network`, `plugin` and `command`.
    pub(crate) fn from_exec(
        network: &str,
        plugin: &str,
        command: &'static str,
        e: ExecError,
    ) -> Error {
        let (network, plugin) = (network.to_owned(), plugin.to_owned());
        match e {
            ExecError::Timeout { timeout, .. } => Error::Timeout {
                network,
                plugin,
                command,
                secs: timeout.as_secs_f64(),
            },
            ExecError::Signal { signal, .. } => Error::Signal {
                network,
                plugin,
                command,
                signal,
            },
            ExecError::Plugin {
                code, msg, details, ..
            } => Error::Plugin {
                network,
                plugin,
                command,
                code: code.unwrap_or(0),
                msg,
                details,
            },
            e
            @ (ExecError::Spawn { .. } | ExecError::Io { .. } | ExecError::Interrupted { .. }) => {
                Error::Exec {
                    network,
                    plugin,
                    command,
                    source: Box::new(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin_err(code: u32, details: &str) -> Error {
        Error::Plugin {
            network: "n".into(),
            plugin: "ptp".into(),
            command: "ADD",
            code,
            msg: "msg".into(),
            details: details.into(),
        }
    }

    #[test]
    fn the_chain_says_each_cause_once() {
        let e = Error::Exec {
            network: "n".into(),
            plugin: "ptp".into(),
            command: "ADD",
            source: Box::new(ExecError::Spawn {
                plugin: "/opt/cni/bin/ptp".into(),
                source: std::io::Error::from_raw_os_error(13),
            }),
        };
        assert_eq!(e.to_string(), r#"network "n": plugin "ptp" (ADD)"#);
        assert_eq!(
            chain(&e),
            r#"network "n": plugin "ptp" (ADD): cannot run plugin /opt/cni/bin/ptp: Permission denied (os error 13)"#
        );
    }

    #[test]
    fn plugin_failure_reads_naturally() {
        assert_eq!(
            plugin_err(7, "details").to_string(),
            r#"network "n": plugin "ptp" failed (ADD): code 7: msg; details"#
        );
        assert_eq!(
            plugin_err(0, "").to_string(),
            r#"network "n": plugin "ptp" failed (ADD): msg"#
        );
        assert_eq!(plugin_err(7, "").code(), Some(7));
        assert_eq!(plugin_err(0, "").code(), None);
    }

    #[test]
    fn multiple_lists_every_error_and_reports_first_code() {
        let e = Error::Multiple(vec![
            Error::NotAdded {
                network: "n".into(),
                container_id: "c".into(),
                ifname: "eth0".into(),
            },
            plugin_err(11, ""),
        ]);
        let text = e.to_string();
        assert!(
            text.starts_with("2 errors: (1) network \"n\": no cached result"),
            "{text}"
        );
        assert!(
            text.contains("(2) network \"n\": plugin \"ptp\" failed (ADD): code 11: msg"),
            "{text}"
        );
        assert_eq!(e.code(), Some(11));
        assert!(Error::from_all(vec![]).is_ok());
        assert!(matches!(
            Error::from_all(vec![plugin_err(1, "")]),
            Err(Error::Plugin { .. })
        ));
    }

    #[test]
    fn signal_and_timeout_name_the_plugin() {
        let e = Error::from_exec(
            "",
            "bridge",
            "DEL",
            ExecError::Signal {
                plugin: "/x/bridge".into(),
                signal: 9,
                stderr: String::new(),
            },
        );
        assert_eq!(
            e.to_string(),
            r#"plugin "bridge" (DEL) was killed by signal 9 (SIGKILL)"#
        );
        let e = Error::from_exec(
            "n",
            "bridge",
            "ADD",
            ExecError::Timeout {
                plugin: "/x/bridge".into(),
                timeout: std::time::Duration::from_millis(1500),
            },
        );
        assert_eq!(
            e.to_string(),
            r#"network "n": plugin "bridge" (ADD) timed out after 1.5s and was killed"#
        );
    }

    /// Callers return `Result<_, Error>` everywhere; clippy's `result_large_err` flags errors
    /// of 128 bytes or more, so big payloads stay boxed.
    #[test]
    fn error_stays_below_clippy_large_err_threshold() {
        let size = std::mem::size_of::<Error>();
        assert!(size < 128, "cni::error::Error is {size} bytes");
    }
}
