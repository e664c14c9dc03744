//! The command line: the clap definitions of `rkt`, its global options, and one module per
//! command. Each command module exposes `XArgs` (a clap `Args` struct) and
//! `pub fn run(global: &GlobalArgs, args: &XArgs) -> anyhow::Result<ExitCode>`; it parses
//! nothing by hand and calls into the `rkt` library, which owns the behaviour.
//!
//! To add a command: a module here, a variant in [`Command`], an arm in [`dispatch`].
//! Commands print with `println!`/`print!`, which are [`output`]'s: a closed stdout
//! (`rkt list | head -1`) ends rkt quietly instead of with a panic.

// First, so that its `println!` and `print!` are the ones of every command.
#[macro_use]
mod output;

mod app;
mod attach;
mod cat_manifest;
mod completion;
mod config;
mod detach;
mod enter;
mod fetch;
mod gc;
mod image;
mod image_app;
mod isolation_args;
mod list;
mod logs;
mod man;
mod net;
mod on_off;
mod pod_apps;
mod pod_args;
mod prepare;
mod progress;
pub mod reap;
mod rm;
mod run;
mod run_prepared;
mod status;
mod stop;
mod trust;
mod usage_error;
mod version;
mod volume_args;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use on_off::OnOff;
use rkt::config::unused::unused_files;
use rkt::config::{
    absolutize, load_paths, require_dir, resolve, ConfigDirs, DirOverrides, EffectiveDirs, Origin,
    PathsConfig, Value, DEFAULT_LOCAL_CONFIG, DEFAULT_SYSTEM_CONFIG,
};

/// Exit status of rkt's own failures (bad usage, configuration, I/O). Like upstream rkt,
/// 254, so that it stays apart from the exit status of an app that `rkt run` passes on.
pub const FAILURE: u8 = 254;

const PRECEDENCE_HELP: &str = "\
Directories, highest precedence first:
  data dir           --dir > \"data\" in paths.d > /var/lib/rkt
  network configs    --net-conf-dir > \"net-conf\" in paths.d > <local-config>/net.d
  plugin search path --net-plugin-dir > \"net-plugin\" in paths.d
                       > <local-config>/net.d, /usr/lib/rkt/plugins/net;
                     then always /usr/lib/cni, /usr/libexec/cni, /opt/cni/bin (those that exist)
paths.d files are read from <system-config>/paths.d, <local-config>/paths.d and
<user-config>/paths.d; a later directory overrides an earlier one field by field.
`rkt config --show-origin` shows the values in effect and where each was set.

Each CNI plugin call may take RKT_NET_PLUGIN_TIMEOUT (a duration like 30s, 500ms;
default 60s); a plugin that takes longer is killed and the call fails.

rkt exits with status 254 when it fails itself (usage, configuration, I/O).";

/// rkt: pods in their own network namespace, wired up by CNI plugins.
#[derive(Debug, Parser)]
#[command(name = "rkt", version, after_help = PRECEDENCE_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes, before or after the command name.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Data directory, where pods and the CNI cache live [default: "data" from the paths
    /// configuration, else /var/lib/rkt]. Created when needed.
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// System configuration directory, the vendor's (lowest precedence)
    /// [default: /usr/lib/rkt].
    #[arg(long, global = true, value_name = "DIR")]
    pub system_config: Option<PathBuf>,

    /// Local configuration directory, the administrator's; overrides the system one
    /// field by field. Its net.d is the default network configuration directory
    /// [default: /etc/rkt].
    #[arg(long, global = true, value_name = "DIR")]
    pub local_config: Option<PathBuf>,

    /// User configuration directory; overrides the local one field by field [default:
    /// none].
    #[arg(long, global = true, value_name = "DIR")]
    pub user_config: Option<PathBuf>,

    /// Print debugging information and configuration warnings to stderr.
    #[arg(long, global = true, on_off = false)]
    pub debug: bool,

    /// Each plugin call's limit, `$RKT_NET_PLUGIN_TIMEOUT`: read once, before any command
    /// runs, and handed to the library in the options of what runs plugins.
    #[arg(skip = cni::api::DEFAULT_TIMEOUT)]
    pub plugin_timeout: std::time::Duration,
    /// Accept insecure settings, rkt 1.30's values and meaning, the same for every command
    /// (each takes what concerns it). `capabilities`, `seccomp`, `paths`: run the app
    /// without that part of pod isolation (all capabilities; no syscall filter; host's /dev,
    /// /proc and /sys unprotected). `net-plugins` (this rkt's own): use network
    /// configurations, plugin directories and plugins that a user other than root can
    /// change (run as root, rkt refuses them otherwise). `all-run`: those four. `http`
    /// (fetch, run IMAGE): reach registries over plain HTTP instead of HTTPS. `tls`: accept
    /// any registry certificate. `image`, `ondisk`, `pubkey`: accepted, change nothing here
    /// (this rkt verifies no image signatures, checks stored blobs when written, discovers
    /// no keys). `all-fetch`: image, tls, ondisk, http, pubkey. `all`: all-fetch and
    /// all-run. `none`: nothing. Comma-separated; may be repeated; before or after the
    /// command, as upstream rkt.
    #[arg(long, global = true, value_name = "OPTION[,OPTION...]")]
    pub insecure_options: Vec<String>,
}

