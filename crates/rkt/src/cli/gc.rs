//! `rkt gc`: release what dead pods left behind and delete old ones.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::Args;

use rkt::pod::gc::{gc, GcOptions};

use super::on_off::OnOff;
use super::pod_args::store;
use super::GlobalArgs;

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (expected e.g. 30m, 1h, 0s)"))
}

/// Garbage-collect pods: tear down the networks and namespace of pods whose `rkt run`
/// died, retry every teardown that failed (on every run, whatever the grace period), delete
/// pods that exited longer ago than the grace period, and delete prepared pods that were
/// never run. Exits non-zero, naming each pod and network, while anything still fails.
///
/// The commands that start or list pods (run, run-prepared, prepare, app sandbox, list,
/// status) and version also release, in the background, pods whose rkt run died; on an idle host a
/// timer runs gc (dist/systemd/rkt-gc.timer, see docs/pods.md).
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep exited pods this long before deleting them (their networks are released at
    /// once all the same).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = duration)]
    pub grace_period: Duration,

    /// Delete prepared pods not run within this time.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = duration)]
    pub expire_prepared: Duration,

    /// Delete nothing: release what dead pods hold and mark exited pods garbage (recording
    /// when, as rkt's did), to be deleted by a later gc after the grace period.
    #[arg(long, on_off = false)]
    pub mark_only: bool,
}

pub fn run(global: &GlobalArgs, args: &GcArgs) -> anyhow::Result<ExitCode> {
    let store = store(global)?;
    let report = gc(
        &store,
        &GcOptions {
            grace_period: args.grace_period,
            expire_prepared: args.expire_prepared,
            plugin_timeout: global.plugin_timeout,
            mark_only: args.mark_only,
        },
    );
    for uuid in &report.released {
        println!("released pod {uuid} (its rkt run had died)");
    }
    for uuid in &report.retried {
        println!("released the networks of pod {uuid} (its teardown had failed)");
    }
    for uuid in &report.removed {
        println!("removed pod {uuid}");
    }
    for uuid in &report.marked {
        println!("marked pod {uuid} garbage");
    }
    for err in &report.errors {
        eprintln!("rkt: gc: {}", rkt::error::chain(err));
    }
    if !report.errors.is_empty() {
        bail!(
            "gc: {} failure(s), see above; run gc again to retry",
            report.errors.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};

    /// The shipped unit's command is one `rkt gc` takes (dist/systemd/rkt-gc.service).
    #[test]
    fn the_shipped_systemd_units_command_line_parses() {
        let unit = include_str!("../../../../dist/systemd/rkt-gc.service");
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .expect("an ExecStart line");
        let cli = Cli::try_parse_from(exec.split_whitespace()).unwrap();
        let Command::Gc(args) = cli.command else {
            panic!("{exec} is not rkt gc");
        };
        assert_eq!(args.grace_period, std::time::Duration::from_secs(300));
        let timer = include_str!("../../../../dist/systemd/rkt-gc.timer");
        assert!(timer.contains("OnUnitActiveSec=1min"), "{timer}");
    }
}
