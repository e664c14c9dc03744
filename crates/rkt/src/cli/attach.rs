//! `rkt attach`: connects rkt's streams to a sandbox app's live ones ([`rkt::attach`]).

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use rkt::attach::{attach_dir, connect, Endpoints, Frame};
use rkt::pod::PodStatus;

use super::pod_args::{app_index, store, PodRef};
use super::GlobalArgs;

/// Attach to a running app's streams: what it writes comes to rkt's stdout and stderr,
/// what rkt reads goes to its stdin, and with a terminal (`--stdin/--stdout=tty` of `rkt app
/// add`) rkt's terminal is the app's, resized with it.
///
/// Leaving (Ctrl-C without a terminal; Ctrl-P then Ctrl-Q with one; or the end of rkt's
/// stdin once the app's output ends) leaves the app running; several may attach at once,
/// each seeing all the output. Only the streams an app was added with as `stream` or `tty`
/// can be attached to.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The app [default: the pod's app; a pod of several apps needs --app].
    #[arg(long, value_name = "NAME")]
    pub app: Option<String>,

    /// Which streams: `auto` (all the app has), `tty`, a comma-separated list of `stdin`,
    /// `stdout`, `stderr`, or `list` to print those the app has and return.
    #[arg(
        long,
        value_name = "auto|tty|stdin,stdout,stderr|list",
        default_value = "auto"
    )]
    pub mode: String,

    #[command(flatten)]
    pub pod: PodRef,
}

/// Ctrl-P then Ctrl-Q: detach from a terminal (Docker's keys).
const DETACH_KEYS: [u8; 2] = [0x10, 0x11];

