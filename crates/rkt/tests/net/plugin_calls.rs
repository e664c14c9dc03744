//! How rkt calls plugins. Each plugin is resolved once per setup: planning finds its binary,
//! the ownership check examines that binary, the record names it, and the CNI library runs
//! exactly it. A binary of the same name that appears earlier in the plugin path after
//! planning (a race with the check, or an untrusted directory that was empty when checked)
//! is never run. Each call's time limit is the one the caller's options give (the command
//! line reads `$RKT_NET_PLUGIN_TIMEOUT` once, and refuses a value that is not a duration).

use crate::{leaks, net_support};

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use net_support::NetWorld;
use rkt::networking::{self, NetError, NetFailure};
use serde_json::json;

#[test]
fn the_binary_planned_is_the_binary_run_and_recorded() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    w.plugin("pa", json!({}));
    w.conf(
        "10-a.conflist",
        json!({"cniVersion": "1.0.0", "name": "a", "plugins": [{"type": "pa"}]}),
    );
    let early = w.root.path().join("early");
    fs::create_dir(&early).unwrap();
    let netns = w.root.path().join("netns");
    fs::write(&netns, "").unwrap();
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    let mut opts = w.opts(&["a"]);
    opts.plugin_path = vec![early.clone(), w.plugin_dir()];

    let planned = networking::preflight(&opts).unwrap();
    assert_eq!(planned[0].binaries["pa"], w.plugin_dir().join("pa"));

    // Between the check and the ADD, a `pa` appears first in the path.
    let impostor = early.join("pa");
    let ran = w.root.path().join("impostor-ran");
    fs::write(
        &impostor,
        format!("#!/bin/sh\ntouch {}\nexit 1\n", ran.display()),
    )
    .unwrap();
    fs::set_permissions(&impostor, fs::Permissions::from_mode(0o755)).unwrap();

    let guard = net_support::TeardownGuard(w.pod(&pod_dir, Some(&netns)));
    let nets = networking::setup_planned(&pod, &opts, planned, None).unwrap();
    assert!(!ran.exists(), "the binary found after planning ran");
    let calls: Vec<String> = w.calls().iter().map(|c| c.short()).collect();
    assert_eq!(calls, ["ADD pa eth0"]);
    assert_eq!(
        nets[0].plugin_path,
        w.plugin_dir().join("pa").display().to_string()
    );

    // Teardown works from the record and searches its directories again: take the
    // impostor away so that the real plugin gets its DEL.
    fs::remove_file(&impostor).unwrap();
    networking::teardown(&pod).unwrap();
    drop(guard);
    let calls: Vec<String> = w.calls().iter().map(|c| c.short()).collect();
    assert_eq!(calls, ["ADD pa eth0", "DEL pa eth0"]);
}

#[test]
fn each_call_gets_the_timeout_of_the_options() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    w.plugin(
        "slow",
        json!({"ADD": {"sleep_ms": 5000}, "DEL": {"sleep_ms": 5000}}),
    );
    w.conf(
        "10-s.conflist",
        json!({"cniVersion": "1.0.0", "name": "s", "plugins": [{"type": "slow"}]}),
    );
    let netns = w.root.path().join("netns");
    fs::write(&netns, "").unwrap();
    let pod_dir = w.pod_dir();
    let mut pod = w.pod(&pod_dir, Some(&netns));
    pod.plugin_timeout = Duration::from_millis(300);

    let started = Instant::now();
    let err = networking::setup(&pod, &w.opts(&["s"])).unwrap_err();
    // The ADD and the rollback's DEL were each killed after 300 ms.
    assert!(started.elapsed() < Duration::from_secs(4), "{err}");
    let NetError::Add {
        plugin,
        error,
        cleanup,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(plugin, "slow");
    assert!(
        matches!(**error, cni::error::Error::Timeout { secs, .. } if secs == 0.3),
        "{error:?}"
    );
    assert!(
        matches!(&cleanup[..], [NetFailure::Cni { source, .. }]
            if matches!(**source, cni::error::Error::Timeout { .. })),
        "{cleanup:?}"
    );

    // With time enough, the retried teardown completes.
    w.script(
        "slow",
        &json!({"log": w.log().display().to_string(), "DEL": {"sleep_ms": 100}}),
    );
    pod.plugin_timeout = Duration::from_secs(10);
    networking::teardown(&pod).unwrap();
}

#[test]
fn a_plugin_timeout_that_is_not_a_duration_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    for (cmd, value) in [("gc", "0s"), ("list", "soon")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rkt"))
            .arg("--dir")
            .arg(dir.path())
            .arg(cmd)
            .env("RKT_NET_PLUGIN_TIMEOUT", value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(254), "{cmd}: {err}");
        assert!(
            err.contains(&format!("RKT_NET_PLUGIN_TIMEOUT=\"{value}\"")),
            "{cmd}: {err}"
        );
    }
}
