//! `rkt cat-manifest`: a pod's manifest in appc's form, as rkt 1.30 printed it
//! ([`rkt::appc`] makes it).

use std::process::ExitCode;

use clap::Args;

use rkt::pod::status::PodStatus;

use super::on_off::OnOff;
use super::pod_args::{store, PodRef};
use super::GlobalArgs;

/// Print a pod's manifest as an appc PodManifest (acVersion 0.8.11), as rkt 1.30 did.
///
/// Works for prepared, running and exited pods. Its apps carry appc names (lowercase
/// letters, digits and '-'; another character of the app's name becomes '-'), their
/// image's name, `version`/`os`/`arch` labels and `id` (`sha512-` and the SHA-512 of the
/// image's config, the bytes whose SHA-256 is the image ID; a host command has no image),
/// exec, user, group, environment, working directory, mount points, the ports the image
/// exposes (80/tcp is named 80-tcp) and isolators (resource/memory, resource/cpu,
/// os/linux/capabilities-retain-set or -remove-set). The pod's `ports` are the host ports
/// forwarded to it: those `rkt prepare --port` recorded and, while it runs, its networks'.
#[derive(Debug, Args)]
pub struct CatManifestArgs {
    /// Indent the JSON (rkt 1.30's default); `=false` prints it on one line.
    #[arg(long, on_off = true)]
    pub pretty_print: bool,

    #[command(flatten)]
    pub pod: PodRef,
}

pub fn run(global: &GlobalArgs, args: &CatManifestArgs) -> anyhow::Result<ExitCode> {
    let store = store(global)?;
    let pod = args.pod.lookup(&store)?;
    let status = PodStatus::read(&pod)?;
    let manifest = rkt::appc::pod_manifest(&status.manifest, &status.ports)?;
    let text = if args.pretty_print {
        serde_json::to_string_pretty(&manifest)
    } else {
        serde_json::to_string(&manifest)
    }?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}
