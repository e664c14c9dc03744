//! Pod isolation, proved from inside pods: with the defaults, every escape the escape probe
//! (`crates/escape-probe`) attempts fails with a permission error while ordinary root
//! programs keep working; `--insecure-options=all-run` lets the same attempts through (so
//! the probe can tell); the flags change what they say; bad flags and a filter that cannot
//! be applied fail before the app runs, leaving nothing behind. Root only; every test ends
//! with the leak checker.

use crate::{leaks, net_support, pod_support, support};

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pod_support::{assert_no_netns, escape_probe as probe, pod_cgroup, tiny_rootfs, World};

/// Copies `bin` to `<rootfs>/<to>` with the libraries it loads (found with ldd).
fn copy_with_libraries(bin: &Path, rootfs: &Path, to: &str) {
    fs::copy(bin, rootfs.join(to)).unwrap();
    let ldd = Command::new("ldd").arg(bin).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        if let Some(lib) = line.split_whitespace().find(|w| w.starts_with('/')) {
            let dest = rootfs.join(&lib[1..]);
            fs::create_dir_all(dest.parent().unwrap()).unwrap();
            if !dest.exists() {
                fs::copy(fs::canonicalize(lib).unwrap(), &dest).unwrap();
            }
        }
    }
}

/// What must fail inside a pod with the defaults.
const ESCAPES: [&str; 13] = [
    "mount-proc",
    "mount-sysfs",
    "mknod-block",
    "unshare-user",
    "unshare-mount",
    "clone-user",
    "init-module",
    "finit-module",
    "reboot",
    "keyctl",
    "write-sysrq",
    "write-proc-sys",
    "write-sys",
];

/// What must keep working.
const ORDINARY: [&str; 4] = ["raw-socket", "bind-80", "chown", "setuid"];

/// The probe's `check: outcome` lines.
fn outcomes(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `Name:\tvalue` lines of a /proc/<pid>/status text.
fn status_field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .trim()
        .to_string()
}

fn assert_escapes_refused(out: &BTreeMap<String, String>) {
    for check in ESCAPES {
        let got = out
            .get(check)
            .unwrap_or_else(|| panic!("no {check} in {out:?}"));
        // A kernel without magic SysRq has no /proc/sysrq-trigger to write.
        let absent_here = check == "write-sysrq" && !Path::new("/proc/sysrq-trigger").exists();
        let refused = matches!(got.as_str(), "EPERM" | "EACCES" | "EROFS")
            || (absent_here && got == "ENOENT");
        assert!(
            refused,
            "{check} gave {got}, not a permission error: {out:?}"
        );
    }
    for check in ORDINARY {
        assert_eq!(
            out.get(check).map(String::as_str),
            Some("ok"),
            "{check}: {out:?}"
        );
    }
}

const DEFAULT_CAPS: &str = "00000000a80425fb";

fn assert_default_status(status: &str) {
    for set in ["CapBnd", "CapPrm", "CapEff", "CapInh"] {
        assert_eq!(status_field(status, set), DEFAULT_CAPS, "{set}");
    }
    assert_eq!(status_field(status, "CapAmb"), "0000000000000000");
    assert_eq!(status_field(status, "Seccomp"), "2");
}

/// `sh -c '<probe> <checks>; echo ---; cat /proc/self/status'` with `probe` as given.
fn probe_script(probe: &str, checks: &[&str]) -> String {
    format!(
        "{probe} {}; echo ---; cat /proc/self/status",
        checks.join(" ")
    )
}

fn run_probe(world: &World, flags: &[&str], probe: &str) -> (String, String) {
    let checks: Vec<&str> = ESCAPES.iter().chain(&ORDINARY).copied().collect();
    let script = probe_script(probe, &checks);
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["--", "sh", "-c", &script]);
    let out = world.rkt(&args).run();
    out.assert_success();
    let stdout = out.stdout();
    let (probe_out, status) = stdout
        .split_once("---\n")
        .expect("probe output, then status");
    (probe_out.to_string(), status.to_string())
}

#[test]
fn defaults_refuse_every_escape_from_a_host_command_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let probe = probe();
    for net in ["--net=none", "--net=host"] {
        let (out, status) = run_probe(&world, &[net], &probe.display().to_string());
        assert_escapes_refused(&outcomes(&out));
        assert_default_status(&status);
    }
}

