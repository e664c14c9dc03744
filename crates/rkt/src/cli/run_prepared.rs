//! `rkt run-prepared`: run a pod made by `rkt prepare`.

use std::process::ExitCode;

use clap::Args;

use rkt::pod::run::{run_prepared, StartedNotice};

use super::detach::{dispatch, DetachArgs};
use super::pod_args::{finish, PodNetArgs, PodRef, StdioArgs, UnsupportedArgs};
use super::GlobalArgs;

/// Run a prepared pod, with the networking options and directories in effect now, and exit
/// with its command's exit status (254 if the pod could not be fully released).
///
/// Stopped as rkt run is: SIGTERM, or SIGINT from a process, gives the apps SIGTERM, and
/// SIGKILL 10 s later.
#[derive(Debug, Args)]
pub struct RunPreparedArgs {
    #[command(flatten)]
    pub net: PodNetArgs,

    #[command(flatten)]
    pub stdio: StdioArgs,

    #[command(flatten)]
    pub detach: DetachArgs,

    #[command(flatten)]
    pub unsupported: UnsupportedArgs,

    #[command(flatten)]
    pub pod: PodRef,
}

pub fn run(global: &GlobalArgs, args: &RunPreparedArgs) -> anyhow::Result<ExitCode> {
    args.unsupported.refuse()?;
    dispatch(&args.detach, &args.stdio, |stdio, notice| {
        run_pod(global, args, stdio, notice)
    })
}

fn run_pod(
    global: &GlobalArgs,
    args: &RunPreparedArgs,
    stdio: &StdioArgs,
    notice: Option<StartedNotice>,
) -> anyhow::Result<ExitCode> {
    let dirs = global.effective_dirs(&args.net.dirs)?;
    let (mut opts, store) = args.net.run_options(global, &dirs, stdio, None)?;
    opts.started_notice = notice;
    let pod = args.pod.lookup(&store)?;
    // The ports `rkt prepare` recorded, then this command's own.
    let manifest = pod.manifest()?;
    for m in rkt::firewall::ports::parse_all(&manifest.ports)? {
        rkt::firewall::ports::push_unique(&mut opts.net.ports, m)?;
    }
    let given: Vec<String> = manifest
        .ports
        .iter()
        .chain(&args.net.port)
        .cloned()
        .collect();
    if given.iter().any(|p| rkt::firewall::port_names::is_named(p)) {
        let apps: Vec<&rkt::pod::App> = manifest.apps.iter().collect();
        super::image_app::add_named_ports(&mut opts.net.ports, &given, &apps)?;
    }
    let outcome = run_prepared(&pod, &opts)?;
    Ok(finish(global, &outcome))
}
