//! The process that holds one pod sandbox: `rkt-cri sandbox-runner SPEC`, started by the
//! server for each RunPodSandbox, as `rkt app sandbox` starts its detached runner. It runs
//! in a session of its own with its streams on `/dev/null`, so it outlives the server (a
//! restart, a crash, `kill -9`); it calls the library's `pod::run::run_new` with no app, tells
//! the server the pod's UUID once the pod runs (or why it did not start) on a pipe, then
//! holds the pod (records its apps' exits) until StopPodSandbox stops it.
//!
//! The spec is JSON written by [`start`]; this binary is the pod's stage as well
//! (`/proc/self/exe`).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use serde::{Deserialize, Serialize};

use rkt::firewall::ports::PortMapping;
use rkt::isolation::cgroups::CgroupParent;
use rkt::isolation::Isolators;
use rkt::networking::{DnsOptions, HostsOptions, NetOptions, NetSelection};
use rkt::pod::run::{run_new, RunOptions, StartedNotice};
use rkt::pod::{PodSpec, PodStore};
use rkt::podstore::manifest::PodMeta;

/// The hidden command.
pub const RUNNER_COMMAND: &str = "sandbox-runner";
/// The variable naming the descriptor the runner tells the server on.
const NOTICE_FD_VAR: &str = "RKT_CRI_NOTICE_FD";

/// Everything the runner needs to make the pod.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerSpec {
    pub pods_dir: PathBuf,
    /// The network: `host`, `none` or a network's name in `conf_dir`.
    pub network: String,
    pub conf_dir: PathBuf,
    pub plugin_path: Vec<PathBuf>,
    pub cache_dir: PathBuf,
    pub dns_servers: Vec<String>,
    pub dns_search: Vec<String>,
    pub dns_options: Vec<String>,
    pub hostname: String,
    pub ports: Vec<PortMapping>,
    pub meta: PodMeta,
    pub cgroup_parent: Option<String>,
    pub isolators: Isolators,
    pub plugin_timeout_ms: u64,
    pub net_operations: usize,
}

/// Starts the runner for `spec` and waits until it says the pod runs: returns its UUID.
pub fn start(spec: &RunnerSpec) -> anyhow::Result<String> {
    let json = serde_json::to_string(spec).context("cannot encode the sandbox's spec")?;
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("cannot make a pipe")?;
    // The write end keeps close-on-exec here and loses it in the runner alone: another
    // RunPodSandbox spawning its runner meanwhile must not inherit it (that runner would hold
    // it as long as its pod lives, and the read below would wait for it).
    let fd = write.as_raw_fd();
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(RUNNER_COMMAND)
        .arg(json)
        .env(NOTICE_FD_VAR, fd.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: between fork and exec the closure only calls fcntl, async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn().context("cannot start the sandbox's runner");
    drop(write);
    let mut child = spawned?;
    let mut said = String::new();
    let read_result = File::from(read).read_to_string(&mut said);
    // The runner goes on holding the pod; its exit is reaped by a thread of ours, so that
    // no zombie is left behind.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    read_result.context("cannot read what the sandbox's runner said")?;
    let said = said.trim_end();
    if let Some(uuid) = said.strip_prefix("started ") {
        return Ok(uuid.to_string());
    }
    match said.strip_prefix("error ") {
        Some(message) => bail!("{message}"),
        None => bail!("the sandbox's runner ended before the pod started"),
    }
}

/// `rkt-cri sandbox-runner SPEC`.
pub fn main_from_args(mut args: impl Iterator<Item = std::ffi::OsString>) -> i32 {
    let notice = match take_notice() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("rkt-cri {RUNNER_COMMAND}: {e:#}");
            return 254;
        }
    };
    let outcome = args
        .next()
        .context("no spec")
        .and_then(|json| {
            serde_json::from_str::<RunnerSpec>(&json.to_string_lossy()).context("bad spec")
        })
        .and_then(|spec| run(&spec, notice.clone()));
    match outcome {
        Ok(code) => code,
        Err(e) => {
            notice.failed(&crate::error::describe(&e));
            254
        }
    }
}

fn take_notice() -> anyhow::Result<StartedNotice> {
    let fd = std::env::var_os(NOTICE_FD_VAR).context("started by hand, not by the server")?;
    // SAFETY: edition 2021; the process is still single-threaded here.
    std::env::remove_var(NOTICE_FD_VAR);
    let fd: i32 = fd
        .to_str()
        .and_then(|f| f.parse().ok())
        .filter(|f| *f > 2)
        .with_context(|| format!("{NOTICE_FD_VAR}={fd:?} is not a descriptor"))?;
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .with_context(|| format!("{NOTICE_FD_VAR}={fd} is not open"))?;
    // SAFETY: the server passed this descriptor for us alone; it is owned from here.
    let file = unsafe { File::from_raw_fd(fd) };
    let _ = nix::unistd::setsid();
    Ok(StartedNotice::new(file))
}

fn run(spec: &RunnerSpec, notice: StartedNotice) -> anyhow::Result<i32> {
    rkt::networking::admission::set_limit(spec.net_operations);
    let selection = match spec.network.as_str() {
        "host" => NetSelection::Host,
        "none" => NetSelection::None,
        name => NetSelection::parse(&[name.to_string()])?,
    };
    let opts = RunOptions {
        net: NetOptions {
            selection,
            conf_dir: spec.conf_dir.clone(),
            plugin_path: spec.plugin_path.clone(),
            cache_dir: spec.cache_dir.clone(),
            dns: DnsOptions {
                servers: spec.dns_servers.clone(),
                search: spec.dns_search.clone(),
                options: spec.dns_options.clone(),
                domain: None,
            },
            hosts: HostsOptions::default(),
            hostname: spec.hostname.clone(),
            ports: spec.ports.clone(),
            check_ownership: true,
        },
        exe: PathBuf::from("/proc/self/exe"),
        uuid_file_save: None,
        plugin_timeout: Duration::from_millis(spec.plugin_timeout_ms),
        null_stdio: rkt::stage::NullStdio {
            stdin: true,
            stdout: true,
            stderr: true,
        },
        log_streams: Default::default(),
        isolation_off: Default::default(),
        started_notice: Some(notice),
        cgroup_parent: spec
            .cgroup_parent
            .as_deref()
            .map(CgroupParent::parse)
            .transpose()?,
    };
    let pod = PodSpec {
        apps: Vec::new(),
        exit_policy: Default::default(),
        volumes: Vec::new(),
        sandbox: Some(spec.isolators.clone()),
        cgroup_parent: None,
        meta: spec.meta.clone(),
    };
    let store = PodStore::new(&spec.pods_dir);
    let outcome = run_new(&store, pod, &opts)?;
    Ok(outcome.exit_status)
}
