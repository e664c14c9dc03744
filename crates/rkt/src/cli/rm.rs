//! `rkt rm`: delete pods that are not running. Prints `"<uuid>"` for each pod removed, as
//! rkt 1.30 did.

use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use rkt::pod::gc::remove;

use super::pod_args::{store, PodRefs};
use super::GlobalArgs;

/// Remove pods (prepared or exited; a pod whose `rkt run` died is torn down first).
///
/// Every pod given is tried; each one removed is printed as `"<uuid>"` (in quotes, as rkt did).
#[derive(Debug, Args)]
pub struct RmArgs {
    #[command(flatten)]
    pub pods: PodRefs,
}

pub fn run(global: &GlobalArgs, args: &RmArgs) -> anyhow::Result<ExitCode> {
    let store = store(global)?;
    let mut failures = 0;
    for given in args.pods.given()? {
        let result = store
            .lookup(&given)
            .map_err(anyhow::Error::from)
            .and_then(|pod| remove(&store, &pod).map(|()| pod).map_err(Into::into));
        match result {
            Ok(pod) => println!("{:?}", pod.uuid),
            Err(e) => {
                eprintln!("rkt: rm: {e:#}");
                failures += 1;
            }
        }
    }
    if failures > 0 {
        bail!("failed to remove one or more pods ({failures})");
    }
    Ok(ExitCode::SUCCESS)
}
