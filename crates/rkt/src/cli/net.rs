//! `rkt net list|check|status`: the networks in effect and their plugins, CNI CHECK of a
//! running pod's networks, and CNI STATUS of the networks in effect. The examining is
//! done by [`rkt::net_inspect`] and [`rkt::networking::check`]; this module
//! renders it. Each exits with [`PROBLEM`] when the answer is "something cannot be used".

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand};
use serde_json::json;

use rkt::config::EffectiveDirs;
use rkt::net_inspect::{self as inspect, Listing, NetworkStatus};
use rkt::networking::{self, PodNet};
use rkt::pod::{PodStatus, State};

use super::pod_args::{store, PodRef};
use super::status::Format;
use super::{GlobalArgs, NetDirArgs};

/// Exit status when a network in effect cannot be used (`list`), a CHECK failed (`check`)
/// or a network is not ready (`status`). rkt's own failures exit with 254.
pub const PROBLEM: u8 = 1;

/// Examine networks: what is configured, whether a pod's networks are healthy, whether
/// the plugins are ready. Exit status 1 means the answer is "no"; 254 that rkt failed.
#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    pub command: NetCommand,
}

#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// List the networks in effect (built-ins included): file, CNI version, plugin chain
    /// and the binary each plugin would run, plus shadowed definitions and files that
    /// failed to load. Exits 1 when any network cannot be used or any file failed to load.
    List(NetListArgs),
    /// Run CNI CHECK for each network of a running pod, with the configurations recorded
    /// at setup. Exits 1 when any CHECK fails.
    Check(NetCheckArgs),
    /// Run CNI STATUS for each network in effect and report its readiness. Exits 1 when
    /// any network is not ready.
    Status(NetStatusArgs),
}

#[derive(Debug, Args)]
pub struct NetListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    #[command(flatten)]
    pub net: NetDirArgs,
}

#[derive(Debug, Args)]
pub struct NetCheckArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    #[command(flatten)]
    pub pod: PodRef,
}

#[derive(Debug, Args)]
pub struct NetStatusArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    #[command(flatten)]
    pub net: NetDirArgs,
}

pub fn run(global: &GlobalArgs, args: &NetArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        NetCommand::List(a) => list(global, a),
        NetCommand::Check(a) => check(global, a),
        NetCommand::Status(a) => status(global, a),
    }
}

fn verdict(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(PROBLEM)
    }
}

/// The plugin search path, each directory once, with where it came from.
fn plugin_path_origins(dirs: &EffectiveDirs) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    let configured = dirs
        .net_plugin
        .iter()
        .map(|v| (v.value.clone(), v.origin.to_string()));
    let builtin = dirs
        .builtin_plugin_dirs
        .iter()
        .map(|d| (d.clone(), "built-in".to_string()));
    for (dir, origin) in configured.chain(builtin) {
        if !out.iter().any(|(d, _)| d == &dir) {
            out.push((dir, origin));
        }
    }
    out
}

/// The ownership and mode checks `rkt run` makes before using the networks (unless
/// `--insecure-options=net-plugins`), for every network in effect: `list` and `status` run
/// the plugins too (VERSION, STATUS), and refuse what `run` refuses, with its error.
/// The ownership checks of `rkt run` over every network in effect (unless
/// `--insecure-options=net-plugins`): what they examined, for STATUS to run exactly that.
fn check_trusted(
    global: &GlobalArgs,
    dirs: &EffectiveDirs,
) -> anyhow::Result<Vec<rkt::networking::PlannedNet>> {
    if global.insecure()?.net_plugins {
        return Ok(Vec::new());
    }
    let every = rkt::networking::NetSelection::parse(&["all".to_string()])?;
    Ok(rkt::networking::check_ownership(
        &every,
        &dirs.net_conf.value,
        &dirs.plugin_path(),
    )?)
}

fn list(global: &GlobalArgs, args: &NetListArgs) -> anyhow::Result<ExitCode> {
    let dirs = global.effective_dirs(&args.net)?;
    check_trusted(global, &dirs)?;
    let listing = inspect::list(&dirs.net_conf.value, &dirs.plugin_path())?;
    let path = plugin_path_origins(&dirs);
    match args.format {
        json_format @ (Format::Json | Format::JsonPretty) => {
            let out = json!({
                "netConfDir": {"path": dirs.net_conf.value, "origin": dirs.net_conf.origin.to_string()},
                "pluginPath": path.iter().map(|(d, o)| json!({"path": d, "origin": o})).collect::<Vec<_>>(),
                "networks": listing.networks,
                "shadowed": listing.shadowed,
                "failed": listing.failed,
                "usable": listing.all_usable(),
            });
            json_format.print_json(&out)?;
        }
        Format::Text => print_listing(&dirs, &path, &listing),
    }
    Ok(verdict(listing.all_usable()))
}

