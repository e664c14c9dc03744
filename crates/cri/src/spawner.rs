//! The server's fork server, `rkt-cri spawner`: the process that starts each pod's
//! long-lived helpers (its sandbox runner, its containers' log monitors) by forking itself
//! rather than by executing rkt-cri again.
//!
//! Why: an executed rkt-cri relocates its read-only data (vtables, string tables: about
//! 230 KiB) into private pages of its own, and a pod kept two such processes for its whole
//! life (bench scenario 13). A process forked from one executed once shares those pages
//! with it until it writes them, which it never does. The spawner is executed once per
//! server, stays single-threaded (so each fork is an ordinary one, and the child may do
//! anything), and does nothing but fork on request; the server cannot fork itself instead,
//! being multi-threaded.
//!
//! Protocol, on a `SOCK_SEQPACKET` socket pair: the server sends one message per process
//! (JSON: its arguments, variables and the numbers under which it inherits the descriptors
//! that come with the message as `SCM_RIGHTS`), and the spawner answers with its PID or why
//! it could not fork. The child places the descriptors under their numbers, closes every
//! other one, puts its standard streams on `/dev/null`, sets the variables, writes its
//! arguments where `/proc/PID/cmdline` reads them (so `ps`, and the checks that identify a
//! runner or a log monitor by its command line, see its arguments, followed by NULs), and
//! runs the hidden command as `main` would. The spawner ignores `SIGCHLD`, so the kernel
//! reaps what it forked; it ends when the server's end of the socket closes, and what it
//! started goes on (each helper leads a session of its own).

use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use nix::errno::Errno;
use nix::sys::signal::{signal, SigHandler, Signal};
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use nix::unistd::{fork, ForkResult};
use serde::{Deserialize, Serialize};

use rkt::stage::launch::{Launch, Launcher};

/// The hidden command.
pub const SPAWNER_COMMAND: &str = "spawner";
/// The variable naming the spawner's end of the socket pair.
const SOCKET_FD_VAR: &str = "RKT_CRI_SPAWNER_FD";
/// The room a forked process has for its command line: the spawner is executed with an
/// argument this long, whose place each child overwrites with its own arguments (cut there,
/// which still shows a log monitor's `--log PATH` whole).
const TITLE_ROOM: usize = 8192;
/// The most descriptors one process inherits.
const MAX_FDS: usize = 16;
/// The longest request (a runner's spec carries the pod's labels and annotations).
const MAX_REQUEST: usize = 1 << 20;

/// A process to fork, as sent: its arguments and variables, descriptor numbers in the
/// order of the message's `SCM_RIGHTS`.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    args: Vec<Word>,
    env: Vec<(Word, Word)>,
    fds: Vec<RawFd>,
}

/// An argument or variable: text as a JSON string (a sandbox's spec is an argument of up
/// to the pod's annotations' size, and a string keeps it about that size), other bytes as
/// a list of numbers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Word {
    Text(String),
    Bytes(Vec<u8>),
}

impl Word {
    fn of(word: &std::ffi::OsStr) -> Word {
        match word.to_str() {
            Some(text) => Word::Text(text.to_string()),
            None => Word::Bytes(word.as_encoded_bytes().to_vec()),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Word::Text(text) => text.as_bytes(),
            Word::Bytes(bytes) => bytes,
        }
    }

    fn into_os_string(self) -> OsString {
        match self {
            Word::Text(text) => text.into(),
            Word::Bytes(bytes) => OsString::from_vec(bytes),
        }
    }
}

/// The answer: the child's PID, or why there is none.
#[derive(Debug, Serialize, Deserialize)]
enum Answer {
    Forked(u32),
    Failed(String),
}

/// The server's side: a [`Launcher`] that has the spawner fork each process, starting the
/// spawner on first use and again should it have gone.
#[derive(Debug, Default)]
pub struct Spawner {
    conn: Mutex<Option<Conn>>,
}

/// A running spawner and the server's end of its socket.
#[derive(Debug)]
struct Conn {
    socket: OwnedFd,
    child: Child,
}

/// Why a request got no PID.
enum Failure {
    /// The spawner answered that it could not fork it.
    Refused(std::io::Error),
    /// The spawner is gone, the request not sent: start another and ask again.
    Unsent(std::io::Error),
    /// The spawner ended with the request sent, unanswered: another is started for the
    /// next request, but this one is not asked again (it may have been forked).
    Lost(std::io::Error),
}

