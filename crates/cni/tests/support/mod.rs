//! Shared helpers of the runtime tests: the test plugin binary, a temporary plugin
//! directory with scripted copies of it, and the call log they write.

#![allow(dead_code)] // each test crate uses a different subset

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cni::api::{CniConfig, RuntimeConf};
use cni::conf::NetworkConfigList;
use serde_json::{json, Value};

/// Set by a test that re-runs this binary as a child, so the child need not build again.
pub const BUILT_PLUGIN_VAR: &str = "CNI_TEST_PLUGIN_BUILT";

/// The test plugin binary, built once per test process.
pub fn plugin_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(built) = std::env::var_os(BUILT_PLUGIN_VAR) {
            return PathBuf::from(built);
        }
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "cni-test-plugin"])
            .status()
            .expect("running cargo build for cni-test-plugin");
        assert!(status.success(), "building cni-test-plugin failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        let bin = target.join("debug/cni-test-plugin");
        assert!(bin.is_file(), "{} missing after build", bin.display());
        bin
    })
}

/// A temporary world: a plugin dir, a cache dir and a call log.
pub struct World {
    pub tmp: tempfile::TempDir,
    pub plugins: PathBuf,
    pub cache: PathBuf,
    pub log: PathBuf,
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let plugins = tmp.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        World {
            plugins,
            cache: tmp.path().join("cache"),
            log: tmp.path().join("calls.jsonl"),
            tmp,
        }
    }

    /// Installs the test plugin as `name` (a symlink, so `argv0` differs) with `script`
    /// (the log path added).
    pub fn install(&self, name: &str, script: Value) -> PathBuf {
        self.install_in(&self.plugins, name, script)
    }

    pub fn install_in(&self, dir: &Path, name: &str, mut script: Value) -> PathBuf {
        script["log"] = json!(self.log);
        let path = dir.join(name);
        symlink(plugin_binary(), &path).unwrap();
        std::fs::write(dir.join(format!("{name}.script")), script.to_string()).unwrap();
        path
    }

    /// A runtime over the plugin dir and cache dir.
    pub fn cni(&self) -> CniConfig {
        CniConfig::new(vec![self.plugins.clone()], self.cache.clone())
    }

    /// Every logged call, in order.
    pub fn calls(&self) -> Vec<Call> {
        let Ok(text) = std::fs::read_to_string(&self.log) else {
            return Vec::new();
        };
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let argv0 = v["argv0"].as_str().unwrap();
                Call {
                    plugin: Path::new(argv0)
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                    command: v["command"].as_str().unwrap().to_owned(),
                    env: v["env"].clone(),
                    stdin: v["stdin"].clone(),
                }
            })
            .collect()
    }

    /// `(plugin, command)` of every logged call.
    pub fn sequence(&self) -> Vec<(String, String)> {
        self.calls()
            .into_iter()
            .map(|c| (c.plugin, c.command))
            .collect()
    }

    pub fn clear_log(&self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

/// One logged plugin call.
#[derive(Debug, Clone)]
pub struct Call {
    pub plugin: String,
    pub command: String,
    pub env: Value,
    pub stdin: Value,
}

/// Parses a network list from JSON.
pub fn list(v: Value) -> NetworkConfigList {
    cni::conf::parse_list(v.to_string().as_bytes(), None).unwrap()
}

/// A list `name` at `version` chaining plugins of the given types.
pub fn chain(name: &str, version: &str, types: &[&str]) -> NetworkConfigList {
    let plugins: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
    list(json!({"cniVersion": version, "name": name, "plugins": plugins}))
}

/// The usual runtime conf: container `c1`, interface `eth0`, a netns path.
pub fn rt() -> RuntimeConf {
    RuntimeConf::new("c1", Some("/run/netns/test-ns".into()), "eth0")
}

/// A 1.0.0 result with one address, for scripts.
pub fn result_with(addr: &str) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": "/run/netns/test-ns"}],
        "ips": [{"address": addr, "interface": 0}],
        "dns": {}
    })
}
