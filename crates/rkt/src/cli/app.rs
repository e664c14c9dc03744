//! `rkt app`: rkt 1.30's app-level commands over [`rkt::pod::apps`]: a sandbox, a pod made
//! without apps that runs until stopped, and its apps added, started, stopped, removed,
//! listed, shown and entered one at a time. `RKT_EXPERIMENT_APP`, which rkt 1.30 required,
//! is accepted and not needed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, Subcommand};

use rkt::pod::apps;
use rkt::pod::run::run_new;
use rkt::pod::{PodSpec, PodStatus};
use rkt::podstore::manifest::parse_user_meta;
use rkt::podstore::{AppLog, AttachModes};
use rkt::stage::launch::Exec;

use super::detach::{dispatch, DetachArgs};
use super::on_off::OnOff;
use super::pod_args::{finish, store, AppArgs, PodNetArgs, PodRef, StdioArgs};
use super::status::Format;
use super::volume_args::VolumeArgs;
use super::GlobalArgs;

/// Pods whose apps come and go: rkt 1.30's app-level API.
///
/// `rkt app sandbox` makes a pod without apps (its namespaces, networks and an init that
/// reaps) and prints its UUID; `rkt app add` prepares an app in it, `start` runs it, `stop`
/// stops it, `rm` removes it; `rkt stop` ends the sandbox. The apps' stdout and stderr go
/// to their logs (`rkt logs UUID --app=NAME`) unless `--stdout/--stderr=null`.
#[derive(Debug, Args)]
pub struct AppCommandArgs {
    #[command(subcommand)]
    pub command: AppCommand,
}

#[derive(Debug, Subcommand)]
pub enum AppCommand {
    Sandbox(Box<SandboxArgs>),
    Add(Box<AddArgs>),
    /// Start an app of a running sandbox (created, or exited: again); nothing when it
    /// runs.
    Start(AppRef),
    /// Stop an app: SIGTERM, then SIGKILL after --timeout; it can be started again.
    Stop(StopArgs),
    /// Remove an app: stopped first, then its root filesystem released and its records
    /// removed; its log stays until the pod is removed, and its name can be used again.
    Rm(StopArgs),
    List(ListArgs),
    Status(StatusArgs),
    Exec(ExecArgs),
    /// Have a running app's log start a new file at its path, after someone else (a log
    /// rotator, kubelet) renamed the current one; no record is lost or split.
    ReopenLog(AppRef),
}

/// Make a pod without apps, print its UUID and keep it running until `rkt stop`.
///
/// The pod's networks are brought up, its namespaces made and its init started; it runs in
/// the background (as `rkt run --detach`) and survives the caller. Add apps with `rkt app
/// add`.
#[derive(Debug, Args)]
pub struct SandboxArgs {
    #[command(flatten)]
    pub net: PodNetArgs,

    /// Write the new pod's UUID to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Pod")]
    pub uuid_file_save: Option<PathBuf>,

    #[command(flatten)]
    pub volumes: VolumeArgs,

    /// Limit the pod's memory (e.g. 64M, 1G), for all its apps together.
    #[arg(long, value_name = "SIZE", help_heading = "Pod")]
    pub memory: Option<String>,

    /// Limit the pod's CPU time, in thousandths of a CPU (500m) or CPUs (2), for all its
    /// apps together.
    #[arg(long, value_name = "MILLICORES", help_heading = "Pod")]
    pub cpu: Option<String>,

    /// The pod's CPU weight when the host's CPUs are busy, 2 to 262144 (1024: the kernel's
    /// default), for all its apps together.
    #[arg(long, value_name = "N", help_heading = "Pod")]
    pub cpu_shares: Option<String>,

    /// Limit the pod's tasks (processes and threads) to N at once; 0 or -1: no limit
    /// [default: 2048].
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        help_heading = "Pod"
    )]
    pub pids_limit: Option<String>,

    /// Run the pod in a user namespace of its own (see docs/isolation.md); its apps too.
    #[arg(long, on_off = false, help_heading = "Pod")]
    pub private_users: bool,

    /// Annotate the pod (KEY=VALUE; shown by `rkt status`, in JSON as `annotations`); may
    /// be repeated. kubelet's CRI annotations go here.
    #[arg(long, value_name = "KEY=VALUE", help_heading = "Pod")]
    pub annotation: Vec<String>,

    /// A user annotation of the pod (JSON `user_annotations`); may be repeated.
    #[arg(long, value_name = "KEY=VALUE", help_heading = "Pod")]
    pub user_annotation: Vec<String>,

    /// A label of the pod (JSON `user_labels`); may be repeated.
    #[arg(long, value_name = "KEY=VALUE", help_heading = "Pod")]
    pub user_label: Vec<String>,
}

