//! Each plugin is resolved once per setup: planning finds its binary, the ownership check
//! examines that binary, the record names it, and the CNI library runs exactly it. A binary
//! of the same name that appears earlier in the plugin path after planning (a race with the
//! check, or an untrusted directory that was empty when checked) is never run.

mod leaks;
mod net_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use net_support::World;
use rkt::networking;
use serde_json::json;

#[test]
fn the_binary_planned_is_the_binary_run_and_recorded() {
    let w = World::new();
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
    let nets = networking::setup_planned(&pod, &opts, planned).unwrap();
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
