//! The server's command line and the configuration it resolves to: rkt's global options
//! (`--dir`, `--system-config`, `--local-config`, `--user-config`) with rkt's precedence for
//! the directories (flags > the `paths` configuration > defaults, by the library's
//! `config::resolve`), the socket, the CNI directories and the streaming address.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

use rkt::config::{
    absolutize, load_paths, require_dir, resolve, ConfigDirs, DirOverrides, EffectiveDirs, Origin,
    Value,
};

/// A Kubernetes CRI (runtime.v1) server on rkt: kubelet's
/// `--container-runtime-endpoint=unix:///run/rkt/cri.sock`, or crictl's
/// `--runtime-endpoint`. Pod sandboxes are rkt sandboxes (`rkt app sandbox`) and containers
/// their apps, kept in rkt's data directory, so `rkt list`, `rkt status` and `rkt app list`
/// show them too, and a restarted server finds them again. See docs/cri.md.
#[derive(Debug, Parser)]
#[command(name = "rkt-cri", version, max_term_width = 100)]
pub struct Args {
    /// Where to listen: `unix:///PATH` (the socket is made, replacing a stale one; its
    /// directory is created).
    #[arg(
        long,
        value_name = "unix:///PATH",
        default_value = "unix:///run/rkt/cri.sock"
    )]
    pub listen: String,

    /// rkt's data directory, where pods, images and the CNI cache live [default: "data" of
    /// the paths configuration, else /var/lib/rkt].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// rkt's system configuration directory (lowest precedence) [default: /usr/lib/rkt].
    #[arg(long, value_name = "DIR")]
    pub system_config: Option<PathBuf>,

    /// rkt's local configuration directory [default: /etc/rkt]. Its net.d is the default CNI
    /// configuration directory, and its certs.d/HOST/hosts.toml configure registry mirrors
    /// (containerd's layout; see docs/cri.md).
    #[arg(long, value_name = "DIR")]
    pub local_config: Option<PathBuf>,

    /// rkt's user configuration directory (highest precedence) [default: none].
    #[arg(long, value_name = "DIR")]
    pub user_config: Option<PathBuf>,

    /// The CNI configuration directory, kubelet's --cni-conf-dir: the pod network is the
    /// first network of its files in file-name order, read at each RunPodSandbox (a file
    /// written later is picked up without a restart). Overrides "net-conf" of the paths
    /// configuration [default: <local-config>/net.d].
    #[arg(long, value_name = "DIR")]
    pub net_conf_dir: Option<PathBuf>,

    /// The pod network by name, instead of the first network of the CNI configuration
    /// directory (CRI-O's cni_default_network): a network of that directory, read at each
    /// RunPodSandbox and Status like the first; NetworkReady is false while it is not there.
    #[arg(long, value_name = "NAME")]
    pub net_name: Option<String>,

    /// Directories of CNI plugins, kubelet's --cni-bin-dir; may be repeated, each value may
    /// be a ':'-separated list. Replaces "net-plugin" of the paths configuration;
    /// /usr/lib/cni, /usr/libexec/cni and /opt/cni/bin are always searched last.
    #[arg(long, value_name = "DIR[:DIR...]", value_delimiter = ':')]
    pub net_plugin_dir: Vec<PathBuf>,

    /// The address of the streaming server (kubelet's --streaming-address): Exec, Attach
    /// and PortForward answer a one-time URL on it (valid for a minute) that clients
    /// upgrade to SPDY/3.1 or WebSocket. Port 0 takes a free port; an unspecified address
    /// (0.0.0.0) listens everywhere and puts 127.0.0.1 in the URLs. Plain HTTP: keep it on
    /// loopback unless the network is trusted.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
    pub streaming_address: String,

    /// The image of a sandbox, which an rkt sandbox does not need (its init is rkt's own):
    /// kubelet names one; it is neither pulled nor run.
    #[arg(long, value_name = "IMAGE", hide = true)]
    pub pause_image: Option<String>,
}

/// What the server runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The socket's path.
    pub socket: PathBuf,
    pub config_dirs: ConfigDirs,
    /// The directories in effect: data, CNI configuration and plugins.
    pub dirs: EffectiveDirs,
    pub streaming_address: std::net::SocketAddr,
    /// The pod network's name (`--net-name`); `None`: the first of the directory.
    pub net_name: Option<String>,
    /// Each CNI plugin call's limit.
    pub plugin_timeout: Duration,
    /// What starts the pods' runners and log monitors.
    pub spawner: std::sync::Arc<crate::spawner::Spawner>,
}

