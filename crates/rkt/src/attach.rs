//! Attaching to a sandbox app's live streams (`rkt attach`): the protocol between the app's
//! monitor, which holds the app's stdin, stdout and stderr (or its terminal), and any number
//! of attached clients.
//!
//! A unix socket per app, `attach/<app>.sock` in the pod's directory. Every message is a
//! frame: one byte of kind, four bytes of length (big-endian), the payload. The monitor
//! first sends [`Frame::Hello`] (which streams the app has and whether they are a
//! terminal), then the app's output as it comes ([`Frame::Stdout`], [`Frame::Stderr`]);
//! a client sends input ([`Frame::Stdin`]), the end of its input ([`Frame::StdinClose`])
//! and its terminal's size ([`Frame::Resize`]). The monitor never waits for a client: each
//! has a bounded queue, and one that falls behind by more than it holds is disconnected,
//! so a client that stops reading never blocks the app. A client's leaving (detaching)
//! leaves the app running; when the app's streams end, the monitor closes every client.
//!
//! The socket is bound and reached through `/proc/self/fd/N/<app>.sock`, `N` an `O_PATH`
//! descriptor of the directory, so that a long pod directory never exceeds the 108 bytes a
//! socket's path may have. The room takes from nothing.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// The streams an app offers to attach to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    /// The streams are the app's terminal (stdin and stdout; there is no separate stderr).
    pub tty: bool,
}

impl Endpoints {
    fn to_byte(self) -> u8 {
        u8::from(self.stdin)
            | u8::from(self.stdout) << 1
            | u8::from(self.stderr) << 2
            | u8::from(self.tty) << 3
    }

    fn from_byte(b: u8) -> Endpoints {
        Endpoints {
            stdin: b & 1 != 0,
            stdout: b & 2 != 0,
            stderr: b & 4 != 0,
            tty: b & 8 != 0,
        }
    }
}

/// One message of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Hello(Endpoints),
    Stdin(Vec<u8>),
    StdinClose,
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Resize { rows: u16, cols: u16 },
}

/// The longest payload a frame carries (the monitor reads at most this much at once).
pub const MAX_PAYLOAD: usize = 1 << 20;

impl Frame {
    fn kind(&self) -> u8 {
        match self {
            Frame::Hello(_) => 0,
            Frame::Stdin(_) => 1,
            Frame::StdinClose => 2,
            Frame::Stdout(_) => 3,
            Frame::Stderr(_) => 4,
            Frame::Resize { .. } => 5,
        }
    }

    /// The frame as bytes.
    pub fn encode(&self) -> Vec<u8> {
        let payload: Vec<u8> = match self {
            Frame::Hello(e) => vec![e.to_byte()],
            Frame::Stdin(d) | Frame::Stdout(d) | Frame::Stderr(d) => d.clone(),
            Frame::StdinClose => Vec::new(),
            Frame::Resize { rows, cols } => [rows.to_be_bytes(), cols.to_be_bytes()].concat(),
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(self.kind());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Reads one frame; `Ok(None)` at the end of the stream.
    pub fn read(from: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut head = [0u8; 5];
        match from.read_exact(&mut head) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("an attach frame of {len} bytes (at most {MAX_PAYLOAD})"),
            ));
        }
        let mut payload = vec![0u8; len];
        from.read_exact(&mut payload)?;
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        Ok(Some(match head[0] {
            0 => Frame::Hello(Endpoints::from_byte(
                *payload.first().ok_or_else(|| bad("an empty hello"))?,
            )),
            1 => Frame::Stdin(payload),
            2 => Frame::StdinClose,
            3 => Frame::Stdout(payload),
            4 => Frame::Stderr(payload),
            5 if payload.len() == 4 => Frame::Resize {
                rows: u16::from_be_bytes([payload[0], payload[1]]),
                cols: u16::from_be_bytes([payload[2], payload[3]]),
            },
            kind => return Err(bad(&format!("an attach frame of unknown kind {kind}"))),
        }))
    }
}

