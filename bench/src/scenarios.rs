//! The five scenarios of docs/PERFORMANCE.md, each returning its raw figures.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cycle::{self, FloorPlugin};
use crate::error::BenchError;
use crate::proc::{check, check_interrupt, run};
use crate::rss::{self, Peaks};
use crate::stats::{alternate, Series, Variant};
use crate::workspace::{self, Workspace, MANY_NET, NOOP_NET, NOOP_PLUGIN};

/// Scenarios 1 and 2: `rkt run`, the scripted libcni cycle, the plugin floor and the
/// namespace part of the floor on `net`, plus the what-if variants of `rkt run` when given,
/// alternating. Returns them in that order.
pub fn pod_cycle(
    ws: &Workspace,
    net: &str,
    what_if: Option<&WhatIf>,
    warmup: usize,
    iterations: usize,
) -> Result<Vec<Series>, BenchError> {
    let (plugin_dir, cni_path) = if net == NOOP_NET {
        (ws.tools.test_plugin_dir.clone(), ws.tools.noop_cni_path())
    } else {
        (ws.tools.cni_bin.clone(), ws.tools.real_cni_path())
    };
    let conf = ws.conf_file(net);
    let floor = FloorPlugin::from_conflist(&conf, &plugin_dir, &cni_path)?;
    let mut variants: Vec<Variant> = vec![
        ("rkt run", Box::new(|| cycle::rkt(ws, net, &[]))),
        (
            "scripted libcni",
            Box::new(|| cycle::libcni(ws, &conf, &cni_path)),
        ),
        ("plugin floor", Box::new(|| cycle::floor(ws, &floor))),
        (
            "namespace only (ip netns add + del)",
            Box::new(|| cycle::netns_only(ws)),
        ),
    ];
    let no_isolation = vec!["--insecure-options=all-run".to_string()];
    variants.push((
        WHAT_IF_NO_ISOLATION,
        Box::new(move || {
            cycle::rkt_with_app(ws, net, &no_isolation, &["true"], &[]).map(|(d, _)| d)
        }),
    ));
    if let Some(w) = what_if {
        let no_fsync = [("LD_PRELOAD", w.no_fsync.as_os_str())];
        variants.push((
            WHAT_IF_NO_FSYNC,
            Box::new(move || cycle::rkt(ws, net, &no_fsync)),
        ));
        if let Some(shm) = &ws.tmpfs_data {
            variants.push((
                WHAT_IF_TMPFS,
                Box::new(move || cycle::rkt_in(ws, shm.path(), net, &no_fsync)),
            ));
            if net == NOOP_NET {
                variants.push((
                    WHAT_IF_NO_NET,
                    Box::new(move || cycle::rkt_in(ws, shm.path(), "none", &no_fsync)),
                ));
            }
        }
    }
    if let Some(candidate) = &ws.tools.candidate_rkt {
        variants.push((
            CANDIDATE,
            Box::new(move || cycle::rkt_binary(ws, candidate, &ws.data, net, &[])),
        ));
    }
    if net == NOOP_NET {
        variants.push((
            BLOCK_TRUE,
            Box::new(|| cycle::spawn_only(&ws.tools.true_bin, &[])),
        ));
        variants.push((
            BLOCK_RKT,
            Box::new(|| cycle::spawn_only(&ws.tools.rkt, &["version"])),
        ));
    }
    alternate(&mut variants, warmup, iterations)
}

/// `rkt run` without pod isolation (and without the plugin ownership checks): what
/// isolation costs.
pub const WHAT_IF_NO_ISOLATION: &str = "what if: rkt run --insecure-options=all-run";
pub const WHAT_IF_NO_FSYNC: &str = "what if: rkt run, fsync a no-op";
pub const WHAT_IF_TMPFS: &str = "what if: rkt run, fsync a no-op, data dir on tmpfs";
pub const WHAT_IF_NO_NET: &str = "what if: that with --net=none (no CNI at all)";
/// `rkt run` of the binary given with `--candidate-rkt` (e.g. a patched build).
pub const CANDIDATE: &str = "candidate: rkt run of --candidate-rkt";
/// Building blocks: what starting one process costs.
pub const BLOCK_TRUE: &str = "building block: start /bin/true";
pub const BLOCK_RKT: &str = "building block: start `rkt version`";

/// The means to run `rkt run` without some of its costs, to measure them: a preloaded
/// library whose `fsync`/`fdatasync` do nothing. (The teardown's firewall sweep, once
/// measured here too, no longer runs for the benchmark networks, which do not masquerade.)
#[derive(Debug, Clone)]
pub struct WhatIf {
    pub no_fsync: PathBuf,
}

