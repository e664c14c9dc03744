//! `rkt man DIR` (hidden): writes the manual pages `rkt.1`, `rkt-<command>.1` and
//! `rkt-net-<command>.1` into DIR, generated from the same clap definitions as the command
//! line (so they cannot drift from `--help`). The install step in README.md runs it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};

use super::{Cli, GlobalArgs};

/// Write rkt's manual pages (section 1) into DIR, created if missing, and print the path of
/// each rkt page there.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Where to write the pages, e.g. /usr/local/share/man/man1.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

pub fn run(_global: &GlobalArgs, args: &ManArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    clap_mangen::generate_to(Cli::command(), &args.dir)
        .with_context(|| format!("cannot write the manual pages into {}", args.dir.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&args.dir)
        .with_context(|| format!("cannot read {}", args.dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("rkt") && name.ends_with(".1")
        })
        .collect();
    pages.sort();
    for page in pages {
        println!("{}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}