/// Where to read network configurations and find CNI plugins; flattened into the commands
/// that set up or list networks. Relative directories are taken from the current directory.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Network directories")]
pub struct NetDirArgs {
    /// Directory of network configuration files. Overrides "net-conf" from the paths
    /// configuration (user > local > system), which overrides <local-config>/net.d.
    #[arg(long, value_name = "DIR")]
    pub net_conf_dir: Option<PathBuf>,

    /// Directories to search for CNI plugins, in order; may be repeated, and each value
    /// may be a ':'-separated list like CNI_PATH. Replaces "net-plugin" from the paths
    /// configuration, which replaces the default <local-config>/net.d,
    /// /usr/lib/rkt/plugins/net. /usr/lib/cni, /usr/libexec/cni and /opt/cni/bin (those
    /// that exist) are always searched last.
    #[arg(long, value_name = "DIR[:DIR...]", value_delimiter = ':')]
    pub net_plugin_dir: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Config(config::ConfigArgs),
    Version(version::VersionArgs),
    Run(Box<run::RunArgs>),
    Prepare(Box<prepare::PrepareArgs>),
    RunPrepared(Box<run_prepared::RunPreparedArgs>),
    Status(status::StatusArgs),
    List(list::ListArgs),
    Gc(gc::GcArgs),
    Rm(rm::RmArgs),
    Stop(stop::StopArgs),
    Enter(enter::EnterArgs),
    App(app::AppCommandArgs),
    Attach(attach::AttachArgs),
    CatManifest(cat_manifest::CatManifestArgs),
    Logs(logs::LogsArgs),
    Net(net::NetArgs),
    Completion(completion::CompletionArgs),
    #[command(hide = true)]
    Man(man::ManArgs),
    Fetch(fetch::FetchArgs),
    Image(image::ImageArgs),
    Trust(trust::TrustArgs),
}

/// What `--insecure-options` allows: the library's one parser and meaning.
pub type Insecure = rkt::security::InsecureOptions;

impl GlobalArgs {
    /// The `--insecure-options` values (each possibly a comma-separated list), checked: one
    /// flag for every command, as upstream rkt's; [`dispatch`] checks it before any command
    /// runs, so a value is valid or refused alike everywhere.
    pub fn insecure(&self) -> anyhow::Result<Insecure> {
        Ok(Insecure::parse(&self.insecure_options)?)
    }

    /// Prints a warning to stderr when `--debug` is on.
    pub fn warn(&self, message: impl std::fmt::Display) {
        if self.debug {
            eprintln!("rkt: warning: {message}");
        }
    }

    /// Prints a debugging message to stderr when `--debug` is on.
    pub fn debug(&self, message: impl std::fmt::Display) {
        if self.debug {
            eprintln!("rkt: debug: {message}");
        }
    }

