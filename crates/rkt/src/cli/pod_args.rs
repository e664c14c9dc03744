//! Options shared by the pod commands: the app (`run`, `prepare`), the pod's networking
//! (`run`, `run-prepared`), and how a pod is named on the command line (UUID prefixes,
//! `--uuid-file`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;

use rkt::networking::{DnsOptions, HostsOptions, NetOptions, NetSelection};
use rkt::pod::manifest::parse_user_meta;
use rkt::pod::run::{RunOptions, RunOutcome};
use rkt::pod::{App, Pod, PodStore};

use super::{GlobalArgs, NetDirArgs, FAILURE};

/// The app a pod runs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "App")]
pub struct AppArgs {
    /// Run the app with DIR as its root directory (with /proc, a minimal /dev, and the
    /// pod's /etc/resolv.conf and /etc/hosts provided). Default: the host's root.
    #[arg(long, value_name = "DIR")]
    pub rootfs: Option<PathBuf>,

    /// The app's name, shown by status and list [default: the command's base name].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Set an environment variable for the app; may be repeated. Overrides inherited ones.
    #[arg(long, value_name = "NAME=VALUE")]
    pub set_env: Vec<String>,

    /// Give the app the environment of the process that runs the pod, instead of a minimal
    /// one (PATH, HOME=/root, and TERM if set).
    #[arg(long)]
    pub inherit_env: bool,

    /// Attach an annotation to the app (free-form, for your tools; shown by status and in
    /// JSON as `user_annotations`); may be repeated.
    #[arg(long, value_name = "KEY=VALUE")]
    pub user_annotation: Vec<String>,

    /// Attach a label to the app (shown by status and in JSON as `user_labels`); may be
    /// repeated.
    #[arg(long, value_name = "KEY=VALUE")]
    pub user_label: Vec<String>,

    #[command(flatten)]
    pub image: super::image_app::ImageAppArgs,

    /// The command to run and its arguments (put them after `--` if they start with '-'),
    /// or an IMAGE (see `rkt fetch`), optionally followed by --exec=PATH and `-- ARGS`.
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

impl AppArgs {
    /// The app, checked: variables are `NAME=VALUE`, the rootfs is an existing directory.
    pub fn app(&self) -> anyhow::Result<App> {
        let mut env = Vec::new();
        for kv in &self.set_env {
            match kv.split_once('=') {
                Some((k, v)) if !k.is_empty() => env.push((k.to_string(), v.to_string())),
                _ => bail!("--set-env={kv:?}: expected NAME=VALUE"),
            }
        }
        let rootfs = match &self.rootfs {
            Some(dir) => {
                let dir = std::path::absolute(dir)
                    .with_context(|| format!("--rootfs={}", dir.display()))?;
                if !dir.is_dir() {
                    bail!("--rootfs={}: not a directory", dir.display());
                }
                // The host's root is the default; pivoting into it would fail.
                let real = std::fs::canonicalize(&dir)
                    .with_context(|| format!("--rootfs={}", dir.display()))?;
                (real != Path::new("/")).then_some(dir)
            }
            None => None,
        };
        let name = match &self.name {
            Some(name) if name.is_empty() || name.contains(['/', '=', ' ']) => {
                bail!("--name={name:?}: an app name is a non-empty word without '/', '=' or spaces")
            }
            Some(name) => name.clone(),
            None => App::default_name(&self.command[0]),
        };
        Ok(App {
            name,
            exec: self.command.clone(),
            env,
            inherit_env: self.inherit_env,
            rootfs,
            image: None,
            user_annotations: parse_user_meta("user-annotation", &self.user_annotation)?,
            user_labels: parse_user_meta("user-label", &self.user_label)?,
        })
    }
}

/// The pod's networking: which networks, where their configurations and plugins are, DNS,
/// hosts and hostname.
#[derive(Debug, Clone, Args)]
pub struct PodNetArgs {
    /// Networks to join: `default` (the built-in one, also with no --net or a bare --net),
    /// `host` (the caller's namespace), `none` (only lo), `all`, or a comma-separated list
    /// of network names, each optionally followed by `:K=V;K2=V2` (CNI_ARGS for that
    /// network). May be repeated.
    #[arg(
        long,
        value_name = "LIST",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "default",
        help_heading = "Networking"
    )]
    pub net: Vec<String>,

    #[command(flatten)]
    pub dirs: NetDirArgs,

    /// Name server for the pod's /etc/resolv.conf; may be repeated. `host` uses the host's
    /// file, `none` ignores DNS from the networks (each must be the only --dns).
    #[arg(long, value_name = "IP|host|none", help_heading = "Networking")]
    pub dns: Vec<String>,

    /// DNS search domain for the pod's /etc/resolv.conf; may be repeated.
    #[arg(long, value_name = "DOMAIN", help_heading = "Networking")]
    pub dns_search: Vec<String>,

    /// DNS option for the pod's /etc/resolv.conf; may be repeated.
    #[arg(long, value_name = "OPTION", help_heading = "Networking")]
    pub dns_opt: Vec<String>,

    /// DNS domain for the pod's /etc/resolv.conf.
    #[arg(long, value_name = "DOMAIN", help_heading = "Networking")]
    pub dns_domain: Option<String>,

    /// Extra /etc/hosts entry for the pod; may be repeated. `host` uses the host's file.
    #[arg(
        long,
        value_name = "IP=NAME[,NAME...]|host",
        help_heading = "Networking"
    )]
    pub hosts_entry: Vec<String>,

    /// The pod's hostname [default: rkt-<uuid>; the host's with --net=host].
    #[arg(long, value_name = "NAME", help_heading = "Networking")]
    pub hostname: Option<String>,

    /// Forward a host port to a port of the pod (tcp unless /udp); may be repeated. Needs a
    /// network whose plugins declare "portMappings" (the built-in default has portmap).
    #[arg(
        long,
        value_name = "[HOSTIP:]HOSTPORT:PODPORT[/tcp|/udp]",
        help_heading = "Networking"
    )]
    pub port: Vec<String>,
}