#[test]
fn defaults_refuse_every_escape_from_a_rootfs_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    tiny_rootfs(&rootfs);
    copy_with_libraries(&probe(), &rootfs, "bin/escape-probe");
    let root_flag = format!("--rootfs={}", rootfs.display());
    let (out, status) = run_probe(&world, &["--net=none", &root_flag], "/bin/escape-probe");
    assert_escapes_refused(&outcomes(&out));
    assert_default_status(&status);
    // A minimal /dev of its own: a new devpts instance (no host terminals in it).
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &root_flag,
            "--",
            "sh",
            "-c",
            "echo /dev/*; echo /dev/pts/*",
        ])
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout(),
        "/dev/fd /dev/full /dev/null /dev/ptmx /dev/pts /dev/random /dev/shm /dev/stderr \
         /dev/stdin /dev/stdout /dev/tty /dev/urandom /dev/zero\n/dev/pts/ptmx\n"
    );
}

#[test]
fn insecure_all_run_lets_the_same_attempts_through() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let script = probe_script(
        &probe().display().to_string(),
        &[
            "mount-proc",
            "mknod-block",
            "unshare-user",
            "keyctl",
            "write-proc-sys",
        ],
    );
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--insecure-options=all-run",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .run();
    out.assert_success();
    let stdout = out.stdout();
    let (probe_out, status) = stdout.split_once("---\n").unwrap();
    for (check, got) in outcomes(probe_out) {
        assert_eq!(got, "ok", "{check} with all-run");
    }
    assert_ne!(status_field(status, "CapBnd"), DEFAULT_CAPS);
    assert_eq!(status_field(status, "Seccomp"), "0");
}

#[test]
fn each_insecure_option_turns_off_its_own_part_only() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let script = probe_script(
        &probe().display().to_string(),
        &["keyctl", "write-proc-sys", "mount-proc"],
    );
    let run = |opt: &str| {
        let flag = format!("--insecure-options={opt}");
        let out = world
            .rkt(&["run", "--net=none", &flag, "--", "sh", "-c", &script])
            .run();
        out.assert_success();
        let stdout = out.stdout();
        let (probe_out, status) = stdout.split_once("---\n").unwrap();
        (outcomes(probe_out), status.to_string())
    };
    // Filter off: keyctl passes; capabilities and paths still hold.
    let (out, status) = run("seccomp");
    assert_eq!(out["keyctl"], "ok");
    assert_eq!(out["write-proc-sys"], "EROFS");
    assert_eq!(status_field(&status, "Seccomp"), "0");
    assert_eq!(status_field(&status, "CapBnd"), DEFAULT_CAPS);
    // Paths off: /proc/sys is writable again; the filter still refuses keyctl.
    let (out, _) = run("paths");
    assert_eq!(out["write-proc-sys"], "ok");
    assert_eq!(out["keyctl"], "EPERM");
    // Capabilities off: all of them, but mount is still filtered.
    let (out, status) = run("capabilities");
    assert_ne!(status_field(&status, "CapBnd"), DEFAULT_CAPS);
    assert_eq!(out["mount-proc"], "EPERM");
}

#[test]
fn caps_flags_change_the_set_and_net_admin_works_in_the_pods_netns_only() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let caps = |flags: &[&str]| {
        let mut args = vec!["run", "--net=none"];
        args.extend_from_slice(flags);
        args.extend(["--", "cat", "/proc/self/status"]);
        let out = world.rkt(&args).run();
        out.assert_success();
        status_field(&out.stdout(), "CapBnd")
    };
    assert_eq!(
        caps(&["--caps-retain=CAP_NET_ADMIN,cap_chown"]),
        "0000000000001001"
    );
    // CAP_NET_RAW (13) out of the default.
    assert_eq!(caps(&["--caps-remove=CAP_NET_RAW"]), "00000000a80405fb");

    // This test kernel may lack the dummy driver; a veth pair needs the same capability.
    let add = "ip link add d0 type veth peer name d1 && ip -o link show d0";
    let out = world
        .rkt(&["run", "--net=none", "--", "sh", "-c", add])
        .run();
    assert_ne!(out.code(), Some(0), "ip link add worked with the defaults");
    out.assert_stderr_contains("Operation not permitted");
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--caps-retain=CAP_NET_ADMIN",
            "--",
            "sh",
            "-c",
            add,
        ])
        .run();
    out.assert_success().assert_stdout_contains("d0@d1");
    let host = Command::new("ip")
        .args(["link", "show", "d0"])
        .output()
        .unwrap();
    assert!(!host.status.success(), "d0 appeared on the host");
}