pub fn run(global: &GlobalArgs, args: &AttachArgs) -> anyhow::Result<ExitCode> {
    let pod = args.pod.lookup(&store(global)?)?;
    let status = PodStatus::read(&pod)?;
    let index = app_index(&pod.uuid, &status.manifest, args.app.as_deref())?;
    let name = status.manifest.apps[index].name.clone();
    let mut conn = connect(&attach_dir(&pod.dir), &name).map_err(|_| {
        let why = match status.manifest.sandbox {
            Some(_) => {
                "it is not running, its output has ended, or it was added without a \
                        `stream` or `tty` stream"
            }
            None => "only a sandbox's apps can be attached to (`rkt app add --stdout=stream`)",
        };
        anyhow::anyhow!(
            "app {name} of pod {} cannot be attached to: {why}",
            pod.uuid
        )
    })?;
    let Some(Frame::Hello(offered)) = Frame::read(&mut conn)? else {
        bail!("app {name}'s monitor did not say which streams it has");
    };
    let wanted = wanted(&args.mode, offered)?;
    let Some(wanted) = wanted else {
        let list: String = [
            (offered.stdin, "stdin"),
            (offered.stdout, "stdout"),
            (offered.stderr, "stderr"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| format!("{n}{}\n", if offered.tty { " (tty)" } else { "" }))
        .collect();
        super::output::print(&list)?;
        return Ok(ExitCode::SUCCESS);
    };
    relay(conn, wanted)
}

/// The streams `mode` asks for among `offered`; `None` for `list`.
fn wanted(mode: &str, offered: Endpoints) -> anyhow::Result<Option<Endpoints>> {
    match mode {
        "list" => return Ok(None),
        "auto" => return Ok(Some(offered)),
        "tty" if offered.tty => return Ok(Some(offered)),
        "tty" => bail!("--mode=tty: the app has no terminal (it was added without `tty`)"),
        _ => {}
    }
    let mut want = Endpoints {
        tty: offered.tty,
        ..Endpoints::default()
    };
    for part in mode.split(',') {
        let (flag, has) = match part {
            "stdin" => (&mut want.stdin, offered.stdin),
            "stdout" => (&mut want.stdout, offered.stdout),
            "stderr" => (&mut want.stderr, offered.stderr),
            other => {
                bail!("--mode={mode}: {other:?} is none of auto, tty, list, stdin, stdout, stderr")
            }
        };
        if !has {
            bail!("--mode={mode}: the app has no {part} to attach to");
        }
        *flag = true;
    }
    Ok(Some(want))
}

fn relay(conn: std::os::unix::net::UnixStream, want: Endpoints) -> anyhow::Result<ExitCode> {
    let stdin_fd = std::io::stdin().as_raw_fd();
    // SAFETY: isatty(3) takes no pointer.
    let terminal = unsafe { libc::isatty(stdin_fd) } == 1;
    if want.tty && want.stdin && !terminal {
        bail!("the app's stdin is a terminal: attach from one, or with --mode=stdout");
    }
    // Raw only when rkt's keys go to the app: else Ctrl-C must still end rkt attach.
    let raw = (want.tty && want.stdin && terminal)
        .then(|| rkt::stage::stdio::RawMode::enter(stdin_fd))
        .flatten();
    let mut reader = conn.try_clone().context("cannot use the attach socket")?;
    let writer = Arc::new(std::sync::Mutex::new(conn));
    let done = Arc::new(AtomicBool::new(false));
    let output = {
        let done = done.clone();
        std::thread::spawn(move || {
            let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
            while let Ok(Some(frame)) = Frame::read(&mut reader) {
                let _ = match frame {
                    Frame::Stdout(d) if want.stdout => out.write_all(&d).and_then(|()| out.flush()),
                    Frame::Stderr(d) if want.stderr => err.write_all(&d).and_then(|()| err.flush()),
                    _ => Ok(()),
                };
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    if raw.is_some() {
        let (writer, done) = (writer.clone(), done.clone());
        std::thread::spawn(move || follow_size(stdin_fd, &writer, &done));
    }
    if want.stdin {
        forward_input(&writer, raw.is_some(), &done);
    }
    if raw.is_none() || !want.stdin {
        let _ = output.join();
    }
    drop(raw);
    Ok(ExitCode::SUCCESS)
}

/// Copies rkt's stdin to the app until it ends (then says so, without a terminal), the app's
/// output ends, or, on a terminal, the detach keys are typed.
fn forward_input(
    writer: &std::sync::Mutex<std::os::unix::net::UnixStream>,
    tty: bool,
    done: &AtomicBool,
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    // SAFETY: fd 0 stays open for the process's life; only borrowed here.
    let stdin = unsafe { BorrowedFd::borrow_raw(0) };
    let mut buf = [0u8; 8192];
    let mut last = 0u8;
    let send = |frame: Frame| {
        let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(&frame.encode()).is_ok()
    };
    while !done.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(200u16)) {
            Ok(0) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        let n = match std::io::stdin().lock().read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if n == 0 {
            if !tty {
                let _ = send(Frame::StdinClose);
            }
            return;
        }
        let data = &buf[..n];
        if tty {
            // The detach keys, typed one after the other (possibly across reads).
            let pair = std::iter::once(last)
                .chain(data.iter().copied())
                .collect::<Vec<_>>();
            if pair.windows(2).any(|w| w == DETACH_KEYS) {
                return;
            }
            last = data[n - 1];
        }
        if !send(Frame::Stdin(data.to_vec())) {
            return;
        }
    }
}

/// Sends rkt's terminal size to the app at once and whenever it changes.
fn follow_size(
    fd: i32,
    writer: &std::sync::Mutex<std::os::unix::net::UnixStream>,
    done: &AtomicBool,
) {
    let mut sent = None;
    while !done.load(Ordering::SeqCst) {
        if let Some(size) = rkt::stage::stdio::window_size(fd) {
            let now = (size.ws_row, size.ws_col);
            if sent != Some(now) {
                let frame = Frame::Resize {
                    rows: now.0,
                    cols: now.1,
                };
                let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
                if w.write_all(&frame.encode()).is_err() {
                    return;
                }
                sent = Some(now);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
