//! `rkt run`: run a command as a pod in its own network namespace, wired up by CNI plugins.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use rkt::pod::run::{run_new, StartedNotice};

use super::detach::{dispatch, DetachArgs};
use super::pod_apps::{pod_spec, PodAppsArgs};
use super::pod_args::{finish, AppArgs, PodNetArgs, StdioArgs, UnsupportedArgs};
use super::volume_args::VolumeArgs;
use super::GlobalArgs;

/// Run a command as a pod: create it, set up its networks, run the command inside, tear the
/// networks down, and exit with the command's exit status (254 if the pod could not be fully
/// released, e.g. a plugin's DEL failed: `rkt gc` retries).
///
/// A pod of several apps: `rkt run [OPTIONS] APP [APP OPTIONS] [-- ARGS] --- [APP OPTIONS]
/// APP [APP OPTIONS] [-- ARGS]...`; the apps share the pod's networks and each has its own
/// root (see docs/pods.md).
///
/// SIGTERM, or SIGINT sent by a process (an orchestrator's stop; not the terminal's Ctrl-C,
/// which the app gets as SIGINT), stops the pod: SIGTERM to the apps, SIGKILL to those still
/// running 10 s later. If rkt run is killed outright, the next rkt command that starts or
/// lists pods releases what its pod held.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub net: PodNetArgs,

    /// Write the new pod's UUID to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Pod")]
    pub uuid_file_save: Option<PathBuf>,

    #[command(flatten)]
    pub apps: PodAppsArgs,

    #[command(flatten)]
    pub volumes: VolumeArgs,

    #[command(flatten)]
    pub stdio: StdioArgs,

    #[command(flatten)]
    pub detach: DetachArgs,

    #[command(flatten)]
    pub unsupported: UnsupportedArgs,

    #[command(flatten)]
    pub app: AppArgs,
}

pub fn run(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<ExitCode> {
    args.unsupported.refuse()?;
    dispatch(&args.detach, &args.stdio, |stdio, notice| {
        run_pod(global, args, stdio, notice)
    })
}

fn run_pod(
    global: &GlobalArgs,
    args: &RunArgs,
    stdio: &StdioArgs,
    notice: Option<StartedNotice>,
) -> anyhow::Result<ExitCode> {
    let dirs = global.effective_dirs(&args.net.dirs)?;
    let (mut opts, store) =
        args.net
            .run_options(global, &dirs, stdio, args.uuid_file_save.clone())?;
    opts.started_notice = notice;
    let mut spec = pod_spec(global, &dirs.data.value, &args.app, &args.apps)?;
    spec.volumes = args.volumes.volumes(global, &spec.apps)?;
    let apps: Vec<&rkt::pod::App> = spec.apps.iter().collect();
    super::image_app::add_named_ports(&mut opts.net.ports, &args.net.port, &apps)?;
    let outcome = run_new(&store, spec, &opts)?;
    Ok(finish(global, &outcome))
}