#[test]
fn bad_isolation_flags_are_named_and_create_no_pod() {
    let world = World::new(support::RKT);
    let cases: [(&[&str], &str); 7] = [
        (&["--caps-retain=CAP_CHOWN,CAP_FLY"], "\"CAP_FLY\""),
        (&["--caps-remove=NOPE"], "\"NOPE\""),
        (
            &["--caps-retain=CAP_CHOWN", "--caps-remove=CAP_KILL"],
            "cannot be used with",
        ),
        (
            &["--seccomp=mode=remove,frobnicate"],
            "unknown syscall \"frobnicate\"",
        ),
        (
            &["--seccomp=mode=retain,@rkt/all"],
            "unknown group \"@rkt/all\"",
        ),
        (&["--seccomp=mode=remove,errno=EWHAT,keyctl"], "\"EWHAT\""),
        (
            &["--seccomp=mode=retain,read,exit_group"],
            "must allow execve",
        ),
    ];
    for (flags, needle) in cases {
        for cmd in ["run", "prepare"] {
            let mut args = vec![cmd];
            args.extend_from_slice(flags);
            args.extend(["--", "true"]);
            world
                .rkt(&args)
                .run()
                .assert_failure()
                .assert_stderr_contains(needle);
        }
    }
    world
        .rkt(&["run", "--insecure-options=capabilites", "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("\"capabilites\"");
    assert!(world.pods().is_empty());
}

#[test]
fn isolation_that_cannot_be_applied_fails_before_the_app_and_releases_the_network() {
    test_kit::require_root!();
    use std::os::unix::process::CommandExt;
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (out_dir, volume, mount) = pod_support::shared_dir_in(&world, "out");
    let marker = out_dir.join("app-ran");
    let file = world.path("uuid");
    let save = format!("--uuid-file-save={}", file.display());
    let touch = format!("touch {}", marker.display());
    // rkt run as if inside a container without CAP_SYS_NICE (23), asked to keep it.
    let mut cmd = world.command(&[
        "run",
        &save,
        "--net=default",
        &volume,
        &mount,
        "--caps-retain=CAP_SYS_NICE,CAP_CHOWN",
        "--",
        "sh",
        "-c",
        &touch,
    ]);
    // SAFETY: prctl only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_CAPBSET_DROP, 23, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(254), "{stderr}");
    assert!(
        stderr.contains("pod isolation") && stderr.contains("CAP_SYS_NICE"),
        "{stderr}"
    );
    assert!(!stderr.contains("CAP_CHOWN"), "{stderr}");
    assert!(!marker.exists(), "the app ran");
    let uuid = fs::read_to_string(&file).unwrap();
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "exited");
    assert!(
        st["error"].as_str().unwrap().contains("CAP_SYS_NICE"),
        "{st}"
    );
    assert_no_netns(&uuid);
    pod_support::assert_no_lease("default", &uuid);
}

