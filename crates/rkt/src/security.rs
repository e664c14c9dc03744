//! What rkt trusts before it runs plugins as root, and how long it waits for them.
//!
//! - [`plugin_timeout`]: the limit for each plugin call, `$RKT_NET_PLUGIN_TIMEOUT`
//!   (a duration like `30s`, `500ms`, `2m`; default [`cni::api::DEFAULT_TIMEOUT`]). A plugin
//!   that runs longer is killed and the call fails naming it, so a hung plugin cannot
//!   block `rkt run`, `rm` or `gc` forever.
//! - [`check_trusted`]: a network configuration directory, a plugin directory or a plugin
//!   binary that a user other than root can write is a way to run code as root; rkt refuses
//!   to use it, naming the path, its owner and mode, unless `--insecure-options=net-plugins`.
//!
//! This module is given the paths to examine; it plans no networks and looks up no
//! plugins (networking does, once, and hands over what it will use), so it depends on
//! nothing else in rkt.

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
    #[error(
        "--insecure-options: unknown value {0:?} (valid: {INSECURE_OPTIONS}; comma-separated)"
    )]
    UnknownInsecureOption(String),

    /// A path could not be examined.
    #[error("cannot examine {what} {}", path.display())]
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

/// The values `--insecure-options` knows, as one line for messages: rkt 1.30's and ours
/// (`net-plugins`).
pub const INSECURE_OPTIONS: &str = "none, image, tls, ondisk, http, pubkey, capabilities, \
     paths, seccomp, all-fetch, all-run, all, net-plugins";

/// What `--insecure-options` allows: one meaning for every command, which takes only what
/// concerns it. The values are rkt 1.30's, with rkt's groups (`all-fetch`, `all-run`,
/// `all`), plus `net-plugins`, this rkt's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InsecureOptions {
    /// `net-plugins`: network configurations and plugins others can change.
    pub net_plugins: bool,
    /// `capabilities`, `seccomp`, `paths`: the parts of pod isolation turned off.
    pub isolation: crate::isolation::Disabled,
    /// `http`: registries over plain HTTP.
    pub http: bool,
    /// `tls`: any registry certificate is accepted.
    pub tls: bool,
    /// `image`: rkt 1.30 ran images without a valid signature. This rkt verifies no image
    /// signatures (an image's content is checked against its digest, always), so it
    /// changes nothing; `rkt trust` says so.
    pub image: bool,
    /// `ondisk`: rkt 1.30 skipped checking a stored image against its hash before it ran
    /// it. This rkt's store checks every blob's digest when it is written, not on each use:
    /// nothing to skip.
    pub ondisk: bool,
    /// `pubkey`: rkt 1.30 fetched keys over plain HTTP in `rkt trust`'s discovery; this rkt
    /// discovers no keys.
    pub pubkey: bool,
}

/// rkt 1.30's `all-fetch`.
const ALL_FETCH: [&str; 5] = ["image", "tls", "ondisk", "http", "pubkey"];
/// rkt 1.30's `all-run`, and `net-plugins`: what rkt 1.30 ran without checking.
const ALL_RUN: [&str; 4] = ["capabilities", "paths", "seccomp", INSECURE_NET_PLUGINS];

impl InsecureOptions {
    /// The values [`InsecureOptions::parse`] knows.
    pub const KNOWN: [&'static str; 13] = [
        "none",
        "image",
        "tls",
        "ondisk",
        "http",
        "pubkey",
        "capabilities",
        "paths",
        "seccomp",
        "all-fetch",
        "all-run",
        "all",
        INSECURE_NET_PLUGINS,
    ];

    /// Parses `--insecure-options` values (each possibly a comma-separated list, in any
    /// case); `none` adds nothing, so `none,http` is `http`.
    pub fn parse(options: &[String]) -> Result<InsecureOptions, SecurityError> {
        let mut allowed = InsecureOptions::default();
        for opt in options.iter().flat_map(|o| o.split(',')) {
            let opt = opt.trim().to_ascii_lowercase();
            match opt.as_str() {
                "" | "none" => {}
                "all-fetch" => ALL_FETCH.iter().for_each(|o| allowed.set(o)),
                "all-run" => ALL_RUN.iter().for_each(|o| allowed.set(o)),
                "all" => ALL_FETCH
                    .iter()
                    .chain(&ALL_RUN)
                    .for_each(|o| allowed.set(o)),
                known if Self::KNOWN.contains(&known) => allowed.set(known),
                _ => return Err(SecurityError::UnknownInsecureOption(opt)),
            }
        }
        Ok(allowed)
    }

