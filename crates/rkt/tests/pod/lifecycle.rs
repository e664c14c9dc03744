//! Pods through their life: prepare and run-prepared, status and list (text and JSON),
//! stop, enter, rm, gc (also after `kill -9` of `rkt run`), signals to `rkt run`, UUID
//! prefixes and `--uuid-file`. Tests that run pods need root and skip otherwise; they end
//! with the leak checker (the prepare-only ones create nothing on the host).

use crate::{leaks, pod_support, support};

use std::fs;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use pod_support::{assert_no_lease, assert_no_netns, netns_path, World};
use test_kit::{wait_for, PATIENCE};

fn prepare(world: &World, args: &[&str]) -> String {
    let mut full = vec!["prepare"];
    full.extend_from_slice(args);
    let out = world.rkt(&full).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    assert_eq!(uuid.len(), 36, "not a UUID: {uuid:?}");
    uuid
}

#[test]
fn prepared_pods_show_in_status_and_list_and_can_be_removed() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--name=web", "--", "sleep", "1"]);
    let st = world.rkt(&["status", &uuid[..8]]).run();
    st.assert_success()
        .assert_stdout_contains("state=prepared\n");
    // As rkt 1.30: a pod that has not run has no networks, pid or exited line.
    for absent in ["networks=", "pid=", "exited="] {
        assert!(!st.stdout().contains(absent), "{absent} in {}", st.stdout());
    }
    let list = world.rkt(&["list"]).run();
    list.assert_success()
        .assert_stdout_contains("UUID")
        .assert_stdout_contains("NETWORKS")
        .assert_stdout_contains(&format!("{}\tweb\t-\tprepared\t", &uuid[..8]))
        .assert_stdout_contains("prepared");
    let json = world.rkt(&["list", "--format=json"]).run().json();
    assert_eq!(json[0]["name"], uuid.as_str());
    assert_eq!(json[0]["apps"][0]["name"], "web");
    assert_eq!(json[0]["apps"][0]["exec"][0], "sleep");
    let no_legend = world.rkt(&["list", "--no-legend", "--full"]).run();
    assert!(!no_legend.stdout().contains("UUID"));
    no_legend.assert_stdout_contains(&uuid);

    world
        .rkt(&["rm", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains(&uuid);
    assert!(world.pods().is_empty());
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("no pod matches");
}

#[test]
fn uuid_prefixes_must_be_unique_and_uuid_files_work() {
    let world = World::new(support::RKT);
    let mut uuids = Vec::new();
    for _ in 0..20 {
        uuids.push(prepare(&world, &["--", "true"]));
    }
    // 20 UUIDs over 16 leading hex digits: at least two share their first digit.
    let shared = (0..16)
        .map(|d| format!("{d:x}"))
        .find(|p| uuids.iter().filter(|u| u.starts_with(p.as_str())).count() > 1)
        .unwrap();
    world
        .rkt(&["status", &shared])
        .run()
        .assert_failure()
        .assert_stderr_contains("matches several pods");
    let file = world.path("uuid");
    fs::write(&file, format!("{}\n", uuids[3])).unwrap();
    world
        .rkt(&["status", &format!("--uuid-file={}", file.display())])
        .run()
        .assert_success()
        .assert_stdout_contains("state=prepared");
    world
        .rkt(&["status", "not-hex!"])
        .run()
        .assert_failure()
        .assert_stderr_contains("not a pod UUID");
}

#[test]
fn gc_expires_prepared_pods_only_after_the_expiry() {
    let world = World::new(support::RKT);
    let uuid = prepare(&world, &["--", "true"]);
    world.rkt(&["gc"]).run().assert_success();
    assert_eq!(world.pods(), vec![uuid.clone()]);
    world.assert_gc_removes(&["--expire-prepared=0s"], &uuid);
}

#[test]
fn gc_mark_only_marks_exited_pods_garbage_and_a_later_gc_deletes_them() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let exited = prepare(&world, &["--", "true"]);
    world
        .rkt(&["run-prepared", "--net=none", &exited])
        .run()
        .assert_success();
    let prepared = prepare(&world, &["--", "true"]);
    world
        .rkt(&[
            "gc",
            "--mark-only",
            "--grace-period=0s",
            "--expire-prepared=0s",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("marked pod {exited} garbage"));
    let mut both = vec![exited.clone(), prepared.clone()];
    both.sort();
    let mut pods = world.pods();
    pods.sort();
    assert_eq!(pods, both);
    world
        .rkt(&["status", &exited])
        .run()
        .assert_stdout_contains("state=exited garbage");
    world
        .rkt(&["gc", "--mark-only=false", "--grace-period=0s"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("removed pod {exited}"));
    assert_eq!(world.pods(), vec![prepared]);
}

#[test]
fn bad_app_options_fail_without_creating_a_pod() {
    let world = World::new(support::RKT);
    world
        .rkt(&["prepare", "--set-env=NOEQUALS", "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("NAME=VALUE");
    world
        .rkt(&["prepare", "--rootfs=/nonexistent/dir", "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("/nonexistent/dir");
    assert!(world.pods().is_empty());
}

#[test]
fn run_prepared_runs_once_with_its_own_network_options() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = prepare(
        &world,
        &[
            "--set-env=GREETING=hi",
            "--",
            "sh",
            "-c",
            "echo $GREETING; hostname; exit 3",
        ],
    );
    let out = world
        .rkt(&["run-prepared", "--net=none", "--hostname=prep", &uuid[..12]])
        .run();
    out.assert_exit_code(3);
    assert_eq!(out.stdout(), "hi\nprep\n");
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains("state=exited")
        .assert_stdout_contains("app-sh=3");
    world
        .rkt(&["run-prepared", "--net=none", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("needs a prepared pod");
    assert_no_netns(&uuid);
}

#[test]
fn stop_terminates_the_app_and_force_kills_the_pod() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "1000"]);
    let pid = world.wait_running(&uuid);
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains(&format!("pid={pid}\n"));
    assert!(netns_path(&uuid).exists());
    world.rkt(&["stop", &uuid]).run().assert_success();
    let (code, _) = world.wait_child(index);
    assert_eq!(code, Some(128 + 15), "sleep dies of the forwarded SIGTERM");
    assert_no_netns(&uuid);
    // As rkt 1.30: stopping an exited pod is not an error.
    world
        .rkt(&["stop", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains("is already stopped");

    // A shell that ignores SIGTERM still goes with --force.
    let (uuid, index) =
        world.spawn_run(&["--net=none", "--", "sh", "-c", "trap '' TERM; sleep 1000"]);
    world.wait_running(&uuid);
    world
        .rkt(&["stop", "--force", &uuid])
        .run()
        .assert_success();
    let (code, _) = world.wait_child(index);
    assert_eq!(code, Some(128 + 9));
    assert_no_netns(&uuid);
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains("state=exited");
}

#[test]
fn sigterm_to_rkt_run_reaches_the_app_and_teardown_still_happens() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (uuid, index) = world.spawn_run(&["--", "sleep", "1000"]);
    world.wait_running(&uuid);
    let runner = world.child(index).id() as i32;
    kill(Pid::from_raw(runner), Signal::SIGTERM).unwrap();
    let (code, stderr) = world.wait_child(index);
    assert_eq!(code, Some(143), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_no_netns(&uuid);
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains("state=exited")
        .assert_stdout_contains("app-sleep=143");
}

#[test]
fn enter_runs_commands_in_the_pods_namespaces() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) =
        world.spawn_run(&["--net=none", "--hostname=entered", "--", "sleep", "1000"]);
    world.wait_running(&uuid);
    let out = world
        .rkt(&[
            "enter",
            &uuid[..8],
            "--",
            "sh",
            "-c",
            "hostname; ls /sys/class/net; cat /proc/1/comm; exit 5",
        ])
        .run();
    out.assert_exit_code(5);
    assert_eq!(out.stdout(), "entered\nlo\nrkt-init\n");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    world
        .rkt(&["enter", &uuid, "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("not running");
}

#[test]
fn rm_refuses_running_pods() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "1000"]);
    world.wait_running(&uuid);
    world
        .rkt(&["rm", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("is running");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(world.pods().is_empty());
    assert_no_netns(&uuid);
}

#[test]
fn gc_after_kill_9_of_rkt_run_tears_down_and_later_removes() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (uuid, index) = world.spawn_run(&["--", "sleep", "1000"]);
    let init = world.wait_running(&uuid);
    let ip = world.status_json(&uuid)["networks"][0]["ip"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ip.starts_with("172.16.28."), "{ip}");
    let cgroup = pod_support::pod_cgroup(&world, "pids", &uuid);
    assert!(cgroup.is_dir(), "no pids cgroup {}", cgroup.display());
    world.child(index).kill().unwrap();
    world.wait_child(index);
    // The pod dies with its runner (parent-death signal), but its namespace and network
    // stay until gc (or the next command that starts or lists pods, see `stop_reap`: none
    // runs here).
    pod_support::wait_gone(init);
    assert!(netns_path(&uuid).exists());
    assert_eq!(world.state(&uuid), "running");

    world
        .rkt(&["gc"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("released pod {uuid}"));
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
    assert!(!cgroup.exists(), "gc left the pod's cgroup");
    let record = world.path(&format!("data/pods/{uuid}/net-info.json"));
    assert!(!record.exists(), "network record still there");
    assert_eq!(
        world.pods(),
        vec![uuid.clone()],
        "kept for the grace period"
    );
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains("state=exited");
    world.assert_gc_removes(&["--grace-period=0s"], &uuid);
}

#[test]
fn concurrent_runs_lists_and_gcs_never_see_a_broken_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let world = &world;
                scope.spawn(move || {
                    let code = format!("exit {i}");
                    world
                        .rkt(&["run", "--net=none", "--", "sh", "-c", &code])
                        .run()
                        .assert_exit_code(i);
                })
            })
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let world = &world;
                scope.spawn(move || {
                    for _ in 0..15 {
                        world.rkt(&["list", "--format=json"]).run().assert_success();
                        world.rkt(&["gc"]).run().assert_success();
                    }
                })
            })
            .collect();
        for t in runs.into_iter().chain(readers) {
            t.join().unwrap();
        }
    });
    let list = world.rkt(&["list", "--format=json"]).run().json();
    let mut codes: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["state"], "exited");
            p["apps"][0]["exit_code"].as_i64().unwrap()
        })
        .collect();
    codes.sort();
    assert_eq!(codes, vec![0, 1, 2, 3]);
    for uuid in world.pods() {
        assert_no_netns(&uuid);
    }
}

