//! Scenario 6, a busy host: the pod cycle (`rkt run`, the scripted libcni cycle and the
//! plugin floor) while 0, 250 and 1,000 other pods run, on a network like the built-in
//! `default` (ptp with `ipMasq`, host-local, portmap): every other pod adds its NAT chain
//! and rules, which is what makes a busy host's firewall slow. Plus the throughput of
//! starting all 1,000 pods at once and of stopping them all at once, with the failures.
//!
//! The cycles run in rounds of three at the same load and the same moment, `rkt run` always
//! next to the floor, and rkt's excess over the floor is taken per round: the median of
//! those differences, with its order-statistic 95% interval, is what a shared machine's
//! slow minutes cannot fake, since they slow both halves of a pair. Rounds go on until that
//! interval is within ±1 ms or the load's time budget is spent.
//!
//! Order: the loads from the smallest up, each started at once, left to settle (`sync`,
//! then 20 s), measured and stopped at once (the largest's start and stop timed).
//! host-local keeps its reservations in the workspace; the masquerading rules go with the
//! pods. At the end `rkt gc` runs and the
//! leak checker looks for anything of the scenario's pods and networks left on the host;
//! should the scenario fail, the pods still running get SIGTERM and are waited for.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::cycle;
use crate::error::BenchError;
use crate::proc::{check_interrupt, run};
use crate::scenarios::{WhatIf, CANDIDATE, WHAT_IF_NO_FSYNC};
use crate::stats::{children_cpu, median_ci, median_f64, Series, Variant};
use crate::workspace::{write_json, Workspace};

/// The network of the scenario.
pub const BUSY_NET: &str = "benchbusy";
pub const BUSY_SUBNET: &str = "10.250.0.0/16";
const BUSY_FILE: &str = "40-benchbusy.conflist";

/// Starting or stopping many pods at once.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub pods: usize,
    pub took: Duration,
    pub failures: Vec<String>,
}

impl Batch {
    pub fn per_second(&self) -> f64 {
        self.pods as f64 / self.took.as_secs_f64().max(1e-9)
    }
}

/// Scenario 6's figures.
#[derive(Debug, Default)]
pub struct BusyResult {
    /// Per load (other pods running), in increasing order.
    pub loads: Vec<LoadRun>,
    /// The largest load started at once, and stopped at once.
    pub start_all: Batch,
    pub stop_all: Batch,
    /// The time each load's rounds may take at most.
    pub budget: Duration,
    /// What the scenario left on the host after its last pods stopped and `rkt gc` ran
    /// (the leak checker's findings, and pod cgroups): must be empty.
    pub leaks: Vec<String>,
    /// Whether the leak check ran (it does once every load was measured).
    pub leak_checked: bool,
}

/// The pod cycles at one load, run in rounds of three (`rkt run`, the plugin floor, the
/// scripted libcni cycle; `rkt run` always next to the floor), and the per-round
/// differences, which a slow minute of the shared machine shifts alike.
#[derive(Debug, Default)]
pub struct LoadRun {
    pub load: usize,
    /// rkt run, scripted libcni, plugin floor (in that order, as scenario 1's).
    pub series: Vec<Series>,
    /// Per round, in seconds: `rkt run` − floor, libcni − floor, and the CPU time of
    /// `rkt run`'s processes − the floor's.
    pub excess: Vec<f64>,
    pub libcni_excess: Vec<f64>,
    pub cpu_excess: Vec<f64>,
    /// Per round: `rkt run` / libcni.
    pub ratio: Vec<f64>,
    /// Per round, in seconds, when the what-if library was built: `rkt run` − the same
    /// `rkt run` with `fsync` a no-op (run first or last in the round, in turn): what the
    /// records' `fsync`s cost at this load and this moment.
    pub fsync_cost: Vec<f64>,
    /// Per round, in seconds, with `--candidate-rkt`: the candidate's `rkt run` − `rkt run`,
    /// in wall and in CPU time (the candidate runs first or last in the round, in turn).
    pub candidate_diff: Vec<f64>,
    pub candidate_cpu_diff: Vec<f64>,
    /// The 1-minute load average (`/proc/loadavg`) before and after the rounds.
    pub loadavg: (f64, f64),
    /// The time the rounds took.
    pub took: Duration,
    /// The firewall at this load.
    pub nat: NatCost,
}

