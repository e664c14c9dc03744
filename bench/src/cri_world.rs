//! The world of scenarios 11 to 13 (`rkt-cri` against containerd): a private network
//! namespace (an nsfs bind mount in the temporary directory, as ../shared/critest's
//! `netns.sh` makes: `ip netns list` does not show it), a `docker-registry` on 127.0.0.1:5000
//! inside it holding the harness's `registry.k8s.io/pause:3.6` and
//! `registry.k8s.io/e2e-test-images/busybox:1.29-2` (pushed with skopeo from the harness's OCI
//! layout), one `hosts.toml` mirror configuration and one CNI configuration directory that
//! both runtimes read, and the two servers, each started inside the namespace and inside a
//! `cpuacct` cgroup of its own ([`CpuCgroup`]) that is also the `cgroup_parent` of its pods:
//! everything a runtime runs (the server, containerd's shims and runc, rkt-cri's sandbox
//! runners, the pods' inits, log copiers and CNI plugins) is counted there, and nothing else
//! (the clients run outside the cgroups). Each server has its one-process client
//! ([`CriClient`], `criclient serve`, kept for the run, in the namespace, which also reads
//! the runtime's version); `crictl` runs beside it for the pulls, the servers' first
//! answer, scenario 11's crictl variant and the cleanup.
//!
//! On drop (also after a failure or Ctrl-C): each server's client is stopped and reaped,
//! every pod of each server is stopped and removed (`crictl rmp -fa`), the servers get
//! SIGTERM (SIGKILL after 10 s), any process left in a server's cgroups is killed by its
//! PID, any host-local lease of the pod network still held is released, the registry is
//! stopped, whatever is still mounted below the temporary directory is unmounted, the
//! namespace is dropped (with it the bridge, the veths and the loopback registry), and the
//! temporary directory is removed unless something is still mounted below it.
//! [`World::close`] does the same and says what it had to clean up that the runtimes should
//! have.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cpu_cgroup::CpuCgroup;
use crate::cri_client::CriClient;
use crate::error::BenchError;
use crate::proc;
use crate::scenarios::tool;
use crate::workspace::{check_files, write_json};

/// The pod network: bridge + host-local on a subnet of the benchmark's own.
pub const NET_NAME: &str = "rktbench-cri";
pub const SUBNET: &str = "10.248.0.0/16";
const BRIDGE: &str = "rbcri0";
/// The registry, inside the namespace.
const REGISTRY: &str = "127.0.0.1:5000";
/// containerd's sandbox image.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.6";
/// The containers' image.
pub const APP_IMAGE: &str = "registry.k8s.io/e2e-test-images/busybox:1.29-2";
/// The images as the harness's OCI layout names them, which is also their path in the
/// registry.
const LAYOUT_IMAGES: [&str; 2] = ["pause:3.6", "e2e-test-images/busybox:1.29-2"];

/// How long a server may take to answer after it started.
const PATIENCE: Duration = Duration::from_secs(60);

/// The longest a server's pods may take to go (every process of theirs gone from its
/// cgroups) once removed: one pod of scenario 11 or scenario 12's 50.
pub const QUIET_LIMIT: Duration = Duration::from_secs(60);

/// The scenario this module's errors name.
const SCENARIO: &str = "CRI world";

/// The programs scenarios 11 to 13 need.
#[derive(Debug)]
pub struct CriTools {
    pub rkt_cri: PathBuf,
    pub crictl: PathBuf,
    /// The one-process client, built by bench/criclient/build.sh.
    pub criclient: PathBuf,
    /// The harness's OCI layout (`images.py build`), with `pause:3.6` and busybox.
    pub layout: PathBuf,
    pub cni_bin: PathBuf,
}

/// A network namespace kept by a bind mount on a file of the benchmark's.
struct Netns {
    file: PathBuf,
    fd: OwnedFd,
}

