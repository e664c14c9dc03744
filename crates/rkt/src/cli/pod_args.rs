//! Options shared by the pod commands: the app (`run`, `prepare`), the pod's networking
//! (`run`, `run-prepared`), the pod's cgroup (`run`, `prepare`, `run-prepared`), and how a
//! pod is named on the command line (UUID prefixes, `--uuid-file`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;

use rkt::image_pod::user::AppRoot;
use rkt::isolation::cgroups::CgroupParent;
use rkt::logs::LogConfig;
use rkt::networking::{DnsOptions, HostsOptions, NetOptions, NetSelection};
use rkt::pod::manifest::parse_user_meta;
use rkt::pod::run::{RunOptions, RunOutcome};
use rkt::pod::{App, IpcMode, Mount, Pod, PodStore};
use rkt::stage::app_logs::LogStreams;
use rkt::stage::NullStdio;

use super::isolation_args::IsolationArgs;
use super::on_off::OnOff;
use super::{GlobalArgs, NetDirArgs, FAILURE};

/// The app a pod runs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "App")]
pub struct AppArgs {
    /// Run the app with DIR as its root directory (with /proc, a minimal /dev, and the
    /// pod's /etc/resolv.conf and /etc/hosts provided). Default: the host's root.
    #[arg(long, value_name = "DIR")]
    pub rootfs: Option<PathBuf>,

    /// The app's name, shown by status and list [default: the command's base name, or the
    /// image's]. Apps of one pod need different names.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// The directory the app starts in (over an image's WorkingDir); created when missing
    /// in the app's own root filesystem (an image or --rootfs), never on the host's.
    #[arg(long, value_name = "DIR")]
    pub working_dir: Option<String>,

    /// Set an environment variable; may be repeated. Overrides inherited ones and
    /// --set-env-file. Before the first `---` (before or after the first app's image) it is
    /// every app's, as rkt's; after a `---`, that app's alone, over the pod's.
    #[arg(long, value_name = "NAME=VALUE")]
    pub set_env: Vec<String>,

    /// Read environment variables from FILE: one NAME=VALUE per line (empty lines and lines
    /// starting with '#' are skipped); may be repeated. Overrides inherited ones; --set-env
    /// and --environment override it. Every app's or one app's, as --set-env.
    #[arg(long, value_name = "FILE")]
    pub set_env_file: Vec<PathBuf>,

    /// Set an environment variable for this app alone, overriding --set-env (upstream rkt's
    /// per-app form); may be repeated.
    #[arg(long, value_name = "NAME=VALUE")]
    pub environment: Vec<String>,

    /// The pod's IPC namespace: `auto` or `private`, one of its own (the default);
    /// `parent`, the one of the process that runs it (the host's).
    #[arg(long, value_name = "auto|private|parent", default_value = "auto", value_parser = ["auto", "private", "parent"])]
    pub ipc: String,

    /// The app's OOM score adjustment, -1000 (never killed for lack of memory) to 1000
    /// (killed first); written to its /proc/PID/oom_score_adj before it starts, inherited
    /// by what it starts [default: the runner's]. Lowering it below rkt's own takes
    /// CAP_SYS_RESOURCE: without it such a value is refused before the pod is made.
    /// rkt 1.30's name; --oom-score-adjust is the same flag.
    #[arg(
        long = "oom-score-adj",
        visible_alias = "oom-score-adjust",
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(i16).range(-1000..=1000)
    )]
    pub oom_score_adjust: Option<i16>,

    /// Give the app the environment of the process that runs the pod, instead of a minimal
    /// one (PATH, HOME=/root, and TERM if set).
    #[arg(long, on_off = false)]
    pub inherit_env: bool,

    /// An annotation of the app, rkt 1.30's (appc's) app annotation: kept in the pod's
    /// manifest (`pod.json`, the app's `annotations`), for the tools that read it; may be
    /// repeated (a later KEY replaces an earlier one).
    #[arg(long, value_name = "KEY=VALUE")]
    pub annotation: Vec<String>,

    /// Attach an annotation to the app (free-form, for your tools; shown by status and in
    /// JSON as `user_annotations`); may be repeated.
    #[arg(long, value_name = "KEY=VALUE")]
    pub user_annotation: Vec<String>,

    /// Attach a label to the app (shown by status and in JSON as `user_labels`); may be
    /// repeated.
    #[arg(long, value_name = "KEY=VALUE")]
    pub user_label: Vec<String>,

    /// Mount the pod's volume NAME (see --volume) at PATH in the app's root (created there
    /// when missing, except on the host's root); may be repeated.
    #[arg(long, value_name = "volume=NAME,target=PATH")]
    pub mount: Vec<String>,

    #[command(flatten)]
    pub isolation: Box<IsolationArgs>,

    /// `--memory`, `--cpu` and `--cpu-shares` that followed the first app's image (rkt
    /// 1.30's place for an app's own limits), as `--flag=value`; set by the command line's
    /// parser ([`super::pod_apps::take_app_own`]), not a flag.
    #[arg(skip)]
    pub own_after_image: Vec<String>,

    #[command(flatten)]
    pub image: ImageAppArgs,

    /// The command to run and its arguments, or an IMAGE (see `rkt fetch`) optionally
    /// followed by app options (--exec=PATH, --name, ...) and `-- ARGS`: from `--` or the
    /// first word that is not an option. Before it, a word starting with '-' must be one of
    /// rkt's options. `---` starts another app of the pod: `--- [APP OPTIONS] APP ...`.
    #[arg(value_name = "COMMAND", required = true, trailing_var_arg = true)]
    pub command: Vec<String>,
}

