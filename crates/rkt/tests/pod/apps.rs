//! Pods of several apps, as a user runs them: `---` between apps, one network namespace
//! (and PID namespace) for all, a mount namespace and root per app, exit policies, each
//! app's status, `enter --app`, and nothing left behind when a start fails or the runner
//! is killed. Root only (the grammar test excepted); each test ends with the leak checker.

use crate::{image_common, leaks, pod_support, support};

use std::fs;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pod_support::{http_get_forwarded, mounts_under, tiny_rootfs, World};
use test_kit::{wait_for, PATIENCE};

/// `rkt status UUID` as key=value pairs.
fn status(world: &World, uuid: &str) -> Vec<(String, String)> {
    let out = world.rkt(&["status", uuid]).run();
    out.assert_success();
    out.stdout()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn app_statuses(world: &World, uuid: &str) -> Vec<(String, String)> {
    status(world, uuid)
        .into_iter()
        .filter(|(k, _)| k.starts_with("app-"))
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn two_apps_share_the_default_network_and_talk_over_localhost() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let site = world.path("site");
    fs::create_dir(&site).unwrap();
    fs::write(site.join("index.html"), "hello from web\n").unwrap();
    let shared = world.path("shared");
    fs::create_dir(&shared).unwrap();
    let web_mac = format!(
        "cat /sys/class/net/eth0/address > {}/web; exec busybox httpd -f -p 127.0.0.1:7070 -h {}",
        shared.display(),
        site.display()
    );
    let client = format!(
        "cat /sys/class/net/eth0/address > {}/client
         for i in $(seq 200); do
           if busybox wget -q -O- http://127.0.0.1:7070/; then busybox ps; exit 0; fi
           sleep 0.05
         done
         exit 1",
        shared.display()
    );
    let (site_volume, site_mount) = pod_support::shared_dir("site", &site);
    let (shared_volume, shared_mount) = pod_support::shared_dir("shared", &shared);
    let (out, uuid) = world.run_uuid(&[
        "--net=default",
        "--exit-policy=onAny",
        &site_volume,
        &shared_volume,
        "--name=web",
        &site_mount,
        &shared_mount,
        "sh",
        "-c",
        &web_mac,
        "---",
        "--name=client",
        &shared_mount,
        "sh",
        "-c",
        &client,
    ]);
    out.assert_success()
        .assert_stdout_contains("hello from web\n")
        // One PID namespace: the client's ps sees the web app.
        .assert_stdout_contains("httpd");
    let web = fs::read_to_string(shared.join("web")).unwrap();
    let client = fs::read_to_string(shared.join("client")).unwrap();
    assert_eq!(web, client, "both apps see the same eth0");
    assert!(web.trim().len() == 17, "{web:?}");
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-web", "143"), ("app-client", "0")])
    );
    assert!(status(&world, &uuid)
        .iter()
        .any(|(k, v)| k == "networks" && v.starts_with("default:ip4=172.16.28.")));
}

#[test]
fn each_exit_policy_ends_the_pod_as_it_says() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let none = "--net=none";
    // onAnyFailure (the default): a failure stops the others and is the pod's status.
    let (out, uuid) = world.run_uuid(&[
        none,
        "--name=sleeper",
        "sleep",
        "60",
        "---",
        "--name=fails",
        "sh",
        "-c",
        "exit 3",
    ]);
    out.assert_exit_code(3);
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-sleeper", "143"), ("app-fails", "3")])
    );
    // onAnyFailure, every app succeeding: 0 once all have ended.
    let (out, uuid) = world.run_uuid(&[
        none,
        "--name=slow",
        "sh",
        "-c",
        "sleep 0.3",
        "---",
        "--name=quick",
        "true",
    ]);
    out.assert_exit_code(0);
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-slow", "0"), ("app-quick", "0")])
    );
    // onAny: the first exit, even a success, stops the others.
    let (out, uuid) = world.run_uuid(&[
        none,
        "--exit-policy=onAny",
        "--name=sleeper",
        "sleep",
        "60",
        "---",
        "--name=done",
        "true",
    ]);
    out.assert_exit_code(0);
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-sleeper", "143"), ("app-done", "0")])
    );
    // untilAll: nobody is stopped; the first failure is the pod's status.
    let (out, uuid) = world.run_uuid(&[
        none,
        "--exit-policy=untilAll",
        "--name=slow",
        "sh",
        "-c",
        "sleep 0.5; exit 0",
        "---",
        "--name=fails",
        "sh",
        "-c",
        "exit 4",
    ]);
    out.assert_exit_code(4);
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-slow", "0"), ("app-fails", "4")])
    );
}

