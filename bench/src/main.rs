//! `rkt-bench`: side-by-side benchmarks of `rkt` and crates/cni against the reference Go
//! libcni, as docs/PERFORMANCE.md describes. `bench/run` builds everything and runs it.
//!
//! Modules: [`workspace`] (temporary directories, networks, cleanup), [`cycle`] (one pod
//! cycle three ways), [`scenarios`] (scenarios 1 to 5), [`busy`] (scenario 6, a busy host), [`rss`] (per-process peak RSS via
//! ptrace), [`stats`] (medians, alternation), [`report`] (the markdown table), [`proc`]
//! (running programs, Ctrl-C), [`pull`] (scenario 7, pulling an image against skopeo and
//! umoci), [`image_start`] (scenario 8, a pod from a stored image against `--rootfs`),
//! [`app_start`] (scenario 9, an app into a running sandbox against a whole pod),
//! [`log_throughput`] (scenario 10, an app's log against podman's conmon), [`cpu_cgroup`]
//! (CPU time of whole process trees), [`cri_world`], [`cri_client`] and [`cri`] (scenarios
//! 11 to 13, `rkt-cri` against containerd; the one-process CRI client).

mod app_start;
mod busy;
mod cpu_cgroup;
mod cri;
mod cri_client;
mod cri_world;
mod cycle;
mod error;
mod image_start;
mod log_throughput;
mod proc;
mod pull;
mod report;
mod rss;
mod scenarios;
mod stats;
mod workspace;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use error::BenchError;
use report::Results;
use workspace::{Tools, Workspace, NOOP_NET, PTP_NET};