/// Options for an app that runs an image.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Image")]
pub struct ImageAppArgs {
    /// With an IMAGE: run PATH instead of the image's Entrypoint (and without its Cmd;
    /// arguments after `--` are passed). May also follow the IMAGE.
    #[arg(long, value_name = "PATH")]
    pub exec: Option<String>,

    /// With an IMAGE: when to fetch it (never: only the store; new: when not stored;
    /// update: always ask its source).
    #[arg(long, value_enum, default_value_t = super::fetch::PullPolicyArg::New)]
    pub pull_policy: super::fetch::PullPolicyArg,

    #[command(flatten)]
    pub store: super::fetch::StoreArgs,

    /// With an IMAGE: unpack a copy of it into the pod instead of mounting an overlay of
    /// its layers (the fallback when the kernel has no overlay support).
    #[arg(long, on_off = false)]
    pub no_overlay: bool,
}

impl AppArgs {
    /// The app, checked: variables are `NAME=VALUE`, the rootfs is an existing directory.
    /// The variables are in order of precedence, lowest first (--set-env-file, --set-env,
    /// --environment): the stage lets a later one win.
    pub fn app(&self) -> anyhow::Result<App> {
        self.app_in(None)
    }

    /// [`Self::app`] of an app whose root is `image_root` (an image's): `--user` and
    /// `--group` names are looked up there.
    pub fn app_in(&self, image_root: Option<AppRoot<'_>>) -> anyhow::Result<App> {
        let mut env = self.set_env_vars()?;
        env.extend(pairs("--environment", &self.environment)?);
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
        if let Some(dir) = self.working_dir.as_deref().filter(|d| !d.starts_with('/')) {
            bail!("--working-dir={dir:?}: must be an absolute path");
        }
        let root = match (image_root, rootfs.as_deref()) {
            (Some(root), _) => root,
            (None, Some(dir)) => AppRoot::Dir(dir),
            (None, None) => AppRoot::Host,
        };
        let isolators = self.isolation.isolators(root)?;
        if let Some(adj) = self.oom_score_adjust {
            rkt::isolation::oom::check(adj)?;
        }
        Ok(App {
            name,
            exec: self.command.clone(),
            env,
            inherit_env: self.inherit_env,
            working_dir: self.working_dir.clone(),
            rootfs,
            ipc: match self.ipc.as_str() {
                "parent" => IpcMode::Parent,
                _ => IpcMode::Private,
            },
            own_pid_ns: false,
            oom_score_adjust: self.oom_score_adjust,
            image: None,
            annotations: parse_user_meta("annotation", &self.annotation)?,
            user_annotations: parse_user_meta("user-annotation", &self.user_annotation)?,
            user_labels: parse_user_meta("user-label", &self.user_label)?,
            isolators,
            log: None,
            mounts: self
                .mount
                .iter()
                .map(|m| Mount::parse(m))
                .collect::<Result<_, _>>()?,
        })
    }
}

impl AppArgs {
    /// The variables of `--set-env-file` then `--set-env`, checked: given before the first
    /// `---`, they are every app's (rkt's pod-wide `--set-env`), under each app's own.
    pub fn set_env_vars(&self) -> anyhow::Result<Vec<(String, String)>> {
        let mut env = Vec::new();
        for file in &self.set_env_file {
            env.extend(read_env_file(file)?);
        }
        env.extend(pairs("--set-env", &self.set_env)?);
        Ok(env)
    }
}

