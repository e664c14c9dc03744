//! Helpers of the pod tests (`pod_*.rs`): a temporary rkt world (data directory and
//! configuration directories of its own, so no test touches /var/lib/rkt or /etc/rkt),
//! background pods, and the check that nothing is left on the host (with the leak checker,
//! `tests/leaks`, which every file using this module also declares).

#![allow(dead_code)] // Each test file uses its own subset.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::leaks;
use crate::support::{rkt, Rkt};

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

/// Whether the tests run as root; pods need it.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Returns early from a test (with a note) when not root.
#[macro_export]
macro_rules! require_root {
    () => {
        if !pod_support::is_root() {
            eprintln!("skipping: running pods needs root");
            return;
        }
    };
}

/// A temporary rkt installation: data dir, an empty local and system configuration.
/// Dropping it stops its pods, runs gc, and deletes any namespace they left.
pub struct World {
    pub root: tempfile::TempDir,
    /// Background `rkt run`s, by index; `None` once waited for.
    background: Vec<Option<Child>>,
}

impl World {
    pub fn new() -> World {
        World::new_in(&std::env::temp_dir())
    }

    /// A world outside `/tmp`, under cargo's temporary directory for tests: a
    /// host-command pod has a `/tmp` of its own, which would hide the world's directories,
    /// so a test of what such a pod sees of the host's directories keeps them here.
    pub fn off_tmp() -> World {
        World::new_in(Path::new(env!("CARGO_TARGET_TMPDIR")))
    }

    /// A world in a temporary directory under `parent`.
    pub fn new_in(parent: &Path) -> World {
        fs::create_dir_all(parent).unwrap();
        let root = tempfile::tempdir_in(parent).unwrap();
        for d in ["data", "local", "system"] {
            fs::create_dir(root.path().join(d)).unwrap();
        }
        World {
            root,
            background: Vec::new(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn global_args(&self) -> Vec<String> {
        vec![
            format!("--dir={}", self.path("data").display()),
            format!("--local-config={}", self.path("local").display()),
            format!("--system-config={}", self.path("system").display()),
        ]
    }

    /// `rkt <global options of this world> <args>`.
    pub fn rkt(&self, args: &[&str]) -> Rkt {
        rkt(&self.global_args()).args(args)
    }

    /// What the leak checker may blame on this world: every pod in its data dir. Tests add
    /// the networks (`shared_network("default")`) and subnets their pods use.
    pub fn leak_ctx(&self) -> leaks::Ctx {
        leaks::Ctx::new(self.path("data"))
    }

    /// A plain `Command` for the same, for stdin or background use.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rkt"));
        cmd.args(self.global_args()).args(args);
        cmd
    }

    /// `rkt <args>` with `input` written to its stdin (then closed), run to completion.
    pub fn output_with_stdin(&self, args: &[&str], input: &str) -> std::process::Output {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// `rkt run --uuid-file-save=… <args>` in the foreground: its outcome and the new pod's
    /// UUID (empty when no pod was made).
    pub fn run_uuid(&self, args: &[&str]) -> (crate::support::Outcome, String) {
        let file = self.path("uuid-fg");
        let _ = fs::remove_file(&file);
        let save = format!("--uuid-file-save={}", file.display());
        let mut full = vec!["run", save.as_str()];
        full.extend_from_slice(args);
        let out = self.rkt(&full).run();
        (out, fs::read_to_string(&file).unwrap_or_default())
    }

    /// Starts `rkt run <args>` in the background, saving the UUID; returns (uuid, index).
    pub fn spawn_run(&mut self, args: &[&str]) -> (String, usize) {
        let uuid_file = self.path(&format!("uuid-bg-{}", self.background.len()));
        let mut full = vec![
            "run".to_string(),
            format!("--uuid-file-save={}", uuid_file.display()),
        ];
        full.extend(args.iter().map(|s| s.to_string()));
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        let child = self
            .command(&full)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.background.push(Some(child));
        let index = self.background.len() - 1;
        let uuid = wait_for(|| {
            fs::read_to_string(&uuid_file)
                .ok()
                .filter(|s| !s.is_empty())
        });
        (uuid, index)
    }

    /// The background `rkt run` number `index`.
    pub fn child(&mut self, index: usize) -> &mut Child {
        self.background[index].as_mut().expect("already waited for")
    }

    /// Waits for background run `index` to end; returns its exit code and stderr.
    pub fn wait_child(&mut self, index: usize) -> (Option<i32>, String) {
        let child = self.background[index].take().expect("already waited for");
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `rkt status --format=json <uuid>`.
    pub fn status_json(&self, uuid: &str) -> Value {
        let out = self.rkt(&["status", "--format=json", uuid]).run();
        out.assert_success();
        out.json()
    }

    /// Waits until the pod runs its app (state running, init PID known).
    pub fn wait_running(&self, uuid: &str) -> i64 {
        wait_for(|| {
            let st = self.status_json(uuid);
            (st["state"] == "running")
                .then(|| st["pid"].as_i64())
                .flatten()
        })
    }

    /// The UUIDs of the pods in this world's store.
    pub fn pods(&self) -> Vec<String> {
        match fs::read_dir(self.path("data/pods")) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for child in self.background.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let uuids = self.pods();
        let _ = self
            .command(&["gc", "--grace-period=0s", "--expire-prepared=0s"])
            .output();
        for uuid in uuids {
            let _ = rkt::netns::delete(&netns_path(&uuid));
        }
    }
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

/// The pod's cgroup directory of `controller` (v1) or of the unified hierarchy (v2).
pub fn pod_cgroup(controller: &str, uuid: &str) -> PathBuf {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        root.join("rkt").join(uuid)
    } else {
        root.join(controller).join("rkt").join(uuid)
    }
}

/// Polls `f` until it returns something (every 50 ms, for at most 60 s, then panics: a
/// deadline for a hung test, not a timing assertion).
pub fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up waiting");
        std::thread::sleep(Duration::from_millis(50));
    }
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
    wait_for(|| {
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
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let status = Command::new(env!("CARGO"))
                .args(["build", "-q", "-p", "escape-probe"])
                .status()
                .expect("run cargo build for escape-probe");
            assert!(status.success(), "cargo build -p escape-probe failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
            let bin = target.join("debug/escape-probe");
            assert!(bin.is_file(), "no escape probe at {}", bin.display());
            bin
        })
        .clone()
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
