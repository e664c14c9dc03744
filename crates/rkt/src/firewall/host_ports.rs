//! The host side of `--port`: refusing a host port a host process already serves, and
//! holding the port for the pod's life so that nothing on the host takes it meanwhile.
//!
//! portmap's DNAT (in `PREROUTING` and `OUTPUT`) wins over any socket on the host, so
//! forwarding a port a host service listens on would silently take that service over. As
//! podman (conmon) does, the pod's runner binds a socket of its own to every forwarded host
//! port before the pod exists, and keeps it until the pod's networks are torn down:
//!
//! - TCP: bound, `SO_REUSEADDR` off, not listening. That bind fails when anything listens
//!   on an overlapping address (a wildcard listener overlaps every address), and while it
//!   is held every other bind of the port fails, whatever its options. Connections never
//!   reach it (the DNAT redirects them first; one that escapes is refused, not hung). When
//!   that bind is refused by sockets that do not serve (a connection in `TIME_WAIT` after a
//!   host server stopped), the port is held instead by a socket with `SO_REUSEADDR` that
//!   listens and never accepts, which binds only when nothing listens there.
//! - UDP: bound, `SO_REUSEADDR` off: that fails when any socket is bound to the port on an
//!   overlapping address, and blocks every later bind.
//! - No host address (every address): `0.0.0.0` and `[::]` (IPv6 only, when the host has
//!   IPv6). A host address that is not the host's own (`EADDRNOTAVAIL`) is not held: no
//!   host process can serve it either.
//!
//! The sockets are close-on-exec: the stage and the plugins never get them. When a bind is
//! refused, the holder is looked up (only then) in `/proc/net/{tcp,tcp6,udp,udp6}`, and
//! its socket's inode in `/proc/*/fd`, so the error names the process.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::socket::{
    bind, listen, setsockopt, socket, sockopt, AddressFamily, Backlog, SockFlag, SockType,
    SockaddrIn, SockaddrIn6,
};

use super::ports::{PortError, PortMapping, PortsLock, Protocol};

/// The sockets that hold a pod's forwarded host ports; dropping it frees the ports. It may
/// also carry the ports lock under which they were checked, for the pod's setup to keep
/// until the pod's record names its ports ([`HostPorts::take_lock`]).
#[derive(Debug, Default)]
pub struct HostPorts {
    sockets: Vec<OwnedFd>,
    lock: Option<PortsLock>,
}

impl HostPorts {
    /// `self` with the ports lock held since the check of other pods' ports.
    pub fn with_lock(mut self, lock: PortsLock) -> HostPorts {
        self.lock = Some(lock);
        self
    }

    /// The ports lock, for the setup that writes the pod's record.
    pub fn take_lock(&mut self) -> Option<PortsLock> {
        self.lock.take()
    }

    /// How many sockets are held (two for a mapping on every address of a host with IPv6).
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    /// Whether no socket is held (no `--port`).
    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }
}

/// Binds and holds every host port of `ports` (see the module's doc). Fails on the first
/// port the host already serves, naming it, its protocol and what holds it; the ports held
/// so far are freed.
pub fn reserve(ports: &[PortMapping]) -> Result<HostPorts, PortError> {
    let mut held = HostPorts::default();
    for m in ports {
        for addr in host_addrs(m) {
            match hold(m.protocol, addr) {
                Ok(fd) => held.sockets.push(fd),
                // Not an address of this host (or no IPv6 here): nothing can serve it.
                Err(Errno::EADDRNOTAVAIL | Errno::EAFNOSUPPORT) => {}
                Err(Errno::EADDRINUSE) => {
                    return Err(PortError::InUse {
                        port: m.flag_value(),
                        host_side: m.host_side(),
                        holder: holder(m.protocol, addr),
                    })
                }
                Err(errno) => {
                    return Err(PortError::Reserve {
                        port: m.flag_value(),
                        host_side: m.host_side(),
                        source: errno,
                    })
                }
            }
        }
    }
    Ok(held)
}