#[test]
fn status_reports_the_isolation_and_enter_runs_under_it() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) =
        world.spawn_run(&["--net=none", "--caps-remove=CAP_KILL", "--", "sleep", "60"]);
    world.wait_running(&uuid);
    let st = world.status_json(&uuid);
    let iso = &st["isolation"];
    let caps = iso["capabilities"].as_array().unwrap();
    assert_eq!(caps.len(), 13, "{iso}");
    assert!(!caps.iter().any(|c| c == "CAP_KILL"), "{iso}");
    assert_eq!(iso["seccomp"]["mode"], "remove");
    assert_eq!(iso["seccomp"]["set"][0], "@rkt/default-blacklist");
    assert_eq!(iso["paths"], true);
    let list = world.rkt(&["list", "--format=json"]).run();
    list.assert_success();
    assert_eq!(list.json()[0]["isolation"], *iso);

    let probe = probe().display().to_string();
    let out = world
        .rkt(&[
            "enter",
            &uuid,
            "--",
            "sh",
            "-c",
            &probe_script(&probe, &["keyctl", "write-proc-sys"]),
        ])
        .run();
    out.assert_success();
    let stdout = out.stdout();
    let (probe_out, status) = stdout.split_once("---\n").unwrap();
    let got = outcomes(probe_out);
    assert_eq!(got["keyctl"], "EPERM");
    assert_eq!(got["write-proc-sys"], "EROFS");
    assert_eq!(status_field(status, "CapBnd"), "00000000a80425db");
    assert_eq!(status_field(status, "Seccomp"), "2");

    world.rkt(&["stop", &uuid]).run().assert_success();
    let (code, _) = world.wait_child(index);
    assert!(code.is_some());
    world.wait_exited(&uuid);

    // A pod run with all-run says so.
    let file = world.path("uuid-insecure");
    let save = format!("--uuid-file-save={}", file.display());
    world
        .rkt(&[
            "run",
            &save,
            "--net=none",
            "--insecure-options=all-run",
            "--",
            "true",
        ])
        .run()
        .assert_success();
    let uuid = fs::read_to_string(&file).unwrap();
    let iso = &world.status_json(&uuid)["isolation"];
    assert!(
        iso["capabilities"].is_null() && iso["seccomp"].is_null(),
        "{iso}"
    );
    assert_eq!(iso["paths"], false);
}

#[test]
fn tuning_still_sets_the_pods_sysctls_that_the_app_cannot_write() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let name = format!(
        "iso-tuning-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let subnet = "10.119.7.0/24";
    let _g = leaks::Guard::new(world.leak_ctx().network(&name).subnet(subnet));
    let conf_dir = world.path("net.d");
    fs::create_dir_all(&conf_dir).unwrap();
    let conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [
            {"type": "ptp", "ipMasq": false, "ipam": {"type": "host-local", "subnet": subnet}},
            {"type": "tuning", "sysctl": {"net.core.somaxconn": "777"}}
        ]
    });
    fs::write(conf_dir.join("10-tuning.conflist"), conf.to_string()).unwrap();
    let out = world
        .rkt(&[
            "run",
            &format!("--net-conf-dir={}", conf_dir.display()),
            &format!("--net={name}"),
            "--",
            "sh",
            "-c",
            "cat /proc/sys/net/core/somaxconn; echo 1 > /proc/sys/net/core/somaxconn",
        ])
        .run();
    assert_ne!(out.code(), Some(0), "the app wrote a sysctl");
    assert_eq!(out.stdout(), "777\n");
    out.assert_stderr_contains("Read-only file system");
    let _ = fs::remove_dir_all(Path::new("/var/lib/cni/networks").join(&name));
}

#[test]
fn readonly_rootfs_keeps_the_apps_root_read_only_but_its_dev_and_shm_writable() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    tiny_rootfs(&rootfs);
    let root_flag = format!("--rootfs={}", rootfs.display());
    // Into an entry of the rootfs: writes there go to it (a new entry at the top of a
    // rootfs that lacks /dev would be the pod's own, see docs/pods.md).
    let script = "echo x > /tmp/written; echo y > /dev/shm/y && cat /dev/shm/y; \
                  echo z > /dev/null && echo null-ok";
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &root_flag,
            "--readonly-rootfs",
            "--",
            "sh",
            "-c",
            script,
        ])
        .run();
    out.assert_success()
        .assert_stderr_contains("Read-only file system");
    assert_eq!(out.stdout(), "y\nnull-ok\n");
    assert!(!rootfs.join("tmp/written").exists());
    // Without the flag the same root is writable.
    world
        .rkt(&["run", "--net=none", &root_flag, "--", "sh", "-c", script])
        .run()
        .assert_success();
    assert!(rootfs.join("tmp/written").exists());
}