    /// The configuration directories, relative ones resolved against the current
    /// directory. One given explicitly must exist; a default one may be missing.
    pub fn config_dirs(&self) -> anyhow::Result<ConfigDirs> {
        let cwd = current_dir()?;
        let explicit = |flag: &'static str, given: &Option<PathBuf>| {
            let Some(dir) = given else {
                return anyhow::Ok(None);
            };
            let dir = Value::new(absolutize(&cwd, dir), Origin::Flag(flag));
            require_dir("configuration directory", &dir)?;
            Ok(Some(dir.value))
        };
        Ok(ConfigDirs {
            system: explicit("--system-config", &self.system_config)?
                .unwrap_or_else(|| PathBuf::from(DEFAULT_SYSTEM_CONFIG)),
            local: explicit("--local-config", &self.local_config)?
                .unwrap_or_else(|| PathBuf::from(DEFAULT_LOCAL_CONFIG)),
            user: explicit("--user-config", &self.user_config)?,
        })
    }

    /// Loads the layered paths configuration, printing its warnings, and the files of kinds
    /// rkt does not read (`stage1.d`), under `--debug`.
    pub fn load_paths(&self, dirs: &ConfigDirs) -> anyhow::Result<PathsConfig> {
        let paths = load_paths(dirs)?;
        let unused = if self.debug {
            unused_files(dirs)
        } else {
            Vec::new()
        };
        for warning in paths.warnings.iter().chain(&unused) {
            self.warn(warning);
        }
        Ok(paths)
    }

    /// The directories in effect for a command, given its network directory flags.
    pub fn effective_dirs(&self, net: &NetDirArgs) -> anyhow::Result<EffectiveDirs> {
        let dirs = self.config_dirs()?;
        let paths = self.load_paths(&dirs)?;
        let overrides = DirOverrides::new(
            self.dir.clone(),
            net.net_conf_dir.clone(),
            &net.net_plugin_dir,
        );
        let effective = resolve(&dirs, &paths, &overrides, &current_dir()?)?;
        rkt::networking::admission::set_limit(effective.net_operations.value);
        self.debug(format_args!(
            "data dir {} ({}), network configs {} ({}), plugin path {}",
            effective.data.value.display(),
            effective.data.origin,
            effective.net_conf.value.display(),
            effective.net_conf.origin,
            std::env::join_paths(effective.plugin_path())
                .unwrap_or_default()
                .to_string_lossy(),
        ));
        Ok(effective)
    }
}

fn current_dir() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("cannot determine the current directory")
}

/// Parses the command line, runs the command, and reports a failure as
/// `rkt: <error>: <cause>...` on stderr with exit status [`FAILURE`].
pub fn main() -> ExitCode {
    let parsed = Cli::try_parse().map(|cli| match image_options_moved(&cli) {
        // Options after the first app's image: parsed again from their place before it,
        // but for the app's own limits, kept apart.
        Some((argv, own)) => Cli::try_parse_from(argv).map(|mut cli| {
            match &mut cli.command {
                Command::Run(args) => args.app.own_after_image = own,
                Command::Prepare(args) => args.app.own_after_image = own,
                _ => {}
            }
            cli
        }),
        None => Ok(cli),
    });
    let cli = match parsed.and_then(|cli| cli) {
        Ok(cli) => cli,
        Err(err) => return usage_failure(&err),
    };
    match dispatch(&cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("rkt: {}", describe(&err));
            ExitCode::from(FAILURE)
        }
    }
}

/// A command line clap refused, as one `rkt: …` line with exit status [`FAILURE`]; help and
/// version (and the help a bare `rkt` or `rkt net` gets) are clap's, as they are.
fn usage_failure(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            ExitCode::from(FAILURE)
        }
        _ => {
            let mut root = <Cli as clap::CommandFactory>::command();
            root.build();
            let argv: Vec<OsString> = std::env::args_os().collect();
            eprintln!("rkt: {}", usage_error::one_line(err, &root, &argv));
            ExitCode::from(FAILURE)
        }
    }
}

