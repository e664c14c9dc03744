//! `rkt list`: every pod, as rkt 1.30's table or as JSON.

use std::process::ExitCode;

use clap::Args;

use rkt::pod::status::RktState;
use rkt::pod::{PodStatus, Timestamp};

use super::on_off::OnOff;
use super::pod_args::store;
use super::status::Format;
use super::GlobalArgs;

/// List pods, oldest first, one row per app (a pod of several apps repeats the pod's
/// columns on each of its rows).
///
/// As rkt 1.30 did: UUID, APP, IMAGE NAME, STATE,
/// CREATED, STARTED, NETWORKS, separated by exactly one tab (so `cut -f` picks a column).
/// IMAGE NAME is the image's name for an image app, `-` for a host command and the root
/// directory for a --rootfs app; IMAGE ID (with --full) the image's ID or `-`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show whole UUIDs, an IMAGE ID column, and absolute times (Go's layout
    /// `2006-01-02 15:04:05.999 -0700 MST`) instead of relative ones ("2 minutes ago").
    #[arg(long, on_off = false)]
    pub full: bool,

    /// Do not print the header line.
    #[arg(long, on_off = false)]
    pub no_legend: bool,

    /// Output format: the table, or a JSON array of rkt's API v1 pod objects (`null` when
    /// there are no pods, as rkt printed).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn when(t: Option<Timestamp>, full: bool) -> String {
    match t {
        None => String::new(),
        Some(t) if full => t.go_layout(),
        Some(t) => t.relative(),
    }
}

/// A cell's text with the characters that would break a tab-separated line made visible.
fn cell(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The table rows (without the header) for `statuses`.
fn rows(statuses: &[PodStatus], full: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for s in statuses {
        let uuid = if full {
            s.uuid.clone()
        } else {
            s.uuid[..8].to_string()
        };
        // A pod that failed to start says so (its error is in `status --format=json`).
        let state = match (s.rkt_state(), &s.record.error) {
            (RktState::Exited, Some(_)) => "exited (failed)".to_string(),
            (state, _) => state.to_string(),
        };
        // One complete row per app: a pod of several apps repeats its own columns; a
        // sandbox without apps has one row, its APP `-`.
        let none = [rkt::pod::App::new("-", Vec::<String>::new())];
        let apps = match &s.manifest.apps[..] {
            [] => &none[..],
            apps => apps,
        };
        for app in apps {
            let image = match (&app.image, &app.rootfs) {
                (Some(image), _) => cell(&image.name),
                (None, Some(dir)) => cell(&dir.to_string_lossy()),
                (None, None) => "-".to_string(),
            };
            let mut row = vec![uuid.clone(), cell(&app.name), image];
            if full {
                row.push(app.image.as_ref().map_or("-".to_string(), |i| cell(&i.id)));
            }
            row.extend([
                state.clone(),
                when(Some(s.manifest.created), full),
                when(s.record.started, full),
                s.networks_short(),
            ]);
            rows.push(row);
        }
    }
    rows
}

pub fn run(global: &GlobalArgs, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let store = store(global)?;
    let mut statuses = Vec::new();
    let mut failed = false;
    for pod in store.list()? {
        match PodStatus::read(&pod) {
            Ok(status) => statuses.push(status),
            Err(e) if e.is_gone() => {}
            Err(e) => {
                eprintln!("rkt: pod {}: {}", pod.uuid, rkt::error::chain(&e));
                failed = true;
            }
        }
    }
    statuses.sort_by_key(|s| s.manifest.created);
    if args.format == Format::Text {
        let mut text = String::new();
        if !args.no_legend {
            let header: &[&str] = if args.full {
                &[
                    "UUID",
                    "APP",
                    "IMAGE NAME",
                    "IMAGE ID",
                    "STATE",
                    "CREATED",
                    "STARTED",
                    "NETWORKS",
                ]
            } else {
                &[
                    "UUID",
                    "APP",
                    "IMAGE NAME",
                    "STATE",
                    "CREATED",
                    "STARTED",
                    "NETWORKS",
                ]
            };
            text.push_str(&header.join("\t"));
            text.push('\n');
        }
        for row in rows(&statuses, args.full) {
            text.push_str(&row.join("\t"));
            text.push('\n');
        }
        super::output::print(&text)?;
    } else {
        let all: Vec<_> = statuses.iter().map(PodStatus::to_json).collect();
        if all.is_empty() {
            args.format.print_json(&serde_json::Value::Null)?;
        } else {
            args.format.print_json(&all)?;
        }
    }
    Ok(if failed {
        ExitCode::from(super::FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
