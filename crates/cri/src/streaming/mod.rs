//! The streaming server: what `Exec`, `Attach` and `PortForward` return is a URL of this
//! server, `http://<address>/<kind>/<token>`, and the client (kubelet's proxy, crictl,
//! critest) upgrades an HTTP connection on it to SPDY/3.1 or WebSocket and multiplexes the
//! request's streams over it.
//!
//! The RPC remembers its request under a one-time token ([`tokens`]); the listener runs a
//! thread per connection (the rkt library and the `spdy` crate are synchronous), reads the
//! request head, takes the token and hands the connection to its transport ([`spdy_edge`],
//! [`ws_edge`]), which runs the request's backend ([`process`] for exec, [`attach`],
//! [`port_forward`]) behind the [`Output`] / [`Input`] seam below.

pub mod attach;
pub mod port_forward;
pub mod process;
pub mod requests;
pub mod spdy_edge;
pub mod tokens;
pub mod ws_edge;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use spdy::http::{self, RequestHead};
use spdy::k8s::{Outcome, TerminalSize};

use crate::options::Config;
use tokens::{Request, Tokens};

/// How long a connection may be idle once its streams are set up (kubelet's
/// `--streaming-connection-idle-timeout` default; client-go pings every 5 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(4 * 3600);
/// How long a URL may wait for its connection.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// Connections served at once; more are answered 503.
pub const MAX_CONNECTIONS: usize = 512;
/// How long a client may take to send its request head, or to open the streams it asked
/// for.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a write to a client may block (a client that stops reading is dropped
/// after this, and the process it watched goes on unblocked).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// The two output streams of exec and attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channel {
    Stdout,
    Stderr,
}

/// What the client sends to an exec or attach, in order.
#[derive(Debug)]
pub enum Input {
    Stdin(Vec<u8>),
    /// The client half-closed stdin.
    StdinEnd,
    Resize(TerminalSize),
}

/// Where an exec's or attach's output goes: implemented by each transport. Every method
/// may fail (the client went away, or stopped reading past [`WRITE_TIMEOUT`]); callers go
/// on regardless, so the process is never held by its client.
pub trait Output: Send + Sync {
    fn write(&self, channel: Channel, data: &[u8]) -> io::Result<()>;
    /// The end: output streams closed, the outcome on the error stream, the connection
    /// told that nothing more comes.
    fn finish(&self, outcome: &Outcome);
}

/// A client connection whose every whole write must be done within [`WRITE_TIMEOUT`]
/// (a socket's own timeout counts per send, so a client reading a trickle would hold a
/// writer for far longer).
pub struct TimedWriter(pub TcpStream);

impl Write for TimedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }

    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        let deadline = std::time::Instant::now() + WRITE_TIMEOUT;
        while !buf.is_empty() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not read in time",
                ));
            }
            self.0.set_write_timeout(Some(left))?;
            match self.0.write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The running streaming server.
pub struct Server {
    address: SocketAddr,
    tokens: Arc<Tokens>,
}