#[derive(Parser, Debug)]
#[command(
    name = "rkt-bench",
    about = "Benchmarks rkt and crates/cni side by side with the reference Go libcni (run as root)",
    after_help = "Scenarios: 1 pod cycle with ptp + host-local, 2 do-nothing plugin (runtime overhead), \
3 loading a directory of configurations, 4 many pods at once, 5 peak RSS of rkt run, \
6 a busy host (the pod cycle with 0, 250, 1,000 other pods; not in the default set: slow), \
7 pulling a 50 MB image from a local registry: rkt fetch + unpack vs skopeo copy + umoci unpack \
(not in the default set; needs docker-registry, skopeo, umoci, busybox-static), \
8 starting a pod from a stored image vs the same pod with --rootfs of the unpacked tree \
(not in the default set; needs umoci, busybox-static), \
9 an app added and started into a running sandbox vs rkt run of the same app, --net=default and none \
(not in the default set), \
10 log throughput: 1 GiB of lines through rkt's log copiers vs podman's conmon (k8s-file) \
(not in the default set; needs busybox-static, podman and runc for the peer). \
11 a CRI pod's life (RunPodSandbox, CreateContainer, StartContainer, StopContainer, RemoveContainer, \
StopPodSandbox, RemovePodSandbox) through one long-lived client process with one gRPC connection, as kubelet, \
and for information through crictl (a process per command, its own floor beside): rkt-cri vs containerd 1.6 + runc, \
12 --cri-pods pods at once through the CRI (the one-process client, a goroutine per pod), rkt-cri vs containerd, \
13 memory of the runtime with those pods running (PSS and RSS), rkt-cri vs containerd \
(11 to 13 not in the default set; need containerd, runc, docker-registry, skopeo, crictl, the \
critest harness's images and --criclient, built with golang-go by bench/criclient/build.sh, see docs/PERFORMANCE.md). \
bench/run builds everything and runs this."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    /// The rkt binary.
    #[arg(long, default_value = "target/release/rkt")]
    rkt: PathBuf,
    /// The reference libcni driver built by tools/libcni-driver/build.sh.
    #[arg(long, default_value = "target/bench/libcni-driver")]
    libcni_driver: PathBuf,
    /// The directory holding the cni-test-plugin binary (the do-nothing plugin).
    #[arg(long, default_value = "target/release")]
    test_plugin_dir: PathBuf,
    /// The directory of the real CNI plugins.
    #[arg(long, default_value = "/usr/lib/cni")]
    cni_bin: PathBuf,
    /// Timed runs per variant in scenarios 1 to 3.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Unrecorded warm-up runs per variant.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Pods started at once in scenario 4.
    #[arg(long, default_value_t = 64)]
    pods: usize,
    /// Batches of scenario 4 (each: the pods at once, then one after another).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Configuration files in scenario 3.
    #[arg(long, default_value_t = 10_000)]
    configs: usize,
    /// Traced runs in scenario 5.
    #[arg(long, default_value_t = 5)]
    memory_runs: usize,
    /// Other pods running during scenario 6's pod cycles (the largest is also started and
    /// stopped all at once, timed).
    #[arg(long, value_delimiter = ',', default_value = "0,250,1000")]
    busy_loads: Vec<usize>,
    /// The most seconds scenario 6 spends on the pod cycles at each load (rounds stop
    /// earlier once the 95% interval of rkt's median excess over the floor is within ±1 ms;
    /// at least --iterations rounds).
    #[arg(long, default_value_t = 150)]
    busy_seconds: u64,
    /// Timed pulls per variant in scenario 7, cold and warm each (after one warm-up).
    #[arg(long, default_value_t = 5)]
    pull_iterations: usize,
    /// The networks of scenario 9's sandbox and pods (`rkt app sandbox --net=…`).
    #[arg(long, value_delimiter = ',', default_value = "default,none")]
    app_nets: Vec<String>,
    /// MiB of lines the app of scenario 10 writes to its log per run.
    #[arg(long, default_value_t = 1024)]
    log_mib: u64,
    /// Timed runs per variant in scenario 10 (after one warm-up).
    #[arg(long, default_value_t = 6)]
    log_iterations: usize,
    /// The rkt-cri binary (scenarios 11 to 13).
    #[arg(long, default_value = "target/release/rkt-cri")]
    rkt_cri: PathBuf,
    /// The crictl binary (cri-tools 1.26.1, built by ../shared/cri-tools/build DIR) that
    /// pulls the images, reads the versions, drives scenario 11's crictl variant and
    /// cleans up, against both CRI runtimes.
    #[arg(long, default_value = "/tmp/critest-bin/crictl")]
    crictl: PathBuf,
    /// The one-process CRI client of scenarios 11 and 12 (bench/criclient, built by
    /// `bench/criclient/build.sh OUT`; bench/run builds it when 11 to 13 are asked for).
    #[arg(long, default_value = "target/bench/criclient")]
    criclient: PathBuf,
    /// The critest harness's OCI layout holding pause:3.6 and busybox:1.29-2 (built by
    /// `python3 ../shared/critest/images.py build`), pushed to the scenarios' own registry.
    #[arg(long, default_value = "/tmp/critest-images/oci")]
    cri_images: PathBuf,
    /// Timed pod cycles per runtime in scenario 11.
    #[arg(long, default_value_t = 20)]
    cri_cycles: usize,
    /// Pods started at once in scenarios 12 and 13.
    #[arg(long, default_value_t = 50)]
    cri_pods: usize,
    /// Rounds of scenarios 12 and 13 per runtime.
    #[arg(long, default_value_t = 3)]
    cri_rounds: usize,
    /// Scenarios to run, e.g. `1,3` (6, the busy host, takes minutes: ask for it).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5")]
    only: Vec<u8>,
    /// Another rkt binary (e.g. a patched build) to time next to --rkt in scenarios 1
    /// and 2, in the same alternating runs and the same data directory, in scenario 6's
    /// rounds, and as a fifth variant of scenario 10 (its `rkt run --stdout=log`).
    #[arg(long)]
    candidate_rkt: Option<PathBuf>,
    /// Leave out the what-if variants of scenarios 1 and 2 (`rkt run` with fsync made a
    /// no-op, and that with the data directory on tmpfs), which show what those cost.
    #[arg(long)]
    no_what_if: bool,
    /// Where to write the markdown report.
    #[arg(long, default_value = "target/bench/results.md")]
    out: PathBuf,
    /// Also put the report into this file between its bench:results markers
    /// (docs/PERFORMANCE.md).
    #[arg(long)]
    update_doc: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Load a configuration directory with crates/cni and pick a network, printing its name
    /// and the microseconds loading took (scenario 3's measured process).
    LoadDir { dir: PathBuf, name: String },
    /// Unpack every layer of image ID in the image store STORE as a pod's root filesystem
    /// needs them (scenario 7's measured step after `rkt fetch`).
    UnpackLayers { store: PathBuf, id: String },
}

