//! Helpers of the networking tests (`net/`): the scriptable test plugin, temporary pods,
//! network namespaces made by the test, and what the leak checker (`tests/leaks`, which
//! every file using this module also declares) attributes to a test's pod.

#![allow(dead_code)] // Each test file uses its own subset.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

use rkt::networking::{DnsOptions, HostsOptions, NetOptions, NetSelection, PodNet};
use serde_json::Value;

use crate::leaks;

pub use crate::support::test_plugin;
use test_kit::unique;

/// A temporary world for one test of the networking library (no `rkt` binary): a pod directory, a configuration directory, a plugin
/// directory and a CNI cache directory.
pub struct NetWorld {
    pub root: tempfile::TempDir,
    pub uuid: String,
}

impl NetWorld {
    pub fn new() -> NetWorld {
        let root = tempfile::tempdir().unwrap();
        for d in ["pod", "conf", "plugins", "cache"] {
            fs::create_dir(root.path().join(d)).unwrap();
        }
        NetWorld {
            root,
            uuid: uuid::Uuid::new_v4().to_string(),
        }
    }

    pub fn pod_dir(&self) -> PathBuf {
        self.root.path().join("pod")
    }
    pub fn conf_dir(&self) -> PathBuf {
        self.root.path().join("conf")
    }
    pub fn plugin_dir(&self) -> PathBuf {
        self.root.path().join("plugins")
    }
    pub fn cache_dir(&self) -> PathBuf {
        self.root.path().join("cache")
    }
    pub fn log(&self) -> PathBuf {
        self.root.path().join("calls.jsonl")
    }

    /// Installs the test plugin as `name` in the plugin directory, driven by `script`
    /// (the script's `log` is set to this world's call log).
    pub fn plugin(&self, name: &str, mut script: Value) {
        let link = self.plugin_dir().join(name);
        if !link.exists() {
            symlink(test_plugin(), &link).unwrap();
        }
        script["log"] = Value::String(self.log().display().to_string());
        self.script(name, &script);
    }

    /// Replaces the script of plugin `name`.
    pub fn script(&self, name: &str, script: &Value) {
        fs::write(
            self.plugin_dir().join(format!("{name}.script")),
            script.to_string(),
        )
        .unwrap();
    }

    /// Writes a configuration file into the configuration directory.
    pub fn conf(&self, file: &str, json: Value) {
        fs::write(self.conf_dir().join(file), json.to_string()).unwrap();
    }

    /// Options selecting `net` (the values of `--net` flags).
    pub fn opts(&self, net: &[&str]) -> NetOptions {
        NetOptions {
            selection: NetSelection::parse(&net.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap(),
            conf_dir: self.conf_dir(),
            plugin_path: vec![self.plugin_dir()],
            cache_dir: self.cache_dir(),
            dns: DnsOptions::default(),
            hosts: HostsOptions::default(),
            hostname: format!("rkt-{}", self.uuid),
            ports: Vec::new(),
            // The world's directories are the test's own (reliability_perms tests the check).
            check_ownership: false,
        }
    }

    /// What the leak checker may blame on this world: its pod (the container id given to
    /// the plugins), its call log, and every CNI cache entry under its root.
    pub fn leak_ctx(&self) -> leaks::Ctx {
        leaks::Ctx::new(self.root.path())
            .container(&self.uuid)
            .plugin_log(self.log())
            .cache_dir(self.cache_dir())
    }

    /// The pod, with `netns` as its namespace.
    pub fn pod<'a>(&'a self, pod_dir: &'a Path, netns: Option<&'a Path>) -> PodNet<'a> {
        PodNet {
            uuid: &self.uuid,
            pod_dir,
            netns,
            plugin_timeout: cni::api::DEFAULT_TIMEOUT,
        }
    }

    /// Every logged plugin call as (argv0 file name, command, CNI_IFNAME, stdin).
    pub fn calls(&self) -> Vec<Call> {
        let Ok(text) = fs::read_to_string(self.log()) else {
            return Vec::new();
        };
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                Call {
                    plugin: Path::new(v["argv0"].as_str().unwrap())
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    command: v["command"].as_str().unwrap().to_string(),
                    ifname: v["env"]["CNI_IFNAME"].as_str().unwrap_or("").to_string(),
                    env: v["env"].clone(),
                    stdin: v["stdin"].clone(),
                }
            })
            .filter(|c| c.command != "VERSION")
            .collect()
    }
}

