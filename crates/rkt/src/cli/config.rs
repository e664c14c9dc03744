//! `rkt config`: the paths configuration in effect, as JSON, optionally with origins.

use std::process::ExitCode;

use clap::Args;

use super::on_off::OnOff;
use super::{GlobalArgs, NetDirArgs};

/// Print the configuration in effect (after layering, defaults included) as JSON.
///
/// The output has rkt's shape: {"stage0":[{"rktKind":"paths","rktVersion":"v1","data":...,
/// "stage1-images":...,"net-conf":...,"net-plugin":[...]}]}.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Also say where each value came from: adds to the paths entry an "origins" object
    /// mapping each field to "default", the path of the file that set it, or the flag
    /// (e.g. "flag --dir"), and "net-plugin-builtin", the built-in plugin directories
    /// always searched after "net-plugin".
    #[arg(long, on_off = false)]
    pub show_origin: bool,

    // The network directory flags of `run`, `run-prepared` and `net list`, to show what a
    // command given them would use.
    #[command(flatten)]
    pub net: NetDirArgs,
}

pub fn run(global: &GlobalArgs, args: &ConfigArgs) -> anyhow::Result<ExitCode> {
    let dirs = global.effective_dirs(&args.net)?;
    let json = rkt::config::stage0_json(&dirs, args.show_origin);
    println!("{}", serde_json::to_string_pretty(&json)?);
    Ok(ExitCode::SUCCESS)
}
