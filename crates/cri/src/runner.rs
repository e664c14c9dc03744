//! The process that holds one pod sandbox: `rkt-cri sandbox-runner SPEC`, started for each
//! RunPodSandbox by the server's spawner ([`crate::spawner`], which forks it), as `rkt app
//! sandbox` starts its detached runner. It runs in a session of its own with its streams
//! on `/dev/null`, so it outlives the server (a restart, a crash, `kill -9`); it calls the
//! library's `pod::run::run_new` with no app, tells the server the pod's UUID once the pod
//! runs (or why it did not start) on a pipe, then holds the pod (records its apps' exits)
//! until StopPodSandbox stops it.
//!
//! The spec is JSON written by [`start`]; this binary is the pod's stage as well
//! (`/proc/self/exe`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use rkt::firewall::ports::PortMapping;
use rkt::isolation::cgroups::CgroupParent;
use rkt::isolation::Isolators;
use rkt::networking::{DnsOptions, HostsOptions, NetOptions, NetSelection};
use rkt::pod::run::{run_new, RunOptions, RunnerSaid, StartedNotice};
use rkt::pod::{PodSpec, PodStore};
use rkt::podstore::manifest::PodMeta;
use rkt::stage::launch::{Launch, Launcher};

/// The hidden command. The library knows a process running it for a pod's runner
/// (`rkt::pod::control::RUNNER_COMMANDS`): StopPodSandbox of a pod still starting stops
/// its runner, which abandons the start and releases what it made.
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

/// Starts the runner for `spec` by `launcher` (the server's spawner) and waits until it
/// says the pod runs: returns its UUID.
pub fn start(launcher: &dyn Launcher, spec: &RunnerSpec) -> anyhow::Result<String> {
    let json = serde_json::to_string(spec).context("cannot encode the sandbox's spec")?;
    let said = StartedNotice::launch_runner(
        launcher,
        Launch::new([RUNNER_COMMAND, &json]),
        NOTICE_FD_VAR,
    )
    .context("cannot start the sandbox's runner")?;
    match said {
        RunnerSaid::Started(uuid) => Ok(uuid),
        RunnerSaid::Failed(message) => bail!("{message}"),
        RunnerSaid::Nothing => bail!("the sandbox's runner ended before the pod started"),
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
    let notice =
        StartedNotice::from_env(NOTICE_FD_VAR)?.context("started by hand, not by the server")?;
    let _ = nix::unistd::setsid();
    Ok(notice)
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
        ports: Vec::new(),
    };
    let store = PodStore::new(&spec.pods_dir);
    let outcome = run_new(&store, pod, &opts)?;
    Ok(outcome.exit_status)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_library_knows_the_runner_by_its_command() {
        assert!(rkt::pod::control::RUNNER_COMMANDS.contains(&&[super::RUNNER_COMMAND][..]));
    }
}