#[test]
fn user_and_groups_set_the_apps_identity_and_drop_its_capabilities() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let status = |flags: &[&str]| {
        let mut args = vec!["run", "--net=none"];
        args.extend_from_slice(flags);
        args.extend(["--", "cat", "/proc/self/status"]);
        let out = world.rkt(&args).run();
        out.assert_success();
        out.stdout()
    };
    // Numbers, on a host-command pod.
    let st = status(&[
        "--user=65534",
        "--group=65534",
        "--supplementary-gids=100,101",
    ]);
    assert_eq!(status_field(&st, "Uid"), "65534\t65534\t65534\t65534");
    assert_eq!(status_field(&st, "Gid"), "65534\t65534\t65534\t65534");
    assert_eq!(status_field(&st, "Groups"), "100 101");
    assert_eq!(status_field(&st, "CapEff"), "0000000000000000");
    assert_eq!(status_field(&st, "CapPrm"), "0000000000000000");
    assert_eq!(status_field(&st, "CapBnd"), DEFAULT_CAPS);
    assert_eq!(status_field(&st, "Seccomp"), "2");

    // Names, from the rootfs's own files; the primary group comes with the user.
    let rootfs = world.path("rootfs");
    tiny_rootfs(&rootfs);
    fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\napp:x:1234:2345::/:/bin/sh\n",
    )
    .unwrap();
    fs::write(rootfs.join("etc/group"), "root:x:0:\nwheel:x:3456:\n").unwrap();
    let root_flag = format!("--rootfs={}", rootfs.display());
    let st = status(&[&root_flag, "--user=app"]);
    assert_eq!(status_field(&st, "Uid"), "1234\t1234\t1234\t1234");
    assert_eq!(status_field(&st, "Gid"), "2345\t2345\t2345\t2345");
    let st = status(&[&root_flag, "--user=app", "--group=wheel"]);
    assert_eq!(status_field(&st, "Gid"), "3456\t3456\t3456\t3456");
    // A name only the host knows is not the rootfs's.
    world
        .rkt(&["run", &root_flag, "--user=nobody", "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("--user=nobody: no such user in")
        .assert_stderr_contains("etc/passwd");

    // Retained explicitly, a non-root app keeps a capability: port 80 as nobody.
    let probe = probe().display().to_string();
    let bind = |flags: &[&str]| {
        let mut args = vec!["run", "--net=none", "--user=65534"];
        args.extend_from_slice(flags);
        args.extend(["--", &probe, "bind-80"]);
        let out = world.rkt(&args).run();
        out.assert_success();
        outcomes(&out.stdout())["bind-80"].clone()
    };
    assert_eq!(bind(&[]), "EACCES");
    assert_eq!(bind(&["--caps-retain=CAP_NET_BIND_SERVICE"]), "ok");
}

#[test]
fn memory_and_cpu_limits_hold_in_a_cgroup_removed_with_the_pod() {
    test_kit::require_root!();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        "--memory=64M",
        "--cpu=500m",
        "--cpu-shares=700",
        "--",
        "sleep",
        "60",
    ]);
    let pid = world.wait_running(&uuid);
    let mem = pod_cgroup(&world, "memory", &uuid);
    let cpu = pod_cgroup(&world, "cpu", &uuid);
    let read =
        |p: PathBuf| fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    if v2 {
        assert_eq!(read(mem.join("memory.max")).trim(), "67108864");
        assert_eq!(read(cpu.join("cpu.max")).trim(), "50000 100000");
        assert_eq!(read(cpu.join("cpu.weight")).trim(), "27");
    } else {
        assert_eq!(read(mem.join("memory.limit_in_bytes")).trim(), "67108864");
        assert_eq!(read(cpu.join("cpu.cfs_quota_us")).trim(), "50000");
        assert_eq!(read(cpu.join("cpu.shares")).trim(), "700");
    }
    // The pod's init (and so every process of the pod) is inside.
    let procs = read(mem.join("cgroup.procs"));
    assert!(
        procs.lines().any(|l| l == pid.to_string()),
        "{pid} not in {procs}"
    );
    let st = world.status_json(&uuid);
    assert_eq!(st["isolation"]["limits"]["memory"], 67108864);
    assert_eq!(st["isolation"]["limits"]["cpuMillis"], 500);
    assert_eq!(st["isolation"]["limits"]["cpuShares"], 700);
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    assert!(
        !mem.exists() && !cpu.exists(),
        "the pod's cgroup was left behind"
    );

    // Enforced: an app that needs more memory than its limit does not get it.
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--memory=16M",
            "--",
            "sh",
            "-c",
            "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo survived",
        ])
        .run();
    assert_ne!(out.code(), Some(0));
    assert!(!out.stdout().contains("survived"));

    // Bad values are named before any pod exists.
    for (flag, needle) in [
        ("--memory=lots", "--memory=lots"),
        ("--cpu=5m", "--cpu=5m"),
        ("--cpu-shares=1", "--cpu-shares=1"),
    ] {
        world
            .rkt(&["prepare", flag, "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(needle);
    }
}

/// rkt 1.30's per-app `--memory`, `--cpu` and `--cpu-shares` (here given to a later app):
/// that app alone is in a cgroup `app-<name>` below the pod's with those limits, the pod's
/// cgroup and its other app have none; an app's memory limit is enforced; all of it goes
/// with the pod. On cgroup v2 they are refused before any pod exists.
#[test]
fn an_apps_own_limits_hold_in_a_cgroup_of_its_own() {
    test_kit::require_root!();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let args = [
        "--net=none",
        "--exit-policy=untilAll",
        "--name=free",
        "--",
        "sleep",
        "60",
        "---",
        "--name=held",
        "--memory=64M",
        "--cpu=500m",
        "--cpu-shares=512",
        "sleep",
        "61",
    ];
    if v2 {
        let before = world.pods().len();
        let out = world.rkt(&[&["run"][..], &args].concat()).run();
        out.assert_exit_code(254)
            .assert_stderr_contains("cgroup v1")
            .assert_stderr_contains("app held");
        assert_eq!(world.pods().len(), before);
        return;
    }
    let (uuid, index) = world.spawn_run(&args);
    world.wait_running(&uuid);
    let mem = pod_cgroup(&world, "memory", &uuid);
    let cpu = pod_cgroup(&world, "cpu", &uuid);
    let read =
        |p: PathBuf| fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    // Its process joins it just before it starts its program: wait for it there.
    let held = mem.join("app-held");
    let procs = test_kit::wait_for("app held in its own cgroup", test_kit::PATIENCE, || {
        let procs = fs::read_to_string(held.join("cgroup.procs")).ok()?;
        (!procs.trim().is_empty()).then_some(procs)
    });
    let pids: Vec<&str> = procs.lines().collect();
    assert_eq!(pids.len(), 1, "{procs}");
    let cmdline = read(PathBuf::from(format!("/proc/{}/cmdline", pids[0])));
    assert_eq!(cmdline, ["sleep", "61", ""].join("\0"));
    assert_eq!(read(held.join("memory.limit_in_bytes")).trim(), "67108864");
    assert_eq!(read(cpu.join("app-held/cpu.cfs_quota_us")).trim(), "50000");
    assert_eq!(read(cpu.join("app-held/cpu.shares")).trim(), "512");
    // The pod's own cgroup: no limit of the app's; the other app is there.
    assert_ne!(read(mem.join("memory.limit_in_bytes")).trim(), "67108864");
    assert_eq!(read(cpu.join("cpu.cfs_quota_us")).trim(), "-1");
    let pod_procs = read(mem.join("cgroup.procs"));
    let free = pod_procs.lines().any(|pid| {
        fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c == ["sleep", "60", ""].join("\0"))
    });
    assert!(free, "app free is not in the pod's cgroup: {pod_procs}");
    let manifest: serde_json::Value =
        serde_json::from_str(&read(world.path(&format!("data/pods/{uuid}/pod.json")))).unwrap();
    assert_eq!(
        manifest["apps"][1]["isolators"]["ownLimits"],
        serde_json::json!({"memory": 67108864, "cpuMillis": 500, "cpuShares": 512})
    );
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    assert!(
        !mem.exists() && !cpu.exists(),
        "the pod's cgroup (and its app's) was left behind"
    );

    // Enforced on that app alone: it cannot have more than its limit, the other can.
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--exit-policy=untilAll",
            "--name=big",
            "--",
            "sh",
            "-c",
            "x=$(head -c 40000000 /dev/zero | tr '\\0' a); echo big survived",
            "---",
            "--name=small",
            "--memory=16M",
            "sh",
            "-c",
            "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo small survived",
        ])
        .run();
    assert_ne!(out.code(), Some(0));
    assert!(out.stdout().contains("big survived"), "{}", out.stdout());
    assert!(!out.stdout().contains("small survived"), "{}", out.stdout());
}

