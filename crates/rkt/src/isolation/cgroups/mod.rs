//! rkt's resource isolators, `--memory=SIZE`, `--cpu=MILLICORES` and `--pids-limit=N`,
//! applied in a cgroup of the pod's own: `rkt/<uuid>` below the root of each hierarchy,
//! created by the runner for every pod before the stage starts, joined by the stage before
//! it forks the pod's init (so every process of the pod is inside), removed with the pod's
//! other resources ([`crate::pod::cleanup`]) when it is torn down or garbage-collected.
//!
//! Every pod has a pids limit, [`DEFAULT_PIDS_LIMIT`] unless `--pids-limit` says otherwise,
//! so that a pod cannot fork until the host's `pid_max` is reached.
//!
//! One [`Manager`] trait, two implementations: [`v1::V1`] (a hierarchy per controller,
//! `memory.limit_in_bytes`, `cpu.cfs_quota_us`, `pids.max`) and [`v2::V2`] (the unified
//! hierarchy, `memory.max`, `cpu.max`, `pids.max`), chosen by [`detect`]. Both work on a root
//! directory given to them, so their file writes are unit-tested on a temporary directory. A
//! limit the host cannot enforce (no such controller) is an error, not a silent no-op.

pub mod v1;
pub mod v2;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::IsolationError;

/// The period of the CPU quota, in microseconds (the kernel's default).
pub const CPU_PERIOD_US: u64 = 100_000;

/// The pids limit of a pod without `--pids-limit`: podman's default.
pub const DEFAULT_PIDS_LIMIT: u64 = 2048;

/// The largest `pids.max` the kernel takes (`PID_MAX_LIMIT` on 64-bit machines).
pub const MAX_PIDS_LIMIT: u64 = 4 << 20;

/// `--pids-limit`: how many tasks (processes and threads) the pod may hold at once. In the
/// records and `rkt status` a number, or `"max"` (the kernel's word) for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PidsValue", into = "PidsValue")]
pub enum PidsLimit {
    /// At most this many.
    Tasks(u64),
    /// No limit (`--pids-limit=0` or `-1`, as podman and Docker take them).
    Unlimited,
}

/// How a [`PidsLimit`] is written in JSON.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum PidsValue {
    Tasks(u64),
    Word(String),
}

impl TryFrom<PidsValue> for PidsLimit {
    type Error = String;
    fn try_from(v: PidsValue) -> Result<PidsLimit, String> {
        match v {
            PidsValue::Tasks(n) => Ok(PidsLimit::Tasks(n)),
            PidsValue::Word(w) if w == "max" => Ok(PidsLimit::Unlimited),
            PidsValue::Word(w) => Err(format!("pids limit {w:?}: expected a number or \"max\"")),
        }
    }
}

impl From<PidsLimit> for PidsValue {
    fn from(l: PidsLimit) -> PidsValue {
        match l {
            PidsLimit::Tasks(n) => PidsValue::Tasks(n),
            PidsLimit::Unlimited => PidsValue::Word("max".into()),
        }
    }
}

impl PidsLimit {
    /// The value of `pids.max`.
    pub fn pids_max(&self) -> String {
        match self {
            PidsLimit::Tasks(n) => n.to_string(),
            PidsLimit::Unlimited => "max".into(),
        }
    }

    /// The flag that set it, for errors: the default's is the one that changes it.
    fn origin(explicit: bool) -> &'static str {
        if explicit {
            "--pids-limit"
        } else {
            "the default pids limit (--pids-limit=0 runs without one)"
        }
    }
}

/// The pod's limits, as flags gave them (`None`: not given). Every pod gets a cgroup, with
/// at least the pids limit ([`Limits::pids_limit`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// `--memory`, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// `--cpu`, in thousandths of a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u64>,
    /// `--pids-limit`; `None`: [`DEFAULT_PIDS_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<PidsLimit>,
}

impl Limits {
    /// No flag given.
    pub fn is_none(&self) -> bool {
        self.memory.is_none() && self.cpu_millis.is_none() && self.pids.is_none()
    }

    /// The pids limit in effect: `--pids-limit`, or the default.
    pub fn pids_limit(&self) -> PidsLimit {
        self.pids.unwrap_or(PidsLimit::Tasks(DEFAULT_PIDS_LIMIT))
    }

