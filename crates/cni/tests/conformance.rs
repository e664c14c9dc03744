//! Conformance with the reference: the same ADD, CHECK and DEL run through Go's libcni
//! (1.1.2, from Debian's `golang-github-appc-cni-dev`, behind `tools/libcni-driver`) and
//! through this crate, against the same chain of recording test plugins; every plugin must
//! see the same `CNI_*` environment and semantically equal stdin, and both runtimes must
//! return and cache the same result.
//!
//! Differences that are allowed, each asserted in its exact form (anything else fails):
//! * `capabilities`: the reference forwards each plugin's `capabilities` object on stdin;
//!   the spec says a runtime must not set it, and we do not.
//! * Empty variables: the reference always sets `CNI_NETNS`, `CNI_ARGS` (and, for VERSION,
//!   `CNI_CONTAINERID`) even when empty; we leave empty ones unset. Plugins read both the
//!   same way (`os.Getenv`).
//! * VERSION probe: the reference asks with `{"cniVersion":"1.0.0"}` (its newest version),
//!   we with `"1.1.0"` (ours).
//! * The cache entry: we also record `netns` (as libcni 1.2 and later do; 1.1.2 predates
//!   the field).
//! * Integers beyond 2^53 in a plugin's config: the reference decodes configs into Go
//!   `float64`s before injecting and sends a rounded number; we send the digits as written.
//! * A plugin answering in an older version than the config's: the reference hands its
//!   result to the next plugin as it came; we convert it to the config's version first.
//! * DEL with a plugin binary missing: the reference stops there, so the plugins before it
//!   never clean up; we DEL the others and report the missing one.
//! * DEL with a cached result that cannot be parsed: the reference fails without running a
//!   plugin; we DEL without `prevResult`.
//! * Validation: the reference checks the container ID and interface name only on ADD; we
//!   also refuse them on DEL and CHECK.
//!
//! Each runtime also CHECKs from the other's cache entry, so the cache format interoperates
//! both ways.
//!
//! Spec 1.1.0 cannot be compared directly: libcni 1.1.2 knows versions up to 1.0.0 and
//! rejects the 1.1.0 results (asserted). For 1.1.0 our run of the 1.1.0 list is compared
//! with the reference's run of the same list written as 1.0.0, with every `cniVersion`
//! value `"1.1.0"` on our side read as `"1.0.0"`. libcni 1.1.2 has no GC at all
//! (asserted against its source), so GC is tested against the spec alone.
//!
//! The reference needs `go` and the Debian sources; without them the tests are skipped
//! with a note, unless `CI` or `RKT_REQUIRE_REFERENCE=1` is set, when they fail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use cni::api::{CniConfig, RuntimeConf};
use cni::conf::NetworkConfigList;
use cni::invoke::{Exec, ExecError, RawExec};
use cni::types::Attachment;
use serde_json::{json, Map, Value};

/// Where Debian installs libcni's sources (GOPATH layout).
const GO_LIBCNI: &str = "/usr/share/gocode/src/github.com/containernetworking/cni";

/// The network name of every scenario.
const NET: &str = "conf-net";

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
}

/// The recording test plugin, built once per test process.
fn plugin_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "cni-test-plugin"])
            .status()
            .expect("running cargo build for cni-test-plugin");
        assert!(status.success(), "building cni-test-plugin failed");
        let bin = target_dir().join("debug/cni-test-plugin");
        assert!(bin.is_file(), "{} missing after build", bin.display());
        bin
    })
}

/// True when the environment says the reference must be available.
fn reference_required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var("RKT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1")
}

/// The reference driver, built once per test process; `None` (after a note on stderr) when
/// `go` or libcni's sources are missing and the reference is not required.
fn driver() -> Option<&'static Path> {
    static DRIVER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = DRIVER.get_or_init(|| {
        let have_go = Command::new("go")
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have_go {
            return Err("`go` is not installed (Debian package golang-go)".into());
        }
        if !Path::new(GO_LIBCNI).is_dir() {
            return Err(format!(
                "{GO_LIBCNI} is missing (Debian package golang-github-appc-cni-dev)"
            ));
        }
        let out_dir = target_dir().join("libcni-driver");
        std::fs::create_dir_all(&out_dir).expect("creating the driver's output dir");
        let out = out_dir.join("libcni-driver");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/libcni-driver/build.sh");
        let result = Command::new("sh")
            .arg(&script)
            .arg(&out)
            .output()
            .expect("running tools/libcni-driver/build.sh");
        // A toolchain that is present but cannot build the driver is a failure, never a skip.
        assert!(
            result.status.success(),
            "building the reference driver failed: {}",
            String::from_utf8_lossy(&result.stderr)
        );
        Ok(out)
    });
    match built {
        Ok(path) => Some(path),
        Err(why) if reference_required() => {
            panic!(
                "reference libcni unavailable but required (CI / RKT_REQUIRE_REFERENCE=1): {why}"
            )
        }
        Err(why) => {
            eprintln!("skipping reference conformance test: {why}");
            None
        }
    }
}

/// Runs plugins with [`RawExec`], adding the variable that tells the test plugin where to
/// log (the reference gets it from its inherited environment; the plugin leaves it out of
/// the environment it logs).
struct LoggingExec {
    log: PathBuf,
}

impl Exec for LoggingExec {
    fn exec_plugin(
        &self,
        plugin: &Path,
        stdin: &[u8],
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Vec<u8>, ExecError> {
        let mut env = env.to_vec();
        env.push((
            "CNI_TEST_PLUGIN_LOG".into(),
            self.log.to_string_lossy().into_owned(),
        ));
        RawExec.exec_plugin(plugin, stdin, &env, timeout)
    }
}

/// One logged plugin call.
#[derive(Debug, Clone)]
struct Call {
    plugin: String,
    command: String,
    env: Map<String, Value>,
    stdin: Value,
}

fn read_calls(log: &Path) -> Vec<Call> {
    let Ok(text) = std::fs::read_to_string(log) else {
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
                command: v["command"].as_str().unwrap().to_owned(),
                env: v["env"].as_object().unwrap().clone(),
                stdin: v["stdin"].clone(),
            }
        })
        .collect()
}

