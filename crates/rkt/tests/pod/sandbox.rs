//! Sandboxes and their apps, as an orchestrator drives them: `rkt app sandbox`, then apps
//! added, started, stopped and removed one at a time, each with its log; bad input refused
//! with nothing changed; several `rkt app` commands at once; a killed runner cleaned up by
//! gc. Root only; each test ends with the leak checker.

use crate::{image_common, leaks, support};

use std::collections::BTreeMap;
use std::fs;

use support::{Outcome, World};
use test_kit::{wait_for, PATIENCE};

/// `rkt app sandbox ARGS`: the new sandbox's UUID.
fn sandbox(world: &World, args: &[&str]) -> String {
    let mut full = vec!["app", "sandbox"];
    full.extend_from_slice(args);
    let out = world.rkt(&full).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    assert_eq!(uuid.len(), 36, "{}", out.stdout());
    uuid
}

/// `rkt app <verb> UUID ARGS`.
fn app(world: &World, verb: &str, uuid: &str, args: &[&str]) -> Outcome {
    let mut full = vec!["app", verb, uuid];
    full.extend_from_slice(args);
    world.rkt(&full).run()
}

/// Each app's state (and exit code once it exited), from `rkt app list --format=json`.
fn states(world: &World, uuid: &str) -> BTreeMap<String, String> {
    let out = app(world, "list", uuid, &["--format=json"]);
    out.assert_success();
    out.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let state = a["state"].as_str().unwrap().to_string();
            let state = match a["exit_code"].as_i64() {
                Some(code) => format!("{state} {code}"),
                None => state,
            };
            (a["name"].as_str().unwrap().to_string(), state)
        })
        .collect()
}

fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Waits until app `name` of pod `uuid` shows `state`.
fn wait_state(world: &World, uuid: &str, name: &str, state: &str) {
    wait_for(&format!("app {name} to be {state}"), PATIENCE, || {
        states(world, uuid)
            .get(name)
            .is_some_and(|s| s == state)
            .then_some(())
    });
}

/// `busybox wget` of `url` from a new app `name` of the sandbox, run to its end: its log.
fn fetch(world: &World, uuid: &str, name: &str, url: &str) -> String {
    app(
        world,
        "add",
        uuid,
        &["--name", name, "--", "busybox", "wget", "-qO-", url],
    )
    .assert_success();
    app(world, "start", uuid, &["--app", name]).assert_success();
    wait_for(&format!("app {name} to exit"), PATIENCE, || {
        states(world, uuid)
            .get(name)
            .is_some_and(|s| s.starts_with("exited"))
            .then_some(())
    });
    let logs = world.rkt(&["logs", uuid, "--app", name]).run();
    logs.assert_success();
    logs.stdout()
}