impl WhatIf {
    /// Builds the library with `cc` in the workspace; `None` (with a note) when there is
    /// no C compiler.
    pub fn prepare(ws: &Workspace) -> Option<WhatIf> {
        let dir = ws.root().join("what-if");
        std::fs::create_dir_all(&dir).ok()?;
        let src = dir.join("nofsync.c");
        std::fs::write(
            &src,
            "int fsync(int fd) { (void)fd; return 0; }\nint fdatasync(int fd) { (void)fd; return 0; }\n",
        )
        .ok()?;
        let lib = dir.join("nofsync.so");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&lib)
            .arg(&src)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !built {
            eprintln!("rkt-bench: no C compiler (cc): the what-if variants are left out");
            return None;
        }
        Some(WhatIf { no_fsync: lib })
    }
}

/// Scenario 3's figures.
#[derive(Debug)]
pub struct ScaleResult {
    pub files: usize,
    /// `rkt-bench load-dir` (crates/cni `load_dir` + find, in its own process).
    pub ours: Series,
    /// `libcni-driver load`.
    pub libcni: Series,
    /// The time `load_dir` itself took inside `ours`, without process start and exit.
    pub ours_in_process: Series,
    /// `rkt run --net-conf-dir=<the directory> --net=<last> -- true` (do-nothing plugin).
    pub rkt_run: Series,
}

/// Scenario 3: a directory of `files` configurations; the network picked is the last in
/// file-name order, so both loaders read every file (libcni stops at the first match).
pub fn config_scale(
    ws: &Workspace,
    self_exe: &Path,
    files: usize,
    warmup: usize,
    iterations: usize,
) -> Result<ScaleResult, BenchError> {
    let dir = ws.root().join("many-confs");
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
    let mut last = String::new();
    for i in 0..files {
        let name = format!("net{i:05}");
        let file = dir.join(format!("{i:05}-{name}.conflist"));
        workspace::write_json(&file, &workspace::noop_conflist(&name))?;
        last = name;
    }
    let in_process = RefCell::new(Vec::new());
    let dir_arg = dir.display().to_string();
    let rkt_extra = vec![format!("--net-conf-dir={dir_arg}")];
    let mut variants: Vec<Variant> = vec![
        (
            "crates/cni load_dir",
            Box::new(|| {
                let start = Instant::now();
                let out = run(self_exe, &["load-dir", &dir_arg, &last], &[], None)?;
                let elapsed = start.elapsed();
                let text = String::from_utf8_lossy(&out.stdout);
                let mut words = text.split_whitespace();
                if words.next() != Some(last.as_str()) {
                    return Err(BenchError::scenario(
                        "configuration at scale",
                        format!("load-dir picked {text:?}, not {last:?}"),
                    ));
                }
                if let Some(us) = words.next().and_then(|w| w.parse::<u64>().ok()) {
                    in_process.borrow_mut().push(Duration::from_micros(us));
                }
                Ok(elapsed)
            }),
        ),
        (
            "libcni load",
            Box::new(|| {
                let start = Instant::now();
                let out = run(
                    &ws.tools.libcni,
                    &["-confdir", &dir_arg, "-net", &last, "load"],
                    &[],
                    None,
                )?;
                let elapsed = start.elapsed();
                if String::from_utf8_lossy(&out.stdout).trim() != last {
                    return Err(BenchError::scenario(
                        "configuration at scale",
                        "libcni-driver picked another network",
                    ));
                }
                Ok(elapsed)
            }),
        ),
        (
            "rkt run --net-conf-dir",
            Box::new(|| cycle::rkt_with_app(ws, &last, &rkt_extra, &["true"], &[]).map(|(d, _)| d)),
        ),
    ];
    let mut series = alternate(&mut variants, warmup, iterations)?.into_iter();
    drop(variants);
    let in_process = in_process.into_inner();
    let skip = in_process.len().saturating_sub(iterations);
    Ok(ScaleResult {
        files,
        ours: series.next().unwrap_or_default(),
        libcni: series.next().unwrap_or_default(),
        rkt_run: series.next().unwrap_or_default(),
        ours_in_process: Series {
            label: "load_dir in process".into(),
            samples: in_process[skip..].to_vec(),
            ..Series::default()
        },
    })
}

/// Scenario 4's figures.
#[derive(Debug, Default)]
pub struct ManyResult {
    pub pods: usize,
    /// Wall time of each batch of `pods` pods started at once.
    pub concurrent: Series,
    /// Wall time of each batch of `pods` pods run one after another.
    pub sequential: Series,
    /// Pods that failed or printed no address, over every batch.
    pub failures: usize,
    /// Addresses given to more than one pod of the same batch, over every batch.
    pub duplicates: usize,
    /// The first few failure messages.
    pub errors: Vec<String>,
}

/// The app of scenario 4: prints the pod's address.
const SHOW_ADDR: &[&str] = &["ip", "-4", "-o", "addr", "show", "dev", "eth0"];

