//! cgroup v1: one hierarchy per controller (`<root>/memory`, `<root>/cpu`, `<root>/pids`),
//! the pod's cgroup `rkt/<uuid>` in each hierarchy a limit needs: `pids` for every pod (its
//! pids limit), `memory` and `cpu` with `--memory` and `--cpu`.

use std::path::{Path, PathBuf};

use super::{
    mkdir, pod_dir, remove_parent_if_empty, rmdir, write, Limits, Manager, PidsLimit, CPU_PERIOD_US,
};
use crate::isolation::IsolationError;

/// The v1 hierarchies mounted under `root` (normally `/sys/fs/cgroup`).
pub struct V1 {
    root: PathBuf,
}

/// The controllers rkt's isolators use, and a file of the hierarchy's root that shows one
/// is mounted (the root of the pids hierarchy has no `pids.*` file: the pod's `pids.max`,
/// written next, is the proof there).
const CONTROLLERS: [(&str, &str); 3] = [
    ("memory", "memory.limit_in_bytes"),
    ("cpu", "cpu.cfs_quota_us"),
    ("pids", "cgroup.procs"),
];

/// Whether `limits` needs a controller, and what names it in an error.
enum Need {
    No,
    /// When the host has it (no pids limit: the pod's cgroup still counts its tasks).
    IfMounted,
    Yes(&'static str),
}

impl V1 {
    pub fn new(root: &Path) -> V1 {
        V1 {
            root: root.to_path_buf(),
        }
    }

    /// The hierarchies `limits` needs, each checked to be mounted.
    fn hierarchies(&self, limits: &Limits) -> Result<Vec<(&'static str, PathBuf)>, IsolationError> {
        let mut wanted = Vec::new();
        for (name, probe) in CONTROLLERS {
            let need = match name {
                "memory" if limits.memory.is_some() => Need::Yes("--memory"),
                "cpu" if limits.cpu_millis.is_some() => Need::Yes("--cpu"),
                "pids" => match limits.pids_limit() {
                    PidsLimit::Tasks(_) => Need::Yes(limits.pids_origin()),
                    PidsLimit::Unlimited => Need::IfMounted,
                },
                _ => Need::No,
            };
            let dir = self.root.join(name);
            let mounted = dir.join(probe).exists();
            match need {
                Need::No => continue,
                Need::IfMounted if !mounted => continue,
                Need::Yes(flag) if !mounted => {
                    return Err(IsolationError::Unsupported {
                        what: format!(
                            "{flag}: this host has no cgroup v1 {name} controller at {} to \
                             enforce it",
                            dir.display()
                        ),
                    });
                }
                _ => wanted.push((name, dir)),
            }
        }
        Ok(wanted)
    }
}

impl Manager for V1 {
    fn create(&self, uuid: &str, limits: &Limits) -> Result<(), IsolationError> {
        for (name, hierarchy) in self.hierarchies(limits)? {
            let dir = pod_dir(&hierarchy, uuid);
            mkdir(&dir)?;
            match name {
                "memory" => {
                    if let Some(bytes) = limits.memory {
                        write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                    }
                }
                "pids" => write(&dir.join("pids.max"), &limits.pids_limit().pids_max())?,
                _ => {
                    if let Some(quota) = limits.cpu_quota_us() {
                        write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                        write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes `0`, the calling thread, to `tasks`: the kernel moves a thread that moves
    /// itself without the lock that moving a process (`cgroup.procs`) takes, whose writer
    /// waits for an RCU grace period (several milliseconds, on every pod's start). The
    /// caller is single-threaded, so its thread is the process.
    fn join(&self, uuid: &str, limits: &Limits) -> Result<(), IsolationError> {
        for (_, hierarchy) in self.hierarchies(limits)? {
            write(&pod_dir(&hierarchy, uuid).join("tasks"), "0")?;
        }
        Ok(())
    }

    fn remove(&self, uuid: &str) -> Result<(), IsolationError> {
        let mut first_err = None;
        for (name, _) in CONTROLLERS {
            let hierarchy = self.root.join(name);
            match rmdir(&pod_dir(&hierarchy, uuid)) {
                Ok(()) => remove_parent_if_empty(&hierarchy),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (name, probe) in CONTROLLERS {
            std::fs::create_dir_all(root.path().join(name)).unwrap();
            std::fs::write(root.path().join(name).join(probe), "").unwrap();
        }
        root
    }

    #[test]
    fn limits_are_written_in_the_pods_cgroup_of_each_hierarchy() {
        let root = fake_root();
        let v1 = V1::new(root.path());
        let limits = Limits {
            memory: Some(64 << 20),
            cpu_millis: Some(500),
            pids: Some(PidsLimit::Tasks(100)),
        };
        v1.create("u1", &limits).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("memory/rkt/u1/memory.limit_in_bytes"), "67108864");
        assert_eq!(read("cpu/rkt/u1/cpu.cfs_quota_us"), "50000");
        assert_eq!(read("cpu/rkt/u1/cpu.cfs_period_us"), "100000");
        assert_eq!(read("pids/rkt/u1/pids.max"), "100");
        v1.join("u1", &limits).unwrap();
        assert_eq!(read("memory/rkt/u1/tasks"), "0");
        assert_eq!(read("pids/rkt/u1/tasks"), "0");
        // The fake's files keep the directories from being removed, as processes would.
        assert!(v1.remove("u1").is_err());
        for f in ["memory/rkt/u1", "cpu/rkt/u1", "pids/rkt/u1"] {
            for e in std::fs::read_dir(root.path().join(f)).unwrap() {
                std::fs::remove_file(e.unwrap().path()).unwrap();
            }
        }
        std::fs::create_dir_all(root.path().join("cpu/rkt/other-pod")).unwrap();
        v1.remove("u1").unwrap();
        assert!(!root.path().join("memory/rkt/u1").exists());
        // The last pod's cgroup takes the shared parent with it; another pod's keeps it.
        assert!(!root.path().join("memory/rkt").exists());
        assert!(root.path().join("cpu/rkt/other-pod").exists());
        v1.remove("u1").unwrap();
    }

    #[test]
    fn every_pod_gets_a_pids_cgroup_with_the_default_limit() {
        let root = fake_root();
        let v1 = V1::new(root.path());
        v1.create("u3", &Limits::default()).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("pids/rkt/u3/pids.max"), "2048");
        assert!(!root.path().join("memory/rkt/u3").exists());
        assert!(!root.path().join("cpu/rkt/u3").exists());
        v1.join("u3", &Limits::default()).unwrap();
        assert_eq!(read("pids/rkt/u3/tasks"), "0");
        let unlimited = Limits {
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        v1.create("u4", &unlimited).unwrap();
        assert_eq!(read("pids/rkt/u4/pids.max"), "max");
    }

    #[test]
    fn a_missing_controller_is_an_error_naming_flag_and_place() {
        let root = tempfile::tempdir().unwrap();
        let v1 = V1::new(root.path());
        let limits = Limits {
            cpu_millis: Some(500),
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        let e = v1.create("u1", &limits).unwrap_err().to_string();
        assert!(e.contains("--cpu") && e.contains("cpu controller"), "{e}");
        assert!(!root.path().join("cpu/rkt").exists());
        // The default limit names the flag that turns it off; no limit needs no controller.
        let e = v1.create("u1", &Limits::default()).unwrap_err().to_string();
        assert!(
            e.contains("--pids-limit=0") && e.contains("pids controller"),
            "{e}"
        );
        let unlimited = Limits {
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        v1.create("u1", &unlimited).unwrap();
        assert!(!root.path().join("pids/rkt").exists());
    }
}
