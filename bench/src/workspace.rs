//! The benchmark's own little world: a temporary directory holding rkt's data directory and
//! local configuration (with the benchmark networks in its `net.d`), host-local's
//! reservations, the libcni cache, and the 10,000-file configuration directory; and the
//! cleanup that removes everything the runs created, even after a failure or Ctrl-C.
//!
//! Every network uses `ipMasq: false` (no firewall rules) and a subnet of its own
//! ([`PTP_SUBNET`], [`MANY_SUBNET`]); host-local keeps its reservations under the temporary
//! directory, not in `/var/lib/cni`. Namespaces the scripted cycles make are named
//! `rktbench-<pid>-<n>`; on drop, any still present are deleted, and `rkt gc` removes any pod
//! a killed `rkt run` left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use crate::error::BenchError;

/// The network of the pod-cycle and memory scenarios.
pub const PTP_NET: &str = "benchptp";
pub const PTP_SUBNET: &str = "10.253.0.0/16";
/// The network whose plugin does nothing (the test plugin without a script).
pub const NOOP_NET: &str = "benchnoop";
/// The network of the 64 concurrent pods.
pub const MANY_NET: &str = "benchmany";
pub const MANY_SUBNET: &str = "10.252.0.0/16";
/// The plugin type of the do-nothing network.
pub const NOOP_PLUGIN: &str = "cni-test-plugin";

/// The binaries under test.
#[derive(Debug, Clone)]
pub struct Tools {
    pub rkt: PathBuf,
    /// The reference libcni driver (tools/libcni-driver).
    pub libcni: PathBuf,
    /// The directory holding `cni-test-plugin`.
    pub test_plugin_dir: PathBuf,
    /// The directory of the real plugins (ptp, host-local).
    pub cni_bin: PathBuf,
    /// `ip` from iproute2.
    pub ip: PathBuf,
    /// `true`, the app of every pod cycle.
    pub true_bin: PathBuf,
    /// Another `rkt` to time next to `rkt` in scenarios 1, 2 and 6 (`--candidate-rkt`).
    pub candidate_rkt: Option<PathBuf>,
}

impl Tools {
    /// Fails with a hint when something is missing.
    pub fn check(&self) -> Result<(), BenchError> {
        let need: [(&'static str, PathBuf, &'static str); 5] = [
            ("rkt", self.rkt.clone(), "build it: cargo build --release -p rkt"),
            (
                "the libcni driver",
                self.libcni.clone(),
                "build it: tools/libcni-driver/build.sh OUTPUT (needs golang-go, golang-github-appc-cni-dev)",
            ),
            (
                "the test plugin",
                self.test_plugin_dir.join(NOOP_PLUGIN),
                "build it: cargo build --release -p cni-test-plugin",
            ),
            (
                "the ptp plugin",
                self.cni_bin.join("ptp"),
                "install containernetworking-plugins",
            ),
            (
                "the host-local plugin",
                self.cni_bin.join("host-local"),
                "install containernetworking-plugins",
            ),
        ];
        let candidate = self.candidate_rkt.iter().map(|p| {
            (
                "the candidate rkt",
                p.clone(),
                "give the path of a built rkt binary",
            )
        });
        check_files(need.into_iter().chain(candidate))
    }

    /// `CNI_PATH` for the real plugins.
    pub fn real_cni_path(&self) -> String {
        self.cni_bin.display().to_string()
    }

    /// `CNI_PATH` for the do-nothing plugin.
    pub fn noop_cni_path(&self) -> String {
        self.test_plugin_dir.display().to_string()
    }
}

/// The temporary directory and what lives in it.
pub struct Workspace {
    pub dir: tempfile::TempDir,
    pub tools: Tools,
    /// rkt's `--dir`.
    pub data: PathBuf,
    /// rkt's `--local-config`; its `net.d` holds the benchmark networks.
    pub local_config: PathBuf,
    /// The libcni driver's `-cache`.
    pub libcni_cache: PathBuf,
    /// host-local's `dataDir`.
    pub ipam: PathBuf,
    /// A second rkt data directory on tmpfs (`/dev/shm`), for the what-if variant that shows
    /// what the data directory's file system costs; `None` without a tmpfs there.
    pub tmpfs_data: Option<tempfile::TempDir>,
    netns_counter: AtomicU64,
}

