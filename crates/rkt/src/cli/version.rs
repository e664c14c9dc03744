//! `rkt version`: rkt's version and the CNI specification versions it speaks.

use std::process::ExitCode;

use clap::Args;

use super::GlobalArgs;

/// Print the version of rkt and the CNI specification versions it supports.
#[derive(Debug, Args)]
pub struct VersionArgs {}

pub fn run(_global: &GlobalArgs, _args: &VersionArgs) -> anyhow::Result<ExitCode> {
    println!("rkt Version: {}", env!("CARGO_PKG_VERSION"));
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