#[test]
fn status_wait_blocks_until_exit_or_gives_up_after_its_duration() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "1000"]);
    world.wait_running(&uuid);
    world
        .rkt(&["status", "--wait=200ms", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("still running");
    let waiter = world
        .command(&["status", "--wait", &uuid])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    world.rkt(&["stop", &uuid]).run().assert_success();
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("state=exited\n"), "{text}");
    assert!(text.contains("app-sleep=143\n"), "{text}");
    world.wait_child(index);
}

#[test]
fn enter_sees_the_pods_rootfs() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    pod_support::tiny_rootfs(&rootfs);
    fs::write(rootfs.join("marker"), "inside\n").unwrap();
    let root_arg = format!("--rootfs={}", rootfs.display());
    let (uuid, index) = world.spawn_run(&["--net=none", &root_arg, "--", "/bin/sleep", "1000"]);
    world.wait_running(&uuid);
    let out = world
        .rkt(&["enter", &uuid, "--", "/bin/cat", "/marker"])
        .run();
    out.assert_success();
    assert_eq!(out.stdout(), "inside\n");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    assert_no_netns(&uuid);
}

#[test]
fn sigint_during_network_setup_aborts_the_start_and_tears_down() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let pod_support::SlowNet {
        name,
        log,
        conf_flag,
        plugin_flag,
    } = pod_support::slow_net(&world, 4000);
    let _g = leaks::Guard::new(world.leak_ctx().network(&name).plugin_log(&log));
    let net_flag = format!("--net={name}");
    let (uuid, index) =
        world.spawn_run(&[&conf_flag, &plugin_flag, &net_flag, "--", "sleep", "1000"]);
    // The ADD is under way (logged before the plugin sleeps): interrupt the runner.
    wait_for("the ADD", PATIENCE, || {
        fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("\"ADD\""))
    });
    let runner = world.child(index).id() as i32;
    kill(Pid::from_raw(runner), Signal::SIGINT).unwrap();
    let (code, stderr) = world.wait_child(index);
    assert_eq!(code, Some(254), "{stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    let calls = fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains("\"DEL\""),
        "no DEL after the interrupted start: {calls}"
    );
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "exited");
    assert!(st["apps"][0]["exit_code"].is_null(), "the app never ran");
    assert_no_netns(&uuid);
}

