//! `rkt prepare`: create a pod to be run later with `rkt run-prepared`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use rkt::pod::{PodState, State};

use super::on_off::OnOff;
use super::pod_apps::{pod_spec, PodAppsArgs};
use super::pod_args::{AppArgs, PodCgroupArgs, UnsupportedArgs};
use super::volume_args::VolumeArgs;
use super::GlobalArgs;
use super::NetDirArgs;
use rkt::pod::PodStore;

/// Create a pod for a command without running it, and print its UUID. Networking options
/// belong to `rkt run-prepared`, but for --port, which the pod keeps for it.
#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// Also write the new pod's UUID to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Pod")]
    pub uuid_file_save: Option<PathBuf>,

    /// Print only the UUID on stdout, as upstream rkt's --quiet; this rkt prints nothing else
    /// on stdout anyway, so scripts written for `rkt prepare --quiet` work unchanged.
    #[arg(long, help_heading = "Pod", on_off = false)]
    pub quiet: bool,

    /// Forward a host port to a port of the pod when `rkt run-prepared` runs it (with its
    /// own --port); may be repeated, before or after the IMAGE (rkt's place). NAME:[HOSTIP:]
    /// HOSTPORT forwards a port the app's image exposes by its docker2aci name (80/tcp is
    /// 80-tcp; `rkt cat-manifest` lists them); [HOSTIP:]HOSTPORT:PODPORT[/tcp|/udp] by
    /// number. Checked now: a name the image does not expose is an error listing those it
    /// does.
    #[arg(
        long,
        value_name = "NAME:[HOSTIP:]HOSTPORT|[HOSTIP:]HOSTPORT:PODPORT",
        help_heading = "Networking"
    )]
    pub port: Vec<String>,

    #[command(flatten)]
    pub cgroup: PodCgroupArgs,

    #[command(flatten)]
    pub apps: PodAppsArgs,

    #[command(flatten)]
    pub volumes: VolumeArgs,

    #[command(flatten)]
    pub unsupported: UnsupportedArgs,

    #[command(flatten)]
    pub app: AppArgs,
}

pub fn run(global: &GlobalArgs, args: &PrepareArgs) -> anyhow::Result<ExitCode> {
    args.unsupported.refuse()?;
    let cgroup_parent = args.cgroup.parent()?;
    let dirs = global.effective_dirs(&NetDirArgs::default())?;
    let mut spec = pod_spec(global, &dirs.data.value, &args.app, &args.apps)?;
    spec.volumes = args.volumes.volumes(global, &spec.apps)?;
    spec.cgroup_parent = cgroup_parent;
    // Checked as run-prepared will read them, before the pod exists.
    let mut ports = rkt::firewall::ports::parse_all(&args.port)?;
    let apps: Vec<&rkt::pod::App> = spec.apps.iter().collect();
    super::image_app::add_named_ports(&mut ports, &args.port, &apps)?;
    spec.ports = args.port.clone();
    let store = PodStore::new(dirs.pods_dir());
    let (pod, lock) = store.create(spec, &PodState::new(State::Prepared))?;
    drop(lock);
    if let Some(file) = &args.uuid_file_save {
        std::fs::write(file, &pod.uuid).map_err(|e| {
            anyhow::anyhow!("pod {}: cannot write {}: {e}", pod.uuid, file.display())
        })?;
    }
    println!("{}", pod.uuid);
    Ok(ExitCode::SUCCESS)
}
