//! `--private-users`, proved from inside pods: the app is root of a user namespace whose
//! ids are the pod's range of host ids (its files on the host belong to that range, host
//! root's files are nobody's to it), the pod on the default network still gets its address,
//! `rkt status` and `rkt enter` know the namespace, rm and gc remove the pod, and a host
//! without user namespaces gets a clear error before anything exists. Root only; every test
//! ends with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

use pod_support::{assert_no_netns, tiny_rootfs, World};
use test_kit::{wait_for, PATIENCE};

/// A tiny rootfs in the world with `/shared`, writable by anyone: what an app makes there
/// shows the owner it has on the host. Returns the rootfs and that directory.
fn rootfs_with_shared_dir(world: &World) -> (std::path::PathBuf, std::path::PathBuf) {
    let rootfs = world.path("rootfs");
    tiny_rootfs(&rootfs);
    let shared = rootfs.join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
    (rootfs, shared)
}

/// `0 <hostBase> 65536`, as /proc/<pid>/uid_map shows it.
fn map_fields(text: &str) -> Vec<u64> {
    text.split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect()
}

#[test]
fn root_inside_is_the_pods_range_outside() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (rootfs, shared) = rootfs_with_shared_dir(&world);
    // Host root's, writable only by host root: the pod's root is not host root.
    let locked = rootfs.join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    let file = world.path("uuid");
    let script = "cat /proc/self/uid_map /proc/self/gid_map; cat /proc/self/status; \
                  echo made > /shared/made; echo x > /locked/x || echo locked-refused";
    let out = world
        .rkt(&[
            "run",
            &format!("--uuid-file-save={}", file.display()),
            "--net=none",
            &format!("--rootfs={}", rootfs.display()),
            "--private-users",
            "--",
            "sh",
            "-c",
            script,
        ])
        .run();
    out.assert_success();
    let stdout = out.stdout();
    let uuid = fs::read_to_string(&file).unwrap();

    let iso = &world.status_json(&uuid)["isolation"];
    let base = iso["userNs"]["hostBase"]
        .as_u64()
        .expect("userNs in status");
    assert_eq!(iso["userNs"]["size"], 65536, "{iso}");
    assert!(base >= 1 << 24 && base + 65536 <= 1 << 31, "{iso}");
    let mut lines = stdout.lines();
    for map in ["uid_map", "gid_map"] {
        let line = lines.next().unwrap();
        assert_eq!(map_fields(line), [0, base, 65536], "{map}: {stdout}");
    }
    let uid = stdout.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid.split_whitespace().collect::<Vec<_>>(),
        ["Uid:", "0", "0", "0", "0"]
    );
    let made = fs::metadata(shared.join("made")).unwrap();
    assert_eq!((u64::from(made.uid()), u64::from(made.gid())), (base, base));
    assert!(stdout.contains("locked-refused"), "{stdout}");
    assert!(!locked.join("x").exists());

    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(world.pods().is_empty());
}

/// A pod of several apps: each app is root of its own user namespace, all mapped to the
/// pod's one range, so what one app makes the other owns too; `rkt enter --app` joins
/// that app's namespace.
#[test]
fn every_app_of_a_pod_of_several_is_root_of_the_pods_range() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (rootfs, shared) = rootfs_with_shared_dir(&world);
    let root = format!("--rootfs={}", rootfs.display());
    let app = |name: &str| {
        format!("cat /proc/self/uid_map /proc/self/status > /shared/{name}; exec sleep 1000")
    };
    let (a, b) = (app("a"), app("b"));
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        "--private-users",
        "--name=a",
        &root,
        "sh",
        "-c",
        &a,
        "---",
        "--name=b",
        &root,
        "sh",
        "-c",
        &b,
    ]);
    world.wait_running(&uuid);
    let base = world.status_json(&uuid)["isolation"]["userNs"]["hostBase"]
        .as_u64()
        .expect("userNs in status");
    for name in ["a", "b"] {
        let text = wait_for("the app's status file", PATIENCE, || {
            fs::read_to_string(shared.join(name))
                .ok()
                .filter(|t| t.contains("Uid:"))
        });
        let mut lines = text.lines();
        assert_eq!(
            map_fields(lines.next().unwrap()),
            [0, base, 65536],
            "{name}"
        );
        let uid = lines.find(|l| l.starts_with("Uid:")).unwrap();
        let uid: Vec<_> = uid.split_whitespace().collect();
        assert_eq!(uid, ["Uid:", "0", "0", "0", "0"], "{name}");
        let made = fs::metadata(shared.join(name)).unwrap();
        assert_eq!(u64::from(made.uid()), base, "{name}");
    }
    let out = world
        .rkt(&["enter", "--app=b", &uuid, "/bin/cat", "/proc/self/uid_map"])
        .run();
    out.assert_success();
    assert_eq!(map_fields(&out.stdout()), [0, base, 65536]);
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
}

