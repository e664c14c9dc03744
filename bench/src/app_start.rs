//! Scenario 9, starting an app into a running sandbox against a whole pod: `rkt app add` +
//! `rkt app start` of `/bin/true` (and of a stored busybox image's `true`) into a sandbox
//! made beforehand (`rkt app sandbox`, untimed), against `rkt run` of the same app, with the
//! same network (`--net=default`, the realistic one, and `--net=none`); also `app start`
//! alone (the app added untimed) and `rkt run --detach`, which returns once the app runs.
//! Variants alternate; each run's CPU time is that of its whole process tree (the app
//! included, which the sandbox's init reaps), through a cgroup of its own
//! ([`crate::cpu_cgroup`]). After each app ended (untimed) it is removed; at the end the
//! sandboxes are stopped, `rkt gc --grace-period=0s` runs and the leak checker looks for
//! anything left of the scenario's pods.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cpu_cgroup::CpuCgroup;
use crate::error::BenchError;
use crate::proc::run;
use crate::stats::{alternate, per_round, secs, Series, Variant};

pub const ADD_START: &str = "app add + app start, /bin/true, into the running sandbox";
pub const START_ONLY: &str = "app start alone, /bin/true (added beforehand, untimed)";
pub const RUN: &str = "rkt run -- /bin/true (the whole pod)";
pub const RUN_DETACH: &str = "rkt run --detach -- /bin/true (returns once the app runs)";
pub const IMAGE_ADD_START: &str = "app add + app start, stored image (busybox true)";
pub const IMAGE_RUN: &str = "rkt run IMAGE (busybox true, the whole pod)";

/// The longest an app or a pod may take to end after its command returned.
const END_LIMIT: Duration = Duration::from_secs(60);

/// Scenario 9's figures at one network.
#[derive(Debug)]
pub struct NetRun {
    pub net: String,
    /// In the order of the labels above (the image pair only with an image).
    pub series: Vec<Series>,
}

impl NetRun {
    /// The series labelled `label`.
    pub fn get(&self, label: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.label == label)
    }

    /// Per round, `a`'s time over `b`'s (the two ran in the same round).
    pub fn per_round(&self, a: &str, b: &str) -> Vec<f64> {
        match (self.get(a), self.get(b)) {
            (Some(a), Some(b)) => per_round(&secs(&a.samples), &secs(&b.samples)),
            _ => Vec::new(),
        }
    }
}

/// What scenario 9 measured.
#[derive(Debug, Default)]
pub struct AppStartResult {
    pub nets: Vec<NetRun>,
    /// Why the image variants are missing, if they are.
    pub no_image: Option<String>,
    /// What was left after the sandboxes stopped and `rkt gc` ran (must be empty).
    pub leaks: Vec<String>,
}

/// The benchmark's rkt world: its own data directory and empty configuration directories
/// (the built-in `default` network).
struct World<'a> {
    rkt: &'a Path,
    data: PathBuf,
    globals: Vec<String>,
}

impl World<'_> {
    fn args(&self, rest: &[&str]) -> Vec<String> {
        let mut args = self.globals.clone();
        args.extend(rest.iter().map(|s| s.to_string()));
        args
    }

    fn rkt(&self, rest: &[&str]) -> Result<String, BenchError> {
        let out = run(self.rkt, &self.args(rest), &[], None)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

/// The scenario this module's errors name.
const SCENARIO: &str = "app start";

/// Runs scenario 9 with `rkt` on each of `nets`.
pub fn app_start(
    rkt: &Path,
    nets: &[&str],
    warmup: usize,
    iterations: usize,
) -> Result<AppStartResult, BenchError> {
    let work = tempfile::tempdir().map_err(|e| BenchError::io("/tmp", e))?;
    let root = work.path();
    for d in ["data", "local-config", "system-config"] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| BenchError::io(root.join(d), e))?;
    }
    let data = root.join("data");
    let w = World {
        rkt,
        globals: vec![
            format!("--dir={}", data.display()),
            format!("--local-config={}", root.join("local-config").display()),
            format!("--system-config={}", root.join("system-config").display()),
        ],
        data,
    };
    let guard = leak_check::Guard::new(leak_check::Ctx::new(&w.data).shared_network("default"));
    let mut res = AppStartResult::default();
    let image = match crate::image_start::stored_image(rkt, &w.data, root) {
        Ok(id) => Some(id),
        Err(e) => {
            res.no_image = Some(cni::error::chain(&e));
            None
        }
    };
    let mut sandboxes = Vec::new();
    let measured = (|| {
        for net in nets {
            eprintln!("rkt-bench: scenario 9 with --net={net}");
            let uuid = w.rkt(&["app", "sandbox", &format!("--net={net}")])?;
            if uuid.len() < 32 {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!("rkt app sandbox printed {uuid:?}"),
                ));
            }
            sandboxes.push(uuid.clone());
            res.nets.push(measure_net(
                &w,
                net,
                &uuid,
                image.as_deref(),
                warmup,
                iterations,
            )?);
        }
        Ok(())
    })();
    // Whatever happened: the sandboxes stop, gc releases everything, the checker looks.
    for uuid in &sandboxes {
        if let Err(e) = w.rkt(&["stop", uuid]) {
            res.leaks
                .push(format!("rkt stop {uuid} failed: {}", cni::error::chain(&e)));
        }
    }
    wait_stopped(&w, &sandboxes);
    guard.remember();
    if let Err(e) = w.rkt(&["gc", "--grace-period=0s", "--expire-prepared=0s"]) {
        res.leaks
            .push(format!("rkt gc failed: {}", cni::error::chain(&e)));
    }
    res.leaks.extend(guard.leaked());
    // The findings are in the report; the guard must not panic on them when dropped.
    std::mem::forget(guard);
    measured?;
    Ok(res)
}

