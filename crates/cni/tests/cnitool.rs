//! `examples/cnitool.rs` run as a user runs the reference `cnitool`, against the real
//! plugins in `/usr/lib/cni` (ptp + host-local), as root, on a network namespace this test
//! creates: `status`, `add` (the address is on `eth0` in the namespace and the result is
//! printed), `check`, `del` (the host veth, route and reservation are gone), then `add`
//! again and `gc`, which deletes the attachment nothing marks valid. The container ID is
//! the reference tool's (`cnitool-` + the first 10 bytes of SHA-512 of the netns path),
//! so its cache entry is where libcni's would be. Bad input fails with status 1 and a
//! message naming what is wrong. Ends with the leak checker.
//!
//! The subnet `10.251.30.0/24` is this test's own. Without root, or without the plugins,
//! the test is skipped with a note.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use leak_check as leaks;
use serde_json::{json, Value};

const PLUGIN_DIR: &str = "/usr/lib/cni";
const SUBNET: &str = "10.251.30.0/24";
const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// The example binary, built once.
fn cnitool() -> PathBuf {
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "cni", "--example", "cnitool"])
        .status()
        .expect("running cargo build for the cnitool example");
    assert!(status.success(), "building examples/cnitool.rs failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let bin = target.join("debug/examples/cnitool");
    assert!(bin.is_file(), "{} missing after build", bin.display());
    bin
}

fn sh(args: &[&str]) -> (bool, String) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e}"));
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("reading /dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the test made on the host, undone on drop even when it fails: the attachment
/// (through `cnitool del`), the namespace, and `net.ipv4.ip_forward` (ptp turns it on).
struct Host {
    tool: PathBuf,
    env: Vec<(String, String)>,
    netns: String,
    net: String,
    forward_before: Option<String>,
}

impl Host {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.tool)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("running cnitool")
    }

    /// Runs `cnitool COMMAND NET NETNS`, which must succeed; its stdout.
    fn ok(&self, command: &str) -> String {
        let out = self.run(&[command, &self.net, &self.netns_path()]);
        assert!(
            out.status.success(),
            "cnitool {command} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn netns_path(&self) -> String {
        format!("/run/netns/{}", self.netns)
    }

    fn in_ns(&self, args: &[&str]) -> String {
        let mut all = vec!["ip", "-n", &self.netns];
        all.extend_from_slice(args);
        let (ok, out) = sh(&all);
        assert!(ok, "{all:?}: {out}");
        out
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let out = self.run(&["del", &self.net, &self.netns_path()]);
        if !out.status.success() {
            eprintln!(
                "cleanup: cnitool del: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let (ok, out) = sh(&["ip", "netns", "del", &self.netns]);
        if !ok {
            eprintln!("cleanup: deleting netns {}: {out}", self.netns);
        }
        if let Some(before) = self.forward_before.take() {
            if let Err(e) = std::fs::write(IP_FORWARD, before.trim()) {
                eprintln!("cleanup: restoring {IP_FORWARD}: {e}");
            }
        }
    }
}

/// The reference tool's container ID for `netns`, computed with `sha512sum`.
fn reference_container_id(netns: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", "printf %s \"$1\" | sha512sum", "sh", netns])
        .output()
        .unwrap();
    let hex = String::from_utf8(out.stdout).unwrap();
    format!("cnitool-{}", &hex[..20])
}

