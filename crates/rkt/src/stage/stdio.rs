//! The standard streams of what runs in a pod (the stage and its apps, `rkt enter`'s
//! command): never the caller's terminal, never the caller's other descriptors.
//!
//! A process that holds a terminal can type into it (`TIOCSTI`, on kernels where
//! `dev.tty.legacy_tiocsti` is 1) and the caller's shell runs what it typed once rkt returns;
//! a process in the caller's session opens it as `/dev/tty` without holding it. So every
//! process of a pod runs in a session of its own (the stage calls `setsid`; each app and
//! entered command another, see `stage::app`), and rkt, outside the pod, relays:
//!
//! - **tty mode**, when rkt's stdin is a terminal and the app reads stdin: a pseudo-terminal
//!   is allocated for the pod; its other end replaces each of rkt's streams that is a
//!   terminal, and becomes the app's controlling terminal. rkt puts its own terminal in
//!   raw mode (so Ctrl-C, Ctrl-Z and the like reach the app's terminal as keys, and its
//!   line discipline signals the app's foreground process group: job control works in the
//!   pod), copies keys in and output out, and passes window size changes on (SIGWINCH,
//!   [`super::signals`]); the terminal's mode is restored when the pod ends.
//! - otherwise each of rkt's streams that is a terminal is replaced by a pipe that rkt
//!   copies to it; streams that are files or pipes are passed as they are, and
//!   `--stdin/--stdout/--stderr=null` give `/dev/null`.
//!
//! rkt itself keeps the caller's terminal and is the only process that touches it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::termios::{self, SetArg, Termios};
use nix::unistd::isatty;

use super::{NullStdio, StageError};

/// What one of the child's streams is.
#[derive(Debug)]
enum Stream {
    /// rkt's own (a file or a pipe, not a terminal).
    Inherit,
    /// `/dev/null`.
    Null,
    /// One end of a pipe or the pod's pseudo-terminal.
    Fd(OwnedFd),
}

/// The streams a child of rkt that runs in a pod gets, and what rkt must relay for them.
#[derive(Debug)]
pub struct PodStdio {
    streams: [Stream; 3],
    /// Where rkt copies its stdin to: a pipe's write end, or the pod's terminal.
    input: Option<OwnedFd>,
    /// What rkt copies to its own streams: (read end or terminal, rkt's stream).
    outputs: Vec<(OwnedFd, RawFd)>,
    /// The pod's terminal: rkt's is put in raw mode and its size followed.
    pty: Option<RawFd>,
}

fn is_terminal(fd: RawFd) -> bool {
    isatty(fd).unwrap_or(false)
}

fn sys(what: &'static str) -> impl Fn(Errno) -> StageError {
    move |source| StageError::Sys {
        what,
        path: "the pod's standard streams".into(),
        source,
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), StageError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("create a pipe for"))
}

impl PodStdio {
    /// `rkt run`'s streams for `null` (the ones that are `/dev/null`), from rkt's own: a
    /// pseudo-terminal in tty mode, a pipe for any other terminal, files and pipes as they
    /// are.
    pub fn plan(null: NullStdio) -> Result<PodStdio, StageError> {
        PodStdio::plan_with(null, false)
    }

    /// `rkt enter`'s streams: a pseudo-terminal in tty mode, else a relayed pipe for each,
    /// so that no process of the pod can reach the caller's file through the command's
    /// `/proc/<pid>/fd`.
    pub fn plan_relayed() -> Result<PodStdio, StageError> {
        PodStdio::plan_with(NullStdio::default(), true)
    }

    /// As [`PodStdio::plan_relayed`], the terminal decided by the caller: `Some(true)` a
    /// pseudo-terminal (rkt's stdin must be a terminal), `Some(false)` pipes even on a
    /// terminal (the command's stdout and stderr stay apart), `None` as rkt's stdin is.
    pub fn plan_relayed_tty(tty: Option<bool>) -> Result<PodStdio, StageError> {
        match tty {
            None => PodStdio::plan_relayed(),
            Some(true) if !is_terminal(0) => Err(StageError::Reported(
                "--tty needs a terminal on rkt's stdin".into(),
            )),
            Some(true) => PodStdio::with_pty([false; 3]),
            Some(false) => {
                let mut plan = PodStdio {
                    streams: [Stream::Inherit, Stream::Inherit, Stream::Inherit],
                    input: None,
                    outputs: Vec::new(),
                    pty: None,
                };
                for fd in 0..3 {
                    let (read, write) = pipe()?;
                    if fd == 0 {
                        plan.streams[0] = Stream::Fd(read);
                        plan.input = Some(write);
                    } else {
                        plan.streams[fd] = Stream::Fd(write);
                        plan.outputs.push((read, fd as RawFd));
                    }
                }
                Ok(plan)
            }
        }
    }

