//! What rkt trusts before it runs plugins as root, and how long it waits for them.
//!
//! - [`plugin_timeout`]: the limit for each plugin call, `$RKT_NET_PLUGIN_TIMEOUT`
//!   (a duration like `30s`, `500ms`, `2m`; default [`cni::api::DEFAULT_TIMEOUT`]). A plugin
//!   that runs longer is killed and the call fails naming it, so a hung plugin cannot
//!   block `rkt run`, `rm` or `gc` forever.
//! - [`check_trusted`]: a network configuration directory, a plugin directory or a plugin
//!   binary that a user other than root can write is a way to run code as root; rkt refuses
//!   to use it, naming the path, its owner and mode, unless `--insecure-options=net-plugins`.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable that sets the plugin timeout.
pub const PLUGIN_TIMEOUT_ENV: &str = "RKT_NET_PLUGIN_TIMEOUT";

/// The value of `--insecure-options` that skips the ownership checks.
pub const INSECURE_NET_PLUGINS: &str = "net-plugins";

/// Why rkt refuses a configuration or plugin.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// `$RKT_NET_PLUGIN_TIMEOUT` is not a duration.
    #[error("${PLUGIN_TIMEOUT_ENV}={value:?} is not a duration greater than zero (expected e.g. 30s, 500ms, 2m): {reason}")]
    BadTimeout { value: String, reason: String },

    /// A path in the chain of trust can be written by someone other than root.
    #[error(
        "refusing to use {what} {}: {} is {why} (owner uid {uid}, mode {mode:04o}); a user other than root could make rkt run code as root. Fix the owner or mode (chown root, chmod go-w), or pass --insecure-options={INSECURE_NET_PLUGINS}",
        path.display(),
        culprit.display()
    )]
    Writable {
        /// What the path is used as ("network configuration directory", "plugin", ...).
        what: &'static str,
        /// The path rkt was going to use.
        path: PathBuf,
        /// The path that is writable: `path` itself or one of its parent directories.
        culprit: PathBuf,
        /// "owned by a user other than root" or "writable by group or others".
        why: &'static str,
        uid: u32,
        mode: u32,
    },

    /// `--insecure-options` names something rkt does not know.
    #[error("--insecure-options={0:?}: unknown option (known: {INSECURE_NET_PLUGINS}, http)")]
    UnknownInsecureOption(String),

    /// A path could not be examined.
    #[error("cannot examine {what} {}: {source}", path.display())]
    Stat {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The plugin timeout from `$RKT_NET_PLUGIN_TIMEOUT`, or [`cni::api::DEFAULT_TIMEOUT`].
pub fn plugin_timeout() -> Result<Duration, SecurityError> {
    match std::env::var(PLUGIN_TIMEOUT_ENV) {
        Ok(value) => parse_timeout(&value),
        Err(_) => Ok(cni::api::DEFAULT_TIMEOUT),
    }
}

fn parse_timeout(value: &str) -> Result<Duration, SecurityError> {
    let bad = |reason: String| SecurityError::BadTimeout {
        value: value.to_string(),
        reason,
    };
    match humantime::parse_duration(value.trim()) {
        Ok(d) if d.is_zero() => Err(bad("zero would fail every call".into())),
        Ok(d) => Ok(d),
        Err(e) => Err(bad(e.to_string())),
    }
}

/// Whether `--insecure-options` values (each possibly a comma-separated list) allow
/// untrusted network configurations and plugins.
pub fn insecure_net_plugins(options: &[String]) -> Result<bool, SecurityError> {
    let mut allowed = false;
    for opt in options.iter().flat_map(|o| o.split(',')) {
        match opt.trim() {
            INSECURE_NET_PLUGINS => allowed = true,
            // For images (`rkt run IMAGE`): plain HTTP to registries.
            "http" | "" => {}
            other => return Err(SecurityError::UnknownInsecureOption(other.to_string())),
        }
    }
    Ok(allowed)
}

/// Checks that only root can change `path` (what rkt is about to use as `what`): the path
/// (following symlinks) and every directory above it are owned by root and not writable by
/// group or others. A directory with the sticky bit owned by root (like `/tmp`) is fine
/// above it: others cannot rename or replace root's entries there.
pub fn check_trusted(what: &'static str, path: &Path) -> Result<(), SecurityError> {
    use std::os::unix::fs::MetadataExt;
    let stat = |p: &Path| {
        std::fs::metadata(p).map_err(|source| SecurityError::Stat {
            what,
            path: p.to_path_buf(),
            source,
        })
    };
    let real = std::fs::canonicalize(path).map_err(|source| SecurityError::Stat {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    let mut current: Option<&Path> = Some(&real);
    let mut is_target = true;
    while let Some(p) = current {
        let meta = stat(p)?;
        let (uid, mode) = (meta.uid(), meta.mode() & 0o7777);
        let sticky_root_dir = !is_target && uid == 0 && mode & 0o1000 != 0;
        let why = if uid != 0 {
            Some("owned by a user other than root")
        } else if mode & 0o022 != 0 && !sticky_root_dir {
            Some("writable by group or others")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(SecurityError::Writable {
                what,
                path: path.to_path_buf(),
                culprit: p.to_path_buf(),
                why,
                uid,
                mode,
            });
        }
        is_target = false;
        current = p.parent();
    }
    Ok(())
}

/// Checks what a pod's networks would use: the configuration directory (when it exists),
/// the file of every selected network (symlinks followed: the target must be trusted too),
/// every existing plugin directory, and the binary of every plugin the selected networks
/// name (as found in the plugin path). Networks or plugins that cannot be found are left
/// to setup, which reports them. [`crate::networking::preflight`] does the same in two
/// halves around the one planning of a pod's networks.
pub fn check_net_setup(
    selection: &crate::networking::NetSelection,
    conf_dir: &Path,
    plugin_path: &[PathBuf],
) -> Result<(), SecurityError> {
    if !applies(selection) {
        return Ok(());
    }
    check_dirs(conf_dir, plugin_path)?;
    let Ok(planned) = crate::networking::plan::plan(selection, conf_dir) else {
        return Ok(());
    };
    check_planned(&planned, conf_dir, plugin_path)
}

/// Whether the ownership checks apply: only to networks a pod would set up, and only when
/// rkt runs as root (plugins of a user's own rkt run with that user's rights, so nobody
/// gains anything by changing them).
pub fn applies(selection: &crate::networking::NetSelection) -> bool {
    !selection.is_host() && !selection.is_none() && nix::unistd::geteuid().is_root()
}

/// The directories: the configuration directory (when it exists) and every existing
/// plugin directory.
pub fn check_dirs(conf_dir: &Path, plugin_path: &[PathBuf]) -> Result<(), SecurityError> {
    if conf_dir.exists() {
        check_trusted("network configuration directory", conf_dir)?;
    }
    for dir in plugin_path.iter().filter(|d| d.is_dir()) {
        check_trusted("plugin directory", dir)?;
    }
    Ok(())
}

/// The planned networks' files and the binaries of their plugins (those found).
pub fn check_planned(
    planned: &[crate::networking::plan::PlannedNet],
    conf_dir: &Path,
    plugin_path: &[PathBuf],
) -> Result<(), SecurityError> {
    for net in planned {
        if !net.builtin {
            check_trusted("network configuration", &conf_dir.join(&net.file_name))?;
        }
        for plugin in &net.list.plugins {
            if let Ok(binary) = cni::invoke::find_in_path(&plugin.plugin_type, plugin_path) {
                check_trusted("plugin", &binary)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn timeouts_are_durations_above_zero() {
        assert_eq!(parse_timeout("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_timeout(" 500ms ").unwrap(),
            Duration::from_millis(500)
        );
        let e = parse_timeout("0s").unwrap_err().to_string();
        assert!(e.contains("RKT_NET_PLUGIN_TIMEOUT=\"0s\""), "{e}");
        let e = parse_timeout("soon").unwrap_err().to_string();
        assert!(e.contains("\"soon\"") && e.contains("30s"), "{e}");
    }

    #[test]
    fn insecure_options_know_net_plugins_only() {
        assert!(!insecure_net_plugins(&[]).unwrap());
        assert!(insecure_net_plugins(&["net-plugins".into()]).unwrap());
        assert!(insecure_net_plugins(&[",net-plugins".into()]).unwrap());
        let e = insecure_net_plugins(&["image".into()]).unwrap_err();
        assert!(e.to_string().contains("\"image\""), "{e}");
    }

    #[test]
    fn group_or_other_writable_is_refused_with_path_owner_and_mode() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipping: the ownership checks need root-owned files");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("plugins");
        std::fs::create_dir(&sub).unwrap();
        check_trusted("plugin directory", &sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_trusted("plugin directory", &sub)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&sub.display().to_string()), "{e}");
        assert!(e.contains("mode 0777") && e.contains("uid 0"), "{e}");
        assert!(e.contains("--insecure-options=net-plugins"), "{e}");
        // Sticky and root-owned above the target is fine (like /tmp); as the target it is not.
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let inner = sub.join("x");
        std::fs::create_dir(&inner).unwrap();
        check_trusted("plugin directory", &inner).unwrap();
        assert!(check_trusted("plugin directory", &sub).is_err());
        // Owned by another user.
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        nix::unistd::chown(&inner, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let e = check_trusted("plugin", &inner).unwrap_err().to_string();
        assert!(
            e.contains("owned by a user other than root") && e.contains("uid 65534"),
            "{e}"
        );
    }
}