/// The addresses a mapping's host port is held on.
fn host_addrs(m: &PortMapping) -> Vec<SocketAddr> {
    match m.host_ip {
        Some(ip) => vec![SocketAddr::new(ip, m.host_port)],
        None => vec![
            SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), m.host_port),
            SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), m.host_port),
        ],
    }
}

/// A close-on-exec socket of `protocol` bound to `addr` (IPv6 only for an IPv6 address),
/// `SO_REUSEADDR` as `reuse` says.
fn bound(protocol: Protocol, addr: SocketAddr, reuse: bool) -> Result<OwnedFd, Errno> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let ty = match protocol {
        Protocol::Tcp => SockType::Stream,
        Protocol::Udp => SockType::Datagram,
    };
    let fd = socket(family, ty, SockFlag::SOCK_CLOEXEC, None)?;
    if addr.is_ipv6() {
        setsockopt(&fd, sockopt::Ipv6V6Only, &true)?;
    }
    if reuse {
        setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    }
    match addr {
        SocketAddr::V4(a) => bind(fd.as_raw_fd(), &SockaddrIn::from(a))?,
        SocketAddr::V6(a) => bind(fd.as_raw_fd(), &SockaddrIn6::from(a))?,
    }
    Ok(fd)
}

/// The socket that holds `addr` for `protocol` (see the module's doc).
fn hold(protocol: Protocol, addr: SocketAddr) -> Result<OwnedFd, Errno> {
    match bound(protocol, addr, false) {
        Err(Errno::EADDRINUSE) if protocol == Protocol::Tcp => {
            // Taken by sockets that may not serve (TIME_WAIT): a listener binds only when
            // none of them listens, and then blocks every other bind.
            let fd = bound(protocol, addr, true)?;
            listen(&fd, Backlog::new(1)?)?;
            Ok(fd)
        }
        other => other,
    }
}

/// One socket of `/proc/net/{tcp,udp}{,6}`.
#[derive(Debug, PartialEq, Eq)]
struct ProcSocket {
    local: SocketAddr,
    /// `0A` is TCP's LISTEN.
    state: u8,
    inode: u64,
}

/// A line of `/proc/net/tcp` (and the others), `None` for the header or a bad line.
fn parse_line(line: &str) -> Option<ProcSocket> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (addr, port) = fields.get(1)?.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    // Each 32-bit word is printed as the kernel holds it: in network order, read natively.
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip: IpAddr = match addr.len() {
        8 => Ipv4Addr::from(word(0)?).into(),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Ipv6Addr::from(bytes).into()
        }
        _ => return None,
    };
    Some(ProcSocket {
        local: SocketAddr::new(ip, port),
        state: u8::from_str_radix(fields.get(3)?, 16).ok()?,
        inode: fields.get(9)?.parse().ok()?,
    })
}

/// Whether sockets on `a` and `b` (same port) would clash: equal, one a wildcard, or one
/// the IPv4-mapped form of the other.
fn overlaps(a: IpAddr, b: IpAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    a.is_unspecified() || b.is_unspecified() || plain(a) == plain(b)
}

/// What holds `addr` for `protocol`: `process 1234 (busybox), listening on 127.0.0.1:8082`,
/// or `a socket of another process` when it cannot be told.
fn holder(protocol: Protocol, addr: SocketAddr) -> String {
    let (files, doing) = match protocol {
        Protocol::Tcp => (["/proc/net/tcp", "/proc/net/tcp6"], "listening"),
        Protocol::Udp => (["/proc/net/udp", "/proc/net/udp6"], "bound"),
    };
    let candidates: Vec<ProcSocket> = files
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .flat_map(|text| text.lines().filter_map(parse_line).collect::<Vec<_>>())
        .filter(|s| s.local.port() == addr.port() && overlaps(s.local.ip(), addr.ip()))
        .filter(|s| protocol == Protocol::Udp || s.state == 0x0A)
        .collect();
    for s in &candidates {
        if let Some((pid, comm)) = process_of(s.inode) {
            return format!("process {pid} ({comm}), {doing} on {}", s.local);
        }
    }
    "a socket of another process".to_string()
}

