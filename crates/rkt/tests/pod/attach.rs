//! `rkt attach` to a sandbox's apps: a `stream` app's output reaching every attached client
//! and its stdin reaching the app; a `tty` app driven through a terminal (a pty the test
//! opens), resized with it, detached from and attached to again while it runs. Root only;
//! each test ends with the leak checker.

use crate::{leaks, support};

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::World;
use test_kit::{wait_for, PATIENCE};

fn sandbox(world: &World) -> String {
    let out = world.rkt(&["app", "sandbox", "--net=none"]).run();
    out.assert_success();
    out.stdout().trim().to_string()
}

fn app_state(world: &World, uuid: &str, name: &str) -> String {
    let out = world
        .rkt(&["app", "status", uuid, "--app", name, "--format=json"])
        .run();
    out.assert_success();
    out.json()["state"].as_str().unwrap().to_string()
}

fn stop(world: &World, uuid: &str) {
    world.rkt(&["stop", uuid]).run().assert_success();
    wait_for("the sandbox to exit", PATIENCE, || {
        (world.status_json(uuid)["state"] == "exited").then_some(())
    });
}

/// Reads from the terminal's master until what was read contains `needle`; the text.
fn read_until(master: &mut std::fs::File, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&text).contains(needle) {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} on the terminal; it showed {:?}",
            String::from_utf8_lossy(&text)
        );
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(master),
            nix::poll::PollFlags::POLLIN,
        )];
        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(200u16)).unwrap_or(0) == 0 {
            continue;
        }
        match master.read(&mut buf) {
            Ok(0) | Err(_) => std::thread::sleep(Duration::from_millis(20)),
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// `rkt attach` on the terminal `slave` (its stdin, stdout and stderr).
fn attach_on(world: &World, uuid: &str, name: &str, slave: &OwnedFd) -> Child {
    let io = || Stdio::from(slave.try_clone().unwrap());
    world
        .command(&["attach", uuid, "--app", name])
        .stdin(io())
        .stdout(io())
        .stderr(io())
        .spawn()
        .unwrap()
}

#[test]
fn a_tty_app_is_driven_through_a_terminal_detached_from_and_attached_again() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world);
    let script = "read a; echo \"size $(stty size) got $a\"; read b; echo \"second $b\"";
    world
        .rkt(&[
            "app",
            "add",
            &uuid,
            "--name=term",
            "--stdin=tty",
            "--stdout=tty",
            "--stderr=tty",
            "--",
            "sh",
            "-c",
            script,
        ])
        .run()
        .assert_success();
    world
        .rkt(&["app", "start", &uuid, "--app=term"])
        .run()
        .assert_success();
    let pty = test_kit::pty::open(Some((33, 111)));
    let mut master = std::fs::File::from(pty.master.try_clone().unwrap());
    let mut first = attach_on(&world, &uuid, "term", &pty.slave);
    // Give rkt time to send the size before the app reads it.
    std::thread::sleep(Duration::from_millis(500));
    master.write_all(b"hello\r").unwrap();
    let shown = read_until(&mut master, "got hello");
    assert!(shown.contains("size 33 111 got hello"), "{shown:?}");
    // Ctrl-P Ctrl-Q: rkt detaches, the app runs on.
    master.write_all(&[0x10, 0x11]).unwrap();
    let status = wait_for("rkt attach to detach", PATIENCE, || {
        first.try_wait().unwrap()
    });
    assert!(status.success(), "{status}");
    assert_eq!(app_state(&world, &uuid, "term"), "running");
    // Attached again, on a terminal of another size: the app reads from it.
    let pty2 = test_kit::pty::open(Some((20, 70)));
    let mut master2 = std::fs::File::from(pty2.master.try_clone().unwrap());
    let mut second = attach_on(&world, &uuid, "term", &pty2.slave);
    std::thread::sleep(Duration::from_millis(500));
    master2.write_all(b"again\r").unwrap();
    read_until(&mut master2, "second again");
    // The app ends: so does the attach.
    let status = wait_for("rkt attach to end with the app", PATIENCE, || {
        second.try_wait().unwrap()
    });
    assert!(status.success(), "{status}");
    drop((pty, pty2));
    stop(&world, &uuid);
}

#[test]
fn a_stream_apps_output_reaches_every_client_and_its_stdin_the_app() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let uuid = sandbox(&world);
    let script = "while read l; do echo \"out $l\"; echo \"err $l\" >&2; done; echo bye";
    world
        .rkt(&[
            "app",
            "add",
            &uuid,
            "--name=echo",
            "--stdin=stream",
            "--stdout=stream",
            "--stderr=stream",
            "--",
            "sh",
            "-c",
            script,
        ])
        .run()
        .assert_success();
    world
        .rkt(&["app", "start", &uuid, "--app=echo"])
        .run()
        .assert_success();
    let list = world
        .rkt(&["attach", &uuid, "--app=echo", "--mode=list"])
        .run();
    assert_eq!(list.stdout(), "stdin\nstdout\nstderr\n");
    // A watcher attached to the output only, and a writer.
    let watcher = world
        .command(&["attach", &uuid, "--app=echo", "--mode=stdout"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The watcher is connected once it has said nothing and is still there.
    std::thread::sleep(Duration::from_millis(300));
    let mut writer = world
        .command(&["attach", &uuid, "--app=echo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = writer.stdin.take().unwrap();
    input.write_all(b"one\ntwo\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The writer leaves (its stdin ends); the app keeps running, reading.
    drop(input);
    writer.wait().unwrap();
    // The end of the writer's stdin closed the app's (stream mode): it ends.
    wait_for("the app to end", PATIENCE, || {
        (app_state(&world, &uuid, "echo") == "exited").then_some(())
    });
    let watched = watcher.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&watched.stdout),
        "out one\nout two\nbye\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&watched.stderr),
        "",
        "--mode=stdout only"
    );
    // Everything is in the log too, each stream on its own.
    let logs = world.rkt(&["logs", &uuid, "--app=echo"]).run();
    assert_eq!(logs.stdout(), "out one\nout two\nbye\n");
    assert_eq!(logs.stderr(), "err one\nerr two\n");
    // Nothing to attach to once it ended.
    world
        .rkt(&["attach", &uuid, "--app=echo"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("cannot be attached to");
    stop(&world, &uuid);
}
