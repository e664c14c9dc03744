//! Support of the operator tests (`tests/operator.rs`): the real `crictl` (found or built),
//! a node (an `rkt-cri` server in a temporary directory of its own: data, configuration,
//! socket, CNI configuration directory, logs, started, killed and started again), bridge
//! networks of the test's own (a unique name, bridge and subnet, host-local leases in the
//! test's directory), a loopback registry holding a busybox image under a mirrored name,
//! and the checks that nothing is left: the leak checker plus the test's processes and the
//! bridge's ports.
#![allow(dead_code)] // Each test uses its own subset.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use test_kit::{unique, wait_for, PATIENCE};

#[path = "../../../image/tests/common/mod.rs"]
pub mod image_common;

/// The registry host the tests' images are named with; a `hosts.toml` sends it to the
/// loopback registry, and the images keep this name.
pub const MIRRORED: &str = "operator.test";
/// The test image, as pods ask for it.
pub const IMAGE: &str = "operator.test/test/busybox:v1";
/// The command of a container serving the image's `/etc` over HTTP on port 80.
pub const HTTPD: [&str; 7] = ["/bin/busybox", "httpd", "-f", "-p", "80", "-h", "/etc"];
/// The command of a container that waits.
pub const SLEEP: [&str; 3] = ["sh", "-c", "exec sleep 100000"];

/// One operator test at a time in this binary: each starts pods by the dozen on a small
/// machine, and the timings they print mean more alone.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// The workspace's target directory.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// The project's shared directory (`$RKT_SHARED_DIR`, else `<repo>/../shared`).
fn shared_dir() -> PathBuf {
    std::env::var_os("RKT_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// `crictl` of cri-tools 1.26.1: `$CRICTL`, else built (once; a no-op when it is already
/// there) by `<shared>/cri-tools/build <target>/cri-tools`. `Err` says why there is none.
fn crictl_bin() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("CRICTL") {
                let path = PathBuf::from(path);
                return if path.is_file() {
                    Ok(path)
                } else {
                    Err(format!("$CRICTL={} is no file", path.display()))
                };
            }
            let build = shared_dir().join("cri-tools/build");
            if !build.is_file() {
                return Err(format!(
                    "no {} (set RKT_SHARED_DIR to the shared directory, or CRICTL)",
                    build.display()
                ));
            }
            let out = target_dir().join("cri-tools");
            let built = Command::new(&build)
                .arg(&out)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", build.display()))?;
            if !built.status.success() {
                return Err(format!(
                    "{} {} failed: {}",
                    build.display(),
                    out.display(),
                    String::from_utf8_lossy(&built.stderr).trim()
                ));
            }
            Ok(out.join("crictl"))
        })
        .clone()
}

/// What an operator test needs, or `None` after saying on stderr why the test is skipped
/// (under `CI` a missing tool fails the test instead).
pub fn ready(test: &str) -> Option<PathBuf> {
    if !image_common::ready(
        test,
        &["umoci", "skopeo", "docker-registry", "iptables", "ip"],
    ) {
        return None;
    }
    for plugin in ["bridge", "host-local", "portmap", "loopback"] {
        let path = Path::new("/usr/lib/cni").join(plugin);
        if !path.is_file() {
            skip_or_fail(test, &format!("no CNI plugin {}", path.display()));
            return None;
        }
    }
    match crictl_bin() {
        Ok(path) => Some(path),
        Err(why) => {
            skip_or_fail(test, &format!("no crictl: {why}"));
            None
        }
    }
}

fn skip_or_fail(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}");
    }
    eprintln!("skipping {test}: {why}");
}

/// A subnet `10.114.<n>.0/24` no other test of this process has (the operator tests' range;
/// `n` starts at a random point so that two test processes at once do not meet).
fn subnet_octet() -> u8 {
    static NEXT: Mutex<Option<u8>> = Mutex::new(None);
    let mut next = NEXT.lock().unwrap_or_else(|p| p.into_inner());
    let n = next.unwrap_or_else(|| u8::from_str_radix(&unique()[..2], 16).unwrap_or(0));
    *next = Some(n.wrapping_add(1));
    n
}

/// A bridge network of the test's own: name `rc<id>-<suffix>`, bridge `rc<id><k>`, subnet
/// `10.114.<n>.0/24`, masquerading and port mappings, leases in the test's directory.
#[derive(Debug, Clone)]
pub struct Net {
    pub name: String,
    pub bridge: String,
    pub subnet: String,
    /// `10.114.<n>`
    pub prefix: String,
    pub lease_dir: PathBuf,
}

