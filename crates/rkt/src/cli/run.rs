//! `rkt run`: run a command as a pod in its own network namespace, wired up by CNI plugins.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use rkt::pod::run::run_new;

use super::pod_args::{finish, AppArgs, PodNetArgs, StdioArgs, UnsupportedArgs};
use super::GlobalArgs;

/// Run a command as a pod: create it, set up its networks, run the command inside, tear the
/// networks down, and exit with the command's exit status (254 if the pod could not be fully
/// released, e.g. a plugin's DEL failed: `rkt gc` retries).
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub net: PodNetArgs,

    /// Write the new pod's UUID to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Pod")]
    pub uuid_file_save: Option<PathBuf>,

    #[command(flatten)]
    pub stdio: StdioArgs,

    #[command(flatten)]
    pub unsupported: UnsupportedArgs,

    #[command(flatten)]
    pub app: AppArgs,
}

pub fn run(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<ExitCode> {
    args.unsupported.refuse()?;
    let dirs = global.effective_dirs(&args.net.dirs)?;
    let (mut opts, store) =
        args.net
            .run_options(global, &dirs, &args.stdio, args.uuid_file_save.clone())?;
    let app = super::image_app::app(global, &dirs.data.value, &args.app)?;
    super::image_app::add_named_ports(&mut opts.net.ports, &args.net.port, &[&app])?;
    let outcome = run_new(&store, app, &opts)?;
    Ok(finish(global, &outcome))
}