#[test]
fn apps_come_and_go_in_a_sandbox_on_the_default_network() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let uuid = sandbox(
        &world,
        &[
            "--net=default",
            "--hostname=sandy",
            "--annotation=io.kubernetes.pod.name=web",
            "--user-label=tier=front",
        ],
    );
    let st = world.status_json(&uuid);
    assert_eq!(st["annotations"]["io.kubernetes.pod.name"], "web", "{st}");
    assert_eq!(st["user_labels"]["tier"], "front", "{st}");
    let text = world.rkt(&["status", &uuid]).run();
    text.assert_stdout_contains("annotation-io.kubernetes.pod.name=web\n")
        .assert_stdout_contains("pod-user-label-tier=front\n");
    assert_eq!(st["state"], "running", "{st}");
    assert!(
        st["networks"][0]["ip"]
            .as_str()
            .unwrap()
            .starts_with("172.16.28."),
        "{st}"
    );
    assert!(
        states(&world, &uuid).is_empty(),
        "a sandbox starts without apps"
    );
    // An empty pod does not end.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(world.status_json(&uuid)["state"], "running");
    let list = world.rkt(&["list", "--no-legend"]).run();
    assert!(
        list.stdout().contains(&format!("{}\t-\t", &uuid[..8])),
        "{}",
        list.stdout()
    );

    // A server, added then started: it serves the pod's own /etc.
    app(
        &world,
        "add",
        &uuid,
        &[
            "--name=web",
            "--",
            "busybox",
            "httpd",
            "-f",
            "-p",
            "127.0.0.1:8080",
            "-h",
            "/etc",
        ],
    )
    .assert_success();
    assert_eq!(states(&world, &uuid), expect(&[("web", "created")]));
    app(&world, "start", &uuid, &["--app=web"]).assert_success();
    // Idempotent.
    app(&world, "start", &uuid, &["--app=web"]).assert_success();
    wait_state(&world, &uuid, "web", "running");
    // A client, added and started after it, reaches it over the pod's localhost.
    let body = wait_for("the server to answer", PATIENCE, || {
        let name = format!("get{}", rand_suffix());
        let body = fetch(&world, &uuid, &name, "http://127.0.0.1:8080/hostname");
        app(&world, "rm", &uuid, &["--app", &name]).assert_success();
        (body == "sandy\n").then_some(body)
    });
    assert_eq!(body, "sandy\n");

    // One app stopped and removed while another keeps serving.
    app(&world, "add", &uuid, &["--name=idle", "--", "sleep", "600"]).assert_success();
    app(&world, "start", &uuid, &["--app=idle"]).assert_success();
    app(&world, "stop", &uuid, &["--app=idle", "--timeout=5s"]).assert_success();
    assert_eq!(
        states(&world, &uuid),
        expect(&[("web", "running"), ("idle", "exited 143")])
    );
    app(&world, "rm", &uuid, &["--app=idle"]).assert_success();
    assert_eq!(states(&world, &uuid), expect(&[("web", "running")]));
    assert_eq!(
        fetch(&world, &uuid, "again", "http://127.0.0.1:8080/hostname"),
        "sandy\n"
    );

    // Re-added under the same name after rm: a new app, its output appended to the log.
    app(
        &world,
        "add",
        &uuid,
        &["--name=idle", "--", "sh", "-c", "echo second; exit 4"],
    )
    .assert_success();
    app(&world, "start", &uuid, &["--app=idle"]).assert_success();
    wait_state(&world, &uuid, "idle", "exited 4");
    let status = app(&world, "status", &uuid, &["--app=idle", "--format=json"]);
    let status = status.json();
    assert_eq!(status["state"], "exited", "{status}");
    assert!(
        status["finished"].is_string() && status["started"].is_string(),
        "{status}"
    );

    // `rkt stop` ends the sandbox: its running app is stopped with it, and recorded.
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
    assert_eq!(
        states(&world, &uuid)["web"],
        "exited 143",
        "the server got SIGTERM"
    );
}

/// A short name part no other call of this test makes.
fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::SeqCst).to_string()
}