impl Net {
    pub fn new(work: &Path, suffix: &str) -> Net {
        let id = unique();
        let n = subnet_octet();
        Net {
            name: format!("rc{id}-{suffix}"),
            bridge: format!("rc{id}"),
            subnet: format!("10.114.{n}.0/24"),
            prefix: format!("10.114.{n}"),
            lease_dir: work.join("leases"),
        }
    }

    /// The network's configuration list.
    pub fn conflist(&self) -> String {
        json!({
            "cniVersion": "1.0.0",
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    "ipMasq": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.subnet}]],
                        "dataDir": self.lease_dir,
                    }
                },
                {"type": "portmap", "capabilities": {"portMappings": true}}
            ]
        })
        .to_string()
    }

    /// Writes the configuration as `dir/file`.
    pub fn write(&self, dir: &Path, file: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(file), self.conflist()).unwrap();
    }

    /// Whether `ip` is in this network's subnet.
    pub fn holds(&self, ip: &str) -> bool {
        ip.starts_with(&format!("{}.", self.prefix))
    }

    /// The host links enslaved to the bridge (the pods' host veths).
    pub fn ports(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["-o", "link", "show", "master", &self.bridge])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .collect()
    }

    /// Asserts no pod is left on the bridge, then deletes it (the bridge plugin never
    /// does: that is the network's, not a pod's).
    pub fn assert_empty_and_remove(&self) {
        let ports = self.ports();
        assert!(
            ports.is_empty(),
            "veths left on bridge {}: {ports:?}",
            self.bridge
        );
        self.remove_bridge();
    }

    fn remove_bridge(&self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.remove_bridge();
    }
}

/// A loopback registry holding the busybox image as `test/busybox:v1`, built in `work`.
pub fn registry(work: &Path) -> image_common::Registry {
    let layout = image_common::busybox_layout(work);
    let (registry, _) = image_common::registry_with(&layout);
    registry
}

/// Whether a test's node pulls images from a loopback registry of its own.
pub enum Images {
    /// A registry holding the test image, mirrored as [`MIRRORED`].
    Registry,
    /// None: the test's pods need no image.
    NoRegistry,
}

/// What a test started by [`setup`] holds until it ends, without using it: the loopback
/// registry, the directory its image was built in, and the test's turn ([`serial`]), given
/// up in that order.
pub struct Held {
    _registry: Option<image_common::Registry>,
    _images: Option<tempfile::TempDir>,
    _serial: MutexGuard<'static, ()>,
}

/// What most operator tests start from: their turn ([`serial`]), a loopback registry with
/// the test image (with [`Images::Registry`]), a [`Node`] whose CNI directory holds one
/// bridge network of the test's own (named `…-<suffix>`), the leak checker's guard for both
/// and the node started; `None` when the test is skipped (see [`ready`]).
///
/// Bound in this order, `let Some((_held, mut node, net, guard)) = setup(…) else { return };`,
/// they drop in reverse, as a test that makes them one by one: the guard reports, the
/// bridge goes, the node removes what is left of its pods and ends, then the registry.
pub fn setup(
    test: &str,
    suffix: &str,
    images: Images,
) -> Option<(Held, Node, Net, leak_check::Guard)> {
    let crictl = ready(test)?;
    let serial = serial();
    let (images, registry) = match images {
        Images::Registry => {
            let dir = tempfile::tempdir().unwrap();
            let registry = registry(dir.path());
            (Some(dir), Some(registry))
        }
        Images::NoRegistry => (None, None),
    };
    let addr = registry.as_ref().map_or("", |r| r.addr.as_str());
    let mut node = Node::new(&crictl, addr);
    let net = Net::new(node.work.path(), suffix);
    net.write(&node.path("net.d"), &format!("10-{suffix}.conflist"));
    let guard = leak_check::Guard::new(node.leak_ctx(&[&net]));
    node.start();
    let held = Held {
        _registry: registry,
        _images: images,
        _serial: serial,
    };
    Some((held, node, net, guard))
}

