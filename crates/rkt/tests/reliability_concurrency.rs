//! Concurrency: many `rkt run` at once on one real network (ptp + host-local) while `rkt
//! gc`, `rkt list` and `rkt rm` run in a loop beside them: every pod runs, no two get the
//! same address, the only errors are the expected ones (rm of a running or already removed
//! pod), and nothing leaks. 8 pods in the normal test run; 64 pods and a 1,000-cycle soak
//! are `#[ignore]`d (see docs/RELIABILITY.md).

mod leaks;
mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use leaks::lab::{ptp_masq_lab, stderr, stdout, Lab, RemoveHostLocal};
use leaks::Guard;

/// A lab with one ptp network on a subnet of its own (below 10.160: apart from other files).
fn real_lab(name: &str) -> (Lab, String, String) {
    ptp_masq_lab(name, "10-c.conf", 160)
}

/// Whether an error of `rkt rm` is one of the expected ones while pods come and go.
fn expected_rm_error(err: &str) -> bool {
    ["is running", "no pod matches", "is being", "locked", "busy"]
        .iter()
        .any(|e| err.contains(e))
}

/// `pods` concurrent `rkt run`s, with gc, list and rm looping beside them.
fn storm(pods: usize) {
    let (lab, net, subnet) = real_lab("storm");
    let _hl = RemoveHostLocal(net.clone());
    let g = Guard::new(lab.ctx(&[&net]).subnet(&subnet));
    let done = AtomicBool::new(false);
    let addrs = Mutex::new(Vec::new());
    let unexpected = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        // The housekeeping loop.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                let list = lab.output(&["list", "--no-legend", "--full"]);
                if list.status.code() != Some(0) {
                    unexpected
                        .lock()
                        .unwrap()
                        .push(format!("list: {}", stderr(&list)));
                }
                for line in stdout(&list).lines() {
                    let Some(uuid) = line.split_whitespace().next() else {
                        continue;
                    };
                    let rm = lab.output(&["rm", uuid]);
                    if rm.status.code() != Some(0) && !expected_rm_error(&stderr(&rm)) {
                        unexpected
                            .lock()
                            .unwrap()
                            .push(format!("rm: {}", stderr(&rm)));
                    }
                }
                let gc = lab.output(&["gc", "--grace-period=0s"]);
                if gc.status.code() != Some(0) {
                    unexpected
                        .lock()
                        .unwrap()
                        .push(format!("gc: {}", stderr(&gc)));
                }
            }
        });
        let runners: Vec<_> = (0..pods)
            .map(|_| {
                s.spawn(|| {
                    lab.run(&[
                        &format!("--net={net}"),
                        "--",
                        "/bin/sh",
                        "-c",
                        "ip -o -4 addr show dev eth0",
                    ])
                })
            })
            .collect();
        for r in runners {
            let out = r.join().unwrap();
            if out.status.code() != Some(0) {
                unexpected.lock().unwrap().push(format!(
                    "run: {:?} {}",
                    out.status.code(),
                    stderr(&out)
                ));
                continue;
            }
            let text = stdout(&out);
            let addr = text
                .split_whitespace()
                .skip_while(|w| *w != "inet")
                .nth(1)
                .unwrap_or("")
                .to_string();
            addrs.lock().unwrap().push(addr);
        }
        done.store(true, Ordering::Relaxed);
    });
    let unexpected = unexpected.into_inner().unwrap();
    assert!(
        unexpected.is_empty(),
        "unexpected errors:\n{}",
        unexpected.join("\n")
    );
    let addrs = addrs.into_inner().unwrap();
    assert_eq!(addrs.len(), pods);
    let distinct: BTreeSet<&String> = addrs.iter().collect();
    assert_eq!(distinct.len(), pods, "duplicate addresses: {addrs:?}");
    assert!(addrs.iter().all(|a| a.starts_with("10.")), "{addrs:?}");
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    g.check();
}

#[test]
fn eight_runs_at_once_with_gc_list_and_rm_beside_them() {
    test_kit::require_root!();
    storm(8);
}

#[test]
#[ignore = "64 pods at once: a minute or two; run before each release"]
fn sixty_four_runs_at_once_with_gc_list_and_rm_beside_them() {
    test_kit::require_root!();
    storm(64);
}

#[test]
#[ignore = "1,000 sequential pod cycles: several minutes; run before each release"]
fn soak_of_1000_sequential_pod_cycles() {
    test_kit::require_root!();
    let cycles: usize = std::env::var("RKT_SOAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let (lab, net, subnet) = real_lab("soak");
    let _hl = RemoveHostLocal(net.clone());
    let g = Guard::new(lab.ctx(&[&net]).subnet(&subnet));
    for i in 0..cycles {
        let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
        assert_eq!(out.status.code(), Some(0), "cycle {i}: {}", stderr(&out));
        if i % 50 == 49 {
            let gc = lab.gc();
            assert_eq!(gc.status.code(), Some(0), "cycle {i}: {}", stderr(&gc));
            let leaks = g.leaked();
            assert!(
                leaks.is_empty(),
                "after cycle {i}:\n  {}",
                leaks.join("\n  ")
            );
        }
    }
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    g.check();
}
