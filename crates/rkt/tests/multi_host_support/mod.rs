//! Simulated hosts for the multi-host tests (`multi_host.rs`): a "LAN" network namespace
//! holding a bridge, and hosts that are network namespaces with one veth on that bridge,
//! each running the real `rkt` binary with its own `--dir`, `--local-config` and network
//! configuration, and checked by the leak checker from inside its namespace.
//!
//! How `rkt` runs "on" a simulated host: its process enters the host's network namespace
//! with `setns(CLONE_NEWNET)` between fork and exec and keeps the test's mount namespace.
//! Not `ip netns exec`: that also unshares the mount namespace (to remount `/sys`), so the
//! bind mount rkt makes for a pod's namespace at `/run/netns/rkt-<uuid>` would exist only
//! inside that one command's mount namespace, and a later `rkt gc`, or the CNI `dhcp`
//! daemon opening the pod's namespace by path, would find an empty file. Nothing of this
//! concerns real machines, where each host has its own everything.
//!
//! Everything made here is removed on drop, also when the test fails: pods are stopped and
//! collected, then the namespaces deleted (the LAN last: its bridge ports die with the
//! hosts' veths).

#![allow(dead_code)] // Each test uses its own subset.

pub mod dhcp;
pub mod probe;
pub mod routed;

use std::ffi::CString;
use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::leaks;
use crate::support::{self, Outcome, Rkt, RKT};
use test_kit::{unique, wait_for};

/// Makes `cmd` enter the network namespace at `path` after fork, before exec (only the
/// network namespace: the mount namespace stays the test's).
pub fn enter_netns(cmd: &mut Command, path: &Path) {
    let c_path = CString::new(path.as_os_str().as_bytes()).expect("netns path without NUL");
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; open(2),
    // setns(2) and close(2) are, and the path was allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(c_path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let rc = libc::setns(fd, libc::CLONE_NEWNET);
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if rc != 0 {
                return Err(err);
            }
            Ok(())
        });
    }
}