/// One logged plugin call.
#[derive(Debug, Clone)]
pub struct Call {
    pub plugin: String,
    pub command: String,
    pub ifname: String,
    pub env: Value,
    pub stdin: Value,
}

impl Call {
    /// `"ADD plug eth0"`, for comparing sequences.
    pub fn short(&self) -> String {
        format!("{} {} {}", self.command, self.plugin, self.ifname)
    }
}

/// Runs a command, returning stdout; panics with its stderr when it fails.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace created for one test (`ip netns add rkt-test-<random>`), deleted on
/// drop even when the test fails.
pub struct TestNetns {
    pub name: String,
    pub path: PathBuf,
}

impl TestNetns {
    pub fn new() -> TestNetns {
        let name = format!("rkt-test-{}", unique());
        sh(&["ip", "netns", "add", &name]);
        sh(&[
            "ip", "netns", "exec", &name, "ip", "link", "set", "lo", "up",
        ]);
        TestNetns {
            path: PathBuf::from("/run/netns").join(&name),
            name,
        }
    }

    /// `ip -o addr` inside the namespace.
    pub fn addrs(&self) -> String {
        sh(&["ip", "netns", "exec", &self.name, "ip", "-o", "addr"])
    }

    /// The interface names inside the namespace.
    pub fn links(&self) -> Vec<String> {
        sh(&["ip", "netns", "exec", &self.name, "ip", "-o", "link"])
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap().to_string())
            .collect()
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        if self.path.exists() {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
        }
    }
}

/// The host-side interfaces a set of CNI results names (those without a sandbox).
pub fn host_ifaces(results: &[Value]) -> Vec<String> {
    results
        .iter()
        .flat_map(|r| r["interfaces"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["sandbox"].as_str().unwrap_or("").is_empty())
        .filter_map(|i| i["name"].as_str().map(str::to_string))
        .collect()
}

/// The firewall chains that rules mentioning pod `uuid` jump to (ptp's `ipMasq` chains).
pub fn fw_chains(uuid: &str) -> Vec<String> {
    sh(&["iptables-save"])
        .lines()
        .filter(|l| l.contains(uuid))
        .filter_map(|l| l.split(" -j ").nth(1))
        .map(|t| t.split_whitespace().next().unwrap_or("").to_string())
        .filter(|c| c.starts_with("CNI-"))
        .collect()
}

/// Adds host links the test learnt the names of (a pod's host-side veths) to what `guard`
/// attributes to the test, so one left behind is reported even on a shared network.
pub fn guard_links(guard: &mut leaks::Guard, links: &[String]) {
    for l in links {
        guard.add_link(l);
    }
}

/// Removes host-local's state directory of test networks on drop (after the leak checks,
/// even when the test fails), so test network names do not pile up on the host.
pub struct HostLocalDirs(pub Vec<String>);

impl Drop for HostLocalDirs {
    fn drop(&mut self) {
        for net in &self.0 {
            let _ = fs::remove_dir_all(Path::new("/var/lib/cni/networks").join(net));
        }
    }
}

/// Tears the pod's networks down on drop, so a failing test does not leave veths,
/// reservations or firewall rules behind (teardown is idempotent, so tests still call it
/// themselves to check it).
pub struct TeardownGuard<'a>(pub PodNet<'a>);

impl Drop for TeardownGuard<'_> {
    fn drop(&mut self) {
        let _ = rkt::networking::teardown(&self.0);
    }
}