impl Netns {
    fn new(file: &Path) -> Result<Netns, BenchError> {
        File::create(file).map_err(|e| BenchError::io(file, e))?;
        let unshare = tool("unshare", "install util-linux")?;
        let net = format!("--net={}", file.display());
        proc::run(&unshare, &[net.as_str(), "true"], &[], None)?;
        let fd = File::open(file).map_err(|e| BenchError::io(file, e))?;
        let ns = Netns {
            file: file.to_path_buf(),
            fd: fd.into(),
        };
        let ip = tool("ip", "install iproute2")?;
        ns.run(&ip, &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs `program args…` inside the namespace (not in any cgroup of ours).
    fn run<S: AsRef<OsStr>>(&self, program: &Path, args: &[S]) -> Result<Output, BenchError> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        self.enter(&mut cmd);
        proc::output(&mut cmd)
    }

    /// Makes `cmd` join the namespace before it executes.
    fn enter(&self, cmd: &mut Command) {
        let fd = self.fd.as_raw_fd();
        // SAFETY: setns is async-signal-safe; the descriptor stays open in the child until
        // it executes (it is close-on-exec).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Runs `f` on a thread of its own inside the namespace.
    fn run_in<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, BenchError> {
        let fd = self.fd.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns on this thread only; fd is a network namespace.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                    return Err(BenchError::io("setns", std::io::Error::last_os_error()));
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| {
                Err(BenchError::scenario(
                    SCENARIO,
                    "a thread in the namespace panicked",
                ))
            })
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Ok(c) = std::ffi::CString::new(self.file.as_os_str().as_encoded_bytes()) {
            // SAFETY: a NUL-terminated path; umount2 has no other memory effects.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Which runtime a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Containerd,
    RktCri,
}

impl Kind {
    /// The runtime's name in messages and the report.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Containerd => "containerd 1.6 + runc",
            Kind::RktCri => "rkt-cri",
        }
    }

    /// A short name of the runtime for files.
    fn tag(self) -> &'static str {
        match self {
            Kind::Containerd => "ctd",
            Kind::RktCri => "rkt",
        }
    }
}

/// One CRI server, running inside the namespace and its own cgroup.
pub struct Server {
    pub kind: Kind,
    child: Option<Child>,
    pub pid: u32,
    pub socket: PathBuf,
    pub cgroup: CpuCgroup,
    pub log: PathBuf,
    /// Its one-process client, once started.
    client: Option<CriClient>,
}

impl Server {
    /// The server's one-process client.
    pub fn client(&self) -> Result<&CriClient, BenchError> {
        self.client.as_ref().ok_or_else(|| {
            BenchError::scenario(
                SCENARIO,
                format!("{}: no criclient started", self.kind.label()),
            )
        })
    }

    /// Whether `pid` is the server or a process of its own that lives as long as it does
    /// (rkt-cri's spawner, its child), rather than one of a pod's.
    fn is_own(&self, pid: u32) -> bool {
        if pid == self.pid {
            return true;
        }
        let parent = proc::Stat::of(pid).map(|s| s.ppid);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        parent == Some(self.pid) && cmdline.split(|b| *b == 0).nth(1) == Some(b"spawner")
    }

