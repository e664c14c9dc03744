//! `rkt stage1-init` (hidden): the pod stage `rkt run` re-executes itself as. Not for users;
//! see `rkt::stage`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use rkt::stage::init::{main as stage_main, InitArgs};

use super::pod_args::exit_code;
use super::GlobalArgs;

/// Internal: become a pod's stage (started by `rkt run`).
#[derive(Debug, Args)]
pub struct Stage1InitArgs {
    #[arg(long)]
    pub pod_dir: PathBuf,
    #[arg(long)]
    pub hostname: String,
    #[arg(long)]
    pub netns: Option<PathBuf>,
    #[arg(long)]
    pub status_fd: i32,
}

pub fn run(_global: &GlobalArgs, args: &Stage1InitArgs) -> anyhow::Result<ExitCode> {
    Ok(exit_code(stage_main(&InitArgs {
        pod_dir: args.pod_dir.clone(),
        hostname: args.hostname.clone(),
        netns: args.netns.clone(),
        status_fd: args.status_fd,
    })))
}
