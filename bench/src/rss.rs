//! Peak resident memory of every process of a `rkt run`, each on its own.
//!
//! `wait4`'s `ru_maxrss` (what `/usr/bin/time -v` prints) is the largest of the process and
//! all its waited-for descendants, so for `rkt run` it would report the biggest plugin
//! instead of rkt. Instead the command runs under `ptrace` with `PTRACE_O_TRACEEXIT` and the
//! fork/clone options: every process of the tree stops just before it exits, while its
//! memory still exists, and its `VmHWM` (the high-water mark of its resident set) is read
//! from `/proc/<pid>/status`. The tree is only observed: every signal is passed on.
//! Tracing slows the run down, so this scenario is never timed.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::BenchError;

/// Peak resident set sizes, in KiB, of the processes of one traced run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peaks {
    /// The process started (the `rkt run` runner).
    pub runner_kib: u64,
    /// The largest of the processes running the same binary (the re-executed
    /// `stage1-init` and the pod's init forked from it); 0 when there was none.
    pub stage_kib: u64,
    /// The largest of every other process (plugins, the app).
    pub others_kib: u64,
    /// `ru_maxrss` from `wait4` for the runner: the largest of the whole tree.
    pub tree_maxrss_kib: u64,
}

/// Runs `program args…` traced, with stdout discarded and stderr written to `stderr_file`,
/// and returns the peaks; fails if it exits non-zero.
pub fn trace(program: &Path, args: &[String], stderr_file: &Path) -> Result<Peaks, BenchError> {
    let trace_err = |source| BenchError::Trace {
        program: program.display().to_string(),
        source,
    };
    let binary = std::fs::canonicalize(program).map_err(|e| BenchError::io(program, e))?;
    let stderr = std::fs::File::create(stderr_file).map_err(|e| BenchError::io(stderr_file, e))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: ptrace(PTRACE_TRACEME) is a plain system call, async-signal-safe, touching no
    // memory of ours; it is all that runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(
                libc::PTRACE_TRACEME,
                0,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            ) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(trace_err)?;
    let root = child.id() as libc::pid_t;
    // The child is reaped by the loop below, never through `child`.
    drop(child);

    let options = libc::PTRACE_O_TRACEEXIT
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_EXITKILL;
    let mut peaks = Peaks::default();
    let mut root_status = None;
    let mut options_set = false;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero rusage is a valid output buffer, and status is a plain int
        // wait4 writes into.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: see above; __WALL also reports the traced threads.
        let pid = unsafe { libc::wait4(-1, &mut status, libc::__WALL, &mut usage) };
        if pid == -1 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => break,
                _ => return Err(trace_err(err)),
            }
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            if pid == root {
                root_status = Some(status);
                peaks.tree_maxrss_kib = usage.ru_maxrss as u64;
            }
            continue;
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        let mut inject = 0;
        if pid == root && !options_set {
            options_set = true;
            // SAFETY: PTRACE_SETOPTIONS on our stopped tracee takes the options as data.
            let rc = unsafe {
                libc::ptrace(
                    libc::PTRACE_SETOPTIONS,
                    pid,
                    std::ptr::null_mut::<libc::c_void>(),
                    options as usize as *mut libc::c_void,
                )
            };
            if rc == -1 {
                return Err(trace_err(std::io::Error::last_os_error()));
            }
        } else if event == libc::PTRACE_EVENT_EXIT {
            record(&mut peaks, pid, root, &binary);
        } else if event == 0 && sig != libc::SIGTRAP && sig != libc::SIGSTOP {
            // A real signal: deliver it. SIGTRAP after exec and the SIGSTOP new tracees
            // start with are ptrace's own.
            inject = sig;
        }
        // SAFETY: PTRACE_CONT on a stopped tracee; the signal (or 0) is the data argument.
        // It fails only if the tracee died meanwhile, which the loop then sees.
        unsafe {
            libc::ptrace(
                libc::PTRACE_CONT,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                inject as usize as *mut libc::c_void,
            );
        }
    }
    match root_status {
        Some(s) if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0 => Ok(peaks),
        other => Err(BenchError::Failed {
            command: format!("(traced) {}", crate::proc::describe(program, args)),
            status: match other {
                Some(s) if libc::WIFEXITED(s) => format!("exit status {}", libc::WEXITSTATUS(s)),
                Some(s) => format!("signal {}", libc::WTERMSIG(s)),
                None => "never exited".into(),
            },
            stderr: std::fs::read_to_string(stderr_file).unwrap_or_default(),
        }),
    }
}

/// Reads the high-water mark of the process that thread `tid` belongs to, stopped at exit.
fn record(peaks: &mut Peaks, tid: libc::pid_t, root: libc::pid_t, binary: &Path) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return;
    };
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    let (Some(tgid), Some(hwm)) = (field("Tgid:"), field("VmHWM:")) else {
        return;
    };
    let exe: Option<PathBuf> = std::fs::read_link(format!("/proc/{tid}/exe")).ok();
    let slot = if tgid == root as u64 {
        &mut peaks.runner_kib
    } else if exe.as_deref() == Some(binary) {
        &mut peaks.stage_kib
    } else {
        &mut peaks.others_kib
    };
    *slot = (*slot).max(hwm);
}