    /// Waits until only the server's own processes are left in its cgroups (every shim,
    /// runner, init and copier of its pods gone); fails after `limit`.
    pub fn wait_quiet(&self, limit: Duration) -> Result<(), BenchError> {
        let start = Instant::now();
        loop {
            let procs = self.cgroup.processes();
            if procs.iter().all(|p| self.is_own(*p)) {
                return Ok(());
            }
            crate::proc::check_interrupt()?;
            if start.elapsed() > limit {
                let (label, secs) = (self.kind.label(), limit.as_secs());
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("{label}: processes {procs:?} still in its cgroups {secs} s after its pods were removed"),
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The namespace, the registry, the configuration and the two servers.
pub struct World {
    work: Option<tempfile::TempDir>,
    dir: PathBuf,
    netns: Option<Netns>,
    registry: Option<Child>,
    pub servers: Vec<Server>,
    crictl: PathBuf,
    counter: AtomicU64,
    closed: bool,
}

impl World {
    /// Sets everything up and starts both servers with the images pulled.
    pub fn new(tools: &CriTools) -> Result<World, BenchError> {
        check_files([
            (
                "rkt-cri",
                tools.rkt_cri.clone(),
                "build it: cargo build --release -p rkt-cri",
            ),
            (
                "crictl",
                tools.crictl.clone(),
                "build it: ../shared/cri-tools/build /tmp/critest-bin",
            ),
            (
                "criclient",
                tools.criclient.clone(),
                "build it: bench/criclient/build.sh target/bench/criclient (needs golang-go and \
                 ../shared/cri-tools/cri-tools-1.26.1.tar.gz; bench/run does it for 11 to 13)",
            ),
            (
                "the critest harness's OCI layout",
                tools.layout.join("index.json"),
                "build it: python3 ../shared/critest/images.py build",
            ),
            (
                "the bridge plugin",
                tools.cni_bin.join("bridge"),
                "install containernetworking-plugins",
            ),
        ])?;
        let containerd = tool("containerd", "apt-get install containerd runc")?;
        let runc = tool("runc", "apt-get install runc")?;
        let skopeo = tool("skopeo", "apt-get install skopeo")?;
        let registry_bin = tool("docker-registry", "apt-get install docker-registry")?;

        let work = tempfile::Builder::new()
            .prefix("rkt-bench-cri-")
            .tempdir_in("/var/tmp")
            .map_err(|e| BenchError::io("/var/tmp", e))?;
        let dir = work.path().to_path_buf();
        let mut world = World {
            work: Some(work),
            dir: dir.clone(),
            netns: None,
            registry: None,
            servers: Vec::new(),
            crictl: tools.crictl.clone(),
            counter: AtomicU64::new(0),
            closed: false,
        };
        world.netns = Some(Netns::new(&dir.join("netns"))?);
        world.write_config()?;
        world.start_registry(&registry_bin)?;
        world.push_images(&skopeo, &tools.layout)?;
        let ctd = world.start_containerd(&containerd, &runc, &tools.cni_bin)?;
        world.servers.push(ctd);
        let rkt = world.start_rkt_cri(&tools.rkt_cri, &tools.cni_bin)?;
        world.servers.push(rkt);
        for s in &world.servers {
            let mut images = vec![APP_IMAGE];
            if s.kind == Kind::Containerd {
                images.push(PAUSE_IMAGE);
            }
            for image in images {
                world.crictl(s, &["pull", image])?;
            }
        }
        for i in 0..world.servers.len() {
            let client = world.start_client(&tools.criclient, &world.servers[i])?;
            world.servers[i].client = Some(client);
        }
        Ok(world)
    }

    fn netns(&self) -> &Netns {
        self.netns
            .as_ref()
            .expect("the namespace lives as long as the world")
    }

    fn etc(&self) -> PathBuf {
        self.dir.join("etc")
    }

    /// host-local's `dataDir`: it keeps the pod network's leases in `<dir>/NET_NAME`.
    fn leases_dir(&self) -> PathBuf {
        self.dir.join("cni-leases")
    }

    /// The CNI configuration and the mirrors, shared by both runtimes.
    fn write_config(&self) -> Result<(), BenchError> {
        let etc = self.etc();
        let net = etc.join("net.d");
        for d in [&net, &self.leases_dir(), &self.dir.join("logs")] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        }
        let conf = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": NET_NAME,
            "plugins": [{
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": self.leases_dir(),
                }
            }]
        });
        write_json(&net.join("10-rktbench-cri.conflist"), &conf)?;
        let hosts = etc.join("certs.d/registry.k8s.io");
        std::fs::create_dir_all(&hosts).map_err(|e| BenchError::io(&hosts, e))?;
        let file = hosts.join("hosts.toml");
        std::fs::write(
            &file,
            format!(
                "server = \"https://registry.k8s.io\"\n\n[host.\"http://{REGISTRY}\"]\n  \
                 capabilities = [\"pull\", \"resolve\"]\n"
            ),
        )
        .map_err(|e| BenchError::io(&file, e))?;
        Ok(())
    }