impl Workspace {
    pub fn new(tools: Tools) -> Result<Workspace, BenchError> {
        let dir = tempfile::Builder::new()
            .prefix("rkt-bench-")
            .tempdir()
            .map_err(|e| BenchError::io(std::env::temp_dir(), e))?;
        let root = dir.path().to_path_buf();
        let ws = Workspace {
            data: root.join("data"),
            local_config: root.join("local-config"),
            libcni_cache: root.join("libcni-cache"),
            ipam: root.join("ipam"),
            dir,
            tools,
            tmpfs_data: tmpfs_dir(),
            netns_counter: AtomicU64::new(0),
        };
        for d in [
            &ws.data,
            &ws.net_d(),
            &ws.libcni_cache,
            &ws.ipam,
            &root.join("system-config"),
        ] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io(d, e))?;
        }
        for (file, conf) in [
            ("10-benchptp.conflist", ws.ptp_conflist(PTP_NET, PTP_SUBNET)),
            (
                "20-benchmany.conflist",
                ws.ptp_conflist(MANY_NET, MANY_SUBNET),
            ),
            ("30-benchnoop.conflist", noop_conflist(NOOP_NET)),
        ] {
            write_json(&ws.net_d().join(file), &conf)?;
        }
        Ok(ws)
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn net_d(&self) -> PathBuf {
        self.local_config.join("net.d")
    }

    /// The configuration file of one of the benchmark networks.
    pub fn conf_file(&self, net: &str) -> PathBuf {
        let file = match net {
            PTP_NET => "10-benchptp.conflist",
            MANY_NET => "20-benchmany.conflist",
            _ => "30-benchnoop.conflist",
        };
        self.net_d().join(file)
    }

    /// A ptp + host-local network without masquerading, its reservations in the workspace.
    pub fn ptp_conflist(&self, name: &str, subnet: &str) -> Value {
        json!({
            "cniVersion": "1.0.0",
            "name": name,
            "plugins": [{
                "type": "ptp",
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "subnet": subnet,
                    "dataDir": self.ipam.display().to_string(),
                },
            }],
        })
    }

    /// A fresh namespace name for a scripted cycle.
    pub fn netns_name(&self) -> String {
        let n = self.netns_counter.fetch_add(1, Ordering::Relaxed);
        format!("{}{n}", netns_prefix())
    }

    /// Global options every `rkt` call of the benchmark gets.
    pub fn rkt_globals(&self) -> Vec<String> {
        vec![
            "--dir".into(),
            self.data.display().to_string(),
            "--local-config".into(),
            self.local_config.display().to_string(),
            "--system-config".into(),
            self.root().join("system-config").display().to_string(),
        ]
    }

    /// `--net-plugin-dir` for `rkt run`: the test plugin's directory (the real plugins come
    /// from /usr/lib/cni, which rkt always searches).
    pub fn rkt_plugin_args(&self) -> Vec<String> {
        vec![
            "--net-plugin-dir".into(),
            self.tools.test_plugin_dir.display().to_string(),
        ]
    }

    /// Removes what runs may have left: pods of a killed `rkt run` (through `rkt gc`) and the
    /// scripted cycles' namespaces. The temporary directory goes when `self.dir` drops.
    fn cleanup(&self) {
        let mut datas = vec![self.data.clone()];
        datas.extend(self.tmpfs_data.as_ref().map(|d| d.path().to_path_buf()));
        for data in datas {
            let mut args = self.rkt_globals();
            args[1] = data.display().to_string();
            let _ = Command::new(&self.tools.rkt)
                .args(args)
                .args(["gc", "--grace-period=0s", "--expire-prepared=0s"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        for name in leftover_netns() {
            let _ = Command::new("ip")
                .args(["netns", "del", &name])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// A temporary directory in /dev/shm when that is a tmpfs.
fn tmpfs_dir() -> Option<tempfile::TempDir> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let shm = Path::new("/dev/shm");
    let c = std::ffi::CString::new("/dev/shm").ok()?;
    // SAFETY: statfs writes into the zeroed buffer we own; the path is NUL-terminated.
    let is_tmpfs = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == TMPFS_MAGIC
    };
    if !is_tmpfs {
        return None;
    }
    tempfile::Builder::new()
        .prefix("rkt-bench-data-")
        .tempdir_in(shm)
        .ok()
}

/// The prefix of this process's namespace names.
fn netns_prefix() -> String {
    format!("rktbench-{}-", std::process::id())
}

/// Namespaces under /run/netns that this process made and did not delete.
fn leftover_netns() -> Vec<String> {
    let prefix = netns_prefix();
    std::fs::read_dir("/run/netns")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Fails with the first of `need`'s (what, file, hint) whose file is not there.
pub fn check_files(
    need: impl IntoIterator<Item = (&'static str, PathBuf, &'static str)>,
) -> Result<(), BenchError> {
    for (what, path, hint) in need {
        if !path.is_file() {
            return Err(BenchError::Missing { what, path, hint });
        }
    }
    Ok(())
}

/// A network whose only plugin is the test plugin, which without a script answers at once.
pub fn noop_conflist(name: &str) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{"type": NOOP_PLUGIN}],
    })
}

pub fn write_json(path: &Path, v: &Value) -> Result<(), BenchError> {
    let mut bytes = serde_json::to_vec_pretty(v).expect("JSON serializes");
    bytes.push(b'\n');
    std::fs::write(path, bytes).map_err(|e| BenchError::io(path, e))
}
