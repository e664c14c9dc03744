//! `rkt run --detach`: the pod outlives the command that started it, and the caller that
//! ran it; its output is kept in its log; `rkt stop` ends it cleanly. Root only; each test
//! ends with the leak checker.

use crate::{leaks, support};

use std::os::unix::process::CommandExt;
use std::process::Stdio;

use support::World;
use test_kit::{wait_for, PATIENCE};

/// Whether the process `pid` exists.
fn alive(pid: i64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn detach_returns_once_the_app_runs_and_the_pod_runs_on_until_stopped() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let out = world
        .rkt(&[
            "run",
            "--detach",
            "--net=default",
            "--",
            "sh",
            "-c",
            "echo started; echo oops >&2; exec sleep 600",
        ])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    assert_eq!(
        world.pods(),
        vec![uuid.clone()],
        "the UUID printed is the pod's"
    );
    let pid = world.wait_running(&uuid);
    // Its output is in its log, per stream.
    let logs = wait_for("the app's first lines in its log", PATIENCE, || {
        let logs = world.rkt(&["logs", &uuid]).run();
        (logs.stdout() == "started\n" && logs.stderr() == "oops\n").then_some(logs)
    });
    logs.assert_success();
    world.rkt(&["stop", &uuid]).run().assert_success();
    let status = wait_for("the pod to exit", PATIENCE, || {
        let st = world.status_json(&uuid);
        (st["state"] == "exited").then_some(st)
    });
    assert!(!alive(pid), "the pod's init is gone");
    // The app was stopped by the SIGTERM `rkt stop` sends.
    assert_eq!(status["apps"][0]["exit_code"], 128 + 15, "{status}");
}

#[test]
fn a_detached_pod_survives_its_caller_killed() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid_file = world.path("uuid");
    // The caller: a shell in a process group of its own that starts the pod detached and
    // then waits; the whole group is killed.
    let script = format!(
        "{rkt} {globals} run --detach --net=none --uuid-file-save={file} -- sleep 600 \
         && exec sleep 600",
        rkt = support::RKT,
        globals = world.globals().join(" "),
        file = uuid_file.display(),
    );
    let mut caller = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let uuid = wait_for("the pod's UUID", PATIENCE, || {
        std::fs::read_to_string(&uuid_file)
            .ok()
            .filter(|u| !u.is_empty())
    });
    let pid = world.wait_running(&uuid);
    // SAFETY: kill(2) has no memory effects; the group is the caller's alone.
    unsafe { libc::kill(-(caller.id() as i32), libc::SIGKILL) };
    caller.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "running", "{st}");
    assert!(alive(pid));
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the pod to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
    assert!(!alive(pid));
}

#[test]
fn a_detached_start_that_fails_says_why_and_leaves_nothing() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    world
        .rkt(&["run", "--detach", "--net=nosuchnet", "--", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("networks not found: nosuchnet");
    world
        .rkt(&["run", "--detach", "--net=none", "--", "/no/such/program"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("/no/such/program");
    world
        .rkt(&["run", "--detach", "--stdout=tty", "--", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--stdout=tty with --detach");
    // Only the start that reached the stage left a pod: exited, saying why.
    let pods = world.pods();
    assert_eq!(pods.len(), 1, "{pods:?}");
    let st = world.status_json(&pods[0]);
    assert_eq!(st["state"], "exited", "{st}");
    assert!(
        st["error"]
            .as_str()
            .unwrap_or("")
            .contains("/no/such/program"),
        "{st}"
    );
}