/// An `rkt-cri` server in a directory of its own, driven with `crictl`.
pub struct Node {
    pub work: tempfile::TempDir,
    pub crictl: PathBuf,
    pub socket: PathBuf,
    /// The data directory (`--dir`).
    pub data: PathBuf,
    /// The local configuration (`--local-config`): registry hosts, paths.d.
    pub local: PathBuf,
    /// The server's `--net-conf-dir`, unless `None` (then rkt's `paths` or the default).
    pub net_conf_dir: Option<PathBuf>,
    /// More server options.
    pub extra: Vec<String>,
    pub logs: PathBuf,
    server: Option<Child>,
}

impl Node {
    /// A node whose `--net-conf-dir` is `<work>/net.d` (empty), with registry `registry`
    /// (`HOST:PORT`, may be empty) as the mirror of [`MIRRORED`]; not started.
    pub fn new(crictl: &Path, registry: &str) -> Node {
        let work = tempfile::tempdir().unwrap();
        let root = work.path().to_path_buf();
        for d in ["data", "local", "system", "net.d", "logs"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        if !registry.is_empty() {
            let hosts = root.join("local/certs.d").join(MIRRORED);
            fs::create_dir_all(&hosts).unwrap();
            fs::write(
                hosts.join("hosts.toml"),
                format!(
                    "server = \"https://{MIRRORED}\"\n\n[host.\"http://{registry}\"]\n  \
                     capabilities = [\"pull\", \"resolve\"]\n"
                ),
            )
            .unwrap();
        }
        Node {
            crictl: crictl.to_path_buf(),
            socket: root.join("cri.sock"),
            data: root.join("data"),
            local: root.join("local"),
            net_conf_dir: Some(root.join("net.d")),
            extra: Vec::new(),
            logs: root.join("logs"),
            server: None,
            work,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.work.path().join(rel)
    }

    /// The server's command line.
    pub fn server_args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--listen=unix://{}", self.socket.display()),
            format!("--dir={}", self.data.display()),
            format!("--local-config={}", self.local.display()),
            format!("--system-config={}", self.path("system").display()),
        ];
        if let Some(dir) = &self.net_conf_dir {
            args.push(format!("--net-conf-dir={}", dir.display()));
        }
        args.extend(self.extra.iter().cloned());
        args
    }

    /// Starts the server (its stderr appended to `server.log`) and waits until it answers.
    pub fn start(&mut self) {
        assert!(self.server.is_none(), "the server already runs");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("server.log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_rkt-cri"))
            .args(self.server_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start rkt-cri");
        self.server = Some(child);
        wait_for("rkt-cri to answer", PATIENCE, || {
            if let Some(status) = self.server.as_mut().and_then(|c| c.try_wait().ok()?) {
                panic!("rkt-cri exited ({status}): {}", self.server_log());
            }
            self.crictl(&["version"]).status.success().then_some(())
        });
    }

    /// The server's PID, when it runs.
    pub fn server_pid(&self) -> Option<u32> {
        self.server.as_ref().map(Child::id)
    }

    /// The server's spawner (`rkt-cri spawner`, its child that forks the pods' runners and
    /// log monitors), when it runs.
    pub fn spawner_pid(&self) -> Option<u32> {
        let server = self.server_pid()?;
        children_of(server)
            .into_iter()
            .find(|pid| args_of(*pid).get(1).is_some_and(|a| a == "spawner"))
    }

    /// Kills the server with SIGKILL (nothing else: its pods' runners live on); its
    /// spawner must end on its own.
    pub fn kill_9(&mut self) {
        let spawner = self.spawner_pid();
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_gone("the spawner of a server killed -9", spawner);
    }

