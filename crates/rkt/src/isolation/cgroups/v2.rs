//! cgroup v2: the unified hierarchy at `root`; the pod's cgroup with the controllers its
//! limits need (`pids` for every pod, `memory` and `cpu` with `--memory` and `--cpu`)
//! enabled in the `cgroup.subtree_control` of every cgroup from the root down to its
//! parent, as runc's cgroupfs driver does.
//!
//! cgroup v2 lets no cgroup but the root both hold processes and give controllers to its
//! children (the "no internal processes" rule). The cgroup rkt runs in holds rkt, so by
//! default (the pod below rkt's own cgroup) a runner anywhere but the root cannot give its
//! pods a pids limit; moving the caller's other processes aside, as some container entry
//! points do, would change the accounting of processes that are not rkt's. So that is an
//! error, before the pod exists, that says to pass `--cgroup-parent=PATH`, a cgroup without
//! processes (under systemd, a unit with `Delegate=yes` whose own processes live in a
//! cgroup below it); a parent that turns out to hold processes is refused the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    below, mkdir, parent_in, remove_pod_dir, write, CgroupParent, Limits, Manager, PidsLimit,
    Placement, PodCgroup, ProcCgroup, CPU_PERIOD_US, PROC_SELF_CGROUP, UNIFIED,
};
use crate::isolation::IsolationError;

/// The unified hierarchy mounted at `root` (normally `/sys/fs/cgroup`).
pub struct V2 {
    root: PathBuf,
    /// The runner's cgroups (normally `/proc/self/cgroup`).
    proc_cgroup: PathBuf,
}

impl V2 {
    pub fn new(root: &Path) -> V2 {
        V2 {
            root: root.to_path_buf(),
            proc_cgroup: PathBuf::from(PROC_SELF_CGROUP),
        }
    }

    /// The controllers `limits` needs, each checked to be available at the root.
    fn controllers(&self, limits: &Limits) -> Result<Vec<&'static str>, IsolationError> {
        let path = self.root.join("cgroup.controllers");
        let available = std::fs::read_to_string(&path).map_err(|source| IsolationError::Io {
            what: "read",
            path: path.clone(),
            source,
        })?;
        let mut wanted = Vec::new();
        let offered = |name: &str| available.split_whitespace().any(|c| c == name);
        let pids_limited = matches!(limits.pids_limit(), PidsLimit::Tasks(_));
        for (name, flag, needed) in [
            ("memory", "--memory", limits.memory.is_some()),
            ("cpu", "--cpu", limits.cpu_millis.is_some()),
            ("cpu", "--cpu-shares", limits.cpu_shares.is_some()),
            // Without a limit the pod's cgroup still counts its tasks, where it can.
            (
                "pids",
                limits.pids_origin(),
                pids_limited || offered("pids"),
            ),
        ] {
            if !needed {
                continue;
            }
            if !offered(name) {
                return Err(IsolationError::Unsupported {
                    what: format!(
                        "{flag}: the cgroup v2 hierarchy at {} offers no {name} controller \
                         ({} lists {:?})",
                        self.root.display(),
                        path.display(),
                        available.trim()
                    ),
                });
            }
            if !wanted.contains(&name) {
                wanted.push(name);
            }
        }
        Ok(wanted)
    }

    /// One attempt of [`Manager::create`].
    fn try_create(&self, dir: &Path, limits: &Limits) -> Result<(), IsolationError> {
        let controllers = self.controllers(limits)?;
        let parent = dir.parent().unwrap_or(&self.root);
        // Missing levels: the shared `rkt`, or a `--cgroup-parent` nobody made yet.
        mkdir(parent)?;
        if !controllers.is_empty() {
            let mut at = self.root.clone();
            enable(&at, &controllers)?;
            for part in parent.strip_prefix(&self.root).unwrap_or(Path::new("")) {
                at.push(part);
                enable(&at, &controllers)?;
            }
        }
        mkdir(dir)?;
        if controllers.contains(&"pids") {
            write(&dir.join("pids.max"), &limits.pids_limit().pids_max())?;
        }
        if let Some(bytes) = limits.memory {
            write(&dir.join("memory.max"), &bytes.to_string())?;
        }
        if let Some(quota) = limits.cpu_quota_us() {
            write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
        }
        if let Some(weight) = limits.cpu_weight() {
            write(&dir.join("cpu.weight"), &weight.to_string())?;
        }
        Ok(())
    }
}

