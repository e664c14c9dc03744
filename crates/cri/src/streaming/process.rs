//! Exec's backend: the command runs in the container as ExecSync runs it (the hidden
//! `rkt-cri exec-in` helper entering the app through the library's `stage::enter`), but
//! with its streams relayed as they come: pipes, or with `tty` a pseudo-terminal whose
//! size follows the client's resize messages (TIOCSWINSZ; the kernel sends SIGWINCH to the
//! helper, the terminal's foreground group, which passes the size on to the command's own
//! terminal).
//!
//! The output is always read, whether or not the client still takes it, so the command
//! never blocks on a client that went away or stopped reading; its exit status goes to
//! the error stream in any case.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spdy::k8s::{Outcome, TerminalSize};

use super::tokens::Streams;
use super::{Channel, Input, Output};
use crate::container::Container;

/// How long output may still come after the command ended (a process it left in the
/// background holding its streams is not waited for longer).
const DRAIN: Duration = Duration::from_secs(2);

/// Runs `cmd` in `c`, relays `input` to it and its output to `out`, and reports how it
/// ended on `out`. Returns when the command has ended.
pub fn exec(
    c: &Container,
    cmd: Vec<String>,
    streams: Streams,
    input: Receiver<Input>,
    out: Arc<dyn Output>,
) {
    let outcome = match run(c, cmd, streams, input, out.clone()) {
        Ok(code) => Outcome::ExitCode(code),
        Err(e) => Outcome::Error(e),
    };
    out.finish(&outcome);
}

fn run(
    c: &Container,
    cmd: Vec<String>,
    streams: Streams,
    input: Receiver<Input>,
    out: Arc<dyn Output>,
) -> Result<u8, String> {
    let mut command =
        crate::exec::helper(c, cmd, streams.tty).map_err(|s| s.message().to_string())?;
    let spawn_err = |e: std::io::Error| format!("cannot start the exec helper: {e}");
    let mut early = Vec::new();
    let (mut child, stdin, outputs, master) = if streams.tty {
        let pty = open_pty().map_err(|e| format!("cannot allocate a terminal: {e}"))?;
        // The helper reads the terminal's size as it starts, before it can take SIGWINCH:
        // the client's first size (sent as soon as its streams are open) is set first.
        early = first_size(&input, &pty.master);
        let slave = |fd: &OwnedFd| fd.try_clone().map(Stdio::from);
        command
            .stdin(slave(&pty.slave).map_err(spawn_err)?)
            .stdout(slave(&pty.slave).map_err(spawn_err)?)
            .stderr(slave(&pty.slave).map_err(spawn_err)?);
        // SAFETY: between fork and exec only async-signal-safe calls (setsid, ioctl) are
        // made, on the child's own descriptor 0.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let reader = pty.master.try_clone().map_err(spawn_err)?;
        let writer = streams
            .stdin
            .then(|| pty.master.try_clone())
            .transpose()
            .map_err(spawn_err)?;
        // The terminal is the helper's once this returns: `spawn` waits for the exec.
        let child = command.spawn().map_err(spawn_err)?;
        drop(pty.slave);
        let outputs = vec![(File::from(reader), Channel::Stdout)];
        (child, writer.map(File::from), outputs, Some(pty.master))
    } else {
        command
            .stdin(if streams.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(spawn_err)?;
        let stdin = child.stdin.take().map(|s| File::from(OwnedFd::from(s)));
        let outputs = vec![
            (
                File::from(OwnedFd::from(child.stdout.take().expect("piped"))),
                Channel::Stdout,
            ),
            (
                File::from(OwnedFd::from(child.stderr.take().expect("piped"))),
                Channel::Stderr,
            ),
        ];
        (child, stdin, outputs, None)
    };
    // Signals go through a pidfd: it never names another process once the helper is
    // reaped. Without one (Linux before 5.3) the helper is not left running unreaped.
    let pidfd = match pidfd_open(child.id() as i32) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("pidfd_open: {e}"));
        }
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let pumps = outputs.len();
    for (file, channel) in outputs {
        let (out, done) = (out.clone(), done_tx.clone());
        std::thread::spawn(move || {
            pump(file, channel, &*out);
            let _ = done.send(());
        });
    }
    drop(done_tx);
    std::thread::spawn(move || feed(early, input, stdin, master, pidfd));
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for the exec helper: {e}"))?;
    // The output still in the pipes or the terminal, for a moment.
    let deadline = Instant::now() + DRAIN;
    for _ in 0..pumps {
        match done_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ok((code & 0xff) as u8)
}