/// One runtime's private state: where its plugins log and where it caches.
struct Side {
    log: PathBuf,
    cache: PathBuf,
}

impl Side {
    fn calls(&self) -> Vec<Call> {
        read_calls(&self.log)
    }

    fn clear_log(&self) {
        let _ = std::fs::remove_file(&self.log);
    }

    fn cache_entry(&self, id: &str, ifname: &str) -> Option<Value> {
        let path = self.cache.join(format!("results/{NET}-{id}-{ifname}"));
        let bytes = std::fs::read(path).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }
}

/// A chain of recording plugins, a network list over it (ours, and the reference's copy of
/// it), the attachment's parameters, and one [`Side`] per runtime.
struct Scenario {
    _tmp: tempfile::TempDir,
    plugins: PathBuf,
    /// The list we run.
    conf: PathBuf,
    /// The list the reference runs: the same file, or its 1.0.0 copy for 1.1.0.
    ref_conf: PathBuf,
    version: &'static str,
    netns: PathBuf,
    id: String,
    ifname: String,
    args: Vec<(String, String)>,
    cap_args: Map<String, Value>,
    ours: Side,
    reference: Side,
}

/// The result the first plugin returns for ADD, in `version`'s format: two interfaces, an
/// IPv4 and an IPv6 address, routes and DNS, so every field goes through both runtimes'
/// parsing and re-encoding.
fn rich_result(version: &str, netns: &Path) -> Value {
    let mut v4 = json!({"address": "10.250.7.5/24", "gateway": "10.250.7.1", "interface": 1});
    let mut v6 = json!({"address": "fd00:7::5/64", "gateway": "fd00:7::1", "interface": 1});
    if version.starts_with("0.") {
        v4["version"] = json!("4");
        v6["version"] = json!("6");
    }
    json!({
        "cniVersion": version,
        "interfaces": [
            {"name": "veth0c0ffee", "mac": "9e:11:22:33:44:55"},
            {"name": "eth0", "mac": "c2:11:22:33:44:55", "sandbox": netns},
        ],
        "ips": [v4, v6],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.250.7.1"}, {"dst": "fd00:8::/64"}],
        "dns": {
            "nameservers": ["10.250.7.1"],
            "domain": "conf.example",
            "search": ["a.conf.example", "b.conf.example"],
            "options": ["ndots:2"],
        },
    })
}

/// Three plugins with unknown keys of every JSON type, nested objects, reserved keys the
/// runtime must pass through (`args`), declared, undeclared and disabled capabilities.
fn list_json(version: &str) -> Value {
    json!({
        "cniVersion": version,
        "name": NET,
        "listLevelUnknown": {"ignored": [1, 2, {"x": null}]},
        "plugins": [
            {
                "type": "rec-a",
                "capabilities": {"portMappings": true, "mac": true, "ips": false},
                "bridge": "cni-conf0",
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": "10.250.7.0/24", "gateway": "10.250.7.1"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": "/nonexistent/conformance"
                },
                "float": 1.5e3,
                "negative": -7,
                "fraction": 0.25,
                "nothing": null,
                "flag": false,
                "text": "zürich <&> \"quoted\" \\ \t",
                "emptyObject": {},
                "emptyList": []
            },
            {
                "type": "rec-b",
                "capabilities": {"bandwidth": true, "dns": true, "aliases": true},
                "args": {"cni": {"labels": [{"key": "app", "value": "web"}]}},
                "deep": {"a": {"b": {"c": [{"d": 1, "e": [true, false]}]}}}
            },
            {
                "type": "rec-c",
                "mtu": 1400,
                "capabilities": {"cgroupPath": false}
            }
        ]
    })
}

fn cap_args() -> Map<String, Value> {
    let v = json!({
        "portMappings": [
            {"hostPort": 18080, "containerPort": 80, "protocol": "tcp", "hostIP": "127.0.0.1"},
            {"hostPort": 18443, "containerPort": 443, "protocol": "udp"}
        ],
        "mac": "c2:11:22:33:44:55",
        "ips": ["10.250.7.5/24"],
        "bandwidth": {"ingressRate": 1000, "ingressBurst": 2000, "egressRate": 3000, "egressBurst": 4000},
        "dns": {"servers": ["10.250.7.1"], "searches": ["conf.example"], "options": ["ndots:2"]},
        "aliases": {NET: ["web", "www"]},
        "cgroupPath": "/kubepods/pod-1",
        "infinibandGUID": "c2:11:22:33:44:55:66:77"
    });
    v.as_object().unwrap().clone()
}

