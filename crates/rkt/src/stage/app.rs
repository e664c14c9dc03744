//! One app's process, as the pod's init prepares it: what the stage read and compiled for
//! the app ([`PreparedApp`]), the app's root mounted in the current mount namespace
//! ([`mount_app_root`]) and entered ([`enter_app`]), and its program executed under its
//! isolation ([`ExecPlan`]). The init of a pod of one app ([`super::init`]) and of several
//! ([`super::apps`]) both start their apps through these.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::wait::WaitStatus;
use nix::unistd::execve;

use super::env::find_executable;
use super::volumes::Creatable;
use super::{mounts, signals, StageError};
use crate::isolation;
use crate::isolation::syscall::Mounts;
use crate::isolation::user::Identity;
use crate::podstore::{App, Volume};

/// Exit status of the stage when it fails before the app runs.
pub const SETUP_FAILED: i32 = 125;

pub(super) fn report(status: &mut File, err: &StageError) {
    let text = crate::error::chain(err);
    let line = format!("error {}\n", text.replace('\n', " "));
    if status.write_all(line.as_bytes()).is_err() {
        eprintln!("rkt stage1-init: {text}");
    }
}

/// One app as the pod's init starts it: what the stage read and compiled for it.
pub(super) struct PreparedApp {
    pub(super) app: App,
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) isolation: AppIsolation,
    /// Its host volumes' sources taken in the host's mount namespace, by mount index
    /// ([`super::volumes::take_host_sources`]); empty when none was.
    pub(super) host_sources: Vec<Option<super::volumes::Source>>,
}

/// What an app's process needs of the isolation: whether to protect the kernel paths of its
/// `/proc`, the compiled capabilities and filters, and whether its root is read-only.
pub(super) struct AppIsolation {
    pub(super) paths: bool,
    /// The masked and read-only paths (with `paths`).
    pub(super) kernel_paths: isolation::paths::KernelPaths,
    pub(super) readonly_rootfs: bool,
    pub(super) prepared: isolation::Prepared,
    /// The systemd socket-activation descriptors (3 to 3 + N - 1) the app keeps; 0: none.
    pub(super) listen_fds: i32,
    /// The app's stdin, stdout and stderr when they are its log's or its monitor's (pipes'
    /// ends or a terminal; close-on-exec in the init; the app gets them as 0, 1 and 2).
    pub(super) log_fds: [Option<RawFd>; 3],
    /// `--oom-score-adj`: the app's `oom_score_adj`, set in its process before it executes.
    pub(super) oom_score_adj: Option<i16>,
    /// The app's own cgroup (limits of its own, rkt's per-app `--memory`/`--cpu`): the
    /// files its process writes `0` to, to join it, opened (close-on-exec) while the stage
    /// still sees the host's cgroup file system.
    pub(super) own_cgroup: Vec<(PathBuf, File)>,
}

/// Opens the files that move a process into app `app`'s own cgroup below the pod's
/// (recorded in `record`), when it has limits of its own.
fn own_cgroup_files(
    app: &App,
    record: &crate::podstore::PodState,
) -> Result<Vec<(PathBuf, File)>, StageError> {
    let Some(pod) = record.cgroup.as_ref() else {
        return Ok(Vec::new());
    };
    if app.isolators.own_limits.is_none() {
        return Ok(Vec::new());
    }
    let cgroup = pod.child(&isolation::cgroups::app_leaf(&app.name));
    isolation::cgroups::detect()
        .join_files(&cgroup)
        .into_iter()
        .map(
            |path| match std::fs::OpenOptions::new().write(true).open(&path) {
                Ok(file) => Ok((path, file)),
                Err(source) => Err(StageError::Io {
                    what: "open the app's own cgroup at",
                    path,
                    source,
                }),
            },
        )
        .collect()
}

