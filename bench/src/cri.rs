//! Scenarios 11 to 13: the CRI server `rkt-cri` against Debian's containerd 1.6 with its CRI
//! plugin and runc, side by side in one run, both driven by the same client (`crictl` of
//! cri-tools 1.26.1), with the same images from the same registry and the same CNI
//! configuration, in the world of [`crate::cri_world`]:
//!
//! * 11, a pod's whole life: `crictl runp`, `create --no-pull`, `start`, then `stop`, `rm`,
//!   `stopp`, `rmp`, each a crictl process, the runtimes alternating cycle by cycle. Wall time
//!   is the client's (the seven crictl runs; whether the container's process runs is looked
//!   at in between, untimed); CPU time is that of the runtime's whole cgroup tree from the
//!   first command until every process of the pod is gone. A third variant, seven
//!   `crictl version` runs, shows the client's own share of the wall time.
//! * 12, `--cri-pods` (50) pods at once: as many threads each run `crictl run` (one process
//!   sending RunPodSandbox, CreateContainer and StartContainer in turn) for a pod of its own;
//!   throughput is pods over the time until the last StartContainer returned.
//!   Then the pods are stopped and removed at once (timed, for information).
//! * 13, memory with those pods running: the proportional set size (PSS, from
//!   `/proc/PID/smaps_rollup`) and RSS of every process in the runtime's cgroups (the server,
//!   containerd's shims and pause processes, rkt-cri's sandbox runners, pod inits and log
//!   copiers), the containers' own processes (`sleep`, the same on both) left out.
//!
//! Scenarios 12 and 13 run in rounds, the runtimes' order turning each round.

use std::time::{Duration, Instant};

use crate::cri_world::{Kind, Server, World};
use crate::error::BenchError;
use crate::proc::check_interrupt;
use crate::stats::Series;

pub const CLIENT_FLOOR: &str = "client floor: 7 × crictl version";

/// How long the pods of scenario 13 run before their memory is read.
const MEMORY_SETTLE: Duration = Duration::from_secs(15);

/// The longest the pods of a round may take to go after their removal.
const QUIET_LIMIT: Duration = Duration::from_secs(120);

fn scenario(message: String) -> BenchError {
    BenchError::Scenario {
        scenario: "CRI",
        message,
    }
}

/// Scenario 11's figures for one runtime.
#[derive(Debug, Default)]
pub struct CycleRuntime {
    pub label: String,
    pub version: String,
    /// The whole cycle's wall time (the seven crictl runs) and the runtime's CPU time.
    pub whole: Series,
    /// `runp` + `create` + `start` alone (wall).
    pub up: Series,
    /// `stop` + `rm` + `stopp` + `rmp` alone (wall).
    pub down: Series,
}

/// One round of scenarios 12 and 13 for one runtime.
#[derive(Debug, Default, Clone)]
pub struct ManyRound {
    /// Until every container runs.
    pub start: Duration,
    /// The runtime's CPU time meanwhile.
    pub start_cpu: Duration,
    /// The client's (every crictl's) CPU time meanwhile.
    pub client_cpu: Duration,
    /// Stopping and removing them all at once.
    pub stop: Duration,
    pub stop_cpu: Duration,
    /// Pods that failed to come up (their errors).
    pub errors: Vec<String>,
    /// Containers found running.
    pub running: usize,
    /// The memory of the runtime's processes with the pods running (scenario 13).
    pub memory: Option<Memory>,
    /// That of the server alone, before the pods.
    pub idle: Option<Memory>,
}

/// The memory of a runtime's processes, by role.
#[derive(Debug, Default, Clone)]
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
#[derive(Debug, Default)]
pub struct ManyRuntime {
    pub label: String,
    pub rounds: Vec<ManyRound>,
}

impl ManyRuntime {
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
    pub cycles: Vec<CycleRuntime>,
    pub floor: Option<Series>,
    pub pods: usize,
    pub many: Vec<ManyRuntime>,
    pub memory_measured: bool,
    /// What the cleanup found that the runtimes left.
    pub leftovers: Vec<String>,
}

impl CriResult {
    pub fn cycle(&self, label: &str) -> Option<&CycleRuntime> {
        self.cycles.iter().find(|c| c.label == label)
    }

    pub fn many_of(&self, label: &str) -> Option<&ManyRuntime> {
        self.many.iter().find(|c| c.label == label)
    }
}