impl PodNetArgs {
    /// The run options, with the directories in effect now.
    pub fn run_options(
        &self,
        global: &GlobalArgs,
        uuid_file_save: Option<PathBuf>,
    ) -> anyhow::Result<RunOptions> {
        let selection = NetSelection::parse(&self.net)?;
        let ports = rkt::networking::ports::parse_all(&self.port)?;
        let dirs = global.effective_dirs(&self.dirs)?;
        let insecure = rkt::security::insecure_net_plugins(&self.dirs.insecure_options)?;
        if let Some(name) = &self.hostname {
            // It goes into /etc/hosts and the UTS namespace: no whitespace or shell text.
            let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if name.is_empty() || name.len() > 64 || !name.chars().all(word) {
                bail!("--hostname={name:?}: a hostname has 1 to 64 characters, each a letter, digit, '-', '.' or '_'");
            }
        }
        Ok(RunOptions {
            net: NetOptions {
                selection,
                conf_dir: dirs.net_conf.value.clone(),
                plugin_path: dirs.plugin_path(),
                cache_dir: dirs.cni_cache_dir(),
                dns: DnsOptions {
                    servers: self.dns.clone(),
                    search: self.dns_search.clone(),
                    options: self.dns_opt.clone(),
                    domain: self.dns_domain.clone(),
                },
                hosts: HostsOptions {
                    entries: self.hosts_entry.clone(),
                },
                hostname: self.hostname.clone().unwrap_or_default(),
                ports,
                check_ownership: !insecure,
            },
            exe: PathBuf::from("/proc/self/exe"),
            uuid_file_save,
        })
    }
}

/// One pod, by UUID (any unique prefix) or `--uuid-file`.
#[derive(Debug, Clone, Args)]
pub struct PodRef {
    /// The pod's UUID, or any unique prefix of it.
    #[arg(value_name = "UUID", required_unless_present = "uuid_file")]
    pub uuid: Option<String>,

    /// Read the pod's UUID from FILE (as written by --uuid-file-save).
    #[arg(long, value_name = "FILE", conflicts_with = "uuid")]
    pub uuid_file: Option<PathBuf>,
}

impl PodRef {
    /// The pod this names.
    pub fn lookup(&self, store: &PodStore) -> anyhow::Result<Pod> {
        let given = match (&self.uuid, &self.uuid_file) {
            (Some(uuid), _) => uuid.clone(),
            (None, Some(file)) => read_uuid_file(file)?,
            (None, None) => bail!("no pod given: pass a UUID or --uuid-file"),
        };
        Ok(store.lookup(&given)?)
    }
}

/// Several pods, by UUIDs (prefixes) and/or `--uuid-file`.
#[derive(Debug, Clone, Args)]
pub struct PodRefs {
    /// Pod UUIDs, or unique prefixes of them.
    #[arg(value_name = "UUID", required_unless_present = "uuid_file")]
    pub uuids: Vec<String>,

    /// Also the pod whose UUID is in FILE (as written by --uuid-file-save).
    #[arg(long, value_name = "FILE")]
    pub uuid_file: Option<PathBuf>,
}

impl PodRefs {
    /// The UUIDs or prefixes given, in order.
    pub fn given(&self) -> anyhow::Result<Vec<String>> {
        let mut all = self.uuids.clone();
        if let Some(file) = &self.uuid_file {
            all.push(read_uuid_file(file)?);
        }
        Ok(all)
    }
}

fn read_uuid_file(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read --uuid-file={}", file.display()))?;
    let uuid = text.trim();
    if uuid.is_empty() {
        bail!("--uuid-file={} is empty", file.display());
    }
    Ok(uuid.to_string())
}

/// The pod store of the data directory in effect.
pub fn store(global: &GlobalArgs) -> anyhow::Result<PodStore> {
    let dirs = global.effective_dirs(&NetDirArgs::default())?;
    Ok(PodStore::new(dirs.pods_dir()))
}

/// A process exit code for a shell-style exit status.
pub fn exit_code(status: i32) -> ExitCode {
    ExitCode::from((status & 0xff) as u8)
}

/// How `rkt run` and `rkt run-prepared` end once the pod ran: with the app's exit status,
/// or, when something of the pod could not be released (a plugin's DEL failed), with 254
/// after naming what failed and the app's status, so that a caller never takes a pod that
/// left state on the host for a clean success.
pub fn finish(global: &GlobalArgs, outcome: &RunOutcome) -> ExitCode {
    let RunOutcome {
        uuid,
        exit_status,
        cleanup_errors,
    } = outcome;
    global.debug(format_args!("pod {uuid} exited with status {exit_status}"));
    if cleanup_errors.is_empty() {
        return exit_code(*exit_status);
    }
    for err in cleanup_errors {
        eprintln!("rkt: {err}");
    }
    eprintln!(
        "rkt: pod {uuid}'s app exited with status {exit_status}, but cleaning up after it \
         failed (above); `rkt gc` retries"
    );
    ExitCode::from(FAILURE)
}
