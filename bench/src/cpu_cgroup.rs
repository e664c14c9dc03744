//! CPU time of whole process trees, through a cgroup v1 `cpuacct` hierarchy (or the unified
//! hierarchy's `cpu.stat`): scenarios 9 and 10 time programs that leave processes behind
//! them (a sandbox's app, its log copier `rkt stage1-log`, podman's `conmon`), which
//! `RUSAGE_CHILDREN` never sees. Each measured program starts inside a cgroup of the
//! benchmark's (it moves itself there between fork and exec), so everything it starts is
//! counted, also what is reparented elsewhere; rkt creates no cgroup in `cpuacct`, and podman
//! puts its container and `conmon` below `--cgroup-parent`, which is given this cgroup.
//! [`CpuCgroup::wait_empty`] says when every process of the tree is gone.

use std::ffi::{CString, OsStr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::error::BenchError;

/// One cgroup of the benchmark's, in the hierarchy that accounts CPU time.
#[derive(Debug)]
pub struct CpuCgroup {
    /// Its directory.
    dir: PathBuf,
    /// Its path from the hierarchy's root (`/rkt-bench-<pid>-<name>`), for podman's
    /// `--cgroup-parent`.
    pub path: String,
    /// The file a process writes `0` to to move itself in (NUL-terminated for `pre_exec`).
    join_file: CString,
    /// cgroup v2: `cpu.stat`'s `usage_usec`; v1: `cpuacct.usage` (nanoseconds).
    v2: bool,
}

/// The scenario this module's errors name.
const SCENARIO: &str = "cpu accounting";

impl CpuCgroup {
    /// Makes `/rkt-bench-<pid>-<name>` in `/sys/fs/cgroup/cpuacct` (cgroup v1) or in the
    /// unified hierarchy.
    pub fn new(name: &str) -> Result<CpuCgroup, BenchError> {
        let path = format!("/rkt-bench-{}-{name}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpuacct");
        let (root, v2) = if v1.join("cpuacct.usage").exists() {
            (v1.to_path_buf(), false)
        } else if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            (PathBuf::from("/sys/fs/cgroup"), true)
        } else {
            return Err(BenchError::scenario(
                SCENARIO,
                "no cgroup v1 cpuacct hierarchy nor cgroup v2 at /sys/fs/cgroup",
            ));
        };
        let dir = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io(&dir, e))?;
        // v1: a thread moving itself through `tasks` avoids `cgroup.procs`' RCU wait; the
        // child is single-threaded between fork and exec.
        let join = dir.join(if v2 { "cgroup.procs" } else { "tasks" });
        let join_file = CString::new(join.display().to_string()).map_err(|_| {
            BenchError::scenario(SCENARIO, format!("{} holds a NUL byte", join.display()))
        })?;
        Ok(CpuCgroup {
            dir,
            path,
            join_file,
            v2,
        })
    }

    /// The CPU time (user + system) every process that ever ran in the cgroup or below it
    /// used so far.
    pub fn usage(&self) -> Duration {
        if self.v2 {
            let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
            let us = stat
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            return Duration::from_micros(us);
        }
        let ns = std::fs::read_to_string(self.dir.join("cpuacct.usage"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        Duration::from_nanos(ns)
    }

    /// A command that moves itself into the cgroup before it executes.
    pub fn command<S: AsRef<OsStr>>(&self, program: &Path, args: &[S]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args);
        let file = self.join_file.clone();
        // SAFETY: between fork and exec the closure only calls open, write and close, which
        // are async-signal-safe, on memory allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if ok {
                    Ok(())
                } else {
                    Err(err)
                }
            });
        }
        cmd
    }

    /// Runs `program args…` in the cgroup (stdin /dev/null, output captured) and returns its
    /// output when it exits 0.
    pub fn run<S: AsRef<OsStr>>(&self, program: &Path, args: &[S]) -> Result<Output, BenchError> {
        crate::proc::output(&mut self.command(program, args))
    }

    /// The PIDs of every process in the cgroup and the cgroups below it.
    pub fn processes(&self) -> Vec<u32> {
        fn collect(dir: &Path, out: &mut Vec<u32>) {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            out.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            if let Ok(d) = std::fs::read_dir(dir) {
                for e in d.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        collect(&e.path(), out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        collect(&self.dir, &mut out);
        out
    }

    /// Whether no process is left in the cgroup or any cgroup below it.
    pub fn is_empty(&self) -> bool {
        fn empty(dir: &Path) -> bool {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            if !procs.trim().is_empty() {
                return false;
            }
            std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .all(|e| empty(&e.path()))
                })
                .unwrap_or(true)
        }
        empty(&self.dir)
    }

    /// Waits until every process of the cgroup's tree is gone, polling each half
    /// millisecond; fails after `limit`.
    pub fn wait_empty(&self, limit: Duration) -> Result<(), BenchError> {
        let start = Instant::now();
        while !self.is_empty() {
            crate::proc::check_interrupt()?;
            if start.elapsed() > limit {
                return Err(BenchError::scenario(
                    SCENARIO,
                    format!(
                        "processes still in {} after {} s",
                        self.dir.display(),
                        limit.as_secs()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        Ok(())
    }
}

impl Drop for CpuCgroup {
    /// Removes the cgroup and what podman made below `path` in every hierarchy (deepest
    /// first); a cgroup still holding a process stays.
    fn drop(&mut self) {
        fn remove(dir: &Path) {
            if let Ok(d) = std::fs::read_dir(dir) {
                for e in d.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        remove(&e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(dir);
        }
        let rel = self.path.trim_start_matches('/');
        let mut dirs = vec![self.dir.clone()];
        if let Ok(d) = std::fs::read_dir("/sys/fs/cgroup") {
            dirs.extend(d.flatten().map(|e| e.path().join(rel)));
        }
        for dir in dirs {
            if dir.is_dir() {
                remove(&dir);
            }
        }
    }
}
