//! `rkt list`: every pod, as a table or JSON.

use std::process::ExitCode;

use clap::Args;

use rkt::pod::{PodStatus, Timestamp};

use super::pod_args::store;
use super::status::Format;
use super::GlobalArgs;

/// List pods: UUID, APP, STATE, CREATED, STARTED, NETWORKS.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show whole UUIDs and absolute times.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub full: bool,

    /// Do not print the header line.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value = "false", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_legend: bool,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn when(t: Option<Timestamp>, full: bool) -> String {
    match t {
        None => "-".into(),
        Some(t) if full => t.to_string(),
        Some(t) => {
            let secs = t.age().as_secs();
            let ago = humantime::format_duration(std::time::Duration::from_secs(secs));
            let ago = ago.to_string();
            // The largest unit only: "3h 12m 5s" → "3h".
            let first = ago.split(' ').next().unwrap_or("0s");
            format!("{first} ago")
        }
    }
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
                eprintln!("rkt: pod {}: {e}", pod.uuid);
                failed = true;
            }
        }
    }
    statuses.sort_by_key(|s| s.manifest.created);
    if args.format == Format::Json {
        let all: Vec<_> = statuses.iter().map(PodStatus::to_json).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        let mut rows: Vec<[String; 6]> = Vec::new();
        if !args.no_legend {
            rows.push(["UUID", "APP", "STATE", "CREATED", "STARTED", "NETWORKS"].map(String::from));
        }
        for s in &statuses {
            let uuid = if args.full {
                s.uuid.clone()
            } else {
                s.uuid[..8].to_string()
            };
            rows.push([
                uuid,
                s.manifest.app.name.clone(),
                match (&s.state, &s.record.error) {
                    (rkt::pod::State::Exited, Some(_)) => "exited (failed)".to_string(),
                    (state, _) => state.to_string(),
                },
                when(Some(s.manifest.created), args.full),
                when(s.record.started, args.full),
                s.networks_short(),
            ]);
        }
        let mut widths = [0usize; 6];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
                }
            }
            println!("{}", line.trim_end());
        }
    }
    Ok(if failed {
        ExitCode::from(super::FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}
