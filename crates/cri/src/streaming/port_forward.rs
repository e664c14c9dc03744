//! Port-forward's backend: where a pod's port is dialled and how bytes cross.
//!
//! A pod with a network of its own is reached at `127.0.0.1:PORT` inside its network
//! namespace: the socket is made on a short-lived thread that entered the namespace (setns
//! is per thread, and the socket keeps the namespace it was made in), so the server's
//! threads never change namespace. A pod in the host's network is dialled on the host.

use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use rkt::netns::NetnsGuard;

use crate::options::Config;

/// How long a dial may take (a pod's loopback answers at once, or refuses).
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a sandbox's ports are.
#[derive(Clone, Debug)]
pub enum Target {
    Host,
    Netns(PathBuf),
}

impl Target {
    /// The target of sandbox `id`, which must be ready.
    pub fn of(config: &Config, id: &str) -> Result<Target, String> {
        let s = crate::sandbox::get(config, id).map_err(|e| e.message().to_string())?;
        if !s.ready() {
            return Err(format!("pod sandbox {id} is not ready"));
        }
        if s.meta.network == "host" {
            return Ok(Target::Host);
        }
        s.status
            .record
            .netns
            .clone()
            .map(Target::Netns)
            .ok_or_else(|| format!("pod sandbox {id} has no network namespace"))
    }

    /// A connection to `port` on the pod's loopback.
    pub fn dial(&self, port: u16) -> io::Result<TcpStream> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let conn = match self {
            Target::Host => TcpStream::connect_timeout(&addr, DIAL_TIMEOUT)?,
            Target::Netns(path) => {
                let path = path.clone();
                std::thread::spawn(move || {
                    let _inside = NetnsGuard::enter(&path)
                        .map_err(|e| io::Error::other(rkt::error::chain(&e)))?;
                    TcpStream::connect_timeout(&addr, DIAL_TIMEOUT)
                })
                .join()
                .map_err(|_| io::Error::other("the dialling thread failed"))??
            }
        };
        conn.set_nodelay(true)?;
        Ok(conn)
    }
}

/// One forwarded connection: dials `port` of `target` (whose error, when there is no
/// target, is the reason) and copies what the pod sends to `send` on a thread of its own
/// ([`pump_from_pod`], then `end`). Returns the connection the client's bytes are written
/// to, or the message for the client's error stream.
pub fn forward(
    target: &Result<Target, String>,
    port: u16,
    send: impl FnMut(&[u8]) -> bool + Send + 'static,
    end: impl FnOnce() + Send + 'static,
) -> Result<TcpStream, String> {
    let opened = target.as_ref().map_err(Clone::clone).and_then(|t| {
        let pod = t.dial(port).map_err(|e| e.to_string())?;
        // A pod that stops reading does not hold the client's session forever.
        pod.set_write_timeout(Some(super::WRITE_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let reader = pod.try_clone().map_err(|e| e.to_string())?;
        Ok((pod, reader))
    });
    let (pod, reader) =
        opened.map_err(|e| format!("error forwarding port {port} to the pod: {e}"))?;
    std::thread::spawn(move || pump_from_pod(reader, send, end));
    Ok(pod)
}

/// Copies what the pod's side sends to `send` until it ends or `send` fails, then calls
/// `end`.
pub fn pump_from_pod(mut conn: TcpStream, mut send: impl FnMut(&[u8]) -> bool, end: impl FnOnce()) {
    let mut buf = vec![0; 64 << 10];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if !send(&buf[..n]) {
                    break;
                }
            }
        }
    }
    // Both ways end: the client's side is gone or the pod's is.
    let _ = conn.shutdown(Shutdown::Read);
    end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_target_dials_the_hosts_loopback() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let conn = Target::Host.dial(port).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(conn.local_addr().unwrap(), accepted.peer_addr().unwrap());
        drop(listener);
        let refused = Target::Host.dial(port).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    }
}