fn reservations(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("10."))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn cnitool_example_adds_checks_deletes_and_gcs_with_the_real_plugins() {
    if !test_kit::is_root() {
        eprintln!("skipping cnitool test: needs root");
        return;
    }
    if !["ptp", "host-local"]
        .iter()
        .all(|p| Path::new(PLUGIN_DIR).join(p).is_file())
    {
        eprintln!("skipping cnitool test: ptp and host-local not in {PLUGIN_DIR}");
        return;
    }
    let tool = cnitool();
    let tmp = tempfile::tempdir().unwrap();
    let confdir = tmp.path().join("net.d");
    let ipam_dir = tmp.path().join("ipam");
    let cache = tmp.path().join("cache");
    std::fs::create_dir(&confdir).unwrap();
    let net = format!("cnitool-{}", random_hex(4));
    // containernetworking-plugins 1.1.1 speak up to 1.0.0: STATUS and the plugins' GC
    // (1.1.0) are not sent, and gc is the DEL of the stale attachment.
    let conflist = json!({
        "cniVersion": "1.0.0",
        "name": net,
        "plugins": [{
            "type": "ptp",
            "ipam": {"type": "host-local", "subnet": SUBNET, "dataDir": ipam_dir},
        }],
    });
    std::fs::write(confdir.join("10-net.conflist"), conflist.to_string()).unwrap();
    // A broken file and a same-named single network: the .conflist is the one found.
    std::fs::write(confdir.join("00-broken.conflist"), "{").unwrap();
    std::fs::write(
        confdir.join("00-single.conf"),
        json!({"cniVersion": "1.0.0", "name": net, "type": "no-such-plugin"}).to_string(),
    )
    .unwrap();

    let netns = format!("cni-rt-{}", random_hex(5));
    let (ok, out) = sh(&["ip", "netns", "add", &netns]);
    assert!(ok, "ip netns add: {out}");
    let host = Host {
        tool,
        env: vec![
            ("NETCONFPATH".into(), confdir.display().to_string()),
            ("CNI_PATH".into(), PLUGIN_DIR.into()),
            ("CNI_CACHE_DIR".into(), cache.display().to_string()),
            ("CNI_ARGS".into(), "IgnoreUnknown=1".into()),
            ("CAP_ARGS".into(), r#"{"mac":"c2:00:00:00:30:01"}"#.into()),
        ],
        netns,
        net: net.clone(),
        forward_before: std::fs::read_to_string(IP_FORWARD).ok(),
    };
    let cid = reference_container_id(&host.netns_path());
    let mut guard = leaks::Guard::new(
        leaks::Ctx::new(tmp.path())
            .network(&net)
            .subnet(SUBNET)
            .container(&cid)
            .cache_dir(&cache)
            .hostlocal_dir(&ipam_dir),
    );

    host.ok("status");
    let printed: Value = serde_json::from_str(&host.ok("add")).expect("add prints the result");
    assert_eq!(printed["cniVersion"], "1.0.0");
    let address = printed["ips"][0]["address"].as_str().unwrap().to_string();
    assert!(address.starts_with("10.251.30."), "{printed}");
    let host_veth = printed["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i.get("sandbox").is_none())
        .and_then(|i| i["name"].as_str())
        .unwrap()
        .to_string();
    guard.add_link(&host_veth);
    let eth0 = host.in_ns(&["-o", "-4", "addr", "show", "dev", "eth0"]);
    assert!(eth0.contains(&format!("inet {address} ")), "{eth0}");
    let ip = address.split('/').next().unwrap();
    assert_eq!(reservations(&ipam_dir.join(&net)), [ip]);
    let entry = cache.join(format!("results/{net}-{cid}-eth0"));
    assert!(entry.is_file(), "no cache entry {}", entry.display());
    let cached: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    assert_eq!(cached["netns"], host.netns_path());
    assert_eq!(cached["cniArgs"], json!([["IgnoreUnknown", "1"]]));

    host.ok("check");
    host.ok("del");
    assert!(
        !sh(&["ip", "link", "show", "dev", &host_veth]).0,
        "veth left"
    );
    assert!(reservations(&ipam_dir.join(&net)).is_empty());
    assert!(!entry.exists());

    // gc: nothing is valid, so the cached attachment is deleted.
    let again: Value = serde_json::from_str(&host.ok("add")).unwrap();
    let veth2 = again["interfaces"][0]["name"].as_str().unwrap().to_string();
    guard.add_link(&veth2);
    assert!(entry.is_file());
    host.ok("gc");
    assert!(!entry.exists(), "gc left the cache entry");
    assert!(reservations(&ipam_dir.join(&net)).is_empty());
    assert!(!host.in_ns(&["-o", "-4", "addr"]).contains("10.251.30."));

    // Bad input: status 1, a message naming the culprit, nothing run.
    let unknown = host.run(&["add", "no-such-net", &host.netns_path()]);
    assert_eq!(unknown.status.code(), Some(1));
    let text = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        text.contains("\"no-such-net\"") && text.contains(&confdir.display().to_string()),
        "{text}"
    );
    assert!(
        text.contains("not loaded: ") && text.contains("00-broken.conflist"),
        "the broken file is named: {text}"
    );
    let usage = host.run(&["add", &net]);
    assert_eq!(usage.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("usage: cnitool"));
    let mut bad_args = Command::new(&host.tool);
    bad_args
        .args(["add", &net, &host.netns_path()])
        .envs(host.env.iter().map(|(k, v)| (k, v)))
        .env("CNI_ARGS", "A=1;B");
    let out = bad_args.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid CNI_ARGS pair \"B\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!entry.exists());

    drop(host);
    guard.check();
}
