//! `rkt logs`: an app's kept output ([`rkt::logs::reader`]).

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::bail;
use clap::Args;

use super::on_off::OnOff;

use rkt::logs::reader::{read, Line, Selection};
use rkt::logs::LogStream;
use rkt::pod::{PodStatus, State};

use super::pod_args::{app_index, store, PodRef};
use super::GlobalArgs;

/// Print an app's log: what it wrote to a stream run with `--stdout=log` or `--stderr=log`.
///
/// Its stdout goes to rkt's stdout and its stderr to rkt's stderr, line by line in the
/// order they were written. The log is kept in the pod's directory, in the CRI's container
/// log format, until the pod is removed (`rkt rm`, `rkt gc`); rotated files are read first.
/// An app a CRI server (rkt-cri) added logs where kubelet asked, which is read instead.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The app whose log to print [default: the pod's app; a pod of several apps needs
    /// --app].
    #[arg(long, value_name = "NAME")]
    pub app: Option<String>,

    /// Keep printing what the app writes until the pod ends.
    #[arg(short, long, on_off = false)]
    pub follow: bool,

    /// Only the last N lines (of those --since selects).
    #[arg(long, value_name = "N")]
    pub tail: Option<usize>,

    /// Only lines written at or after TIME: RFC 3339 (2026-12-05T10:00:00Z) or a duration
    /// before now (10m, 2h).
    #[arg(long, value_name = "TIME", value_parser = parse_since)]
    pub since: Option<SystemTime>,

    /// Start each line with the time it was written (RFC 3339, UTC, nanoseconds).
    #[arg(short, long, on_off = false)]
    pub timestamps: bool,

    #[command(flatten)]
    pub pod: PodRef,
}

fn parse_since(text: &str) -> Result<SystemTime, String> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        return Ok(time);
    }
    let ago: Duration = humantime::parse_duration(text).map_err(|_| {
        format!("{text:?} is neither an RFC 3339 time (2026-12-05T10:00:00Z) nor a duration (10m)")
    })?;
    Ok(SystemTime::now() - ago)
}

pub fn run(global: &GlobalArgs, args: &LogsArgs) -> anyhow::Result<ExitCode> {
    let pod = args.pod.lookup(&store(global)?)?;
    let status = PodStatus::read(&pod)?;
    let index = app_index(&pod.uuid, &status.manifest, args.app.as_deref())?;
    let app = &status.manifest.apps[index];
    let name = &app.name;
    // Where the app's settings put it (a CRI container's, kubelet's choice), else the
    // pod's directory.
    let path = rkt::pod::apps::log_file(&pod.dir, app);
    if !path.exists() {
        bail!(
            "app {name} of pod {} keeps no log: it ran without --stdout=log or --stderr=log",
            pod.uuid
        );
    }
    let selection = Selection {
        tail: args.tail,
        since: args.since,
        follow: args.follow,
    };
    let running = || PodStatus::read(&pod).is_ok_and(|s| s.state == State::Running);
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let mut failed = None;
    read(&path, &selection, &running, &mut |line: &Line| {
        let written = match line.stream {
            LogStream::Stdout => print(&mut stdout.lock(), line, args.timestamps),
            LogStream::Stderr => print(&mut stderr.lock(), line, args.timestamps),
        };
        // A reader that went away (`rkt logs | head`) ends the reading.
        written.map_err(|e| failed = Some(e)).is_ok()
    })?;
    match failed {
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn print(out: &mut impl Write, line: &Line, timestamps: bool) -> std::io::Result<()> {
    if timestamps {
        write!(out, "{} ", rkt::logs::timestamp(line.time))?;
    }
    out.write_all(&line.text)?;
    out.write_all(b"\n")?;
    out.flush()
}
