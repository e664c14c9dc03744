//! `rkt config`: the paths configuration in effect, as JSON, optionally with origins.

use std::process::ExitCode;

use clap::Args;

use super::on_off::OnOff;
use super::{GlobalArgs, NetDirArgs};

/// Print the configuration in effect (after layering, defaults included) as JSON.
///
/// The output has rkt's shape: {"stage0":[{"rktKind":"paths","rktVersion":"v1","data":...,
/// "stage1-images":...,"net-conf":...,"net-plugin":[...]}, ...]}, followed by one
/// "dockerAuth" entry per registry that auth.d has credentials for (user shown, password
/// masked as "********", never printed).
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Also say where each value came from: adds to the paths entry an "origins" object
    /// mapping each field to "default", the path of the file that set it, or the flag
    /// (e.g. "flag --dir"), and "net-plugin-builtin", the built-in plugin directories
    /// always searched after "net-plugin"; and to each "dockerAuth" entry "origin", the
    /// auth.d file its credentials came from.
    #[arg(long, on_off = false)]
    pub show_origin: bool,

    // The network directory flags of `run`, `run-prepared` and `net list`, to show what a
    // command given them would use.
    #[command(flatten)]
    pub net: NetDirArgs,
}

pub fn run(global: &GlobalArgs, args: &ConfigArgs) -> anyhow::Result<ExitCode> {
    let dirs = global.effective_dirs(&args.net)?;
    let mut json = rkt::config::stage0_json(&dirs, args.show_origin);
    let auth = rkt::config::auth::load_docker_auth(&global.config_dirs()?)?;
    if let Some(stage0) = json["stage0"].as_array_mut() {
        stage0.extend(rkt::config::show::docker_auth_json(&auth, args.show_origin));
    }
    println!("{}", serde_json::to_string_pretty(&json)?);
    Ok(ExitCode::SUCCESS)
}
