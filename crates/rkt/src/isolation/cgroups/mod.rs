//! rkt's resource isolators, `--memory=SIZE`, `--cpu=MILLICORES` and `--pids-limit=N`,
//! applied in a cgroup of the pod's own, made by the runner for every pod before the stage
//! starts, joined by the stage before it forks the pod's init (so every process of the pod
//! is inside) and by `rkt enter`'s helper, removed with the pod's other resources
//! ([`crate::pod::cleanup`]) when it is torn down or garbage-collected.
//!
//! Where it goes ([`Manager::place`]), in each hierarchy the pod uses:
//! - by default below the cgroup of the process that runs the pod (`/proc/self/cgroup`),
//!   as `<that cgroup>/rkt/<uuid>`, so that a systemd unit or any other supervisor keeps
//!   the pod in its accounting and can kill it. The shared `rkt` level keeps the pods of
//!   one caller together, and a runner in a hierarchy's root cgroup (no systemd, a
//!   container's init) puts them exactly where rkt always has, `/rkt/<uuid>`; rkt removes
//!   it with its last pod;
//! - with `--cgroup-parent=PATH` ([`CgroupParent`]) as `<PATH>/rkt-<uuid>` below each
//!   hierarchy's root, as kubelet and podman take a parent: nothing of rkt's is shared
//!   in a cgroup the orchestrator owns.
//!
//! The place is recorded in the pod's state ([`PodCgroup`]) before it is made, and
//! everything after the runner (stage, `rkt enter`, release, gc, `rkt status`) uses the
//! record; a pod of an older rkt, without one, has its cgroup at `rkt/<uuid>` below each
//! hierarchy's root ([`PodCgroup::legacy`]). Never silently anywhere else: a place that
//! cannot work (cgroup v2's rule that a cgroup with processes gives no controllers to its
//! children, see [`v2`]) is an error that says to pass `--cgroup-parent`.
//!
//! Every pod has a pids limit, [`DEFAULT_PIDS_LIMIT`] unless `--pids-limit` says otherwise,
//! so that a pod cannot fork until the host's `pid_max` is reached.
//!
//! One [`Manager`] trait, two implementations: [`v1::V1`] (a hierarchy per controller,
//! `memory.limit_in_bytes`, `cpu.cfs_quota_us`, `pids.max`) and [`v2::V2`] (the unified
//! hierarchy, `memory.max`, `cpu.max`, `pids.max`), chosen by [`detect`]. Both work on a root
//! directory and a `/proc/self/cgroup` given to them, so their file writes are unit-tested
//! on a temporary directory. A limit the host cannot enforce (no such controller) is an
//! error, not a silent no-op.

pub mod v1;
pub mod v2;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::IsolationError;

/// The period of the CPU quota, in microseconds (the kernel's default).
pub const CPU_PERIOD_US: u64 = 100_000;

/// The pids limit of a pod without `--pids-limit`: podman's default.
pub const DEFAULT_PIDS_LIMIT: u64 = 2048;

/// The largest `pids.max` the kernel takes (`PID_MAX_LIMIT` on 64-bit machines).
pub const MAX_PIDS_LIMIT: u64 = 4 << 20;

/// The largest `cpu.shares` cgroup v1 takes.
pub const MAX_CPU_SHARES: u64 = 262_144;

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
    /// `--cpu-shares`: the relative weight of the cgroup's CPU time against its siblings'
    /// when the CPUs are busy (cgroup v1's `cpu.shares`, 2 to 262144, 1024 the kernel's
    /// default; cgroup v2's `cpu.weight` from it, [`Limits::cpu_weight`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_shares: Option<u64>,
    /// `--pids-limit`; `None`: [`DEFAULT_PIDS_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<PidsLimit>,
}

impl Limits {
    /// No flag given.
    pub fn is_none(&self) -> bool {
        self.memory.is_none()
            && self.cpu_millis.is_none()
            && self.cpu_shares.is_none()
            && self.pids.is_none()
    }

    /// Whether these need the cpu controller (`--cpu` or `--cpu-shares`).
    pub fn uses_cpu(&self) -> bool {
        self.cpu_millis.is_some() || self.cpu_shares.is_some()
    }