/// Whether a container's process (`sleep`) is in `server`'s cgroups: `count` of them.
fn running_sleeps(server: &Server) -> usize {
    server
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
            return Err(scenario(format!(
                "{}: {found} of {n} containers' processes running {} ms after StartContainer returned",
                server.label,
                limit.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One pod's whole life against `server`: (whole, up, down, cpu).
fn cycle(
    world: &World,
    server: &Server,
) -> Result<(Duration, Duration, Duration, Duration), BenchError> {
    let (pod_cfg, ctr_cfg) = world.configs(server)?;
    let cpu0 = server.cgroup.usage();
    let t0 = Instant::now();
    let pod = world.crictl_id(server, &["runp", &pod_cfg])?;
    let ctr = world.crictl_id(server, &["create", "--no-pull", &pod, &ctr_cfg, &pod_cfg])?;
    world.crictl(server, &["start", &ctr])?;
    let up = t0.elapsed();
    // The container's process must run now (untimed look).
    wait_running(server, 1, Duration::from_secs(2))?;
    let t1 = Instant::now();
    world.crictl(server, &["stop", "--timeout", "0", &ctr])?;
    world.crictl(server, &["rm", &ctr])?;
    world.crictl(server, &["stopp", &pod])?;
    world.crictl(server, &["rmp", &pod])?;
    let down = t1.elapsed();
    server.wait_quiet(QUIET_LIMIT)?;
    let cpu = server.cgroup.usage().saturating_sub(cpu0);
    Ok((up + down, up, down, cpu))
}

/// Scenario 11: `warmup` unrecorded cycles each, then `iterations` rounds, the order of
/// the runtimes and the client floor turning each round.
pub fn cycles(
    world: &World,
    warmup: usize,
    iterations: usize,
) -> Result<(Vec<CycleRuntime>, Series), BenchError> {
    let mut out: Vec<CycleRuntime> = world
        .servers
        .iter()
        .map(|s| CycleRuntime {
            label: s.label.to_string(),
            version: s.version.clone(),
            whole: Series {
                label: format!(
                    "{}: runp + create + start + stop + rm + stopp + rmp",
                    s.label
                ),
                ..Series::default()
            },
            up: Series {
                label: format!("{}: runp + create + start", s.label),
                ..Series::default()
            },
            down: Series {
                label: format!("{}: stop + rm + stopp + rmp", s.label),
                ..Series::default()
            },
        })
        .collect();
    let mut floor = Series {
        label: CLIENT_FLOOR.to_string(),
        ..Series::default()
    };
    let rkt = world
        .servers
        .iter()
        .find(|s| s.kind == Kind::RktCri)
        .ok_or_else(|| scenario("no rkt-cri server".into()))?;
    let client_floor = || -> Result<Duration, BenchError> {
        let t = Instant::now();
        for _ in 0..7 {
            world.crictl(rkt, &["version"])?;
        }
        Ok(t.elapsed())
    };
    for _ in 0..warmup {
        for s in &world.servers {
            check_interrupt()?;
            cycle(world, s)?;
        }
        client_floor()?;
    }
    let n = world.servers.len() + 1;
    for round in 0..iterations {
        for k in 0..n {
            check_interrupt()?;
            let idx = (round + k) % n;
            if idx == world.servers.len() {
                floor.samples.push(client_floor()?);
                continue;
            }
            let (whole, up, down, cpu) = cycle(world, &world.servers[idx])?;
            let c = &mut out[idx];
            c.whole.samples.push(whole);
            c.whole.cpu.push(cpu);
            c.up.samples.push(up);
            c.down.samples.push(down);
        }
    }
    Ok((out, floor))
}

/// Runs `f(i)` for `0..n` on `n` threads released together; returns each result.
fn at_once<T: Send>(
    n: usize,
    f: impl Fn(usize) -> Result<T, BenchError> + Sync,
) -> Vec<Result<T, BenchError>> {
    let barrier = std::sync::Barrier::new(n);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    f(i)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(scenario("a client thread panicked".into())))
            })
            .collect()
    })
}

/// The role of process `pid` of `server`, or `None` for a container's own process.
fn role(server: &Server, pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = comm.trim();
    if comm == "sleep" {
        return None;
    }
    if pid == server.pid {
        return Some(format!("the server ({})", server.label));
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
    for pid in server.processes() {
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
    let cpu0 = server.cgroup.usage();
    let t0 = Instant::now();
    let client0 = crate::stats::children_cpu();
    let results = at_once(pods, |i| {
        let (pod_cfg, ctr_cfg) = &configs[i];
        // One crictl per pod: `run` sends RunPodSandbox, CreateContainer and StartContainer
        // in turn on one connection, and prints the container's ID.
        world.crictl_id(server, &["run", "--no-pull", ctr_cfg, pod_cfg])
    });
    round.start = t0.elapsed();
    round.start_cpu = server.cgroup.usage().saturating_sub(cpu0);
    round.client_cpu = crate::stats::children_cpu().saturating_sub(client0);
    let mut started = 0;
    for r in results {
        match r {
            Ok(_) => started += 1,
            Err(e) => round.errors.push(cni::error::chain(&e)),
        }
    }
    round.running = wait_running(server, started, Duration::from_secs(5))
        .unwrap_or_else(|_| running_sleeps(server));
    if measure_memory {
        // The steady state: start-up work done, idle threads gone (tokio's blocking
        // threads after 10 s), Go's collector run.
        std::thread::sleep(MEMORY_SETTLE);
        round.memory = Some(memory(server));
    }
    let ids: Vec<String> = String::from_utf8_lossy(&world.crictl(server, &["pods", "-q"])?.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let cpu1 = server.cgroup.usage();
    let t1 = Instant::now();
    let stopped = at_once(ids.len(), |i| {
        world.crictl(server, &["stopp", &ids[i]])?;
        world.crictl(server, &["rmp", &ids[i]])?;
        Ok(())
    });
    round.stop = t1.elapsed();
    for r in stopped {
        if let Err(e) = r {
            round.errors.push(cni::error::chain(&e));
        }
    }
    // Pods that failed half-way, if any, go too (untimed).
    world.remove_all(server)?;
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
            label: s.label.to_string(),
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