fn main() {
    let cli = Cli::parse();
    if let Some(Sub::LoadDir { dir, name }) = &cli.command {
        match scenarios::load_dir_command(dir, name) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("rkt-bench: {}", cni::error::chain(&e));
                std::process::exit(1);
            }
        }
        return;
    }
    if let Some(Sub::UnpackLayers { store, id }) = &cli.command {
        match pull::unpack_layers_command(store, id) {
            Ok(dirs) => println!("{dirs}"),
            Err(e) => {
                eprintln!("rkt-bench: unpacking {id} in {}: {e}", store.display());
                std::process::exit(1);
            }
        }
        return;
    }
    proc::install_interrupt_handler();
    match bench(&cli) {
        Ok(report) => println!("{report}"),
        Err(e) => {
            eprintln!("rkt-bench: {}", cni::error::chain(&e));
            std::process::exit(1);
        }
    }
}

fn absolute(p: &std::path::Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn bench(cli: &Cli) -> Result<String, BenchError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(BenchError::NotRoot);
    }
    let self_exe = std::env::current_exe().map_err(|e| BenchError::io("/proc/self/exe", e))?;
    let mut r = Results {
        iterations: cli.iterations,
        warmup: cli.warmup,
        ..Results::default()
    };
    let note = |what: &str| eprintln!("rkt-bench: {what}");
    if cli.only.contains(&7) {
        note("scenario 7: pulling an image, rkt vs skopeo + umoci");
        r.pull = Some(pull::image_pull(
            &absolute(&cli.rkt),
            &self_exe,
            1,
            cli.pull_iterations,
        )?);
    }
    if cli.only.contains(&8) {
        note("scenario 8: a pod from a stored image vs --rootfs of the unpacked tree");
        r.image_start = Some(image_start::image_start(
            &absolute(&cli.rkt),
            cli.warmup,
            cli.iterations,
        )?);
    }
    if cli.only.contains(&9) {
        note("scenario 9: an app into a running sandbox vs a whole pod");
        let nets: Vec<&str> = cli.app_nets.iter().map(String::as_str).collect();
        r.app_start = Some(app_start::app_start(
            &absolute(&cli.rkt),
            &nets,
            cli.warmup,
            cli.iterations,
        )?);
    }
    if cli.only.contains(&10) {
        note(&format!(
            "scenario 10: {} MiB through an app's log, rkt vs podman",
            cli.log_mib
        ));
        let candidate = cli.candidate_rkt.as_deref().map(absolute);
        r.logs = Some(log_throughput::log_throughput(
            &absolute(&cli.rkt),
            candidate.as_deref(),
            cli.log_mib,
            1,
            cli.log_iterations,
        )?);
    }
    if cli.only.iter().any(|n| (11..=13).contains(n)) {
        r.cri = Some(cri_scenarios(cli)?);
    }
    if cli.only.iter().any(|n| (1..=6).contains(n)) {
        network_scenarios(cli, &self_exe, &mut r)?;
    }
    finish(cli, &r)
}