    /// cgroup v2's `cpu.weight` (1 to 10000, 100 the default) for `--cpu-shares` (2 to
    /// 262144, 1024 the default), mapped linearly range onto range as runc and systemd map
    /// them: 2 is 1, 262144 is 10000 (1024 is 39, not 100: the two defaults do not meet).
    pub fn cpu_weight(&self) -> Option<u64> {
        self.cpu_shares
            .map(|shares| 1 + (shares.clamp(2, MAX_CPU_SHARES) - 2) * 9999 / (MAX_CPU_SHARES - 2))
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

/// Places, creates, joins and removes the pods' cgroups in one cgroup layout.
pub trait Manager {
    /// Where pods' cgroups go in each hierarchy `limits` use: below `parent`
    /// (`--cgroup-parent`), or below the cgroup this process is in. Nothing is created;
    /// fails naming the controller the host lacks, or the cgroup that cannot be a parent.
    fn place(
        &self,
        parent: Option<&CgroupParent>,
        limits: &Limits,
    ) -> Result<Placement, IsolationError>;
    /// Creates the pod's cgroup with `limits`; fails naming the controller the host lacks.
    fn create(&self, cgroup: &PodCgroup, limits: &Limits) -> Result<(), IsolationError>;
    /// Moves the calling process, single-threaded, into the pod's cgroup; what it forks
    /// afterwards starts inside.
    fn join(&self, cgroup: &PodCgroup) -> Result<(), IsolationError>;
    /// Removes the pod's cgroup (nothing when there is none); its processes must be gone.
    fn remove(&self, cgroup: &PodCgroup) -> Result<(), IsolationError>;
    /// The files a single-threaded process writes `0` to, to move itself into `cgroup`
    /// (what [`Manager::join`] writes): opened ahead by a process that can still reach
    /// them, for one that will not (an app's, in its pod's mount namespace).
    fn join_files(&self, cgroup: &PodCgroup) -> Vec<PathBuf>;
}

/// The manager for this host: the unified hierarchy when `/sys/fs/cgroup` is cgroup v2,
/// otherwise the v1 hierarchies under it.
pub fn detect() -> Box<dyn Manager> {
    let root = Path::new("/sys/fs/cgroup");
    if unified() {
        Box::new(v2::V2::new(root))
    } else {
        Box::new(v1::V1::new(root))
    }
}

/// The leaf of app `name`'s own cgroup below its pod's, for limits of the app alone (a
/// sandbox's app's, or rkt 1.30's per-app `--memory`/`--cpu`); removed before the pod's.
pub fn app_leaf(name: &str) -> String {
    format!("{APP_PREFIX}{name}")
}

const APP_PREFIX: &str = "app-";

/// Whether this host's cgroups are the unified (v2) hierarchy ([`detect`]'s choice).
pub fn unified() -> bool {
    Path::new("/sys/fs/cgroup")
        .join("cgroup.controllers")
        .exists()
}

/// Where the calling process's cgroups are listed.
const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";

/// The key of the unified (v2) hierarchy in a [`PodCgroup`] and in [`ProcCgroup`].
pub const UNIFIED: &str = "unified";

/// `--cgroup-parent=PATH`: the cgroup pods' cgroups are made in, the same path below the
/// root of each hierarchy (absolute within it, as kubelet and podman take it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CgroupParent(String);

impl CgroupParent {
    /// Checks `text`: absolute, no `.` or `..` component, no control characters; repeated
    /// and trailing slashes are dropped (`/` is the hierarchies' root).
    pub fn parse(text: &str) -> Result<CgroupParent, IsolationError> {
        let bad = |why: &str| IsolationError::BadValue {
            flag: "--cgroup-parent",
            value: text.to_string(),
            why: why.to_string(),
        };
        if !text.starts_with('/') {
            return Err(bad(
                "expected an absolute path within the cgroup hierarchies, such as \
                 /kubepods/pod1 or /system.slice/web.service",
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(bad("a cgroup path holds no control characters"));
        }
        let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
        if parts.iter().any(|p| *p == "." || *p == "..") {
            return Err(bad(
                "'.' and '..' are not allowed: the pod's cgroup must stay below PATH",
            ));
        }
        Ok(CgroupParent(format!("/{}", parts.join("/"))))
    }

    /// The path, absolute within a hierarchy.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CgroupParent {
    type Error = String;
    fn try_from(text: String) -> Result<CgroupParent, String> {
        CgroupParent::parse(&text).map_err(|e| e.to_string())
    }
}

impl From<CgroupParent> for String {
    fn from(p: CgroupParent) -> String {
        p.0
    }
}

/// Where pods' cgroups go in each hierarchy, before a pod's UUID is known
/// ([`Manager::place`]); [`Placement::pod`] names one pod's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Hierarchy ([`PodCgroup::paths`]' keys) → the parent, absolute within it.
    parents: BTreeMap<String, String>,
    /// Below the runner's own cgroup: the pods share an `rkt` cgroup there.
    own: bool,
}

impl Placement {
    /// Pod `uuid`'s cgroup: `<own cgroup>/rkt/<uuid>`, or `<parent>/rkt-<uuid>`.
    pub fn pod(&self, uuid: &str) -> PodCgroup {
        let leaf = match self.own {
            true => format!("rkt/{uuid}"),
            false => format!("rkt-{uuid}"),
        };
        let paths = self
            .parents
            .iter()
            .map(|(key, parent)| (key.clone(), join_path(parent, &leaf)))
            .collect();
        PodCgroup {
            paths,
            legacy: false,
        }
    }
}

/// Where a pod's cgroup is, recorded in its state before it is made: every later step
/// uses this record, not the flags or the cgroup of whoever runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodCgroup {
    /// The pod's cgroup in each hierarchy it uses, absolute within it: by controller
    /// (`pids`, `memory`, `cpu`) for cgroup v1, [`UNIFIED`] for v2.
    pub paths: BTreeMap<String, String>,
    /// A pod of an older rkt that recorded no place ([`PodCgroup::legacy`]); never stored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy: bool,
}

impl PodCgroup {
    /// Where an older rkt made pod `uuid`'s cgroup: `rkt/<uuid>` below the root of every
    /// hierarchy it may have used (only those that exist are joined).
    pub fn legacy(uuid: &str) -> PodCgroup {
        let path = format!("/rkt/{uuid}");
        let paths = ["cpu", "memory", "pids", UNIFIED]
            .into_iter()
            .map(|key| (key.to_string(), path.clone()))
            .collect();
        PodCgroup {
            paths,
            legacy: true,
        }
    }

    /// A cgroup `leaf` below this one in each of its hierarchies (a sandbox app's own,
    /// for its own limits).
    pub fn child(&self, leaf: &str) -> PodCgroup {
        PodCgroup {
            paths: self
                .paths
                .iter()
                .map(|(key, path)| (key.clone(), join_path(path, leaf)))
                .collect(),
            legacy: false,
        }
    }

    /// Whether this is a cgroup v2 place (a unified hierarchy only).
    pub fn is_unified(&self) -> bool {
        self.paths.keys().all(|k| k == UNIFIED)
    }

    /// The pod's cgroup in hierarchy `key` below that hierarchy's mount `root`.
    fn dir(&self, key: &str, root: &Path) -> Option<PathBuf> {
        self.paths.get(key).map(|p| below(root, p))
    }

    /// Whether the pod's cgroup at `path` is `…/rkt/<uuid>`, in an `rkt` cgroup pods share
    /// (the default place, and older rkts'), which the last of them removes; a
    /// `--cgroup-parent` pod's (`rkt-<uuid>`) is alone in a parent that is not rkt's.
    fn shares_parent(path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parent = path.parent().and_then(|p| p.file_name());
        !name.starts_with("rkt-") && parent.is_some_and(|p| p == "rkt")
    }
}

/// `path` (absolute within a hierarchy) below the hierarchy's mount `root`.
fn below(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// `parent/leaf`, absolute within a hierarchy (`/` + `rkt-x` is `/rkt-x`).
fn join_path(parent: &str, leaf: &str) -> String {
    format!("{}/{leaf}", parent.trim_end_matches('/'))
}

/// The calling process's cgroups, as `/proc/self/cgroup` lists them: for cgroup v1 a path
/// per controller (a line `4:cpu,cpuacct:/x` gives `cpu` and `cpuacct`), for v2 the
/// `0::/x` line's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcCgroup {
    pub v1: BTreeMap<String, String>,
    pub unified: Option<String>,
}

impl ProcCgroup {
    /// Parses the text of `/proc/<pid>/cgroup`; lines that are not `ID:CONTROLLERS:PATH`
    /// are skipped.
    pub fn parse(text: &str) -> ProcCgroup {
        let mut own = ProcCgroup::default();
        for line in text.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if !path.starts_with('/') {
                continue;
            }
            if id == "0" && controllers.is_empty() {
                own.unified = Some(path.to_string());
                continue;
            }
            for controller in controllers.split(',').filter(|c| !c.is_empty()) {
                own.v1.insert(controller.to_string(), path.to_string());
            }
        }
        own
    }

    /// Reads `file` (normally `/proc/self/cgroup`).
    fn read(file: &Path) -> Result<ProcCgroup, IsolationError> {
        let text = std::fs::read_to_string(file).map_err(|source| IsolationError::Io {
            what: "read",
            path: file.to_path_buf(),
            source,
        })?;
        Ok(ProcCgroup::parse(&text))
    }
}

/// The parent of the pods' cgroups in one hierarchy mounted at `mount`: `parent`, or the
/// cgroup this process is in there (`own`, from [`PROC_SELF_CGROUP`]), which must be a
/// directory of that mount (in a container whose cgroups are mounted from elsewhere it is
/// not: then `--cgroup-parent` says where).
fn parent_in(
    mount: &Path,
    parent: Option<&CgroupParent>,
    own: Option<&String>,
    what: &str,
) -> Result<String, IsolationError> {
    if let Some(parent) = parent {
        return Ok(parent.as_str().to_string());
    }
    let Some(own) = own else {
        return Err(IsolationError::Unsupported {
            what: format!(
                "{PROC_SELF_CGROUP} names no {what} cgroup of rkt's to make the pod's below; \
                 pass --cgroup-parent=PATH"
            ),
        });
    };
    if !below(mount, own).is_dir() {
        return Err(IsolationError::Unsupported {
            what: format!(
                "rkt runs in the {what} cgroup {own} ({PROC_SELF_CGROUP}), which is not at \
                 {}: the hierarchy is mounted from elsewhere; pass --cgroup-parent=PATH",
                below(mount, own).display()
            ),
        });
    }
    Ok(own.clone())
}

fn write(path: &Path, value: &str) -> Result<(), IsolationError> {
    std::fs::write(path, value).map_err(|source| IsolationError::Io {
        what: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// Creates a cgroup directory and its parents. Another pod's teardown may remove the shared
/// `rkt` parent between the two steps ([`remove_shared_parent`]): that is retried.
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

/// Removes the pod's cgroup at `dir`, then the `rkt` cgroup it shared with other pods
/// ([`PodCgroup::shares_parent`]) once no pod's cgroup is left in it, so that rkt leaves
/// nothing on the host; while another pod has one, the kernel refuses (not empty, or busy)
/// and it stays.
fn remove_pod_dir(dir: &Path) -> Result<(), IsolationError> {
    // A sandbox app's own cgroups (`app-<name>`) go first: a cgroup with children stays.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with(APP_PREFIX) && entry.path().is_dir() {
                rmdir(&entry.path())?;
            }
        }
    }
    rmdir(dir)?;
    remove_shared_parent(dir);
    Ok(())
}

/// The shared-parent half of [`remove_pod_dir`].
fn remove_shared_parent(dir: &Path) {
    if let Some(parent) = dir.parent().filter(|_| PodCgroup::shares_parent(dir)) {
        let _ = std::fs::remove_dir(parent);
    }
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

/// `--cpu-shares=N`: a relative CPU weight, 2 to 262144 (cgroup v1's range; rkt 1.30's
/// flag, 1024 the kernel's default).
pub fn parse_cpu_shares(text: &str) -> Result<u64, IsolationError> {
    let n: u64 = text.trim().parse().map_err(|_| IsolationError::BadValue {
        flag: "--cpu-shares",
        value: text.to_string(),
        why: "expected a number of shares such as 512 or 2048 (1024: the default weight)"
            .to_string(),
    })?;
    if !(2..=MAX_CPU_SHARES).contains(&n) {
        return Err(IsolationError::BadValue {
            flag: "--cpu-shares",
            value: text.to_string(),
            why: format!("out of range: the kernel takes 2 to {MAX_CPU_SHARES}"),
        });
    }
    Ok(n)
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
    fn proc_self_cgroup_gives_each_v1_controller_its_path_and_v2_its_line() {
        let text = "12:pids:/system.slice/web.service\n\
                    4:cpu,cpuacct:/system.slice\n\
                    3:memory:/\n\
                    1:name=systemd:/system.slice/web.service\n\
                    0::/system.slice/web.service\n\
                    garbage\n";
        let own = ProcCgroup::parse(text);
        assert_eq!(own.v1["pids"], "/system.slice/web.service");
        assert_eq!(own.v1["cpu"], "/system.slice");
        assert_eq!(own.v1["cpuacct"], "/system.slice");
        assert_eq!(own.v1["memory"], "/");
        assert_eq!(own.v1["name=systemd"], "/system.slice/web.service");
        assert_eq!(own.unified.as_deref(), Some("/system.slice/web.service"));
        // A pure cgroup v2 host lists one line.
        let v2 = ProcCgroup::parse("0::/user.slice/user-0.slice/session-3.scope\n");
        assert!(v2.v1.is_empty());
        assert_eq!(
            v2.unified.as_deref(),
            Some("/user.slice/user-0.slice/session-3.scope")
        );
    }

    #[test]
    fn a_cgroup_parent_is_absolute_and_stays_below_itself() {
        let ok = |t: &str| CgroupParent::parse(t).unwrap().as_str().to_string();
        assert_eq!(ok("/kubepods/burstable/pod1"), "/kubepods/burstable/pod1");
        assert_eq!(ok("//a///b/"), "/a/b");
        assert_eq!(ok("/"), "/");
        for bad in ["kubepods", "", "./a", "/a/../b", "/..", "/a/./b", "/a\nb"] {
            let e = CgroupParent::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--cgroup-parent={bad}:")), "{e}");
        }
        // Recorded as the string, checked again when read.
        let json = serde_json::to_string(&CgroupParent::parse("/a").unwrap()).unwrap();
        assert_eq!(json, "\"/a\"");
        assert!(serde_json::from_str::<CgroupParent>("\"/a/../..\"").is_err());
    }

    #[test]
    fn a_pod_is_rkt_uuid_below_its_own_cgroup_and_rkt_dash_uuid_below_a_parent() {
        let parents = BTreeMap::from([
            ("pids".to_string(), "/".to_string()),
            ("memory".to_string(), "/system.slice/a.service".to_string()),
        ]);
        let own = Placement {
            parents: parents.clone(),
            own: true,
        };
        let cg = own.pod("u1");
        assert_eq!(cg.paths["pids"], "/rkt/u1");
        assert_eq!(cg.paths["memory"], "/system.slice/a.service/rkt/u1");
        assert!(PodCgroup::shares_parent(Path::new(
            "/sys/fs/cgroup/pids/rkt/u1"
        )));
        let given = Placement {
            parents,
            own: false,
        };
        let cg = given.pod("u1");
        assert_eq!(cg.paths["pids"], "/rkt-u1");
        assert_eq!(cg.paths["memory"], "/system.slice/a.service/rkt-u1");
        assert!(!PodCgroup::shares_parent(Path::new(
            "/sys/fs/cgroup/pids/rkt/rkt-u1"
        )));
        // The record: paths by hierarchy; `legacy` is never written.
        assert_eq!(
            serde_json::to_value(&cg).unwrap(),
            serde_json::json!({"paths": {"pids": "/rkt-u1", "memory": "/system.slice/a.service/rkt-u1"}})
        );
        let old = PodCgroup::legacy("u2");
        assert!(old.legacy);
        assert_eq!(old.paths["pids"], "/rkt/u2");
        assert_eq!(old.paths[UNIFIED], "/rkt/u2");
    }

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
        // rkt read a bare number as CPUs (Kubernetes quantities): Nomad's --cpu=100 is 100.
        assert_eq!(parse_cpu("100").unwrap(), 100_000);
    }

    #[test]
    fn cpu_shares_parse_and_map_onto_cpu_weight() {
        assert_eq!(parse_cpu_shares("2048").unwrap(), 2048);
        for bad in ["1", "0", "262145", "lots", "-5", ""] {
            let e = parse_cpu_shares(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--cpu-shares={bad}:")), "{e}");
        }
        let weight = |shares| {
            Limits {
                cpu_shares: Some(shares),
                ..Limits::default()
            }
            .cpu_weight()
        };
        assert_eq!(weight(2), Some(1));
        assert_eq!(weight(262_144), Some(10_000));
        assert_eq!(weight(1024), Some(39));
        assert_eq!(weight(2048), Some(79));
        assert_eq!(Limits::default().cpu_weight(), None);
        assert!(Limits {
            cpu_shares: Some(2),
            ..Limits::default()
        }
        .uses_cpu());
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
