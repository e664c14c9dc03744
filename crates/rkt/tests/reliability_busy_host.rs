//! A busy host: plugins killed with everything they started, `rkt stop` of pods that are
//! still starting, and many pods started, stopped and collected at once without a failure
//! or a leak (issue 17).

mod leaks;

use std::time::{Duration, Instant};

use leaks::lab::{stderr, wait_for, Lab};
use leaks::Guard;
use serde_json::json;

fn require_root() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping: running pods needs root");
        return false;
    }
    true
}

/// A network whose plugin, on ADD, starts a child that writes `lease` after `delay_ms` (as
/// ptp's host-local would record an address) and then hangs.
fn allocating_net(lab: &Lab, lease: &std::path::Path, delay_ms: u64) -> String {
    let net = lab.net("alloc");
    lab.plugin(
        "alloc",
        json!({"ADD": {"spawn": {"delay_ms": delay_ms, "write": lease}, "sleep_ms": 120_000}}),
    );
    lab.conflist("10-alloc.conflist", &net, &["alloc"]);
    net
}

/// The ADD killed by the timeout takes its child along: no "lease" appears after the
/// rollback DEL.
#[test]
fn a_timed_out_add_leaves_nothing_written_after_its_rollback() {
    if !require_root() {
        return;
    }
    let lab = Lab::new();
    let lease = lab.path("lease");
    let net = allocating_net(&lab, &lease, 1500);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab
        .run_command(&[&format!("--net={net}"), "--", "/bin/true"])
        .env("RKT_NET_PLUGIN_TIMEOUT", "1s")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert_eq!(lab.call_lines(), ["ADD alloc eth0", "DEL alloc eth0"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !lease.exists(),
        "the killed ADD's child wrote after the DEL"
    );
}

/// SIGTERM to a runner whose ADD is running abandons the ADD at once: the plugin and its
/// child are killed, the DEL follows, rkt exits long before the plugin timeout.
#[test]
fn sigterm_during_add_kills_the_plugin_and_its_children_before_the_del() {
    if !require_root() {
        return;
    }
    let lab = Lab::new();
    let lease = lab.path("lease");
    let net = allocating_net(&lab, &lease, 1500);
    let _g = Guard::new(lab.ctx(&[&net]));
    let run = lab.spawn_run(&[&format!("--net={net}"), "--", "/bin/true"]);
    wait_for(|| {
        lab.call_lines()
            .first()
            .is_some_and(|c| c == "ADD alloc eth0")
            .then_some(())
    });
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = run.wait();
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(lab.call_lines(), ["ADD alloc eth0", "DEL alloc eth0"]);
    std::thread::sleep(Duration::from_millis(2000));
    assert!(
        !lease.exists(),
        "the interrupted ADD's child wrote after the DEL"
    );
}