    fn plan_with(null: NullStdio, relay_all: bool) -> Result<PodStdio, StageError> {
        let nulls = [null.stdin, null.stdout, null.stderr];
        if !null.stdin && is_terminal(0) {
            return PodStdio::with_pty(nulls);
        }
        let mut plan = PodStdio {
            streams: [Stream::Inherit, Stream::Inherit, Stream::Inherit],
            input: None,
            outputs: Vec::new(),
            pty: None,
        };
        for fd in 0..3 {
            let stream = &mut plan.streams[fd as usize];
            if nulls[fd as usize] {
                *stream = Stream::Null;
            } else if relay_all || is_terminal(fd) {
                let (read, write) = pipe()?;
                if fd == 0 {
                    *stream = Stream::Fd(read);
                    plan.input = Some(write);
                } else {
                    *stream = Stream::Fd(write);
                    plan.outputs.push((read, fd));
                }
            }
        }
        Ok(plan)
    }

    fn with_pty(nulls: [bool; 3]) -> Result<PodStdio, StageError> {
        let size = window_size(0);
        let pty = nix::pty::openpty(size.as_ref(), None).map_err(sys("allocate a terminal for"))?;
        for fd in [&pty.master, &pty.slave] {
            let cloexec = nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC);
            nix::fcntl::fcntl(fd.as_raw_fd(), cloexec)
                .map_err(sys("set close-on-exec on the terminal of"))?;
        }
        let dup = |fd: &OwnedFd| fd.try_clone().map_err(|e| sys("duplicate")(errno_of(&e)));
        let mut streams = [Stream::Inherit, Stream::Inherit, Stream::Inherit];
        for (fd, stream) in streams.iter_mut().enumerate() {
            if nulls[fd] {
                *stream = Stream::Null;
            } else if is_terminal(fd as RawFd) {
                *stream = Stream::Fd(dup(&pty.slave)?);
            }
        }
        // The pod's output goes to rkt's terminal: its stdout, else its stderr, else the
        // terminal it reads (a terminal is open for reading and writing).
        let out = [1, 2]
            .into_iter()
            .find(|fd| !nulls[*fd as usize] && is_terminal(*fd))
            .unwrap_or(0);
        Ok(PodStdio {
            streams,
            input: Some(dup(&pty.master)?),
            pty: Some(pty.master.as_raw_fd()),
            outputs: vec![(pty.master, out)],
        })
    }

    /// Gives `cmd` the streams. The pipe and terminal ends are duplicated for the child
    /// by the spawn; the originals are closed by [`PodStdio::start`].
    pub fn apply(&self, cmd: &mut Command) -> Result<(), StageError> {
        let stdio = |stream: &Stream| -> Result<Option<Stdio>, StageError> {
            Ok(match stream {
                Stream::Inherit => None,
                Stream::Null => Some(Stdio::null()),
                Stream::Fd(fd) => Some(Stdio::from(
                    fd.try_clone().map_err(|e| sys("duplicate")(errno_of(&e)))?,
                )),
            })
        };
        if let Some(s) = stdio(&self.streams[0])? {
            cmd.stdin(s);
        }
        if let Some(s) = stdio(&self.streams[1])? {
            cmd.stdout(s);
        }
        if let Some(s) = stdio(&self.streams[2])? {
            cmd.stderr(s);
        }
        Ok(())
    }

    /// Once the child is spawned: closes rkt's copies of the child's ends, and starts
    /// relaying (in tty mode, with rkt's terminal in raw mode until the [`Relay`] ends).
    pub fn start(self) -> Relay {
        let PodStdio {
            streams,
            input,
            outputs,
            pty,
        } = self;
        drop(streams);
        let raw = pty.and_then(|master| {
            super::signals::set_resize(0, master);
            RawMode::enter(0)
        });
        let stop = input.and_then(|input| {
            let (stop_read, stop_write) = pipe().ok()?;
            // Detached: it may stay blocked writing to a pod that stopped reading; it ends
            // with rkt.
            let spawned = thread::Builder::new()
                .name("pod-stdin".into())
                .spawn(move || copy_stdin(File::from(input), stop_read));
            spawned.ok().map(|_| stop_write)
        });
        let outputs = outputs
            .into_iter()
            .map(|(from, to)| copy_in_thread(File::from(from), to))
            .collect();
        Relay {
            outputs,
            stop_input: stop,
            raw,
        }
    }
}

/// Copies rkt's stdin to `to` until end of file (then closes `to`: the app reads end of
/// file) or until `stop` is readable or closed (the pod ended: what is typed now is the
/// caller's shell's).
fn copy_stdin(mut to: File, stop: OwnedFd) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    // SAFETY: fd 0 stays open for the process's life; only borrowed here.
    let stdin = unsafe { BorrowedFd::borrow_raw(0) };
    let mut buf = [0u8; 8192];
    loop {
        let mut fds = [
            PollFd::new(stdin, PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Err(Errno::EINTR) => continue,
            Err(_) => return,
            Ok(_) => {}
        }
        if fds[1].any().unwrap_or(true) {
            return;
        }
        match nix::unistd::read(0, &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(_) => return,
        }
    }
}

fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(0))
}

/// Copies `from` to rkt's stream `to` until end of file (or EIO: a terminal whose other
/// end is closed) in a thread, which reports on the returned channel when done.
fn copy_in_thread(mut from: File, to: RawFd) -> mpsc::Receiver<()> {
    let (done, ended) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("pod-output".into())
        .spawn(move || {
            // SAFETY: fds 0 to 2 stay open for the process's life; never dropped.
            let mut out = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(to) });
            copy(&mut from, &mut *out);
            let _ = done.send(());
        });
    // Without a thread the channel is closed, and nothing is waited for.
    drop(spawned);
    ended
}

fn copy(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}

/// The relay of a running pod's streams.
#[derive(Debug)]
pub struct Relay {
    outputs: Vec<mpsc::Receiver<()>>,
    /// Closed to stop copying rkt's stdin.
    stop_input: Option<OwnedFd>,
    raw: Option<RawMode>,
}

impl Relay {
    /// Once the child has ended: waits until its output has been copied (until every
    /// process holding the pod's ends has closed them, or `grace` has passed), then puts
    /// rkt's terminal back as it was.
    pub fn finish(mut self, grace: Option<Duration>) {
        let deadline = grace.map(|g| Instant::now() + g);
        for ended in self.outputs.drain(..) {
            match deadline {
                None => {
                    let _ = ended.recv();
                }
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let _ = ended.recv_timeout(left);
                }
            }
        }
        self.stop_input.take();
        super::signals::set_resize(-1, -1);
        self.raw.take();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        super::signals::set_resize(-1, -1);
    }
}

/// A terminal in raw mode, put back as it was on drop.
#[derive(Debug)]
pub struct RawMode {
    fd: RawFd,
    saved: Termios,
}

impl RawMode {
    /// Puts terminal `fd` in raw mode; `None` when it is no terminal.
    pub fn enter(fd: RawFd) -> Option<RawMode> {
        // SAFETY: fd 0 stays open for the process's life; only borrowed here.
        let term = unsafe { BorrowedFd::borrow_raw(fd) };
        let saved = termios::tcgetattr(term).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(term, SetArg::TCSADRAIN, &raw).ok()?;
        Some(RawMode { fd, saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: as in `enter`.
        let term = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let _ = termios::tcsetattr(term.as_fd(), SetArg::TCSADRAIN, &self.saved);
    }
}

/// The window size of terminal `fd`, if it is one.
pub fn window_size(fd: RawFd) -> Option<nix::pty::Winsize> {
    // SAFETY: winsize is plain integers, for which all zeroes is a valid value.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes a winsize into the pointer given.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size) };
    (rc == 0).then_some(size)
}

/// Descriptors a process keeps across the closing of the caller's others.
///
/// Closes every descriptor from 3 up but those in `keep`, so that nothing the caller of
/// rkt had open (a file on descriptor 7, a socket) reaches the pod. `close_range(2)` where
/// the kernel has it, else each one listed in `/proc/self/fd`.
pub fn close_inherited(keep: &[RawFd]) {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd >= 3).collect();
    keep.sort_unstable();
    keep.dedup();
    let mut from: RawFd = 3;
    for fd in keep.iter().copied().chain([RawFd::MAX]) {
        if fd > from && !close_range(from, fd - 1) {
            close_listed(from, fd - 1);
        }
        from = fd.saturating_add(1);
    }
}

fn close_range(first: RawFd, last: RawFd) -> bool {
    // SAFETY: closes descriptors; no pointers.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            last as libc::c_uint,
            0,
        ) == 0
    }
}

fn close_listed(first: RawFd, last: RawFd) {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let open: Vec<RawFd> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| (first..=last).contains(fd))
        .collect();
    for fd in open {
        // SAFETY: closing a descriptor this process does not use past this point.
        unsafe { libc::close(fd) };
    }
}

/// In a process about to execute something in the pod (an app, an entered command): a
/// session of its own, and, when its stdin is a terminal (the pod's, [`PodStdio`]), that
/// terminal as its controlling terminal. Async-signal-safe (used between fork and exec).
pub fn own_session() -> Result<(), Errno> {
    // SAFETY: setsid(2) and ioctl(2) take no pointers here.
    if unsafe { libc::setsid() } < 0 {
        return Err(Errno::last());
    }
    // SAFETY: isatty(3) and TIOCSCTTY with argument 0 take no pointers.
    if unsafe { libc::isatty(0) } == 1 && unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } < 0 {
        // The terminal is another app's already (a pod of several apps shares it).
        let errno = Errno::last();
        if errno != Errno::EPERM {
            return Err(errno);
        }
    }
    Ok(())
}
