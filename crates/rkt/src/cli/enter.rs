//! `rkt enter`: run a command inside a running pod.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use rkt::pod::{PodStatus, State};
use rkt::stage::enter::enter;
use rkt::stage::env::DEFAULT_PATH;

use super::pod_args::{exit_code, store, PodRef};
use super::GlobalArgs;

/// Run a command (default /bin/sh) in a running pod's network, mount, UTS, IPC and PID
/// namespaces and root directory, with the capabilities and seccomp filter of the pod's
/// app, and exit with its exit status.
#[derive(Debug, Args)]
pub struct EnterArgs {
    #[command(flatten)]
    pub pod: PodRef,

    /// The command and its arguments, after `--` [default: /bin/sh].
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(global: &GlobalArgs, args: &EnterArgs) -> anyhow::Result<ExitCode> {
    let pod = args.pod.lookup(&store(global)?)?;
    let status = PodStatus::read(&pod)?;
    let pid = match (status.state, status.record.pid) {
        (State::Running, Some(pid)) => pid,
        (State::Running, None) => bail!("pod {} is still starting; try again", pod.uuid),
        (state, _) => bail!("pod {} is not running (it is {state})", pod.uuid),
    };
    let argv = if args.command.is_empty() {
        vec!["/bin/sh".to_string()]
    } else {
        args.command.clone()
    };
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), DEFAULT_PATH.into()),
        ("HOME".into(), "/root".into()),
    ];
    if let Some(term) = std::env::var_os("TERM") {
        env.push(("TERM".into(), term));
    }
    let isolation = status.record.isolation.clone().unwrap_or_default();
    Ok(exit_code(enter(pid, &argv, &env, &isolation)?))
}