    fn start_registry(&mut self, program: &Path) -> Result<(), BenchError> {
        let config = self.dir.join("registry.yml");
        let text = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  \
             filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {REGISTRY}\n",
            self.dir.join("registry").display()
        );
        std::fs::write(&config, text).map_err(|e| BenchError::io(&config, e))?;
        let mut cmd = Command::new(program);
        cmd.arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.netns().enter(&mut cmd);
        let child = cmd.spawn().map_err(|source| BenchError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
        self.registry = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up = self.netns().run_in(|| {
                let Ok(mut s) = std::net::TcpStream::connect(REGISTRY) else {
                    return false;
                };
                let _ = s.write_all(b"GET /v2/ HTTP/1.0\r\n\r\n");
                let mut head = [0u8; 12];
                s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
            })?;
            if up {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.registry.as_mut().map(|c| c.try_wait()) {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("docker-registry exited: {status}"),
                ));
            }
            if Instant::now() > deadline {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("docker-registry did not answer on {REGISTRY}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn push_images(&self, skopeo: &Path, layout: &Path) -> Result<(), BenchError> {
        for name in LAYOUT_IMAGES {
            let args = [
                "copy".to_string(),
                "--quiet".into(),
                "--all".into(),
                "--dest-tls-verify=false".into(),
                format!("oci:{}:{name}", layout.display()),
                format!("docker://{REGISTRY}/{name}"),
            ];
            self.netns().run(skopeo, &args)?;
        }
        Ok(())
    }

    /// Starts `cmd` as a server in the namespace and `cgroup`, its output into `log`, and
    /// waits until `crictl version` answers on `socket`.
    fn spawn_server(
        &self,
        kind: Kind,
        mut cmd: Command,
        cgroup: CpuCgroup,
        socket: PathBuf,
        log: PathBuf,
    ) -> Result<Server, BenchError> {
        let out = File::create(&log).map_err(|e| BenchError::io(&log, e))?;
        let err = out.try_clone().map_err(|e| BenchError::io(&log, e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        self.netns().enter(&mut cmd);
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .map_err(|source| BenchError::Spawn { program, source })?;
        let label = kind.label();
        let mut server = Server {
            kind,
            pid: child.id(),
            child: Some(child),
            socket,
            cgroup,
            log,
            client: None,
        };
        let start = Instant::now();
        loop {
            if server.socket.exists() && self.crictl(&server, &["version"]).is_ok() {
                return Ok(server);
            }
            if let Some(Ok(Some(status))) = server.child.as_mut().map(|c| c.try_wait()) {
                let tail = std::fs::read_to_string(&server.log).unwrap_or_default();
                let tail: String = tail.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("{label} exited ({status}): {tail}"),
                ));
            }
            if start.elapsed() > PATIENCE {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!(
                        "{label} did not answer on {} (see {})",
                        server.socket.display(),
                        server.log.display()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn start_containerd(
        &self,
        containerd: &Path,
        runc: &Path,
        cni_bin: &Path,
    ) -> Result<Server, BenchError> {
        let d = |n: &str| self.dir.join(n);
        let run = d("ctd-run");
        std::fs::create_dir_all(&run).map_err(|e| BenchError::io(&run, e))?;
        let socket = run.join("containerd.sock");
        // ../shared/critest/containerd.sh's configuration, with the benchmark's directories.
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  enable_selinux = false
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  Root = "{state}/runc"
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{cni_bin}"
  conf_dir = "{net}"
  max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "{certs}"
"#,
            root = d("ctd-root").display(),
            state = d("ctd-state").display(),
            sock = socket.display(),
            runc = runc.display(),
            cni_bin = cni_bin.display(),
            net = self.etc().join("net.d").display(),
            certs = self.etc().join("certs.d").display(),
        );
        let file = d("containerd.toml");
        std::fs::write(&file, config).map_err(|e| BenchError::io(&file, e))?;
        let cgroup = CpuCgroup::new("cri-containerd")?;
        let mut cmd = cgroup.command(containerd, &["--config"]);
        cmd.arg(&file);
        self.spawn_server(Kind::Containerd, cmd, cgroup, socket, d("containerd.log"))
    }

    fn start_rkt_cri(&self, rkt_cri: &Path, cni_bin: &Path) -> Result<Server, BenchError> {
        let d = |n: &str| self.dir.join(n);
        for n in ["rkt-data", "rkt-system", "rkt-user"] {
            std::fs::create_dir_all(d(n)).map_err(|e| BenchError::io(d(n), e))?;
        }
        let socket = d("rkt-cri.sock");
        let args = [
            format!("--listen=unix://{}", socket.display()),
            format!("--dir={}", d("rkt-data").display()),
            format!("--local-config={}", self.etc().display()),
            format!("--system-config={}", d("rkt-system").display()),
            format!("--user-config={}", d("rkt-user").display()),
            format!("--net-conf-dir={}", self.etc().join("net.d").display()),
            format!("--net-plugin-dir={}", cni_bin.display()),
        ];
        let cgroup = CpuCgroup::new("cri-rkt")?;
        let cmd = cgroup.command(rkt_cri, &args);
        self.spawn_server(Kind::RktCri, cmd, cgroup, socket, d("rkt-cri.log"))
    }

    /// Starts `criclient serve` for `server`, inside the namespace, outside the servers'
    /// cgroups, its stderr into `criclient-<tag>.log` of the temporary directory.
    fn start_client(&self, program: &Path, server: &Server) -> Result<CriClient, BenchError> {
        let mut cmd = Command::new(program);
        self.netns().enter(&mut cmd);
        let log = self
            .dir
            .join(format!("criclient-{}.log", server.kind.tag()));
        CriClient::spawn(cmd, server.kind.label(), &server.socket, log)
    }

    /// `crictl ARGS` against `server`, inside the namespace, outside the servers' cgroups.
    pub fn crictl(&self, server: &Server, args: &[&str]) -> Result<Output, BenchError> {
        let endpoint = format!("unix://{}", server.socket.display());
        let mut all: Vec<&str> = vec![
            "--runtime-endpoint",
            &endpoint,
            "--image-endpoint",
            &endpoint,
            "--timeout",
            "120s",
        ];
        all.extend_from_slice(args);
        self.netns().run(&self.crictl, &all).map_err(|e| match e {
            BenchError::Failed { status, stderr, .. } => BenchError::Failed {
                command: format!(
                    "crictl {} (against {})",
                    args.join(" "),
                    server.kind.label()
                ),
                status,
                stderr,
            },
            e => e,
        })
    }

    /// crictl's last line of output (an ID).
    pub fn crictl_id(&self, server: &Server, args: &[&str]) -> Result<String, BenchError> {
        let out = self.crictl(server, args)?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .last()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .ok_or_else(|| {
                BenchError::scenario(
                    SCENARIO,
                    format!(
                        "crictl {} against {} printed no ID",
                        args.join(" "),
                        server.kind.label()
                    ),
                )
            })
    }

    /// Writes a pod's and its container's configurations for `server` (a new pod name
    /// each time) and returns their paths.
    pub fn configs(&self, server: &Server) -> Result<(String, String), BenchError> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let name = format!("bench-{}-{n}", server.kind.tag());
        let logs = self.dir.join("logs").join(&name);
        std::fs::create_dir_all(&logs).map_err(|e| BenchError::io(&logs, e))?;
        let pod = serde_json::json!({
            "metadata": {"name": name, "namespace": "rkt-bench", "uid": format!("uid-{name}"), "attempt": 0},
            "log_directory": logs,
            "linux": {"cgroup_parent": server.cgroup.path},
        });
        let ctr = serde_json::json!({
            "metadata": {"name": "app"},
            "image": {"image": APP_IMAGE},
            "command": ["/bin/sleep", "3600"],
            "log_path": "app.log",
            "linux": {},
        });
        let configs = self.dir.join("configs");
        std::fs::create_dir_all(&configs).map_err(|e| BenchError::io(&configs, e))?;
        let (p, c) = (
            configs.join(format!("{name}.pod.json")),
            configs.join(format!("{name}.ctr.json")),
        );
        write_json(&p, &pod)?;
        write_json(&c, &ctr)?;
        Ok((p.display().to_string(), c.display().to_string()))
    }

    /// Removes every pod of `server` (untimed cleanup between rounds), waits until only the
    /// server is left in its cgroups, and returns the host-local leases still held then
    /// (no pod of the other server exists between rounds), which it releases.
    pub fn remove_all(&self, server: &Server) -> Result<Vec<String>, BenchError> {
        self.crictl(server, &["rmp", "-fa"])?;
        server.wait_quiet(QUIET_LIMIT)?;
        let label = server.kind.label();
        let leases = take_leases(&self.leases_dir().join(NET_NAME));
        Ok(leases
            .into_iter()
            .map(|l| {
                format!("host-local lease of {l} still held after {label}'s pods were removed")
            })
            .collect())
    }

    /// Stops everything and says what had to be cleaned up that the runtimes should have
    /// removed themselves (processes, host-local leases, mounts left).
    pub fn close(mut self) -> Vec<String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Vec<String> {
        if self.closed {
            return Vec::new();
        }
        self.closed = true;
        let mut left = Vec::new();
        for s in &mut self.servers {
            // The client first: it exits when its stdin closes, or is killed.
            drop(s.client.take());
        }
        for i in 0..self.servers.len() {
            let s = &self.servers[i];
            if let Err(e) = self.crictl(s, &["rmp", "-fa"]) {
                left.push(format!(
                    "{}: crictl rmp -fa: {}",
                    s.kind.label(),
                    cni::error::chain(&e)
                ));
            }
            if let Err(e) = s.wait_quiet(Duration::from_secs(30)) {
                left.push(cni::error::chain(&e));
            }
            let s = &mut self.servers[i];
            if let Some(mut child) = s.child.take() {
                // SAFETY: kill(2) on the PID of a child of ours, not yet reaped.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                let start = Instant::now();
                while matches!(child.try_wait(), Ok(None))
                    && start.elapsed() < Duration::from_secs(10)
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
            let stray = s.cgroup.processes();
            if !stray.is_empty() {
                left.push(format!(
                    "{}: processes left after it stopped: {stray:?}",
                    s.kind.label()
                ));
                for p in &stray {
                    // SAFETY: kill(2) on a process of the server's cgroup (one it started).
                    unsafe { libc::kill(*p as i32, libc::SIGKILL) };
                }
                let _ = s.cgroup.wait_empty(Duration::from_secs(10));
            }
        }
        for l in take_leases(&self.leases_dir().join(NET_NAME)) {
            left.push(format!(
                "host-local lease of {l} left after every pod was removed"
            ));
        }
        if let Some(mut r) = self.registry.take() {
            let _ = r.kill();
            let _ = r.wait();
        }
        // Mounts below the temporary directory but the namespace's own, deepest first.
        let netns_file = self.dir.join("netns").display().to_string();
        for m in mounts_below(&self.dir)
            .into_iter()
            .rev()
            .filter(|m| *m != netns_file)
        {
            left.push(format!("mount left: {m}"));
            if let Ok(c) = std::ffi::CString::new(m.as_bytes()) {
                // SAFETY: a NUL-terminated path.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
        self.netns = None;
        // The shims' socket directory, when no other containerd uses it.
        let _ = std::fs::remove_dir("/run/containerd/s");
        let _ = std::fs::remove_dir("/run/containerd");
        let still_mounted = !mounts_below(&self.dir).is_empty();
        if let Some(work) = self.work.take() {
            if still_mounted {
                let kept = work.keep();
                left.push(format!(
                    "{} kept: something is still mounted below it",
                    kept.display()
                ));
            }
        }
        self.servers.clear();
        left
    }
}

/// The host-local leases in `dir` (files named by an address, holding the container's ID),
/// each as `ADDRESS (container ID)`, removed once listed: a lease no pod holds any more is
/// an address a runtime did not release, and left in place it would be found again at
/// every later check.
fn take_leases(dir: &Path) -> Vec<String> {
    let mut leases = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<IpAddr>().is_err() {
            continue; // host-local's lock and last_reserved_ip files
        }
        let holder = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let id = holder.lines().next().unwrap_or("").trim().to_string();
        leases.push(format!("{name} (container {id})"));
        let _ = std::fs::remove_file(entry.path());
    }
    leases.sort();
    leases
}

/// The mount points below `dir` (mountinfo's fifth field), sorted, each once.
fn mounts_below(dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    mounts.sort();
    mounts.dedup();
    mounts
}

impl Drop for World {
    fn drop(&mut self) {
        for l in self.teardown() {
            eprintln!("rkt-bench: CRI cleanup: {l}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_the_address_files_and_are_released_once_listed() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("a file in the directory")
        };
        file("10.248.0.7", "c7\r\neth0");
        file("10.248.0.2", "c2");
        file("lock", "");
        file("last_reserved_ip.0", "10.248.0.7");
        assert_eq!(
            take_leases(dir.path()),
            ["10.248.0.2 (container c2)", "10.248.0.7 (container c7)"]
        );
        assert!(take_leases(dir.path()).is_empty());
        assert!(dir.path().join("lock").exists());
        assert!(take_leases(&dir.path().join("missing")).is_empty());
    }
}