    /// These limits with the pids limit in effect written out (what a pod runs with).
    pub fn settled(&self) -> Limits {
        Limits {
            pids: Some(self.pids_limit()),
            ..*self
        }
    }

    /// What names the pids limit in an error: the flag, or the default.
    pub fn pids_origin(&self) -> &'static str {
        PidsLimit::origin(self.pids.is_some())
    }

    /// The CPU quota per [`CPU_PERIOD_US`].
    pub fn cpu_quota_us(&self) -> Option<u64> {
        self.cpu_millis.map(|m| m * CPU_PERIOD_US / 1000)
    }
}

/// Creates, joins and removes the pods' cgroups in one cgroup layout.
pub trait Manager {
    /// Creates the pod's cgroup with `limits`; fails naming the controller the host lacks.
    fn create(&self, uuid: &str, limits: &Limits) -> Result<(), IsolationError>;
    /// Moves the calling process, single-threaded, into the pod's cgroup; what it forks
    /// afterwards starts inside.
    fn join(&self, uuid: &str, limits: &Limits) -> Result<(), IsolationError>;
    /// Removes the pod's cgroup (nothing when there is none); its processes must be gone.
    fn remove(&self, uuid: &str) -> Result<(), IsolationError>;
}

/// The manager for this host: the unified hierarchy when `/sys/fs/cgroup` is cgroup v2,
/// otherwise the v1 hierarchies under it.
pub fn detect() -> Box<dyn Manager> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        Box::new(v2::V2::new(root))
    } else {
        Box::new(v1::V1::new(root))
    }
}

/// The directory of pod `uuid` below a hierarchy's `root`.
pub fn pod_dir(root: &Path, uuid: &str) -> PathBuf {
    root.join("rkt").join(uuid)
}