/// Add an app to a running sandbox, prepared and waiting in state `created`.
///
/// APP is an image, `--rootfs=DIR` or a host command, as for `rkt run`. Its stdout and
/// stderr go to its log unless `--stdout=null`/`--stderr=null`; its stdin is /dev/null.
/// `--memory`, `--cpu` and `--cpu-shares` limit the app within the sandbox's own limits (a
/// cgroup of its own, below the pod's; cgroup v1); `--pids-limit` and `--private-users` are the
/// sandbox's.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The sandbox's UUID, or any unique prefix of it.
    #[arg(value_name = "UUID")]
    pub uuid: String,

    #[command(flatten)]
    pub streams: AppStreamArgs,

    #[command(flatten)]
    pub app: AppArgs,
}

/// A sandbox app's streams (rkt 1.30's modes).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "App streams")]
pub struct AppStreamArgs {
    /// The app's stdin: `null` (/dev/null), `stream` (what clients of `rkt attach` type),
    /// `tty` (a terminal of the app's, which `rkt attach` relays) [default: null].
    #[arg(long, value_name = "null|stream|tty")]
    pub stdin: Option<String>,

    /// The app's stdout: `null`, `log` (its log, `rkt logs`), `stream` (its log, and the
    /// clients of `rkt attach`), `tty` (the app's terminal; kept in its log too)
    /// [default: log, or tty when another stream is].
    #[arg(long, value_name = "null|log|stream|tty")]
    pub stdout: Option<String>,

    /// The app's stderr: as --stdout.
    #[arg(long, value_name = "null|log|stream|tty")]
    pub stderr: Option<String>,

    /// The size at which the app's log rotates, in bytes or with a K, M or G suffix; 0:
    /// never.
    #[arg(long, value_name = "SIZE", default_value = "10M", value_parser = super::pod_args::parse_size)]
    pub log_max_size: u64,

    /// How many files the app's log keeps, the current one included.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub log_max_files: u32,
}

impl AppStreamArgs {
    /// The app's log and attach settings; a mode a stream cannot have, or a terminal mixed
    /// with other modes, is refused naming the flag.
    fn log(&self) -> anyhow::Result<AppLog> {
        // A terminal asked for on one stream is the default of the others.
        let given = [&self.stdin, &self.stdout, &self.stderr];
        let tty_given = given.iter().any(|m| m.as_deref() == Some("tty"));
        let mode = |given: &Option<String>, default: &'static str| -> String {
            given
                .clone()
                .unwrap_or_else(|| if tty_given { "tty" } else { default }.to_string())
        };
        let (stdin, stdout, stderr) = (
            mode(&self.stdin, "null"),
            mode(&self.stdout, "log"),
            mode(&self.stderr, "log"),
        );
        let modes = [
            ("stdin", stdin.as_str(), &["null", "stream", "tty"][..]),
            (
                "stdout",
                stdout.as_str(),
                &["null", "log", "stream", "tty"][..],
            ),
            (
                "stderr",
                stderr.as_str(),
                &["null", "log", "stream", "tty"][..],
            ),
        ];
        for (flag, mode, allowed) in modes {
            if !allowed.contains(&mode) {
                bail!(
                    "--{flag}={mode}: a sandbox app's {flag} is one of {}",
                    allowed.join(", ")
                );
            }
        }
        if modes[0].1 != "null" && modes[1].1 == "null" && modes[2].1 == "null" {
            bail!(
                "--stdin={stdin}: a monitored stdin needs --stdout or --stderr too (the app's \
                 output ending is what ends its monitor)"
            );
        }
        let tty = modes.iter().any(|(_, m, _)| *m == "tty");
        if let Some((flag, mode, _)) = modes
            .iter()
            .find(|(_, m, _)| tty && !matches!(*m, "tty" | "null"))
        {
            bail!(
                "--{flag}={mode} with a tty: the app's terminal is one stream for all that use \
                 it (give them `tty`; its output is kept in the log too)"
            );
        }
        let [stdin, stdout, stderr] = modes.map(|(_, m, _)| m);
        Ok(AppLog {
            stdout: matches!(stdout, "log" | "stream" | "tty"),
            stderr: matches!(stderr, "log" | "stream" | "tty"),
            max_size: self.log_max_size,
            max_files: self.log_max_files,
            attach: AttachModes {
                stdin: matches!(stdin, "stream" | "tty"),
                stdout: matches!(stdout, "stream" | "tty"),
                stderr: matches!(stderr, "stream" | "tty"),
                tty,
            },
            path: None,
        })
    }
}

/// One app of a pod.
#[derive(Debug, Args)]
pub struct AppRef {
    /// The pod's UUID, or any unique prefix of it.
    #[arg(value_name = "UUID")]
    pub uuid: String,

