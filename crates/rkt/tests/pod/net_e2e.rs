//! `rkt run` end to end with real CNI plugins: the `--net` forms, where configurations and
//! plugins are found (`--net-conf-dir`, `--net-plugin-dir`, `paths.d`, and the flags over
//! it), and the DNS and hosts variants. Root only. User networks use a renamed copy of the
//! `ptp` plugin on a subnet of their own (10.111.<n>.0/24, one per test), without
//! masquerading, and each test ends with the leak checker: its pods left nothing on the host.

use crate::{leaks, pod_support, support};

use std::fs;
use std::path::PathBuf;

use pod_support::{assert_no_lease, assert_no_netns, World};

/// A user network: configuration directory with one `ptp` network whose plugin is only
/// reachable as `<plugins>/<plugin>` (a renamed copy), on `10.111.<n>.0/24` (`n` distinct
/// per test).
struct UserNet {
    name: String,
    subnet3: String,
    conf_dir: PathBuf,
    plugin_dir: PathBuf,
}

impl UserNet {
    fn new(world: &World, n: u8) -> UserNet {
        let id = uuid::Uuid::new_v4();
        let name = format!("e2e-{}", &id.simple().to_string()[..8]);
        let subnet3 = format!("10.111.{n}");
        let conf_dir = world.path("user-net.d");
        let plugin_dir = world.path("user-plugins");
        fs::create_dir_all(&conf_dir).unwrap();
        fs::create_dir_all(&plugin_dir).unwrap();
        fs::copy("/usr/lib/cni/ptp", plugin_dir.join("renamed-ptp")).unwrap();
        let conf = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": name,
            "type": "renamed-ptp",
            "ipMasq": false,
            "ipam": {"type": "host-local", "subnet": format!("{subnet3}.0/24")}
        });
        fs::write(conf_dir.join("10-e2e.conf"), conf.to_string()).unwrap();
        UserNet {
            name,
            subnet3,
            conf_dir,
            plugin_dir,
        }
    }

    /// The leak checker's context: `world`'s pods on this network.
    fn leak_ctx(&self, world: &World) -> leaks::Ctx {
        world
            .leak_ctx()
            .network(&self.name)
            .subnet(&format!("{}.0/24", self.subnet3))
    }

    fn conf_flag(&self) -> String {
        format!("--net-conf-dir={}", self.conf_dir.display())
    }

    fn plugin_flag(&self) -> String {
        format!("--net-plugin-dir={}", self.plugin_dir.display())
    }
}

impl Drop for UserNet {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(PathBuf::from("/var/lib/cni/networks").join(&self.name));
    }
}

const SHOW_ADDRS: &[&str] = &["--", "ip", "-o", "-4", "addr", "show", "scope", "global"];

fn args<'a>(flags: &'a [&'a str]) -> Vec<&'a str> {
    flags
        .iter()
        .copied()
        .chain(SHOW_ADDRS.iter().copied())
        .collect()
}

#[test]
fn bare_net_and_net_default_use_the_builtin_default_network() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    for flags in [&[][..], &["--net"][..], &["--net=default"][..]] {
        let (out, uuid) = world.run_uuid(&args(flags));
        out.assert_success()
            .assert_stdout_contains("eth0    inet 172.16.28.");
        assert_no_netns(&uuid);
        assert_no_lease("default", &uuid);
    }
}

#[test]
fn net_all_adds_both_builtin_networks_in_file_name_order() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(
        world
            .leak_ctx()
            .shared_network("default")
            .shared_network("default-restricted"),
    );
    let empty = world.path("empty.d");
    fs::create_dir(&empty).unwrap();
    let conf = format!("--net-conf-dir={}", empty.display());
    let (out, uuid) = world.run_uuid(&args(&[conf.as_str(), "--net=all"]));
    // 99-default-restricted.conf sorts before 99-default.conf ('-' < '.').
    out.assert_success()
        .assert_stdout_contains("eth0    inet 172.31.")
        .assert_stdout_contains("eth1    inet 172.16.28.");
    let st = world.rkt(&["status", &uuid]).run();
    st.assert_stdout_contains("networks=default-restricted:ip4=172.31.")
        .assert_stdout_contains(", default:ip4=172.16.28.");
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
    assert_no_lease("default-restricted", &uuid);
}

#[test]
fn a_renamed_plugin_is_found_only_through_net_plugin_dir_and_args_pin_the_address() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let net = UserNet::new(&world, 1);
    let _g = leaks::Guard::new(net.leak_ctx(&world));
    let (conf, plugins) = (net.conf_flag(), net.plugin_flag());
    let select = format!("--net={}:IP={}.9", net.name, net.subnet3);
    let (out, uuid) = world.run_uuid(&args(&[conf.as_str(), plugins.as_str(), select.as_str()]));
    out.assert_success()
        .assert_stdout_contains(&format!("eth0    inet {}.9/24", net.subnet3));
    let json = world.status_json(&uuid);
    assert!(json["networks"][0]["pluginPath"]
        .as_str()
        .unwrap()
        .starts_with(net.plugin_dir.to_str().unwrap()));
    assert_no_netns(&uuid);
    assert_no_lease(&net.name, &uuid);

    let plain = format!("--net={}", net.name);
    let (out, uuid) = world.run_uuid(&args(&[conf.as_str(), plain.as_str()]));
    out.assert_failure()
        .assert_stderr_contains("renamed-ptp")
        .assert_stderr_contains("not found");
    assert_no_netns(&uuid);
}

