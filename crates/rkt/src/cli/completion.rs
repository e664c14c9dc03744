//! `rkt completion SHELL`: a shell completion script, generated from the same clap
//! definitions as the command line itself (so it cannot drift from it).

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, GlobalArgs};

/// Print a completion script for SHELL on stdout. Install it where your shell looks:
/// bash: `rkt completion bash > /etc/bash_completion.d/rkt`; zsh: `rkt completion zsh >
/// /usr/local/share/zsh/site-functions/_rkt`; fish: `rkt completion fish >
/// ~/.config/fish/completions/rkt.fish`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: CompletionShell,
}

/// The shells `rkt completion` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

pub fn run(_global: &GlobalArgs, args: &CompletionArgs) -> anyhow::Result<ExitCode> {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "rkt", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
