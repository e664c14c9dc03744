//! `rkt prepare`: create a pod to be run later with `rkt run-prepared`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use rkt::pod::{PodState, State};

use super::pod_args::{store, AppArgs};
use super::GlobalArgs;

/// Create a pod for a command without running it, and print its UUID. Networking options
/// belong to `rkt run-prepared`.
#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// Also write the new pod's UUID to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Pod")]
    pub uuid_file_save: Option<PathBuf>,

    #[command(flatten)]
    pub app: AppArgs,
}

pub fn run(global: &GlobalArgs, args: &PrepareArgs) -> anyhow::Result<ExitCode> {
    let app = super::image_app::app(global, &args.app, &[])?;
    let store = store(global)?;
    let (pod, lock) = store.create(app, &PodState::new(State::Prepared))?;
    drop(lock);
    if let Some(file) = &args.uuid_file_save {
        std::fs::write(file, &pod.uuid).map_err(|e| {
            anyhow::anyhow!("pod {}: cannot write {}: {e}", pod.uuid, file.display())
        })?;
    }
    println!("{}", pod.uuid);
    Ok(ExitCode::SUCCESS)
}
