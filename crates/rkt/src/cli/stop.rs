//! `rkt stop`: ask running pods to stop. Prints what rkt 1.30 printed: `"<uuid>"` for each
//! pod signalled, `pod "<uuid>" is already stopped` for one that has exited (not an error).

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use rkt::pod::control::{stop, StopError};
use rkt::pod::State;

use super::on_off::OnOff;
use super::pod_args::{store, PodRefs};
use super::GlobalArgs;

/// Stop running pods: SIGTERM to the pod's init, which passes it on to the app and kills it
/// if it still runs 10 s later (SIGKILL to the whole pod at once with --force).
///
/// The `rkt run` of each pod then tears it down. Prints each
/// pod's UUID in quotes as rkt did; a pod that has already exited is reported as such and
/// is not an error; a pod that never ran is.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// Kill the pod at once (SIGKILL) instead of asking it to stop.
    #[arg(long, on_off = false)]
    pub force: bool,

    #[command(flatten)]
    pub pods: PodRefs,
}

pub fn run(global: &GlobalArgs, args: &StopArgs) -> anyhow::Result<ExitCode> {
    let store = store(global)?;
    let mut failures = 0;
    for given in args.pods.given()? {
        let pod = match store.lookup(&given) {
            Ok(pod) => pod,
            Err(e) => {
                eprintln!("rkt: stop: {}", rkt::error::chain(&e));
                failures += 1;
                continue;
            }
        };
        match stop(&pod, args.force) {
            Ok(()) => println!("{:?}", pod.uuid),
            Err(StopError::NotRunning {
                state: State::Exited | State::Garbage,
                ..
            }) => println!("pod {:?} is already stopped", pod.uuid),
            Err(e) => {
                eprintln!("rkt: stop: {}", rkt::error::chain(&e));
                failures += 1;
            }
        }
    }
    if failures > 0 {
        bail!("failed to stop {failures} pod(s)");
    }
    Ok(ExitCode::SUCCESS)
}