/// What one `iptables` run costs at a load: the lines of `iptables -t nat -S` (the rules and
/// chains of the `nat` table), and the median of 5 timed runs of it and of listing a single
/// chain (`iptables -t nat -S
/// POSTROUTING`, what each plugin call pays at least once with the nftables backend).
#[derive(Debug, Default, Clone)]
pub struct NatCost {
    pub lines: usize,
    pub save: Duration,
    pub list_chain: Duration,
}

/// The order of each round, repeating: `rkt run` and the floor are always neighbours (each
/// first half the time), libcni first or last.
const ORDERS: [[usize; 3]; 4] = [[0, 2, 1], [2, 0, 1], [1, 0, 2], [1, 2, 0]];

/// Runs the scenario for `loads` (e.g. 0, 250, 1000): at each, rounds until the median
/// excess's 95% interval is within ±1 ms, or `budget` is spent (at least `min_rounds`).
pub fn busy_host(
    ws: &Workspace,
    loads: &[usize],
    warmup: usize,
    min_rounds: usize,
    budget: Duration,
    what_if: Option<&WhatIf>,
) -> Result<BusyResult, BenchError> {
    let conf = ws.net_d().join(BUSY_FILE);
    write_json(&conf, &conflist(ws))?;
    let cni_path = ws.tools.cni_bin.display().to_string();
    let mut res = BusyResult {
        budget,
        ..BusyResult::default()
    };
    let mut loads: Vec<usize> = loads.to_vec();
    loads.sort();
    let top = loads.last().copied().unwrap_or(0);
    let uuid_dir = ws.root().join("busy-uuids");
    let guard = leak_check::Guard::new(
        leak_check::Ctx::new(&ws.data)
            .network(BUSY_NET)
            .subnet(BUSY_SUBNET)
            .uuid_files_in(&uuid_dir)
            .hostlocal_dir(ws.ipam.join("busy"))
            .cache_dir(&ws.libcni_cache),
    );
    let measure = |load: usize| -> Result<LoadRun, BenchError> {
        eprintln!("rkt-bench: busy host: the pod cycle with {load} other pods");
        let mut variants: Vec<Variant> = vec![
            ("rkt run", Box::new(|| cycle::rkt(ws, BUSY_NET, &[]))),
            (
                "scripted libcni",
                Box::new(|| cycle::libcni(ws, &conf, &cni_path)),
            ),
            (
                "plugin floor",
                Box::new(|| floor_chain(ws, &conf, &cni_path)),
            ),
        ];
        let mut extras = Extras::default();
        if let Some(w) = what_if {
            let no_fsync = [("LD_PRELOAD", w.no_fsync.as_os_str())];
            extras.no_fsync = Some(variants.len());
            variants.push((
                WHAT_IF_NO_FSYNC,
                Box::new(move || cycle::rkt(ws, BUSY_NET, &no_fsync)),
            ));
        }
        if let Some(candidate) = &ws.tools.candidate_rkt {
            extras.candidate = Some(variants.len());
            variants.push((
                CANDIDATE,
                Box::new(move || cycle::rkt_binary(ws, candidate, &ws.data, BUSY_NET, &[])),
            ));
        }
        let nat = nat_cost();
        let mut run = rounds(&mut variants, extras, warmup, min_rounds, budget)?;
        run.load = load;
        run.nat = nat;
        eprintln!("rkt-bench: busy host: {}", summary(&run));
        Ok(run)
    };
    for &load in &loads {
        check_interrupt()?;
        if load == 0 {
            res.loads.push(measure(0)?);
            continue;
        }
        let (pods, started) = start_at_once(ws, load)?;
        if load == top {
            res.start_all = started;
        }
        settle();
        let measured = measure(load);
        let stopped = stop_at_once(ws, pods)?;
        if load == top {
            res.stop_all = stopped;
        }
        guard.remember();
        res.loads.push(measured?);
    }
    res.leaks = leaks_after_gc(ws, &guard, &uuid_dir);
    res.leak_checked = true;
    // The findings are in the report; the guard must not panic on them when dropped.
    std::mem::forget(guard);
    Ok(res)
}

/// How long the machine rests between starting a load's pods and the rounds at that load.
const SETTLE: Duration = Duration::from_secs(20);

/// Lets the start of many pods at once die down before the rounds: writes its dirty pages
/// out (`sync`), which the first rounds' `fsync`s would otherwise wait for, then rests
/// [`SETTLE`].
fn settle() {
    // SAFETY: sync has no arguments and no memory effects.
    unsafe { libc::sync() };
    std::thread::sleep(SETTLE);
}