/// `NAME=VALUE` words of `flag`, in order.
fn pairs(flag: &str, values: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    values
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("{flag}={kv:?}: expected NAME=VALUE"),
        })
        .collect()
}

/// The variables of a `--set-env-file`: `NAME=VALUE` lines; empty lines and `#` comments
/// are skipped; anything else is an error naming the file and line.
fn read_env_file(file: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("--set-env-file={}: cannot read it", file.display()))?;
    let mut env = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
                env.push((k.to_string(), v.to_string()))
            }
            _ => bail!(
                "--set-env-file={}: line {}: expected NAME=VALUE, got {line:?}",
                file.display(),
                n + 1
            ),
        }
    }
    Ok(env)
}

/// Where the pod's cgroup goes (`run`, `prepare`, `run-prepared`; part of [`PodNetArgs`],
/// which every command that runs a pod takes).
#[derive(Debug, Clone, Default, Args)]
pub struct PodCgroupArgs {
    /// Make the pod's cgroup as PATH/rkt-<uuid> below the root of each cgroup hierarchy
    /// (PATH absolute within the hierarchy, e.g. /kubepods/pod1; created when missing). The
    /// default is the cgroup of the process that runs the pod, as <that cgroup>/rkt/<uuid>,
    /// so that a systemd unit or other supervisor keeps the pod in its accounting; under
    /// cgroup v2 only from the root cgroup, as a cgroup holding processes (rkt) gives its
    /// children no controllers (see docs/pods.md). Given to `prepare`, kept for
    /// `run-prepared`, whose own flag wins.
    #[arg(long, value_name = "PATH", help_heading = "Pod")]
    pub cgroup_parent: Option<String>,
}

impl PodCgroupArgs {
    /// The flag, checked: absolute, without `..`.
    pub fn parent(&self) -> anyhow::Result<Option<CgroupParent>> {
        Ok(self
            .cgroup_parent
            .as_deref()
            .map(CgroupParent::parse)
            .transpose()?)
    }
}

/// The pod's networking: which networks, where their configurations and plugins are, DNS,
/// hosts and hostname; and, as every command that runs a pod takes these, its cgroup.
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

    /// Name servers for the pod's /etc/resolv.conf; comma-separated, may be repeated. `host`
    /// uses the host's file, `none` ignores DNS from the networks (each must be the only
    /// --dns).
    #[arg(
        long,
        value_name = "IP[,IP...]|host|none",
        value_delimiter = ',',
        help_heading = "Networking"
    )]
    pub dns: Vec<String>,

    /// DNS search domains for the pod's /etc/resolv.conf; comma-separated, may be repeated.
    /// Without --dns=IP they replace the search list of the file the pod would get (the
    /// network's DNS, else the host's).
    #[arg(
        long,
        value_name = "DOMAIN[,DOMAIN...]",
        value_delimiter = ',',
        help_heading = "Networking"
    )]
    pub dns_search: Vec<String>,

    /// DNS options for the pod's /etc/resolv.conf; comma-separated, may be repeated (as
    /// --dns-search without --dns=IP).
    #[arg(
        long,
        value_name = "OPTION[,OPTION...]",
        value_delimiter = ',',
        help_heading = "Networking"
    )]
    pub dns_opt: Vec<String>,

    /// DNS domain for the pod's /etc/resolv.conf (as --dns-search without --dns=IP).
    #[arg(long, value_name = "DOMAIN", help_heading = "Networking")]
    pub dns_domain: Option<String>,

    /// Extra /etc/hosts entries for the pod, rkt's grammar: IP=HOST, comma-separated
    /// (a part without '=' is one more name for the IP before it); may be repeated.
    /// `host` uses the host's file.
    #[arg(
        long,
        value_name = "IP=HOST[,IP=HOST...]|host",
        help_heading = "Networking"
    )]
    pub hosts_entry: Vec<String>,

    /// The pod's hostname [default: rkt-<uuid>; the host's with --net=host].
    #[arg(long, value_name = "NAME", help_heading = "Networking")]
    pub hostname: Option<String>,

    /// Forward a host port to a port of the pod (tcp unless /udp); may be repeated. Needs a
    /// network whose plugins declare "portMappings" (the built-in default has portmap).
    /// NAME:[HOSTIP:]HOSTPORT forwards a port the app's image exposes, by its docker2aci
    /// name (80/tcp is 80-tcp).
    #[arg(
        long,
        value_name = "[HOSTIP:]HOSTPORT:PODPORT[/tcp|/udp]",
        help_heading = "Networking"
    )]
    pub port: Vec<String>,

    #[command(flatten)]
    pub cgroup: PodCgroupArgs,
}