#[test]
fn an_image_app_in_a_sandbox_gets_its_root_and_logs_and_rm_releases_it() {
    test_kit::require_root!();
    if !image_common::ready(
        "an_image_app_in_a_sandbox_gets_its_root_and_logs_and_rm_releases_it",
        &["umoci"],
    ) {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = image_common::busybox_layout(world.root.path());
    let image = format!("oci:{}:v1", layout.display());
    let uuid = sandbox(&world, &["--net=none"]);
    app(
        &world,
        "add",
        &uuid,
        &[
            "--name=img",
            &image,
            "--exec=/bin/sh",
            "--",
            "-c",
            "test -e /mine && echo kept; echo in-image; ls /bin/busybox; echo oops >&2; \
             touch /mine && echo wrote",
        ],
    )
    .assert_success();
    app(&world, "start", &uuid, &["--app=img"]).assert_success();
    wait_state(&world, &uuid, "img", "exited 0");
    let logs = world.rkt(&["logs", &uuid, "--app=img"]).run();
    assert_eq!(logs.stdout(), "in-image\n/bin/busybox\nwrote\n");
    assert_eq!(logs.stderr(), "oops\n");
    // Started again: the same root, with what it wrote.
    app(&world, "start", &uuid, &["--app=img"]).assert_success();
    wait_for("the second run", PATIENCE, || {
        let logs = world.rkt(&["logs", &uuid, "--app=img"]).run();
        logs.stdout().contains("kept\n").then_some(())
    });
    wait_state(&world, &uuid, "img", "exited 0");
    // Its root is mounted in the pod's mount namespace only, never on the host.
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let root = format!("{uuid}/apps/img");
    assert!(
        !mounts.contains(&root),
        "a sandbox app's root on the host: {mounts}"
    );
    app(&world, "rm", &uuid, &["--app=img"]).assert_success();
    assert!(!world.path(&format!("data/pods/{uuid}/apps/img")).exists());
    assert!(states(&world, &uuid).is_empty());
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
}

#[test]
fn bad_app_commands_are_refused_naming_what_is_wrong_and_change_nothing() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world, &["--net=none"]);
    app(&world, "add", &uuid, &["--name=a", "--", "sleep", "600"]).assert_success();
    let before = (
        fs::read(world.path(&format!("data/pods/{uuid}/pod.json"))).unwrap(),
        states(&world, &uuid),
    );
    let refused = |world: &World, args: &[&str], message: &str| {
        let out = world.rkt(args).run();
        out.assert_exit_code(254).assert_stderr_contains(message);
    };
    refused(
        &world,
        &["app", "start", &uuid, "--app=nope"],
        "has no app nope (its apps: a)",
    );
    refused(
        &world,
        &["app", "stop", &uuid, "--app=nope"],
        "has no app nope",
    );
    refused(
        &world,
        &["app", "status", &uuid, "--app=nope"],
        "has no app nope",
    );
    refused(
        &world,
        &["app", "add", &uuid, "--name=a", "--", "true"],
        &format!("pod {uuid} already has an app a"),
    );
    refused(
        &world,
        &["app", "add", &uuid, "--pids-limit=10", "--", "true"],
        "--pids-limit is the sandbox's",
    );
    refused(
        &world,
        &["app", "add", &uuid, "--stdout=bogus", "--", "true"],
        "--stdout=bogus: a sandbox app's stdout is one of null, log, stream, tty",
    );
    refused(
        &world,
        &[
            "app",
            "add",
            &uuid,
            "--mount=volume=v,target=/v",
            "--",
            "true",
        ],
        "names volume v, which the pod does not have",
    );
    refused(
        &world,
        &["app", "start", "ffffffff", "--app=a"],
        "no pod matches",
    );
    // Names that would be the pod's directory, or its apps'.
    for name in ["..", "."] {
        refused(
            &world,
            &["app", "add", &uuid, "--name", name, "--", "true"],
            "cannot be an app's name",
        );
    }
    refused(
        &world,
        &[
            "app",
            "add",
            &uuid,
            "--stdin=stream",
            "--stdout=null",
            "--stderr=null",
            "--",
            "cat",
        ],
        "a monitored stdin needs --stdout or --stderr",
    );
    // A removed app cannot be started.
    app(&world, "add", &uuid, &["--name=gone", "--", "true"]).assert_success();
    app(&world, "rm", &uuid, &["--app=gone"]).assert_success();
    refused(
        &world,
        &["app", "start", &uuid, "--app=gone"],
        "has no app gone",
    );
    assert_eq!(
        (
            fs::read(world.path(&format!("data/pods/{uuid}/pod.json"))).unwrap(),
            states(&world, &uuid)
        ),
        before,
        "nothing changed"
    );
    // A program the app's root lacks: added, but its start fails naming it, and it stays
    // `created`.
    app(
        &world,
        "add",
        &uuid,
        &["--name=bad", "--", "/no/such/program"],
    )
    .assert_success();
    refused(
        &world,
        &["app", "start", &uuid, "--app=bad"],
        "/no/such/program",
    );
    assert_eq!(states(&world, &uuid)["bad"], "created");
    // A pod run with its apps fixed is no sandbox.
    let (run_uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "600"]);
    world.wait_running(&run_uuid);
    refused(
        &world,
        &["app", "add", &run_uuid, "--", "true"],
        &format!("pod {run_uuid} is not a sandbox"),
    );
    world.rkt(&["stop", &run_uuid]).run().assert_success();
    world.wait_child(index);
    // A stopped sandbox takes no app.
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
    refused(
        &world,
        &["app", "add", &uuid, "--name=late", "--", "true"],
        &format!("pod {uuid} is exited"),
    );
}

