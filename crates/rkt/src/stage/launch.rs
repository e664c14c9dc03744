//! How rkt starts a helper process of its own that outlives its caller: a pod's runner
//! (`rkt run --detach`, `rkt app sandbox --detach`, rkt-cri's sandbox runner) or an app's
//! log monitor ([`super::app_logs`]). The caller describes the process ([`Launch`]: its
//! arguments, the variables it needs and the descriptors it inherits) and a [`Launcher`]
//! starts it. rkt's own commands execute the binary ([`Exec`]); a long-running server that
//! starts many of them (rkt-cri) can instead fork them from a small process of its own
//! that was executed once, so that they share that process's relocated pages rather than
//! each paying for its own copy.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A helper process to start: `rkt ARGS` with the variables `env` set, the descriptors
/// `fds` inherited under the same numbers (the arguments and variables name them), and its
/// standard streams on `/dev/null`.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub fds: Vec<RawFd>,
}

impl Launch {
    /// `rkt ARGS`, with nothing inherited yet.
    pub fn new<I, S>(args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Launch {
            args: args.into_iter().map(Into::into).collect(),
            ..Launch::default()
        }
    }
}

/// Starts helper processes. The caller keeps the descriptors of a [`Launch`] open until
/// [`Launcher::launch`] returns; the helper is nobody's to wait for (it is reaped by
/// whoever becomes its parent).
pub trait Launcher: Send + Sync {
    /// Starts `launch`; returns its PID.
    fn launch(&self, launch: &Launch) -> std::io::Result<u32>;
}

/// Executes the rkt binary at this path (normally `/proc/self/exe`).
#[derive(Debug, Clone)]
pub struct Exec(pub PathBuf);

impl Launcher for Exec {
    fn launch(&self, launch: &Launch) -> std::io::Result<u32> {
        let mut command = Command::new(&self.0);
        command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        super::inherit_in_child(&mut command, launch.fds.clone());
        let child = command.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot execute {}: {e}", self.0.display()),
            )
        })?;
        Ok(child.id())
    }
}

/// For a long-lived helper whose start is done and which from now on mostly waits (a
/// runner holding its pod, a log monitor copying): gives the allocator's free memory back
/// to the system (glibc's `malloc_trim`; nothing elsewhere).
pub fn release_idle_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks and trims the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