/// Copies one output to the client until it ends; reads on after the client failed, so
/// the command never blocks on its output.
fn pump(mut from: File, channel: Channel, out: &dyn Output) {
    let mut buf = vec![0; 32 << 10];
    let mut client_gone = false;
    loop {
        match from.read(&mut buf) {
            // EIO: a terminal whose last other end closed.
            Ok(0) | Err(_) => return,
            Ok(n) if !client_gone => client_gone = out.write(channel, &buf[..n]).is_err(),
            Ok(_) => {}
        }
    }
}

/// The client's input, to the command: stdin bytes, stdin's end (a pipe is closed; a
/// terminal stays open, as kubelet leaves it), terminal sizes. When the client is gone
/// (the channel closes), a pipe is closed, and a terminal hung up: the helper gets SIGHUP
/// and passes it on, so an interactive shell does not outlive its client.
fn feed(
    early: Vec<Input>,
    input: Receiver<Input>,
    mut stdin: Option<File>,
    master: Option<OwnedFd>,
    pidfd: OwnedFd,
) {
    for message in early.into_iter().chain(input) {
        match message {
            Input::Stdin(data) => {
                // A command that closed its input takes no more of it.
                if stdin.as_mut().is_some_and(|w| w.write_all(&data).is_err()) {
                    stdin = None;
                }
            }
            Input::StdinEnd => {
                if master.is_none() {
                    stdin = None;
                }
            }
            Input::Resize(size) => {
                if let Some(m) = &master {
                    set_size(m, size);
                }
            }
        }
    }
    if master.is_some() {
        signal(&pidfd, libc::SIGHUP);
    }
}

/// How long a terminal's first size is waited for before the command starts anyway.
const FIRST_SIZE: Duration = Duration::from_millis(200);

/// Waits up to [`FIRST_SIZE`] for the client's first terminal size and sets it; returns
/// the input that came before it, to be fed in order once the command runs.
fn first_size(input: &Receiver<Input>, master: &OwnedFd) -> Vec<Input> {
    let deadline = Instant::now() + FIRST_SIZE;
    let mut early = Vec::new();
    while let Ok(message) = input.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if let Input::Resize(size) = message {
            set_size(master, size);
            break;
        }
        early.push(message);
    }
    early
}

fn set_size(master: &OwnedFd, size: TerminalSize) {
    let ws = libc::winsize {
        ws_row: size.height,
        ws_col: size.width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which outlives the call.
    unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
}

fn pidfd_open(pid: i32) -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a PID and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor is new and nothing else owns it; pidfds are close-on-exec.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `sig` to the process of `pidfd`; a process already gone is not an error.
fn signal(pidfd: &OwnedFd, sig: i32) {
    // SAFETY: pidfd_send_signal reads the descriptor and signal; no siginfo is passed.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
}

/// The two ends of a pseudo-terminal.
struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

/// A pseudo-terminal in raw mode (it only carries bytes between the client and the
/// helper, whose own terminal for the command does the line discipline), 80×24 until the
/// client says otherwise. Both ends are opened close-on-exec, so no process another
/// session starts meanwhile keeps this terminal open.
fn open_pty() -> nix::Result<Pty> {
    use nix::fcntl::OFlag;
    use nix::sys::termios;
    use std::os::fd::{FromRawFd, IntoRawFd};
    let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
    let master = nix::pty::posix_openpt(flags)?;
    nix::pty::grantpt(&master)?;
    nix::pty::unlockpt(&master)?;
    let name = nix::pty::ptsname_r(&master)?;
    let slave = nix::fcntl::open(name.as_str(), flags, nix::sys::stat::Mode::empty())?;
    // SAFETY: `open` returned a new descriptor that nothing else owns.
    let slave = unsafe { OwnedFd::from_raw_fd(slave) };
    // SAFETY: the master's descriptor moves out of the `PtyMaster`, which gives it up.
    let master = unsafe { OwnedFd::from_raw_fd(master.into_raw_fd()) };
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which outlives the call.
    unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
    let mut attrs = termios::tcgetattr(&slave)?;
    termios::cfmakeraw(&mut attrs);
    termios::tcsetattr(&slave, termios::SetArg::TCSANOW, &attrs)?;
    Ok(Pty { master, slave })
}