impl Spawner {
    /// Starts the spawner now rather than at the first pod.
    pub fn warm(&self) -> std::io::Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        connected(&mut conn)?;
        Ok(())
    }
}

/// The live spawner's connection, started first when there is none.
fn connected(conn: &mut Option<Conn>) -> std::io::Result<&Conn> {
    match conn {
        Some(c) => Ok(c),
        None => Ok(conn.insert(Conn::start()?)),
    }
}

impl Launcher for Spawner {
    fn launch(&self, launch: &Launch) -> std::io::Result<u32> {
        if launch.fds.len() > MAX_FDS {
            return Err(std::io::Error::other(format!(
                "{} descriptors to pass, at most {MAX_FDS}",
                launch.fds.len()
            )));
        }
        let request = Request {
            args: launch.args.iter().map(|a| Word::of(a)).collect(),
            env: launch
                .env
                .iter()
                .map(|(k, v)| (Word::of(k), Word::of(v)))
                .collect(),
            fds: launch.fds.clone(),
        };
        let request = serde_json::to_vec(&request).map_err(std::io::Error::other)?;
        if request.len() > MAX_REQUEST {
            return Err(std::io::Error::other(format!(
                "a request of {} bytes to the spawner, at most {MAX_REQUEST}",
                request.len()
            )));
        }
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut last = None;
        for _ in 0..2 {
            match connected(&mut conn)?.ask(&request, &launch.fds) {
                Ok(pid) => return Ok(pid),
                Err(Failure::Refused(e)) => return Err(e),
                Err(Failure::Lost(e)) => {
                    // Dropping it kills the spawner if it still lives, and reaps it.
                    *conn = None;
                    return Err(e);
                }
                Err(Failure::Unsent(e)) => {
                    *conn = None;
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("the spawner did not start")))
    }
}

impl Conn {
    fn start() -> std::io::Result<Conn> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        // Room for a request of MAX_REQUEST in one message (a datagram must fit the
        // sender's buffer, 208 KiB by default): root may raise it beyond the system's
        // limit; should that fail, larger requests are refused with EMSGSIZE.
        let _ = nix::sys::socket::setsockopt(
            &ours,
            nix::sys::socket::sockopt::SndBufForce,
            &(2 * MAX_REQUEST),
        );
        let mut command = Command::new("/proc/self/exe");
        command
            .arg(SPAWNER_COMMAND)
            .arg(" ".repeat(TITLE_ROOM))
            .env(SOCKET_FD_VAR, theirs.as_raw_fd().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        rkt::stage::inherit_in_child(&mut command, vec![theirs.as_raw_fd()]);
        let child = command.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot start rkt-cri {SPAWNER_COMMAND}: {e}"),
            )
        })?;
        drop(theirs);
        Ok(Conn {
            socket: ours,
            child,
        })
    }

    fn ask(&self, request: &[u8], fds: &[RawFd]) -> Result<u32, Failure> {
        let about = |e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!("the spawner (PID {}): {e}", self.child.id()),
            )
        };
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
        sendmsg::<()>(
            self.socket.as_raw_fd(),
            &[IoSlice::new(request)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(|e| match e {
            // The spawner is gone: another one is asked.
            Errno::EPIPE | Errno::ECONNRESET | Errno::ENOTCONN => Failure::Unsent(about(e.into())),
            Errno::EMSGSIZE => Failure::Refused(std::io::Error::other(format!(
                "a request of {} bytes does not fit the spawner's socket (raising its buffer \
                 to {} bytes needs CAP_NET_ADMIN)",
                request.len(),
                2 * MAX_REQUEST
            ))),
            e => Failure::Refused(about(e.into())),
        })?;
        let mut buf = [0u8; 4096];
        let n = nix::sys::socket::recv(self.socket.as_raw_fd(), &mut buf, MsgFlags::empty())
            .map_err(|e| Failure::Lost(about(e.into())))?;
        if n == 0 {
            return Err(Failure::Lost(about(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "ended before it answered",
            ))));
        }
        match serde_json::from_slice::<Answer>(&buf[..n]) {
            Ok(Answer::Forked(pid)) => Ok(pid),
            Ok(Answer::Failed(why)) => Err(Failure::Refused(std::io::Error::other(why))),
            Err(e) => Err(Failure::Lost(about(std::io::Error::other(e)))),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // The spawner is killed (it holds nothing of the pods: what it forked leads
        // sessions of its own and goes on) and reaped.
        let _ =
            nix::sys::socket::shutdown(self.socket.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rkt-cri spawner PADDING`: forks on request until the server's end closes.
pub fn main() -> i32 {
    let socket = match take_socket() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rkt-cri {SPAWNER_COMMAND}: {e}");
            return 2;
        }
    };
    // What it forks is the kernel's to reap; the children set it back.
    // SAFETY: SIG_IGN is no handler; this process has one thread.
    if let Err(e) = unsafe { signal(Signal::SIGCHLD, SigHandler::SigIgn) } {
        eprintln!("rkt-cri {SPAWNER_COMMAND}: cannot ignore SIGCHLD: {e}");
        return 2;
    }
    retitle(&[b"/proc/self/exe".as_slice(), SPAWNER_COMMAND.as_bytes()]);
    // One allocator arena for every thread of what it forks (a runner's or a log monitor's
    // few threads mostly wait).
    rkt::stage::launch::use_one_arena();
    let Some(mut buf) = RequestBuffer::new() else {
        eprintln!("rkt-cri {SPAWNER_COMMAND}: cannot map a request buffer");
        return 2;
    };
    loop {
        let (n, fds) = match receive(&socket, buf.bytes()) {
            Ok(Some(got)) => got,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("rkt-cri {SPAWNER_COMMAND}: {e}");
                return 1;
            }
        };
        let request = serde_json::from_slice::<Request>(&buf.bytes()[..n]);
        let answer = match request {
            Err(e) => Answer::Failed(format!("a request the spawner cannot read: {e}")),
            Ok(r) if r.fds.len() != fds.len() => Answer::Failed(format!(
                "{} descriptors named, {} passed",
                r.fds.len(),
                fds.len()
            )),
            Ok(request) => {
                // SAFETY: this process has one thread (the spawner starts none).
                match unsafe { fork() } {
                    Ok(ForkResult::Child) => child(&socket, request, fds),
                    Ok(ForkResult::Parent { child }) => {
                        Answer::Forked(child.as_raw().unsigned_abs())
                    }
                    Err(e) => Answer::Failed(format!("cannot fork: {e}")),
                }
            }
        };
        let answer = serde_json::to_vec(&answer).unwrap_or_default();
        if let Err(e) = nix::sys::socket::send(socket.as_raw_fd(), &answer, MsgFlags::MSG_NOSIGNAL)
        {
            eprintln!("rkt-cri {SPAWNER_COMMAND}: cannot answer: {e}");
            return 1;
        }
    }
}

/// Where requests are read: a mapping of its own that a forked process gets empty
/// (`MADV_WIPEONFORK`). Rewritten by each request, it would otherwise be copied into every
/// process forked before, page by page (a buffer on the heap was: 1 MiB per process once
/// glibc had moved it there).
struct RequestBuffer {
    ptr: *mut u8,
}

impl RequestBuffer {
    fn new() -> Option<RequestBuffer> {
        // SAFETY: a new anonymous private mapping; nothing else refers to it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAX_REQUEST,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: advice on the mapping just made. A kernel older than 4.14 refuses it;
        // the forked processes then only keep copies of the pages written since.
        unsafe { libc::madvise(ptr, MAX_REQUEST, libc::MADV_WIPEONFORK) };
        Some(RequestBuffer { ptr: ptr.cast() })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is MAX_REQUEST bytes, readable and writable, and ours alone.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, MAX_REQUEST) }
    }
}

impl Drop for RequestBuffer {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer referred to.
        unsafe { libc::munmap(self.ptr.cast(), MAX_REQUEST) };
    }
}

fn take_socket() -> Result<OwnedFd, String> {
    rkt::stage::launch::take_inherited(SOCKET_FD_VAR)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("started by hand ({SOCKET_FD_VAR} is not set), not by rkt-cri"))
}

/// The next request and its descriptors; `None` once the server's end is closed.
fn receive(socket: &OwnedFd, buf: &mut [u8]) -> Result<Option<(usize, Vec<OwnedFd>)>, String> {
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = loop {
        match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(format!("cannot read a request: {e}")),
            Ok(msg) => break msg,
        }
    };
    let mut fds = Vec::new();
    for cmsg in msg
        .cmsgs()
        .map_err(|e| format!("cannot read a request: {e}"))?
    {
        if let ControlMessageOwned::ScmRights(received) = cmsg {
            // SAFETY: SCM_RIGHTS made these descriptors in this process; owned from here.
            fds.extend(
                received
                    .into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let (n, truncated) = (
        msg.bytes,
        msg.flags
            .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC),
    );
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    if truncated {
        return Err("a request longer than the spawner reads".into());
    }
    Ok(Some((n, fds)))
}

/// In the forked child: becomes the requested process; never returns.
fn child(socket: &OwnedFd, request: Request, fds: Vec<OwnedFd>) -> ! {
    // SAFETY: restoring the default disposition; this process has one thread.
    let _ = unsafe { signal(Signal::SIGCHLD, SigHandler::SigDfl) };
    let _ = nix::unistd::close(socket.as_raw_fd());
    let code = match place(&request.fds, fds) {
        Ok(()) => {
            for (key, value) in request.env {
                // SAFETY: edition 2021; this process has one thread.
                std::env::set_var(key.into_os_string(), value.into_os_string());
            }
            let mut title: Vec<&[u8]> = vec![b"/proc/self/exe"];
            title.extend(request.args.iter().map(Word::as_bytes));
            retitle(&title);
            let mut args = request.args.into_iter().map(Word::into_os_string);
            match args.next() {
                Some(cmd) => crate::helper_command(&cmd, args).unwrap_or_else(|| {
                    eprintln!("rkt-cri {SPAWNER_COMMAND}: no command {cmd:?}");
                    2
                }),
                None => 2,
            }
        }
        Err(e) => {
            eprintln!("rkt-cri {SPAWNER_COMMAND}: {e}");
            2
        }
    };
    std::process::exit(code)
}

/// Puts the standard streams on `/dev/null` and `received[i]` under number `numbers[i]`,
/// inheritable, and closes every other descriptor.
fn place(numbers: &[RawFd], received: Vec<OwnedFd>) -> Result<(), String> {
    // The streams first, their descriptor closed again, so that it never sits on a
    // number a received descriptor is placed on.
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| format!("cannot open /dev/null: {e}"))?;
    for target in 0..3 {
        nix::unistd::dup2(null.as_raw_fd(), target)
            .map_err(|e| format!("cannot put descriptor {target} on /dev/null: {e}"))?;
    }
    drop(null);
    // Out of the way next: a received descriptor may sit on another one's number.
    let above = numbers.iter().copied().max().unwrap_or(2).max(2) + 1;
    let mut moved = Vec::new();
    for fd in received {
        let high = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(above))
            .map_err(|e| format!("cannot move a descriptor: {e}"))?;
        drop(fd);
        // SAFETY: fcntl returned a new descriptor that nothing else owns.
        moved.push(unsafe { OwnedFd::from_raw_fd(high) });
    }
    for (target, fd) in numbers.iter().copied().zip(&moved) {
        nix::unistd::dup2(fd.as_raw_fd(), target)
            .map_err(|e| format!("cannot place descriptor {target}: {e}"))?;
    }
    drop(moved);
    rkt::stage::stdio::close_inherited(numbers);
    Ok(())
}

/// Writes `args` where the kernel reads this process's command line (the place of the
/// arguments it was executed with), cut to fit, the rest zeroed: `/proc/PID/cmdline` then
/// shows them followed by NULs up to the spawner's length (empty arguments to a reader
/// that splits on NUL; shortening the area needs `CAP_SYS_RESOURCE`, which root may lack).
fn retitle(args: &[&[u8]]) {
    let Some((start, end)) = args_area() else {
        return;
    };
    let mut title: Vec<u8> = Vec::new();
    for a in args {
        title.extend_from_slice(a);
        title.push(0);
    }
    let room = end - start;
    // The last byte stays NUL: the kernel then reads the whole place as the arguments.
    title.truncate(room.saturating_sub(1));
    title.resize(room, 0);
    // SAFETY: [start, end) is this process's argument area, mapped writable on its stack
    // and read by nothing in this process after `main` copied it: the commands run take
    // their arguments as values, and none calls `std::env::args` (which would read the
    // spawner's pointers into this area, now pointing into the new title).
    unsafe { std::ptr::copy_nonoverlapping(title.as_ptr(), start as *mut u8, room) };
}

/// `arg_start` and `arg_end` of `/proc/self/stat` (fields 48 and 49).
fn args_area() -> Option<(usize, usize)> {
    let stat = rkt::procfs::Stat::of_self()?;
    let (start, end) = (stat.number(48)?, stat.number(49)?);
    (start < end).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_area_is_found() {
        let (start, end) = args_area().expect("arg_start and arg_end");
        // The test binary's own arguments are there, NUL-separated.
        // SAFETY: reading this process's argument area.
        let area = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
        let first = std::env::args_os().next().expect("argv[0]");
        assert!(area.starts_with(first.as_encoded_bytes()));
    }
}