/// Reads one byte, retrying on EINTR; `Ok(0)` at end of file.
pub(super) fn read_byte(fd: &OwnedFd) -> Result<usize, Errno> {
    loop {
        match nix::unistd::read(fd.as_raw_fd(), &mut [0u8]) {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}

/// The app's view of the files, in the current mount namespace: its root (the host's, or
/// its rootfs bound onto itself), protected device nodes, the pod's `/etc` files, `/sys`,
/// `/dev`, the app's `--mount`s of the pod's `volumes` ([`super::volumes`]), and a
/// read-only root: always for a host-command pod (the host's tree, with rkt's state hidden
/// and a private `/tmp`, see [`mounts::read_only_host`]) unless its kernel paths are
/// unprotected, and with `--readonly-rootfs`. Everything but `/proc`, which needs the pod's
/// PID namespace (see [`enter_app`]).
pub(super) fn mount_app_root(
    sys: &dyn Mounts,
    pod_dir: &Path,
    prepared: &mut PreparedApp,
    own_netns: bool,
    volumes: &[Volume],
) -> Result<(), StageError> {
    let host_sources = std::mem::take(&mut prepared.host_sources);
    let (app, isolation) = (&prepared.app, &prepared.isolation);
    let root = app.rootfs.clone().unwrap_or_else(|| PathBuf::from("/"));
    // A `--rootfs` directory is the user's, never written: the mount points it lacks (and
    // room for volume targets missing at its top level) come from a tmpfs over it. An
    // image's root is the pod's own overlay, where they are made.
    let user_rootfs = app.rootfs.is_some() && app.image.is_none();
    let mut own_dev = None;
    // The root's own entries the stage binds into a tmpfs (to add mount points and the
    // pod's /etc files without writing into the root) are the root too for
    // `--readonly-rootfs`: their mounts, by descriptor (a volume may be mounted over one).
    let mut shadows = Vec::new();
    if app.rootfs.is_some() {
        mounts::bind_rootfs(sys, &root)?;
    }
    if user_rootfs {
        let top_level_missing = super::volumes::top_level_missing(&root, &app.mounts);
        let (dev, made) = mounts::provide_mount_points(
            sys,
            pod_dir,
            &root,
            &mounts::rootfs_mount_points(own_netns),
            top_level_missing,
        )?;
        own_dev = dev;
        shadows.extend(made);
    }
    if isolation.paths {
        // No device node of the app's own making opens; the pod's /dev gets the few the
        // stage binds in, and /sys is read-only.
        isolation::paths::nodev_tree(sys, &root).map_err(StageError::Isolation)?;
    }
    // Before a host-command pod's tree turns read-only: a bind copies its source's flags.
    let sources = super::volumes::take_sources(sys, pod_dir, volumes, &app.mounts, host_sources)?;
    let host_view = (app.rootfs.is_none() && (isolation.paths || isolation.readonly_rootfs))
        .then_some(mounts::HostView {
            private_tmp: !isolation.readonly_rootfs,
            hide_rkt_state: isolation.paths,
        });
    let own_tmp = match host_view {
        Some(view) => mounts::read_only_host(sys, pod_dir, view)?,
        None => {
            shadows.extend(mounts::bind_etc_files(
                sys,
                pod_dir,
                &root,
                app.rootfs.is_some(),
            )?);
            Vec::new()
        }
    };
    if own_netns {
        mounts::mount_sysfs(sys, &root)?;
    } else if isolation.paths && app.rootfs.is_none() {
        isolation::paths::read_only_tree(sys, Path::new("/sys")).map_err(StageError::Isolation)?;
    }
    if app.rootfs.is_some() || isolation.paths {
        mounts::populate_dev(sys, &root)?;
    }
    let own_dev: Vec<u64> = own_dev.into_iter().collect();
    let creatable = match (&app.rootfs, user_rootfs) {
        (None, _) => Creatable::HostRoot(&own_tmp),
        (Some(rootfs), true) => Creatable::Rootfs(rootfs, &own_dev),
        (Some(_), false) => Creatable::Anywhere,
    };
    super::volumes::mount_app_volumes(
        sys,
        &root,
        creatable,
        &app.mounts,
        sources,
        isolation.paths,
    )?;
    if isolation.readonly_rootfs && app.rootfs.is_some() {
        // /proc is mounted here later: the mount point must exist before.
        let proc_dir = root.join("proc");
        std::fs::create_dir_all(&proc_dir).map_err(|source| StageError::Io {
            what: "create",
            path: proc_dir,
            source,
        })?;
        isolation::paths::read_only_mount(sys, &root).map_err(StageError::Isolation)?;
        for shadow in &shadows {
            isolation::paths::read_only_mount_fd(sys, shadow.fd.as_fd(), &shadow.path)
                .map_err(StageError::Isolation)?;
        }
    }
    if host_view.is_some() {
        mounts::reenter_cwd();
    }
    Ok(())
}

/// In the pod's PID namespace, with the app's root mounted ([`mount_app_root`]): mounts
/// `/proc` (its kernel paths protected), enters the rootfs, then the image's working
/// directory (or `--working-dir`), and settles the app's identity (the image's `User`,
/// unless `--user`/`--group` chose one). Returns the environment the app gets.
pub(super) fn enter_app(
    sys: &dyn Mounts,
    prepared: &mut PreparedApp,
) -> Result<Vec<(OsString, OsString)>, StageError> {
    let app = &prepared.app;
    let isolation = &mut prepared.isolation;
    let root = app.rootfs.as_deref().unwrap_or(Path::new("/"));
    mounts::mount_proc(sys, root)?;
    if isolation.paths {
        isolation::paths::protect_paths(sys, root, &isolation.kernel_paths)
            .map_err(StageError::Isolation)?;
    }
    if let Some(rootfs) = &app.rootfs {
        mounts::enter_rootfs(sys, rootfs)?;
    }
    let creds = match &app.image {
        Some(image) => crate::image_pod::process::credentials(image)?,
        None => None,
    };
    // `--working-dir`, else the image's WorkingDir.
    let image_dir = app.image.as_ref().and_then(|i| i.working_dir.as_deref());
    if let Some(dir) = app
        .working_dir
        .as_deref()
        .or(image_dir)
        .filter(|d| !d.is_empty())
    {
        // Created in an image's root (the pod's overlay), never in a --rootfs or the host's.
        enter_working_dir(dir, app.image.is_some())?;
    }
    // The image's User, unless --user/--group chose the identity: the isolation switches
    // to it in the app's process, in its order (bounding set first, then the user).
    if let Some(creds) = &creds {
        isolation.prepared.default_identity(Identity {
            uid: creds.uid,
            gid: creds.gid,
            supplementary_gids: creds.groups.clone(),
        });
    }
    Ok(crate::image_pod::process::with_home(
        &prepared.env,
        app.image.as_ref(),
        creds.as_ref(),
    ))
}

/// The app's working directory: created when missing in the app's own root (an image's,
/// as Docker does for an image's WorkingDir), never in a `--rootfs` or on the host's.
fn enter_working_dir(dir: &str, own_root: bool) -> Result<(), StageError> {
    let path = Path::new("/").join(dir);
    let err = |what| {
        let path = path.clone();
        move |source| StageError::Io { what, path, source }
    };
    if own_root {
        std::fs::create_dir_all(&path).map_err(err("create the working directory"))?;
    }
    std::env::set_current_dir(&path).map_err(err("change to the working directory"))
}

/// The app's program found in its `PATH`, and its argv and environment as C strings.
pub(super) struct ExecPlan {
    pub(super) exe: PathBuf,
    c_exe: CString,
    c_argv: Vec<CString>,
    c_env: Vec<CString>,
}

impl ExecPlan {
    /// `identity`: who the app runs as (`None`: root), for the check that it may execute
    /// the program.
    pub(super) fn new(
        argv: &[String],
        env: &[(OsString, OsString)],
        identity: Option<&Identity>,
    ) -> Result<ExecPlan, StageError> {
        let program = argv.first().ok_or(StageError::NoCommand)?;
        let path_var = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
        let exe = find_executable(program, path_var).ok_or_else(|| StageError::NotFound {
            program: program.clone(),
            path: path_var
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })?;
        // Checked now, not only by execve: in a pod of several apps, a program that
        // cannot run must fail the pod before any app runs.
        may_execute(&exe, identity).map_err(|source| StageError::Exec {
            program: exe.clone(),
            source,
        })?;
        let c_exe = cstring(exe.clone().into_os_string())?;
        let c_argv = argv
            .iter()
            .map(|a| cstring(a.into()))
            .collect::<Result<Vec<_>, _>>()?;
        let c_env = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.clone();
                kv.push("=");
                kv.push(v);
                cstring(kv)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ExecPlan {
            exe,
            c_exe,
            c_argv,
            c_env,
        })
    }

    /// In the app's process: a session of its own (its controlling terminal the pod's, if
    /// it has one: [`super::stdio::own_session`]), the socket-activation variables when it
    /// gets descriptors, narrowed ([`isolation::apply`]), then executes the app. Returns
    /// only on failure.
    pub(super) fn exec(mut self, isolation: &AppIsolation) -> StageError {
        signals::reset_for_exec();
        for (fd, target) in isolation.log_fds.iter().zip([0, 1, 2]) {
            if let Some(fd) = fd {
                if let Err(source) = nix::unistd::dup2(*fd, target) {
                    return StageError::Sys {
                        what: "give its log as a standard stream to",
                        path: self.exe,
                        source,
                    };
                }
            }
        }
        if let Err(source) = super::stdio::own_session() {
            return StageError::Sys {
                what: "start a session of its own for",
                path: self.exe,
                source,
            };
        }
        if isolation.listen_fds > 0 {
            self.c_env
                .retain(|kv| !kv.as_bytes().starts_with(b"LISTEN_"));
            for kv in [
                format!("LISTEN_FDS={}", isolation.listen_fds),
                format!("LISTEN_PID={}", std::process::id()),
            ] {
                self.c_env.extend(CString::new(kv));
            }
        }
        // Its own cgroup: what it starts is inside too.
        for (path, file) in &isolation.own_cgroup {
            if let Err(source) = (&*file).write_all(b"0") {
                return StageError::Io {
                    what: "join the app's own cgroup at",
                    path: path.clone(),
                    source,
                };
            }
        }
        // While the process still holds its capabilities (lowering the score may need
        // CAP_SYS_RESOURCE).
        if let Some(adj) = isolation.oom_score_adj {
            if let Err(e) = isolation::oom::set(adj) {
                return StageError::Isolation(e);
            }
        }
        if let Err(e) = isolation::apply(&isolation::syscall::Linux, &isolation.prepared) {
            return StageError::Isolation(e);
        }
        let errno = match execve(&self.c_exe, &self.c_argv, &self.c_env) {
            Err(errno) => errno,
            Ok(never) => match never {},
        };
        StageError::Exec {
            program: self.exe,
            source: errno,
        }
    }
}

/// App `index` of the pod recorded in `record`, ready for its process: its root in
/// `app_dir` (an image app's), its environment, its isolation compiled; the socket-activation
/// descriptors it keeps and its logged streams' descriptors (`fds`).
pub(super) fn prepare_app(
    app: crate::podstore::App,
    app_dir: &std::path::Path,
    record: &crate::podstore::PodState,
    index: usize,
    (listen_fds, log_fds): (i32, [Option<RawFd>; 3]),
) -> Result<PreparedApp, StageError> {
    let app = crate::image_pod::for_stage(app, app_dir);
    let env = super::env::app_env(&app, std::env::vars_os());
    let settled = record.app_isolation(index);
    let isolation = AppIsolation {
        paths: settled.paths,
        kernel_paths: settled.kernel_paths.clone(),
        readonly_rootfs: settled.readonly_rootfs,
        prepared: settled.prepare().map_err(StageError::Isolation)?,
        listen_fds,
        log_fds,
        oom_score_adj: app.oom_score_adjust,
        own_cgroup: own_cgroup_files(&app, record)?,
    };
    Ok(PreparedApp {
        app,
        env,
        isolation,
        host_sources: Vec::new(),
    })
}

/// In an app's freshly forked process (of a pod of several apps, or a sandbox's): a mount
/// namespace of its own (a slave copy of the init's), its root mounted and entered as a pod
/// of one app's would be, and the program it will execute, looked up there.
pub(super) fn own_root(
    pod_dir: &Path,
    app: &mut PreparedApp,
    own_netns: bool,
    volumes: &[crate::podstore::Volume],
) -> Result<ExecPlan, StageError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(|source| StageError::Sys {
        what: "unshare a mount namespace for the app in",
        path: pod_dir.to_path_buf(),
        source,
    })?;
    let sys = &isolation::syscall::Linux;
    super::mounts::make_root_slave(sys)?;
    mount_app_root(sys, pod_dir, app, own_netns, volumes)?;
    let env = enter_app(sys, app)?;
    ExecPlan::new(&app.app.exec, &env, app.isolation.prepared.identity())
}