impl PodNetArgs {
    /// The run options, with the directories in effect now, and the pod store of the data
    /// directory in effect (the directories are worked out, and shown with `--debug`, once).
    pub fn run_options(
        &self,
        global: &GlobalArgs,
        dirs: &rkt::config::EffectiveDirs,
        stdio: &StdioArgs,
        uuid_file_save: Option<PathBuf>,
    ) -> anyhow::Result<(RunOptions, PodStore)> {
        let (null_stdio, log_streams) = stdio.streams()?;
        let selection = NetSelection::parse(&self.net)?;
        let ports = rkt::firewall::ports::parse_all(&self.port)?;
        let insecure = global.insecure()?;
        if let Some(name) = &self.hostname {
            // It goes into /etc/hosts and the UTS namespace: no whitespace or shell text.
            let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if name.is_empty() || name.len() > 64 || !name.chars().all(word) {
                bail!("--hostname={name:?}: a hostname has 1 to 64 characters, each a letter, digit, '-', '.' or '_'");
            }
        }
        let store = PodStore::new(dirs.pods_dir());
        let opts = RunOptions {
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
                check_ownership: !insecure.net_plugins,
            },
            exe: PathBuf::from("/proc/self/exe"),
            uuid_file_save,
            plugin_timeout: global.plugin_timeout,
            null_stdio,
            log_streams,
            isolation_off: insecure.isolation,
            started_notice: None,
            cgroup_parent: self.cgroup.parent()?,
        };
        Ok((opts, store))
    }
}

/// The app's standard streams (`run`, `run-prepared`). By default the app has rkt's stdin,
/// stdout and stderr, a terminal among them relayed through one of the pod's own.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "App streams")]
pub struct StdioArgs {
    /// The app reads rkt's stdin (what it does by default; upstream rkt's pods did only
    /// with --interactive); when that is a terminal, through a terminal of the pod's own
    /// that rkt relays (the pod never holds rkt's). `=false`: its stdin is /dev/null.
    #[arg(long, on_off = None)]
    pub interactive: Option<bool>,

    /// The app's stdin: `null` for /dev/null. (Upstream's `tty` and `stream` are not
    /// supported: the app has rkt's own stdin without this flag.)
    #[arg(long, value_name = "null")]
    pub stdin: Option<String>,

    /// The apps' stdout: `null` for /dev/null, `log` for each app's log in the pod's
    /// directory (CRI log format, read with `rkt logs`). Upstream's `tty` and `stream` are
    /// not supported here.
    #[arg(long, value_name = "null|log")]
    pub stdout: Option<String>,

    /// The apps' stderr: `null` for /dev/null, `log` for each app's log (as --stdout=log;
    /// both go to the same file, each record saying its stream).
    #[arg(long, value_name = "null|log")]
    pub stderr: Option<String>,

    /// With --stdout=log or --stderr=log: the size at which an app's log rotates (LOG
    /// becomes LOG.1, LOG.1 LOG.2, …), in bytes or with a K, M or G suffix; 0: never.
    #[arg(long, value_name = "SIZE", default_value = "10M", value_parser = parse_size)]
    pub log_max_size: u64,

    /// With --stdout=log or --stderr=log: how many files an app's log keeps, the current
    /// one included.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub log_max_files: u32,
}

/// `SIZE`: bytes, or a number with a K, M or G suffix (powers of 1024).
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit.to_ascii_uppercase().trim_end_matches(['B', 'I']) {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        _ => return Err(format!("unknown unit {unit:?} (expected bytes, K, M or G)")),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 10M, 512K, 0)"))?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

impl StdioArgs {
    /// A sandbox's own streams: it has no app of its own, so nothing of its reaches a
    /// terminal.
    pub fn default_for_sandbox() -> StdioArgs {
        StdioArgs {
            interactive: None,
            stdin: Some("null".into()),
            stdout: Some("null".into()),
            stderr: Some("null".into()),
            log_max_size: 10 << 20,
            log_max_files: 5,
        }
    }

