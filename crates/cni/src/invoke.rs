//! Finding and running plugin binaries (libcni `pkg/invoke`).
//!
//! [`Exec`] is the seam between the runtime operations in [`crate::api`] and the operating
//! system: [`RawExec`] runs a real binary, tests substitute a fake. [`find_in_path`] maps a
//! plugin `type` to a file in the plugin directories.
//!
//! [`RawExec`] passes the inherited environment plus the `CNI_*` variables it is given
//! (inherited `CNI_*` protocol variables that are not given are removed, so a runtime started
//! from a plugin's environment cannot leak them), writes the config to stdin and closes it,
//! drains stdout and stderr on their own threads, and kills the plugin with `SIGKILL` when the
//! timeout passes. Starting a binary that is still open for writing (`ETXTBSY`) is retried
//! up to five times, a second apart, like libcni. A plugin that exits non-zero is reported with
//! the `{code, msg, details}` object it printed on stdout, or with its stderr text.
//!
//! Each plugin runs in a process group of its own, so the processes it starts (its IPAM
//! plugin, an `iptables` waiting for the xtables lock) belong to the call: when the call is
//! abandoned — the timeout passed, or [`InterruptibleExec`]'s caller was interrupted — the
//! whole group is killed and the call returns only once no process of it can run again, so
//! nothing the call started can write a lease or a rule after the caller moved on to the
//! DEL that undoes it. An interrupted plugin is first given a short grace to finish on its
//! own ([`INTERRUPT_GRACE`]): one killed between creating a record and writing it (the
//! reference `host-local` creates its lease file, then writes the container's ID into it)
//! would leave a record its DEL cannot recognise, an address lost for good. A terminal's
//! Ctrl-C reaches the runtime, not the plugins: the runtime decides what to abandon.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::validate::ValidateError;

/// The `CNI_*` variables the protocol defines; inherited copies are dropped before a call.
pub const PROTOCOL_VARS: &[&str] = &[
    "CNI_COMMAND",
    "CNI_CONTAINERID",
    "CNI_NETNS",
    "CNI_IFNAME",
    "CNI_ARGS",
    "CNI_PATH",
];

/// How many times a spawn failing with `ETXTBSY` is retried, and how long apart.
const TXTBSY_RETRIES: u32 = 5;
const TXTBSY_DELAY: Duration = Duration::from_secs(1);

/// How long the output of a plugin that exited is awaited even when the timeout has passed.
const PIPE_GRACE: Duration = Duration::from_millis(100);

/// How often a running plugin's caller is asked whether it was interrupted.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

/// How long an interrupted plugin may still run to finish by itself before it is killed.
/// The reference plugins take a few milliseconds once they hold their locks; one that is
/// still waiting (for a lock, a DHCP lease, a slow network) when the grace ends has usually
/// made nothing yet.
pub const INTERRUPT_GRACE: Duration = Duration::from_millis(500);

/// How long the processes of a killed plugin's group are awaited before giving up on them
/// (a process in uninterruptible sleep, e.g. on a hung NFS server, cannot die at once).
const GROUP_REAP_LIMIT: Duration = Duration::from_secs(10);

/// Runs one plugin binary. Implementations must be usable from several threads.
pub trait Exec: Send + Sync {
    /// Runs `plugin` with `stdin` and the `CNI_*` variables in `env` (added to the inherited
    /// environment), and returns its stdout when it exits 0 within `timeout`.
    fn exec_plugin(
        &self,
        plugin: &Path,
        stdin: &[u8],
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Vec<u8>, ExecError>;
}

/// Why running a plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The binary could not be started.
    #[error("cannot run plugin {}", plugin.display())]
    Spawn {
        /// The plugin's binary.
        plugin: PathBuf,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },
    /// Talking to the plugin (its pipes, waiting for it) failed.
    #[error("cannot talk to plugin {}", plugin.display())]
    Io {
        /// The plugin's binary.
        plugin: PathBuf,
        /// The failed pipe or wait operation.
        #[source]
        source: std::io::Error,
    },
    /// The plugin did not finish in time and was killed, with every process it started.
    #[error("plugin {} timed out after {}s and was killed", plugin.display(), secs(*timeout))]
    Timeout {
        /// The plugin's binary.
        plugin: PathBuf,
        /// The limit it exceeded.
        timeout: Duration,
    },
    /// The caller was interrupted before or while the plugin ran; a running plugin was given
    /// the grace to finish, then killed with every process it started that still ran.
    #[error("plugin {} was abandoned because the runtime was interrupted", plugin.display())]
    Interrupted {
        /// The plugin's binary.
        plugin: PathBuf,
    },
    /// The plugin was killed by a signal.
    #[error("plugin {} was killed by signal {signal} ({})", plugin.display(), signal_name(*signal))]
    Signal {
        /// The plugin's binary.
        plugin: PathBuf,
        /// The signal's number.
        signal: i32,
        /// What the plugin wrote to stderr before it died.
        stderr: String,
    },
    /// The plugin exited non-zero; `code`, `msg` and `details` come from the error object it
    /// printed, or `code` is `None` and `msg` describes what it printed instead.
    #[error("plugin {} failed (exit status {exit_status}): {}", plugin.display(), describe_failure(*code, msg, details))]
    Plugin {
        /// The plugin's binary.
        plugin: PathBuf,
        /// Its exit status.
        exit_status: i32,
        /// The CNI error code it reported, if it printed an error object.
        code: Option<u32>,
        /// The error's message (or a description of what it printed instead).
        msg: String,
        /// The error's details.
        details: String,
    },
}

