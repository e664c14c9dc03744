//! DHCP for the multi-host tests: Debian's `dnsmasq` as the LAN's DHCP server (in the LAN
//! namespace, bound to its bridge only, DNS off, its own lease and pid files) and the CNI
//! `dhcp` daemon of one host (`dhcp daemon -socketpath <host dir>/dhcp.sock`, which the
//! host's networks name in `ipam.daemonSocketPath`). Both are started as a user starts them,
//! waited for by polling until they serve, and killed on drop.

use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{Host, Lan};
use test_kit::{wait_for, KillOnDrop};

/// Where distributions install the CNI plugins (and so the `dhcp` daemon).
pub const CNI_DHCP: &str = "/usr/lib/cni/dhcp";

/// The addresses dnsmasq hands out.
pub const DHCP_POOL: &str = "192.0.2.128/26";

/// dnsmasq serving DHCP on the LAN's bridge: addresses `192.0.2.128`-`192.0.2.191` ([`DHCP_POOL`]).
pub struct Dnsmasq {
    _process: KillOnDrop,
    pub dir: tempfile::TempDir,
}

impl Dnsmasq {
    pub fn start(lan: &Lan) -> Dnsmasq {
        let dir = tempfile::tempdir().unwrap();
        let out = fs::File::create(dir.path().join("output")).unwrap();
        let child = lan
            .netns
            .command("dnsmasq")
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null", // not the host's /etc/dnsmasq.conf
                "--port=0",              // no DNS
                "--no-resolv",
                "--no-hosts",
                "--interface=br0",
                "--bind-interfaces",
                "--dhcp-range=192.0.2.128,192.0.2.191,255.255.255.0,10m",
                "--dhcp-authoritative",
                "--no-ping", // offer at once, without probing the address first
                "--log-dhcp",
                "--user=root",
                "--group=root",
            ])
            .arg(format!(
                "--dhcp-leasefile={}",
                dir.path().join("leases").display()
            ))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-facility={}",
                dir.path().join("log").display()
            ))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start dnsmasq (apt-get install dnsmasq-base)");
        let dnsmasq = Dnsmasq {
            _process: KillOnDrop(child),
            dir,
        };
        wait_for("dnsmasq to serve DHCP", Duration::from_secs(10), || {
            dnsmasq.log().contains("DHCP, IP range").then_some(())
        });
        dnsmasq
    }

    /// dnsmasq's log so far (and what it printed, such as why it could not start).
    pub fn log(&self) -> String {
        let log = fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
        let output = fs::read_to_string(self.dir.path().join("output")).unwrap_or_default();
        log + &output
    }

    /// Polls (every 20 ms, at most 10 s) until `done` holds for the server's state; dnsmasq
    /// writes its log and lease file a little after it answers, so tests wait for them. On
    /// timeout, panics showing `what` and the log.
    pub fn wait_until(&self, what: &str, done: impl Fn(&Dnsmasq) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done(self) {
            assert!(
                std::time::Instant::now() < deadline,
                "dnsmasq: gave up waiting for {what}; leases {:?}, log:\n{}",
                self.leased(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The addresses in the lease file now (`<expiry> <mac> <ip> <hostname> <client id>`
    /// lines).
    pub fn leased(&self) -> Vec<Ipv4Addr> {
        fs::read_to_string(self.dir.path().join("leases"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2)?.parse().ok())
            .collect()
    }
}

/// The CNI `dhcp` daemon of one host, listening on `<host dir>/dhcp.sock`. The process
/// belongs to the host, which kills it once its pods are gone.
pub struct DhcpDaemon {
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl DhcpDaemon {
    /// Starts `dhcp daemon` inside `host`'s namespace and waits until its socket accepts.
    pub fn start(host: &mut Host) -> DhcpDaemon {
        let socket = Self::socket_of(host);
        let log = host.path("dhcp-daemon.log");
        let out = fs::File::create(&log).unwrap();
        let child = host
            .netns
            .command(CNI_DHCP)
            .arg("daemon")
            .arg("-socketpath")
            .arg(&socket)
            .arg("-pidfile")
            .arg(host.path("dhcp-daemon.pid"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start the CNI dhcp daemon");
        host.services.push(Box::new(KillOnDrop(child)));
        let daemon = DhcpDaemon { socket, log };
        wait_for("the dhcp daemon's socket", Duration::from_secs(10), || {
            UnixStream::connect(&daemon.socket).ok().map(drop)
        });
        daemon
    }

    /// The socket path host `host`'s daemon listens on.
    pub fn socket_of(host: &Host) -> PathBuf {
        host.path("dhcp.sock")
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Whether `path` exists (for the socket left behind checks).
pub fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}
