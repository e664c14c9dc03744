//! A pod on a dual-stack network (the real `ptp` with `host-local` ranges of both
//! families, as podman's default network has): `rkt list` and `rkt status` show both of
//! its addresses, while it runs and after it exited. Root only; ends with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;
use std::path::{Path, PathBuf};

use pod_support::{assert_no_netns, World};

/// Removes host-local's reservations directory of the test network, even on failure.
struct Leases(PathBuf);

impl Drop for Leases {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn list_and_status_show_both_addresses_of_a_dual_stack_network() {
    test_kit::require_root!();
    if !Path::new("/proc/sys/net/ipv6").exists() {
        eprintln!("skipping: no IPv6 in this kernel");
        return;
    }
    let name = format!("ds-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    // Dropped after the world, whose drop runs gc (host-local's DEL keeps the directory).
    let _leases = Leases(Path::new("/var/lib/cni/networks").join(&name));
    let mut world = World::new(support::RKT);
    let (v4, v6) = ("10.113.1.0/24", "fd4b:6b74:113:1::/64");
    let conf_dir = world.path("net.d");
    fs::create_dir(&conf_dir).unwrap();
    let conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": "ptp",
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": v4}], [{"subnet": v6}]]
            }
        }]
    });
    fs::write(conf_dir.join("10-ds.conflist"), conf.to_string()).unwrap();
    let g = leaks::Guard::new(world.leak_ctx().network(&name).subnet(v4).subnet(v6));
    let conf_flag = format!("--net-conf-dir={}", conf_dir.display());
    let net_flag = format!("--net={name}");

    // While it runs: from the live record.
    let (uuid, bg) = world.spawn_run(&[&conf_flag, &net_flag, "--", "sleep", "30"]);
    world.wait_running(&uuid);
    let cell = |world: &World| {
        let out = world.rkt(&["list", "--full", "--no-legend"]).run();
        out.assert_success();
        let stdout = out.stdout();
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&uuid))
            .unwrap_or_else(|| panic!("pod {uuid} not listed:\n{stdout}"))
            .to_string();
        line.split_whitespace().last().unwrap().to_string()
    };
    let running = cell(&world);
    let want = format!("{name}:ip4=10.113.1.");
    assert!(running.starts_with(&want), "{running}");
    assert!(running.contains(",ip6=fd4b:6b74:113:1::"), "{running}");
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains(&format!("networks={running}"));

    // After it exited: from what its state kept.
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(bg);
    assert_eq!(cell(&world), running);
    assert_no_netns(&uuid);
    drop(world);
    g.check();
}