#[test]
fn three_apps_exit_statuses_show_in_status_list_and_json() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--exit-policy=untilAll",
        "--name=a",
        "true",
        "---",
        "--name=b",
        "sh",
        "-c",
        "sleep 0.2; exit 1",
        "---",
        "--name=c",
        "sh",
        "-c",
        "sleep 0.4; exit 2",
    ]);
    out.assert_exit_code(1);
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-a", "0"), ("app-b", "1"), ("app-c", "2")])
    );
    let json = world.status_json(&uuid);
    assert_eq!(json["app_names"], serde_json::json!(["a", "b", "c"]));
    for (i, (name, code)) in [("a", 0), ("b", 1), ("c", 2)].into_iter().enumerate() {
        assert_eq!(json["apps"][i]["name"], name);
        assert_eq!(json["apps"][i]["state"], "exited");
        assert_eq!(json["apps"][i]["exit_code"], code);
    }
    let list = world.rkt(&["list", "--no-legend", "--full"]).run();
    list.assert_success();
    let apps: Vec<String> = list
        .stdout()
        .lines()
        .filter(|l| l.starts_with(&uuid))
        .map(|l| l.split('\t').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(apps, ["a", "b", "c"]);
}

#[test]
fn an_app_that_cannot_start_fails_the_pod_before_any_app_runs() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (out_dir, volume, mount) = pod_support::shared_dir_in(&world, "out");
    let mark = out_dir.join("ran");
    let touch = format!("touch {}", mark.display());
    let (out, uuid) = world.run_uuid(&[
        "--net=default",
        &volume,
        "--name=first",
        &mount,
        "sh",
        "-c",
        &touch,
        "---",
        "--name=broken",
        "/nonexistent/program",
    ]);
    out.assert_exit_code(254)
        .assert_stderr_contains("app broken")
        .assert_stderr_contains("/nonexistent/program");
    assert!(!mark.exists(), "the first app ran although the pod failed");
    let st = world.status_json(&uuid);
    assert_eq!(st["state"], "exited");
    assert!(st["error"].as_str().unwrap().contains("app broken"), "{st}");
    pod_support::assert_no_netns(&uuid);
    pod_support::assert_no_lease("default", &uuid);
}

#[test]
fn enter_app_chooses_the_apps_own_root_and_stop_stops_every_app() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    for name in ["a", "b"] {
        let dir = world.path(name);
        tiny_rootfs(&dir);
        fs::write(dir.join("marker"), format!("root of {name}\n")).unwrap();
    }
    let (a, b) = (
        format!("--rootfs={}", world.path("a").display()),
        format!("--rootfs={}", world.path("b").display()),
    );
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        "--name=a",
        &a,
        "/bin/sleep",
        "600",
        "---",
        "--name=b",
        &b,
        "/bin/sleep",
        "600",
    ]);
    world.wait_running(&uuid);
    for name in ["a", "b"] {
        world
            .rkt(&[
                "enter",
                &format!("--app={name}"),
                &uuid,
                "/bin/cat",
                "/marker",
            ])
            .run()
            .assert_success()
            .assert_stdout_contains(&format!("root of {name}\n"));
    }
    world
        .rkt(&["enter", &uuid, "/bin/cat", "/marker"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("several apps")
        .assert_stderr_contains("a, b");
    world
        .rkt(&["enter", "--app=zz", &uuid, "/bin/true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--app=zz")
        .assert_stderr_contains("a, b");
    world.rkt(&["stop", &uuid]).run().assert_success();
    let (code, stderr) = world.wait_child(index);
    assert_eq!(code, Some(143), "{stderr}");
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-a", "143"), ("app-b", "143")])
    );
}

#[test]
fn status_shows_an_app_that_ended_while_the_others_run() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        "--exit-policy=untilAll",
        "--name=init-job",
        "sh",
        "-c",
        "exit 5",
        "---",
        "--name=server",
        "sleep",
        "600",
    ]);
    world.wait_running(&uuid);
    wait_for("both apps to run", PATIENCE, || {
        let st = status(&world, &uuid);
        let running = st.iter().any(|(k, v)| k == "state" && v == "running");
        let apps: Vec<_> = st
            .into_iter()
            .filter(|(k, _)| k.starts_with("app-"))
            .collect();
        (running && apps == pairs(&[("app-init-job", "5")])).then_some(())
    });
    let json = world.status_json(&uuid);
    assert_eq!(json["apps"][0]["state"], "exited");
    assert_eq!(json["apps"][1]["state"], "running");
    world.rkt(&["stop", &uuid]).run().assert_success();
    let (code, stderr) = world.wait_child(index);
    assert_eq!(code, Some(5), "untilAll: the first failure; {stderr}");
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-init-job", "5"), ("app-server", "143")])
    );
}

#[test]
fn prepare_then_run_prepared_runs_every_app() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world
        .rkt(&[
            "prepare",
            "--exit-policy=untilAll",
            "--name=x",
            "sh",
            "-c",
            "echo from-x",
            "---",
            "--name=y",
            "--set-env=WHO=y",
            "sh",
            "-c",
            "echo from-$WHO; exit 6",
        ])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let json = world.status_json(&uuid);
    assert_eq!(json["app_names"], serde_json::json!(["x", "y"]));
    assert_eq!(json["exit_policy"], "untilAll");
    world
        .rkt(&["run-prepared", "--net=none", &uuid])
        .run()
        .assert_exit_code(6)
        .assert_stdout_contains("from-x\n")
        .assert_stdout_contains("from-y\n");
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-x", "0"), ("app-y", "6")])
    );
}

