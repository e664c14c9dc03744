//! `rkt status`: one pod's state, times, init PID, exit status and networks.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use rkt::pod::control::wait_exited;
use rkt::pod::PodStatus;

use super::pod_args::{store, PodRef};
use super::GlobalArgs;

/// Output formats of status, list and net.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// rkt's human-readable form.
    Text,
    /// JSON on one line.
    Json,
    /// JSON indented with tabs, as rkt's `json-pretty`.
    JsonPretty,
}

impl Format {
    /// Prints `value` as this JSON format (`Text` prints it as `json-pretty`).
    pub fn print_json(self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let text = if self == Format::Json {
            serde_json::to_string(value)?
        } else {
            let mut out = Vec::new();
            let indent = serde_json::ser::PrettyFormatter::with_indent(b"\t");
            let mut ser = serde_json::Serializer::with_formatter(&mut out, indent);
            value.serialize(&mut ser)?;
            String::from_utf8(out)?
        };
        super::output::print(&format!("{text}\n"))
    }
}

/// Print a pod's state, times, init PID, exit status and networks.
///
/// As rkt 1.30 did, `key=value` lines: state, created, started, networks (running and
/// exited pods), pid, exited and app-<name>=<exit status> (pods that ran); then ours:
/// ports, user-annotation-<key>, user-label-<key>. Times are local, in Go's layout
/// `2006-01-02 15:04:05.999 -0700 MST`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Wait until the pod has exited before printing; with DURATION (e.g. 30s, 5m), at most
    /// that long, then fail if it is still running.
    #[arg(
        long,
        value_name = "DURATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "forever"
    )]
    pub wait: Option<String>,

    /// Output format: rkt's `key=value` lines, or rkt's API v1 pod object as JSON.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    #[command(flatten)]
    pub pod: PodRef,
}

fn parse_wait(text: &str) -> anyhow::Result<Option<Duration>> {
    if text == "forever" {
        return Ok(None);
    }
    humantime::parse_duration(text)
        .map(Some)
        .with_context(|| format!("--wait={text}: expected a duration such as 30s or 5m"))
}

pub fn run(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let wait = args.wait.as_deref().map(parse_wait).transpose()?;
    let pod = args.pod.lookup(&store(global)?)?;
    if let Some(timeout) = wait {
        if !wait_exited(&pod, timeout)? {
            bail!("pod {} is still running after --wait", pod.uuid);
        }
    }
    let status = PodStatus::read(&pod)?;
    match args.format {
        Format::Text => {
            let text: String = status
                .key_values()
                .into_iter()
                .map(|(key, value)| format!("{key}={value}\n"))
                .collect();
            super::output::print(&text)?;
        }
        json => json.print_json(&status.to_json())?,
    }
    Ok(ExitCode::SUCCESS)
}
