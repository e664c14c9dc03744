//! `rkt version`: rkt 1.30's lines (`rkt Version:`, `appc Version:`, `Features:`), then
//! this rkt's own version, the CNI specification versions it speaks and the platform.

use std::process::ExitCode;

use clap::Args;

use super::GlobalArgs;

/// The version of rkt's command line this rkt implements: tools that check `rkt Version:`
/// (Nomad's rkt driver wants 1.27.0 or later) find rkt 1.30's.
pub const RKT_CLI_VERSION: &str = "1.30.0";

/// What this rkt can do, as rkt's `Features:` line (`+` has it, `-` does not): rkt 1.30's
/// build features first (TPM measurement, systemd-journal logging), then ours.
pub const FEATURES: &str = "-TPM -SDJOURNAL -APPC-IMAGES +CNI +PORT-FORWARDING +ROOTFS";

/// Print the version of rkt's command line this rkt implements, of the appc pod manifests
/// it writes, of itself, the CNI specification and the platform.
///
/// `rkt Version:` is rkt 1.30's command line, which this rkt implements; `appc Version:` the
/// appc specification of the pod manifests `rkt cat-manifest` prints (this rkt runs OCI
/// and Docker images, not appc's ACIs); `rkt-rs Version:` this rkt's own version. Then
/// `Features:`, `CNI Spec Version:`, `CNI Spec Versions Supported:` and `OS/Arch:`.
#[derive(Debug, Args)]
pub struct VersionArgs {}

pub fn run(_global: &GlobalArgs, _args: &VersionArgs) -> anyhow::Result<ExitCode> {
    println!("rkt Version: {RKT_CLI_VERSION}");
    println!("appc Version: {}", rkt::appc::APPC_VERSION);
    println!("rkt-rs Version: {}", env!("CARGO_PKG_VERSION"));
    println!("Features: {FEATURES}");
    println!("CNI Spec Version: {}", cni::version::CURRENT);
    println!(
        "CNI Spec Versions Supported: {}",
        cni::version::SUPPORTED.join(", ")
    );
    println!(
        "OS/Arch: {}/{}",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    Ok(ExitCode::SUCCESS)
}
