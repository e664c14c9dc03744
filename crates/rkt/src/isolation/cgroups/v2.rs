//! cgroup v2: the unified hierarchy at `root`; the pod's cgroup `rkt/<uuid>`, with the
//! controllers its limits need (`pids` for every pod, `memory` and `cpu` with `--memory` and
//! `--cpu`) enabled in `rkt`'s and the root's `cgroup.subtree_control`.

use std::path::{Path, PathBuf};

use super::{
    mkdir, pod_dir, remove_parent_if_empty, rmdir, write, Limits, Manager, PidsLimit, CPU_PERIOD_US,
};
use crate::isolation::IsolationError;

/// The unified hierarchy mounted at `root` (normally `/sys/fs/cgroup`).
pub struct V2 {
    root: PathBuf,
}

impl V2 {
    pub fn new(root: &Path) -> V2 {
        V2 {
            root: root.to_path_buf(),
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
            wanted.push(name);
        }
        Ok(wanted)
    }
}

impl V2 {
    /// One attempt of [`Manager::create`].
    fn try_create(&self, uuid: &str, limits: &Limits) -> Result<(), IsolationError> {
        let controllers = self.controllers(limits)?;
        let rkt = self.root.join("rkt");
        mkdir(&rkt)?;
        let enable: Vec<String> = controllers.iter().map(|c| format!("+{c}")).collect();
        if !enable.is_empty() {
            for dir in [&self.root, &rkt] {
                write(&dir.join("cgroup.subtree_control"), &enable.join(" "))?;
            }
        }
        let dir = pod_dir(&self.root, uuid);
        mkdir(&dir)?;
        if controllers.contains(&"pids") {
            write(&dir.join("pids.max"), &limits.pids_limit().pids_max())?;
        }
        if let Some(bytes) = limits.memory {
            write(&dir.join("memory.max"), &bytes.to_string())?;
        }
        if let Some(quota) = limits.cpu_quota_us() {
            write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
        }
        Ok(())
    }
}

impl Manager for V2 {
    fn create(&self, uuid: &str, limits: &Limits) -> Result<(), IsolationError> {
        // Another pod's teardown may remove the shared `rkt` parent while this one sets it
        // up (its controllers enabled, then the pod's own directory): start over then.
        let mut tries = 0;
        loop {
            match self.try_create(uuid, limits) {
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
    fn join(&self, uuid: &str, _limits: &Limits) -> Result<(), IsolationError> {
        write(&pod_dir(&self.root, uuid).join("cgroup.procs"), "0")
    }

    fn remove(&self, uuid: &str) -> Result<(), IsolationError> {
        rmdir(&pod_dir(&self.root, uuid))?;
        remove_parent_if_empty(&self.root);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_go_to_memory_max_and_cpu_max_with_the_controllers_enabled() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let v2 = V2::new(root.path());
        let limits = Limits {
            memory: Some(1 << 30),
            cpu_millis: Some(2000),
            pids: Some(PidsLimit::Tasks(64)),
        };
        v2.create("u2", &limits).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("cgroup.subtree_control"), "+memory +cpu +pids");
        assert_eq!(read("rkt/cgroup.subtree_control"), "+memory +cpu +pids");
        assert_eq!(read("rkt/u2/memory.max"), "1073741824");
        assert_eq!(read("rkt/u2/cpu.max"), "200000 100000");
        assert_eq!(read("rkt/u2/pids.max"), "64");
        v2.join("u2", &limits).unwrap();
        assert_eq!(read("rkt/u2/cgroup.procs"), "0");
    }

    #[test]
    fn every_pod_gets_its_cgroup_with_the_default_pids_limit() {
        let root = tempfile::tempdir().unwrap();
        let controllers = root.path().join("cgroup.controllers");
        std::fs::write(&controllers, "cpu memory pids\n").unwrap();
        let v2 = V2::new(root.path());
        v2.create("u5", &Limits::default()).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("cgroup.subtree_control"), "+pids");
        assert_eq!(read("rkt/u5/pids.max"), "2048");
        assert!(!root.path().join("rkt/u5/memory.max").exists());
        // No limit: "max" where the controller is offered, the bare cgroup where it is not.
        let unlimited = Limits {
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        v2.create("u6", &unlimited).unwrap();
        assert_eq!(read("rkt/u6/pids.max"), "max");
        std::fs::write(&controllers, "cpu memory\n").unwrap();
        v2.create("u7", &unlimited).unwrap();
        assert!(root.path().join("rkt/u7").is_dir());
        assert!(!root.path().join("rkt/u7/pids.max").exists());
        let e = v2.create("u8", &Limits::default()).unwrap_err().to_string();
        assert!(
            e.contains("--pids-limit=0") && e.contains("no pids controller"),
            "{e}"
        );
    }

    #[test]
    fn a_controller_the_hierarchy_lacks_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "pids\n").unwrap();
        let limits = Limits {
            memory: Some(1 << 30),
            ..Limits::default()
        };
        let e = V2::new(root.path())
            .create("u2", &limits)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--memory") && e.contains("no memory controller"),
            "{e}"
        );
    }
}