impl ExecError {
    /// The CNI error code the plugin reported, if it reported one.
    pub fn code(&self) -> Option<u32> {
        match self {
            ExecError::Plugin { code, .. } => *code,
            _ => None,
        }
    }
}

/// Formats a plugin failure as `code N: msg; details`.
fn describe_failure(code: Option<u32>, msg: &str, details: &str) -> String {
    let mut out = match code {
        Some(c) => format!("code {c}: {msg}"),
        None => msg.to_owned(),
    };
    if !details.is_empty() {
        out.push_str("; ");
        out.push_str(details);
    }
    out
}

/// Whole seconds for messages, rounded up so a sub-second timeout does not read "0s".
fn secs(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

/// The conventional name of a signal number, e.g. `SIGKILL`.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSYS => "SIGSYS",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => "unknown signal",
    }
}

/// The real [`Exec`]: runs the binary as a child process, in a process group of its own.
///
/// The plugin's stderr is forwarded to this process's stderr after the call unless it
/// became the error message.
#[derive(Debug, Default, Clone, Copy)]
pub struct RawExec;

impl Exec for RawExec {
    fn exec_plugin(
        &self,
        plugin: &Path,
        stdin: &[u8],
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Vec<u8>, ExecError> {
        run_plugin(plugin, stdin, env, timeout, &|| false, Duration::ZERO)
    }
}

/// [`RawExec`] that also gives up when `interrupted` says so: the caller was told to stop
/// (rkt's SIGINT or SIGTERM during a pod's start). A plugin that is running then gets the
/// grace ([`INTERRUPT_GRACE`] unless [`with_grace`](Self::with_grace) says otherwise) to
/// end by itself; its process group is then killed and reaped, and the call fails with
/// [`ExecError::Interrupted`] either way. `interrupted` is asked before the plugin starts
/// (an interrupted caller starts none) and every 20 ms while it runs.
#[derive(Clone)]
pub struct InterruptibleExec {
    interrupted: Arc<dyn Fn() -> bool + Send + Sync>,
    grace: Duration,
}

impl InterruptibleExec {
    /// Runs plugins like [`RawExec`], abandoning them once `interrupted()` is true.
    pub fn new(interrupted: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        InterruptibleExec {
            interrupted: Arc::new(interrupted),
            grace: INTERRUPT_GRACE,
        }
    }

