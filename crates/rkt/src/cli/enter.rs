//! `rkt enter`: run a command inside a running pod.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

use rkt::pod::{PodStatus, State};
use rkt::stage::enter::{app_host_pid, enter, EnterSpec};
use rkt::stage::env::DEFAULT_PATH;

use super::pod_args::{app_index, exit_code, store, PodRef};
use super::GlobalArgs;

/// Run a command (default /bin/bash, else /bin/sh) in a running pod's network, mount, UTS,
/// IPC and PID namespaces and root directory, with the capabilities and seccomp filter of
/// the pod's app, and exit with its exit status. As upstream rkt, the command follows the
/// UUID (`rkt enter UUID ls -l`); `--` before it is optional.
#[derive(Debug, Args)]
pub struct EnterArgs {
    /// The pod's UUID, or any unique prefix of it.
    #[arg(value_name = "UUID", required_unless_present = "uuid_file")]
    pub uuid: Option<String>,

    /// Read the pod's UUID from FILE (as written by --uuid-file-save); the first word after
    /// the options is then the command.
    #[arg(long, value_name = "FILE")]
    pub uuid_file: Option<PathBuf>,

    /// The app to enter, by name [default: the pod's app; a pod of several apps needs
    /// it].
    #[arg(long, value_name = "NAME")]
    pub app: Option<String>,

    /// The command and its arguments [default: /bin/bash if the pod has it, else /bin/sh].
    #[arg(value_name = "COMMAND", trailing_var_arg = true)]
    pub command: Vec<String>,

    /// `rkt app exec --tty`: a terminal or not; `None` as rkt's stdin is.
    #[arg(skip)]
    pub tty: Option<bool>,
}

/// The shell to run when no command is given: bash if the pod's root has it, as upstream.
fn default_shell(pid: i32) -> String {
    let bash = Path::new("/proc")
        .join(pid.to_string())
        .join("root/bin/bash");
    if bash.exists() {
        "/bin/bash".to_string()
    } else {
        "/bin/sh".to_string()
    }
}

pub fn run(global: &GlobalArgs, args: &EnterArgs) -> anyhow::Result<ExitCode> {
    // With --uuid-file, a word in the UUID's place starts the command.
    let (pod_ref, mut command) = match (&args.uuid_file, &args.uuid) {
        (Some(file), Some(first)) => (
            PodRef {
                uuid: None,
                uuid_file: Some(file.clone()),
            },
            std::iter::once(first.clone())
                .chain(args.command.iter().cloned())
                .collect(),
        ),
        _ => (
            PodRef {
                uuid: args.uuid.clone(),
                uuid_file: args.uuid_file.clone(),
            },
            args.command.clone(),
        ),
    };
    let pod = pod_ref.lookup(&store(global)?)?;
    let status = PodStatus::read(&pod)?;
    let index = app_index(&pod.uuid, &status.manifest, args.app.as_deref())?;
    let init = match (status.state, status.record.pid) {
        (State::Running, Some(pid)) => pid,
        (State::Running, None) => bail!("pod {} is still starting; try again", pod.uuid),
        (state, _) => bail!("pod {} is not running (it is {state})", pod.uuid),
    };
    // In a pod of several apps, each app has a mount namespace and root of its own: enter
    // its process's, found among the init's children.
    let pid = match status.record.apps.get(index) {
        None => init,
        Some(app) => app
            .pid
            .and_then(|pid| app_host_pid(init, pid))
            .ok_or_else(|| {
                anyhow::anyhow!("app {} of pod {} is not running", app.name, pod.uuid)
            })?,
    };
    if command.is_empty() {
        command.push(default_shell(pid));
    }
    let mut env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), DEFAULT_PATH.into()),
        ("HOME".into(), "/root".into()),
    ];
    if let Some(term) = std::env::var_os("TERM") {
        env.push(("TERM".into(), term));
    }
    let isolation = status.record.app_isolation(index);
    let cgroup = status.record.pod_cgroup(&pod.uuid);
    let spec = EnterSpec {
        exe: Path::new("/proc/self/exe"),
        pid,
        cgroup: Some(&cgroup),
        argv: &command,
        env: &env,
        isolation: &isolation,
        tty: args.tty,
    };
    Ok(exit_code(enter(&spec)?))
}
