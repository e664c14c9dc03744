//! The traffic probe of the multi-host tests: TCP and UDP listeners opened by the test inside
//! a pod's network namespace (a socket stays in the namespace it was made in), and the
//! client side as a pod's own app, a `bash` one-liner writing to `/dev/tcp` and `/dev/udp`.
//! The listeners report the peer's address, so a test sees that no NAT happened.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use super::in_netns;

/// A TCP and a UDP socket listening on `port` of every address of a pod.
pub struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
    pub port: u16,
}

/// Opens the listeners inside the network namespace at `netns` (a pod's).
pub fn listen(netns: &Path, port: u16) -> Listeners {
    let (tcp, udp) = in_netns(netns, move || {
        let tcp = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).expect("bind TCP");
        let udp = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).expect("bind UDP");
        (tcp, udp)
    });
    tcp.set_nonblocking(true).unwrap();
    Listeners { tcp, udp, port }
}

/// What a listener received: the sender's address and the payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Received {
    pub from: IpAddr,
    pub payload: String,
}

impl Listeners {
    /// Waits (at most `limit`) for one TCP connection and reads what it sends until EOF.
    pub fn tcp(&self, limit: Duration) -> Received {
        let deadline = Instant::now() + limit;
        let (mut stream, peer) = loop {
            match self.tcp.accept() {
                Ok(conn) => break conn,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    assert!(
                        Instant::now() < deadline,
                        "no TCP connection on port {}",
                        self.port
                    );
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(limit)).unwrap();
        let mut payload = String::new();
        stream
            .read_to_string(&mut payload)
            .expect("read TCP payload");
        Received {
            from: peer.ip(),
            payload: payload.trim().to_string(),
        }
    }

    /// Waits (at most `limit`) for one UDP datagram.
    pub fn udp(&self, limit: Duration) -> Received {
        self.udp.set_read_timeout(Some(limit)).unwrap();
        let mut buf = [0u8; 512];
        let (n, peer) = self
            .udp
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("no UDP datagram on port {}: {e}", self.port));
        Received {
            from: peer.ip(),
            payload: String::from_utf8_lossy(&buf[..n]).trim().to_string(),
        }
    }
}

/// The command line of a pod app that sends `tag` to each of `targets` on `port`: first by
/// TCP, then (neighbours resolved by then) twice by UDP; bounded by `timeout 10`. The app
/// fails if a TCP connection fails.
pub fn sender_app(tag: &str, targets: &[Ipv4Addr], port: u16) -> Vec<String> {
    let mut script = String::from("set -e");
    for ip in targets {
        script.push_str(&format!("; echo {tag} > /dev/tcp/{ip}/{port}"));
    }
    for ip in targets {
        for _ in 0..2 {
            script.push_str(&format!("; echo {tag} > /dev/udp/{ip}/{port}"));
        }
    }
    ["timeout", "10", "bash", "-c", &script]
        .iter()
        .map(|s| s.to_string())
        .collect()
}