fn cstring(s: OsString) -> Result<CString, StageError> {
    CString::new(s.into_vec()).map_err(|e| StageError::NulByte {
        text: String::from_utf8_lossy(&e.into_vec()).into_owned(),
    })
}

/// The shell-style exit status for a wait status; `None` if the child has not ended.
pub fn exit_code(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some(code),
        WaitStatus::Signaled(_, signal, _) => Some(128 + signal as i32),
        _ => None,
    }
}

/// Whether the app, running as `identity` (`None`: root), may execute `exe`: root when any
/// execute bit is set (as `access(2)` answers for it), another user by the bit of the class
/// it is in (owner, group, others), as `execve` will judge.
fn may_execute(exe: &Path, identity: Option<&Identity>) -> Result<(), Errno> {
    use std::os::unix::fs::MetadataExt;
    let id = match identity {
        Some(id) if !id.is_root() => id,
        _ => return nix::unistd::access(exe, nix::unistd::AccessFlags::X_OK),
    };
    let meta =
        std::fs::metadata(exe).map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))?;
    let in_group = meta.gid() == id.gid || id.supplementary_gids.contains(&meta.gid());
    let bit = if meta.uid() == id.uid {
        0o100
    } else if in_group {
        0o010
    } else {
        0o001
    };
    if meta.is_file() && meta.mode() & bit != 0 {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isolation::syscall::test::{Call, Recorder};
    use crate::podstore::volume::{Mount, VolumeKind};
    use std::os::unix::fs::PermissionsExt;

    /// A `--rootfs` app with its own network, protected kernel paths and a read-only
    /// volume at `/data`, in a temporary directory with every mount point in place.
    struct Pod {
        dir: tempfile::TempDir,
        app: PreparedApp,
        volumes: Vec<Volume>,
    }

    fn pod() -> Pod {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = dir.path().join("rootfs");
        for sub in ["dev", "sys", "etc", "data", "proc/acpi", "proc/sys"] {
            std::fs::create_dir_all(rootfs.join(sub)).unwrap();
        }
        for file in ["etc/resolv.conf", "etc/hosts", "etc/hostname", "proc/kcore"] {
            std::fs::write(rootfs.join(file), "").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("pod")).unwrap();
        std::fs::create_dir_all(dir.path().join("source")).unwrap();
        let app = App {
            name: "app".into(),
            exec: vec!["/bin/true".into()],
            rootfs: Some(rootfs),
            mounts: vec![Mount {
                volume: "data".into(),
                target: "/data".into(),
            }],
            ..App::default()
        };
        let volumes = vec![Volume {
            name: "data".into(),
            kind: VolumeKind::Host {
                source: dir.path().join("source"),
                read_only: true,
                recursive: false,
                propagation: None,
            },
        }];
        let isolation = AppIsolation {
            paths: true,
            kernel_paths: Default::default(),
            readonly_rootfs: false,
            prepared: isolation::Isolation::default().prepare().unwrap(),
            listen_fds: 0,
            log_fds: [None, None, None],
            oom_score_adj: None,
            own_cgroup: Vec::new(),
        };
        let app = PreparedApp {
            app,
            env: Vec::new(),
            isolation,
            host_sources: Vec::new(),
        };
        Pod { dir, app, volumes }
    }

    impl Pod {
        fn mount(&mut self, sys: &Recorder) -> Result<(), StageError> {
            let pod_dir = self.dir.path().join("pod");
            mount_app_root(sys, &pod_dir, &mut self.app, true, &self.volumes)?;
            enter_app(sys, &mut self.app).map(drop)
        }

        /// What part of the app's view a path under the test's directory is.
        fn part(&self, path: &Path) -> &'static str {
            let rootfs = self.dir.path().join("rootfs");
            let Ok(rel) = path.strip_prefix(&rootfs) else {
                // The volume's mount is named by its target in the app's root.
                return if path.starts_with(self.dir.path().join("source")) {
                    "volume source"
                } else if path == Path::new("/data") {
                    "volume"
                } else {
                    "elsewhere"
                };
            };
            let rel = rel.to_str().unwrap();
            match rel.split('/').next().unwrap() {
                "" => "root",
                "etc" => "etc",
                "sys" => "sys",
                "dev" => "dev",
                "data" => "volume",
                "proc" if rel == "proc" => "proc",
                "proc" => "kernel paths",
                _ => "elsewhere",
            }
        }
    }

    #[test]
    fn the_app_root_is_mounted_then_dev_then_volumes_then_proc_then_kernel_paths() {
        let mut pod = pod();
        let sys = Recorder::default();
        pod.mount(&sys).unwrap();
        let calls = sys.calls.take();
        let mut parts: Vec<&str> = Vec::new();
        for call in &calls {
            let part = match call {
                Call::Mount { target, .. } => pod.part(target),
                Call::SetAttr(path, _) | Call::CloneTree(path, _) | Call::AttachTree(path) => {
                    pod.part(path)
                }
                Call::Chdir(_) | Call::PivotRoot | Call::Detach(_) => "pivot_root",
                other => panic!("not a mount: {other:?}"),
            };
            if parts.last() != Some(&part) {
                parts.push(part);
            }
        }
        assert_eq!(
            parts,
            [
                "root",
                "volume source",
                "etc",
                "sys",
                "dev",
                "volume",
                "proc",
                "kernel paths",
                "pivot_root"
            ],
            "{calls:#?}"
        );
        // The root made nodev before anything is mounted on it; the volume read-only, then
        // nodev; the masked paths before the read-only ones; the old root detached last.
        use beneath::mount::{Attr, Flag};
        let rootfs = pod.dir.path().join("rootfs");
        assert_eq!(
            calls[1],
            Call::SetAttr(rootfs.clone(), Attr::set(Flag::NoDev).recursive())
        );
        let (data, target) = (rootfs.join("data"), PathBuf::from("/data"));
        let volume: Vec<&Call> = calls
            .iter()
            .filter(|c| matches!(c, Call::SetAttr(..) | Call::AttachTree(..)))
            .skip(1)
            .collect();
        assert_eq!(
            volume,
            [
                &Call::AttachTree(data),
                &Call::SetAttr(target.clone(), Attr::set(Flag::ReadOnly)),
                &Call::SetAttr(target, Attr::set(Flag::NoDev).recursive()),
            ]
        );
        let kernel: Vec<String> = calls
            .iter()
            .filter_map(|c| match c {
                Call::Mount { target, .. } if pod.part(target) == "kernel paths" => {
                    Some(target.strip_prefix(&rootfs).unwrap().display().to_string())
                }
                _ => None,
            })
            .collect();
        assert_eq!(kernel, ["proc/acpi", "proc/kcore", "proc/sys", "proc/sys"]);
        assert_eq!(
            calls[calls.len() - 4..],
            [
                Call::Chdir(rootfs),
                Call::PivotRoot,
                Call::Detach(".".into()),
                Call::Chdir("/".into())
            ]
        );
    }

    #[test]
    fn a_failed_mount_stops_the_sequence_and_names_its_target() {
        let mut pod = pod();
        // The root's bind, then its nodev: that one fails.
        let sys = Recorder {
            fail_at: Some(1),
            ..Recorder::default()
        };
        let err = pod.mount(&sys).unwrap_err();
        let rootfs = pod.dir.path().join("rootfs");
        assert_eq!(
            crate::error::chain(&err),
            format!(
                "pod isolation: cannot mount over {}: EPERM: Operation not permitted",
                rootfs.display()
            )
        );
        assert_eq!(sys.calls.take().len(), 2);
    }

    #[test]
    fn a_program_is_executable_by_the_class_the_apps_user_is_in() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let exe = tmp.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        if nix::unistd::geteuid().is_root() {
            // An owner that is not root, so that the owner class is its own.
            std::os::unix::fs::chown(&exe, Some(4242), Some(4343)).unwrap();
        }
        let meta = std::fs::metadata(&exe).unwrap();
        let (owner, group) = (meta.uid(), meta.gid());
        let user = |uid, gid, supplementary_gids: Vec<u32>| Identity {
            uid,
            gid,
            supplementary_gids,
        };
        let other = user(owner + 1000, group + 1000, vec![]);
        let member = user(owner + 1000, group + 1000, vec![group]);
        let set_mode = |mode| std::fs::set_permissions(&exe, PermissionsExt::from_mode(mode));

        set_mode(0o744).unwrap();
        assert_eq!(may_execute(&exe, Some(&other)), Err(Errno::EACCES));
        assert_eq!(may_execute(&exe, Some(&member)), Err(Errno::EACCES));
        set_mode(0o754).unwrap();
        assert_eq!(may_execute(&exe, Some(&member)), Ok(()));
        assert_eq!(may_execute(&exe, Some(&other)), Err(Errno::EACCES));
        set_mode(0o745).unwrap();
        assert_eq!(may_execute(&exe, Some(&other)), Ok(()));
        // The owner class decides for the owner, even when the others may.
        set_mode(0o645).unwrap();
        assert_ne!(owner, 0);
        let owner_user = user(owner, group, vec![]);
        assert_eq!(may_execute(&exe, Some(&owner_user)), Err(Errno::EACCES));
        set_mode(0o644).unwrap();
        assert_eq!(may_execute(&exe, None), Err(Errno::EACCES));
        assert_eq!(
            may_execute(&tmp.path().join("missing"), Some(&other)),
            Err(Errno::ENOENT)
        );
    }
}