    /// The app's name.
    #[arg(long, value_name = "NAME")]
    pub app: String,
}

/// Run a command in a running app's namespaces, root and isolation (as `rkt enter`), and
/// exit with its exit status. Its stdout and stderr stay apart unless --tty.
#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub app: AppRef,

    /// Give the command a terminal of its own, relayed to rkt's (which stdin must be).
    #[arg(long, short = 't', on_off = false)]
    pub tty: bool,

    /// The command and its arguments.
    #[arg(value_name = "COMMAND", trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

/// An app to stop or remove.
#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub app: AppRef,

    /// How long the app has between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (expected e.g. 10s, 1m, 0s)"))
}

/// List a pod's apps: name, state, and when each was created, started and finished.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The pod's UUID, or any unique prefix of it.
    #[arg(value_name = "UUID")]
    pub uuid: String,

    /// Do not print the header line.
    #[arg(long, on_off = false)]
    pub no_legend: bool,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Print one app's state, times, exit code, PID (in the pod) and mounts.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub app: AppRef,

    /// Output format: `key=value` lines, or JSON.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub fn run(global: &GlobalArgs, args: &AppCommandArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        AppCommand::Sandbox(a) => sandbox(global, a),
        AppCommand::Add(a) => add(global, a),
        AppCommand::Start(a) => {
            let pod = pod(global, &a.uuid)?;
            let exe = std::path::Path::new("/proc/self/exe");
            apps::start(&pod, &a.app, exe, &Exec(exe.to_path_buf()))?;
            Ok(ExitCode::SUCCESS)
        }
        AppCommand::Stop(a) => {
            apps::stop(&pod(global, &a.app.uuid)?, &a.app.app, a.timeout)?;
            Ok(ExitCode::SUCCESS)
        }
        AppCommand::Rm(a) => {
            apps::remove(&pod(global, &a.app.uuid)?, &a.app.app, a.timeout)?;
            Ok(ExitCode::SUCCESS)
        }
        AppCommand::Exec(a) => super::enter::run(
            global,
            &super::enter::EnterArgs {
                uuid: Some(a.app.uuid.clone()),
                uuid_file: None,
                app: Some(a.app.app.clone()),
                command: a.command.clone(),
                tty: Some(a.tty),
            },
        ),
        AppCommand::ReopenLog(a) => {
            apps::reopen_log(&pod(global, &a.uuid)?, &a.app)?;
            Ok(ExitCode::SUCCESS)
        }
        AppCommand::List(a) => list(global, a),
        AppCommand::Status(a) => status(global, a),
    }
}

fn pod(global: &GlobalArgs, uuid: &str) -> anyhow::Result<rkt::pod::Pod> {
    let pod_ref = PodRef {
        uuid: Some(uuid.to_string()),
        uuid_file: None,
    };
    pod_ref.lookup(&store(global)?)
}

fn sandbox(global: &GlobalArgs, args: &SandboxArgs) -> anyhow::Result<ExitCode> {
    let stdio = StdioArgs::default_for_sandbox();
    // A sandbox always runs detached.
    let detach = DetachArgs { detach: true };
    dispatch(&detach, &stdio, |stdio, notice| {
        let dirs = global.effective_dirs(&args.net.dirs)?;
        let (mut opts, store) =
            args.net
                .run_options(global, &dirs, stdio, args.uuid_file_save.clone())?;
        opts.started_notice = notice;
        let isolation = super::isolation_args::IsolationArgs {
            memory: args.memory.clone(),
            cpu: args.cpu.clone(),
            cpu_shares: args.cpu_shares.clone(),
            pids_limit: args.pids_limit.clone(),
            private_users: args.private_users,
            ..Default::default()
        };
        let spec = PodSpec {
            apps: Vec::new(),
            exit_policy: Default::default(),
            volumes: args.volumes.volumes(global, &[])?,
            sandbox: Some(isolation.isolators(rkt::image_pod::user::AppRoot::Host)?),
            cgroup_parent: None,
            ports: Vec::new(),
            meta: rkt::podstore::manifest::PodMeta {
                annotations: parse_user_meta("annotation", &args.annotation)?,
                user_annotations: parse_user_meta("user-annotation", &args.user_annotation)?,
                user_labels: parse_user_meta("user-label", &args.user_label)?,
            },
        };
        let outcome = run_new(&store, spec, &opts)?;
        Ok(finish(global, &outcome))
    })
}