/// The command line with the options that follow the first app's image (`rkt run IMAGE
/// --name=web -- ARGS`, rkt's place for them) moved before it, or `None` when there are none
/// (see [`pod_apps::hoist_image_options`]); the app's own limits among them
/// ([`pod_apps::take_app_own`]) are taken out and returned apart, as `--flag=value`: before
/// the image they would be the pod's. Whatever cannot be decided here is left to the
/// command, which reports it.
fn image_options_moved(cli: &Cli) -> Option<(Vec<OsString>, Vec<String>)> {
    let (app, net) = match &cli.command {
        Command::Run(args) => (&args.app, &args.net.dirs),
        Command::Prepare(args) => (&args.app, &NetDirArgs::default()),
        _ => return None,
    };
    // Cheap first: nothing to move unless an option follows the app's first word.
    if !app
        .command
        .get(1)
        .is_some_and(|w| w.starts_with("--") && w != "--" && w != pod_apps::SEPARATOR)
    {
        return None;
    }
    // Quietly: the command itself shows the directories under --debug.
    let quiet = GlobalArgs {
        debug: false,
        ..cli.global.clone()
    };
    let data = quiet.effective_dirs(net).ok()?.data.value;
    let head_len = app
        .command
        .iter()
        .position(|w| w == pod_apps::SEPARATOR)
        .unwrap_or(app.command.len());
    let head = &app.command[..head_len];
    // The head starts with its APP: the options follow it.
    let (_, count) = pod_apps::options_after_image(&data, head).ok()??;
    let raw: Vec<OsString> = std::env::args_os().collect();
    let start = raw.len().checked_sub(app.command.len())?;
    if raw[start..]
        .iter()
        .zip(&app.command)
        .any(|(r, w)| r != w.as_str())
    {
        return None;
    }
    // Before a `--` that ends rkt's options, where they are still options.
    let insert_at = if start > 0 && raw[start - 1] == "--" {
        start - 1
    } else {
        start
    };
    let (moved, own) = pod_apps::take_app_own(&app.command[1..1 + count]);
    let mut argv = raw[..insert_at].to_vec();
    argv.extend(moved.into_iter().map(OsString::from));
    argv.extend(raw[insert_at..=start].iter().cloned());
    argv.extend(raw[start + 1 + count..].iter().cloned());
    Some((argv, own))
}

/// An error and its causes, `: `-separated ([`rkt::error::chain`]): a message does not
/// repeat its cause, which is its `source`.
fn describe(err: &anyhow::Error) -> String {
    rkt::error::chain(err.as_ref())
}

fn dispatch(cli: &Cli) -> anyhow::Result<ExitCode> {
    let global = &GlobalArgs {
        plugin_timeout: rkt::security::plugin_timeout()?,
        ..cli.global.clone()
    };
    // Refused before any command runs, whether or not the command uses it.
    global.insecure()?;
    // Pods whose runner died are released by the next command that starts or lists pods:
    // before a pod starts (its ports and addresses may be the dead pod's), after a listing
    // (which shows them `exited` as they are).
    let reaps = ReapPoint::of(&cli.command);
    if reaps == Some(ReapPoint::Before) {
        reap::release_in_background(global);
    }
    let result = run_command(global, &cli.command);
    if reaps == Some(ReapPoint::After) {
        reap::release_in_background(global);
    }
    result
}

/// When a command looks for pods whose runner died ([`reap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReapPoint {
    Before,
    After,
}

impl ReapPoint {
    fn of(command: &Command) -> Option<ReapPoint> {
        match command {
            Command::Run(_) | Command::RunPrepared(_) => Some(ReapPoint::Before),
            Command::App(app) if matches!(app.command, app::AppCommand::Sandbox(_)) => {
                Some(ReapPoint::Before)
            }
            // `version`: Nomad's rkt driver runs it every 30 s on each client, whose pods
            // are then released within that even when no task starts.
            Command::Prepare(_) | Command::List(_) | Command::Status(_) | Command::Version(_) => {
                Some(ReapPoint::After)
            }
            _ => None,
        }
    }
}

