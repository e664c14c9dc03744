//! The fault matrix: `rkt run` with plugins that fail in every way a plugin can (missing,
//! not executable, error JSON, garbage, killed, hung, a result of an unknown version, the
//! second of three failing, DEL failing) and a namespace that vanishes under a running pod.
//! Each case: the message names the network, the plugin and the failure; the exit status
//! is non-zero; every plugin that got an ADD got its DEL; nothing leaked.

use crate::leaks;

use leaks::lab::{stderr, Lab};
use leaks::Guard;
use serde_json::json;

/// Runs a pod on network `net` whose only plugin is `plugin` with ADD behaving as `add`;
/// asserts the failure names net, plugin and `failure`, exit 254, DELs and no leaks.
fn failing_add(plugin: &str, add: serde_json::Value, failure: &str) {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("f");
    lab.plugin(plugin, json!({"ADD": add}));
    lab.conflist("10-f.conflist", &net, &[plugin]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab
        .run_command(&[&format!("--net={net}"), "--", "/bin/true"])
        .env("RKT_NET_PLUGIN_TIMEOUT", "2s")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    for needle in [net.as_str(), plugin, failure] {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
    let calls = lab.call_lines();
    assert_eq!(
        calls,
        [format!("ADD {plugin} eth0"), format!("DEL {plugin} eth0")],
        "calls"
    );
    lab.assert_every_add_deleted();
    for uuid in lab.pods() {
        assert_eq!(lab.state(&uuid), "exited", "pod {uuid}");
    }
}

#[test]
fn plugin_missing() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("m");
    lab.conflist("10-m.conflist", &net, &["nosuchplugin"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains(&net) && err.contains("nosuchplugin"), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(
        err.contains(&lab.plugin_dir().display().to_string()),
        "names the search path: {err}"
    );
    assert!(lab.calls().is_empty(), "{:?}", lab.call_lines());
}

#[test]
fn plugin_not_executable() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("x");
    lab.plugin_file("noexec", b"#!/bin/sh\nexit 0\n", 0o644);
    lab.conflist("10-x.conflist", &net, &["noexec"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains(&net) && err.contains("noexec"), "{err}");
    assert!(
        err.to_lowercase().contains("permission denied")
            || err.contains("not executable")
            || err.contains("not found"),
        "says why: {err}"
    );
}

#[test]
fn plugin_exits_non_zero_with_an_error() {
    failing_add(
        "errplug",
        json!({"error": {"code": 11, "msg": "no more addresses", "details": "pool empty"}}),
        "no more addresses",
    );
}

#[test]
fn plugin_exits_non_zero_with_garbage() {
    failing_add(
        "garbplug",
        json!({"stdout": "segfault-ish garbage \u{1}\u{2}", "exit": 3}),
        "3",
    );
}

#[test]
fn plugin_exits_zero_with_garbage() {
    failing_add("zgarb", json!({"stdout": "{not json"}), "zgarb");
}

#[test]
fn plugin_killed_by_a_signal() {
    failing_add("killed", json!({"signal": 9}), "signal");
}

#[test]
fn plugin_hangs_and_the_timeout_kills_it() {
    failing_add("hangs", json!({"sleep_ms": 120_000}), "timed out");
}

#[test]
fn plugin_returns_a_result_of_an_unsupported_version() {
    failing_add(
        "vplug",
        json!({"result": {"cniVersion": "9.9.9", "ips": []}}),
        "9.9.9",
    );
}

#[test]
fn second_of_three_plugins_fails_on_add() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("three");
    lab.plugin("one", json!({}));
    lab.plugin(
        "two",
        json!({"ADD": {"error": {"code": 7, "msg": "two says no"}}}),
    );
    lab.plugin("three", json!({}));
    lab.conflist("10-three.conflist", &net, &["one", "two", "three"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(
        err.contains(&net) && err.contains("two") && err.contains("two says no"),
        "{err}"
    );
    let calls = lab.call_lines();
    assert_eq!(&calls[..2], ["ADD one eth0", "ADD two eth0"], "{calls:?}");
    assert!(
        !calls.contains(&"ADD three eth0".to_string()),
        "three never ADDed: {calls:?}"
    );
    lab.assert_every_add_deleted();
    // The DELs come in reverse: two before one.
    let del_two = calls.iter().position(|c| c == "DEL two eth0").unwrap();
    let del_one = calls.iter().position(|c| c == "DEL one eth0").unwrap();
    assert!(del_two < del_one, "{calls:?}");
}

/// A failed setup of a second network DELs the first one too.
#[test]
fn failure_on_the_second_network_tears_down_the_first() {
    test_kit::require_root!();
    let lab = Lab::new();
    let (a, b) = (lab.net("a"), lab.net("b"));
    lab.plugin("good", json!({}));
    lab.plugin(
        "bad",
        json!({"ADD": {"error": {"code": 5, "msg": "bad net"}}}),
    );
    lab.conflist("10-a.conflist", &a, &["good"]);
    lab.conflist("20-b.conflist", &b, &["bad"]);
    let _g = Guard::new(lab.ctx(&[&a, &b]));
    let out = lab.run(&[&format!("--net={a},{b}"), "--", "/bin/true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains(&b) && err.contains("bad net"), "{err}");
    assert_eq!(
        lab.call_lines(),
        [
            "ADD good eth0",
            "ADD bad eth1",
            "DEL bad eth1",
            "DEL good eth0"
        ]
    );
}

#[test]
fn del_fails_the_pod_still_ends_and_gc_retries_and_reports() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("d");
    lab.plugin(
        "delfail",
        json!({"DEL": {"error": {"code": 9, "msg": "cannot release"}}}),
    );
    lab.conflist("10-d.conflist", &net, &["delfail"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/sh", "-c", "exit 7"]);
    let err = stderr(&out);
    // rkt fails (254), naming the network, plugin and failure, the app's exit status, and
    // that gc retries.
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("rkt gc"), "{err}");
    assert!(err.contains("exited with status 7"), "{err}");
    assert!(
        err.contains(&net) && err.contains("delfail") && err.contains("cannot release"),
        "{err}"
    );
    let pods = lab.pods();
    assert_eq!(pods.len(), 1);
    assert_ne!(lab.state(&pods[0]), "running", "the pod ended");
    assert!(
        !std::path::Path::new(&format!("/run/netns/rkt-{}", pods[0])).exists(),
        "the namespace is gone even though DEL failed"
    );

    // gc retries and reports the same failure...
    let gc = lab.gc();
    let gerr = stderr(&gc);
    assert_ne!(gc.status.code(), Some(0), "gc reports: {gerr}");
    assert!(
        gerr.contains(&net) && gerr.contains("cannot release"),
        "{gerr}"
    );
    let dels = |lab: &Lab| {
        lab.call_lines()
            .iter()
            .filter(|c| c.starts_with("DEL"))
            .count()
    };
    let before = dels(&lab);
    assert!(before >= 2, "run and gc both tried: {:?}", lab.call_lines());
    // ...and once the plugin behaves, gc finishes the job.
    lab.plugin("delfail", json!({}));
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(dels(&lab) > before);
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
}

#[test]
fn netns_disappears_under_a_running_pod() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.plain_net("v", "vanish");
    let _g = Guard::new(lab.ctx(&[&net]));
    let pod = lab.spawn(&[&format!("--net={net}"), "--", "/bin/sleep", "600"]);
    let uuid = pod.uuid.clone();
    lab.wait_running(&uuid);
    let ns = format!("/run/netns/rkt-{uuid}");
    // Someone removes the pod's namespace by hand.
    let del = std::process::Command::new("ip")
        .args(["netns", "del", &format!("rkt-{uuid}")])
        .status()
        .unwrap();
    assert!(del.success());
    assert!(!std::path::Path::new(&ns).exists());
    // The pod is stopped; teardown still DELs every network (without a namespace).
    let stop = lab.output(&["stop", &uuid]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
    let out = pod.wait();
    assert!(!out.status.success(), "the app was killed");
    lab.assert_every_add_deleted();
    let calls = lab.calls();
    let del = calls.iter().find(|c| c.command == "DEL").unwrap();
    assert_eq!(del.net, net);
    assert_ne!(lab.state(&uuid), "running");
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
}

#[test]
fn an_invalid_plugin_timeout_is_refused_before_anything_runs() {
    let lab = Lab::new();
    let out = lab
        .run_command(&["--net=none", "--", "/bin/true"])
        .env("RKT_NET_PLUGIN_TIMEOUT", "forever")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("RKT_NET_PLUGIN_TIMEOUT=\"forever\""), "{err}");
    assert!(lab.pods().is_empty(), "no pod was created");
}

/// Two teardowns of one attachment at once (a killed `rkt run`'s orphaned plugin DEL racing
/// `rkt gc`, found by the randomised crash test): both sweeps of the leftover firewall
/// rules succeed, whichever removes a rule first, and nothing is left.
#[test]
fn concurrent_sweeps_of_one_attachment_both_succeed() {
    test_kit::require_root!();
    let net = format!("sweep-{}", test_kit::unique());
    let id = uuid::Uuid::new_v4().to_string();
    let comment = format!("name: \"{net}\" id: \"{id}\"");
    let chain = leaks::chain_name(&net, &id, "");
    let _g = Guard::new(leaks::Ctx::new("/nonexistent").network(&net).container(&id));
    let ipt = |args: &[&str]| {
        let ok = std::process::Command::new("iptables")
            .args(["-w", "-t", "nat"])
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "iptables {args:?}");
    };
    for round in 0..5 {
        ipt(&["-N", &chain]);
        for i in 0..8 {
            let dst = format!("10.250.{round}.{i}/32");
            let rule = [
                "-A",
                &chain,
                "-d",
                &dst,
                "-m",
                "comment",
                "--comment",
                &comment,
            ];
            ipt(&[&rule[..], &["-j", "ACCEPT"]].concat());
        }
        let results: Vec<_> = std::thread::scope(|s| {
            let a = s.spawn(|| rkt::firewall::sweep::sweep(&net, &id));
            let b = s.spawn(|| rkt::firewall::sweep::sweep(&net, &id));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        for r in results {
            if let Err(e) = r {
                // Leave nothing behind before failing.
                let _ = rkt::firewall::sweep::sweep(&net, &id);
                panic!("round {round}: {e}");
            }
        }
        // The chain carries the attachment's name, so it went too.
        let out = std::process::Command::new("iptables")
            .args(["-w", "-t", "nat", "-S"])
            .output()
            .unwrap();
        let left = String::from_utf8_lossy(&out.stdout);
        assert!(!left.contains(&chain), "round {round}: {chain} left");
    }
}