/// The probe's outcomes in a host-command pod run with `flags`.
fn probe_outcomes(world: &World, flags: &[&str], checks: &[&str]) -> BTreeMap<String, String> {
    let probe = probe().display().to_string();
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend(["--", &probe]);
    args.extend_from_slice(checks);
    let out = world.rkt(&args).run();
    out.assert_success();
    outcomes(&out.stdout())
}

#[test]
fn io_uring_and_personalities_outside_dockers_values_are_refused() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let checks = [
        "io-uring-setup",
        "personality:0",
        "personality:20008",
        "personality:ffffffff",
        // ADDR_NO_RANDOMIZE, what `setarch -R` asks for.
        "personality:40000",
    ];
    let out = probe_outcomes(&world, &["--net=none"], &checks);
    assert_eq!(out["io-uring-setup"], "EPERM", "{out:?}");
    assert_eq!(out["personality:40000"], "EPERM", "{out:?}");
    for allowed in ["personality:0", "personality:20008", "personality:ffffffff"] {
        assert_eq!(out[allowed], "ok", "{out:?}");
    }
    // Without the filter the same calls work, so it is the filter that refuses them (a
    // kernel with io_uring turned off refuses io_uring_setup anyway).
    let out = probe_outcomes(
        &world,
        &["--net=none", "--insecure-options=seccomp"],
        &checks,
    );
    assert_eq!(out["personality:40000"], "ok", "{out:?}");
    let io_uring_on =
        fs::read_to_string("/proc/sys/kernel/io_uring_disabled").map_or(true, |v| v.trim() == "0");
    if io_uring_on {
        assert_eq!(out["io-uring-setup"], "ok", "{out:?}");
    }
}

