//! HashiCorp Nomad v0.10.9, built from the source archive in the team's shared directory, and
//! its agents as the tests run them: each with its own data directory and ports, optionally
//! inside a simulated host's network namespace, with `rkt` on its `PATH` being a wrapper that
//! runs the binary under test with that host's directories. Nothing of the driver is changed:
//! it calls `rkt` exactly as it would on a real host.
//!
//! Stopping an agent is not enough to leave a host clean: Nomad's executors (one process per
//! task, `nomad executor`) outlive their agent by design, and its task directories hold
//! mounts (`secrets` is a tmpfs). [`Agent`]'s drop kills the agent, then every process whose
//! command line names its data directory, then unmounts what is left below that directory.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use test_kit::wait_for;

use crate::multi_host_support::{enter_netns, in_netns};
use crate::support::RKT;

/// How long the tests wait for Nomad to place, start or stop something (deadlines, not
/// timing assertions): a client polls its server, and a task's start includes an image pull.
pub const NOMAD_PATIENCE: Duration = Duration::from_secs(90);

/// The Nomad binary, built once (about 100 s the first time, then a no-op) into the
/// workspace's target directory by `<shared>/nomad/build`; `None`, with a line on stderr,
/// when it cannot be built here (no shared directory, no Go). Under `CI` that is a failure.
/// `RKT_TEST_NOMAD` names a binary to use instead; `RKT_SHARED_DIR` the shared directory
/// (default: `../shared` beside the repository).
pub fn nomad_binary(test: &str) -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        if let Some(bin) = std::env::var_os("RKT_TEST_NOMAD") {
            return Ok(PathBuf::from(bin));
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let shared = std::env::var_os("RKT_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("../shared"));
        let script = shared.join("nomad/build");
        if !script.is_file() {
            return Err(format!("no Nomad build script at {}", script.display()));
        }
        if crate::image_common::which("go").is_none() {
            return Err("no go on PATH (tools/test.sh installs golang-go)".into());
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target"));
        let out_dir = target.join("nomad-0.10.9");
        let out = Command::new(&script)
            .arg(&out_dir)
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}{}",
                script.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(out_dir.join("nomad"))
    });
    match built {
        Ok(bin) => Some(bin.clone()),
        Err(why) if std::env::var_os("CI").is_some() => panic!("{test}: {why}"),
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

/// Writes `<dir>/rkt`, a wrapper that runs the binary under test with `globals` (a host's
/// `--dir` and configuration directories) before whatever Nomad passes, and returns `dir`
/// for the agent's `PATH`. It `exec`s, so the process Nomad signals is rkt itself.
pub fn rkt_wrapper(dir: &Path, globals: &[String]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let quoted: Vec<String> = globals.iter().map(|g| format!("'{g}'")).collect();
    let script = format!("#!/bin/sh\nexec '{RKT}' {} \"$@\"\n", quoted.join(" "));
    let path = dir.join("rkt");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    dir.to_path_buf()
}

/// Three free TCP ports on loopback for an agent's HTTP, RPC and Serf listeners (inside a
/// fresh network namespace any port is free; these are for the host's own).
pub fn free_ports() -> [u16; 3] {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    [ports[0], ports[1], ports[2]]
}

/// The client stanza's options every agent here gets: the cloud fingerprinters, which would
/// probe metadata addresses outside the machine, are off.
pub const CLIENT_OPTIONS: &str = r#"options = {
    "fingerprint.blacklist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }"#;

/// The rkt driver's plugin stanza (volumes on, as Nomad's documentation shows).
pub const RKT_PLUGIN: &str = r#"plugin "rkt" {
  config {
    volumes_enabled = true
  }
}"#;

/// A running Nomad agent.
pub struct Agent {
    child: Option<Child>,
    /// Its data directory (also where its log goes, `agent.log`).
    pub dir: PathBuf,
    /// `http://ADDR:PORT` of its HTTP API.
    pub address: String,
    /// The network namespace it runs in, if not the test's.
    netns: Option<PathBuf>,
    nomad: PathBuf,
}

