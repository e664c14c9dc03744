//! Scenario 10, log throughput: an app writes `--log-mib` MiB of 64-byte lines as fast as it
//! can (`busybox sh -c 'yes LINE | head -c BYTES'` in a busybox root directory), its stdout
//! going to its log, three ways, alternating:
//!
//! * `rkt run --net=none --rootfs=DIR --stdout=log --log-max-size=0`: the runner copies the
//!   app's stdout into the log on a thread of its own;
//! * `rkt app add --rootfs=DIR --stdout=log` + `rkt app start` into a sandbox made beforehand
//!   (untimed): the copier is a process of its own, `rkt stage1-log`;
//! * `podman run -d --network=none --log-driver=k8s-file --log-opt path=FILE --rootfs DIR`
//!   (runc, cgroupfs: what works on these machines, see podman-peer.md) and `podman wait`:
//!   `conmon` writes the log;
//!
//! and, as a floor, the same command on the host writing straight into a file (no
//! container, no logger). Each run ends when every process it started is gone (the copier,
//! `conmon` and podman's cleanup included), and its CPU time is that of the whole tree
//! ([`crate::cpu_cgroup`]). Every log is then read back (rotated files included): each
//! line must be there, whole, exactly once, or the scenario fails.

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cpu_cgroup::CpuCgroup;
use crate::error::BenchError;
use crate::proc::run;
use crate::scenarios::{tool, which};
use crate::stats::{alternate, per_round, secs, Series, Variant};

pub const RKT_RUN: &str = "rkt run --stdout=log (runner thread copies)";
pub const RKT_RUN_CANDIDATE: &str =
    "candidate: rkt run --stdout=log of --candidate-rkt (runner thread copies)";
pub const RKT_SANDBOX: &str = "app add --stdout=log + app start (rkt stage1-log copies)";
pub const PODMAN: &str = "podman run -d, k8s-file log (conmon copies) + podman wait";
pub const FLOOR: &str = "floor: the command on the host, `> FILE` (no logger)";

/// One line of the app's output: 63 characters and the newline.
const LINE: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde";
const LINE_BYTES: u64 = LINE.len() as u64 + 1;

/// The longest one run may take.
const RUN_LIMIT: Duration = Duration::from_secs(900);

/// What scenario 10 measured.
#[derive(Debug, Default)]
pub struct LogResult {
    pub bytes: u64,
    /// In the order of the labels above (podman only when it runs here).
    pub series: Vec<Series>,
    /// Why podman is missing, if it is.
    pub no_podman: Option<String>,
    /// Lines found in the logs per variant: (label, runs checked, runs with every line).
    pub checked: Vec<(String, usize, usize)>,
}

impl LogResult {
    pub fn get(&self, label: &str) -> Option<&Series> {
        self.series.iter().find(|s| s.label == label)
    }

    /// Per round, `a` over `b` in wall time (`cpu`: in CPU time).
    pub fn per_round(&self, a: &str, b: &str, cpu: bool) -> Vec<f64> {
        let pick = |s: &Series| secs(if cpu { &s.cpu } else { &s.samples });
        match (self.get(a), self.get(b)) {
            (Some(a), Some(b)) => per_round(&pick(a), &pick(b)),
            _ => Vec::new(),
        }
    }
}

/// The scenario this module's errors name.
const SCENARIO: &str = "log throughput";

/// A busybox root directory with `sh`, `yes` and `head`.
fn rootfs(dir: &Path, busybox: &Path) -> Result<(), BenchError> {
    for d in ["bin", "etc", "proc", "dev", "sys", "tmp", "run"] {
        let p = dir.join(d);
        std::fs::create_dir_all(&p).map_err(|e| BenchError::io(&p, e))?;
    }
    let bin = dir.join("bin");
    std::fs::copy(busybox, bin.join("busybox")).map_err(|e| BenchError::io(busybox, e))?;
    for applet in ["sh", "yes", "head"] {
        std::os::unix::fs::symlink("busybox", bin.join(applet))
            .map_err(|e| BenchError::io(bin.join(applet), e))?;
    }
    Ok(())
}

/// What a log held: whole lines equal to [`LINE`], and anything else.
#[derive(Debug, Default, PartialEq)]
struct Count {
    lines: u64,
    wrong: u64,
}

