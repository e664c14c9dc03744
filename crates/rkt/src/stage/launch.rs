//! How rkt starts a helper process of its own that outlives its caller: a pod's runner
//! (`rkt run --detach`, `rkt app sandbox --detach`, rkt-cri's sandbox runner) or an app's
//! log monitor ([`super::app_logs`]). The caller describes the process ([`Launch`]: its
//! arguments, the variables it needs and the descriptors it inherits) and a [`Launcher`]
//! starts it. rkt's own commands execute the binary ([`Exec`]); a long-running server that
//! starts many of them (rkt-cri) can instead fork them from a small process of its own
//! that was executed once, so that they share that process's relocated pages rather than
//! each paying for its own copy.

use std::ffi::OsString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
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

/// In a helper: the descriptor its launcher passed under the number the environment
/// variable `var` names (a [`Launch`]'s `env` and `fds`), removed from the environment and
/// owned from here, close-on-exec again; `None` when the variable is not set. Called before
/// the helper starts any thread.
pub fn take_inherited(var: &str) -> std::io::Result<Option<OwnedFd>> {
    let Some(value) = std::env::var_os(var) else {
        return Ok(None);
    };
    // SAFETY: edition 2021; the caller has started no thread yet.
    std::env::remove_var(var);
    let bad = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{var}={value:?} {what}"),
        )
    };
    let fd: RawFd = value
        .to_str()
        .and_then(|f| f.parse().ok())
        .filter(|f| *f > 2)
        .ok_or_else(|| bad("is not a descriptor"))?;
    nix::fcntl::fcntl(
        fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|_| bad("is not open"))?;
    // SAFETY: the launcher passed this descriptor for this process alone; owned from here.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
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

/// For a process whose threads mostly wait: one allocator arena for all of them (glibc's
/// `M_ARENA_MAX`; nothing elsewhere). glibc otherwise gives each thread that allocates an
/// arena of its own, up to 8 per CPU, and keeps their pages. Call it before a second
/// thread allocates.
pub fn use_one_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes the allocator's settings.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
