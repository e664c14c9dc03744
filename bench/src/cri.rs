//! Scenarios 11 to 13: the CRI server `rkt-cri` against Debian's containerd 1.6 with its CRI
//! plugin and runc, side by side in one run, both driven by the same clients, with the same
//! images from the same registry and the same CNI configuration, in the world of
//! [`crate::cri_world`]. The clients: one long-lived `criclient` per runtime with one gRPC
//! connection ([`crate::cri_client`]), as kubelet is, and `crictl` of cri-tools 1.26.1, one
//! process per command, whose own start (about 20 ms each) is the client's cost:
//!
//! * 11, a pod's whole life: RunPodSandbox, CreateContainer, StartContainer, then
//!   StopContainer, RemoveContainer, StopPodSandbox, RemovePodSandbox, the variants
//!   alternating cycle by cycle. Through the one-process client (the target's variant) the
//!   wall time is that of the seven RPCs as the client saw them; through crictl (for
//!   information) that of seven processes, `runp`, `create --no-pull`, `start`, `stop`,
//!   `rm`, `stopp`, `rmp`, beside a fifth variant, seven `crictl version` runs, the client's
//!   own floor. Whether the container's process runs is looked at in between, untimed; CPU
//!   time is that of the runtime's whole cgroup tree from the first RPC until every process
//!   of the pod is gone.
//! * 12, `--cri-pods` (50) pods at once: the one-process client sends RunPodSandbox,
//!   CreateContainer and StartContainer in turn for each pod, all pods in goroutines
//!   released together; throughput is pods over the time until the last StartContainer
//!   returned. Then the pods are stopped and removed at once (timed, for information).
//! * 13, memory with those pods running: the proportional set size (PSS, from
//!   `/proc/PID/smaps_rollup`) and RSS of every process in the runtime's cgroups (the server,
//!   containerd's shims and pause processes, rkt-cri's sandbox runners, pod inits and log
//!   copiers), the containers' own processes (`sleep`, the same on both) left out.
//!
//! Scenarios 12 and 13 run in rounds, the runtimes' order turning each round.

use std::time::{Duration, Instant};

use crate::cri_world::{Kind, Server, World, QUIET_LIMIT};
use crate::error::BenchError;
use crate::proc::check_interrupt;
use crate::stats::Series;

pub const CLIENT_FLOOR: &str = "crictl's own floor: 7 × crictl version";

/// Which client drives a variant of scenario 11.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// One `criclient serve` for the whole run, one gRPC connection (as kubelet).
    OneProcess,
    /// One `crictl` process per command.
    Crictl,
}

impl Client {
    pub fn describe(self) -> &'static str {
        match self {
            Client::OneProcess => "one-process client",
            Client::Crictl => "crictl",
        }
    }
}

/// How long the pods of scenario 13 run before their memory is read.
const MEMORY_SETTLE: Duration = Duration::from_secs(15);

/// The scenario this module's errors name.
const SCENARIO: &str = "CRI";

/// Scenario 11's figures for one runtime through one client.
#[derive(Debug)]
pub struct CycleRuntime {
    pub kind: Kind,
    pub version: String,
    pub client: Client,
    /// The whole cycle's wall time (the seven RPCs or crictl runs) and the runtime's CPU
    /// time.
    pub whole: Series,
    /// RunPodSandbox + CreateContainer + StartContainer alone (wall).
    pub up: Series,
    /// StopContainer + RemoveContainer + StopPodSandbox + RemovePodSandbox alone (wall).
    pub down: Series,
}

/// One round of scenarios 12 and 13 for one runtime.
#[derive(Debug, Default)]
pub struct ManyRound {
    /// Until every container runs.
    pub start: Duration,
    /// The runtime's CPU time meanwhile.
    pub start_cpu: Duration,
    /// The one-process client's CPU time meanwhile.
    pub client_cpu: Duration,
    /// Stopping and removing them all at once.
    pub stop: Duration,
    pub stop_cpu: Duration,
    /// Pods that failed to come up or to go (their errors, and the host-local leases still
    /// held once every pod was removed).
    pub errors: Vec<String>,
    /// Containers started without an error that were not running 5 s later.
    pub not_running: usize,
    /// Containers found running.
    pub running: usize,
    /// The memory of the runtime's processes with the pods running (scenario 13).
    pub memory: Option<Memory>,
    /// That of the server alone, before the pods.
    pub idle: Option<Memory>,
}