/// The directory of a pod's attach sockets.
pub fn attach_dir(pod_dir: &Path) -> PathBuf {
    pod_dir.join("attach")
}

/// `name.sock` in `dir`, as a path of at most a few dozen bytes: through an `O_PATH`
/// descriptor of `dir`, which the caller keeps open while it uses the path.
fn short_path(dir: &Path, name: &str) -> io::Result<(OwnedFd, PathBuf)> {
    let fd: OwnedFd = std::fs::File::open(dir)?.into();
    let path = PathBuf::from(format!("/proc/self/fd/{}/{name}.sock", fd.as_raw_fd()));
    Ok((fd, path))
}

/// Which socket file: its inode and change time (an inode number alone is reused at once).
pub type SocketId = (u64, i64, i64);

fn socket_id(path: &Path) -> io::Result<SocketId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Listens for clients of app `name` in `dir` (an old socket there is replaced); returns
/// the listener and the socket file's identity, for [`unlisten`].
pub fn listen(dir: &Path, name: &str) -> io::Result<(UnixListener, SocketId)> {
    std::fs::create_dir_all(dir)?;
    let (_dir, path) = short_path(dir, name)?;
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(&path)?;
    Ok((listener, socket_id(&path)?))
}

/// Removes app `name`'s socket in `dir` if it is still the one `id` names (a monitor
/// started later for the same name has its own there).
pub fn unlisten(dir: &Path, name: &str, id: SocketId) {
    let Ok((_dir, path)) = short_path(dir, name) else {
        return;
    };
    if socket_id(&path).is_ok_and(|now| now == id) {
        let _ = std::fs::remove_file(&path);
    }
}

/// Connects to app `name`'s monitor in `dir`.
pub fn connect(dir: &Path, name: &str) -> io::Result<UnixStream> {
    let (_dir, path) = short_path(dir, name)?;
    UnixStream::connect(path)
}

/// How many frames a client may fall behind before it is disconnected.
const CLIENT_QUEUE: usize = 1024;

/// The attached clients of one app, fed by the monitor.
#[derive(Debug, Default)]
pub struct Hub {
    clients: Mutex<Vec<SyncSender<Arc<Vec<u8>>>>>,
    /// The threads writing to the clients, which [`Hub::close_all`] lets finish.
    writers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Hub {
    /// Sends `frame` to every client; one whose queue is full (it stopped reading) or gone
    /// is dropped, never waited for.
    pub fn broadcast(&self, frame: &Frame) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if clients.is_empty() {
            return;
        }
        let bytes = Arc::new(frame.encode());
        clients.retain(|c| match c.try_send(bytes.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        });
    }

