//! `rkt version`: rkt 1.30's lines (`rkt Version:`, `appc Version:`, `Features:`), then
//! the CNI specification versions this rkt speaks and the platform.

use std::process::ExitCode;

use clap::Args;

use super::GlobalArgs;

/// What this rkt can do, as rkt's `Features:` line (`+` has it, `-` does not): rkt 1.30's
/// build features first (TPM measurement, systemd-journal logging), then ours.
pub const FEATURES: &str = "-TPM -SDJOURNAL -APPC-IMAGES +CNI +PORT-FORWARDING +ROOTFS";

/// Print the version of rkt, the specifications it implements, and its features.
///
/// rkt 1.30's lines first (`rkt Version:`, `appc Version:`, `Features:`), then
/// `CNI Spec Version:`, `CNI Spec Versions Supported:` and `OS/Arch:`.
#[derive(Debug, Args)]
pub struct VersionArgs {}

pub fn run(_global: &GlobalArgs, _args: &VersionArgs) -> anyhow::Result<ExitCode> {
    println!("rkt Version: {}", env!("CARGO_PKG_VERSION"));
    // rkt 1.30 said which appc spec its images follow; this rkt runs OCI and Docker images
    // (see `rkt image`), not appc's ACIs, and its networking follows CNI's spec, below.
    println!("appc Version: none (images are OCI and Docker schema 2, not ACI; networking follows the CNI spec below)");
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