/// `fork-many:N` in a pod run with `flags`: how many children it got, and its outcome.
fn fork_many(world: &World, flags: &[&str], n: usize) -> (usize, String) {
    let check = format!("fork-many:{n}");
    let out = probe_outcomes(world, flags, &[&check]);
    let forked = out[&format!("{check} forked")].parse().unwrap();
    (forked, out[&check].clone())
}

#[test]
fn every_pod_has_a_pids_limit_and_forking_past_it_is_refused() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    // A pod without flags gets its cgroup, the default limit, and its init inside.
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "60"]);
    let pid = world.wait_running(&uuid);
    let pids = pod_cgroup(&world, "pids", &uuid);
    let read =
        |p: PathBuf| fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(read(pids.join("pids.max")).trim(), "2048");
    let procs = read(pids.join("cgroup.procs"));
    assert!(
        procs.lines().any(|l| l == pid.to_string()),
        "{pid} not in {procs}"
    );
    assert_eq!(
        world.status_json(&uuid)["isolation"]["limits"]["pids"],
        2048
    );
    // A command `rkt enter` runs counts against the pod's limit too: it is in its cgroup.
    let entered = world
        .rkt(&["enter", &uuid, "cat", "/proc/self/cgroup"])
        .run();
    entered.assert_success();
    let pids_line = entered.stdout();
    let pids_line = pids_line
        .lines()
        .find(|l| l.contains(":pids:"))
        .unwrap_or("");
    assert!(
        pids_line.ends_with(&format!("/rkt/{uuid}")),
        "{}",
        entered.stdout()
    );
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    assert!(!pids.exists(), "the pod's pids cgroup was left behind");

    // An app forking as many processes as it can stops at the limit, with EAGAIN: the pod's
    // own processes (stage, init, shell, probe) count too.
    let (forked, outcome) = fork_many(&world, &["--net=none", "--pids-limit=32"], 64);
    assert_eq!(outcome, "EAGAIN");
    assert!((20..32).contains(&forked), "forked {forked} under 32");
    let (forked, outcome) = fork_many(&world, &["--net=none"], 2100);
    assert_eq!(outcome, "EAGAIN");
    assert!((2030..2048).contains(&forked), "forked {forked} under 2048");
    // Without a limit the same app gets all it asks for: the limit is what refused it.
    let (forked, outcome) = fork_many(&world, &["--net=none", "--pids-limit=-1"], 2100);
    assert_eq!((forked, outcome.as_str()), (2100, "ok"));

    // A prepared pod keeps its limit; status shows it, "max" for none.
    let prepared = world
        .rkt(&["prepare", "--pids-limit=0", "--", "true"])
        .run();
    prepared.assert_success();
    let uuid = prepared.stdout().trim().to_string();
    world.rkt(&["run-prepared", &uuid]).run().assert_success();
    assert_eq!(
        world.status_json(&uuid)["isolation"]["limits"]["pids"],
        "max"
    );

    for bad in ["--pids-limit=lots", "--pids-limit=-2"] {
        world
            .rkt(&["run", bad, "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(bad);
    }
}

/// The CNI result of pod `uuid`'s first network, from its record.
fn first_result(world: &World, uuid: &str) -> serde_json::Value {
    let record = world.path(&format!("data/pods/{uuid}/net-info.json"));
    let entries: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&record).unwrap()).unwrap();
    entries[0]["result"].clone()
}

