//! `rkt net list`, `rkt net status` and `rkt net check`, driven through the binary with a
//! temporary data and configuration directory. `list` and `status` need no root (they run
//! only the test plugin's VERSION and STATUS); `check` runs a real pod (root only) and ends
//! with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use pod_support::{assert_no_netns, held_port, World};
use serde_json::{json, Value};

/// The world's default network configuration directory, created.
fn conf_dir(world: &World) -> PathBuf {
    let dir = world.path("local/net.d");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A plugin directory holding the test plugin as each of `names`.
fn plugin_dir(world: &World, names: &[&str]) -> PathBuf {
    let dir = world.path("plugins");
    fs::create_dir_all(&dir).unwrap();
    for name in names {
        symlink(support::test_plugin(), dir.join(name)).unwrap();
    }
    dir
}

fn write(dir: &Path, file: &str, text: &str) {
    fs::write(dir.join(file), text).unwrap();
}

/// Whether the built-in networks' plugins are installed (then `default` is usable).
fn system_plugins() -> bool {
    ["ptp", "host-local", "portmap"]
        .iter()
        .all(|p| Path::new("/usr/lib/cni").join(p).is_file())
}

#[test]
fn net_list_shows_good_shadowed_broken_and_missing_in_text_and_json() {
    let world = World::new(support::RKT);
    let conf = conf_dir(&world);
    let plugins = plugin_dir(&world, &["tp-good", "tp-old"]);
    write(
        &plugins,
        "tp-old.script",
        r#"{"versions": ["0.3.1", "0.4.0"]}"#,
    );
    write(
        &conf,
        "10-good.conflist",
        &json!({"cniVersion": "1.0.0", "name": "good", "plugins": [
            {"type": "tp-good", "ipam": {"type": "tp-good"}},
            {"type": "tp-good", "capabilities": {"portMappings": true}}
        ]})
        .to_string(),
    );
    write(
        &conf,
        "20-good.conf",
        &json!({"cniVersion": "0.4.0", "name": "good", "type": "tp-good"}).to_string(),
    );
    write(&conf, "30-broken.conf", "{ this is not json");
    write(
        &conf,
        "40-lost.conflist",
        &json!({"cniVersion": "1.0.0", "name": "lost", "plugins": [{"type": "no-such-plugin"}]})
            .to_string(),
    );
    write(
        &conf,
        "50-old.conf",
        &json!({"cniVersion": "1.0.0", "name": "old", "type": "tp-old"}).to_string(),
    );
    let plugin_flag = format!("--net-plugin-dir={}", plugins.display());

    let out = world.rkt(&["net", "list", &plugin_flag]).run();
    out.assert_exit_code(1);
    let text = out.stdout();
    let c = conf.display().to_string();
    let p = plugins.display().to_string();
    for needle in [
        format!("network configs: {c} (default)\n"),
        format!("  {p} (flag --net-plugin-dir)\n"),
        format!("good ({c}/10-good.conflist) cniVersion 1.0.0\n"),
        format!("  tp-good: {p}/tp-good\n"),
        format!("    ipam tp-good: {p}/tp-good\n"),
        format!("  tp-good: {p}/tp-good [portMappings]\n"),
        format!("lost ({c}/40-lost.conflist) cniVersion 1.0.0 UNUSABLE\n"),
        format!("  no-such-plugin: not found in {p}:"),
        format!("old ({c}/50-old.conf) cniVersion 1.0.0 UNUSABLE\n"),
        "  tp-old: does not support cniVersion 1.0.0 (supports 0.3.1, 0.4.0)\n".to_string(),
        "default (built-in, ordered as 99-default.conf) cniVersion 1.0.0".to_string(),
        "default-restricted (built-in, ordered as 99-default-restricted.conf)".to_string(),
        format!("  good in {c}/20-good.conf (defined first in {c}/10-good.conflist)\n"),
        "files that failed to load:\n".to_string(),
        "30-broken.conf".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing in:\n{text}");
    }
    // The good network is not marked, and its shadow does not appear as a network.
    assert!(!text.contains("good ({c}/10-good.conflist) cniVersion 1.0.0 UNUSABLE"));
    assert!(!text.contains(&format!("good ({c}/20-good.conf)")));

    let out = world
        .rkt(&["net", "list", "--format=json", &plugin_flag])
        .run();
    out.assert_exit_code(1);
    let v = out.json();
    assert_eq!(v["usable"], false);
    assert_eq!(v["netConfDir"]["path"], c.as_str());
    assert_eq!(v["netConfDir"]["origin"], "default");
    assert_eq!(v["pluginPath"][0]["path"], p.as_str());
    assert_eq!(v["pluginPath"][0]["origin"], "flag --net-plugin-dir");
    let nets = v["networks"].as_array().unwrap();
    let names: Vec<&str> = nets.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["good", "lost", "old", "default-restricted", "default"]
    );
    let good = &nets[0];
    assert_eq!(good["negotiatedVersion"], "1.0.0");
    assert_eq!(good["builtin"], false);
    assert_eq!(good["problems"], json!([]));
    assert_eq!(good["usable"], true);
    assert_eq!(nets[1]["usable"], false);
    assert_eq!(nets[2]["usable"], false);
    assert_eq!(good["plugins"][1]["ipam"], true);
    assert_eq!(good["plugins"][2]["capabilities"], json!(["portMappings"]));
    assert_eq!(
        good["plugins"][0]["binary"],
        format!("{p}/tp-good").as_str()
    );
    let lost = &nets[1];
    assert_eq!(lost["plugins"][0]["binary"], Value::Null);
    assert!(lost["plugins"][0]["problem"]
        .as_str()
        .unwrap()
        .starts_with(&format!("not found in {p}")));
    assert_eq!(nets[4]["builtin"], true);
    assert_eq!(nets[4]["file"], Value::Null);
    let portmap = &nets[4]["plugins"][2];
    assert_eq!(portmap["type"], "portmap");
    assert_eq!(portmap["capabilities"], json!(["portMappings"]));
    assert_eq!(
        v["shadowed"][0]["file"],
        format!("{c}/20-good.conf").as_str()
    );
    assert_eq!(
        v["shadowed"][0]["shadowedBy"],
        format!("{c}/10-good.conflist").as_str()
    );
    assert_eq!(v["failed"].as_array().unwrap().len(), 1);
    assert_eq!(
        v["failed"][0]["file"],
        format!("{c}/30-broken.conf").as_str()
    );

    // Without the broken pieces the directory passes as a pre-flight check.
    for f in ["30-broken.conf", "40-lost.conflist", "50-old.conf"] {
        fs::remove_file(conf.join(f)).unwrap();
    }
    let out = world.rkt(&["net", "list", &plugin_flag]).run();
    if system_plugins() {
        out.assert_success();
    } else {
        out.assert_exit_code(1);
    }
}

