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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    const CLI_MD: &str = include_str!("../../../../docs/cli.md");

    /// Every visible command and every long option of each, as `name` pairs.
    fn commands_and_flags() -> Vec<(String, String)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
            for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(long) = arg.get_long() {
                    out.push((path.to_string(), format!("--{long}")));
                }
            }
            let visible = cmd
                .get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help");
            for sub in visible {
                let name = format!("{path} {}", sub.get_name()).trim().to_string();
                out.push((name.clone(), String::new()));
                walk(sub, &name, out);
            }
        }
        let mut out = Vec::new();
        let mut cmd = Cli::command();
        cmd.build();
        walk(&cmd, "", &mut out);
        out
    }

    /// Whether docs/cli.md shows `flag` in code (`--flag`, `--flag=…`, `--flag[=…]`), not
    /// merely a longer option that starts with it.
    fn names_option(flag: &str) -> bool {
        let needle = format!("`{flag}");
        CLI_MD.match_indices(&needle).any(|(at, _)| {
            let next = CLI_MD[at + needle.len()..].chars().next();
            matches!(next, Some('`' | '=' | '[' | ' ' | ','))
        })
    }

    /// docs/cli.md names every command and every option, so it cannot fall behind the
    /// command line (a new option fails this test until it is documented).
    #[test]
    fn the_cli_reference_names_every_command_and_option() {
        let mut missing = Vec::new();
        for (cmd, flag) in commands_and_flags() {
            if flag.is_empty() {
                if !CLI_MD.contains(&format!("`rkt {cmd}")) {
                    missing.push(format!("command `rkt {cmd}`"));
                }
            } else if !names_option(&flag) {
                missing.push(format!("{flag} of `rkt {cmd}`"));
            }
        }
        assert!(
            missing.is_empty(),
            "docs/cli.md lacks: {}",
            missing.join(", ")
        );
    }
}