    /// Which streams are /dev/null and which go to the apps' logs; any other mode is
    /// refused, naming the flag.
    pub fn streams(&self) -> anyhow::Result<(NullStdio, LogStreams)> {
        let mode = |flag: &str, value: &Option<String>, log: bool| match value.as_deref() {
            None => Ok(None),
            Some("null") => Ok(Some(Mode::Null)),
            Some("log") if log => Ok(Some(Mode::Log)),
            Some(other) => bail!(
                "--{flag}={other}: not supported by this rkt: the app has rkt's own {flag} (a \
                 terminal relayed through the pod's own) unless --{flag}=null{}; `tty` and \
                 `stream` are for a sandbox's apps (`rkt app add`), which `rkt attach` reaches",
                if log { " or log" } else { "" }
            ),
        };
        let stdin = mode("stdin", &self.stdin, false)?;
        let stdout = mode("stdout", &self.stdout, true)?;
        let stderr = mode("stderr", &self.stderr, true)?;
        let null = NullStdio {
            stdin: stdin == Some(Mode::Null) || self.interactive == Some(false),
            stdout: stdout == Some(Mode::Null),
            stderr: stderr == Some(Mode::Null),
        };
        let logs = LogStreams {
            stdout: stdout == Some(Mode::Log),
            stderr: stderr == Some(Mode::Log),
            config: LogConfig {
                max_size: self.log_max_size,
                max_files: self.log_max_files,
                ..LogConfig::default()
            },
        };
        Ok((null, logs))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Null,
    Log,
}

/// Upstream rkt's pod options this rkt recognises only to refuse them by name, so that a
/// script passing them fails clearly instead of having them taken for something else.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Upstream rkt options refused here")]
pub struct UnsupportedArgs {
    /// Not supported: there is no metadata service. `--mds-register=false` (upstream's
    /// usual scripted value) is accepted.
    #[arg(long, on_off = None)]
    pub mds_register: Option<bool>,

    /// Not supported: pods run with rkt's built-in stage, there are no stage1 images.
    #[arg(long, value_name = "URL")]
    pub stage1_url: Option<String>,

    /// Not supported (see --stage1-url).
    #[arg(long, value_name = "PATH")]
    pub stage1_path: Option<String>,

    /// Not supported (see --stage1-url).
    #[arg(long, value_name = "NAME")]
    pub stage1_name: Option<String>,

    /// Not supported (see --stage1-url).
    #[arg(long, value_name = "HASH")]
    pub stage1_hash: Option<String>,

    /// Not supported (see --stage1-url).
    #[arg(long, value_name = "PATH")]
    pub stage1_from_dir: Option<String>,
}

impl UnsupportedArgs {
    /// Refuses the first option given, saying why.
    pub fn refuse(&self) -> anyhow::Result<()> {
        if self.mds_register == Some(true) {
            bail!("--mds-register: not supported by this rkt: there is no metadata service to register pods with (--mds-register=false is accepted)");
        }
        let stage1 = [
            ("--stage1-url", &self.stage1_url),
            ("--stage1-path", &self.stage1_path),
            ("--stage1-name", &self.stage1_name),
            ("--stage1-hash", &self.stage1_hash),
            ("--stage1-from-dir", &self.stage1_from_dir),
        ];
        if let Some((flag, Some(value))) = stage1.iter().find(|(_, v)| v.is_some()) {
            bail!("{flag}={value}: not supported by this rkt: pods run with its built-in stage, not a stage1 image");
        }
        Ok(())
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
        eprintln!("rkt: {}", rkt::error::chain(err));
    }
    eprintln!(
        "rkt: pod {uuid}'s app exited with status {exit_status}, but cleaning up after it \
         failed (above); `rkt gc` retries"
    );
    ExitCode::from(FAILURE)
}

/// The index of the app `--app` names in the pod `uuid`, or of its only app without
/// `--app`; an error listing the pod's apps otherwise.
pub fn app_index(
    uuid: &str,
    manifest: &rkt::podstore::PodManifest,
    app: Option<&str>,
) -> anyhow::Result<usize> {
    let names: Vec<&str> = manifest.apps.iter().map(|a| a.name.as_str()).collect();
    match (app, &names[..]) {
        (_, []) => bail!("pod {uuid} has no apps (a sandbox's are added with `rkt app add`)"),
        (None, [_]) => Ok(0),
        (None, _) => bail!(
            "pod {uuid} has several apps: choose one with --app=NAME ({})",
            names.join(", ")
        ),
        (Some(app), _) => names.iter().position(|n| *n == app).ok_or_else(|| {
            anyhow::anyhow!(
                "--app={app}: pod {uuid} has no such app (its apps: {})",
                names.join(", ")
            )
        }),
    }
}