    /// How long a plugin that is running when the caller is interrupted may still run to
    /// finish by itself (never past the call's timeout). Zero kills it at once.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

impl std::fmt::Debug for InterruptibleExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptibleExec")
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Exec for InterruptibleExec {
    fn exec_plugin(
        &self,
        plugin: &Path,
        stdin: &[u8],
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Vec<u8>, ExecError> {
        if (self.interrupted)() {
            return Err(ExecError::Interrupted {
                plugin: plugin.to_path_buf(),
            });
        }
        run_plugin(plugin, stdin, env, timeout, &*self.interrupted, self.grace)
    }
}

/// Runs one plugin call: see the module documentation.
fn run_plugin(
    plugin: &Path,
    stdin: &[u8],
    env: &[(String, String)],
    timeout: Duration,
    interrupted: &dyn Fn() -> bool,
    grace: Duration,
) -> Result<Vec<u8>, ExecError> {
    let deadline = Instant::now() + timeout;
    let mut child = spawn_retrying(plugin, env)?;
    let io_err = |source| ExecError::Io {
        plugin: plugin.to_path_buf(),
        source,
    };

    // Each pipe gets its own thread so a plugin that fills one pipe while we block on
    // another cannot deadlock us. A plugin that exits without reading its stdin makes the
    // writer see EPIPE, which is not an error of ours. None of these threads is joined
    // unconditionally: a process the plugin started may hold a pipe open after the plugin
    // is gone, and the threads then end whenever that process does.
    let mut child_stdin = child.stdin.take();
    let input = stdin.to_vec();
    std::thread::spawn(move || {
        if let Some(pipe) = child_stdin.as_mut() {
            let _ = pipe.write_all(&input);
        }
        drop(child_stdin);
    });
    let (tx, rx) = mpsc::channel();
    drain(child.stdout.take(), Pipe::Stdout, tx.clone());
    drain(child.stderr.take(), Pipe::Stderr, tx);

    // Wait for the exit on another thread, with WNOWAIT so that thread never reaps: the
    // child stays a zombie until `child.wait()` below, and a kill after a timeout can
    // never hit a recycled pid. The plugin leads its own group, whose id is its pid; that
    // id is not reused while the leader is unreaped or any member lives.
    let pgid = child.id() as libc::pid_t;
    let exited = exit_notifier(child.id());
    let abandoned = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Some(ExecError::Timeout {
                plugin: plugin.to_path_buf(),
                timeout,
            });
        }
        match exited.recv_timeout(left.min(INTERRUPT_POLL)) {
            Err(mpsc::RecvTimeoutError::Timeout) if interrupted() => {
                // Whether it ends within the grace or not, the call is abandoned: the group
                // is killed below all the same, for what the plugin left running.
                let left = deadline.saturating_duration_since(Instant::now());
                let _ = exited.recv_timeout(grace.min(left));
                break Some(ExecError::Interrupted {
                    plugin: plugin.to_path_buf(),
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break None,
        }
    };
    if let Some(err) = abandoned {
        kill_group(pgid);
        let _ = child.wait();
        reap_group(pgid);
        return Err(err);
    }
    let status = child.wait().map_err(io_err)?;

    // The pipes close when the plugin exits, unless something it started still holds
    // them; give that the rest of the timeout (at least a moment, for a plugin that
    // exited just in time), then end it with the rest of the group.
    let (mut stdout, mut stderr) = (None, None);
    while stdout.is_none() || stderr.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(PIPE_GRACE)) {
            Ok((Pipe::Stdout, res)) => stdout = Some(res.map_err(io_err)?),
            Ok((Pipe::Stderr, res)) => stderr = Some(res.map_err(io_err)?),
            Err(_) => {
                kill_group(pgid);
                reap_group(pgid);
                return Err(ExecError::Timeout {
                    plugin: plugin.to_path_buf(),
                    timeout,
                });
            }
        }
    }
    let (stdout, stderr) = (stdout.unwrap_or_default(), stderr.unwrap_or_default());

    if let Some(signal) = status.signal() {
        forward_stderr(&stderr);
        return Err(ExecError::Signal {
            plugin: plugin.to_path_buf(),
            signal,
            stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
        });
    }
    let exit_status = status.code().unwrap_or(-1);
    if exit_status == 0 {
        forward_stderr(&stderr);
        return Ok(stdout);
    }
    Err(decode_failure(plugin, exit_status, &stdout, &stderr))
}

/// Sends SIGKILL to every process of group `pgid`.
fn kill_group(pgid: libc::pid_t) {
    // SAFETY: killpg(2) has no memory-safety preconditions; the group id is the one of a
    // plugin we started (see the caller), so it cannot name someone else's group.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
}

/// Waits until no process of group `pgid` can run again: the group is empty, or all that is
/// left of it are zombies (dead; their parent, init, reaps them). Killing again on each
/// round catches a member forked while the first kill was on its way. Gives up after
/// [`GROUP_REAP_LIMIT`].
fn reap_group(pgid: libc::pid_t) {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        // SAFETY: as in `kill_group`; signal 0 only checks for existence.
        let rc = unsafe { libc::killpg(pgid, 0) };
        if rc != 0 || !group_has_live_member(pgid) || start.elapsed() >= GROUP_REAP_LIMIT {
            return;
        }
        kill_group(pgid);
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Whether a process of group `pgid` is alive, i.e. not a zombie (from `/proc/<pid>/stat`).
fn group_has_live_member(pgid: libc::pid_t) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true; // cannot tell: keep waiting (bounded by the caller)
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| parse_stat(&stat))
        .any(|(state, pgrp)| pgrp == pgid && state != 'Z' && state != 'X')
}

/// The state letter and process group of a `/proc/<pid>/stat` line (the command name, in
/// parentheses, may itself contain spaces and parentheses: fields start after the last `)`).
fn parse_stat(stat: &str) -> Option<(char, libc::pid_t)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[derive(Clone, Copy)]
enum Pipe {
    Stdout,
    Stderr,
}

/// Reads `pipe` to its end on a thread and sends what it read, tagged with `which`.
fn drain(
    pipe: Option<impl Read + Send + 'static>,
    which: Pipe,
    tx: mpsc::Sender<(Pipe, std::io::Result<Vec<u8>>)>,
) {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let res = match pipe {
            Some(mut p) => p.read_to_end(&mut buf).map(|_| buf),
            None => Ok(buf),
        };
        let _ = tx.send((which, res));
    });
}

