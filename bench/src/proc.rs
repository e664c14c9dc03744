//! Running the programs a scenario times, reading what `/proc/PID/stat` says of a process,
//! and noticing Ctrl-C.
//!
//! The benchmark shares its terminal's process group with the programs it runs, so Ctrl-C
//! reaches `rkt run` (which tears its pod down) and the others directly. The driver only
//! records the interrupt ([`install_interrupt_handler`]); the scenario loops check
//! [`interrupted`] between runs and return, and the workspace's `Drop` cleans up.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::BenchError;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // An atomic store is async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Records SIGINT, SIGTERM and SIGHUP instead of dying, so the run can clean up.
pub fn install_interrupt_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic; an all-zero sigaction with
        // sa_sigaction set is a valid argument, and sigaction has no other memory effects.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// True once SIGINT, SIGTERM or SIGHUP arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Fails with [`BenchError::Interrupted`] once an interrupt arrived.
pub fn check_interrupt() -> Result<(), BenchError> {
    if interrupted() {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// `program args…` as one line, for messages.
pub fn describe<S: AsRef<OsStr>>(program: &Path, args: &[S]) -> String {
    let mut out = program.display().to_string();
    for a in args {
        out.push(' ');
        out.push_str(&a.as_ref().to_string_lossy());
    }
    out
}

/// Runs `program args…` with `env` added and `stdin` written to it, and returns its output
/// when it exits 0.
pub fn run<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    env: &[(&str, &OsStr)],
    stdin: Option<&[u8]>,
) -> Result<Output, BenchError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| BenchError::Spawn {
        program: program.display().to_string(),
        source,
    })?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A program that exits without reading its stdin makes this fail; its exit status
        // tells the real story.
        let _ = pipe.write_all(bytes);
    }
    let out = child
        .wait_with_output()
        .map_err(|source| BenchError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
    check(program, args, out)
}

/// Runs `cmd` as it is set up (stdin /dev/null, output captured) and returns its output
/// when it exits 0: for a command that must start somewhere [`run`] cannot put it (a
/// cgroup, a network namespace).
pub fn output(cmd: &mut Command) -> Result<Output, BenchError> {
    let program = Path::new(cmd.get_program()).to_path_buf();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BenchError::Spawn {
            program: program.display().to_string(),
            source,
        })?;
    let args: Vec<&OsStr> = cmd.get_args().collect();
    check(&program, &args, out)
}

/// `out` when the program succeeded, else [`BenchError::Failed`] (or
/// [`BenchError::Interrupted`] when an interrupt is why it failed).
pub fn check<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    out: Output,
) -> Result<Output, BenchError> {
    if out.status.success() {
        return Ok(out);
    }
    check_interrupt()?;
    let mut stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    if stderr.is_empty() {
        stderr = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    }
    Err(BenchError::Failed {
        command: describe(program, args),
        status: out.status.to_string(),
        stderr,
    })
}

/// What the benchmark reads of a process's `/proc/PID/stat`.
#[derive(Debug, PartialEq, Eq)]
pub struct Stat {
    /// The parent's PID (field 4 of proc(5)).
    pub ppid: u32,
    /// User plus system time, all threads (fields 14 and 15), in clock ticks.
    pub cpu_ticks: u64,
}

impl Stat {
    /// Process `pid`'s; `None` when it is gone.
    pub fn of(pid: u32) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn parse(text: &str) -> Option<Stat> {
        // The fields are counted after the command's last closing parenthesis (the command
        // may hold blanks and parentheses): field 3, the state, is the first there.
        let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        Some(Stat {
            ppid: u32::try_from(field(4)?).ok()?,
            cpu_ticks: field(14)? + field(15)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_past_a_command_name_with_parentheses() {
        let stat = "42 (crit) (x) S 1 42 42 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 9 0 123";
        assert_eq!(
            Stat::parse(stat),
            Some(Stat {
                ppid: 1,
                cpu_ticks: 22
            })
        );
        assert_eq!(Stat::parse(""), None);
        assert_eq!(Stat::parse("42 (short) S 1 42"), None);
    }
}
