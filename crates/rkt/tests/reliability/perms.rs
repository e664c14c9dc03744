//! Permissions: what a pod leaves on disk is not readable by other users (pod directories
//! and the CNI cache 0700, their state files 0600), and, run as root, rkt refuses a network
//! configuration directory or file, plugin directory or plugin binary that a user other than
//! root could change, naming the path, its owner and mode, unless
//! `--insecure-options=net-plugins`.

use crate::leaks;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::support::test_plugin;
use leaks::lab::{stderr, Lab};
use leaks::Guard;
use serde_json::json;

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn pod_directories_and_the_cache_are_private() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.plain_net("p", "plug");
    let _g = Guard::new(lab.ctx(&[&net]));
    let pod = lab.start_sleeping_pod(&net);
    let data = lab.data();
    let pod_dir = data.join("pods").join(&pod.uuid);
    assert_eq!(mode(&data.join("pods")), 0o700, "pods dir");
    assert_eq!(mode(&pod_dir), 0o700, "pod dir");
    for f in ["state.json", "pod.json"] {
        assert_eq!(mode(&pod_dir.join(f)), 0o600, "{f}");
    }
    let results = data.join("cni/results");
    assert_eq!(mode(&data.join("cni")), 0o700, "cache dir");
    assert_eq!(mode(&results), 0o700, "cache results dir");
    let entries: Vec<_> = fs::read_dir(&results).unwrap().flatten().collect();
    assert!(!entries.is_empty(), "the running pod has a cache entry");
    for e in entries {
        assert_eq!(mode(&e.path()), 0o600, "{}", e.path().display());
    }
    let stop = lab.output(&["stop", &pod.uuid]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
    pod.wait();
}

/// Runs a pod with the lab's directories; returns (exit code, stderr).
fn try_run(lab: &Lab, net: &str, insecure: bool) -> (Option<i32>, String) {
    let mut args = vec![format!("--net={net}")];
    if insecure {
        args.push("--insecure-options=net-plugins".into());
    }
    args.extend(["--".into(), "/bin/true".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = lab.run(&args);
    (out.status.code(), stderr(&out))
}

/// Sets up a lab with one network on plugin `plug`, breaks it with `spoil` (returning the
/// path it made untrusted and the mode or owner to expect in the message), and asserts rkt
/// refuses, names it, runs nothing and sets nothing up; then that the insecure option lets
/// the pod run.
fn refused(what: &str, spoil: impl FnOnce(&Lab) -> (std::path::PathBuf, &'static str)) {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.plain_net("s", "plug");
    let _g = Guard::new(lab.ctx(&[&net]));
    let (path, detail) = spoil(&lab);
    let (code, err) = try_run(&lab, &net, false);
    assert_eq!(code, Some(254), "{err}");
    for needle in [
        what,
        &path.display().to_string(),
        detail,
        "--insecure-options=net-plugins",
    ] {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
    assert!(lab.pods().is_empty(), "no pod was created");
    assert!(
        lab.calls().is_empty(),
        "no plugin ran: {:?}",
        lab.call_lines()
    );
    let (code, err) = try_run(&lab, &net, true);
    assert_eq!(code, Some(0), "with --insecure-options=net-plugins: {err}");
    assert_eq!(lab.call_lines(), ["ADD plug eth0", "DEL plug eth0"]);
    // Leave the temp dir removable.
    chmod(&lab.conf_dir(), 0o755);
    chmod(&lab.plugin_dir(), 0o755);
}

#[test]
fn a_group_writable_network_configuration_directory_is_refused() {
    refused("network configuration directory", |lab| {
        chmod(&lab.conf_dir(), 0o775);
        (lab.conf_dir(), "mode 0775")
    });
}

#[test]
fn a_world_writable_plugin_directory_is_refused() {
    refused("plugin directory", |lab| {
        chmod(&lab.plugin_dir(), 0o777);
        (lab.plugin_dir(), "mode 0777")
    });
}

#[test]
fn a_plugin_directory_owned_by_another_user_is_refused() {
    refused("plugin directory", |lab| {
        nix::unistd::chown(
            &lab.plugin_dir(),
            Some(nix::unistd::Uid::from_raw(65534)),
            None,
        )
        .unwrap();
        (lab.plugin_dir(), "uid 65534")
    });
}

#[test]
fn a_writable_plugin_binary_is_refused() {
    refused("plugin", |lab| {
        // A real copy (not the hard link to the shared build) that others may write.
        let bin = lab.plugin_dir().join("plug");
        fs::remove_file(&bin).unwrap();
        fs::copy(test_plugin(), &bin).unwrap();
        chmod(&bin, 0o757);
        (bin, "mode 0757")
    });
}

#[test]
fn a_network_file_linked_to_a_file_another_user_owns_is_refused() {
    refused("network configuration", |lab| {
        let file = lab.conf_dir().join("10-s.conflist");
        let target = lab.path("theirs.conflist");
        fs::rename(&file, &target).unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        nix::unistd::chown(&target, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        (target, "uid 65534")
    });
}

/// `rkt net status` runs every network's plugins (CNI STATUS): the same check applies.
#[test]
fn net_status_refuses_a_writable_plugin_directory() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("st");
    lab.plugin("plug", json!({}));
    lab.conf(
        "10-st.conflist",
        &json!({"cniVersion": "1.1.0", "name": net, "plugins": [{"type": "plug"}]}),
    );
    chmod(&lab.plugin_dir(), 0o777);
    let dirs = [
        format!("--net-conf-dir={}", lab.conf_dir().display()),
        format!("--net-plugin-dir={}", lab.plugin_dir().display()),
    ];
    let out = lab.output(&["net", "status", &dirs[0], &dirs[1]]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(
        err.contains("mode 0777") && err.contains("plugin directory"),
        "{err}"
    );
    assert!(
        lab.calls().is_empty(),
        "no plugin ran: {:?}",
        lab.call_lines()
    );
    let out = lab.output(&[
        "net",
        "status",
        &dirs[0],
        &dirs[1],
        "--insecure-options=net-plugins",
    ]);
    assert_ne!(out.status.code(), Some(254), "{}", stderr(&out));
    assert!(
        lab.calls().iter().any(|c| c.command == "STATUS"),
        "{:?}",
        lab.call_lines()
    );
    chmod(&lab.plugin_dir(), 0o755);
}

#[test]
fn unknown_insecure_options_are_refused() {
    let lab = Lab::new();
    let out = lab.run(&[
        "--net=none",
        "--insecure-options=signatures",
        "--",
        "/bin/true",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(
        err.contains("\"signatures\"") && err.contains("net-plugins"),
        "{err}"
    );
    assert!(lab.pods().is_empty());
}