#[test]
fn app_commands_at_once_and_a_stop_racing_them_leave_no_app_half_made() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world, &["--net=none"]);
    // Eight apps added, started, stopped and removed by eight processes at once.
    let run = |name: String| {
        let world = &world;
        let uuid = uuid.clone();
        move || {
            let ok = |args: &[&str]| {
                let out = world.rkt(args).run();
                assert_eq!(out.code(), Some(0), "rkt {args:?}: {}", out.stderr());
            };
            ok(&["app", "add", &uuid, "--name", &name, "--", "sleep", "600"]);
            ok(&["app", "start", &uuid, "--app", &name]);
            ok(&["app", "stop", &uuid, "--app", &name, "--timeout=5s"]);
            if name.ends_with(['0', '2', '4', '6']) {
                ok(&["app", "rm", &uuid, "--app", &name]);
            }
        }
    };
    std::thread::scope(|s| {
        for i in 0..8 {
            s.spawn(run(format!("app{i}")));
        }
    });
    let left = states(&world, &uuid);
    let expected: Vec<String> = ["app1", "app3", "app5", "app7"].map(String::from).to_vec();
    assert_eq!(
        left.keys().cloned().collect::<Vec<_>>(),
        expected,
        "{left:?}"
    );
    assert!(left.values().all(|s| s == "exited 143"), "{left:?}");

    // `rkt stop` racing adds and starts: each either succeeds or fails clearly; every app
    // recorded is whole (in the manifest and the state) and none is left running.
    std::thread::scope(|s| {
        for i in 0..6 {
            let world = &world;
            let uuid = uuid.clone();
            s.spawn(move || {
                let name = format!("late{i}");
                for args in [
                    vec!["app", "add", &uuid, "--name", &name, "--", "sleep", "600"],
                    vec!["app", "start", &uuid, "--app", &name],
                ] {
                    let out = world.rkt(&args).run();
                    match out.code() {
                        Some(0) => {}
                        Some(254) => {
                            let err = out.stderr();
                            assert!(
                                err.starts_with("rkt: ") && err.lines().count() == 1,
                                "{err}"
                            );
                            break;
                        }
                        other => panic!("rkt {args:?} exited with {other:?}: {}", out.stderr()),
                    }
                }
            });
        }
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            world.rkt(&["stop", &uuid]).run().assert_success();
        });
    });
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
    let pod = world.path(&format!("data/pods/{uuid}"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(pod.join("pod.json")).unwrap()).unwrap();
    let state: serde_json::Value =
        serde_json::from_slice(&fs::read(pod.join("state.json")).unwrap()).unwrap();
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["apps"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        names(&manifest),
        names(&state),
        "every app whole in both records"
    );
    for (name, st) in states(&world, &uuid) {
        assert!(st != "running", "app {name} is {st} in an exited pod");
    }
}

#[test]
fn kill_9_of_a_sandbox_runner_with_apps_running_then_gc_leaves_nothing() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let uuid = sandbox(&world, &["--net=default"]);
    for name in ["one", "two"] {
        app(
            &world,
            "add",
            &uuid,
            &["--name", name, "--", "sleep", "600"],
        )
        .assert_success();
        app(&world, "start", &uuid, &["--app", name]).assert_success();
    }
    let init = world.wait_running(&uuid);
    // The runner: the stage's parent, the init's grandparent.
    let parent_of = |pid: i64| -> i64 {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let runner = parent_of(parent_of(init));
    // SAFETY: kill(2) has no memory effects; the PID is the runner found above.
    unsafe { libc::kill(runner as i32, libc::SIGKILL) };
    wait_for("the pod's init to end", PATIENCE, || {
        (!std::path::Path::new(&format!("/proc/{init}")).exists()).then_some(())
    });
    world.assert_gc_removes(&["--grace-period=0s"], &uuid);
}

#[test]
fn reopen_log_after_an_outside_rename_loses_no_line() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world, &["--net=none"]);
    app(
        &world,
        "add",
        &uuid,
        &[
            "--name=talk",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 400 ]; do echo line-$i; i=$((i+1)); sleep 0.005; done",
        ],
    )
    .assert_success();
    app(&world, "start", &uuid, &["--app=talk"]).assert_success();
    let log = world.path(&format!("data/pods/{uuid}/logs/talk.log"));
    wait_for("the first lines", PATIENCE, || {
        (fs::read_to_string(&log).ok()?.lines().count() > 20).then_some(())
    });
    // What kubelet does: rename, then ask the runtime to reopen.
    let renamed = world.path("talk.log.renamed");
    fs::rename(&log, &renamed).unwrap();
    app(&world, "reopen-log", &uuid, &["--app=talk"]).assert_success();
    wait_state(&world, &uuid, "talk", "exited 0");
    let text = |p: &std::path::Path| fs::read_to_string(p).unwrap();
    let (old, new) = (text(&renamed), text(&log));
    assert!(!new.is_empty(), "the reopened log got the rest");
    let numbers: Vec<usize> = old
        .lines()
        .chain(new.lines())
        .map(|l| l.rsplit_once(" line-").unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(
        numbers,
        (0..400).collect::<Vec<_>>(),
        "every line once, in order"
    );
    // Its copier is gone with the app's streams: nothing to reopen any more.
    wait_for("the copier to end", PATIENCE, || {
        (app(&world, "reopen-log", &uuid, &["--app=talk"]).code() == Some(254)).then_some(())
    });
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
}

