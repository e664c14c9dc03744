//! `rkt stop`: ask running pods to stop.

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use rkt::pod::control::stop;

use super::pod_args::{store, PodRefs};
use super::GlobalArgs;

/// Stop running pods: SIGTERM to the pod's init, which passes it on to the app (SIGKILL to
/// the whole pod with --force). The `rkt run` of each pod then tears it down.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// Kill the pod at once (SIGKILL) instead of asking it to stop.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub force: bool,

    #[command(flatten)]
    pub pods: PodRefs,
}

pub fn run(global: &GlobalArgs, args: &StopArgs) -> anyhow::Result<ExitCode> {
    let store = store(global)?;
    let mut failures = 0;
    for given in args.pods.given()? {
        let result = store
            .lookup(&given)
            .map_err(anyhow::Error::from)
            .and_then(|pod| stop(&pod, args.force).map(|()| pod).map_err(Into::into));
        match result {
            Ok(pod) => println!("{}", pod.uuid),
            Err(e) => {
                eprintln!("rkt: stop: {e:#}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        bail!("stop: {failures} pod(s) could not be stopped");
    }
    Ok(ExitCode::SUCCESS)
}