/// Waits (at most 10 s) until `rkt list` shows none of `uuids` running.
fn wait_stopped(w: &World<'_>, uuids: &[String]) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let list = w
            .rkt(&["list", "--no-legend", "--full"])
            .unwrap_or_default();
        let running = list
            .lines()
            .any(|l| uuids.iter().any(|u| l.starts_with(u.as_str())) && l.contains("running"));
        if !running {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The variants at one network, alternating, against the sandbox `uuid`.
fn measure_net(
    w: &World<'_>,
    net: &str,
    uuid: &str,
    image: Option<&str>,
    warmup: usize,
    iterations: usize,
) -> Result<NetRun, BenchError> {
    let net_flag = format!("--net={net}");
    let counter = Cell::new(0u64);
    let next_name = || {
        counter.set(counter.get() + 1);
        format!("a{}", counter.get())
    };
    let host_app: Vec<&str> = vec!["--stdout=null", "--stderr=null", "--", "/bin/true"];
    let image_app: Vec<String> = image
        .map(|id| {
            vec![
                "--stdout=null".to_string(),
                "--stderr=null".into(),
                id.to_string(),
                "--exec=/bin/busybox".into(),
                "--".into(),
                "true".into(),
            ]
        })
        .unwrap_or_default();
    let image_app: Vec<&str> = image_app.iter().map(String::as_str).collect();

    let mut labels = vec![ADD_START, START_ONLY, RUN, RUN_DETACH];
    if image.is_some() {
        labels.extend([IMAGE_ADD_START, IMAGE_RUN]);
    }
    let cgroups: Vec<CpuCgroup> = labels
        .iter()
        .enumerate()
        .map(|(i, _)| CpuCgroup::new(&format!("s9-{net}-{i}")))
        .collect::<Result<_, _>>()?;
    let cpu: Vec<RefCell<Vec<Duration>>> = labels.iter().map(|_| RefCell::default()).collect();

    // `app add` (+ `app start`) of `app` into the sandbox, timed as asked; then, untimed,
    // the app's end and its removal.
    let add_start = |i: usize, app: &[&str], time_add: bool| -> Result<Duration, BenchError> {
        let cg = &cgroups[i];
        let name = next_name();
        let name_flag = format!("--name={name}");
        let mut add = vec!["app", "add", uuid, name_flag.as_str()];
        add.extend_from_slice(app);
        let app_flag = format!("--app={name}");
        let before = cg.usage();
        let start = Instant::now();
        cg.run(w.rkt, &w.args(&add))?;
        let started = Instant::now();
        cg.run(w.rkt, &w.args(&["app", "start", uuid, &app_flag]))?;
        let took = if time_add {
            start.elapsed()
        } else {
            started.elapsed()
        };
        cg.wait_empty(END_LIMIT)?;
        cpu[i].borrow_mut().push(cg.usage().saturating_sub(before));
        w.rkt(&["app", "rm", uuid, &app_flag])?;
        Ok(took)
    };
    // `rkt run` of `app`, the whole pod (or with --detach, until it returns).
    let whole_pod = |i: usize, app: &[&str], detach: bool| -> Result<Duration, BenchError> {
        let cg = &cgroups[i];
        let mut args = vec!["run", net_flag.as_str()];
        if detach {
            args.push("--detach");
        }
        args.extend_from_slice(app);
        let before = cg.usage();
        let start = Instant::now();
        cg.run(w.rkt, &w.args(&args))?;
        let took = start.elapsed();
        cg.wait_empty(END_LIMIT)?;
        cpu[i].borrow_mut().push(cg.usage().saturating_sub(before));
        Ok(took)
    };

    let series = {
        let (host, img) = (&host_app, &image_app);
        let mut variants: Vec<Variant<'_>> = vec![
            (ADD_START, Box::new(|| add_start(0, host, true))),
            (START_ONLY, Box::new(|| add_start(1, host, false))),
            (RUN, Box::new(|| whole_pod(2, host, false))),
            (RUN_DETACH, Box::new(|| whole_pod(3, host, true))),
        ];
        if image.is_some() {
            variants.push((IMAGE_ADD_START, Box::new(|| add_start(4, img, true))));
            variants.push((IMAGE_RUN, Box::new(|| whole_pod(5, img, false))));
        }
        alternate(&mut variants, warmup, iterations)?
    };
    // Exited pods of `rkt run` go (untimed), so the next network starts from the same store.
    w.rkt(&["gc", "--grace-period=0s"])?;
    let series = series
        .into_iter()
        .zip(&cpu)
        .map(|(mut s, c)| {
            // The warm-up runs come first.
            s.cpu = c.borrow().iter().skip(warmup).copied().collect();
            s
        })
        .collect();
    Ok(NetRun {
        net: net.to_string(),
        series,
    })
}
