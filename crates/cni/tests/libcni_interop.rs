//! Cache interoperability with the reference Go libcni (v1.1.2, through
//! `tools/libcni-driver`): each side reads what the other wrote, and both write the same
//! entry for the same ADD. Skipped, with a note, when Go or Debian's libcni sources are
//! not installed, unless `CI` or `RKT_REQUIRE_REFERENCE=1` is set: then they fail.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::World;

/// True when the environment says the reference must be available (as in
/// `conformance.rs`).
fn reference_required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var("RKT_REQUIRE_REFERENCE").is_ok_and(|v| v == "1")
}

/// Builds the driver once; `Err` says why it cannot be built here. A toolchain and
/// sources that are present but fail to build the driver are a failure, never a skip.
fn build_driver() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let have_go = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_go {
        return Err("`go` is not installed (Debian package golang-go)".into());
    }
    let libcni = "/usr/share/gocode/src/github.com/containernetworking/cni/libcni";
    if !Path::new(libcni).is_dir() {
        return Err(format!(
            "{libcni} is missing (Debian package golang-github-appc-cni-dev)"
        ));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let out = target.join("libcni-driver-test");
    let result = Command::new("sh")
        .arg(root.join("tools/libcni-driver/build.sh"))
        .arg(&out)
        .output()
        .expect("running tools/libcni-driver/build.sh");
    assert!(
        result.status.success(),
        "building the reference driver failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    Ok(out)
}

/// The driver, built once per test process; `None` (after a note on stderr) when it
/// cannot be built here and the reference is not required; a panic when it is required
/// (`CI`, or `RKT_REQUIRE_REFERENCE=1`).
fn driver() -> Option<&'static Path> {
    static DRIVER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DRIVER.get_or_init(build_driver) {
        Ok(path) => Some(path),
        Err(why) if reference_required() => {
            panic!(
                "reference libcni unavailable but required (CI / RKT_REQUIRE_REFERENCE=1): {why}"
            )
        }
        Err(why) => {
            eprintln!("skipping: {why}");
            None
        }
    }
}

macro_rules! driver_or_skip {
    () => {
        match driver() {
            Some(d) => d,
            None => return,
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