impl Agent {
    /// Starts `nomad agent <args> -config=<dir>/agent.hcl` with `config` (HCL) and `path`
    /// first on its `PATH`, inside `netns` if given; returns once its HTTP API answers.
    pub fn start(
        nomad: &Path,
        dir: &Path,
        config: &str,
        args: &[&str],
        path: &Path,
        netns: Option<&Path>,
        address: &str,
    ) -> Agent {
        fs::create_dir_all(dir).unwrap();
        let hcl = dir.join("agent.hcl");
        fs::write(&hcl, config).unwrap();
        let log = fs::File::create(dir.join("agent.log")).unwrap();
        let old_path = std::env::var("PATH").unwrap_or_default();
        let mut cmd = Command::new(nomad);
        cmd.arg("agent")
            .args(args)
            .arg(format!("-config={}", hcl.display()))
            .env("PATH", format!("{}:{old_path}", path.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        if let Some(ns) = netns {
            enter_netns(&mut cmd, ns);
        }
        let child = cmd.spawn().expect("start nomad agent");
        let mut agent = Agent {
            child: Some(child),
            dir: dir.to_path_buf(),
            address: format!("http://{address}"),
            netns: netns.map(Path::to_path_buf),
            nomad: nomad.to_path_buf(),
        };
        wait_for("the Nomad agent's HTTP API", NOMAD_PATIENCE, || {
            if let Some(status) = agent.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("nomad agent exited ({status}):\n{}", agent.log());
            }
            agent.try_get("/v1/agent/self").map(|_| ())
        });
        agent
    }

    /// The agent's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// `nomad <args>` against this agent (from inside its namespace).
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(&self.nomad);
        cmd.args(args)
            .env("NOMAD_ADDR", &self.address)
            .stdin(Stdio::null());
        if let Some(ns) = &self.netns {
            enter_netns(&mut cmd, ns);
        }
        cmd.output().expect("run nomad")
    }

    /// `nomad <args>`, which must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(
            out.status.success(),
            "nomad {}: {}\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Registers the job in `hcl` (written to the agent's directory as `<name>.nomad`).
    pub fn run_job(&self, name: &str, hcl: &str) {
        let file = self.dir.join(format!("{name}.nomad"));
        fs::write(&file, hcl).unwrap();
        self.ok(&["job", "run", "-detach", &file.to_string_lossy()]);
    }

    /// GET `path` of the HTTP API as JSON; `None` while it does not answer 200.
    pub fn try_get(&self, path: &str) -> Option<Value> {
        let host = self.address.trim_start_matches("http://").to_string();
        let path = path.to_string();
        let fetch = move || -> Option<Value> {
            let addr: SocketAddr = host.parse().ok()?;
            let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
            conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            write!(conn, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").ok()?;
            let mut got = Vec::new();
            conn.read_to_end(&mut got).ok()?;
            let text = String::from_utf8_lossy(&got);
            let (head, body) = text.split_once("\r\n\r\n")?;
            if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
                return None;
            }
            serde_json::from_str(body).ok()
        };
        match &self.netns {
            Some(ns) => in_netns(ns, fetch),
            None => fetch(),
        }
    }

    /// GET `path` of the HTTP API, which must answer.
    pub fn get(&self, path: &str) -> Value {
        self.try_get(path)
            .unwrap_or_else(|| panic!("GET {path} from {} failed", self.address))
    }