fn run_command(global: &GlobalArgs, command: &Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Config(args) => config::run(global, args),
        Command::Version(args) => version::run(global, args),
        Command::Run(args) => run::run(global, args),
        Command::Prepare(args) => prepare::run(global, args),
        Command::RunPrepared(args) => run_prepared::run(global, args),
        Command::Status(args) => status::run(global, args),
        Command::List(args) => list::run(global, args),
        Command::Gc(args) => gc::run(global, args),
        Command::Rm(args) => rm::run(global, args),
        Command::Stop(args) => stop::run(global, args),
        Command::Enter(args) => enter::run(global, args),
        Command::App(args) => app::run(global, args),
        Command::Attach(args) => attach::run(global, args),
        Command::CatManifest(args) => cat_manifest::run(global, args),
        Command::Logs(args) => logs::run(global, args),
        Command::Net(args) => net::run(global, args),
        Command::Completion(args) => completion::run(global, args),
        Command::Man(args) => man::run(global, args),
        Command::Fetch(args) => fetch::run(global, args),
        Command::Image(args) => image::run(global, args),
        Command::Trust(args) => trust::run(global, args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// clap's own consistency check of every command and option (duplicate flags, bad
    /// defaults, ...); it catches clashes when a command is added.
    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("network \"n\"")]
        struct Outer {
            source: std::io::Error,
        }
        let io = || std::io::Error::other("disk full");
        let err = anyhow::Error::new(Outer { source: io() });
        assert_eq!(describe(&err), "network \"n\": disk full");
        let err = anyhow::Error::new(io()).context("writing state.json");
        assert_eq!(describe(&err), "writing state.json: disk full");
        // A cause whose text also appears inside the message is still said.
        let err = anyhow::Error::new(io()).context("disk full of pods, and then");
        assert_eq!(describe(&err), "disk full of pods, and then: disk full");
    }

    #[test]
    fn net_plugin_dir_may_be_repeated_and_split_on_colons() {
        let cli = Cli::try_parse_from([
            "rkt",
            "config",
            "--net-plugin-dir",
            "/a:/b",
            "--net-plugin-dir=/c",
        ])
        .unwrap();
        let Command::Config(args) = cli.command else {
            panic!("parsed as another command");
        };
        let expected: Vec<PathBuf> = ["/a", "/b", "/c"].iter().map(PathBuf::from).collect();
        assert_eq!(args.net.net_plugin_dir, expected);
    }

    #[test]
    fn insecure_options_are_one_global_flag_known_to_every_command() {
        for args in [
            &[
                "rkt",
                "--insecure-options=http,net-plugins,tls",
                "fetch",
                "oci:/x",
            ][..],
            &[
                "rkt",
                "fetch",
                "--insecure-options=http",
                "--insecure-options=net-plugins,tls",
                "oci:/x",
            ],
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            let insecure = cli.global.insecure().unwrap();
            assert!(
                insecure.http && insecure.net_plugins && insecure.tls,
                "{args:?}"
            );
        }
        let cli = Cli::try_parse_from(["rkt", "--insecure-options=all", "status", "x"]).unwrap();
        let all = cli.global.insecure().unwrap();
        assert!(all.http && all.tls && all.image && all.net_plugins && all.isolation.paths);
        let cli = Cli::try_parse_from(["rkt", "--insecure-options=bogus", "config"]).unwrap();
        let err = cli.global.insecure().unwrap_err().to_string();
        assert!(
            err.contains("--insecure-options")
                && err.contains("\"bogus\"")
                && err.contains("none, image, tls, ondisk, http, pubkey, capabilities"),
            "{err}"
        );
    }

    /// Every on/off flag of every command takes `=true` and `=false` as upstream rkt's did
    /// (a bare clap `bool` switch would refuse them): a new one cannot slip in as a switch.
    #[test]
    fn every_on_off_flag_takes_a_value() {
        fn walk(cmd: &clap::Command, path: &str, bare: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let switch = matches!(
                    arg.get_action(),
                    clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
                );
                if switch && arg.get_num_args().is_none_or(|n| n.max_values() == 0) {
                    bare.push(format!("{path} --{}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), bare);
            }
        }
        let mut bare = Vec::new();
        walk(&<Cli as clap::CommandFactory>::command(), "rkt", &mut bare);
        assert!(bare.is_empty(), "switches without =true/=false: {bare:?}");
    }

    #[test]
    fn global_options_are_accepted_after_the_command() {
        let cli = Cli::try_parse_from(["rkt", "version", "--debug", "--dir", "/d"]).unwrap();
        assert!(cli.global.debug);
        assert_eq!(cli.global.dir, Some(PathBuf::from("/d")));
    }
}