impl Config {
    pub fn from_args(args: &Args) -> anyhow::Result<Config> {
        let Some(path) = args.listen.strip_prefix("unix://") else {
            bail!(
                "--listen={}: only unix:///PATH is supported (a unix socket)",
                args.listen
            );
        };
        if !path.starts_with('/') {
            bail!(
                "--listen={}: the socket's path must be absolute",
                args.listen
            );
        }
        let streaming_address = args.streaming_address.parse().with_context(|| {
            format!(
                "--streaming-address={}: expected HOST:PORT (e.g. 127.0.0.1:0)",
                args.streaming_address
            )
        })?;
        if let Some(name) = &args.net_name {
            if name.is_empty() || matches!(name.as_str(), "host" | "none") {
                bail!(
                    "--net-name={name:?}: name a network of the CNI configuration directory \
                     (a pod in the host's network asks for it in its own config)"
                );
            }
        }
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let explicit = |flag: &'static str, given: &Option<PathBuf>| {
            let Some(dir) = given else {
                return anyhow::Ok(None);
            };
            let dir = Value::new(absolutize(&cwd, dir), Origin::Flag(flag));
            require_dir("configuration directory", &dir)?;
            Ok(Some(dir.value))
        };
        let defaults = ConfigDirs::default();
        let config_dirs = ConfigDirs {
            system: explicit("--system-config", &args.system_config)?.unwrap_or(defaults.system),
            local: explicit("--local-config", &args.local_config)?.unwrap_or(defaults.local),
            user: explicit("--user-config", &args.user_config)?,
        };
        let paths = load_paths(&config_dirs)?;
        for warning in &paths.warnings {
            eprintln!("rkt-cri: warning: {warning}");
        }
        let overrides = DirOverrides::new(
            args.dir.clone(),
            args.net_conf_dir.clone(),
            &args.net_plugin_dir,
        );
        let dirs = resolve(&config_dirs, &paths, &overrides, &cwd)?;
        rkt::networking::admission::set_limit(dirs.net_operations.value);
        Ok(Config {
            socket: PathBuf::from(path),
            config_dirs,
            dirs,
            streaming_address,
            net_name: args.net_name.clone(),
            plugin_timeout: cni::api::DEFAULT_TIMEOUT,
            spawner: Default::default(),
        })
    }

    /// Where pods live.
    pub fn pods_dir(&self) -> PathBuf {
        self.dirs.pods_dir()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.dirs.data.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["rkt-cri"];
        argv.extend_from_slice(extra);
        Args::parse_from(argv)
    }

    #[test]
    fn flags_beat_the_paths_configuration() {
        let tmp = tempfile::tempdir().unwrap();
        let local = tmp.path().join("etc");
        std::fs::create_dir_all(local.join("paths.d")).unwrap();
        let from_file = tmp.path().join("from-file");
        let from_flag = tmp.path().join("from-flag");
        std::fs::create_dir_all(&from_file).unwrap();
        std::fs::create_dir_all(&from_flag).unwrap();
        std::fs::write(
            local.join("paths.d/paths.json"),
            format!(
                r#"{{"rktKind":"paths","rktVersion":"v1","net-conf":"{}"}}"#,
                from_file.display()
            ),
        )
        .unwrap();
        let l = local.to_str().unwrap();
        let c = Config::from_args(&args(&["--local-config", l])).unwrap();
        assert_eq!(c.dirs.net_conf.value, from_file);
        let f = from_flag.to_str().unwrap();
        let c = Config::from_args(&args(&["--local-config", l, "--net-conf-dir", f])).unwrap();
        assert_eq!(c.dirs.net_conf.value, from_flag);
        assert_eq!(c.socket, PathBuf::from("/run/rkt/cri.sock"));
    }

    #[test]
    fn bad_listen_and_streaming_addresses_name_the_flag() {
        for (argv, flag) in [
            (&["--listen", "tcp://1.2.3.4:5"][..], "--listen"),
            (&["--listen", "unix://rel.sock"][..], "--listen"),
            (
                &["--streaming-address", "nowhere"][..],
                "--streaming-address",
            ),
            (&["--net-name", "host"][..], "--net-name"),
        ] {
            let e = Config::from_args(&args(argv)).unwrap_err().to_string();
            assert!(e.contains(flag), "{argv:?}: {e}");
        }
    }
}
