//! How an orchestrator stops a pod (Nomad: SIGINT to `rkt run-prepared`, SIGKILL after its
//! `kill_timeout`, never `rkt gc`): SIGINT reaches the app as SIGTERM and the pod is
//! released; an app that ignores it is killed 10 s later; when the runner is killed
//! outright the app dies with it, and the next command that lists pods releases what it
//! left (namespace, veth, lease, firewall chains including portmap's, cgroups, mounts)
//! within seconds, without `rkt gc`. Prepared pods and pods still starting are left alone.
//! Root only; every test ends with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use pod_support::{assert_no_lease, assert_no_netns, held_port, World};
use test_kit::{wait_for, PATIENCE};

/// An app that says which signal ended it: `TERM` (exit 7) or `INT` (exit 8).
const SAYS_ITS_SIGNAL: &str =
    "trap 'echo TERM; exit 7' TERM; trap 'echo INT; exit 8' INT; while :; do sleep 0.1; done";

/// An app that ignores SIGTERM and SIGINT (its `sleep`s inherit that).
const IGNORES_TERM: &str = "trap '' TERM INT; while :; do sleep 0.1; done";

/// The `nat` table's rules naming pod `uuid` (portmap's DNAT, the bridge's masquerade).
fn nat_rules_of(uuid: &str) -> Vec<String> {
    let out = std::process::Command::new("iptables")
        .args(["-w", "-t", "nat", "-S"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(uuid))
        .map(str::to_string)
        .collect()
}

/// `rkt <args>` of `world` in the background, its output piped.
fn spawn(world: &World, args: &[&str]) -> Child {
    world
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The host PID of the app of a pod of one app: the only child of its init.
fn app_pid(init: i64) -> i32 {
    wait_for("the app's process", PATIENCE, || {
        let children =
            fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap_or_default();
        children.split_whitespace().next()?.parse().ok()
    })
}

fn alive(pid: i32) -> bool {
    // A zombie is dead: only its parent's wait is missing.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

fn signal(child: &Child, signal: Signal) {
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
}

#[test]
fn sigint_to_run_prepared_on_the_default_network_with_a_port_gives_the_app_sigterm_and_releases_everything(
) {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let guard = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let out = world
        .rkt(&["prepare", "--", "sh", "-c", SAYS_ITS_SIGNAL])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    guard.remember();
    let host = held_port();
    let port = format!("--port={}:80", host.port);
    let runner = spawn(&world, &["run-prepared", "--net=default", &port, &uuid]);
    world.wait_running(&uuid);
    let rules = nat_rules_of(&uuid);
    assert!(
        rules.iter().any(|r| r.contains("CNI-DN-")),
        "no portmap chain for {uuid}: {rules:#?}"
    );
    assert!(pod_support::netns_path(&uuid).exists());

    signal(&runner, Signal::SIGINT);
    let out = runner.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(7),
        "the app did not end of SIGTERM: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "TERM");
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
    assert_eq!(nat_rules_of(&uuid), Vec::<String>::new());
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains("state=exited\n")
        .assert_stdout_contains("app-sh=7\n");
    guard.check();
}

#[test]
fn an_app_that_ignores_sigterm_is_killed_10_s_after_sigint_and_its_pod_released() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let file = world.path("uuid-ignores");
    let save = format!("--uuid-file-save={}", file.display());
    let runner = spawn(&world, &["run", &save, "--", "sh", "-c", IGNORES_TERM]);
    let uuid = wait_for("the UUID", PATIENCE, || {
        fs::read_to_string(&file).ok().filter(|s| !s.is_empty())
    });
    world.wait_running(&uuid);
    let sent = Instant::now();
    signal(&runner, Signal::SIGINT);
    let out = runner.wait_with_output().unwrap();
    let took = sent.elapsed();
    assert_eq!(
        out.status.code(),
        Some(128 + 9),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(20),
        "killed {took:?} after SIGINT, not 10 s"
    );
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
}

#[test]
fn after_sigkill_of_the_runner_the_app_is_gone_and_the_next_list_releases_the_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let guard = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let file = world.path("uuid-killed");
    let save = format!("--uuid-file-save={}", file.display());
    let host = held_port();
    let port = format!("--port={}:80", host.port);
    let mut runner = spawn(
        &world,
        &["run", &save, &port, "--", "sh", "-c", IGNORES_TERM],
    );
    let uuid = wait_for("the UUID", PATIENCE, || {
        fs::read_to_string(&file).ok().filter(|s| !s.is_empty())
    });
    guard.remember();
    let init = world.wait_running(&uuid);
    let app = app_pid(init);
    let cgroup = pod_support::pod_cgroup(&world, "pids", &uuid);
    assert!(cgroup.is_dir());
    assert!(!nat_rules_of(&uuid).is_empty());

    // As Nomad stops a task whose app ignores the stop: SIGINT, then SIGKILL.
    signal(&runner, Signal::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(app), "the app ignores SIGTERM and should still run");
    runner.kill().unwrap();
    runner.wait().unwrap();
    wait_for("the app to die with its runner", PATIENCE, || {
        (!alive(app) && !alive(init as i32)).then_some(())
    });
    // Nothing released yet: no rkt command has run since.
    assert!(pod_support::netns_path(&uuid).exists());
    assert_eq!(world.state(&uuid), "running");

    let listed = Instant::now();
    world.rkt(&["list"]).run().assert_success();
    wait_for("the host to be clean after `rkt list`", PATIENCE, || {
        guard.leaked().is_empty().then_some(())
    });
    let took = listed.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "released {took:?} after list"
    );
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
    assert_eq!(nat_rules_of(&uuid), Vec::<String>::new());
    assert!(!cgroup.exists(), "{} left", cgroup.display());
    assert!(!world.data().join("pods/.running").join(&uuid).exists());
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "exited");
    assert_eq!(
        st["runner_died"], false,
        "released, so no longer a dead runner's"
    );
    // gc finds nothing left to release.
    world
        .rkt(&["gc"])
        .run()
        .assert_success()
        .assert_stderr_lacks("rkt: gc:");
}