/// Runs `rkt gc --grace-period=0s` and returns what is left: the leak checker's findings
/// (namespaces, links, routes, rules and chains, host-local leases, CNI cache entries, pods
/// still running) and any pod's cgroup (`/sys/fs/cgroup/*/rkt/<uuid>`).
fn leaks_after_gc(ws: &Workspace, guard: &leak_check::Guard, uuid_dir: &Path) -> Vec<String> {
    let mut args = ws.rkt_globals();
    args.extend(["gc".into(), "--grace-period=0s".into()]);
    let mut leaks = Vec::new();
    if let Err(e) = run(&ws.tools.rkt, &args, &[], None) {
        leaks.push(format!("rkt gc failed: {}", cni::error::chain(&e)));
    }
    leaks.extend(guard.leaked());
    let uuids: Vec<String> = std::fs::read_dir(uuid_dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .map(|u| u.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let controllers: Vec<PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
        .map(|d| d.flatten().map(|e| e.path().join("rkt")).collect())
        .unwrap_or_default();
    for uuid in &uuids {
        for c in &controllers {
            if c.join(uuid).exists() {
                leaks.push(format!("cgroup {}", c.join(uuid).display()));
            }
        }
    }
    leaks
}

/// One line on a load's rounds, for the terminal.
fn summary(r: &LoadRun) -> String {
    let ms = |v: f64| v * 1e3;
    let ci = median_ci(&r.excess)
        .map(|(lo, hi)| format!(" [{:+.1}, {:+.1}]", ms(lo), ms(hi)))
        .unwrap_or_default();
    format!(
        "{} other pods: {} rounds in {:.0} s, excess {:+.1} ms{ci}, rkt/libcni {:.2}, load {:.2}→{:.2}",
        r.load,
        r.excess.len(),
        r.took.as_secs_f64(),
        ms(median_f64(&r.excess)),
        median_f64(&r.ratio),
        r.loadavg.0,
        r.loadavg.1
    )
}

/// The 1-minute load average.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Where the optional variants are among a load's, after rkt, libcni and the floor.
#[derive(Debug, Default, Clone, Copy)]
struct Extras {
    no_fsync: Option<usize>,
    candidate: Option<usize>,
}

/// Runs `variants` (rkt, libcni, floor, then the `extras`) `warmup` rounds unrecorded, then
/// rounds in [`ORDERS`] until the excess's interval is within ±1 ms after at least
/// `min_rounds`, or `budget` is spent.
fn rounds(
    variants: &mut [Variant<'_>],
    extras: Extras,
    warmup: usize,
    min_rounds: usize,
    budget: Duration,
) -> Result<LoadRun, BenchError> {
    for _ in 0..warmup {
        for (_, run) in variants.iter_mut() {
            check_interrupt()?;
            run()?;
        }
    }
    let mut r = LoadRun {
        series: variants
            .iter()
            .map(|(label, _)| Series {
                label: label.to_string(),
                ..Series::default()
            })
            .collect(),
        loadavg: (loadavg(), 0.0),
        ..LoadRun::default()
    };
    let start = Instant::now();
    for round in 0.. {
        let mut wall = vec![0.0f64; variants.len()];
        let mut cpu = vec![0.0f64; variants.len()];
        // The extra variants go first or last in turn, each on its own side.
        let mut order: Vec<usize> = ORDERS[round % ORDERS.len()].to_vec();
        for (k, idx) in (3..variants.len()).enumerate() {
            if (round + k) % 2 == 0 {
                order.insert(0, idx);
            } else {
                order.push(idx);
            }
        }
        for idx in order {
            check_interrupt()?;
            let cpu_before = children_cpu();
            let d = (variants[idx].1)()?;
            let c = children_cpu().saturating_sub(cpu_before);
            r.series[idx].samples.push(d);
            r.series[idx].cpu.push(c);
            wall[idx] = d.as_secs_f64();
            cpu[idx] = c.as_secs_f64();
        }
        r.excess.push(wall[0] - wall[2]);
        r.libcni_excess.push(wall[1] - wall[2]);
        r.cpu_excess.push(cpu[0] - cpu[2]);
        r.ratio.push(wall[0] / wall[1].max(1e-9));
        if let Some(i) = extras.no_fsync {
            r.fsync_cost.push(wall[0] - wall[i]);
        }
        if let Some(i) = extras.candidate {
            r.candidate_diff.push(wall[i] - wall[0]);
            r.candidate_cpu_diff.push(cpu[i] - cpu[0]);
        }
        let n = round + 1;
        let narrow = || median_ci(&r.excess).is_some_and(|(lo, hi)| hi - lo <= 0.002);
        if start.elapsed() >= budget || (n >= min_rounds && n % 10 == 0 && narrow()) {
            break;
        }
    }
    r.took = start.elapsed();
    r.loadavg.1 = loadavg();
    Ok(r)
}

/// A network like the built-in `default`, its reservations in the workspace.
fn conflist(ws: &Workspace) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": BUSY_NET,
        "plugins": [
            {"type": "ptp", "ipMasq": true,
             "ipam": {"type": "host-local", "subnet": BUSY_SUBNET,
                      "routes": [{"dst": "0.0.0.0/0"}],
                      "dataDir": ws.ipam.join("busy").display().to_string()}},
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
        ]
    })
}

