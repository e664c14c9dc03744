//! cgroup v1: one hierarchy per controller (`<root>/memory`, `<root>/cpu`, `<root>/pids`),
//! the pod's cgroup in each hierarchy a limit needs: `pids` for every pod (its pids limit),
//! `memory` and `cpu` with `--memory` and `--cpu`. Its place may differ from one hierarchy
//! to the next: by default each is below the runner's cgroup of that hierarchy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    mkdir, parent_in, remove_pod_dir, write, CgroupParent, Limits, Manager, PidsLimit, Placement,
    PodCgroup, ProcCgroup, CPU_PERIOD_US, PROC_SELF_CGROUP,
};
use crate::isolation::IsolationError;

/// The v1 hierarchies mounted under `root` (normally `/sys/fs/cgroup`).
pub struct V1 {
    root: PathBuf,
    /// The runner's cgroups (normally `/proc/self/cgroup`).
    proc_cgroup: PathBuf,
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
            proc_cgroup: PathBuf::from(PROC_SELF_CGROUP),
        }
    }

    /// The pod's cgroup of each hierarchy `cgroup` records, with its controller's name.
    fn dirs<'a>(
        &'a self,
        cgroup: &'a PodCgroup,
    ) -> impl Iterator<Item = (&'static str, PathBuf)> + 'a {
        CONTROLLERS
            .iter()
            .filter_map(|(name, _)| cgroup.dir(name, &self.root.join(name)).map(|d| (*name, d)))
    }

    /// The hierarchies `limits` needs, each checked to be mounted.
    fn hierarchies(&self, limits: &Limits) -> Result<Vec<(&'static str, PathBuf)>, IsolationError> {
        let mut wanted = Vec::new();
        for (name, probe) in CONTROLLERS {
            let need = match name {
                "memory" if limits.memory.is_some() => Need::Yes("--memory"),
                "cpu" if limits.cpu_millis.is_some() => Need::Yes("--cpu"),
                "cpu" if limits.cpu_shares.is_some() => Need::Yes("--cpu-shares"),
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
    fn place(
        &self,
        parent: Option<&CgroupParent>,
        limits: &Limits,
    ) -> Result<Placement, IsolationError> {
        let own = match parent {
            Some(_) => ProcCgroup::default(),
            None => ProcCgroup::read(&self.proc_cgroup)?,
        };
        let mut parents = BTreeMap::new();
        for (name, hierarchy) in self.hierarchies(limits)? {
            let what = format!("cgroup v1 {name}");
            let at = parent_in(&hierarchy, parent, own.v1.get(name), &what)?;
            parents.insert(name.to_string(), at);
        }
        Ok(Placement {
            parents,
            own: parent.is_none(),
        })
    }

    fn create(&self, cgroup: &PodCgroup, limits: &Limits) -> Result<(), IsolationError> {
        for (name, dir) in self.dirs(cgroup) {
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
                    if let Some(shares) = limits.cpu_shares {
                        write(&dir.join("cpu.shares"), &shares.to_string())?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes `0`, the calling thread, to `tasks`: the kernel moves a thread that moves
    /// itself without the lock that moving a process (`cgroup.procs`) takes, whose writer
    /// waits for an RCU grace period (several milliseconds, on every pod's start). The
    /// caller is single-threaded, so its thread is the process. An older rkt's pod has its
    /// cgroup only in the hierarchies its limits needed: those are joined.
    fn join(&self, cgroup: &PodCgroup) -> Result<(), IsolationError> {
        for (_, dir) in self.dirs(cgroup) {
            if cgroup.legacy && !dir.is_dir() {
                continue;
            }
            write(&dir.join("tasks"), "0")?;
        }
        Ok(())
    }

    fn join_files(&self, cgroup: &PodCgroup) -> Vec<PathBuf> {
        self.dirs(cgroup)
            .map(|(_, dir)| dir.join("tasks"))
            .collect()
    }

    fn remove(&self, cgroup: &PodCgroup) -> Result<(), IsolationError> {
        let mut first_err = None;
        for (_, dir) in self.dirs(cgroup) {
            if let Err(e) = remove_pod_dir(&dir) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hierarchies under a temporary root, and the runner's cgroups: `proc_cgroup`'s text.
    fn fake(proc_cgroup: &str) -> (tempfile::TempDir, V1) {
        let root = tempfile::tempdir().unwrap();
        for (name, probe) in CONTROLLERS {
            std::fs::create_dir_all(root.path().join(name)).unwrap();
            std::fs::write(root.path().join(name).join(probe), "").unwrap();
        }
        let proc_file = root.path().join("proc-self-cgroup");
        std::fs::write(&proc_file, proc_cgroup).unwrap();
        let v1 = V1 {
            root: root.path().to_path_buf(),
            proc_cgroup: proc_file,
        };
        (root, v1)
    }

    /// A runner in every hierarchy's root cgroup.
    const AT_ROOT: &str = "12:pids:/\n4:cpu,cpuacct:/\n3:memory:/\n1:name=systemd:/\n0::/\n";

    fn pod(v1: &V1, uuid: &str, limits: &Limits) -> PodCgroup {
        v1.place(None, limits).unwrap().pod(uuid)
    }

    /// Empties the fake's cgroup directories of their files, which keep them from being
    /// removed as processes would.
    fn empty(root: &Path, dirs: &[&str]) {
        for d in dirs {
            for e in std::fs::read_dir(root.join(d)).unwrap() {
                std::fs::remove_file(e.unwrap().path()).unwrap();
            }
        }
    }

    #[test]
    fn limits_are_written_in_the_pods_cgroup_of_each_hierarchy() {
        let (root, v1) = fake(AT_ROOT);
        let limits = Limits {
            memory: Some(64 << 20),
            cpu_millis: Some(500),
            cpu_shares: Some(512),
            pids: Some(PidsLimit::Tasks(100)),
        };
        let cg = pod(&v1, "u1", &limits);
        v1.create(&cg, &limits).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("memory/rkt/u1/memory.limit_in_bytes"), "67108864");
        assert_eq!(read("cpu/rkt/u1/cpu.cfs_quota_us"), "50000");
        assert_eq!(read("cpu/rkt/u1/cpu.shares"), "512");
        // What an app's process opens to join its own cgroup: each hierarchy's `tasks`.
        let files = v1.join_files(&cg.child("app-a"));
        let names: Vec<String> = files
            .iter()
            .map(|f| f.strip_prefix(root.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "memory/rkt/u1/app-a/tasks",
                "cpu/rkt/u1/app-a/tasks",
                "pids/rkt/u1/app-a/tasks"
            ]
        );
        assert_eq!(read("cpu/rkt/u1/cpu.cfs_period_us"), "100000");
        assert_eq!(read("pids/rkt/u1/pids.max"), "100");
        v1.join(&cg).unwrap();
        assert_eq!(read("memory/rkt/u1/tasks"), "0");
        assert_eq!(read("pids/rkt/u1/tasks"), "0");
        assert!(v1.remove(&cg).is_err());
        empty(root.path(), &["memory/rkt/u1", "cpu/rkt/u1", "pids/rkt/u1"]);
        std::fs::create_dir_all(root.path().join("cpu/rkt/other-pod")).unwrap();
        v1.remove(&cg).unwrap();
        assert!(!root.path().join("memory/rkt/u1").exists());
        // The last pod's cgroup takes the shared parent with it; another pod's keeps it.
        assert!(!root.path().join("memory/rkt").exists());
        assert!(root.path().join("cpu/rkt/other-pod").exists());
        v1.remove(&cg).unwrap();
    }

    #[test]
    fn every_pod_gets_a_pids_cgroup_with_the_default_limit() {
        let (root, v1) = fake(AT_ROOT);
        let cg = pod(&v1, "u3", &Limits::default());
        assert_eq!(cg.paths.keys().collect::<Vec<_>>(), ["pids"]);
        v1.create(&cg, &Limits::default()).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("pids/rkt/u3/pids.max"), "2048");
        assert!(!root.path().join("memory/rkt/u3").exists());
        assert!(!root.path().join("cpu/rkt/u3").exists());
        v1.join(&cg).unwrap();
        assert_eq!(read("pids/rkt/u3/tasks"), "0");
        let unlimited = Limits {
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        v1.create(&pod(&v1, "u4", &unlimited), &unlimited).unwrap();
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
        let e = v1.place(None, &limits).unwrap_err().to_string();
        assert!(e.contains("--cpu") && e.contains("cpu controller"), "{e}");
        // The default limit names the flag that turns it off; no limit needs no controller.
        let e = v1.place(None, &Limits::default()).unwrap_err().to_string();
        assert!(
            e.contains("--pids-limit=0") && e.contains("pids controller"),
            "{e}"
        );
        let unlimited = Limits {
            pids: Some(PidsLimit::Unlimited),
            ..Limits::default()
        };
        let cg = v1.place(None, &unlimited).unwrap().pod("u1");
        assert!(cg.paths.is_empty());
        v1.create(&cg, &unlimited).unwrap();
        assert!(!root.path().join("pids/rkt").exists());
    }

    #[test]
    fn by_default_the_pod_goes_below_the_runners_cgroup_of_each_hierarchy() {
        let (root, v1) = fake(
            "12:pids:/system.slice/web.service\n4:cpu,cpuacct:/system.slice\n\
             3:memory:/system.slice/web.service\n1:name=systemd:/system.slice/web.service\n0::/\n",
        );
        for d in [
            "pids/system.slice/web.service",
            "memory/system.slice/web.service",
        ] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        std::fs::create_dir_all(root.path().join("cpu/system.slice")).unwrap();
        let limits = Limits {
            memory: Some(1 << 20),
            cpu_millis: Some(100),
            cpu_shares: None,
            pids: None,
        };
        let cg = pod(&v1, "u1", &limits);
        assert_eq!(cg.paths["pids"], "/system.slice/web.service/rkt/u1");
        assert_eq!(cg.paths["memory"], "/system.slice/web.service/rkt/u1");
        assert_eq!(cg.paths["cpu"], "/system.slice/rkt/u1");
        v1.create(&cg, &limits).unwrap();
        let unit = root.path().join("pids/system.slice/web.service");
        assert!(unit.join("rkt/u1/pids.max").is_file());
        assert!(root.path().join("cpu/system.slice/rkt/u1").is_dir());
        empty(
            root.path(),
            &[
                "pids/system.slice/web.service/rkt/u1",
                "memory/system.slice/web.service/rkt/u1",
                "cpu/system.slice/rkt/u1",
            ],
        );
        v1.remove(&cg).unwrap();
        // The shared `rkt` goes with the last pod; the runner's own cgroup stays.
        assert!(!unit.join("rkt").exists());
        assert!(unit.is_dir());
    }

    #[test]
    fn a_runners_cgroup_the_mount_does_not_hold_is_refused_naming_the_flag() {
        // A container's view: /proc/self/cgroup names the host's path, the mount is its own.
        let (root, v1) = fake("12:pids:/docker/abc\n0::/\n");
        let e = v1.place(None, &Limits::default()).unwrap_err().to_string();
        assert!(
            e.contains("/docker/abc") && e.contains("--cgroup-parent"),
            "{e}"
        );
        // Nor one it lists no cgroup for.
        std::fs::write(&v1.proc_cgroup, "0::/\n").unwrap();
        let e = v1.place(None, &Limits::default()).unwrap_err().to_string();
        assert!(e.contains("pids") && e.contains("--cgroup-parent"), "{e}");
        // --cgroup-parent does not look at the runner's cgroups.
        let parent = CgroupParent::parse("/kube/pod1").unwrap();
        assert!(v1.place(Some(&parent), &Limits::default()).is_ok());
        assert!(!root.path().join("pids/docker").exists());
    }

    #[test]
    fn with_a_parent_the_pod_is_rkt_uuid_below_it_and_the_parent_stays() {
        let (root, v1) = fake(AT_ROOT);
        let parent = CgroupParent::parse("/kube/pod1").unwrap();
        let limits = Limits {
            memory: Some(1 << 20),
            ..Limits::default()
        };
        let cg = v1.place(Some(&parent), &limits).unwrap().pod("u1");
        assert_eq!(cg.paths["pids"], "/kube/pod1/rkt-u1");
        assert_eq!(cg.paths["memory"], "/kube/pod1/rkt-u1");
        v1.create(&cg, &limits).unwrap();
        assert!(root.path().join("memory/kube/pod1/rkt-u1").is_dir());
        v1.join(&cg).unwrap();
        empty(
            root.path(),
            &["pids/kube/pod1/rkt-u1", "memory/kube/pod1/rkt-u1"],
        );
        v1.remove(&cg).unwrap();
        assert!(!root.path().join("pids/kube/pod1/rkt-u1").exists());
        assert!(root.path().join("pids/kube/pod1").is_dir());
    }

    #[test]
    fn an_older_rkts_pod_is_at_rkt_uuid_below_the_roots() {
        let (root, v1) = fake(AT_ROOT);
        let old = PodCgroup::legacy("u9");
        // It made only the pids cgroup (no --memory, no --cpu): that one is joined.
        std::fs::create_dir_all(root.path().join("pids/rkt/u9")).unwrap();
        v1.join(&old).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.path().join("pids/rkt/u9/tasks")).unwrap(),
            "0"
        );
        assert!(!root.path().join("memory/rkt/u9").exists());
        empty(root.path(), &["pids/rkt/u9"]);
        v1.remove(&old).unwrap();
        assert!(!root.path().join("pids/rkt").exists());
        // A recorded place whose cgroup is gone is an error to join.
        let gone = pod(&v1, "u8", &Limits::default());
        assert!(v1.join(&gone).is_err());
    }
}