    /// Ends every client's connection once what was sent to it is written (the app's
    /// streams ended); a client that does not read it within `patience` is left behind.
    pub fn close_all(&self, patience: std::time::Duration) {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let writers = std::mem::take(&mut *self.writers.lock().unwrap_or_else(|p| p.into_inner()));
        let deadline = std::time::Instant::now() + patience;
        for writer in writers {
            while !writer.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }

    /// Serves `listener` until it fails: each client gets `endpoints` as its hello, the
    /// app's output from then on, and has its input given to `input` (`None` once the app's
    /// stdin is closed, or when it has none) and its terminal size to `resize`.
    pub fn serve(
        self: Arc<Self>,
        listener: UnixListener,
        endpoints: Endpoints,
        input: Arc<Mutex<Option<std::fs::File>>>,
        resize: Arc<dyn Fn(u16, u16) + Send + Sync>,
    ) {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let Ok(mut writer) = conn.try_clone() else {
                continue;
            };
            let (tx, rx) = sync_channel::<Arc<Vec<u8>>>(CLIENT_QUEUE);
            if writer.write_all(&Frame::Hello(endpoints).encode()).is_err() {
                continue;
            }
            self.clients
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(tx);
            let handle = std::thread::spawn(move || {
                for bytes in rx {
                    if writer.write_all(&bytes).is_err() {
                        break;
                    }
                }
                // Dropped by the hub (too slow, or the app ended): the client sees the end.
                let _ = writer.shutdown(std::net::Shutdown::Both);
            });
            let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
            writers.retain(|w| !w.is_finished());
            writers.push(handle);
            let (input, resize) = (input.clone(), resize.clone());
            let mut reader = conn;
            std::thread::spawn(move || loop {
                match Frame::read(&mut reader) {
                    Ok(Some(Frame::Stdin(data))) if endpoints.stdin => {
                        let mut input = input.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(file) = input.as_mut() {
                            if write_all_waiting(file, &data).is_err() {
                                *input = None;
                            }
                        }
                    }
                    Ok(Some(Frame::StdinClose)) if endpoints.stdin && !endpoints.tty => {
                        *input.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    }
                    Ok(Some(Frame::Resize { rows, cols })) if endpoints.tty => resize(rows, cols),
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            });
        }
    }
}

/// `write_all` to a descriptor that may be non-blocking (a terminal's master end, which
/// its reader made so): waits for room instead of failing with `EAGAIN`.
fn write_all_waiting(file: &mut std::fs::File, mut data: &[u8]) -> io::Result<()> {
    use std::os::fd::AsFd;
    while !data.is_empty() {
        match file.write(data) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut fds = [nix::poll::PollFd::new(
                    file.as_fd(),
                    nix::poll::PollFlags::POLLOUT,
                )];
                let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_as_they_were_sent() {
        let frames = [
            Frame::Hello(Endpoints {
                stdin: true,
                stdout: true,
                stderr: false,
                tty: true,
            }),
            Frame::Stdin(b"typed".to_vec()),
            Frame::StdinClose,
            Frame::Stdout(vec![0, 1, 2, 255]),
            Frame::Stderr(Vec::new()),
            Frame::Resize {
                rows: 50,
                cols: 132,
            },
        ];
        let bytes: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
        let mut reader = &bytes[..];
        for frame in &frames {
            assert_eq!(Frame::read(&mut reader).unwrap().as_ref(), Some(frame));
        }
        assert_eq!(Frame::read(&mut reader).unwrap(), None);
    }

    #[test]
    fn a_bad_frame_is_an_error_not_a_huge_allocation() {
        let mut huge = vec![3u8];
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(Frame::read(&mut &huge[..]).is_err());
        assert!(Frame::read(&mut &[9u8, 0, 0, 0, 0][..]).is_err());
        assert!(Frame::read(&mut &[5u8, 0, 0, 0, 1, 7][..]).is_err());
    }

    #[test]
    fn a_client_that_stops_reading_is_dropped_and_never_blocks_the_broadcast() {
        let hub = Hub::default();
        let (tx, rx) = sync_channel(2);
        hub.clients.lock().unwrap().push(tx);
        for _ in 0..10 {
            hub.broadcast(&Frame::Stdout(b"x".to_vec()));
        }
        assert!(hub.clients.lock().unwrap().is_empty());
        assert_eq!(rx.try_iter().count(), 2);
    }

    #[test]
    fn a_long_directory_is_reached_through_a_short_path() {
        let dir = tempfile::tempdir().unwrap();
        let long = dir.path().join("d".repeat(90)).join("e".repeat(40));
        let (listener, id) = listen(&long, "app").unwrap();
        let accepted = std::thread::spawn(move || listener.accept().map(|_| ()));
        connect(&long, "app").unwrap();
        accepted.join().unwrap().unwrap();
        assert!(long.join("app.sock").exists());
        // A later listener's socket is not removed by the earlier one.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (_later, _) = listen(&long, "app").unwrap();
        unlisten(&long, "app", id);
        assert!(long.join("app.sock").exists());
    }
}
