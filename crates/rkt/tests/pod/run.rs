//! `rkt run`: the app runs in the pod's namespaces with the user's stdio, and its exit
//! status is rkt's. Root only; each test uses its own data and configuration directories
//! and ends with the leak checker (nothing of its pods left on the host).

use crate::{leaks, pod_support, support};

use std::fs;

use pod_support::{assert_no_lease, assert_no_netns, tiny_rootfs, World};

#[test]
fn exit_status_is_the_apps_and_status_reports_it() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&["--net=host", "--", "sh", "-c", "echo out; exit 7"]);
    out.assert_exit_code(7).assert_stdout_contains("out");
    let st = world.rkt(&["status", &uuid]).run();
    st.assert_success()
        .assert_stdout_contains("state=exited\n")
        .assert_stdout_contains("exited=true\n")
        .assert_stdout_contains("app-sh=7\n");
    assert_no_netns(&uuid);
}

#[test]
fn death_by_signal_gives_128_plus_the_signal() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&["--net=none", "--", "sh", "-c", "kill -9 $$"]);
    out.assert_exit_code(137);
    assert_no_netns(&uuid);
}

#[test]
fn net_none_has_only_loopback_and_it_is_up() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--",
        "sh",
        "-c",
        "ls /sys/class/net; cat /sys/class/net/lo/flags",
    ]);
    out.assert_success();
    // IFF_UP | IFF_LOOPBACK
    assert_eq!(out.stdout(), "lo\n0x9\n");
    assert!(!uuid.is_empty());
    assert_no_netns(&uuid);
}

/// The pod's mount namespace drops the host's `/run/netns`: it holds neither its own
/// namespace's bind mount nor any other pod's, so a namespace mounted or unmounted on the
/// host is not copied into every running pod (docs/PERFORMANCE.md, "A busy host").
#[test]
fn a_pods_mount_namespace_holds_no_network_namespace_mounts() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--",
        "sh",
        "-c",
        "grep -c ' /run/netns' /proc/self/mountinfo || true",
    ]);
    out.assert_success();
    assert_eq!(out.stdout(), "0\n");
    assert_no_netns(&uuid);
}

#[test]
fn net_host_shares_the_callers_network_namespace() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let host_ns = fs::read_link("/proc/self/ns/net").unwrap();
    let (out, uuid) = world.run_uuid(&["--net=host", "--", "readlink", "/proc/self/ns/net"]);
    out.assert_success();
    assert_eq!(out.stdout().trim(), host_ns.to_string_lossy());
    let (out, _) = world.run_uuid(&["--net=none", "--", "readlink", "/proc/self/ns/net"]);
    assert_ne!(out.stdout().trim(), host_ns.to_string_lossy());
    let st = world.status_json(&uuid);
    // No networks: the key is left out, as rkt's JSON did.
    assert!(st.get("networks").is_none(), "{st}");
}

#[test]
fn the_app_is_pid_2_under_the_pods_init() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, _) = world.run_uuid(&["--net=none", "--", "sh", "-c", "echo $$; cat /proc/1/comm"]);
    out.assert_success();
    assert_eq!(out.stdout(), "2\nrkt-init\n");
}

#[test]
fn hostname_defaults_to_rkt_uuid_or_the_hosts_and_can_be_set() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let host_hostname = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let (out, uuid) = world.run_uuid(&["--net=none", "--", "hostname"]);
    out.assert_success();
    assert_eq!(out.stdout().trim(), format!("rkt-{uuid}"));
    let (out, _) = world.run_uuid(&["--net=host", "--", "hostname"]);
    out.assert_success();
    assert_eq!(
        out.stdout(),
        host_hostname,
        "--net=host keeps the host's name"
    );
    let (out, _) = world.run_uuid(&[
        "--net=none",
        "--hostname=podhost",
        "--",
        "cat",
        "/etc/hosts",
    ]);
    out.assert_success().assert_stdout_contains("podhost");
    assert_eq!(
        fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        host_hostname,
        "the host's hostname changed"
    );
}

#[test]
fn pod_files_hide_the_hosts_without_changing_them() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let before = fs::read("/etc/hosts").unwrap();
    let (out, _) = world.run_uuid(&[
        "--net=none",
        "--hosts-entry=10.1.2.3=db.example",
        "--",
        "cat",
        "/etc/hosts",
    ]);
    out.assert_success().assert_stdout_contains("10.1.2.3");
    assert_eq!(fs::read("/etc/hosts").unwrap(), before);
}