/// Scenarios 11 to 13, which share the CRI world: a namespace, a registry, both servers.
fn cri_scenarios(cli: &Cli) -> Result<cri::CriResult, BenchError> {
    let note = |what: &str| eprintln!("rkt-bench: {what}");
    note("scenarios 11-13: starting containerd and rkt-cri in a private network namespace");
    let tools = cri_world::CriTools {
        rkt_cri: absolute(&cli.rkt_cri),
        crictl: absolute(&cli.crictl),
        criclient: absolute(&cli.criclient),
        layout: absolute(&cli.cri_images),
        cni_bin: absolute(&cli.cni_bin),
    };
    let world = cri_world::World::new(&tools)?;
    let mut res = cri::CriResult {
        pods: cli.cri_pods,
        ..cri::CriResult::default()
    };
    let wants = |n: u8| cli.only.contains(&n);
    if wants(11) {
        note("scenario 11: a CRI pod's life, rkt-cri vs containerd");
        let (cycles, floor) = cri::cycles(&world, cli.warmup, cli.cri_cycles)?;
        res.cycles = cycles;
        res.floor = floor;
    }
    if wants(12) || wants(13) {
        note(&format!(
            "scenarios 12-13: {} pods at once, rkt-cri vs containerd",
            cli.cri_pods
        ));
        res.many = cri::many(&world, cli.cri_pods, cli.cri_rounds, wants(13))?;
    }
    res.leftovers = world.close();
    Ok(res)
}

/// Scenarios 1 to 6, which share a workspace of networks and the libcni driver.
fn network_scenarios(
    cli: &Cli,
    self_exe: &std::path::Path,
    r: &mut Results,
) -> Result<(), BenchError> {
    let tools = Tools {
        rkt: absolute(&cli.rkt),
        libcni: absolute(&cli.libcni_driver),
        test_plugin_dir: absolute(&cli.test_plugin_dir),
        cni_bin: absolute(&cli.cni_bin),
        ip: scenarios::tool("ip", "install iproute2")?,
        true_bin: scenarios::tool("true", "install coreutils")?,
        candidate_rkt: cli.candidate_rkt.as_deref().map(absolute),
    };
    tools.check()?;
    let ws = Workspace::new(tools)?;
    scenarios::check_noop_plugin(&ws)?;

    let wants = |n: u8| cli.only.contains(&n);
    let what_if = if cli.no_what_if {
        None
    } else {
        scenarios::WhatIf::prepare(&ws)
    };
    let note = |what: &str| eprintln!("rkt-bench: {what}");
    if wants(1) {
        note("scenario 1: pod cycle with ptp + host-local");
        r.real = Some(scenarios::pod_cycle(
            &ws,
            PTP_NET,
            what_if.as_ref(),
            cli.warmup,
            cli.iterations,
        )?);
    }
    if wants(2) {
        note("scenario 2: pod cycle with a do-nothing plugin");
        r.noop = Some(scenarios::pod_cycle(
            &ws,
            NOOP_NET,
            what_if.as_ref(),
            cli.warmup,
            cli.iterations,
        )?);
    }
    if wants(3) {
        note(&format!(
            "scenario 3: a directory of {} configurations",
            cli.configs
        ));
        r.scale = Some(scenarios::config_scale(
            &ws,
            self_exe,
            cli.configs,
            cli.warmup,
            cli.iterations,
        )?);
    }
    if wants(4) {
        note(&format!("scenario 4: {} pods at once", cli.pods));
        r.many = Some(scenarios::many_pods(&ws, cli.pods, cli.rounds)?);
    }
    if wants(5) {
        note("scenario 5: peak RSS of rkt run");
        r.memory = Some(scenarios::memory(&ws, PTP_NET, cli.memory_runs)?);
    }
    if wants(6) {
        note("scenario 6: a busy host");
        r.busy = Some(busy::busy_host(
            &ws,
            &cli.busy_loads,
            cli.warmup,
            cli.iterations,
            std::time::Duration::from_secs(cli.busy_seconds),
            what_if.as_ref(),
        )?);
    }
    drop(ws);
    Ok(())
}

/// Writes the report (and into --update-doc) and returns it.
fn finish(cli: &Cli, r: &Results) -> Result<String, BenchError> {
    let report = report::render(r);
    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| BenchError::io(dir, e))?;
    }
    std::fs::write(&cli.out, &report).map_err(|e| BenchError::io(&cli.out, e))?;
    if let Some(doc) = &cli.update_doc {
        report::update_doc(doc, &report)?;
    }
    Ok(report)
}