impl Server {
    /// Binds `--streaming-address` and serves on threads of its own.
    pub fn start(config: Arc<Config>) -> anyhow::Result<Arc<Server>> {
        use anyhow::Context;
        let listener = TcpListener::bind(config.streaming_address).with_context(|| {
            format!(
                "--streaming-address={}: cannot listen",
                config.streaming_address
            )
        })?;
        let mut address = listener.local_addr().context("--streaming-address")?;
        if address.ip().is_unspecified() {
            // A URL needs a host a client can reach; the loopback one is on every node.
            address.set_ip(match address {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let server = Arc::new(Server {
            address,
            tokens: Arc::new(Tokens::new(TOKEN_LIFETIME)),
        });
        let tokens = server.tokens.clone();
        std::thread::Builder::new()
            .name("streaming-accept".into())
            .spawn(move || accept_loop(listener, tokens, config))
            .context("cannot start the streaming server's thread")?;
        eprintln!("rkt-cri: streaming on http://{address}");
        Ok(server)
    }

    /// The URL of a new one-time token for `request`.
    pub fn url(&self, request: Request) -> String {
        let kind = request.kind();
        let token = self.tokens.insert(request);
        format!("http://{}/{kind}/{token}", self.address)
    }
}

fn accept_loop(listener: TcpListener, tokens: Arc<Tokens>, config: Arc<Config>) {
    let live = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let mut conn = match conn {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: wait a moment rather than spin.
                eprintln!("rkt-cri: streaming: accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            live.fetch_sub(1, Ordering::SeqCst);
            let _ = conn.write_all(&http::error_response(
                503,
                "Service Unavailable",
                &[],
                "too many streaming connections; try again",
            ));
            continue;
        }
        let (tokens, config, done) = (tokens.clone(), config.clone(), live.clone());
        let spawned = std::thread::Builder::new()
            .name("streaming-conn".into())
            .spawn(move || {
                if let Err(e) = handle(conn, &tokens, &config) {
                    eprintln!("rkt-cri: streaming: {e}");
                }
                done.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One connection: its request head, its token, its transport.
fn handle(mut sock: TcpStream, tokens: &Tokens, config: &Arc<Config>) -> Result<(), String> {
    let peer = sock
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let io_err = |e: io::Error| format!("client {peer}: {e}");
    // Frames are small and written one by one: Nagle's algorithm against the client's
    // delayed ACK would add tens of milliseconds to every exchange.
    sock.set_nodelay(true).map_err(io_err)?;
    sock.set_read_timeout(Some(SETUP_TIMEOUT)).map_err(io_err)?;
    sock.set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(io_err)?;
    let mut buf = Vec::new();
    let (head, used) = loop {
        let mut chunk = [0; 4096];
        let n = sock.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        match RequestHead::parse(&buf) {
            Ok(Some(parsed)) => break parsed,
            Ok(None) => {}
            Err(e) => {
                let _ = sock.write_all(&http::error_response(
                    400,
                    "Bad Request",
                    &[],
                    &format!("bad request head: {e}"),
                ));
                return Err(format!("client {peer}: bad request head: {e}"));
            }
        }
    };
    let rest = buf[used..].to_vec();
    let Some(request) = route(head.path()).and_then(|(kind, token)| tokens.take(kind, token))
    else {
        let _ = sock.write_all(&http::error_response(
            404,
            "Not Found",
            &[],
            "no such streaming session: the URL is unknown, used already, or expired \
             (each Exec, Attach or PortForward URL serves one connection within a minute)",
        ));
        return Ok(());
    };
    let websocket = head
        .field("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    if websocket {
        ws_edge::serve(sock, &head, rest, request, config)
    } else {
        spdy_edge::serve(sock, &head, rest, request, config)
    }
    .map_err(|e| format!("client {peer}: {e}"))
}

/// Starts the backend of an exec or attach on a thread of its own, writing to `out`;
/// returns where the client's input goes (dropping it ends stdin; the backend then
/// finishes on its own).
fn start_backend(
    config: &Arc<Config>,
    request: Request,
    out: Arc<dyn Output>,
) -> Result<SyncSender<Input>, String> {
    let (tx, rx) = sync_channel::<Input>(64);
    let config = Arc::clone(config);
    std::thread::Builder::new()
        .name("streaming-backend".into())
        .spawn(move || run_backend(&config, request, rx, out))
        .map_err(|e| format!("cannot start the session's thread: {e}"))?;
    Ok(tx)
}

fn run_backend(config: &Config, request: Request, rx: Receiver<Input>, out: Arc<dyn Output>) {
    let container =
        |id: &str| crate::container::get(config, id).map_err(|e| e.message().to_string());
    let result = match request {
        Request::Exec {
            container_id,
            cmd,
            streams,
        } => container(&container_id).map(|c| process::exec(&c, cmd, streams, rx, out.clone())),
        Request::Attach {
            container_id,
            streams,
        } => container(&container_id).map(|c| attach::attach(&c, streams, rx, out.clone())),
        Request::PortForward { .. } => Err("a port-forward has no backend of this kind".into()),
    };
    if let Err(e) = result {
        out.finish(&Outcome::Error(e));
    }
}

/// `/<kind>/<token>` of a request's path (which has no query).
fn route(path: &str) -> Option<(&str, &str)> {
    let mut parts = path.strip_prefix('/')?.split('/');
    let (kind, token) = (parts.next()?, parts.next()?);
    parts.next().is_none().then_some((kind, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_kind_then_token() {
        assert_eq!(route("/exec/abc"), Some(("exec", "abc")));
        assert_eq!(route("/exec"), None);
        assert_eq!(route("/exec/abc/more"), None);
        assert_eq!(route("exec/abc"), None);
    }
}