/// Runs `f` on a thread of its own inside the network namespace at `path` (sockets made
/// there stay in that namespace) and returns what it returns; a panic in `f` is re-raised.
pub fn in_netns<T: Send + 'static>(path: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = path.to_path_buf();
    let joined = std::thread::spawn(move || {
        let _inside = rkt::netns::NetnsGuard::enter(&path)
            .unwrap_or_else(|e| panic!("cannot enter {}: {e}", path.display()));
        f()
    })
    .join();
    match joined {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// A network namespace named `name` (at `/run/netns/<name>`, where `ip -n` finds it),
/// deleted with all its interfaces on drop.
pub struct Netns {
    pub name: String,
    pub path: PathBuf,
}

impl Netns {
    pub fn new(name: &str) -> Netns {
        let path = Path::new(rkt::netns::NETNS_RUN_DIR).join(name);
        rkt::netns::create(&path).unwrap_or_else(|e| panic!("creating netns {name}: {e}"));
        Netns {
            name: name.to_string(),
            path,
        }
    }

    /// `ip -n <name> <args>`, which must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        let out = Command::new("ip")
            .arg("-n")
            .arg(&self.name)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run ip");
        assert!(
            out.status.success(),
            "ip -n {} {}: {}",
            self.name,
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sets a sysctl under `/proc/sys/net` (per network namespace) inside this namespace.
    pub fn sysctl(&self, key: &str, value: &str) {
        let file = Path::new("/proc/sys").join(key.replace('.', "/"));
        let value = value.to_string();
        in_netns(&self.path, move || {
            fs::write(&file, value).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        });
    }

    /// A command that runs inside this namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        enter_netns(&mut cmd, &self.path);
        cmd
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = rkt::netns::delete_interfaces(&self.path);
        let _ = rkt::netns::delete(&self.path);
    }
}

/// The simulated LAN: a namespace with bridge `br0`, to which hosts attach. The LAN itself
/// has address `192.0.2.1` (the DHCP server's; a documentation range, RFC 5737).
pub struct Lan {
    pub prefix: String,
    pub netns: Netns,
}

/// The LAN's own address (the DHCP server's).
pub const LAN_SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

impl Lan {
    /// A LAN whose namespaces are all named `mh<id>-*`.
    pub fn new() -> Lan {
        let prefix = format!("mh{}", unique());
        let netns = Netns::new(&format!("{prefix}-lan"));
        netns.ip(&["link", "add", "br0", "type", "bridge"]);
        netns.ip(&["addr", "add", &format!("{LAN_SERVER}/24"), "dev", "br0"]);
        netns.ip(&["link", "set", "br0", "up"]);
        Lan { prefix, netns }
    }

    /// The LAN address of host `n`: `192.0.2.1<n>`.
    pub fn host_addr(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(192, 0, 2, 10 + n)
    }
}

/// Simulated host number `n`: namespace `<lan prefix>-h<n>` with `lan0` (address
/// `192.0.2.1<n>/24`) on the LAN's bridge, and an rkt installation of its own in a temporary
/// directory: `data` (--dir), `local` (--local-config), `system` (--system-config), `net.d`
/// (the network configurations of `--net-conf-dir`), `ipam` (host-local's dataDir).
pub struct Host {
    pub n: u8,
    /// Daemons of this host (its `dhcp` daemon), killed after its pods are gone and before
    /// its namespace is.
    pub(crate) services: Vec<Box<dyn std::any::Any>>,
    pub netns: Netns,
    pub root: tempfile::TempDir,
    /// Background `rkt run`s, killed on drop if still running.
    background: Vec<Child>,
    /// The leak checker, made inside the host's namespace; checked there on drop.
    guard: Option<leaks::Guard>,
    /// The host's links when the leak checker started.
    links_before: Vec<String>,
}

impl Host {
    /// Host `n` on `lan`. Configure it, then start its leak checker with [`Host::watch`].
    pub fn new(lan: &Lan, n: u8) -> Host {
        let netns = Netns::new(&format!("{}-h{n}", lan.prefix));
        let port = format!("h{n}");
        netns.ip(&[
            "link",
            "add",
            "lan0",
            "type",
            "veth",
            "peer",
            "name",
            &port,
            "netns",
            &lan.netns.name,
        ]);
        lan.netns.ip(&["link", "set", &port, "master", "br0", "up"]);
        netns.ip(&[
            "addr",
            "add",
            &format!("{}/24", Lan::host_addr(n)),
            "dev",
            "lan0",
        ]);
        netns.ip(&["link", "set", "lan0", "up"]);
        let root = tempfile::tempdir().unwrap();
        for d in ["data", "local", "system", "net.d", "ipam"] {
            fs::create_dir(root.path().join(d)).unwrap();
        }
        Host {
            n,
            services: Vec::new(),
            netns,
            root,
            background: Vec::new(),
            guard: None,
            links_before: Vec::new(),
        }
    }

    /// Starts the leak checker inside the host's namespace, once the host is configured:
    /// from now on, whatever `ctx` may own (see [`Host::leak_ctx`]) must not be left behind.
    pub fn watch(&mut self, ctx: leaks::Ctx) {
        self.links_before = self.links();
        self.guard = Some(in_netns(&self.netns.path, move || leaks::Guard::new(ctx)));
    }

    /// The names of the links in the host's namespace.
    pub fn links(&self) -> Vec<String> {
        self.netns
            .ip(&["-o", "link", "show"])
            .lines()
            .filter_map(|l| l.split(": ").nth(1)?.split('@').next().map(str::to_string))
            .collect()
    }

    /// Tells the leak checker about the links that appeared since it started (a running
    /// pod's host-side veth), so that it fails if any of them outlives the pods.
    fn note_new_links(&mut self) {
        let new: Vec<String> = self
            .links()
            .into_iter()
            .filter(|l| !self.links_before.contains(l))
            .collect();
        if let Some(guard) = self.guard.as_mut() {
            for link in new {
                guard.add_link(&link);
            }
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The leak checker's context for this host: its pods (data dir and saved UUIDs) and
    /// host-local's data dir.
    pub fn leak_ctx(&self) -> leaks::Ctx {
        leaks::Ctx::new(self.path("data"))
            .uuid_files_in(self.root.path())
            .hostlocal_dir(self.path("ipam"))
    }

    /// The global options naming this host's directories.
    pub fn globals(&self) -> Vec<String> {
        vec![
            format!("--dir={}", self.path("data").display()),
            format!("--local-config={}", self.path("local").display()),
            format!("--system-config={}", self.path("system").display()),
        ]
    }

    /// `rkt <globals> <args>` run inside this host's namespace.
    pub fn rkt(&self, args: &[&str]) -> Rkt {
        let mut rkt = support::rkt(&self.globals()).args(args);
        enter_netns(rkt.command_mut(), &self.netns.path);
        rkt
    }

    /// `rkt run --uuid-file-save=.. <args>` to completion; returns its outcome and the pod.
    pub fn run(&self, args: &[&str]) -> (Outcome, String) {
        let file = self.path(&format!("uuid-{}", unique()));
        let save = format!("--uuid-file-save={}", file.display());
        let mut full = vec!["run", save.as_str()];
        full.extend_from_slice(args);
        let out = self.rkt(&full).run();
        (out, fs::read_to_string(&file).unwrap_or_default())
    }

    /// Starts `rkt run <args>` in the background and returns the pod's UUID once its app
    /// runs.
    pub fn spawn(&mut self, args: &[&str]) -> String {
        let starting = self.start(args);
        self.wait_started(starting)
    }

    /// Starts `rkt run <args>` in the background; [`Host::wait_started`] waits for its pod
    /// (so that pods of several hosts can start at once).
    pub fn start(&mut self, args: &[&str]) -> Starting {
        let uuid_file = self.path(&format!("uuid-{}", unique()));
        let mut cmd = self.netns.command(RKT);
        cmd.args(self.globals())
            .arg("run")
            .arg(format!("--uuid-file-save={}", uuid_file.display()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        self.background.push(cmd.spawn().expect("start rkt run"));
        Starting {
            index: self.background.len() - 1,
            uuid_file,
            shown: args.join(" "),
        }
    }

    /// Waits until the pod of `starting` runs its app; returns its UUID.
    pub fn wait_started(&mut self, starting: Starting) -> String {
        let uuid = wait_for("the pod to start", Duration::from_secs(20), || {
            let child = &mut self.background[starting.index];
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
                }
                panic!(
                    "rkt run {} on host {} ended ({status}) before its pod ran:\n{err}",
                    starting.shown, self.n
                );
            }
            let uuid = fs::read_to_string(&starting.uuid_file).ok()?;
            let out = self.rkt(&["status", "--format=json", uuid.trim()]).run();
            let st: Value = serde_json::from_slice(&out.output.stdout).ok()?;
            (st["state"] == "running" && st["pid"].as_i64().is_some()).then_some(uuid)
        });
        self.note_new_links();
        uuid.trim().to_string()
    }

    /// `rkt status --format=json <uuid>`.
    pub fn status(&self, uuid: &str) -> Value {
        let out = self.rkt(&["status", "--format=json", uuid]).run();
        out.assert_success();
        out.json()
    }

    /// The pod's IPv4 address on its first network, from `rkt status`.
    pub fn pod_ip(&self, uuid: &str) -> Ipv4Addr {
        let st = self.status(uuid);
        let ip = st["networks"][0]["ip"]
            .as_str()
            .unwrap_or_else(|| panic!("pod {uuid} has no address: {st}"));
        ip.parse()
            .unwrap_or_else(|e| panic!("pod {uuid}: address {ip:?}: {e}"))
    }

    /// Stops every background pod of this host (`rkt stop`) and waits for its `rkt run`,
    /// which tears its networks down, then collects the pods (`rkt gc`).
    pub fn stop_all(&mut self) {
        for uuid in self.pods() {
            let _ = self.rkt(&["stop", &uuid]).run();
        }
        for child in self.background.drain(..) {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.code() == Some(128 + 15) || out.status.success(),
                "rkt run on host {} ended with {}: {}",
                self.n,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        self.rkt(&["gc", "--grace-period=0s"])
            .run()
            .assert_success();
    }

    /// The UUIDs of the pods in this host's data dir.
    pub fn pods(&self) -> Vec<String> {
        fs::read_dir(self.path("data/pods"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Runs the leak checker inside the host's namespace now, without stopping or collecting
    /// anything first: what pods left once something else (an orchestrator) stopped them.
    /// Panics listing the leaks.
    pub fn check_leaks(&mut self) {
        let guard = self.guard.take().expect("Host::watch was not called");
        let (guard, leaked) = in_netns(&self.netns.path, move || {
            let leaked = guard.leaked();
            (guard, leaked)
        });
        self.guard = Some(guard);
        assert!(
            leaked.is_empty(),
            "host {} left behind:\n  {}",
            self.n,
            leaked.join("\n  ")
        );
    }

    /// Stops and collects every pod, then runs the leak checker inside the host's
    /// namespace; panics listing the leaks.
    pub fn finish(&mut self) {
        self.stop_all();
        let guard = self.guard.take().expect("Host::watch was not called");
        in_netns(&self.netns.path, move || guard.check());
    }
}

impl Drop for Host {
    /// Best effort when the test failed before [`Host::finish`]: kill the runs, gc, delete
    /// what pods left, and say what leaked (the namespace goes next, with its links).
    fn drop(&mut self) {
        for child in &mut self.background {
            let _ = child.kill();
            let _ = child.wait();
        }
        let pods = self.pods();
        let _ = self
            .rkt(&["gc", "--grace-period=0s", "--expire-prepared=0s"])
            .run();
        for uuid in pods {
            let _ = rkt::netns::delete(&rkt::netns::pod_netns_path(&uuid));
        }
        if let Some(guard) = self.guard.take() {
            let leaks = in_netns(&self.netns.path, move || {
                let leaks = guard.leaked();
                std::mem::forget(guard); // judged here, not again by its drop
                leaks
            });
            if !leaks.is_empty() {
                eprintln!(
                    "host {}: left behind before cleanup:\n  {}",
                    self.n,
                    leaks.join("\n  ")
                );
            }
        }
    }
}

/// A background `rkt run` whose pod may not run yet.
pub struct Starting {
    index: usize,
    uuid_file: PathBuf,
    shown: String,
}

/// Writes network configuration `file` with `json` into `dir`.
pub fn write_conf(dir: &Path, file: &str, json: &Value) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(file), serde_json::to_vec_pretty(json).unwrap()).unwrap();
}