fn write(path: &Path, value: &str) -> Result<(), IsolationError> {
    std::fs::write(path, value).map_err(|source| IsolationError::Io {
        what: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// Creates a cgroup directory and its parents. Another pod's teardown may remove the shared
/// `rkt` parent between the two steps ([`remove_parent_if_empty`]): that is retried.
fn mkdir(path: &Path) -> Result<(), IsolationError> {
    let mut tries = 0;
    loop {
        match std::fs::create_dir_all(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => tries += 1,
            Err(source) => {
                return Err(IsolationError::Io {
                    what: "create the cgroup",
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// Removes the `rkt` cgroup below a hierarchy's `root` once no pod's cgroup is left in it,
/// so that rkt leaves nothing on the host; while another pod has one, the kernel refuses
/// (not empty, or busy) and it stays.
fn remove_parent_if_empty(root: &Path) {
    let _ = std::fs::remove_dir(root.join("rkt"));
}

/// Removes a cgroup directory; gone already is fine.
///
/// The pod's processes are gone when it is released, but a process that joined its cgroup
/// from outside its PID namespace may still be there a moment longer: `rkt enter`'s helper,
/// whose command died with the pod. What is left in the cgroup (`EBUSY`) is killed, and
/// the removal retried for up to a second while it exits.
fn rmdir(path: &Path) -> Result<(), IsolationError> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 100 => {
                if tries == 0 {
                    kill_members(path);
                }
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(source) => {
                return Err(IsolationError::Io {
                    what: "remove the cgroup",
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// SIGKILL to every process still in the cgroup at `path`.
fn kill_members(path: &Path) {
    let procs = std::fs::read_to_string(path.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// `--memory=SIZE`: bytes, or a number with `K`, `M`, `G` or `T` (powers of 1024, `i`
/// and `B` optional: `64M`, `1Gi`, `512KB`).
pub fn parse_memory(text: &str) -> Result<u64, IsolationError> {
    let bad = |why: &str| IsolationError::BadValue {
        flag: "--memory",
        value: text.to_string(),
        why: why.to_string(),
    };
    let t = text.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| bad("expected a size such as 64M or 1G"))?;
    let bytes = n.checked_mul(1 << shift).ok_or_else(|| bad("too large"))?;
    if bytes < 4096 {
        return Err(bad("below one page (4K): the pod could not start"));
    }
    Ok(bytes)
}

/// `--pids-limit=N`: at most N tasks; `0` or `-1` (podman's and Docker's words for it) or
/// `max`: no limit.
pub fn parse_pids(text: &str) -> Result<PidsLimit, IsolationError> {
    let bad = |why: &str| IsolationError::BadValue {
        flag: "--pids-limit",
        value: text.to_string(),
        why: why.to_string(),
    };
    match text.trim() {
        "0" | "-1" | "max" => return Ok(PidsLimit::Unlimited),
        _ => {}
    }
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| bad("expected a number of tasks such as 512, or 0 or -1 for no limit"))?;
    if n > MAX_PIDS_LIMIT {
        return Err(bad(&format!(
            "above {MAX_PIDS_LIMIT}, the most the kernel takes (0 or -1: no limit)"
        )));
    }
    Ok(PidsLimit::Tasks(n))
}

/// `--cpu=MILLICORES`: `500m` (thousandths of a CPU) or a number of CPUs (`2`, `0.5`).
pub fn parse_cpu(text: &str) -> Result<u64, IsolationError> {
    let bad = |why: &str| IsolationError::BadValue {
        flag: "--cpu",
        value: text.to_string(),
        why: why.to_string(),
    };
    let t = text.trim();
    let millis = if let Some(m) = t.strip_suffix('m') {
        m.parse::<u64>()
            .map_err(|_| bad("expected millicores such as 500m, or CPUs such as 2"))?
    } else {
        let cpus: f64 = t
            .parse()
            .map_err(|_| bad("expected millicores such as 500m, or CPUs such as 2"))?;
        if !cpus.is_finite() || cpus < 0.0 {
            return Err(bad("expected a positive amount"));
        }
        (cpus * 1000.0).round() as u64
    };
    // The kernel's smallest quota is 1 ms per 100 ms period.
    if millis < 10 {
        return Err(bad("below 10m, the smallest quota the kernel takes"));
    }
    Ok(millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_cpus_parse_as_rkt_wrote_them() {
        assert_eq!(parse_memory("64M").unwrap(), 64 << 20);
        assert_eq!(parse_memory("1Gi").unwrap(), 1 << 30);
        assert_eq!(parse_memory("512KB").unwrap(), 512 << 10);
        assert_eq!(parse_memory("1048576").unwrap(), 1 << 20);
        for bad in ["lots", "12Q", "", "1K2", "100"] {
            let e = parse_memory(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--memory={bad}")), "{e}");
        }
        assert_eq!(parse_cpu("500m").unwrap(), 500);
        assert_eq!(parse_cpu("2").unwrap(), 2000);
        assert_eq!(parse_cpu("0.25").unwrap(), 250);
        for bad in ["fast", "0", "5m", "-1"] {
            let e = parse_cpu(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--cpu={bad}")), "{e}");
        }
        let l = Limits {
            cpu_millis: Some(500),
            ..Limits::default()
        };
        assert_eq!(l.cpu_quota_us(), Some(50_000));
    }

    #[test]
    fn pids_limits_parse_and_default_to_podmans() {
        assert_eq!(parse_pids("64").unwrap(), PidsLimit::Tasks(64));
        for unlimited in ["0", "-1", "max"] {
            assert_eq!(parse_pids(unlimited).unwrap(), PidsLimit::Unlimited);
        }
        for bad in ["many", "-2", "1.5", "", "4194305"] {
            let e = parse_pids(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("--pids-limit={bad}")), "{e}");
        }
        let none = Limits::default();
        assert_eq!(none.pids_limit(), PidsLimit::Tasks(DEFAULT_PIDS_LIMIT));
        assert_eq!(none.settled().pids, Some(PidsLimit::Tasks(2048)));
        assert!(none.pids_origin().contains("--pids-limit=0"));
        // Recorded as a number, or the kernel's "max".
        let json = |pids| {
            serde_json::to_value(Limits {
                pids,
                ..Limits::default()
            })
            .unwrap()
        };
        assert_eq!(
            json(Some(PidsLimit::Tasks(9))),
            serde_json::json!({"pids": 9})
        );
        assert_eq!(
            json(Some(PidsLimit::Unlimited)),
            serde_json::json!({"pids": "max"})
        );
        assert_eq!(json(None), serde_json::json!({}));
        let back: Limits = serde_json::from_str(r#"{"pids":"max","memory":4096}"#).unwrap();
        assert_eq!(back.pids, Some(PidsLimit::Unlimited));
        assert!(serde_json::from_str::<Limits>(r#"{"pids":"lots"}"#).is_err());
    }
}
