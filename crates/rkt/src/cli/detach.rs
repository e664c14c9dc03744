//! `rkt run --detach` and `rkt run-prepared --detach`: the pod outlives the command that
//! started it.
//!
//! The command starts itself again, with the same arguments, as the pod's runner: in a
//! session of its own (no terminal, so the caller's logout or Ctrl-C does not reach it),
//! stdin, stdout and stderr on `/dev/null`, in the caller's cgroup. It tells its parent on a
//! pipe (named by [`NOTICE_FD_VAR`]) when the pod's apps run, `started <uuid>`, or why the
//! pod did not start, `error <message>` ([`rkt::pod::run::StartedNotice`]); the parent then
//! prints the UUID (or the error) and returns, and the runner goes on holding the pod
//! until its apps end or `rkt stop`.

use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;

use super::on_off::OnOff;

use rkt::pod::run::{RunnerSaid, StartedNotice};
use rkt::stage::launch::{Exec, Launch};

use super::pod_args::StdioArgs;

/// The variable that tells the detached runner where its notice goes.
pub const NOTICE_FD_VAR: &str = "RKT_DETACHED_NOTICE_FD";

/// `--detach`.
#[derive(Debug, Clone, Args)]
pub struct DetachArgs {
    /// Start the pod in the background: print its UUID once its apps run and return, while
    /// the pod runs on until its apps end or `rkt stop UUID`. Its runner has no terminal
    /// and survives the caller; the apps' stdin is /dev/null and their stdout and stderr
    /// go to their logs (`rkt logs UUID`) unless --stdout/--stderr say `null`.
    #[arg(long, help_heading = "Pod", on_off = false)]
    pub detach: bool,
}

/// Runs a pod as `detach` says: `run` in the foreground with `stdio`; or, with `--detach`,
/// by starting the detached runner (in this process) and, in that runner, `run` with the
/// detached streams and the notice it tells its parent on.
pub fn dispatch(
    detach: &DetachArgs,
    stdio: &StdioArgs,
    run: impl FnOnce(&StdioArgs, Option<StartedNotice>) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    match detach.role(stdio)? {
        Role::Foreground => run(stdio, None),
        Role::Parent => start_runner(),
        Role::Runner(notice) => as_runner(&notice.clone(), || {
            run(&detached_stdio(stdio), Some(notice))
        }),
    }
}

/// How this process takes part in a detached start.
enum Role {
    /// Not detached: run the pod in the foreground.
    Foreground,
    /// `--detach` given here: start the detached runner.
    Parent,
    /// The detached runner: tell the parent on this notice.
    Runner(StartedNotice),
}

impl DetachArgs {
    /// This process's role: the runner when the parent left its notice descriptor in the
    /// environment (the variable is removed, so the pod's apps do not see it).
    fn role(&self, stdio: &StdioArgs) -> anyhow::Result<Role> {
        if !self.detach {
            return Ok(Role::Foreground);
        }
        if stdio.interactive == Some(true) {
            bail!("--detach and --interactive exclude each other: a detached pod has no terminal to read");
        }
        for (flag, value) in [
            ("stdin", &stdio.stdin),
            ("stdout", &stdio.stdout),
            ("stderr", &stdio.stderr),
        ] {
            if let Some(mode) = value.as_deref().filter(|m| !matches!(*m, "null" | "log")) {
                bail!(
                    "--{flag}={mode} with --detach: a detached pod's streams are `null` or `log`"
                );
            }
        }
        let Some(notice) = StartedNotice::from_env(NOTICE_FD_VAR)? else {
            return Ok(Role::Parent);
        };
        let _ = nix::unistd::setsid();
        Ok(Role::Runner(notice))
    }
}

/// The streams of a detached pod's apps: its stdout and stderr to their logs unless given.
fn detached_stdio(stdio: &StdioArgs) -> StdioArgs {
    let mut stdio = stdio.clone();
    stdio.stdin.get_or_insert_with(|| "null".into());
    stdio.stdout.get_or_insert_with(|| "log".into());
    stdio.stderr.get_or_insert_with(|| "log".into());
    stdio
}

/// Runs `run` as the detached runner: its failure goes to the parent on the notice.
fn as_runner(
    notice: &StartedNotice,
    run: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let outcome = run();
    if let Err(err) = &outcome {
        notice.failed(&super::describe(err));
    }
    outcome
}

/// In the parent: starts this command again as the detached runner and waits until it says
/// the pod's apps run; prints the pod's UUID.
fn start_runner() -> anyhow::Result<ExitCode> {
    let exe = Exec("/proc/self/exe".into());
    let launch = Launch::new(std::env::args_os().skip(1));
    let said = StartedNotice::launch_runner(&exe, launch, NOTICE_FD_VAR)
        .context("cannot start the detached runner")?;
    match said {
        RunnerSaid::Started(uuid) => {
            super::output::print(&format!("{uuid}\n"))?;
            Ok(ExitCode::SUCCESS)
        }
        RunnerSaid::Failed(message) => bail!("{message}"),
        RunnerSaid::Nothing => bail!("the detached runner ended before the pod started"),
    }
}