/// Sends an ICMP echo request to 127.0.0.1 from an ICMP echo socket (what `ping` uses
/// without a raw socket) and prints the reply's type.
const PING: &str = "use Socket; alarm 5; \
    socket(my $s, PF_INET, SOCK_DGRAM, 1) or die qq(socket: $!\\n); \
    send($s, pack(q(CCnnn), 8, 0, 0, 0, 1), 0, pack_sockaddr_in(0, inet_aton(q(127.0.0.1)))) \
    or die qq(send: $!\\n); \
    defined recv($s, my $r, 64, 0) or die qq(recv: $!\\n); \
    printf qq(icmp reply type %d\\n), unpack(q(C), $r);";

/// Binds TCP port 80 on 127.0.0.1.
const BIND_80: &str = "use Socket; socket(my $s, PF_INET, SOCK_STREAM, 0) or die qq($!\\n); \
    bind($s, pack_sockaddr_in(80, inet_aton(q(127.0.0.1)))) or die qq(bind 80: $!\\n); \
    print qq(bound 80\\n);";

#[test]
fn networking_status_and_enter_work_in_a_private_users_pod() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (uuid, index) = world.spawn_run(&["--private-users", "--", "sleep", "1000"]);
    let init = world.wait_running(&uuid);
    let st = world.status_json(&uuid);
    let ip = st["networks"][0]["ip"].as_str().unwrap().to_string();
    let base = st["isolation"]["userNs"]["hostBase"].as_u64().unwrap();
    // The app's process (the init's child) is in the namespace, with the pod's map.
    let children = fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap();
    let app = children.split_whitespace().next().expect("the app runs");
    let map = fs::read_to_string(format!("/proc/{app}/uid_map")).unwrap();
    assert_eq!(map_fields(&map), [0, base, 65536]);
    let app_uid = fs::metadata(format!("/proc/{app}")).unwrap().uid();
    assert_eq!(u64::from(app_uid), base);

    // The pod's network namespace is the host user namespace's: CNI set it up from the
    // host side, and the app sees its address; its root can still ping (an ICMP echo
    // socket) and bind port 80.
    let script = format!(
        "cat /proc/self/uid_map; id -u; ip -4 -o addr show; perl -e '{PING}'; \
         perl -e '{BIND_80}'"
    );
    let out = world
        .rkt(&["enter", &uuid, "--", "sh", "-c", &script])
        .run();
    out.assert_success();
    let stdout = out.stdout();
    let mut lines = stdout.lines();
    assert_eq!(map_fields(lines.next().unwrap()), [0, base, 65536]);
    assert_eq!(lines.next(), Some("0"));
    assert!(
        stdout.contains(&format!("inet {ip}/")),
        "{ip} not in {stdout}"
    );
    assert!(stdout.contains("icmp reply type 0\n"), "{stdout}");
    assert!(stdout.contains("bound 80\n"), "{stdout}");

    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    world.wait_exited(&uuid);
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
    assert!(world.pods().is_empty());
    assert_no_netns(&uuid);
    pod_support::assert_no_lease("default", &uuid);
}

#[test]
fn disabled_user_namespaces_are_a_clear_error_before_the_pod_exists() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let args = ["run", "--private-users", "--", "echo", "app-ran"];
    // The host's limit turned to 0 for this run only (writing the sysctl would turn user
    // namespaces off for the whole host, and some hosts refuse it): a file holding 0
    // mounted over it in a mount namespace of the run's own.
    let zero = world.path("max_user_namespaces");
    fs::write(&zero, "0\n").unwrap();
    let rkt = world.command(&args);
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind {} {LIMIT} && exec \"$@\"",
            zero.display()
        ))
        .arg("sh")
        .arg(rkt.get_program())
        .args(rkt.get_args())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(254), "{stderr}");
    assert!(
        stderr.contains("user namespaces are disabled") && stderr.contains(LIMIT),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("app-ran"));
    assert!(world.pods().is_empty());
    // The same run works with the host's limit.
    world
        .rkt(&args)
        .run()
        .assert_success()
        .assert_stdout_contains("app-ran");
}

const LIMIT: &str = "/proc/sys/user/max_user_namespaces";

#[test]
fn prepare_records_the_flag_and_run_prepared_maps_the_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world
        .rkt(&[
            "prepare",
            "--private-users",
            "--",
            "cat",
            "/proc/self/uid_map",
        ])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let run = world.rkt(&["run-prepared", "--net=none", &uuid]).run();
    run.assert_success();
    let base = world.status_json(&uuid)["isolation"]["userNs"]["hostBase"]
        .as_u64()
        .expect("userNs in status");
    assert_eq!(map_fields(&run.stdout()), [0, base, 65536]);
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(world.pods().is_empty());
}