#[test]
fn prepared_pods_and_pods_still_starting_are_not_taken_for_dead() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let pod_support::SlowNet {
        name,
        log,
        conf_flag,
        plugin_flag,
    } = pod_support::slow_net(&world, 1500);
    let _g = leaks::Guard::new(world.leak_ctx().network(&name).plugin_log(&log));

    let out = world.rkt(&["prepare", "--", "sleep", "1000"]).run();
    out.assert_success();
    let prepared = out.stdout().trim().to_string();

    let file = world.path("uuid-slow");
    let save = format!("--uuid-file-save={}", file.display());
    let net = format!("--net={name}");
    let args = [
        "run",
        save.as_str(),
        &conf_flag,
        &plugin_flag,
        &net,
        "--",
        "sleep",
        "1000",
    ];
    let mut runner = spawn(&world, &args);
    let uuid = wait_for("the UUID", PATIENCE, || {
        fs::read_to_string(&file).ok().filter(|s| !s.is_empty())
    });
    // While its ADD sleeps, commands that look for dead pods come and go.
    wait_for("the ADD", PATIENCE, || {
        fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains("\"ADD\""))
    });
    for _ in 0..5 {
        world.rkt(&["list"]).run().assert_success();
        world.rkt(&["status", &uuid]).run().assert_success();
        std::thread::sleep(Duration::from_millis(100));
    }
    world.wait_running(&uuid);
    let calls = fs::read_to_string(&log).unwrap();
    assert!(
        !calls.contains("\"DEL\""),
        "a starting pod was released: {calls}"
    );
    assert_eq!(world.state(&prepared), "prepared");
    assert!(!world.data().join("pods/.running").join(&prepared).exists());

    world.rkt(&["stop", &uuid]).run().assert_success();
    let status = runner.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert_no_netns(&uuid);
    let calls = fs::read_to_string(&log).unwrap();
    let dels = calls
        .lines()
        .filter(|l| l.contains("\"command\":\"DEL\""))
        .count();
    assert_eq!(dels, 1, "{calls}");
}