/// The controllers of `wanted` that the cgroup at `dir` does not give its children yet.
fn missing(dir: &Path, wanted: &[&'static str]) -> Vec<&'static str> {
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
    let on = |c: &str| {
        enabled
            .split_whitespace()
            .any(|e| e.trim_start_matches('+') == c)
    };
    wanted.iter().copied().filter(|c| !on(c)).collect()
}

/// Has the cgroup at `dir` give `wanted` to its children. A cgroup that holds processes
/// refuses (`EBUSY`): that is [`no_internal_processes`]'s error.
fn enable(dir: &Path, wanted: &[&'static str]) -> Result<(), IsolationError> {
    let missing = missing(dir, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let line: Vec<String> = missing.iter().map(|c| format!("+{c}")).collect();
    match write(&dir.join("cgroup.subtree_control"), &line.join(" ")) {
        Err(IsolationError::Io { source, .. }) if source.raw_os_error() == Some(libc::EBUSY) => {
            Err(no_internal_processes(dir, &missing))
        }
        other => other,
    }
}

/// The cgroup at `dir` holds processes, so cgroup v2 lets it give no `controllers` to the
/// pod's cgroup below it.
fn no_internal_processes(dir: &Path, controllers: &[&str]) -> IsolationError {
    IsolationError::Unsupported {
        what: format!(
            "cgroup v2: {} holds processes, and a cgroup with processes gives no controllers \
             ({}) to the cgroups below it, the pod's among them; pass --cgroup-parent=PATH \
             naming a cgroup without processes of its own (under systemd: the cgroup of a \
             unit with Delegate=yes whose processes are in a cgroup below it)",
            dir.display(),
            controllers.join(", ")
        ),
    }
}

impl Manager for V2 {
    /// By default the runner's own cgroup must already give the controllers to its
    /// children, which cgroup v2 allows only at the root: the runner is in it.
    fn place(
        &self,
        parent: Option<&CgroupParent>,
        limits: &Limits,
    ) -> Result<Placement, IsolationError> {
        let controllers = self.controllers(limits)?;
        let own = match parent {
            Some(_) => ProcCgroup::default(),
            None => ProcCgroup::read(&self.proc_cgroup)?,
        };
        let at = parent_in(&self.root, parent, own.unified.as_ref(), "cgroup v2")?;
        if parent.is_none() && at != "/" {
            let dir = below(&self.root, &at);
            let missing = missing(&dir, &controllers);
            if !missing.is_empty() {
                return Err(no_internal_processes(&dir, &missing));
            }
        }
        Ok(Placement {
            parents: BTreeMap::from([(UNIFIED.to_string(), at)]),
            own: parent.is_none(),
        })
    }

    fn create(&self, cgroup: &PodCgroup, limits: &Limits) -> Result<(), IsolationError> {
        let Some(dir) = cgroup.dir(UNIFIED, &self.root) else {
            return Ok(());
        };
        // Another pod's teardown may remove the shared `rkt` parent while this one sets it
        // up (its controllers enabled, then the pod's own directory): start over then.
        let mut tries = 0;
        loop {
            match self.try_create(&dir, limits) {
                Err(IsolationError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && tries < 3 =>
                {
                    tries += 1
                }
                done => return done,
            }
        }
    }

    /// Writes `0`, the calling process, to `cgroup.procs` (v2 moves processes only).
    fn join(&self, cgroup: &PodCgroup) -> Result<(), IsolationError> {
        match cgroup.dir(UNIFIED, &self.root) {
            // An older rkt's pod may have no cgroup here.
            Some(dir) if !cgroup.legacy || dir.is_dir() => write(&dir.join("cgroup.procs"), "0"),
            _ => Ok(()),
        }
    }

    fn join_files(&self, cgroup: &PodCgroup) -> Vec<PathBuf> {
        cgroup
            .dir(UNIFIED, &self.root)
            .map(|dir| dir.join("cgroup.procs"))
            .into_iter()
            .collect()
    }

    fn remove(&self, cgroup: &PodCgroup) -> Result<(), IsolationError> {
        match cgroup.dir(UNIFIED, &self.root) {
            Some(dir) => remove_pod_dir(&dir),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unified hierarchy offering `controllers` under a temporary root, and the runner's
    /// cgroups: `proc_cgroup`'s text.
    fn fake(controllers: &str, proc_cgroup: &str) -> (tempfile::TempDir, V2) {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), controllers).unwrap();
        let proc_file = root.path().join("proc-self-cgroup");
        std::fs::write(&proc_file, proc_cgroup).unwrap();
        let v2 = V2 {
            root: root.path().to_path_buf(),
            proc_cgroup: proc_file,
        };
        (root, v2)
    }

    fn pod(v2: &V2, uuid: &str, limits: &Limits) -> PodCgroup {
        v2.place(None, limits).unwrap().pod(uuid)
    }

    #[test]
    fn limits_go_to_memory_max_and_cpu_max_with_the_controllers_enabled() {
        let (root, v2) = fake("cpuset cpu io memory pids\n", "0::/\n");
        let limits = Limits {
            memory: Some(1 << 30),
            cpu_millis: Some(2000),
            cpu_shares: Some(2048),
            pids: Some(PidsLimit::Tasks(64)),
        };
        let cg = pod(&v2, "u2", &limits);
        assert_eq!(cg.paths[UNIFIED], "/rkt/u2");
        v2.create(&cg, &limits).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("cgroup.subtree_control"), "+memory +cpu +pids");
        assert_eq!(read("rkt/cgroup.subtree_control"), "+memory +cpu +pids");
        assert_eq!(read("rkt/u2/memory.max"), "1073741824");
        assert_eq!(read("rkt/u2/cpu.max"), "200000 100000");
        assert_eq!(read("rkt/u2/pids.max"), "64");
        assert_eq!(read("rkt/u2/cpu.weight"), "79");
        assert_eq!(
            v2.join_files(&cg),
            [root.path().join("rkt/u2/cgroup.procs")]
        );
        v2.join(&cg).unwrap();
        assert_eq!(read("rkt/u2/cgroup.procs"), "0");
    }

    #[test]
    fn every_pod_gets_its_cgroup_with_the_default_pids_limit() {
        let (root, v2) = fake("cpu memory pids\n", "0::/\n");
        let controllers = root.path().join("cgroup.controllers");
        v2.create(&pod(&v2, "u5", &Limits::default()), &Limits::default())
            .unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("cgroup.subtree_control"), "+pids");
        assert_eq!(read("rkt/u5/pids.max"), "2048");
        assert!(!root.path().join("rkt/u5/memory.max").exists());
        // No limit: "max" where the controller is offered, the bare cgroup where it is not.
        let unlimited = Limits {
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        v2.create(&pod(&v2, "u6", &unlimited), &unlimited).unwrap();
        assert_eq!(read("rkt/u6/pids.max"), "max");
        std::fs::write(&controllers, "cpu memory\n").unwrap();
        v2.create(&pod(&v2, "u7", &unlimited), &unlimited).unwrap();
        assert!(root.path().join("rkt/u7").is_dir());
        assert!(!root.path().join("rkt/u7/pids.max").exists());
        let e = v2.place(None, &Limits::default()).unwrap_err().to_string();
        assert!(
            e.contains("--pids-limit=0") && e.contains("no pids controller"),
            "{e}"
        );
    }

    #[test]
    fn a_controller_the_hierarchy_lacks_is_an_error() {
        let (_root, v2) = fake("pids\n", "0::/\n");
        let limits = Limits {
            memory: Some(1 << 30),
            ..Limits::default()
        };
        let e = v2.place(None, &limits).unwrap_err().to_string();
        assert!(
            e.contains("--memory") && e.contains("no memory controller"),
            "{e}"
        );
    }

    #[test]
    fn a_runner_below_the_root_is_refused_before_any_pod_saying_to_pass_a_parent() {
        let (root, v2) = fake("cpu memory pids\n", "0::/user.slice/session-1.scope\n");
        let own = root.path().join("user.slice/session-1.scope");
        std::fs::create_dir_all(&own).unwrap();
        let e = v2.place(None, &Limits::default()).unwrap_err().to_string();
        assert!(
            e.contains("session-1.scope")
                && e.contains("holds processes")
                && e.contains("--cgroup-parent=PATH")
                && e.contains("Delegate=yes"),
            "{e}"
        );
        assert!(!own.join("rkt").exists());
        // A cgroup that gives its children the controllers already (a threaded one, or one
        // whose processes left) takes the pod below it.
        std::fs::write(own.join("cgroup.subtree_control"), "pids\n").unwrap();
        let cg = pod(&v2, "u1", &Limits::default());
        assert_eq!(cg.paths[UNIFIED], "/user.slice/session-1.scope/rkt/u1");
    }

    #[test]
    fn with_a_parent_every_level_down_to_it_gives_the_controllers() {
        let (root, v2) = fake("cpu memory pids\n", "0::/user.slice/session-1.scope\n");
        let parent = CgroupParent::parse("/kubepods/pod1").unwrap();
        let limits = Limits {
            memory: Some(1 << 20),
            ..Limits::default()
        };
        let cg = v2.place(Some(&parent), &limits).unwrap().pod("u1");
        assert_eq!(cg.paths[UNIFIED], "/kubepods/pod1/rkt-u1");
        v2.create(&cg, &limits).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        for level in ["", "kubepods/", "kubepods/pod1/"] {
            assert_eq!(
                read(&format!("{level}cgroup.subtree_control")),
                "+memory +pids"
            );
        }
        assert_eq!(read("kubepods/pod1/rkt-u1/memory.max"), "1048576");
        // Only what is missing is asked for: a level that gives pids already gets memory.
        std::fs::write(root.path().join("kubepods/cgroup.subtree_control"), "pids").unwrap();
        std::fs::remove_file(root.path().join("kubepods/pod1/cgroup.subtree_control")).unwrap();
        v2.create(
            &v2.place(Some(&parent), &limits).unwrap().pod("u2"),
            &limits,
        )
        .unwrap();
        assert_eq!(read("kubepods/cgroup.subtree_control"), "+memory");
        for f in ["memory.max", "pids.max"] {
            std::fs::remove_file(root.path().join("kubepods/pod1/rkt-u1").join(f)).unwrap();
        }
        v2.remove(&cg).unwrap();
        assert!(!root.path().join("kubepods/pod1/rkt-u1").exists());
        assert!(root.path().join("kubepods/pod1").is_dir());
    }

    #[test]
    fn an_older_rkts_pod_is_joined_and_removed_at_rkt_uuid() {
        let (root, v2) = fake("pids\n", "0::/\n");
        let old = PodCgroup::legacy("u9");
        v2.join(&old).unwrap();
        assert!(!root.path().join("rkt").exists());
        std::fs::create_dir_all(root.path().join("rkt/u9")).unwrap();
        v2.join(&old).unwrap();
        std::fs::remove_file(root.path().join("rkt/u9/cgroup.procs")).unwrap();
        v2.remove(&old).unwrap();
        assert!(!root.path().join("rkt").exists());
    }
}