#[test]
fn app_exec_gives_the_commands_exit_status_and_keeps_its_streams_apart() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world, &["--net=none", "--hostname=exec-me"]);
    app(&world, "add", &uuid, &["--name=s", "--", "sleep", "600"]).assert_success();
    app(&world, "start", &uuid, &["--app=s"]).assert_success();
    let out = app(
        &world,
        "exec",
        &uuid,
        &[
            "--app=s",
            "--",
            "sh",
            "-c",
            "hostname; echo to-err >&2; exit 5",
        ],
    );
    out.assert_exit_code(5);
    assert_eq!(out.stdout(), "exec-me\n");
    assert_eq!(out.stderr(), "to-err\n");
    // A terminal is asked for, but rkt's stdin is none.
    app(&world, "exec", &uuid, &["--app=s", "--tty", "--", "true"])
        .assert_exit_code(254)
        .assert_stderr_contains("--tty needs a terminal");
    // An app that is not running cannot be entered.
    app(&world, "add", &uuid, &["--name=idle", "--", "true"]).assert_success();
    app(&world, "exec", &uuid, &["--app=idle", "--", "true"])
        .assert_exit_code(254)
        .assert_stderr_contains("is not running");
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
}

#[test]
fn an_app_with_limits_of_its_own_gets_a_cgroup_below_the_pods_gone_with_rm() {
    test_kit::require_root!();
    let root = std::path::Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        eprintln!("skipping: a sandbox app's own limits need cgroup v1");
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world, &["--net=none"]);
    app(
        &world,
        "add",
        &uuid,
        &[
            "--name=lim",
            "--memory=32M",
            "--cpu-shares=300",
            "--oom-score-adj=900",
            "--",
            "sh",
            "-c",
            "cat /proc/self/cgroup; echo oom=$(cat /proc/self/oom_score_adj); sleep 600",
        ],
    )
    .assert_success();
    app(&world, "start", &uuid, &["--app=lim"]).assert_success();
    let memory = wait_for("the app's cgroups in its log", PATIENCE, || {
        let logs = world.rkt(&["logs", &uuid, "--app=lim"]).run().stdout();
        logs.lines()
            .find_map(|l| l.split_once(":memory:").map(|(_, p)| p.to_string()))
    });
    assert!(memory.ends_with(&format!("{uuid}/app-lim")), "{memory}");
    let dir = root.join("memory").join(memory.trim_start_matches('/'));
    let limit = fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit.trim(), "33554432");
    let cpu = wait_for("the app's cpu cgroup in its log", PATIENCE, || {
        let logs = world.rkt(&["logs", &uuid, "--app=lim"]).run().stdout();
        logs.lines().find_map(|l| {
            l.split_once(":cpu:")
                .or_else(|| l.split_once(":cpu,cpuacct:"))
                .map(|(_, p)| p.to_string())
        })
    });
    let shares = root
        .join("cpu")
        .join(cpu.trim_start_matches('/'))
        .join("cpu.shares");
    assert_eq!(fs::read_to_string(&shares).unwrap().trim(), "300");
    // The app's own OOM score, set in its process (raised: needs no CAP_SYS_RESOURCE).
    let oom = wait_for("the app's OOM score in its log", PATIENCE, || {
        let logs = world.rkt(&["logs", &uuid, "--app=lim"]).run().stdout();
        logs.lines()
            .find_map(|l| l.split_once("oom=").map(|(_, v)| v.trim().to_string()))
    });
    assert_eq!(oom, "900");
    app(&world, "rm", &uuid, &["--app=lim"]).assert_success();
    assert!(!dir.exists(), "the app's cgroup goes with it");
    assert!(dir.parent().unwrap().is_dir(), "the pod's stays");
    world.rkt(&["stop", &uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(&uuid)["state"] == "exited").then_some(())
    });
}
