//! `rkt status`: one pod's state, times, init PID, exit status and networks.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use rkt::pod::control::{wait_exited, wait_ready as wait_ready_fn, Readiness};
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
    /// that long, then fail if it is still running. `=true` is a bare --wait, `=false` no
    /// waiting (as upstream rkt).
    #[arg(
        long,
        value_name = "DURATION|BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub wait: Option<String>,

    /// Wait until the pod is running its app (its init PID is known) before printing; with
    /// DURATION, at most that long. Fails if the pod ends (or, with DURATION, is still not
    /// ready) first. `=true`/`=false` as for --wait.
    #[arg(
        long,
        value_name = "DURATION|BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub wait_ready: Option<String>,

    /// Output format: rkt's `key=value` lines, or rkt's API v1 pod object as JSON.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    #[command(flatten)]
    pub pod: PodRef,
}

/// A `--wait`/`--wait-ready` value: `None` not to wait, `Some(None)` to wait as long as it
/// takes, `Some(Some(d))` at most `d`.
fn parse_wait(flag: &str, text: Option<&str>) -> anyhow::Result<Option<Option<Duration>>> {
    match text {
        None | Some("false") => Ok(None),
        Some("true") => Ok(Some(None)),
        Some(text) => humantime::parse_duration(text)
            .map(|d| Some(Some(d)))
            .with_context(|| {
                format!("{flag}={text}: expected a duration such as 30s or 5m, or true/false")
            }),
    }
}

pub fn run(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let wait = parse_wait("--wait", args.wait.as_deref())?;
    let wait_ready = parse_wait("--wait-ready", args.wait_ready.as_deref())?;
    let pod = args.pod.lookup(&store(global)?)?;
    if let Some(timeout) = wait_ready {
        match wait_ready_fn(&pod, timeout)? {
            Readiness::Ready => {}
            Readiness::TimedOut => bail!("pod {} is still not ready after --wait-ready", pod.uuid),
            Readiness::Ended(state) => {
                bail!("pod {} is {state}: it ended before it was ready", pod.uuid)
            }
        }
    }
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