fn cni_args() -> Vec<(String, String)> {
    [
        ("IgnoreUnknown", "1"),
        ("K8S_POD_NAMESPACE", "default"),
        ("K8S_POD_NAME", "web-0"),
        ("IP", "10.250.7.5"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl Scenario {
    fn new(version: &'static str, list: Value) -> Scenario {
        Scenario::with_file(version, list, "net.conflist")
    }

    /// Like [`Scenario::new`], the list written to `file_name` (`.conf` for a single plugin).
    fn with_file(version: &'static str, list: Value, file_name: &str) -> Scenario {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let plugins = root.join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        let netns = root.join("netns");
        std::fs::write(&netns, b"").unwrap();

        for name in ["rec-a", "rec-b", "rec-c"] {
            std::os::unix::fs::symlink(plugin_binary(), plugins.join(name)).unwrap();
        }
        // The first plugin answers ADD with a rich result; the others pass prevResult on.
        let script = json!({"ADD": {"result": rich_result(version, &netns)}});
        std::fs::write(plugins.join("rec-a.script"), script.to_string()).unwrap();

        let conf = root.join(file_name);
        std::fs::write(&conf, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
        let ref_conf = if version == "1.1.0" {
            let mut copy = list.clone();
            copy["cniVersion"] = json!("1.0.0");
            let path = root.join("net-1.0.0.conflist");
            std::fs::write(&path, serde_json::to_vec_pretty(&copy).unwrap()).unwrap();
            // The reference's rec-a must answer in the version it is asked for.
            let script = json!({"ADD": {"result": rich_result("1.0.0", &netns)}});
            let ref_plugins = root.join("ref-plugins");
            std::fs::create_dir(&ref_plugins).unwrap();
            for name in ["rec-a", "rec-b", "rec-c"] {
                std::os::unix::fs::symlink(plugin_binary(), ref_plugins.join(name)).unwrap();
            }
            std::fs::write(ref_plugins.join("rec-a.script"), script.to_string()).unwrap();
            path
        } else {
            conf.clone()
        };

        Scenario {
            plugins,
            conf,
            ref_conf,
            version,
            id: format!("conf-{}", version.replace('.', "")),
            ifname: "eth0".into(),
            args: cni_args(),
            cap_args: cap_args(),
            ours: Side {
                log: root.join("ours.jsonl"),
                cache: root.join("ours-cache"),
            },
            reference: Side {
                log: root.join("ref.jsonl"),
                cache: root.join("ref-cache"),
            },
            netns,
            _tmp: tmp,
        }
    }

    /// The plugin dir the reference uses: ours, except for 1.1.0 (see [`Scenario::new`]).
    fn ref_plugins(&self) -> PathBuf {
        if self.version == "1.1.0" {
            self.plugins.with_file_name("ref-plugins")
        } else {
            self.plugins.clone()
        }
    }

    /// Replaces the script of one plugin, for both runtimes.
    fn script(&self, plugin: &str, script: Value) {
        for dir in [self.plugins.clone(), self.ref_plugins()] {
            std::fs::write(dir.join(format!("{plugin}.script")), script.to_string()).unwrap();
        }
    }

    fn list(&self) -> NetworkConfigList {
        cni::conf::load_file(&self.conf).unwrap()
    }

    fn cni(&self) -> CniConfig {
        CniConfig::new(vec![self.plugins.clone()], self.ours.cache.clone()).with_exec(Arc::new(
            LoggingExec {
                log: self.ours.log.clone(),
            },
        ))
    }

    fn rt(&self) -> RuntimeConf {
        RuntimeConf {
            container_id: self.id.clone(),
            netns: Some(self.netns.clone()),
            ifname: self.ifname.clone(),
            args: self.args.clone(),
            capability_args: self.cap_args.clone(),
            cache_dir: None,
        }
    }

    /// Runs the reference driver on `conf` with its own cache; its stdout, or its stderr as
    /// the error.
    fn reference(&self, command: &str, conf: &Path) -> Result<String, String> {
        self.reference_in(command, conf, &self.reference.cache)
    }

    /// Runs the reference driver on `conf` with the cache in `cache`.
    fn reference_in(&self, command: &str, conf: &Path, cache: &Path) -> Result<String, String> {
        let driver = driver().expect("callers check driver() first");
        let args = self
            .args
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";");
        let out = Command::new(driver)
            .arg("-conf")
            .arg(conf)
            .args(["-id", &self.id])
            .arg("-netns")
            .arg(&self.netns)
            .args(["-ifname", &self.ifname])
            .arg("-cache")
            .arg(cache)
            .args(["-args", &args])
            .args([
                "-capargs",
                &Value::Object(self.cap_args.clone()).to_string(),
            ])
            .arg(command)
            .env("CNI_PATH", self.ref_plugins())
            .env("CNI_TEST_PLUGIN_LOG", &self.reference.log)
            .output()
            .expect("running the reference driver");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// Every `"cniVersion": "1.1.0"` in `v` read as `"1.0.0"` (the 1.1.0 exception).
fn as_100(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "cniVersion" && x == "1.1.0" {
                    *x = json!("1.0.0");
                } else {
                    as_100(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(as_100),
        _ => {}
    }
}

/// The differences between `ours` and `reference`, one line each, numbers compared by
/// value (Go re-encodes `1.5e3` as `1500`).
fn diff(path: &str, ours: &Value, reference: &Value, out: &mut Vec<String>) {
    match (ours, reference) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, x) in a {
                match b.get(k) {
                    Some(y) => diff(&format!("{path}.{k}"), x, y, out),
                    None => out.push(format!("{path}.{k}: only ours has it: {x}")),
                }
            }
            for (k, y) in b {
                if !a.contains_key(k) {
                    out.push(format!("{path}.{k}: only the reference has it: {y}"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        (a, b) => out.push(format!("{path}: ours {a}, reference {b}")),
    }
}

fn assert_same(what: &str, ours: &Value, reference: &Value) {
    let mut out = Vec::new();
    diff(what, ours, reference, &mut out);
    assert!(
        out.is_empty(),
        "{what} differs from the reference:\n  {}\nours: {ours:#}\nreference: {reference:#}",
        out.join("\n  ")
    );
}

/// The environment as a comparable object, after the empty-variable exception: variables the
/// reference sets to "" must be absent on our side, and are then dropped from both.
fn normalized_env(ours: &Map<String, Value>, reference: &Map<String, Value>) -> (Value, Value) {
    let mut reference = reference.clone();
    let empty: Vec<String> = reference
        .iter()
        .filter(|(_, v)| *v == "")
        .map(|(k, _)| k.clone())
        .collect();
    for k in empty {
        assert!(
            !ours.contains_key(&k),
            "reference set {k}=\"\"; ours must leave it unset, not {:?}",
            ours.get(&k)
        );
        reference.remove(&k);
    }
    (Value::Object(ours.clone()), Value::Object(reference))
}

/// Compares the calls of one operation, plugin by plugin, with the spec's exceptions.
fn assert_same_calls(s: &Scenario, op: &str, ours: &[Call], reference: &[Call]) {
    let names = |calls: &[Call]| {
        calls
            .iter()
            .map(|c| format!("{} {}", c.plugin, c.command))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(ours),
        names(reference),
        "{op}: plugins called differ (ours, reference)"
    );
    let list = s.list();
    for (i, (o, r)) in ours.iter().zip(reference).enumerate() {
        let what = format!("{op} call {i} ({} {})", o.plugin, o.command);

        let (oe, re) = normalized_env(&o.env, &r.env);
        let mut oe = oe;
        if s.version == "1.1.0" {
            // The reference runs from its own plugin dir (see Scenario::new).
            oe["CNI_PATH"] = json!(s.ref_plugins());
            assert_eq!(o.env["CNI_PATH"], json!(s.plugins), "{what}: CNI_PATH");
        }
        assert_same(&format!("{what} env"), &oe, &re);

        // `capabilities`: forwarded by the reference exactly as written, never by us.
        let plugin = list
            .plugins
            .iter()
            .find(|p| p.plugin_type == o.plugin)
            .unwrap();
        let mut r_stdin = r.stdin.clone();
        let r_caps = r_stdin.as_object_mut().unwrap().remove("capabilities");
        assert_eq!(
            r_caps,
            plugin.raw.get("capabilities").cloned(),
            "{what}: the reference forwards capabilities as written"
        );
        assert!(
            o.stdin.get("capabilities").is_none(),
            "{what}: we must not forward capabilities: {}",
            o.stdin
        );
        let mut o_stdin = o.stdin.clone();
        as_100(&mut o_stdin);
        assert_same(&format!("{what} stdin"), &o_stdin, &r_stdin);
    }
}

/// Compares the two cache entries: the same fields with the same values, kind cniCacheV1,
/// and our extra `netns`.
fn assert_same_cache_entry(s: &Scenario, ours: &Value, reference: &Value) {
    assert_eq!(ours["kind"], "cniCacheV1");
    assert_eq!(reference["kind"], "cniCacheV1");
    let mut ours = ours.clone();
    let mut reference = reference.clone();
    assert_eq!(
        ours.as_object_mut().unwrap().remove("netns"),
        Some(json!(s.netns)),
        "our cache entry records the netns"
    );
    let config = |v: &mut Value| -> Value {
        let b64 = v["config"].as_str().unwrap().to_owned();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let mut our_config = config(&mut ours);
    let ref_config = config(&mut reference);
    if s.version != "1.1.0" {
        // The same file: byte for byte.
        assert_eq!(ours["config"], reference["config"], "cached config bytes");
    }
    as_100(&mut our_config);
    assert_same("cache config", &our_config, &ref_config);
    ours["config"] = Value::Null;
    reference["config"] = Value::Null;
    as_100(&mut ours);
    assert_same("cache entry", &ours, &reference);
}

/// ADD, CHECK and DEL through both runtimes, compared call by call.
fn conformance(version: &'static str) {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new(version, list_json(version));
    let list = s.list();
    let cni = s.cni();
    let rt = s.rt();

    if version == "1.1.0" {
        let err = s.reference("add", &s.conf).unwrap_err();
        assert!(
            err.contains("unsupported CNI result version \"1.1.0\""),
            "libcni 1.1.2 is expected to reject 1.1.0 results: {err}"
        );
        s.reference.clear_log();
        std::fs::remove_dir_all(&s.reference.cache).ok();
        // That failed ADD still owes a DEL; the reference has no cached result for it.
        s.reference("del", &s.conf).unwrap();
        s.reference.clear_log();
    }

    // ADD
    let ref_result: Value = serde_json::from_str(&s.reference("add", &s.ref_conf).unwrap())
        .expect("the driver prints the result");
    let our_result = cni.add_network_list(&list, &rt).unwrap();
    let mut our_result = our_result.to_value();
    as_100(&mut our_result);
    assert_same("ADD result", &our_result, &ref_result);
    assert_eq!(
        ref_result["ips"].as_array().map(Vec::len),
        Some(2),
        "the rich result went through: {ref_result}"
    );
    assert_same_calls(&s, "ADD", &s.ours.calls(), &s.reference.calls());
    assert_eq!(s.ours.calls().len(), 3);
    let ours_entry = s
        .ours
        .cache_entry(&s.id, &s.ifname)
        .expect("our cache entry");
    let ref_entry = s
        .reference
        .cache_entry(&s.id, &s.ifname)
        .expect("the reference's cache entry");
    assert_same_cache_entry(&s, &ours_entry, &ref_entry);
    s.ours.clear_log();
    s.reference.clear_log();

    // CHECK: both refuse below 0.4.0 without running anything.
    let ref_check = s.reference("check", &s.ref_conf);
    let our_check = cni.check_network_list(&list, &rt);
    if version == "0.3.1" {
        assert!(ref_check.is_err() && our_check.is_err());
        assert!(s.ours.calls().is_empty() && s.reference.calls().is_empty());
    } else {
        ref_check.unwrap();
        our_check.unwrap();
        assert_eq!(s.ours.calls().len(), 3);
        assert_same_calls(&s, "CHECK", &s.ours.calls(), &s.reference.calls());
    }
    s.ours.clear_log();
    s.reference.clear_log();

    // Each runtime reads the other's cache entry: the reference CHECKs from ours, we CHECK
    // from the reference's, and the plugins see the same requests as above. (Not at 1.1.0,
    // whose cached result the reference cannot parse.)
    if version != "0.3.1" && version != "1.1.0" {
        s.reference_in("check", &s.ref_conf, &s.ours.cache).unwrap();
        let theirs_cache = CniConfig::new(vec![s.plugins.clone()], s.reference.cache.clone())
            .with_exec(Arc::new(LoggingExec {
                log: s.ours.log.clone(),
            }));
        theirs_cache.check_network_list(&list, &rt).unwrap();
        assert_eq!(s.ours.calls().len(), 3);
        assert_same_calls(
            &s,
            "CHECK across caches",
            &s.ours.calls(),
            &s.reference.calls(),
        );
        assert_eq!(
            s.ours.calls()[0].stdin["prevResult"],
            ref_result,
            "prevResult read from the reference's cache"
        );
        s.ours.clear_log();
        s.reference.clear_log();
    }

    // DEL, in reverse, with the cached result from 0.4.0 on; both remove the entry.
    s.reference("del", &s.ref_conf).unwrap();
    cni.del_network_list(&list, &rt).unwrap();
    let ours = s.ours.calls();
    assert_eq!(
        ours.iter().map(|c| c.plugin.as_str()).collect::<Vec<_>>(),
        ["rec-c", "rec-b", "rec-a"]
    );
    assert_eq!(
        ours[0].stdin.get("prevResult").is_some(),
        version != "0.3.1",
        "DEL gets prevResult from 0.4.0 on"
    );
    assert_same_calls(&s, "DEL", &ours, &s.reference.calls());
    assert!(s.ours.cache_entry(&s.id, &s.ifname).is_none());
    assert!(s.reference.cache_entry(&s.id, &s.ifname).is_none());
    s.ours.clear_log();
    s.reference.clear_log();

    // A second DEL (no cache entry now) is fine for both, and identical.
    s.reference("del", &s.ref_conf).unwrap();
    cni.del_network_list(&list, &rt).unwrap();
    assert_eq!(s.ours.calls().len(), 3);
    assert!(s.ours.calls()[0].stdin.get("prevResult").is_none());
    assert_same_calls(&s, "second DEL", &s.ours.calls(), &s.reference.calls());
}

#[test]
fn conformance_0_3_1_add_check_del() {
    conformance("0.3.1");
}

#[test]
fn conformance_0_4_0_add_check_del() {
    conformance("0.4.0");
}

#[test]
fn conformance_1_0_0_add_check_del() {
    conformance("1.0.0");
}

/// 1.1.0: the reference cannot run it (asserted in `conformance`); our run is compared with
/// the reference's run of the same list at 1.0.0.
#[test]
fn conformance_1_1_0_add_check_del_against_the_reference_at_1_0_0() {
    conformance("1.1.0");
}

/// Without any CNI_ARGS the reference sends `CNI_ARGS=""`, we send none (the empty-variable
/// exception); everything else is identical.
#[test]
fn conformance_without_args_or_capability_args() {
    if driver().is_none() {
        return;
    }
    let mut s = Scenario::new("1.0.0", list_json("1.0.0"));
    s.args.clear();
    s.cap_args.clear();
    let list = s.list();
    s.reference("add", &s.conf).unwrap();
    s.cni().add_network_list(&list, &s.rt()).unwrap();
    let (ours, reference) = (s.ours.calls(), s.reference.calls());
    assert_eq!(reference[0].env.get("CNI_ARGS"), Some(&json!("")));
    assert_eq!(ours[0].env.get("CNI_ARGS"), None);
    for c in &ours {
        assert!(c.stdin.get("runtimeConfig").is_none(), "{}", c.stdin);
    }
    assert_same_calls(&s, "ADD", &ours, &reference);
    let ours_entry = s.ours.cache_entry(&s.id, &s.ifname).unwrap();
    assert!(ours_entry.get("cniArgs").is_none() && ours_entry.get("capabilityArgs").is_none());
    assert_same_cache_entry(
        &s,
        &ours_entry,
        &s.reference.cache_entry(&s.id, &s.ifname).unwrap(),
    );
}

/// VERSION (validate): the same plugins asked, with the same variables apart from the
/// empty-variable exception; the probe's version is each runtime's newest. Both report the
/// same declared capabilities.
#[test]
fn conformance_validate_asks_every_plugin_the_same_way() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    let ref_caps = s.reference("validate", &s.conf).unwrap();
    let mut ref_caps: Vec<&str> = ref_caps.trim().split(',').collect();
    ref_caps.sort();
    let our_caps = s.cni().validate_network_list(&s.list()).unwrap();
    assert_eq!(our_caps, ref_caps);
    assert_eq!(
        our_caps,
        ["aliases", "bandwidth", "dns", "mac", "portMappings"]
    );

    let (ours, reference) = (s.ours.calls(), s.reference.calls());
    assert_eq!(ours.len(), 3);
    assert_eq!(ours.len(), reference.len());
    for (o, r) in ours.iter().zip(&reference) {
        assert_eq!((&o.plugin, &o.command), (&r.plugin, &r.command));
        assert_eq!(o.command, "VERSION");
        let (oe, re) = normalized_env(&o.env, &r.env);
        assert_same("VERSION env", &oe, &re);
        assert_eq!(r.stdin, json!({"cniVersion": "1.0.0"}));
        assert_eq!(o.stdin, json!({"cniVersion": "1.1.0"}));
    }
}

/// An integer beyond 2^53 in a plugin's config: the reference rounds it through float64,
/// we pass it on as written (the spec: unknown fields pass through unchanged).
#[test]
fn conformance_large_integers_reach_plugins_unchanged_unlike_the_reference() {
    if driver().is_none() {
        return;
    }
    let mut list = list_json("1.0.0");
    list["plugins"][2]["big"] = json!(9_007_199_254_740_993u64);
    let s = Scenario::new("1.0.0", list);
    s.reference("add", &s.conf).unwrap();
    s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
    let raw = |log: &Path| {
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .nth(2)
            .unwrap()
            .to_owned()
    };
    let (ours, reference) = (raw(&s.ours.log), raw(&s.reference.log));
    assert!(ours.contains("\"big\":9007199254740993"), "{ours}");
    assert!(
        reference.contains("\"big\":9007199254740992"),
        "{reference}"
    );
}

/// GC at 1.1.0 (libcni 1.1.2 has no GC, so this follows the spec alone): the stale cached
/// attachment gets a full DEL with what its ADD cached (netns, args, capability args,
/// result), the live one is left alone, and every plugin's GC gets the valid attachments
/// under both `cni.dev/valid-attachments` and `cni.dev/attachments`, with only
/// `CNI_COMMAND` and `CNI_PATH`.
#[test]
fn gc_1_1_0_dels_the_stale_attachment_and_sends_both_attachment_keys() {
    if Path::new(GO_LIBCNI).is_dir() {
        let api = std::fs::read_to_string(Path::new(GO_LIBCNI).join("libcni/api.go")).unwrap();
        assert!(
            !api.contains("GCNetworkList"),
            "the reference now has GC: compare against it"
        );
    }
    let s = Scenario::new("1.1.0", list_json("1.1.0"));
    let list = s.list();
    let cni = s.cni();

    let live = s.rt();
    let stale_netns = s.netns.with_file_name("stale-netns");
    std::fs::write(&stale_netns, b"").unwrap();
    let stale = RuntimeConf {
        container_id: "conf-stale".into(),
        netns: Some(stale_netns.clone()),
        ifname: "net1".into(),
        args: vec![("K8S_POD_NAME".into(), "stale-0".into())],
        capability_args: json!({"mac": "c2:00:00:00:00:09", "dns": {"servers": ["10.250.7.9"]}})
            .as_object()
            .unwrap()
            .clone(),
        cache_dir: None,
    };
    cni.add_network_list(&list, &live).unwrap();
    let stale_result = cni.add_network_list(&list, &stale).unwrap().to_value();
    s.ours.clear_log();

    cni.gc_network_list(&list, &[live.attachment()]).unwrap();

    let calls = s.ours.calls();
    let seq: Vec<String> = calls
        .iter()
        .map(|c| format!("{} {}", c.plugin, c.command))
        .collect();
    assert_eq!(
        seq,
        [
            "rec-c DEL",
            "rec-b DEL",
            "rec-a DEL",
            "rec-a GC",
            "rec-b GC",
            "rec-c GC"
        ]
    );
    let path = s.plugins.to_string_lossy().into_owned();
    for del in &calls[..3] {
        let env: BTreeMap<&str, &str> = del
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap()))
            .collect();
        assert_eq!(
            env,
            BTreeMap::from([
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", "conf-stale"),
                ("CNI_NETNS", stale_netns.to_str().unwrap()),
                ("CNI_IFNAME", "net1"),
                ("CNI_ARGS", "K8S_POD_NAME=stale-0"),
                ("CNI_PATH", path.as_str()),
            ])
        );
        assert_eq!(del.stdin["prevResult"], stale_result);
        assert_eq!(del.stdin["cniVersion"], "1.1.0");
        assert!(del.stdin.get("capabilities").is_none());
    }
    assert_eq!(
        calls[1].stdin["runtimeConfig"],
        json!({"dns": {"servers": ["10.250.7.9"]}}),
        "rec-b declares dns"
    );
    assert_eq!(
        calls[2].stdin["runtimeConfig"],
        json!({"mac": "c2:00:00:00:00:09"}),
        "rec-a declares mac"
    );
    let valid = json!([{"containerID": live.container_id, "ifname": "eth0"}]);
    assert_eq!(
        serde_json::to_value([Attachment {
            container_id: live.container_id.clone(),
            ifname: live.ifname.clone()
        }])
        .unwrap(),
        valid
    );
    for gc in &calls[3..] {
        assert_eq!(
            gc.env,
            *json!({"CNI_COMMAND": "GC", "CNI_PATH": path})
                .as_object()
                .unwrap()
        );
        assert_eq!(gc.stdin["cni.dev/valid-attachments"], valid);
        assert_eq!(gc.stdin["cni.dev/attachments"], valid);
        assert_eq!(gc.stdin["name"], NET);
        assert_eq!(gc.stdin["cniVersion"], "1.1.0");
        for absent in ["prevResult", "runtimeConfig", "capabilities"] {
            assert!(gc.stdin.get(absent).is_none(), "{absent} in {}", gc.stdin);
        }
    }
    assert_eq!(
        calls[4].stdin["deep"],
        list_json("1.1.0")["plugins"][1]["deep"]
    );

    assert!(s.ours.cache_entry("conf-stale", "net1").is_none());
    assert!(s.ours.cache_entry(&live.container_id, "eth0").is_some());
}

/// A plugin result without `cniVersion` (it gets the config's) and with fields no version
/// defines: both runtimes parse, pass on, return and cache it alike.
#[test]
fn conformance_results_without_version_and_with_unknown_fields() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    let mut result = rich_result("1.0.0", &s.netns);
    result.as_object_mut().unwrap().remove("cniVersion");
    result["extraTop"] = json!({"x": 1});
    result["interfaces"][0]["extraInterfaceField"] = json!(2);
    result["ips"][0]["extraIpField"] = json!(3);
    s.script("rec-a", json!({"ADD": {"result": result}}));

    let ref_result: Value = serde_json::from_str(&s.reference("add", &s.conf).unwrap()).unwrap();
    let ours = s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
    assert_same("ADD result", &ours.to_value(), &ref_result);
    assert_eq!(ref_result["cniVersion"], "1.0.0");
    assert_same_calls(&s, "ADD", &s.ours.calls(), &s.reference.calls());
    assert_same_cache_entry(
        &s,
        &s.ours.cache_entry(&s.id, &s.ifname).unwrap(),
        &s.reference.cache_entry(&s.id, &s.ifname).unwrap(),
    );
}

/// A plugin in the middle of a 1.0.0 chain answers in 0.4.0. The reference hands that
/// result on as it came (in 0.4.0, with `version` keys); we convert it to the config's
/// version first, as both runtimes do for cached results on CHECK and DEL. Nothing else
/// differs.
#[test]
fn conformance_prev_result_in_an_older_version_is_converted_unlike_the_reference() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    s.script(
        "rec-b",
        json!({"ADD": {"result": rich_result("0.4.0", &s.netns)}}),
    );
    let ref_result: Value = serde_json::from_str(&s.reference("add", &s.conf).unwrap()).unwrap();
    let ours = s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
    assert_same("ADD result", &ours.to_value(), &ref_result);

    let (ours, reference) = (s.ours.calls(), s.reference.calls());
    assert_eq!(ours.len(), 3);
    let mut differences = Vec::new();
    for (o, r) in ours.iter().zip(&reference) {
        let mut r_stdin = r.stdin.clone();
        r_stdin.as_object_mut().unwrap().remove("capabilities");
        diff(&o.plugin, &o.stdin, &r_stdin, &mut differences);
    }
    assert_eq!(
        differences,
        [
            r#"rec-c.prevResult.cniVersion: ours "1.0.0", reference "0.4.0""#,
            r#"rec-c.prevResult.ips[0].version: only the reference has it: "4""#,
            r#"rec-c.prevResult.ips[1].version: only the reference has it: "6""#,
        ]
    );
}

/// A single-plugin `.conf` (upgraded to a one-plugin list by both): the same calls and
/// result.
#[test]
fn conformance_single_plugin_conf_file() {
    if driver().is_none() {
        return;
    }
    let s = single_conf_scenario();
    let ref_result: Value = serde_json::from_str(&s.reference("add", &s.conf).unwrap()).unwrap();
    let ours = s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
    assert_same("ADD result", &ours.to_value(), &ref_result);
    assert_same_calls(&s, "ADD", &s.ours.calls(), &s.reference.calls());
    s.ours.clear_log();
    s.reference.clear_log();
    s.reference("del", &s.conf).unwrap();
    s.cni().del_network_list(&s.list(), &s.rt()).unwrap();
    assert_same_calls(&s, "DEL", &s.ours.calls(), &s.reference.calls());
}

/// The cache entry of a network from a single-plugin `.conf`: libcni caches the upgraded
/// list (`{"cniVersion","name","plugins":[...]}`), and runtimes that tear down from the cache
/// (CRI-O's ocicni) parse it with `ConfListFromBytes`. The reference reads our entry that way,
/// and its config equals the reference's.
#[test]
fn conformance_single_plugin_conf_cache_entry_is_a_list_the_reference_can_read() {
    if driver().is_none() {
        return;
    }
    let s = single_conf_scenario();
    s.reference("add", &s.conf).unwrap();
    s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
    let config = |entry: Value| -> Value {
        let b64 = entry["config"].as_str().unwrap().to_owned();
        serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap()
    };
    let ref_config = config(s.reference.cache_entry(&s.id, &s.ifname).unwrap());
    assert_eq!(ref_config["plugins"].as_array().map(Vec::len), Some(1));
    let read = s.reference_in("cachedconf", &s.conf, &s.ours.cache);
    assert_eq!(
        read,
        Ok(format!("{NET} 1\n")),
        "the reference reads our entry"
    );
    let our_config = config(s.ours.cache_entry(&s.id, &s.ifname).unwrap());
    assert_same("cached config", &our_config, &ref_config);
}

fn single_conf_scenario() -> Scenario {
    let mut single = list_json("0.4.0")["plugins"][0].clone();
    single["cniVersion"] = json!("0.4.0");
    single["name"] = json!(NET);
    Scenario::with_file("0.4.0", single, "net.conf")
}

/// A failed ADD (the second plugin errors) and the DEL the spec then requires: both
/// runtimes stop the ADD at the failure, cache nothing, and DEL every plugin, the failed one
/// included, without `prevResult`.
#[test]
fn conformance_failed_add_then_del() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    s.script(
        "rec-b",
        json!({"ADD": {"error": {"code": 7, "msg": "boom", "details": "scripted"}}}),
    );
    let list = s.list();
    let err = s.reference("add", &s.conf).unwrap_err();
    assert!(err.contains("boom"), "{err}");
    let ours = s.cni().add_network_list(&list, &s.rt()).unwrap_err();
    assert!(
        matches!(&ours, cni::error::Error::Plugin { code: 7, msg, .. } if msg == "boom"),
        "{ours}"
    );
    assert_same_calls(&s, "failed ADD", &s.ours.calls(), &s.reference.calls());
    assert_eq!(s.ours.calls().len(), 2);
    assert!(s.ours.cache_entry(&s.id, &s.ifname).is_none());
    assert!(s.reference.cache_entry(&s.id, &s.ifname).is_none());
    s.ours.clear_log();
    s.reference.clear_log();

    s.reference("del", &s.conf).unwrap();
    s.cni().del_network_list(&list, &s.rt()).unwrap();
    assert_eq!(s.ours.calls().len(), 3);
    assert_same_calls(
        &s,
        "DEL after failed ADD",
        &s.ours.calls(),
        &s.reference.calls(),
    );
}

/// The config changes version between ADD and DEL or CHECK (the spec says it should not, but
/// runtimes meet it after upgrades): both runtimes convert the cached result to the new
/// version, up (0.4.0 to 1.0.0) and down (1.0.0 to 0.4.0), identically.
#[test]
fn conformance_cached_result_converted_to_a_changed_config_version() {
    if driver().is_none() {
        return;
    }
    for (added, later, command) in [("0.4.0", "1.0.0", "del"), ("1.0.0", "0.4.0", "check")] {
        let s = Scenario::new(added, list_json(added));
        s.reference("add", &s.conf).unwrap();
        s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
        s.ours.clear_log();
        s.reference.clear_log();

        let changed = s.conf.with_file_name(format!("net-{later}.conflist"));
        std::fs::write(&changed, list_json(later).to_string()).unwrap();
        let changed_list = cni::conf::load_file(&changed).unwrap();
        s.reference(command, &changed).unwrap();
        if command == "del" {
            s.cni().del_network_list(&changed_list, &s.rt()).unwrap();
        } else {
            s.cni().check_network_list(&changed_list, &s.rt()).unwrap();
        }
        let ours = s.ours.calls();
        assert_eq!(ours.len(), 3);
        assert_eq!(ours[0].stdin["prevResult"]["cniVersion"], later);
        assert_same_calls(
            &s,
            &format!("{command} at {later} after ADD at {added}"),
            &ours,
            &s.reference.calls(),
        );
    }
}

/// DEL when a plugin's binary is gone: the reference stops at the missing plugin, so the
/// plugins before it never clean up; we report it but still DEL the others (the library's
/// documented choice). Both keep the cache entry.
#[test]
fn conformance_del_with_a_missing_plugin_goes_on_unlike_the_reference() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    let list = s.list();
    s.reference("add", &s.conf).unwrap();
    s.cni().add_network_list(&list, &s.rt()).unwrap();
    s.ours.clear_log();
    s.reference.clear_log();
    std::fs::remove_file(s.plugins.join("rec-b")).unwrap();

    let err = s.reference("del", &s.conf).unwrap_err();
    assert!(err.contains("rec-b"), "{err}");
    let ours = s.cni().del_network_list(&list, &s.rt()).unwrap_err();
    assert!(
        matches!(ours, cni::error::Error::PluginNotFound { .. }),
        "{ours}"
    );
    let names = |calls: Vec<Call>| {
        calls
            .into_iter()
            .map(|c| format!("{} {}", c.plugin, c.command))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(s.reference.calls()), ["rec-c DEL"]);
    assert_eq!(names(s.ours.calls()), ["rec-c DEL", "rec-a DEL"]);
    assert_same_calls(&s, "DEL", &s.ours.calls()[..1], &s.reference.calls());
    assert!(s.ours.cache_entry(&s.id, &s.ifname).is_some());
    assert!(s.reference.cache_entry(&s.id, &s.ifname).is_some());
}

/// DEL when the cached result cannot be used (a version no one knows): the reference fails
/// the DEL without running any plugin, leaving the attachment in place; we DEL without
/// `prevResult` and remove the entry.
#[test]
fn conformance_del_with_an_unusable_cached_result_goes_on_unlike_the_reference() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    let list = s.list();
    let entry = json!({
        "kind": "cniCacheV1",
        "containerId": s.id,
        "config": base64::engine::general_purpose::STANDARD.encode(std::fs::read(&s.conf).unwrap()),
        "ifName": s.ifname,
        "networkName": NET,
        "result": {"cniVersion": "9.9.9", "ips": []},
    });
    for side in [&s.ours, &s.reference] {
        std::fs::create_dir_all(side.cache.join("results")).unwrap();
        std::fs::write(
            side.cache
                .join(format!("results/{NET}-{}-{}", s.id, s.ifname)),
            entry.to_string(),
        )
        .unwrap();
    }
    let err = s.reference("del", &s.conf).unwrap_err();
    assert!(err.contains("9.9.9"), "{err}");
    assert!(s.reference.calls().is_empty());
    assert!(s.reference.cache_entry(&s.id, &s.ifname).is_some());

    s.cni().del_network_list(&list, &s.rt()).unwrap();
    let ours = s.ours.calls();
    assert_eq!(ours.len(), 3);
    assert!(ours.iter().all(|c| c.stdin.get("prevResult").is_none()));
    assert!(s.ours.cache_entry(&s.id, &s.ifname).is_none());
}

/// ADD with an invalid container ID or interface name: both runtimes refuse before running
/// any plugin. (An invalid network name never gets that far with us: loading rejects it.)
#[test]
fn conformance_invalid_attachment_names_run_no_plugin() {
    if driver().is_none() {
        return;
    }
    let mut s = Scenario::new("1.0.0", list_json("1.0.0"));
    let list = s.list();
    let bad_ids = ["", "-leading-dash", "has space", "a/b", "semi;colon"];
    let bad_ifnames = ["", ".", "..", "a/b", "a:b", "a b", "sixteen-chars-xx"];
    let cases = bad_ids
        .iter()
        .map(|id| (*id, "eth0"))
        .chain(bad_ifnames.iter().map(|i| ("conf-valid", *i)));
    for (id, ifname) in cases {
        s.id = id.into();
        s.ifname = ifname.into();
        let reference = s.reference("add", &s.conf);
        let ours = s.cni().add_network_list(&list, &s.rt());
        assert!(
            reference.is_err() && ours.is_err(),
            "id {id:?} ifname {ifname:?}: reference {reference:?}, ours {ours:?}"
        );
        assert!(s.reference.calls().is_empty(), "reference ran plugins");
        assert!(s.ours.calls().is_empty(), "we ran plugins");
    }

    let mut bad_name = list_json("1.0.0");
    bad_name["name"] = json!("bad name");
    let path = s.conf.with_file_name("bad.conflist");
    std::fs::write(&path, bad_name.to_string()).unwrap();
    assert!(s.reference("add", &path).is_err());
    assert!(s.reference.calls().is_empty());
    assert!(cni::conf::load_file(&path).is_err());
}

/// DEL and CHECK with a container ID ADD would refuse: the reference validates only on ADD
/// and runs the plugins; we refuse on every operation.
#[test]
fn conformance_del_validates_names_unlike_the_reference() {
    if driver().is_none() {
        return;
    }
    let mut s = Scenario::new("1.0.0", list_json("1.0.0"));
    s.id = "has space".into();
    s.reference("del", &s.conf).unwrap();
    assert_eq!(s.reference.calls().len(), 3);
    assert!(s.cni().del_network_list(&s.list(), &s.rt()).is_err());
    assert!(s.ours.calls().is_empty());
}

/// `disableCheck`: both runtimes answer CHECK with success and run nothing.
#[test]
fn conformance_disable_check() {
    if driver().is_none() {
        return;
    }
    let mut list = list_json("1.0.0");
    list["disableCheck"] = json!(true);
    let s = Scenario::new("1.0.0", list);
    s.reference("add", &s.conf).unwrap();
    s.cni().add_network_list(&s.list(), &s.rt()).unwrap();
    s.ours.clear_log();
    s.reference.clear_log();
    s.reference("check", &s.conf).unwrap();
    s.cni().check_network_list(&s.list(), &s.rt()).unwrap();
    assert!(s.reference.calls().is_empty());
    assert!(s.ours.calls().is_empty());
}

/// The DEL our GC synthesizes for a stale attachment is the DEL libcni sends for it: at
/// 1.0.0 (no plugin GC yet), GC with no valid attachments makes the same plugin calls as the
/// reference's DEL of that attachment, with the same cached result.
#[test]
fn conformance_gc_stale_del_is_the_reference_del() {
    if driver().is_none() {
        return;
    }
    let s = Scenario::new("1.0.0", list_json("1.0.0"));
    let list = s.list();
    s.cni().add_network_list(&list, &s.rt()).unwrap();
    let entry = format!("results/{NET}-{}-{}", s.id, s.ifname);
    std::fs::create_dir_all(s.reference.cache.join("results")).unwrap();
    std::fs::copy(s.ours.cache.join(&entry), s.reference.cache.join(&entry)).unwrap();
    s.ours.clear_log();

    s.reference("del", &s.conf).unwrap();
    s.cni().gc_network_list(&list, &[]).unwrap();
    let ours = s.ours.calls();
    assert_eq!(
        ours.len(),
        3,
        "only the stale DEL, no plugin GC below 1.1.0"
    );
    assert!(ours[0].stdin.get("prevResult").is_some());
    assert_same_calls(&s, "GC's DEL", &ours, &s.reference.calls());
    assert!(s.ours.cache_entry(&s.id, &s.ifname).is_none());
}