#[test]
fn image_apps_take_their_options_after_the_image_and_get_a_root_each() {
    if !image_common::ready(
        "image_apps_take_their_options_after_the_image_and_get_a_root_each",
        &["umoci"],
    ) {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = image_common::busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    // rkt's place for app options: after the image, up to `--`.
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        &v1,
        "--name=one",
        "--working-dir=/srv/one",
        "--exec=/bin/sh",
        "--",
        "-c",
        "echo one > /only-here; cat /only-here; echo one in $(pwd)",
        "---",
        &v1,
        "--name=two",
        "--",
        "test ! -e /only-here && echo two in $(pwd)",
    ]);
    // --working-dir over the image's WorkingDir (/etc), which the other app keeps.
    out.assert_success()
        .assert_stdout_contains("one\n")
        .assert_stdout_contains("one in /srv/one\n")
        .assert_stdout_contains("two in /etc\n");
    assert_eq!(
        app_statuses(&world, &uuid),
        pairs(&[("app-one", "0"), ("app-two", "0")])
    );
    assert!(mounts_under(&world.path("data")).is_empty());
}

#[test]
fn kill_9_of_the_runner_of_two_image_apps_then_gc_leaves_nothing() {
    if !image_common::ready(
        "kill_9_of_the_runner_of_two_image_apps_then_gc_leaves_nothing",
        &["umoci"],
    ) {
        return;
    }
    let mut world = World::new(support::RKT);
    let guard = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = image_common::busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let (uuid, index) = world.spawn_run(&[
        "--net=default",
        &v1,
        "--name=one",
        "--exec=/bin/busybox",
        "--",
        "sleep",
        "600",
        "---",
        &v1,
        "--name=two",
        "--exec=/bin/busybox",
        "--",
        "sleep",
        "600",
    ]);
    world.wait_running(&uuid);
    // One overlay per image app.
    let mut mounted = mounts_under(&world.path("data"));
    mounted.sort();
    assert_eq!(mounted.len(), 2, "{mounted:?}");
    assert!(
        mounted[0].ends_with(&format!("{uuid}/apps/two/rootfs")),
        "{mounted:?}"
    );
    assert!(
        mounted[1].ends_with(&format!("{uuid}/rootfs")),
        "{mounted:?}"
    );

    let pid = world.child(index).id() as i32;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    world.wait_child(index);
    world.wait_exited(&uuid);
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
    assert!(mounts_under(&world.path("data")).is_empty());
    assert!(!world.path(&format!("data/pods/{uuid}")).exists());
    guard.check();
}

#[test]
fn mistakes_in_the_grammar_are_errors_naming_the_word_and_create_nothing() {
    let world = World::new(support::RKT);
    for (args, says) in [
        (&["---", "true"][..], "--- is not an option of `rkt"),
        (&["true", "---"][..], "--- must be followed by an app"),
        (
            &["true", "---", "--pids-limit=64", "true"][..],
            "--pids-limit is a pod option",
        ),
        (
            &["true", "---", "--private-users", "true"][..],
            "--private-users is a pod option",
        ),
        (&["true", "---", "true"][..], "both named \"true\""),
        (&["true", "---", "--bogus", "true"][..], "--bogus"),
        (
            &["true", "---", "--working-dir=rel", "true"][..],
            "--working-dir=\"rel\": must be an absolute path",
        ),
    ] {
        let mut full = vec!["prepare"];
        full.extend_from_slice(args);
        let out = world.rkt(&full).run();
        out.assert_exit_code(254).assert_stderr_contains(says);
        assert!(world.pods().is_empty(), "{args:?} created a pod");
    }
}

/// `--port=NAME:…` finds NAME among every app's exposed ports: here the second app's.
#[test]
fn a_port_name_refers_to_any_apps_exposed_port() {
    if !image_common::ready("a_port_name_refers_to_any_apps_exposed_port", &["umoci"]) {
        return;
    }
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = image_common::busybox_layout(world.root.path());
    let served = image_common::tag_exposing(&layout, "served", &["80/tcp"]);
    let held = pod_support::held_port();
    let port = held.port;
    let mut web = vec!["---", served.as_str(), "--name=web"];
    web.extend(image_common::HTTPD_ETC);
    let mut bad = vec![
        "run",
        "--net=default",
        "--port=443-tcp:8443",
        "sleep",
        "600",
    ];
    bad.extend_from_slice(&web);
    world
        .rkt(&bad)
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("app web exposes 80-tcp");
    assert!(world.pods().is_empty());

    let forward = format!("--port=80-tcp:127.0.0.1:{port}");
    let mut args = vec![
        "--net=default",
        forward.as_str(),
        "--name=idle",
        "sleep",
        "600",
    ];
    args.extend_from_slice(&web);
    let (uuid, index) = world.spawn_run(&args);
    world.wait_running(&uuid);
    let body = http_get_forwarded(port, "/second");
    assert!(body.ends_with("layer 2\n"), "{body}");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
}