fn print_listing(dirs: &EffectiveDirs, path: &[(PathBuf, String)], listing: &Listing) {
    println!(
        "network configs: {} ({})",
        dirs.net_conf.value.display(),
        dirs.net_conf.origin
    );
    println!("plugin path:");
    for (dir, origin) in path {
        println!("  {} ({origin})", dir.display());
    }
    for net in &listing.networks {
        println!();
        let file = match &net.file {
            Some(f) => f.display().to_string(),
            None => format!("built-in, ordered as {}", net.order_name),
        };
        let version = match (&net.negotiated_version, &net.cni_version) {
            (Some(v), _) => format!("cniVersion {v}"),
            (None, Some(v)) => format!("cniVersion {v} (unsupported)"),
            (None, None) => "no usable cniVersion".to_string(),
        };
        let usable = if net.usable() { "" } else { " UNUSABLE" };
        println!("{} ({file}) {version}{usable}", net.name);
        for p in &net.plugins {
            let indent = if p.ipam { "    ipam " } else { "  " };
            let bin = match (&p.binary, &p.problem) {
                (_, Some(why)) => why.clone(),
                (Some(b), None) => b.display().to_string(),
                (None, None) => String::new(),
            };
            let caps = if p.capabilities.is_empty() {
                String::new()
            } else {
                format!(" [{}]", p.capabilities.join(", "))
            };
            println!("{indent}{}: {bin}{caps}", p.plugin_type);
        }
        for problem in &net.problems {
            println!("  problem: {problem}");
        }
    }
    if !listing.shadowed.is_empty() {
        println!();
        println!("shadowed (ignored) definitions:");
        for s in &listing.shadowed {
            println!(
                "  {} in {} (defined first in {})",
                s.name,
                s.file.display(),
                s.shadowed_by.display()
            );
        }
    }
    if !listing.failed.is_empty() {
        println!();
        println!("files that failed to load:");
        for f in &listing.failed {
            println!("  {}", f.error);
        }
    }
}

fn check(global: &GlobalArgs, args: &NetCheckArgs) -> anyhow::Result<ExitCode> {
    let pod = args.pod.lookup(&store(global)?)?;
    let status = PodStatus::read(&pod)?;
    if status.state != State::Running {
        bail!(
            "pod {} is {}; only a running pod's networks can be checked",
            pod.uuid,
            status.state
        );
    }
    let netns = status.record.netns.clone();
    let reports = networking::check(&PodNet {
        uuid: &pod.uuid,
        pod_dir: &pod.dir,
        netns: netns.as_deref(),
        plugin_timeout: global.plugin_timeout,
    })?;
    let ok = reports.iter().all(|r| r.result.is_ok());
    match args.format {
        json_format @ (Format::Json | Format::JsonPretty) => {
            let out: Vec<_> = reports
                .iter()
                .map(|r| {
                    json!({
                        "netName": r.net_name,
                        "ifName": r.if_name,
                        "ok": r.result.is_ok(),
                        "error": r.result.as_ref().err().map(|e| rkt::error::chain(e)),
                        "note": r.note,
                    })
                })
                .collect();
            json_format.print_json(&out)?;
        }
        Format::Text => {
            if reports.is_empty() {
                println!("pod {} has no networks to check", pod.uuid);
            }
            for r in &reports {
                let note = r
                    .note
                    .as_ref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                match &r.result {
                    Ok(()) => println!("{} ({}): ok{note}", r.net_name, r.if_name),
                    Err(e) => println!(
                        "{} ({}): failed: {}",
                        r.net_name,
                        r.if_name,
                        rkt::error::chain(e)
                    ),
                }
            }
        }
    }
    Ok(verdict(ok))
}

fn status(global: &GlobalArgs, args: &NetStatusArgs) -> anyhow::Result<ExitCode> {
    let dirs = global.effective_dirs(&args.net)?;
    let checked = check_trusted(global, &dirs)?;
    let nets: Vec<NetworkStatus> = inspect::status(
        &dirs.net_conf.value,
        &dirs.plugin_path(),
        &dirs.cni_cache_dir(),
        &checked,
    )?;
    let ok = nets.iter().all(|n| n.ready);
    match args.format {
        json_format @ (Format::Json | Format::JsonPretty) => json_format.print_json(&nets)?,
        Format::Text => {
            for n in &nets {
                let builtin = if n.builtin { " (built-in)" } else { "" };
                let msg = n.message.as_deref();
                match (n.ready, msg) {
                    (true, None) => println!("{}{builtin}: ready", n.name),
                    (true, Some(m)) => println!("{}{builtin}: ready ({m})", n.name),
                    (false, m) => {
                        println!("{}{builtin}: not ready: {}", n.name, m.unwrap_or(""))
                    }
                }
            }
        }
    }
    Ok(verdict(ok))
}