/// The sources of the datagrams waiting on `socket` (its read timeout ends the wait).
fn sources(socket: &std::net::UdpSocket) -> Vec<std::net::IpAddr> {
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while let Ok((_, from)) = socket.recv_from(&mut buf) {
        got.push(from.ip());
    }
    got
}

#[test]
fn a_pod_on_the_default_network_cannot_send_with_another_source_address() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let mut guard = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (victim, victim_run) = world.spawn_run(&["--net=default", "--", "sleep", "60"]);
    let (spoofer, spoofer_run) = world.spawn_run(&["--net=default", "--", "sleep", "60"]);
    world.wait_running(&victim);
    world.wait_running(&spoofer);
    let ip = |uuid: &str| {
        world.status_json(uuid)["networks"][0]["ip"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (victim_ip, own_ip) = (ip(&victim), ip(&spoofer));
    let result = first_result(&world, &spoofer);
    let gateway = result["ips"][0]["gateway"].as_str().unwrap().to_string();
    let links = net_support::host_ifaces(&[result]);
    net_support::guard_links(&mut guard, &links);
    let rp_filter = PathBuf::from(format!("/proc/sys/net/ipv4/conf/{}/rp_filter", links[0]));
    assert_eq!(fs::read_to_string(&rp_filter).unwrap().trim(), "1");
    if fs::read_to_string("/proc/sys/net/ipv4/conf/all/rp_filter")
        .unwrap()
        .trim()
        == "2"
    {
        eprintln!("skipping the packets: this host's conf/all/rp_filter is 2 (loose)");
        return;
    }

    // The host's end of the pod's link, listening; the pod writes IP headers itself.
    let socket = std::net::UdpSocket::bind((gateway.as_str(), 0)).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let port = socket.local_addr().unwrap().port();
    let probe = probe().display().to_string();
    let send = |src: &str| {
        let check = format!("spoof-udp:{src}:{gateway}:{port}");
        let out = world.rkt(&["enter", &spoofer, "--", &probe, &check]).run();
        out.assert_success();
        assert_eq!(outcomes(&out.stdout())[&check], "ok", "{check}");
    };
    send(&own_ip);
    send(&victim_ip);
    send("198.51.100.7");
    let own: std::net::IpAddr = own_ip.parse().unwrap();
    assert_eq!(
        sources(&socket),
        vec![own],
        "forged sources reached the host"
    );

    // With the link's filtering back at the kernel's default (0), the same forged packet
    // arrives: the check is what drops it.
    fs::write(&rp_filter, "0").unwrap();
    send(&victim_ip);
    let victim_ip: std::net::IpAddr = victim_ip.parse().unwrap();
    assert_eq!(sources(&socket), vec![victim_ip]);

    for (uuid, run) in [(&victim, victim_run), (&spoofer, spoofer_run)] {
        world.rkt(&["stop", uuid]).run().assert_success();
        world.wait_child(run);
    }
}