/// The memory of a runtime's processes, by role.
#[derive(Debug, Default)]
pub struct Memory {
    /// (role, processes, PSS KiB, RSS KiB), largest PSS first.
    pub roles: Vec<(String, usize, u64, u64)>,
    /// The runtime's total (the containers' own processes left out).
    pub pss_kib: u64,
    pub rss_kib: u64,
    /// The containers' own processes.
    pub workload_pss_kib: u64,
    pub workload_count: usize,
}

/// Scenario 12 and 13's rounds for one runtime.
#[derive(Debug)]
pub struct ManyRuntime {
    pub kind: Kind,
    pub rounds: Vec<ManyRound>,
}

impl ManyRuntime {
    /// Each round's throughput: `pods` over the time until every container was started.
    pub fn throughputs(&self, pods: usize) -> Vec<f64> {
        self.rounds
            .iter()
            .map(|r| pods as f64 / r.start.as_secs_f64().max(1e-9))
            .collect()
    }
}

/// What scenarios 11 to 13 measured.
#[derive(Debug, Default)]
pub struct CriResult {
    /// Scenario 11 (empty when it did not run).
    pub cycles: Vec<CycleRuntime>,
    /// crictl's own floor, measured in scenario 11's rounds.
    pub floor: Series,
    pub pods: usize,
    /// Scenarios 12 and 13 (their rounds' memory only with 13).
    pub many: Vec<ManyRuntime>,
    /// What the cleanup found that the runtimes left.
    pub leftovers: Vec<String>,
}

impl CriResult {
    pub fn cycle(&self, kind: Kind, client: Client) -> Option<&CycleRuntime> {
        self.cycles
            .iter()
            .find(|c| c.kind == kind && c.client == client)
    }

    pub fn many_of(&self, kind: Kind) -> Option<&ManyRuntime> {
        self.many.iter().find(|c| c.kind == kind)
    }
}

/// Whether a container's process (`sleep`) is in `server`'s cgroups: `count` of them.
fn running_sleeps(server: &Server) -> usize {
    server
        .cgroup
        .processes()
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
        .count()
}

