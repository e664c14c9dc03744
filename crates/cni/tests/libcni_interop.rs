//! Cache interoperability with the reference Go libcni (v1.1.2, through
//! `tools/libcni-driver`): each side reads what the other wrote, and both write the same
//! entry for the same ADD. Skipped, with a note, when Go or Debian's libcni sources are
//! not installed.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::World;

/// Builds the driver once; `None` when it cannot be built here.
fn driver() -> Option<&'static Path> {
    static DRIVER: OnceLock<Option<PathBuf>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            if !Path::new("/usr/share/gocode/src/github.com/containernetworking/cni/libcni")
                .is_dir()
            {
                return None;
            }
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            let out = target.join("libcni-driver-test");
            let status = Command::new("sh")
                .arg(root.join("tools/libcni-driver/build.sh"))
                .arg(&out)
                .status()
                .ok()?;
            status.success().then_some(out)
        })
        .as_deref()
}

macro_rules! driver_or_skip {
    () => {
        match driver() {
            Some(d) => d,
            None => {
                eprintln!("skipping: Go libcni driver cannot be built (needs golang-go and golang-github-appc-cni-dev)");
                return;
            }
        }
    };
}

/// Runs the driver: `op` on the list in `conf`.
fn libcni(w: &World, driver: &Path, op: &str, conf: &Path, extra: &[&str]) -> String {
    let out = Command::new(driver)
        .env("CNI_PATH", &w.plugins)
        .args(["-conf".as_ref(), conf.as_os_str()])
        .args(["-cache".as_ref(), w.cache.as_os_str()])
        .args([
            "-id",
            "c1",
            "-netns",
            "/run/netns/test-ns",
            "-ifname",
            "eth0",
        ])
        .args(extra)
        .arg(op)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "libcni {op}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn setup(w: &World) -> (PathBuf, cni::conf::NetworkConfigList) {
    w.install("a", json!({}));
    w.install("b", json!({}));
    let text = r#"{"cniVersion":"1.0.0","name":"net","plugins":[{"type":"a","capabilities":{"mac":true}},{"type":"b"}]}"#;
    let path = w.tmp.path().join("net.conflist");
    std::fs::write(&path, text).unwrap();
    (path.clone(), cni::conf::load_file(&path).unwrap())
}

fn rt() -> cni::api::RuntimeConf {
    let mut r = support::rt();
    r.args = vec![("IgnoreUnknown".into(), "1".into())];
    r.capability_args
        .insert("mac".into(), json!("0a:00:00:00:00:07"));
    r
}

/// Go always writes `"dns": {}` (a struct is never omitted); we leave an empty DNS out.
/// Either reads the same, so compare without it.
fn without_empty_dns(mut v: Value) -> Value {
    let result = if v.get("kind").is_some() {
        &mut v["result"]
    } else {
        &mut v
    };
    if let Some(m) = result.as_object_mut() {
        if m.get("dns") == Some(&json!({})) {
            m.remove("dns");
        }
    }
    v
}

const LIBCNI_ARGS: &[&str] = &[
    "-args",
    "IgnoreUnknown=1",
    "-capargs",
    r#"{"mac":"0a:00:00:00:00:07"}"#,
];

#[test]
fn both_write_the_same_entry_for_the_same_add() {
    let driver = driver_or_skip!();
    let w = World::new();
    let (conf, list) = setup(&w);
    let entry = w.cache.join("results/net-c1-eth0");

    libcni(&w, driver, "add", &conf, LIBCNI_ARGS);
    let theirs: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    libcni(&w, driver, "del", &conf, LIBCNI_ARGS);
    assert!(!entry.exists());

    w.cni().add_network_list(&list, &rt()).unwrap();
    let mut ours: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    // libcni 1.1.2 predates the "netns" field (1.2.0 added it).
    assert_eq!(
        ours.as_object_mut().unwrap().remove("netns"),
        Some(json!("/run/netns/test-ns"))
    );
    assert_eq!(without_empty_dns(ours), without_empty_dns(theirs));
}

#[test]
fn we_read_and_delete_what_libcni_added() {
    let driver = driver_or_skip!();
    let w = World::new();
    let (conf, list) = setup(&w);
    let added: Value =
        serde_json::from_str(&libcni(&w, driver, "add", &conf, LIBCNI_ARGS)).unwrap();

    let cni = w.cni();
    let cached = cni
        .get_network_list_cached_result(&list, &rt())
        .unwrap()
        .unwrap();
    assert_eq!(
        without_empty_dns(cached.to_value()),
        without_empty_dns(added.clone())
    );
    let attachments = cni.get_cached_attachments("c1").unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0].cni_args, rt().args);
    assert_eq!(attachments[0].config, list.bytes);
    w.clear_log();

    cni.del_network_list(&list, &support::rt()).unwrap();
    let calls = w.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls
        .iter()
        .all(|c| without_empty_dns(c.stdin["prevResult"].clone())
            == without_empty_dns(added.clone())));
    assert!(!w.cache.join("results/net-c1-eth0").exists());
}

#[test]
fn libcni_reads_and_deletes_what_we_added() {
    let driver = driver_or_skip!();
    let w = World::new();
    let (conf, list) = setup(&w);
    let added = w.cni().add_network_list(&list, &rt()).unwrap().to_value();
    w.clear_log();

    libcni(&w, driver, "check", &conf, LIBCNI_ARGS);
    libcni(&w, driver, "del", &conf, LIBCNI_ARGS);
    let calls = w.calls();
    assert_eq!(calls.len(), 4);
    let ours = without_empty_dns(added);
    for c in &calls {
        assert_eq!(
            without_empty_dns(c.stdin["prevResult"].clone()),
            ours,
            "{} {}",
            c.plugin,
            c.command
        );
    }
    assert!(!w.cache.join("results/net-c1-eth0").exists());
}