#[test]
fn net_list_names_the_paths_file_that_set_a_directory() {
    let world = World::new(support::RKT);
    let plugins = plugin_dir(&world, &["tp"]);
    let other_conf = world.path("elsewhere");
    fs::create_dir_all(&other_conf).unwrap();
    let paths_d = world.path("local/paths.d");
    fs::create_dir_all(&paths_d).unwrap();
    let paths_file = paths_d.join("net.json");
    fs::write(
        &paths_file,
        json!({"rktKind": "paths", "rktVersion": "v1",
               "net-conf": other_conf, "net-plugin": [plugins]})
        .to_string(),
    )
    .unwrap();
    let out = world.rkt(&["net", "list", "--format=json"]).run();
    let v = out.json();
    let origin = paths_file.display().to_string();
    assert_eq!(
        v["netConfDir"]["path"],
        other_conf.display().to_string().as_str()
    );
    assert_eq!(v["netConfDir"]["origin"], origin.as_str());
    assert_eq!(v["pluginPath"][0]["origin"], origin.as_str());
    let text = world.rkt(&["net", "list"]).run().stdout();
    assert!(
        text.contains(&format!(
            "network configs: {} ({origin})",
            other_conf.display()
        )),
        "{text}"
    );
}

#[test]
fn net_status_reports_readiness_per_network() {
    let world = World::new(support::RKT);
    let conf = conf_dir(&world);
    let plugins = plugin_dir(&world, &["tp"]);
    write(
        &conf,
        "10-new.conf",
        &json!({"cniVersion": "1.1.0", "name": "new", "type": "tp"}).to_string(),
    );
    write(
        &conf,
        "20-old.conf",
        &json!({"cniVersion": "0.4.0", "name": "old", "type": "tp"}).to_string(),
    );
    write(
        &conf,
        "30-sick.conf",
        &json!({"cniVersion": "1.1.0", "name": "sick", "type": "tp",
                "testPlugin": {"STATUS": {"error": {"code": 50, "msg": "no addresses left"}}}})
        .to_string(),
    );
    let plugin_flag = format!("--net-plugin-dir={}", plugins.display());
    let out = world.rkt(&["net", "status", &plugin_flag]).run();
    out.assert_exit_code(1)
        .assert_stdout_contains("new: ready\n")
        .assert_stdout_contains("old: ready (STATUS not supported by cniVersion 0.4.0)\n")
        .assert_stdout_contains("sick: not ready: ")
        .assert_stdout_contains("no addresses left")
        .assert_stdout_contains(
            "default (built-in): ready (STATUS not supported by cniVersion 1.0.0)\n",
        );
    let v = world
        .rkt(&["net", "status", "--format=json", &plugin_flag])
        .run()
        .json();
    let by_name = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by_name("new")["ready"], true);
    assert_eq!(by_name("sick")["ready"], false);
    assert_eq!(by_name("old")["cniVersion"], "0.4.0");
    fs::remove_file(conf.join("30-sick.conf")).unwrap();
    world
        .rkt(&["net", "status", &plugin_flag])
        .run()
        .assert_success();
}