/// Waits until `n` containers' processes run in `server`'s cgroups; fails after `limit`.
fn wait_running(server: &Server, n: usize, limit: Duration) -> Result<usize, BenchError> {
    let start = Instant::now();
    loop {
        let found = running_sleeps(server);
        if found >= n {
            return Ok(found);
        }
        if start.elapsed() > limit {
            return Err(BenchError::scenario(SCENARIO, format!(
                "{}: {found} of {n} containers' processes running {} ms after StartContainer returned",
                server.kind.label(),
                limit.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One pod's whole life against `server` through `client`: (whole, up, down, cpu).
fn cycle(
    world: &World,
    server: &Server,
    client: Client,
) -> Result<(Duration, Duration, Duration, Duration), BenchError> {
    let (pod_cfg, ctr_cfg) = world.configs(server)?;
    let cpu0 = server.cgroup.usage();
    let (pod, ctr, up) = match client {
        Client::OneProcess => {
            let u = server.client()?.up(&pod_cfg, &ctr_cfg)?;
            (u.pod, u.ctr, u.took)
        }
        Client::Crictl => {
            let t0 = Instant::now();
            let pod = world.crictl_id(server, &["runp", &pod_cfg])?;
            let ctr =
                world.crictl_id(server, &["create", "--no-pull", &pod, &ctr_cfg, &pod_cfg])?;
            world.crictl(server, &["start", &ctr])?;
            (pod, ctr, t0.elapsed())
        }
    };
    // The container's process must run now (untimed look).
    wait_running(server, 1, Duration::from_secs(2))?;
    let down = match client {
        Client::OneProcess => server.client()?.down(&pod, &ctr)?,
        Client::Crictl => {
            let t1 = Instant::now();
            world.crictl(server, &["stop", "--timeout", "0", &ctr])?;
            world.crictl(server, &["rm", &ctr])?;
            world.crictl(server, &["stopp", &pod])?;
            world.crictl(server, &["rmp", &pod])?;
            t1.elapsed()
        }
    };
    server.wait_quiet(QUIET_LIMIT)?;
    let cpu = server.cgroup.usage().saturating_sub(cpu0);
    Ok((up + down, up, down, cpu))
}

/// Scenario 11: `warmup` unrecorded cycles of each variant (every runtime through each
/// client), then `iterations` rounds, the order of the variants and crictl's floor turning
/// each round.
pub fn cycles(
    world: &World,
    warmup: usize,
    iterations: usize,
) -> Result<(Vec<CycleRuntime>, Series), BenchError> {
    let variants: Vec<(usize, Client)> = [Client::OneProcess, Client::Crictl]
        .into_iter()
        .flat_map(|c| (0..world.servers.len()).map(move |i| (i, c)))
        .collect();
    let mut out: Vec<CycleRuntime> = variants
        .iter()
        .map(|&(i, client)| -> Result<CycleRuntime, BenchError> {
            let s = &world.servers[i];
            let (up, down) = match client {
                Client::OneProcess => (
                    "RunPodSandbox + CreateContainer + StartContainer",
                    "StopContainer + RemoveContainer + StopPodSandbox + RemovePodSandbox",
                ),
                Client::Crictl => ("runp + create + start", "stop + rm + stopp + rmp"),
            };
            let series = |what: String| Series {
                label: format!("{} ({}): {what}", s.kind.label(), client.describe()),
                ..Series::default()
            };
            Ok(CycleRuntime {
                kind: s.kind,
                version: s.client()?.version().to_string(),
                client,
                whole: series(format!("{up} + {down}")),
                up: series(up.to_string()),
                down: series(down.to_string()),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut floor = Series {
        label: CLIENT_FLOOR.to_string(),
        ..Series::default()
    };
    let rkt = world
        .servers
        .iter()
        .find(|s| s.kind == Kind::RktCri)
        .ok_or_else(|| BenchError::scenario(SCENARIO, "no rkt-cri server"))?;
    let client_floor = || -> Result<Duration, BenchError> {
        let t = Instant::now();
        for _ in 0..7 {
            world.crictl(rkt, &["version"])?;
        }
        Ok(t.elapsed())
    };
    for _ in 0..warmup {
        for &(i, client) in &variants {
            check_interrupt()?;
            cycle(world, &world.servers[i], client)?;
        }
        client_floor()?;
    }
    let n = variants.len() + 1;
    for round in 0..iterations {
        for k in 0..n {
            check_interrupt()?;
            let idx = (round + k) % n;
            let Some(&(i, client)) = variants.get(idx) else {
                floor.samples.push(client_floor()?);
                continue;
            };
            let (whole, up, down, cpu) = cycle(world, &world.servers[i], client)?;
            let c = &mut out[idx];
            c.whole.samples.push(whole);
            c.whole.cpu.push(cpu);
            c.up.samples.push(up);
            c.down.samples.push(down);
        }
    }
    Ok((out, floor))
}

/// The role of process `pid` of `server`, or `None` for a container's own process.
fn role(server: &Server, pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = comm.trim();
    if comm == "sleep" {
        return None;
    }
    if pid == server.pid {
        return Some(format!("the server ({})", server.kind.label()));
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| comm.to_string());
    let exe = exe.trim_end_matches(" (deleted)").to_string();
    if exe == "rkt-cri" {
        let sub = args
            .get(1)
            .filter(|a| !a.starts_with('-'))
            .cloned()
            .unwrap_or_default();
        return Some(format!("rkt-cri {sub}").trim_end().to_string());
    }
    Some(exe)
}

/// `Pss` and `Rss` of `/proc/PID/smaps_rollup`, in KiB.
fn pss_rss(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("Pss:"), field("Rss:"))
}

/// The memory of every process in `server`'s cgroups, by role.
pub fn memory(server: &Server) -> Memory {
    let mut m = Memory::default();
    let mut roles: Vec<(String, usize, u64, u64)> = Vec::new();
    for pid in server.cgroup.processes() {
        let (pss, rss) = pss_rss(pid);
        match role(server, pid) {
            None => {
                m.workload_pss_kib += pss;
                m.workload_count += 1;
            }
            Some(r) => {
                m.pss_kib += pss;
                m.rss_kib += rss;
                match roles.iter_mut().find(|x| x.0 == r) {
                    Some(x) => {
                        x.1 += 1;
                        x.2 += pss;
                        x.3 += rss;
                    }
                    None => roles.push((r, 1, pss, rss)),
                }
            }
        }
    }
    roles.sort_by_key(|r| std::cmp::Reverse(r.2));
    m.roles = roles;
    m
}

/// One round of scenario 12 (and 13 with `measure_memory`) against `server`.
fn many_round(
    world: &World,
    server: &Server,
    pods: usize,
    measure_memory: bool,
) -> Result<ManyRound, BenchError> {
    let mut round = ManyRound::default();
    let configs: Vec<(String, String)> = (0..pods)
        .map(|_| world.configs(server))
        .collect::<Result<_, _>>()?;
    if measure_memory {
        round.idle = Some(memory(server));
    }
    let client = server.client()?;
    let cpu0 = server.cgroup.usage();
    let client0 = client.cpu();
    // One goroutine per pod in the one client, released together, each sending
    // RunPodSandbox, CreateContainer and StartContainer in turn on the one connection.
    let up = client.up_many(&configs)?;
    round.start = up.took;
    round.start_cpu = server.cgroup.usage().saturating_sub(cpu0);
    round.client_cpu = client.cpu().saturating_sub(client0);
    let mut started = 0;
    let mut ids = Vec::new();
    for p in up.pods {
        match p.error {
            None => started += 1,
            Some(e) => round.errors.push(match &p.pod {
                Some(pod) => format!("pod {pod}: {e}"),
                None => e,
            }),
        }
        ids.extend(p.pod);
    }
    round.running = wait_running(server, started, Duration::from_secs(5))
        .unwrap_or_else(|_| running_sleeps(server));
    round.not_running = started.saturating_sub(round.running);
    if measure_memory {
        // The steady state: start-up work done, idle threads gone (tokio's blocking
        // threads after 10 s), Go's collector run.
        std::thread::sleep(MEMORY_SETTLE);
        round.memory = Some(memory(server));
    }
    let cpu1 = server.cgroup.usage();
    let (stop, errors) = client.down_many(&ids)?;
    round.stop = stop;
    round.errors.extend(errors);
    // Pods that failed half-way, if any, go too (untimed); a lease they leave is a pod
    // that failed to go.
    round.errors.extend(world.remove_all(server)?);
    round.stop_cpu = server.cgroup.usage().saturating_sub(cpu1);
    Ok(round)
}

/// Scenarios 12 and 13: `rounds` rounds of `pods` pods at once per runtime, the order turning
/// each round.
pub fn many(
    world: &World,
    pods: usize,
    rounds: usize,
    measure_memory: bool,
) -> Result<Vec<ManyRuntime>, BenchError> {
    let mut out: Vec<ManyRuntime> = world
        .servers
        .iter()
        .map(|s| ManyRuntime {
            kind: s.kind,
            rounds: Vec::new(),
        })
        .collect();
    let n = world.servers.len();
    for round in 0..rounds {
        for k in 0..n {
            check_interrupt()?;
            let idx = (round + k) % n;
            let r = many_round(world, &world.servers[idx], pods, measure_memory)?;
            out[idx].rounds.push(r);
        }
    }
    Ok(out)
}