    /// The allocations of `job`.
    pub fn allocs(&self, job: &str) -> Vec<Value> {
        self.get(&format!("/v1/job/{job}/allocations"))
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until `job` has an allocation for which `pick` returns something, and returns it.
    pub fn wait_alloc<T>(&self, job: &str, what: &str, pick: impl Fn(&Value) -> Option<T>) -> T {
        self.wait(job, what, || {
            self.allocs(job).iter().find_map(|a| {
                let full = self.try_get(&format!("/v1/allocation/{}", a["ID"].as_str()?))?;
                pick(&full)
            })
        })
    }

    /// Waits up to [`NOMAD_PATIENCE`] for `f` to return something; if it never does, panics
    /// with what Nomad knows of `job` (each allocation's status and its tasks' events) and
    /// the end of the agent's log.
    pub fn wait<T>(&self, job: &str, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = std::time::Instant::now() + NOMAD_PATIENCE;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if std::time::Instant::now() > deadline {
                let log = self.log();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "gave up waiting for {what} after {NOMAD_PATIENCE:?}\n{}\nagent log (last lines):\n{}",
                    self.describe(job),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Each allocation of `job`: its ID, node, client status and its tasks' events.
    pub fn describe(&self, job: &str) -> String {
        let mut out = format!("allocations of {job}:\n");
        for a in self.allocs(job) {
            let id = a["ID"].as_str().unwrap_or_default();
            out += &format!(
                "  {id} on {} {}\n",
                a["NodeID"].as_str().unwrap_or_default(),
                a["ClientStatus"]
            );
            if let Some(full) = self.try_get(&format!("/v1/allocation/{id}")) {
                if let Some(tasks) = full["TaskStates"].as_object() {
                    for task in tasks.keys() {
                        for (kind, message) in events(&full, task) {
                            out += &format!("    {task}: {kind}: {message}\n");
                        }
                    }
                }
            }
        }
        out
    }

    /// Waits until the rkt driver is detected and healthy on every client node the agent's
    /// servers know (`clients` of them), and returns the nodes.
    pub fn wait_rkt_healthy(&self, clients: usize) -> Vec<Value> {
        wait_for(
            "the rkt driver healthy on every Nomad client",
            NOMAD_PATIENCE,
            || {
                let nodes = self.try_get("/v1/nodes")?;
                let nodes = nodes.as_array()?;
                let full: Vec<Value> = nodes
                    .iter()
                    .filter_map(|n| self.try_get(&format!("/v1/node/{}", n["ID"].as_str()?)))
                    .collect();
                let healthy = full
                    .iter()
                    .filter(|n| {
                        let rkt = &n["Drivers"]["rkt"];
                        rkt["Detected"] == true && rkt["Healthy"] == true
                    })
                    .count();
                (full.len() == clients && healthy == clients).then_some(full)
            },
        )
    }

    /// Stops `job` and waits until none of its allocations is still running on a client.
    pub fn stop_job(&self, job: &str) {
        self.ok(&["job", "stop", job]);
        self.wait(job, &format!("every allocation of {job} to stop"), || {
            self.allocs(job)
                .iter()
                .all(|a| a["ClientStatus"] != "running" && a["ClientStatus"] != "pending")
                .then_some(())
        });
    }
}

/// The events of task `task` in the full allocation `alloc`, as `(Type, DisplayMessage)`.
pub fn events(alloc: &Value, task: &str) -> Vec<(String, String)> {
    alloc["TaskStates"][task]["Events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    (
                        e["Type"].as_str().unwrap_or_default().to_string(),
                        e["DisplayMessage"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Executors (and anything else) started for this agent's allocations name its data
        // directory on their command line.
        let needle = self.dir.to_string_lossy().into_owned();
        for _ in 0..50 {
            let pids = processes_naming(&needle);
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        unmount_below(&self.dir);
    }
}

/// PIDs of the processes whose command line contains `needle`.
fn processes_naming(needle: &str) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// Unmounts (detached) every mount at or below `dir`, deepest first.
pub fn unmount_below(dir: &Path) {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut targets: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|t| Path::new(t).starts_with(dir))
        .collect();
    targets.sort_by_key(|t| std::cmp::Reverse(t.len()));
    for t in targets {
        let _ = nix::mount::umount2(t.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
}
