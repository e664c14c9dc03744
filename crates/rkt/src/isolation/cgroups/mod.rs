//! rkt's resource isolators, `--memory=SIZE` and `--cpu=MILLICORES`, applied in a cgroup of
//! the pod's own: `rkt/<uuid>` below the root of each hierarchy, created by the runner
//! before the stage starts, joined by the stage before it forks the pod's init (so every
//! process of the pod is inside), removed with the pod's other resources
//! ([`crate::pod::cleanup`]) when it is torn down or garbage-collected.
//!
//! One [`Manager`] trait, two implementations: [`v1::V1`] (a hierarchy per controller,
//! `memory.limit_in_bytes`, `cpu.cfs_quota_us`) and [`v2::V2`] (the unified hierarchy,
//! `memory.max`, `cpu.max`), chosen by [`detect`]. Both work on a root directory given to
//! them, so their file writes are unit-tested on a temporary directory. A limit the host
//! cannot enforce (no such controller) is an error, not a silent no-op.

pub mod v1;
pub mod v2;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::IsolationError;

/// The period of the CPU quota, in microseconds (the kernel's default).
pub const CPU_PERIOD_US: u64 = 100_000;

/// The pod's limits; both `None`: no cgroup at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// `--memory`, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// `--cpu`, in thousandths of a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u64>,
}

impl Limits {
    pub fn is_none(&self) -> bool {
        self.memory.is_none() && self.cpu_millis.is_none()
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
    /// Moves process `pid` into the pod's cgroup.
    fn join(&self, uuid: &str, limits: &Limits, pid: u32) -> Result<(), IsolationError>;
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
fn rmdir(path: &Path) -> Result<(), IsolationError> {
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(IsolationError::Io {
            what: "remove the cgroup",
            path: path.to_path_buf(),
            source,
        }),
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
            memory: None,
            cpu_millis: Some(500),
        };
        assert_eq!(l.cpu_quota_us(), Some(50_000));
    }
}