#[test]
fn net_check_passes_on_a_healthy_pod_and_fails_without_its_interface() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let held = held_port();
    let port = held.port;
    let (uuid, index) = world.spawn_run(&[&format!("--port={port}:80"), "--", "sleep", "100"]);
    world.wait_running(&uuid);
    let out = world.rkt(&["net", "check", &uuid]).run();
    out.assert_success()
        .assert_stdout_contains("default (eth0): ok");
    let v = world
        .rkt(&["net", "check", "--format=json", &uuid])
        .run()
        .json();
    assert_eq!(v[0]["netName"], "default");
    assert_eq!(v[0]["ok"], true);

    let ns = format!("rkt-{uuid}");
    let del = std::process::Command::new("ip")
        .args(["-n", &ns, "link", "del", "eth0"])
        .status()
        .unwrap();
    assert!(del.success());
    let out = world.rkt(&["net", "check", &uuid]).run();
    out.assert_exit_code(1)
        .assert_stdout_contains("default (eth0): failed: ")
        .assert_stdout_contains("eth0");
    let v = world
        .rkt(&["net", "check", "--format=json", &uuid])
        .run()
        .json();
    assert_eq!(v[0]["ok"], false);

    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    assert_no_netns(&uuid);
    // Teardown after the interface was removed still leaves no rule of the pod.
    let nat = std::process::Command::new("iptables")
        .args(["-w", "-t", "nat", "-S"])
        .output()
        .unwrap();
    let nat = String::from_utf8_lossy(&nat.stdout);
    assert!(!nat.contains(&uuid), "rules of {uuid} left:\n{nat}");
    // Only running pods can be checked.
    world
        .rkt(&["net", "check", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("only a running pod");
}