/// Reads the CRI-format log files `files` in order (`TIME STREAM P|F TEXT`; `P` parts
/// joined to the next record) and counts the lines.
fn count_cri(files: &[PathBuf]) -> Result<Count, BenchError> {
    let mut count = Count::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut record = Vec::with_capacity(256);
    for file in files {
        let f = std::fs::File::open(file).map_err(|e| BenchError::io(file, e))?;
        let mut r = BufReader::with_capacity(1 << 20, f);
        loop {
            record.clear();
            let n = r
                .read_until(b'\n', &mut record)
                .map_err(|e| BenchError::io(file, e))?;
            if n == 0 {
                break;
            }
            let body = record.strip_suffix(b"\n").unwrap_or(&record);
            let mut fields = body.splitn(4, |b| *b == b' ');
            let (_time, _stream, flag, text) =
                (fields.next(), fields.next(), fields.next(), fields.next());
            let text = text.unwrap_or_default();
            match flag {
                Some(b"P") => pending.extend_from_slice(text),
                Some(b"F") => {
                    let whole = if pending.is_empty() {
                        text == LINE.as_bytes()
                    } else {
                        pending.extend_from_slice(text);
                        let ok = pending == LINE.as_bytes();
                        pending.clear();
                        ok
                    };
                    if whole {
                        count.lines += 1;
                    } else {
                        count.wrong += 1;
                    }
                }
                _ => count.wrong += 1,
            }
        }
    }
    if !pending.is_empty() {
        count.wrong += 1;
    }
    Ok(count)
}

/// A raw file of lines (the floor's): its size must be what was written.
fn count_raw(file: &Path) -> Result<Count, BenchError> {
    let len = std::fs::metadata(file)
        .map_err(|e| BenchError::io(file, e))?
        .len();
    Ok(Count {
        lines: len / LINE_BYTES,
        wrong: u64::from(len % LINE_BYTES != 0),
    })
}

/// `path` and its rotated files, oldest first (`path.N` … `path.1`, then `path`).
fn with_rotated(path: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut n = 1;
    loop {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{n}"));
        let p = PathBuf::from(p);
        if !p.exists() {
            break;
        }
        files.push(p);
        n += 1;
    }
    files.reverse();
    files.push(path.to_path_buf());
    files
}