#[test]
fn paths_d_points_at_configs_and_plugins_and_the_flags_override_it() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let net = UserNet::new(&world, 2);
    let _g = leaks::Guard::new(net.leak_ctx(&world));
    let empty = world.path("no-plugins");
    fs::create_dir(&empty).unwrap();
    let paths_d = world.path("local/paths.d");
    fs::create_dir_all(&paths_d).unwrap();
    let write_paths = |plugin_dir: &PathBuf| {
        let paths = serde_json::json!({
            "rktKind": "paths",
            "rktVersion": "v1",
            "net-conf": net.conf_dir,
            "net-plugin": [plugin_dir],
        });
        fs::write(paths_d.join("net.json"), paths.to_string()).unwrap();
    };
    let select = format!("--net={}", net.name);

    write_paths(&net.plugin_dir);
    let (out, uuid) = world.run_uuid(&args(&[select.as_str()]));
    out.assert_success()
        .assert_stdout_contains(&format!("eth0    inet {}.", net.subnet3));
    assert_no_netns(&uuid);

    write_paths(&empty);
    let (out, _) = world.run_uuid(&args(&[select.as_str()]));
    out.assert_failure().assert_stderr_contains("renamed-ptp");
    let plugins = net.plugin_flag();
    let (out, uuid) = world.run_uuid(&args(&[plugins.as_str(), select.as_str()]));
    out.assert_success()
        .assert_stdout_contains(&format!("eth0    inet {}.", net.subnet3));
    assert_no_netns(&uuid);
    assert_no_lease(&net.name, &uuid);
}

#[test]
fn dns_flags_write_the_pods_resolv_conf_and_host_modes_show_the_hosts_files() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, _) = world.run_uuid(&[
        "--net=none",
        "--dns=192.0.2.53",
        "--dns-search=pods.example",
        "--dns-opt=ndots:2",
        "--",
        "cat",
        "/etc/resolv.conf",
    ]);
    out.assert_success()
        .assert_stdout_contains("nameserver 192.0.2.53")
        .assert_stdout_contains("search pods.example")
        .assert_stdout_contains("options ndots:2");

    let mut pods = 1;
    if let Ok(host_resolv) = fs::read_to_string("/etc/resolv.conf") {
        pods += 1;
        let (out, _) =
            world.run_uuid(&["--net=none", "--dns=host", "--", "cat", "/etc/resolv.conf"]);
        out.assert_success();
        assert_eq!(out.stdout(), host_resolv);
    }
    let host_hosts = fs::read_to_string("/etc/hosts").unwrap();
    pods += 1;
    let (out, _) = world.run_uuid(&[
        "--net=none",
        "--hosts-entry=host",
        "--",
        "cat",
        "/etc/hosts",
    ]);
    out.assert_success();
    assert_eq!(out.stdout(), host_hosts);

    world
        .rkt(&[
            "run",
            "--net=none",
            "--dns=host",
            "--dns=192.0.2.1",
            "--",
            "true",
        ])
        .run()
        .assert_failure()
        .assert_stderr_contains("host");
    assert_eq!(
        world.pods().len(),
        pods,
        "a bad --dns must not create a pod"
    );
}

#[test]
fn gc_tears_down_from_the_record_and_reports_what_it_cannot() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let net = UserNet::new(&world, 3);
    let _g = leaks::Guard::new(net.leak_ctx(&world));
    let (conf, plugins) = (net.conf_flag(), net.plugin_flag());
    let select = format!("--net={}", net.name);
    let (uuid, index) = world.spawn_run(&[&conf, &plugins, &select, "--", "sleep", "1000"]);
    world.wait_running(&uuid);
    world.child(index).kill().unwrap();
    world.wait_child(index);

    // The configuration is gone and the plugin has moved away: gc still knows the network
    // from the pod's record, fails on the plugin, says so, and keeps the pod for a retry.
    fs::remove_dir_all(&net.conf_dir).unwrap();
    let moved = world.path("moved-ptp");
    fs::rename(net.plugin_dir.join("renamed-ptp"), &moved).unwrap();
    let out = world.rkt(&["gc", "--grace-period=0s"]).run();
    out.assert_failure()
        .assert_stderr_contains(&uuid)
        .assert_stderr_contains("renamed-ptp");
    assert_eq!(world.pods(), vec![uuid.clone()]);

    fs::rename(&moved, net.plugin_dir.join("renamed-ptp")).unwrap();
    world.assert_gc_removes(&["--grace-period=0s"], &uuid);
    assert_no_netns(&uuid);
    assert_no_lease(&net.name, &uuid);
}