    /// Stops the server as a service manager does (SIGTERM), waiting for it to end (a
    /// server still running after [`PATIENCE`] is killed and the test fails).
    pub fn terminate(&mut self) {
        let spawner = self.spawner_pid();
        let Some(mut child) = self.server.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = std::time::Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("rkt-cri still ran {PATIENCE:?} after SIGTERM (killed)");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "rkt-cri ended with {status} after SIGTERM"
        );
        assert_gone("the spawner of a server stopped by SIGTERM", spawner);
    }

    /// What the server wrote to stderr so far.
    pub fn server_log(&self) -> String {
        fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }

    /// `crictl runp` of `n` new pods (`PREFIX0`, `PREFIX1`, …) at once, a crictl each,
    /// their IDs on their stdout.
    pub fn runp_at_once(&self, prefix: &str, n: usize) -> Vec<Child> {
        // Every configuration written first, so that the crictls start together.
        let configs: Vec<String> = (0..n)
            .map(|i| self.pod_config(&format!("{prefix}{i}"), json!({})))
            .collect();
        configs
            .iter()
            .map(|config| {
                self.crictl_command(&["runp", config])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect()
    }

    /// `crictl` against this node's socket.
    pub fn crictl_command(&self, args: &[&str]) -> Command {
        let endpoint = format!("unix://{}", self.socket.display());
        let mut cmd = Command::new(&self.crictl);
        cmd.args([
            "--runtime-endpoint",
            &endpoint,
            "--image-endpoint",
            &endpoint,
        ])
        .args(["--timeout", "60s"])
        .args(args)
        .stdin(Stdio::null());
        cmd
    }

    /// `crictl ARGS`, run to completion.
    pub fn crictl(&self, args: &[&str]) -> Output {
        self.crictl_command(args).output().unwrap()
    }

    /// crictl's stdout (trimmed), the command having succeeded.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.crictl(args);
        assert!(
            out.status.success(),
            "crictl {}: {}{}\n--- server log (tail)\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            tail(&self.server_log(), 20)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// crictl's stdout as JSON, the command having succeeded.
    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("crictl {}: not JSON ({e}): {text}", args.join(" ")))
    }

    /// crictl's stderr, the command having failed.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.crictl(args);
        assert!(
            !out.status.success(),
            "crictl {} succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// Writes a pod sandbox config (as crictl's docs show it) named `name`, its logs in
    /// `<logs>/<name>`, plus the members of `extra`; returns its path.
    pub fn pod_config(&self, name: &str, extra: Value) -> String {
        let mut config = json!({
            "metadata": {"name": name, "namespace": "operator", "uid": format!("uid-{name}"),
                         "attempt": 1},
            "hostname": name,
            "log_directory": self.logs.join(name),
            "labels": {"test": "operator", "pod": name},
            "annotations": {"operator.test/note": "made by crictl"},
            "linux": {}
        });
        merge(&mut config, extra);
        let path = self.path(&format!("pod-{name}.json"));
        fs::write(&path, config.to_string()).unwrap();
        path.display().to_string()
    }

    /// Writes a container config named `name` of [`IMAGE`] running `command`, its log
    /// `<name>.log`, plus the members of `extra`; returns its path.
    pub fn container_config(&self, name: &str, command: &[&str], extra: Value) -> String {
        let mut config = json!({
            "metadata": {"name": name},
            "image": {"image": IMAGE},
            "command": command,
            "log_path": format!("{name}.log"),
            "labels": {"container": name},
            "linux": {}
        });
        merge(&mut config, extra);
        let path = self.path(&format!("ctr-{name}.json"));
        fs::write(&path, config.to_string()).unwrap();
        path.display().to_string()
    }

    /// The IDs `crictl pods -q` lists.
    pub fn pod_ids(&self) -> Vec<String> {
        self.ok(&["pods", "-q"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The pod's IP, as `crictl inspectp` shows it.
    pub fn pod_ip(&self, pod: &str) -> String {
        self.json(&["inspectp", pod])["status"]["network"]["ip"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The pod UUIDs in the data directory.
    pub fn stored_pods(&self) -> Vec<String> {
        fs::read_dir(self.data.join("pods"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| uuid_like(n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The leak checker's context for this node and `nets`.
    pub fn leak_ctx(&self, nets: &[&Net]) -> leak_check::Ctx {
        let mut ctx = leak_check::Ctx::new(&self.data);
        for net in nets {
            ctx = ctx
                .network(&net.name)
                .subnet(&net.subnet)
                .hostlocal_dir(&net.lease_dir);
        }
        ctx
    }

    /// Processes other than the server whose command line names this node's directory
    /// (sandbox runners, pods' inits, log copiers, plugins) or one of `ids`.
    pub fn processes(&self, ids: &[String]) -> Vec<String> {
        let dir = self.work.path().display().to_string();
        let me = std::process::id();
        let server = self.server_pid();
        let mut found = Vec::new();
        for pid in rkt::procfs::pids().map(|pid| pid as u32) {
            if pid == me || Some(pid) == server {
                continue;
            }
            let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cmdline.contains("crictl") {
                continue;
            }
            if cmdline.contains(&dir) || ids.iter().any(|id| cmdline.contains(id.as_str())) {
                let mut short = cmdline.trim().to_string();
                short.truncate(200);
                found.push(format!("{pid}: {short}"));
            }
        }
        found
    }

    /// Proportional set size (a shared page counted once, split among its users) in KiB of
    /// the server, and of the other processes of this node (the pods' runners, inits, apps
    /// and log copiers), with their number.
    pub fn memory_kib(&self) -> (u64, u64, usize) {
        let pss = |pid: &str| -> u64 {
            fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        let server = self.server_pid().map(|p| pss(&p.to_string())).unwrap_or(0);
        let ids = self.stored_pods();
        let others = self.processes(&ids);
        let held = others
            .iter()
            .filter_map(|p| p.split(':').next())
            .map(pss)
            .sum();
        (server, held, others.len())
    }

    /// Asserts that nothing of this node's pods is left: no pod in the data directory, no
    /// process, and (through `guard`) no namespace, link, address, route, rule, lease,
    /// cache entry, mount or cgroup.
    pub fn assert_clean(&self, guard: &leak_check::Guard, seen: &[String]) {
        let left = self.stored_pods();
        assert!(left.is_empty(), "pods left in the data directory: {left:?}");
        let procs = wait_for_none("the pods' processes to end", || self.processes(seen));
        assert!(procs.is_empty(), "processes left: {procs:#?}");
        guard.check();
    }
}

/// The IDs printed by those of `children` (from [`Node::runp_at_once`]) that succeeded.
pub fn answered_ids(children: Vec<Child>) -> Vec<String> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .collect()
}

/// The PIDs whose parent is `parent`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let children = rkt::procfs::children(parent as i32);
    children.into_iter().map(|pid| pid as u32).collect()
}

/// The arguments of process `pid` (its `/proc/PID/cmdline`, empty ones dropped; none when
/// it is gone).
pub fn args_of(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Asserts that process `pid` (if any) ends within 10 s (a zombie counts as ended).
fn assert_gone(what: &str, pid: Option<u32>) {
    let Some(pid) = pid else { return };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let state = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().chars().next()));
        if matches!(state, None | Some(Some('Z'))) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} (PID {pid}) still runs 10 s later"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `f` up to 10 s until it finds nothing; returns what it last found.
fn wait_for_none(_what: &str, mut f: impl FnMut() -> Vec<String>) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = f();
        if found.is_empty() || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for Node {
    /// Best effort, so a failing test leaves nothing running: the server (started again if
    /// it is not running) removes every pod, then ends; namespaces still bound are dropped.
    fn drop(&mut self) {
        if self.server.is_none() && !self.stored_pods().is_empty() {
            let child = Command::new(env!("CARGO_BIN_EXE_rkt-cri"))
                .args(self.server_args())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            if let Ok(child) = child {
                self.server = Some(child);
                for _ in 0..200 {
                    if self.crictl(&["version"]).status.success() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        if self.server.is_some() {
            let _ = self.crictl(&["rmp", "-fa"]);
        }
        self.kill_9();
        for uuid in self.stored_pods() {
            let ns = Path::new("/run/netns").join(format!("rkt-{uuid}"));
            if ns.exists() {
                let _ = nix::mount::umount2(&ns, nix::mount::MntFlags::MNT_DETACH);
                let _ = fs::remove_file(&ns);
            }
        }
    }
}

/// Whether `name` looks like a pod UUID.
pub fn uuid_like(name: &str) -> bool {
    name.len() == 36 && name.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The UUID (with dashes) of a sandbox ID.
pub fn uuid_of(sandbox_id: &str) -> String {
    let h = &sandbox_id[..32];
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Adds `extra`'s members to `base` (objects merged recursively).
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, e) => *b = e,
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A TCP port free on the host now, on every address (so on the loopback too).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An HTTP GET of `path` on `addr` (`IP:PORT`): the response's body, or why none came.
pub fn http_get(addr: &str, path: &str) -> Result<String, String> {
    let mut conn = std::net::TcpStream::connect_timeout(
        &addr.parse().map_err(|e| format!("{addr}: {e}"))?,
        Duration::from_secs(2),
    )
    .map_err(|e| format!("connect {addr}: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(
        conn,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    conn.read_to_string(&mut text).map_err(|e| e.to_string())?;
    if !text.starts_with("HTTP/1.") || !text.contains(" 200 ") {
        return Err(format!("GET {addr}{path}: {}", tail(&text, 3)));
    }
    Ok(text.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}
