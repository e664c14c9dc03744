//! `--volume`, the pod's volumes (`rkt run`, `rkt prepare`): parsed and checked against
//! the app's `--mount`s before the pod is created, so a mistake leaves nothing behind.

use clap::Args;

use rkt::pod::volume::{check_mounts, parse_volumes, unused};
use rkt::pod::{App, Volume};

use super::GlobalArgs;

/// The pod's volumes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Pod")]
pub struct VolumeArgs {
    /// Declare a volume the app can mount with --mount, rkt's grammar:
    /// `NAME,kind=host,source=/PATH[,readOnly=true][,recursive=false]` (a path of the host,
    /// bind-mounted with its submounts unless recursive=false) or
    /// `NAME,kind=empty[,mode=0755][,uid=0][,gid=0]` (an empty directory of the pod's, gone
    /// with the pod); may be repeated.
    #[arg(long, value_name = "NAME,kind=host|empty,...")]
    pub volume: Vec<String>,
}

impl VolumeArgs {
    /// The volumes, checked: the grammar, unique names, existing host sources, and every
    /// mount of each of the pod's `apps` naming one of them. A volume no app mounts is
    /// allowed (as in rkt); `--debug` notes it.
    pub fn volumes(&self, global: &GlobalArgs, apps: &[App]) -> anyhow::Result<Vec<Volume>> {
        let volumes = parse_volumes(&self.volume)?;
        for app in apps {
            check_mounts(&volumes, &app.name, &app.mounts)?;
        }
        let mounts: Vec<_> = apps.iter().flat_map(|app| &app.mounts).collect();
        for name in unused(&volumes, &mounts) {
            global.debug(format_args!("--volume={name},...: no app mounts it"));
        }
        Ok(volumes)
    }
}
