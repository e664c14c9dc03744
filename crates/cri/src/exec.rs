//! ExecSync: a command run in a running container (its namespaces, root, isolation and
//! cgroup, through the library's `stage::enter`, as `rkt app exec`), its stdout and stderr
//! collected apart, and killed when the request's timeout passes.
//!
//! The library relays an entered command's streams to its caller's own, so the server runs
//! it from a child of its own (`rkt-cri exec-in SPEC`, a hidden command) whose stdout and
//! stderr are pipes the server reads; on a timeout the child is sent SIGTERM, which the
//! library forwards to the command, then SIGKILL.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tonic::Status;

use crate::container::Container;
use crate::error::{internal, invalid, lib};
use crate::proto;

/// The hidden command.
pub const EXEC_COMMAND: &str = "exec-in";

/// What the child enters.
#[derive(Debug, Serialize, Deserialize)]
struct ExecSpec {
    pid: i32,
    cgroup: rkt::isolation::cgroups::PodCgroup,
    isolation: rkt::isolation::Isolation,
    env: Vec<(String, String)>,
    argv: Vec<String>,
    /// The command gets a terminal of its own, relayed to the helper's stdin and stdout,
    /// which must then be a terminal (the streaming server's pty).
    #[serde(default)]
    tty: bool,
}

/// ExecSync in container `c`.
pub fn exec_sync(
    c: &Container,
    cmd: Vec<String>,
    timeout_secs: i64,
) -> Result<proto::ExecSyncResponse, Status> {
    if cmd.is_empty() {
        return Err(invalid("ExecSync: no command"));
    }
    let mut child = helper(c, cmd, false)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| internal(&anyhow::anyhow!("cannot start the exec helper: {e}")))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let deadline =
        (timeout_secs > 0).then(|| Instant::now() + Duration::from_secs(timeout_secs as u64));
    let mut timed_out = false;
    let exit = loop {
        if let Some(status) = child.try_wait().map_err(lib)? {
            break status;
        }
        if let Some(d) = deadline {
            if Instant::now() >= d && !timed_out {
                timed_out = true;
                let pid = nix::unistd::Pid::from_raw(child.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                // The command has a moment to go; then the helper goes for sure.
                let grace = Instant::now() + Duration::from_secs(2);
                while Instant::now() < grace {
                    if child.try_wait().map_err(lib)?.is_some() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out_thread.join().unwrap_or_default();
    let stderr = err_thread.join().unwrap_or_default();
    if timed_out {
        return Err(Status::deadline_exceeded(format!(
            "ExecSync in container {}: the command did not end within {timeout_secs} s and was \
             killed",
            c.meta.id
        )));
    }
    use std::os::unix::process::ExitStatusExt;
    let code = exit
        .code()
        .unwrap_or_else(|| 128 + exit.signal().unwrap_or(0));
    if code == 254 && stdout.is_empty() && stderr.starts_with(b"rkt-cri exec-in: ") {
        let text = String::from_utf8_lossy(&stderr);
        return Err(internal(&anyhow::anyhow!("{}", text.trim_end())));
    }
    Ok(proto::ExecSyncResponse {
        stdout,
        stderr,
        exit_code: code,
    })
}

/// The helper that runs `cmd` in container `c` (`rkt-cri exec-in SPEC`), its streams not
/// yet set; with `tty` the command gets a terminal and the helper's stdin, stdout and
/// stderr must be one.
pub fn helper(c: &Container, cmd: Vec<String>, tty: bool) -> Result<Command, Status> {
    if cmd.is_empty() {
        return Err(invalid("no command to run"));
    }
    let status = &c.sandbox.status;
    let index = status
        .manifest
        .apps
        .iter()
        .position(|a| a.name == c.app)
        .ok_or_else(|| invalid(format!("container {} has no app", c.meta.id)))?;
    let not_running =
        || Status::failed_precondition(format!("container {} is not running", c.meta.id));
    let init = status.record.pid.ok_or_else(not_running)?;
    let pid = status
        .record
        .apps
        .get(index)
        .and_then(|r| r.pid)
        .and_then(|p| rkt::stage::enter::app_host_pid(init, p))
        .ok_or_else(not_running)?;
    let app = &status.manifest.apps[index];
    let mut env = vec![
        (
            "PATH".to_string(),
            rkt::stage::env::DEFAULT_PATH.to_string(),
        ),
        ("HOME".to_string(), "/root".to_string()),
    ];
    for (k, v) in &app.env {
        env.retain(|(key, _)| key != k);
        env.push((k.clone(), v.clone()));
    }
    let spec = ExecSpec {
        pid,
        cgroup: status.record.pod_cgroup(&c.sandbox.pod.uuid),
        isolation: status.record.app_isolation(index),
        env,
        argv: cmd,
        tty,
    };
    let json = serde_json::to_string(&spec).map_err(lib)?;
    let mut command = Command::new("/proc/self/exe");
    command.arg(EXEC_COMMAND).arg(json);
    Ok(command)
}

/// `rkt-cri exec-in SPEC`: enters and runs the command, exits with its status.
pub fn main_from_args(mut args: impl Iterator<Item = OsString>) -> i32 {
    let spec: ExecSpec = match args
        .next()
        .map(|a| serde_json::from_str(&a.to_string_lossy()))
    {
        Some(Ok(spec)) => spec,
        Some(Err(e)) => {
            eprintln!("rkt-cri {EXEC_COMMAND}: bad spec: {e}");
            return 254;
        }
        None => {
            eprintln!("rkt-cri {EXEC_COMMAND}: no spec");
            return 254;
        }
    };
    let env: Vec<(OsString, OsString)> =
        spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
    let enter = rkt::stage::enter::EnterSpec {
        exe: Path::new("/proc/self/exe"),
        pid: spec.pid,
        cgroup: Some(&spec.cgroup),
        argv: &spec.argv,
        env: &env,
        isolation: &spec.isolation,
        tty: Some(spec.tty),
    };
    match rkt::stage::enter::enter(&enter) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rkt-cri {EXEC_COMMAND}: {}", rkt::error::chain(&e));
            254
        }
    }
}