/// Scenario 4: `rounds` times, `pods` pods at once on one host-local network, then the same
/// pods one after another.
pub fn many_pods(ws: &Workspace, pods: usize, rounds: usize) -> Result<ManyResult, BenchError> {
    let mut res = ManyResult {
        pods,
        concurrent: Series {
            label: "at once".into(),
            ..Series::default()
        },
        sequential: Series {
            label: "one after another".into(),
            ..Series::default()
        },
        ..ManyResult::default()
    };
    let args = cycle::rkt_run_args(ws, MANY_NET, &[], SHOW_ADDR);
    for _ in 0..rounds {
        check_interrupt()?;
        let start = Instant::now();
        let mut children = Vec::with_capacity(pods);
        for _ in 0..pods {
            let child = Command::new(&ws.tools.rkt)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|source| BenchError::Spawn {
                    program: ws.tools.rkt.display().to_string(),
                    source,
                })?;
            children.push(child);
        }
        let outputs: Vec<_> = children.into_iter().map(|c| c.wait_with_output()).collect();
        res.concurrent.samples.push(start.elapsed());
        let outcomes = outputs
            .into_iter()
            .map(|o| match o {
                Ok(out) => check(&ws.tools.rkt, &args, out).map(|o| o.stdout),
                Err(source) => Err(BenchError::Spawn {
                    program: ws.tools.rkt.display().to_string(),
                    source,
                }),
            })
            .collect();
        tally(&mut res, outcomes)?;

        check_interrupt()?;
        let start = Instant::now();
        let mut outcomes = Vec::with_capacity(pods);
        for _ in 0..pods {
            check_interrupt()?;
            outcomes.push(run(&ws.tools.rkt, &args, &[], None).map(|o| o.stdout));
        }
        res.sequential.samples.push(start.elapsed());
        tally(&mut res, outcomes)?;
    }
    Ok(res)
}

/// Counts one batch's failures and duplicate addresses.
fn tally(
    res: &mut ManyResult,
    outcomes: Vec<Result<Vec<u8>, BenchError>>,
) -> Result<(), BenchError> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for outcome in outcomes {
        match outcome {
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => {
                res.failures += 1;
                if res.errors.len() < 3 {
                    res.errors.push(cni::error::chain(&e));
                }
            }
            Ok(stdout) => match address(&String::from_utf8_lossy(&stdout)) {
                Some(addr) => *seen.entry(addr).or_default() += 1,
                None => {
                    res.failures += 1;
                    if res.errors.len() < 3 {
                        res.errors.push(format!(
                            "no address in {:?}",
                            String::from_utf8_lossy(&stdout)
                        ));
                    }
                }
            },
        }
    }
    res.duplicates += seen.values().map(|n| n - 1).sum::<usize>();
    Ok(())
}

/// The address in `ip -4 -o addr` output (`… inet 10.252.0.5/16 brd …`).
fn address(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    words.find(|w| *w == "inet")?;
    words.next().map(str::to_owned)
}

/// Scenario 5: `runs` traced `rkt run --net=NET -- true`, one peak set per run.
pub fn memory(ws: &Workspace, net: &str, runs: usize) -> Result<Vec<Peaks>, BenchError> {
    let args = cycle::rkt_run_args(ws, net, &[], &["true"]);
    let stderr_file = ws.root().join("traced-rkt.stderr");
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        check_interrupt()?;
        out.push(rss::trace(&ws.tools.rkt, &args, &stderr_file)?);
    }
    Ok(out)
}

/// `rkt-bench load-dir DIR NAME`: loads the directory with crates/cni as rkt does and
/// prints the picked network's name and the microseconds loading took.
pub fn load_dir_command(dir: &Path, name: &str) -> Result<String, BenchError> {
    let start = Instant::now();
    let loaded = cni::conf::load_dir(dir)
        .map_err(|e| BenchError::scenario("load-dir", cni::error::chain(&e)))?;
    let found = loaded.find(name).ok_or_else(|| {
        BenchError::scenario(
            "load-dir",
            format!("network {name:?} not found in {}", dir.display()),
        )
    })?;
    Ok(format!("{} {}", found.name, start.elapsed().as_micros()))
}

/// Finds `program` in `$PATH`, once, so runs do not pay for the search.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// [`which`], or an error saying what to install (`hint`).
pub fn tool(name: &'static str, hint: &'static str) -> Result<PathBuf, BenchError> {
    which(name).ok_or(BenchError::Missing {
        what: name,
        path: PathBuf::from("$PATH"),
        hint,
    })
}

/// The do-nothing plugin must answer an ADD (a quick check before timing it).
pub fn check_noop_plugin(ws: &Workspace) -> Result<(), BenchError> {
    let plugin = ws.tools.test_plugin_dir.join(NOOP_PLUGIN);
    run(
        &plugin,
        &[] as &[&str],
        &[("CNI_COMMAND", OsStr::new("VERSION"))],
        Some(b"{\"cniVersion\":\"1.0.0\"}"),
    )
    .map(|_| ())
}