#[test]
fn env_is_minimal_unless_inherited_and_set_env_wins() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--set-env=FOO=bar",
            "--set-env=HOME=/h",
            "--",
            "env",
        ])
        .env("RKT_TEST_MARKER", "leak")
        .run();
    out.assert_success()
        .assert_stdout_contains("FOO=bar\n")
        .assert_stdout_contains("HOME=/h\n")
        .assert_stdout_contains("PATH=/usr/local/sbin:");
    assert!(
        !out.stdout().contains("RKT_TEST_MARKER"),
        "{}",
        out.stdout()
    );
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--inherit-env",
            "--set-env=FOO=bar",
            "--",
            "env",
        ])
        .env("RKT_TEST_MARKER", "leak")
        .run();
    out.assert_success()
        .assert_stdout_contains("RKT_TEST_MARKER=leak\n")
        .assert_stdout_contains("FOO=bar\n");
}

#[test]
fn stdin_is_the_users() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world.output_with_stdin(&["run", "--net=host", "--", "cat"], "through the pod\n");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through the pod\n");
    assert!(out.status.success());
}

#[test]
fn rootfs_becomes_the_apps_root_with_proc_dev_and_etc_files() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    tiny_rootfs(&rootfs);
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--hostname=inroot",
        &format!("--rootfs={}", rootfs.display()),
        "--",
        "/bin/sh",
        "-c",
        "echo /*; cat /proc/1/comm; cat /etc/hosts; echo x > /dev/null && echo devnull-ok",
    ]);
    out.assert_success()
        .assert_stdout_contains("/bin /dev /etc")
        .assert_stdout_contains("rkt-init\n")
        .assert_stdout_contains("inroot")
        .assert_stdout_contains("devnull-ok");
    assert!(
        !out.stdout().contains("/work"),
        "host root visible: {}",
        out.stdout()
    );
    assert_no_netns(&uuid);
}

#[test]
fn a_missing_command_fails_and_leaves_an_exited_pod_without_namespace() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    // A path: a bare name on no PATH directory is refused before any pod exists.
    let (out, uuid) = world.run_uuid(&["--net=none", "--", "/no-such-command-xyz"]);
    out.assert_failure()
        .assert_stderr_contains("no-such-command-xyz")
        .assert_stderr_contains(&uuid);
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "exited");
    assert!(st["error"]
        .as_str()
        .unwrap()
        .contains("no-such-command-xyz"));
    assert_no_netns(&uuid);
}

#[test]
fn unknown_networks_fail_before_any_pod_exists() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world.rkt(&["run", "--net=nope,nada", "--", "true"]).run();
    out.assert_failure()
        .assert_stderr_contains("networks not found: nope, nada");
    assert!(world.pods().is_empty(), "pods left: {:?}", world.pods());
}

#[test]
fn default_network_gives_eth0_an_address_shown_by_status_and_list() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (uuid, index) = world.spawn_run(&[
        "--",
        "sh",
        "-c",
        "cat /sys/class/net/eth0/operstate; sleep 100",
    ]);
    world.wait_running(&uuid);
    let st = world.rkt(&["status", &uuid]).run();
    st.assert_success()
        .assert_stdout_contains("state=running\n")
        .assert_stdout_contains("networks=default:ip4=172.16.28.");
    let list = world.rkt(&["list", "--no-legend"]).run();
    list.assert_success()
        .assert_stdout_contains(&uuid[..8])
        .assert_stdout_contains("running")
        .assert_stdout_contains("default:ip4=172.16.28.");
    let json = world.status_json(&uuid);
    let net = &json["networks"][0];
    assert_eq!(net["netName"], "default");
    assert_eq!(net["ifName"], "eth0");
    assert!(net["pluginPath"].as_str().unwrap().ends_with("ptp"));
    world.rkt(&["stop", &uuid]).run().assert_success();
    let (code, _) = world.wait_child(index);
    assert_eq!(code, Some(143));
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
    // Exited pods keep showing the networks they had.
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains("networks=default:ip4=172.16.28.");
}

#[test]
fn failed_network_setup_rolls_back_and_names_network_and_plugin() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let conf = world.path("net.d");
    fs::create_dir(&conf).unwrap();
    // Sorts after the built-in 99-default: default is set up first, then this one fails.
    fs::write(
        conf.join("zz-broken.conf"),
        r#"{"cniVersion":"0.4.0","name":"broken","type":"no-such-plugin-xyz"}"#,
    )
    .unwrap();
    let (out, uuid) = world.run_uuid(&[
        &format!("--net-conf-dir={}", conf.display()),
        "--net=default,broken",
        "--",
        "true",
    ]);
    out.assert_failure()
        .assert_stderr_contains("\"broken\"")
        .assert_stderr_contains("no-such-plugin-xyz");
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "exited");
    assert!(st["error"].as_str().unwrap().contains("broken"));
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
}