/// Points the pod's recorded init PID at `pid`, as if that process were its init.
fn record_init_pid(world: &World, uuid: &str, pid: u32) {
    let state_file = world.path(&format!("data/pods/{uuid}/state.json"));
    let mut st: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&state_file).unwrap()).unwrap();
    st["pid"] = pid.into();
    fs::write(&state_file, st.to_string()).unwrap();
}

/// A pod whose `rkt run` was killed, with a process still inside its network namespace.
fn orphaned_pod(world: &mut World) -> (String, std::process::Child) {
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "1000"]);
    world.wait_running(&uuid);
    let inside = std::process::Command::new("ip")
        .args(["netns", "exec", &format!("rkt-{uuid}"), "sleep", "1000"])
        .spawn()
        .unwrap();
    world.child(index).kill().unwrap();
    world.wait_child(index);
    (uuid, inside)
}

#[test]
fn gc_kills_a_surviving_init_only_if_it_is_really_in_the_pods_namespace() {
    test_kit::require_root!();
    use std::os::unix::process::ExitStatusExt;
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());

    // A recorded PID that now belongs to a process outside the pod (PID reuse) is left alone.
    let (_, mut inside) = orphaned_pod(&mut world);
    let mut outside = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    let uuid = world.pods().pop().unwrap();
    record_init_pid(&world, &uuid, outside.id());
    world.rkt(&["gc"]).run().assert_success();
    assert!(
        outside.try_wait().unwrap().is_none(),
        "gc killed a process outside the pod"
    );
    for child in [&mut outside, &mut inside] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert_no_netns(&uuid);

    // An init that survived its runner (stood in for by a process in the pod's namespace)
    // is killed before the pod is released.
    let (uuid, mut inside) = orphaned_pod(&mut world);
    record_init_pid(&world, &uuid, inside.id());
    world
        .rkt(&["gc"])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("released pod {uuid}"));
    let status = wait_for("the entered command to end", PATIENCE, || {
        inside.try_wait().unwrap()
    });
    assert_eq!(
        status.signal(),
        Some(9),
        "the stray init was not killed: {status:?}"
    );
    assert_no_netns(&uuid);
}
