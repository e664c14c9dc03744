//! Pods whose runner died, released without an operator: the commands that start or list
//! pods (`run`, `run-prepared`, `prepare`, `app sandbox`, `list`, `status`), and `version`
//! (which Nomad's rkt driver runs every 30 s on each client), look for them
//! ([`rkt::pod::reap::dead_runners`]: one directory read and a lock probe per running pod)
//! and, when there are any, start the hidden `rkt release-dead-pods` in the background to
//! release them ([`rkt::pod::reap::release_dead`]), so that the command itself is not
//! slowed by their teardown. `rkt gc` releases them itself.
//!
//! The releaser is detached: started through a short-lived intermediate process (so that it
//! is nobody's child to reap, not even a long-lived `rkt run`'s), in a session of its own
//! (a Ctrl-C meant for the command does not reach it), with stdin, stdout and stderr on
//! `/dev/null` and no other descriptor of the command's (a caller reading the command's
//! output to its end does not wait for it).
//! Several may run at once: each pod goes to whichever takes its lock first.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rkt::pod::PodStore;

use super::GlobalArgs;

/// The hidden command: `rkt release-dead-pods --pods DIR --net-operations N`.
pub const COMMAND: &str = "release-dead-pods";

/// Looks for pods whose runner died in the data directory in effect and, when there are
/// any, starts the releaser. Never fails the command: what goes wrong is said under
/// `--debug` only (`rkt gc` releases them all the same).
pub fn release_in_background(global: &GlobalArgs) {
    // Quietly: the command itself shows the directories and warnings under --debug.
    let quiet = GlobalArgs {
        debug: false,
        ..global.clone()
    };
    let pods = match pods_dir(&quiet) {
        Ok(pods) => pods,
        Err(e) => return global.debug(format_args!("looking for dead pods: {e:#}")),
    };
    let dead = rkt::pod::reap::dead_runners(&PodStore::new(&pods));
    if dead.is_empty() {
        return;
    }
    global.debug(format_args!(
        "releasing in the background the pods whose rkt run died: {}",
        dead.join(", ")
    ));
    // The whole configuration now, for the host's limit of network operations.
    if let Err(e) = quiet.effective_dirs(&super::NetDirArgs::default()) {
        return global.debug(format_args!("looking for dead pods: {e:#}"));
    }
    if let Err(e) = start_releaser(&pods) {
        global.debug(format_args!("cannot start `rkt {COMMAND}`: {e}"));
    }
}

/// The pods directory in effect, `<data>/pods` ([`rkt::config::EffectiveDirs::pods_dir`]),
/// found without resolving the other directories: this runs on every command that starts or
/// lists pods.
fn pods_dir(global: &GlobalArgs) -> anyhow::Result<PathBuf> {
    let dirs = global.config_dirs()?;
    let paths = global.load_paths(&dirs)?;
    let cwd = std::env::current_dir()?;
    let data = rkt::config::data_dir(&paths, global.dir.as_deref(), &cwd);
    Ok(data.value.join("pods"))
}

/// Starts `rkt release-dead-pods` for the pods directory `pods`, detached.
fn start_releaser(pods: &Path) -> io::Result<()> {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg(COMMAND)
        .arg("--pods")
        .arg(pods)
        .arg("--net-operations")
        .arg(rkt::networking::admission::limit().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: between fork and exec the closure makes only system calls (fork(2), setsid(2),
    // close_range(2), _exit(2)), which are async-signal-safe, and touches no memory of the
    // parent.
    unsafe {
        cmd.pre_exec(|| match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                libc::setsid();
                // Nothing the command inherited (systemd's socket-activation descriptors, a
                // caller's pipe) is held open by the releaser: closed at exec (an older
                // kernel without close_range: only what is close-on-exec already is).
                libc::syscall(
                    libc::SYS_close_range,
                    3u32,
                    u32::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
                Ok(())
            }
            // The intermediate: its child, the releaser, goes on to exec.
            _ => libc::_exit(0),
        });
    }
    // The intermediate, which has already exited (its child's exec succeeded or failed:
    // spawn reports the latter).
    cmd.spawn()?.wait()?;
    Ok(())
}

/// `rkt release-dead-pods --pods DIR --net-operations N`: releases the pods of `DIR` whose
/// runner died; each failure on stderr, exit status 254 when any. Each plugin call may take
/// `$RKT_NET_PLUGIN_TIMEOUT`, as in the command that started it.
pub fn main_from_args(args: impl IntoIterator<Item = OsString>) -> i32 {
    let (pods, limit) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("rkt {COMMAND}: {message}");
            return i32::from(super::FAILURE);
        }
    };
    rkt::networking::admission::set_limit(limit);
    let timeout = rkt::security::plugin_timeout().unwrap_or(cni::api::DEFAULT_TIMEOUT);
    let report = rkt::pod::reap::release_dead(&PodStore::new(pods), timeout);
    for uuid in &report.released {
        println!("released pod {uuid} (its rkt run had died)");
    }
    for err in &report.errors {
        eprintln!("rkt {COMMAND}: {}", rkt::error::chain(err));
    }
    match report.errors.is_empty() {
        true => 0,
        false => i32::from(super::FAILURE),
    }
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<(PathBuf, usize), String> {
    let (mut pods, mut limit) = (None, None);
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("{flag:?} needs a value"))?;
        match flag.to_str() {
            Some("--pods") => pods = Some(PathBuf::from(value)),
            Some("--net-operations") => {
                limit = Some(
                    value
                        .to_str()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| format!("--net-operations: {value:?} is not a number"))?,
                )
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok((
        pods.ok_or("--pods is required")?,
        limit.ok_or("--net-operations is required")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_releasers_arguments_parse_and_bad_ones_are_named() {
        let os = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            parse(os(&["--pods", "/d/pods", "--net-operations", "4"])).unwrap(),
            (PathBuf::from("/d/pods"), 4)
        );
        assert!(parse(os(&["--pods", "/d"]))
            .unwrap_err()
            .contains("--net-operations"));
        assert!(parse(os(&["--pods", "/d", "--net-operations", "x"]))
            .unwrap_err()
            .contains("\"x\""));
        assert!(parse(os(&["--bogus", "1"]))
            .unwrap_err()
            .contains("--bogus"));
    }
}