/// The process (PID and command name) with a descriptor of the socket `inode`.
fn process_of(inode: u64) -> Option<(i32, String)> {
    let link = format!("socket:[{inode}]");
    for pid in crate::procfs::pids() {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let has = fds
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == link.as_str()));
        if has {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            return Some((pid, comm.trim().to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};

    fn p(s: &str) -> PortMapping {
        PortMapping::parse(s).unwrap()
    }

    #[test]
    fn proc_net_lines_parse() {
        let v4 = "   0: 0100007F:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0";
        assert_eq!(
            parse_line(v4),
            Some(ProcSocket {
                local: "127.0.0.1:8082".parse().unwrap(),
                state: 0x0A,
                inode: 12345
            })
        );
        let v6 = "   1: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 777 2 0000000000000000 0";
        assert_eq!(
            parse_line(v6).unwrap().local,
            "[::1]:53".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            parse_line("  sl  local_address rem_address   st tx_queue"),
            None
        );
    }

    #[test]
    fn addresses_overlap_through_wildcards_and_mapped_forms() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(overlaps(ip("0.0.0.0"), ip("127.0.0.1")));
        assert!(overlaps(ip("127.0.0.1"), ip("::")));
        assert!(overlaps(ip("::ffff:127.0.0.1"), ip("127.0.0.1")));
        assert!(!overlaps(ip("127.0.0.2"), ip("127.0.0.1")));
    }

    #[test]
    fn a_port_a_process_serves_is_refused_naming_the_process() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        for flag in [format!("{port}:80"), format!("127.0.0.1:{port}:80")] {
            let e = reserve(&[p(&flag)]).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, PortError::InUse { .. }), "{e:?}");
            assert!(text.contains("tcp:"), "{text}");
            assert!(
                text.contains(&format!("process {} (", std::process::id())),
                "{text}"
            );
            assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        }
        // Another address of the same port is free, and UDP is another port.
        reserve(&[p(&format!("127.0.0.2:{port}:80"))]).unwrap();
        reserve(&[p(&format!("{port}:80/udp"))]).unwrap();
    }

    #[test]
    fn a_bound_udp_port_is_refused() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        let e = reserve(&[p(&format!("{port}:53/udp"))]).unwrap_err();
        assert!(e.to_string().contains(&format!("udp:{port}")), "{e}");
        assert!(e.to_string().contains("bound on 127.0.0.1"), "{e}");
    }

    #[test]
    fn a_held_port_cannot_be_bound_until_freed() {
        let free = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let held = reserve(&[p(&format!("{port}:80")), p(&format!("{port}:53/udp"))]).unwrap();
        assert!(!held.is_empty());
        assert!(TcpListener::bind(("127.0.0.1", port)).is_err());
        assert!(TcpListener::bind(("0.0.0.0", port)).is_err());
        assert!(UdpSocket::bind(("127.0.0.1", port)).is_err());
        // Not listening: a connection that escaped the DNAT is refused, not left hanging.
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
        drop(held);
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    #[test]
    fn a_port_left_in_time_wait_is_still_held() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (conn, _) = server.accept().unwrap();
        drop(conn); // the server side closes first: its end waits in TIME_WAIT
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(client);
        drop(server);
        // Until the close has settled: nothing on the port but TIME_WAIT (state 06), which
        // takes a moment on a loaded machine.
        let local = format!(":{port:04X} ");
        for _ in 0..300 {
            let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
            let busy = table.lines().skip(1).any(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                fields.len() > 3 && format!("{} ", fields[1]).ends_with(&local) && fields[3] != "06"
            });
            if !busy {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let held = reserve(&[p(&format!("127.0.0.1:{port}:80"))]).unwrap();
        assert_eq!(held.len(), 1);
        assert!(TcpListener::bind(("127.0.0.1", port)).is_err());
    }
}