fn add(global: &GlobalArgs, args: &AddArgs) -> anyhow::Result<ExitCode> {
    let pod = pod(global, &args.uuid)?;
    let isolation = &args.app.isolation;
    for (flag, given) in [
        ("--pids-limit", isolation.pids_limit.is_some()),
        ("--private-users", isolation.private_users),
    ] {
        if given {
            bail!(
                "{flag} is the sandbox's, for all its apps together: give it to `rkt app sandbox`"
            );
        }
    }
    if args.app.ipc == "parent" {
        bail!("--ipc=parent: a sandbox's apps share its IPC namespace, its own");
    }
    let log = args.streams.log()?;
    let dirs = global.effective_dirs(&Default::default())?;
    let mut app = super::image_app::app(global, &dirs.data.value, &args.app)?;
    app.log = Some(log);
    apps::add(&pod, app, global.insecure()?.isolation)?;
    Ok(ExitCode::SUCCESS)
}

fn list(global: &GlobalArgs, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let pod = pod(global, &args.uuid)?;
    let status = PodStatus::read(&pod)?;
    let rows = app_rows(&status);
    if args.format != Format::Text {
        let json: Vec<serde_json::Value> = rows.iter().map(AppRow::to_json).collect();
        args.format.print_json(&json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    if !args.no_legend {
        text.push_str("NAME\tSTATE\tCREATED\tSTARTED\tFINISHED\tEXIT\n");
    }
    for row in &rows {
        let time = |t: Option<rkt::podstore::time::Timestamp>| {
            t.map_or("-".to_string(), |t| t.to_string())
        };
        let exit = row.exit_code.map_or("-".to_string(), |c| c.to_string());
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{exit}\n",
            row.name,
            row.state,
            time(row.created),
            time(row.started),
            time(row.finished),
        ));
    }
    super::output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn status(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let pod = pod(global, &args.app.uuid)?;
    let status = PodStatus::read(&pod)?;
    let rows = app_rows(&status);
    let Some(row) = rows.iter().find(|r| r.name == args.app.app) else {
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        bail!(
            "pod {} has no app {} (its apps: {})",
            pod.uuid,
            args.app.app,
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        );
    };
    let json = row.to_json();
    if args.format != Format::Text {
        args.format.print_json(&json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    for (key, value) in json.as_object().into_iter().flatten() {
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        text.push_str(&format!("{key}={value}\n"));
    }
    super::output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// One app as `app list` and `app status` show it.
struct AppRow {
    name: String,
    /// `created`, `running` or `exited`.
    state: &'static str,
    created: Option<rkt::podstore::time::Timestamp>,
    started: Option<rkt::podstore::time::Timestamp>,
    finished: Option<rkt::podstore::time::Timestamp>,
    exit_code: Option<i32>,
    pid: Option<i32>,
    mounts: Vec<(String, String)>,
}

impl AppRow {
    fn to_json(&self) -> serde_json::Value {
        let rfc = |t: Option<rkt::podstore::time::Timestamp>| t.map(|t| t.to_string());
        let mut map = serde_json::Map::new();
        map.insert("name".into(), self.name.clone().into());
        map.insert("state".into(), self.state.into());
        for (key, value) in [
            ("created", rfc(self.created)),
            ("started", rfc(self.started)),
            ("finished", rfc(self.finished)),
        ] {
            if let Some(v) = value {
                map.insert(key.into(), v.into());
            }
        }
        if let Some(code) = self.exit_code {
            map.insert("exit_code".into(), code.into());
        }
        if let Some(pid) = self.pid {
            map.insert("pid".into(), pid.into());
        }
        let mounts: Vec<serde_json::Value> = self
            .mounts
            .iter()
            .map(|(volume, target)| serde_json::json!({"volume": volume, "target": target}))
            .collect();
        map.insert("mounts".into(), mounts.into());
        serde_json::Value::Object(map)
    }
}

/// The pod's apps: a sandbox's from their own records; a pod run with its apps fixed from
/// the pod's.
fn app_rows(status: &PodStatus) -> Vec<AppRow> {
    // A sandbox's apps have times of their own; a pod's run with its apps fixed, the pod's.
    let sandbox = status.manifest.sandbox.is_some();
    let record = &status.record;
    status
        .manifest
        .apps
        .iter()
        .enumerate()
        .map(|(index, app)| {
            let own = record.apps.get(index).filter(|_| sandbox);
            AppRow {
                name: app.name.clone(),
                state: status.app_state(index),
                created: own.map_or(Some(status.manifest.created), |r| r.created),
                started: own.map_or(record.started, |r| r.started),
                finished: own.map_or(record.exited, |r| r.finished),
                exit_code: record.app_exit_status(index),
                pid: record.apps.get(index).and_then(|r| r.pid),
                mounts: app
                    .mounts
                    .iter()
                    .map(|m| (m.volume.clone(), m.target.clone()))
                    .collect(),
            }
        })
        .collect()
}