/// A channel that receives (or disconnects) once child `pid` has exited, without reaping it.
fn exit_notifier(pid: u32) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        loop {
            // SAFETY: an all-zero siginfo_t is a valid output buffer for waitid(2), which
            // only writes into it. WNOWAIT leaves the child unreaped, so the pid stays ours.
            let rc = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        // Also reached when waitid fails (e.g. ECHILD): the caller's wait() then reports it.
        let _ = tx.send(());
    });
    rx
}

/// Starts the plugin, retrying while its binary is busy being written.
fn spawn_retrying(
    plugin: &Path,
    env: &[(String, String)],
) -> Result<std::process::Child, ExecError> {
    let mut attempt = 0;
    loop {
        let mut cmd = Command::new(plugin);
        for var in PROTOCOL_VARS {
            if !env.iter().any(|(k, _)| k == var) {
                cmd.env_remove(var);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match cmd.spawn() {
            Ok(child) => return Ok(child),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < TXTBSY_RETRIES => {
                attempt += 1;
                std::thread::sleep(TXTBSY_DELAY);
            }
            Err(source) => {
                return Err(ExecError::Spawn {
                    plugin: plugin.to_path_buf(),
                    source,
                })
            }
        }
    }
}

fn forward_stderr(stderr: &[u8]) {
    if !stderr.is_empty() {
        let _ = std::io::stderr().write_all(stderr);
    }
}

/// The error object a plugin prints on stdout when it fails.
#[derive(serde::Deserialize)]
struct WireError {
    code: u32,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    details: String,
}

/// Builds the error for a non-zero exit from what the plugin printed.
fn decode_failure(plugin: &Path, exit_status: i32, stdout: &[u8], stderr: &[u8]) -> ExecError {
    let stderr_text = String::from_utf8_lossy(stderr).trim().to_owned();
    let (code, msg, details) = if !stdout.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<WireError>(stdout) {
            Ok(w) => {
                forward_stderr(stderr);
                (Some(w.code), w.msg, w.details)
            }
            Err(e) => (
                None,
                format!(
                    "exit status {exit_status}, and its error output could not be decoded ({e}): {:?}{}",
                    String::from_utf8_lossy(stdout).trim(),
                    if stderr_text.is_empty() {
                        String::new()
                    } else {
                        format!("; stderr: {stderr_text}")
                    }
                ),
                String::new(),
            ),
        }
    } else if !stderr_text.is_empty() {
        (None, stderr_text, String::new())
    } else {
        (
            None,
            format!("exit status {exit_status} with no error message"),
            String::new(),
        )
    };
    ExecError::Plugin {
        plugin: plugin.to_path_buf(),
        exit_status,
        code,
        msg,
        details,
    }
}

/// A plugin `type` could not be mapped to a binary.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// The name is empty or could escape the plugin directories.
    #[error(transparent)]
    InvalidName(#[from] ValidateError),
    /// No directory holds an executable regular file of that name.
    #[error("plugin {plugin:?} not found in {}", join_dirs(dirs))]
    NotFound {
        /// The plugin type looked for.
        plugin: String,
        /// The directories searched, in order.
        dirs: Vec<PathBuf>,
    },
}

fn join_dirs(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "(no plugin directories configured)".into();
    }
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Finds the binary for plugin `type` `plugin`: the first executable regular file named
/// `plugin` in `dirs`, in order. The name is validated first, so `../x` or `/bin/sh` can
/// never run.
pub fn find_in_path(plugin: &str, dirs: &[PathBuf]) -> Result<PathBuf, FindError> {
    crate::validate::plugin_type(plugin)?;
    for dir in dirs {
        let candidate = dir.join(plugin);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Ok(candidate);
            }
        }
    }
    Err(FindError::NotFound {
        plugin: plugin.to_owned(),
        dirs: dirs.to_vec(),
    })
}