fn remove_all(files: &[PathBuf]) {
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

/// Runs scenario 10 with `rkt`: `mib` MiB per run.
pub fn log_throughput(
    rkt: &Path,
    candidate: Option<&Path>,
    mib: u64,
    warmup: usize,
    iterations: usize,
) -> Result<LogResult, BenchError> {
    let busybox = tool("busybox", "install busybox-static")?;
    let bytes = mib << 20;
    let lines = bytes / LINE_BYTES;
    let work = tempfile::Builder::new()
        .prefix("rkt-bench-logs-")
        .tempdir_in("/var/tmp")
        .map_err(|e| BenchError::io("/var/tmp", e))?;
    let root = work.path();
    let (rkt_root, podman_root) = (root.join("rootfs-rkt"), root.join("rootfs-podman"));
    rootfs(&rkt_root, &busybox)?;
    rootfs(&podman_root, &busybox)?;
    let data = root.join("data");
    for d in ["data", "local-config", "system-config"] {
        std::fs::create_dir_all(root.join(d)).map_err(|e| BenchError::io(root.join(d), e))?;
    }
    let globals = vec![
        format!("--dir={}", data.display()),
        format!("--local-config={}", root.join("local-config").display()),
        format!("--system-config={}", root.join("system-config").display()),
    ];
    let args = |rest: &[&str]| -> Vec<String> {
        let mut a = globals.clone();
        a.extend(rest.iter().map(|s| s.to_string()));
        a
    };
    let command = format!("yes {LINE} | head -c {bytes}");
    let rootfs_flag = format!("--rootfs={}", rkt_root.display());
    let log_flags = ["--stdout=log", "--stderr=null", "--log-max-size=0"];

    let mut res = LogResult {
        bytes,
        ..LogResult::default()
    };
    let podman = which("podman");
    let podman = match &podman {
        Some(p) if run(p, &["--version"], &[], None).is_ok() => Some(p.clone()),
        Some(p) => {
            res.no_podman = Some(format!("{} --version failed", p.display()));
            None
        }
        None => {
            res.no_podman = Some("podman is not installed (apt-get install podman runc)".into());
            None
        }
    };
    let mut labels = vec![RKT_RUN, RKT_SANDBOX];
    if candidate.is_some() {
        labels.push(RKT_RUN_CANDIDATE);
    }
    if podman.is_some() {
        labels.push(PODMAN);
    }
    labels.push(FLOOR);
    let cgroups: Vec<CpuCgroup> = (0..labels.len())
        .map(|i| CpuCgroup::new(&format!("s10-{i}")))
        .collect::<Result<_, _>>()?;
    let cpu: Vec<RefCell<Vec<Duration>>> = labels.iter().map(|_| RefCell::default()).collect();
    let checked: Vec<RefCell<(usize, usize)>> = labels.iter().map(|_| RefCell::default()).collect();
    let index = |label: &str| labels.iter().position(|l| *l == label).unwrap_or(0);
    // Checks a run's log; fails the scenario when a line is missing or damaged.
    let verify = |i: usize, what: &str, count: Count| -> Result<(), BenchError> {
        let mut c = checked[i].borrow_mut();
        c.0 += 1;
        if count.lines == lines && count.wrong == 0 {
            c.1 += 1;
            return Ok(());
        }
        Err(BenchError::scenario(
            SCENARIO,
            format!(
                "{what}: {} whole lines of {lines} in its log, {} records wrong",
                count.lines, count.wrong
            ),
        ))
    };
    // Starts a run in cgroup `i`, waits until all its processes are gone.
    let finish = |i: usize, before: Duration, start: Instant| -> Result<Duration, BenchError> {
        cgroups[i].wait_empty(RUN_LIMIT)?;
        let took = start.elapsed();
        cpu[i]
            .borrow_mut()
            .push(cgroups[i].usage().saturating_sub(before));
        Ok(took)
    };

    let sandbox = run(rkt, &args(&["app", "sandbox", "--net=none"]), &[], None)?;
    let sandbox = String::from_utf8_lossy(&sandbox.stdout).trim().to_owned();
    let counter = std::cell::Cell::new(0u32);

    // `rkt run --stdout=log` of `bin`, measured as `label`.
    let rkt_run_of = |bin: &Path, label: &str| -> Result<Duration, BenchError> {
        let i = index(label);
        let uuid_file = root.join("run.uuid");
        let save = format!("--uuid-file-save={}", uuid_file.display());
        let mut a = vec!["run", "--net=none", save.as_str(), rootfs_flag.as_str()];
        a.extend(log_flags);
        a.extend(["--", "/bin/sh", "-c", command.as_str()]);
        let before = cgroups[i].usage();
        let start = Instant::now();
        cgroups[i].run(bin, &args(&a))?;
        let took = finish(i, before, start)?;
        let uuid =
            std::fs::read_to_string(&uuid_file).map_err(|e| BenchError::io(&uuid_file, e))?;
        let uuid = uuid.trim();
        let logs = data.join("pods").join(uuid).join("logs");
        let log = std::fs::read_dir(&logs)
            .map_err(|e| BenchError::io(&logs, e))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "log"))
            .ok_or_else(|| {
                BenchError::scenario(SCENARIO, format!("no log in {}", logs.display()))
            })?;
        let files = with_rotated(&log);
        verify(i, label, count_cri(&files)?)?;
        remove_all(&files);
        run(bin, &args(&["rm", uuid]), &[], None)?;
        Ok(took)
    };
    let rkt_sandbox = || -> Result<Duration, BenchError> {
        let i = index(RKT_SANDBOX);
        counter.set(counter.get() + 1);
        let name = format!("log{}", counter.get());
        let (name_flag, app_flag) = (format!("--name={name}"), format!("--app={name}"));
        let mut a = vec![
            "app",
            "add",
            sandbox.as_str(),
            name_flag.as_str(),
            rootfs_flag.as_str(),
        ];
        a.extend(log_flags);
        a.extend(["--", "/bin/sh", "-c", command.as_str()]);
        let before = cgroups[i].usage();
        let start = Instant::now();
        cgroups[i].run(rkt, &args(&a))?;
        cgroups[i].run(rkt, &args(&["app", "start", &sandbox, &app_flag]))?;
        let took = finish(i, before, start)?;
        let log = data
            .join("pods")
            .join(&sandbox)
            .join("logs")
            .join(format!("{name}.log"));
        let files = with_rotated(&log);
        verify(i, RKT_SANDBOX, count_cri(&files)?)?;
        remove_all(&files);
        run(rkt, &args(&["app", "rm", &sandbox, &app_flag]), &[], None)?;
        Ok(took)
    };
    let podman_run = || -> Result<Duration, BenchError> {
        let i = index(PODMAN);
        let p = podman.as_deref().expect("only with podman");
        let log = root.join("podman.log");
        let parent = format!("--cgroup-parent={}", cgroups[i].path);
        let log_opt = format!("path={}", log.display());
        let root_s = podman_root.display().to_string();
        let common = ["--cgroup-manager=cgroupfs", "--runtime=runc"];
        let mut a: Vec<&str> = common.to_vec();
        a.extend([
            "run",
            "-d",
            "--network=none",
            parent.as_str(),
            "--log-driver=k8s-file",
            "--log-opt",
            log_opt.as_str(),
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--rootfs",
            root_s.as_str(),
            "/bin/sh",
            "-c",
            command.as_str(),
        ]);
        let before = cgroups[i].usage();
        let start = Instant::now();
        let out = cgroups[i].run(p, &a)?;
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut wait: Vec<&str> = common.to_vec();
        wait.extend(["wait", id.as_str()]);
        cgroups[i].run(p, &wait)?;
        let took = finish(i, before, start)?;
        let files = with_rotated(&log);
        verify(i, PODMAN, count_cri(&files)?)?;
        remove_all(&files);
        let mut rm: Vec<&str> = common.to_vec();
        rm.extend(["rm", id.as_str()]);
        run(p, &rm, &[], None)?;
        Ok(took)
    };
    let floor = || -> Result<Duration, BenchError> {
        let i = index(FLOOR);
        let file = root.join("floor.out");
        let script = format!("{command} > {}", file.display());
        let before = cgroups[i].usage();
        let start = Instant::now();
        cgroups[i].run(&busybox, &["sh", "-c", script.as_str()])?;
        let took = finish(i, before, start)?;
        verify(i, FLOOR, count_raw(&file)?)?;
        remove_all(&[file]);
        Ok(took)
    };

    let measured = {
        let mut variants: Vec<Variant<'_>> = vec![
            (RKT_RUN, Box::new(|| rkt_run_of(rkt, RKT_RUN))),
            (RKT_SANDBOX, Box::new(rkt_sandbox)),
        ];
        if let Some(c) = candidate {
            variants.push((
                RKT_RUN_CANDIDATE,
                Box::new(move || rkt_run_of(c, RKT_RUN_CANDIDATE)),
            ));
        }
        if podman.is_some() {
            variants.push((PODMAN, Box::new(podman_run)));
        }
        variants.push((FLOOR, Box::new(floor)));
        alternate(&mut variants, warmup, iterations)
    };
    let stopped = run(rkt, &args(&["stop", &sandbox]), &[], None);
    std::thread::sleep(Duration::from_millis(500));
    let gc = run(
        rkt,
        &args(&["gc", "--grace-period=0s", "--expire-prepared=0s"]),
        &[],
        None,
    );
    res.series = measured?
        .into_iter()
        .zip(&cpu)
        .map(|(mut s, c)| {
            s.cpu = c.borrow().iter().skip(warmup).copied().collect();
            s
        })
        .collect();
    stopped?;
    gc?;
    res.checked = labels
        .iter()
        .zip(&checked)
        .map(|(l, c)| (l.to_string(), c.borrow().0, c.borrow().1))
        .collect();
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cri_log_counts_whole_lines_joining_parts_and_flags_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("x.log.1"), dir.path().join("x.log"));
        let t = "2026-12-05T10:00:00.000000001Z stdout";
        std::fs::write(&a, format!("{t} F {LINE}\n{t} P {}\n", &LINE[..10])).unwrap();
        std::fs::write(&b, format!("{t} F {}\n{t} F short\n", &LINE[10..])).unwrap();
        assert_eq!(
            count_cri(&[a.clone(), b.clone()]).unwrap(),
            Count { lines: 2, wrong: 1 }
        );
        assert_eq!(with_rotated(&b), vec![a, b]);
    }
}
