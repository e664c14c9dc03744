//! Helpers of the tests that run pods (`pod/`, `cli/`, `isolation/`, ...), beside the
//! temporary rkt world of `test-kit` (`support::World`): a host directory shared with a
//! pod, the pod's namespace, cgroup, leases and mounts as the host sees them, a tiny root
//! filesystem, forwarded ports, the escape probe.

#![allow(dead_code)] // Each test file uses its own subset.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[allow(unused_imports)] // Each test binary uses its own subset.
pub use crate::support::World;
use test_kit::{wait_for, PATIENCE};

/// Directory `dir` of the host shared with a host-command pod at the same path: the pod
/// option `--volume=NAME,kind=host,source=DIR` and the app option
/// `--mount=volume=NAME,target=DIR` (given to each app that uses it). A host-command pod
/// sees the host's tree read-only, with a /tmp of its own: this is how it writes where a
/// test reads, or reads what a test wrote under its temporary directory.
pub fn shared_dir(name: &str, dir: &Path) -> (String, String) {
    (
        format!("--volume={name},kind=host,source={}", dir.display()),
        format!("--mount=volume={name},target={}", dir.display()),
    )
}

/// A directory `<world>/<name>` made for the test and shared with a host-command pod at the
/// same path ([`shared_dir`]): the directory, the pod option and the app option.
pub fn shared_dir_in(world: &World, name: &str) -> (PathBuf, String, String) {
    let dir = world.path(name);
    fs::create_dir(&dir).unwrap();
    let (volume, mount) = shared_dir(name, &dir);
    (dir, volume, mount)
}

/// `/run/netns/rkt-<uuid>`.
pub fn netns_path(uuid: &str) -> PathBuf {
    rkt::netns::pod_netns_path(uuid)
}

/// Asserts that the pod left no network namespace behind.
pub fn assert_no_netns(uuid: &str) {
    let path = netns_path(uuid);
    assert!(!path.exists(), "{} was left behind", path.display());
}

/// The pod's cgroup directory of `controller` (v1) or of the unified hierarchy (v2), where
/// its record (`rkt status --format=json`'s `cgroups`) says it is: below the cgroup of the
/// process that ran the pod, which need not be a hierarchy's root.
pub fn pod_cgroup(world: &World, controller: &str, uuid: &str) -> PathBuf {
    let root = Path::new("/sys/fs/cgroup");
    let status = world.status_json(uuid);
    let v2 = root.join("cgroup.controllers").exists();
    let key = if v2 { "unified" } else { controller };
    let path = status["cgroups"][key]
        .as_str()
        .unwrap_or_else(|| panic!("pod {uuid} records no {key} cgroup: {status}"));
    let base = if v2 {
        root.to_path_buf()
    } else {
        root.join(controller)
    };
    base.join(path.trim_start_matches('/'))
}

/// Waits until process `pid` (a pod's init) is gone.
pub fn wait_gone(pid: i64) {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    wait_for("the pod's init to end", PATIENCE, || {
        (!proc.exists()).then_some(())
    });
}

/// Makes a tiny root filesystem at `dir`: /bin/sh, /bin/cat and /bin/sleep with the libraries they load
/// (found with ldd), empty /etc, /proc, /sys and /tmp.
pub fn tiny_rootfs(dir: &Path) {
    for d in ["bin", "etc", "proc", "sys", "tmp"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    for bin in ["/bin/sh", "/bin/cat", "/bin/sleep"] {
        let real = fs::canonicalize(bin).unwrap();
        fs::copy(&real, dir.join(bin.trim_start_matches('/'))).unwrap();
        let ldd = Command::new("ldd").arg(&real).output().unwrap();
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            let lib = line
                .split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(PathBuf::from);
            if let Some(lib) = lib {
                let dest = dir.join(lib.strip_prefix("/").unwrap());
                fs::create_dir_all(dest.parent().unwrap()).unwrap();
                if !dest.exists() {
                    fs::copy(fs::canonicalize(&lib).unwrap(), &dest).unwrap();
                }
            }
        }
    }
}

/// Asserts that host-local holds no address for the pod in network `net` (its lease files
/// under /var/lib/cni/networks/<net>/ name the container ID, which is the pod UUID).
pub fn assert_no_lease(net: &str, uuid: &str) {
    let dir = Path::new("/var/lib/cni/networks").join(net);
    let Ok(entries) = fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        assert!(
            !text.contains(uuid),
            "{} still leases an address to pod {uuid}",
            entry.path().display()
        );
    }
}

/// Mount points at or below `dir`, from this process's mountinfo.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| Path::new(m).starts_with(&dir))
        .map(str::to_string)
        .collect()
}

/// `GET <path>` from 127.0.0.1:`port` (a pod's forwarded port), retried until a `200 OK`
/// comes back; the whole response.
pub fn http_get_forwarded(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    wait_for("a 200 OK through the forwarded port", PATIENCE, || {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        conn.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
            .ok()?;
        let mut got = String::new();
        conn.read_to_string(&mut got).ok()?;
        got.contains("200 OK").then_some(got)
    })
}

/// The escape probe (`crates/escape-probe`), built once per test process.
pub fn escape_probe() -> PathBuf {
    test_kit::workspace_bin("escape-probe")
}

/// A host port for a test to forward, kept from other tests (of any process) while the value
/// lives: a TCP socket bound to it on every address with `SO_REUSEADDR`, not listening. No
/// other socket can then listen there or be handed the port, yet the port is not in use (it
/// serves nothing), so rkt forwards it: its hold on the port, a listener with `SO_REUSEADDR`
/// when a plain bind is refused, binds beside this socket (see `firewall/host_ports.rs`).
pub struct HeldPort {
    pub port: u16,
    _socket: std::os::fd::OwnedFd,
}

pub fn held_port() -> HeldPort {
    use nix::sys::socket::{
        bind, getsockname, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType,
        SockaddrIn,
    };
    use std::os::fd::AsRawFd;
    let socket = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    setsockopt(&socket, sockopt::ReuseAddr, &true).unwrap();
    bind(socket.as_raw_fd(), &SockaddrIn::new(0, 0, 0, 0, 0)).unwrap();
    let addr: SockaddrIn = getsockname(socket.as_raw_fd()).unwrap();
    HeldPort {
        port: addr.port(),
        _socket: socket,
    }
}

/// A network of its own whose plugin (the test plugin, as `slowplug`) takes `sleep_ms` to
/// ADD, configured in directories of `world`'s: to catch a pod while its network is being
/// set up. Its name, the plugin's call log, and the `--net-conf-dir` and `--net-plugin-dir`
/// flags that reach it.
pub struct SlowNet {
    pub name: String,
    pub log: PathBuf,
    pub conf_flag: String,
    pub plugin_flag: String,
}

pub fn slow_net(world: &World, sleep_ms: u64) -> SlowNet {
    let plugins = world.path("plugins");
    let confs = world.path("confs");
    fs::create_dir_all(&plugins).unwrap();
    fs::create_dir_all(&confs).unwrap();
    std::os::unix::fs::symlink(crate::support::test_plugin(), plugins.join("slowplug")).unwrap();
    let log = world.path("calls.jsonl");
    let name = format!("slow-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": name,
        "type": "slowplug",
        "testPlugin": {"log": log, "ADD": {"sleep_ms": sleep_ms}}
    });
    fs::write(confs.join("10-slow.conf"), conf.to_string()).unwrap();
    SlowNet {
        name,
        log,
        conf_flag: format!("--net-conf-dir={}", confs.display()),
        plugin_flag: format!("--net-plugin-dir={}", plugins.display()),
    }
}