    /// Turns on one value that is no group.
    fn set(&mut self, option: &str) {
        match option {
            INSECURE_NET_PLUGINS => self.net_plugins = true,
            "capabilities" => self.isolation.capabilities = true,
            "seccomp" => self.isolation.seccomp = true,
            "paths" => self.isolation.paths = true,
            "http" => self.http = true,
            "tls" => self.tls = true,
            "image" => self.image = true,
            "ondisk" => self.ondisk = true,
            "pubkey" => self.pubkey = true,
            _ => unreachable!("{option} is a group or unknown"),
        }
    }
}

/// Whether `--insecure-options` values (each possibly a comma-separated list) allow
/// untrusted network configurations and plugins.
pub fn insecure_net_plugins(options: &[String]) -> Result<bool, SecurityError> {
    Ok(InsecureOptions::parse(options)?.net_plugins)
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

/// Whether the ownership checks apply: only when rkt runs as root (plugins of a user's own
/// rkt run with that user's rights, so nobody gains anything by changing them). They are
/// for networks a pod would set up; `--net=host` and `--net=none` run no plugins.
pub fn applies() -> bool {
    nix::unistd::geteuid().is_root()
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

/// A network configuration file about to be read (symlinks followed: the target must be
/// trusted too).
pub fn check_conf_file(path: &Path) -> Result<(), SecurityError> {
    check_trusted("network configuration", path)
}

/// A plugin binary about to be run: the very path that will be executed.
pub fn check_plugin(binary: &Path) -> Result<(), SecurityError> {
    check_trusted("plugin", binary)
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
    fn insecure_options_know_net_plugins_and_the_isolation_parts() {
        assert!(!insecure_net_plugins(&[]).unwrap());
        assert!(insecure_net_plugins(&["net-plugins".into()]).unwrap());
        assert!(insecure_net_plugins(&[",net-plugins".into()]).unwrap());
        let e = insecure_net_plugins(&["signatures".into()]).unwrap_err();
        let e = e.to_string();
        assert!(
            e.starts_with("--insecure-options") && e.contains("\"signatures\""),
            "{e}"
        );
        for known in InsecureOptions::KNOWN {
            assert!(e.contains(known), "{known} missing from {e}");
            InsecureOptions::parse(&[known.to_string()]).unwrap();
        }
        let some = InsecureOptions::parse(&["seccomp,paths".into()]).unwrap();
        assert!(!some.net_plugins && !some.isolation.capabilities);
        assert!(some.isolation.seccomp && some.isolation.paths);
        let all = InsecureOptions::parse(&["all-run".into()]).unwrap();
        assert!(all.net_plugins && all.isolation.capabilities);
        assert!(all.isolation.seccomp && all.isolation.paths);
        assert!(!all.http && !all.tls && !all.image);
    }

    /// rkt 1.30's groups: `all` is `all-fetch` and `all-run`, `none` adds nothing.
    #[test]
    fn insecure_option_groups_have_rkt_s_meaning() {
        let parse = |v: &str| InsecureOptions::parse(&[v.to_string()]).unwrap();
        let fetch = parse("all-fetch");
        assert!(fetch.image && fetch.tls && fetch.ondisk && fetch.http && fetch.pubkey);
        assert_eq!(fetch.isolation, crate::isolation::Disabled::default());
        assert!(!fetch.net_plugins);
        let all = parse("all");
        let mut both = parse("all-fetch,all-run");
        assert_eq!(all, both);
        assert_eq!(parse("image,tls,ondisk,http,pubkey"), fetch);
        both = parse("capabilities,paths,seccomp,net-plugins");
        assert_eq!(both, parse("all-run"));
        assert_eq!(parse("none"), InsecureOptions::default());
        assert_eq!(parse("none,http"), parse("http"));
        assert_eq!(parse("ALL"), all);
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