/// A background pod: its `rkt run` and the file its UUID goes to.
struct Background {
    child: Child,
    uuid_file: PathBuf,
}

/// The background pods of a load. Should the scenario fail or be interrupted before they
/// are stopped, dropping them sends each `rkt run` still there SIGTERM (which tears its pod
/// down, or abandons its start) and waits for it.
struct Fleet(Vec<Background>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for pod in &self.0 {
            // SAFETY: kill has no memory effects; the PID is our child's, not yet reaped.
            unsafe { libc::kill(pod.child.id() as libc::pid_t, libc::SIGTERM) };
        }
        for pod in &mut self.0 {
            let _ = pod.child.wait();
        }
    }
}

/// Starts `n` sleeping pods at once; returns them once every one runs its app.
fn start_at_once(ws: &Workspace, n: usize) -> Result<(Fleet, Batch), BenchError> {
    eprintln!("rkt-bench: busy host: starting {n} pods at once");
    let dir = ws.root().join("busy-uuids");
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
    let start = Instant::now();
    let mut fleet = Fleet(Vec::with_capacity(n));
    let pods = &mut fleet.0;
    for i in 0..n {
        let uuid_file = dir.join(format!("uuid-{i}-{}", start.elapsed().as_nanos()));
        let args = cycle::rkt_run_args(
            ws,
            BUSY_NET,
            &[format!("--uuid-file-save={}", uuid_file.display())],
            &["sleep", "1000000"],
        );
        let child = Command::new(&ws.tools.rkt)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| BenchError::Spawn {
                program: ws.tools.rkt.display().to_string(),
                source,
            })?;
        pods.push(Background { child, uuid_file });
    }
    let mut failures = Vec::new();
    let pods_dir = ws.data.join("pods");
    let mut running = vec![false; n];
    while running.iter().any(|r| !r) {
        check_interrupt()?;
        for (i, pod) in pods.iter_mut().enumerate() {
            if running[i] {
                continue;
            }
            if let Ok(Some(status)) = pod.child.try_wait() {
                failures.push(format!("a start failed ({status})"));
                running[i] = true;
                continue;
            }
            let Ok(uuid) = std::fs::read_to_string(&pod.uuid_file) else {
                continue;
            };
            let state = std::fs::read_to_string(pods_dir.join(uuid.trim()).join("state.json"));
            running[i] = state.is_ok_and(|s| s.contains("\"pid\""));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = start.elapsed();
    Ok((
        fleet,
        Batch {
            pods: n,
            took,
            failures,
        },
    ))
}

/// Stops `pods` at once (ten `rkt stop`s side by side) and waits for every `rkt run`; a
/// run that does not end with the app's SIGTERM status (143) and nothing on stderr failed.
fn stop_at_once(ws: &Workspace, mut fleet: Fleet) -> Result<Batch, BenchError> {
    let pods = std::mem::take(&mut fleet.0);
    eprintln!("rkt-bench: busy host: stopping {} pods at once", pods.len());
    let uuids: Vec<String> = pods
        .iter()
        .filter_map(|p| std::fs::read_to_string(&p.uuid_file).ok())
        .map(|u| u.trim().to_string())
        .collect();
    let start = Instant::now();
    let mut stops = Vec::new();
    for chunk in uuids.chunks(uuids.len().div_ceil(10).max(1)) {
        let mut args = ws.rkt_globals();
        args.push("stop".into());
        args.extend(chunk.iter().cloned());
        stops.push(
            Command::new(&ws.tools.rkt)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| BenchError::Spawn {
                    program: ws.tools.rkt.display().to_string(),
                    source,
                })?,
        );
    }
    let mut failures = Vec::new();
    for stop in stops {
        if let Ok(out) = stop.wait_with_output() {
            if !out.status.success() {
                failures.push(format!(
                    "rkt stop: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    let n = pods.len();
    for pod in pods {
        if let Ok(out) = pod.child.wait_with_output() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if out.status.code() != Some(143) || !err.is_empty() {
                failures.push(format!("rkt run {:?}: {err}", out.status.code()));
            }
        }
    }
    Ok(Batch {
        pods: n,
        took: start.elapsed(),
        failures,
    })
}

/// The firewall's size and the cost of one `iptables` run now (zeros when iptables cannot
/// run).
fn nat_cost() -> NatCost {
    let timed = |args: &[&str]| -> (Duration, usize) {
        let mut times = Vec::new();
        let mut lines = 0;
        for _ in 0..5 {
            let start = Instant::now();
            let Ok(out) = Command::new("iptables").args(args).output() else {
                return (Duration::ZERO, 0);
            };
            times.push(start.elapsed());
            lines = out.stdout.iter().filter(|b| **b == b'\n').count();
        }
        let s = Series {
            samples: times,
            ..Series::default()
        };
        (s.median(), lines)
    };
    let (save, lines) = timed(&["-w", "-t", "nat", "-S"]);
    let (list_chain, _) = timed(&["-w", "-t", "nat", "-S", "POSTROUTING"]);
    NatCost {
        lines,
        save,
        list_chain,
    }
}

/// The plugin floor of a chain: each plugin's ADD in order (each given the previous
/// result), then each DEL in reverse (given the final result), executed directly around
/// `ip netns add` and `ip netns del`.
pub fn floor_chain(ws: &Workspace, conf: &Path, cni_path: &str) -> Result<Duration, BenchError> {
    let bytes = std::fs::read(conf).map_err(|e| BenchError::io(conf, e))?;
    let list: Value = serde_json::from_slice(&bytes)
        .map_err(|e| BenchError::scenario("busy host", format!("{}: {e}", conf.display())))?;
    let plugins: Vec<Map<String, Value>> = list["plugins"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_object().cloned()).collect())
        .unwrap_or_default();
    let ns = ws.netns_name();
    let ns_path = format!("/run/netns/{ns}");
    let id = format!("bench-{ns}");
    let call = |plugin: &Map<String, Value>, command: &str, prev: Option<&Value>| {
        let mut config = plugin.clone();
        config.insert("name".into(), list["name"].clone());
        config.insert("cniVersion".into(), list["cniVersion"].clone());
        if let Some(prev) = prev {
            config.insert("prevResult".into(), prev.clone());
        }
        let ty = plugin.get("type").and_then(Value::as_str).unwrap_or("");
        let stdin = serde_json::to_vec(&config).expect("JSON serializes");
        run(
            &ws.tools.cni_bin.join(ty),
            &[] as &[&str],
            &[
                ("CNI_COMMAND", OsStr::new(command)),
                ("CNI_CONTAINERID", OsStr::new(&id)),
                ("CNI_NETNS", OsStr::new(&ns_path)),
                ("CNI_IFNAME", OsStr::new("eth0")),
                ("CNI_PATH", OsStr::new(cni_path)),
            ],
            Some(&stdin),
        )
    };
    let ip = &ws.tools.ip;
    let start = Instant::now();
    run(ip, &["netns", "add", &ns], &[], None)?;
    let mut prev: Option<Value> = None;
    let mut added = Ok(());
    for plugin in &plugins {
        match call(plugin, "ADD", prev.as_ref()) {
            Ok(out) => prev = serde_json::from_slice(&out.stdout).ok(),
            Err(e) => {
                added = Err(e);
                break;
            }
        }
    }
    let mut deleted = Ok(());
    for plugin in plugins.iter().rev() {
        if let Err(e) = call(plugin, "DEL", prev.as_ref()) {
            deleted = Err(e);
        }
    }
    let ns_deleted = run(ip, &["netns", "del", &ns], &[], None);
    let elapsed = start.elapsed();
    added?;
    deleted?;
    ns_deleted?;
    Ok(elapsed)
}
