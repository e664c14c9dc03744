//! `--stdout=log`, `--stderr=log` and `rkt logs`: each app's output kept in its log in the
//! pod's directory (CRI log format), read back per stream, selected, followed, rotated.
//! Root only; each test ends with the leak checker.

use crate::{leaks, support};

use std::fs;
use std::path::PathBuf;

use support::World;
use test_kit::{wait_for, PATIENCE};

/// The log of app `name` of pod `uuid` in `world`.
fn log_file(world: &World, uuid: &str, name: &str) -> PathBuf {
    world.path(&format!("data/pods/{uuid}/logs/{name}.log"))
}

#[test]
fn both_streams_go_to_the_log_and_rkt_logs_gives_each_back_on_its_own() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let script = "echo one; echo two >&2; printf 'no newline'";
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--stdout=log",
        "--stderr=log",
        "--",
        "sh",
        "-c",
        script,
    ]);
    out.assert_success();
    assert_eq!(
        out.stdout(),
        "",
        "the output went to the log, not to rkt's stdout"
    );
    // Each stream's records in its order; the two streams are two pipes, so how they
    // interleave is the order their reads came in.
    let records = fs::read_to_string(log_file(&world, &uuid, "sh")).unwrap();
    let of = |stream: &str| -> Vec<String> {
        records
            .lines()
            .map(|l| l.split_once(' ').unwrap().1)
            .filter(|r| r.starts_with(stream))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(of("stdout"), ["stdout F one", "stdout F no newline"]);
    assert_eq!(of("stderr"), ["stderr F two"]);
    assert_eq!(records.lines().count(), 3);
    let logs = world.rkt(&["logs", &uuid]).run();
    logs.assert_success();
    assert_eq!(logs.stdout(), "one\nno newline\n");
    assert_eq!(logs.stderr(), "two\n");
    // --timestamps: the record's time before each line; --tail: the last lines only.
    let tail = world
        .rkt(&["logs", "--timestamps", "--tail=1", &uuid])
        .run();
    // The last line of the log: stdout's last, or stderr's if its read came later (the two
    // streams are two pipes); one line in all, with its time.
    let both = format!("{}{}", tail.stdout(), tail.stderr());
    assert_eq!(both.lines().count(), 1, "{both:?}");
    let (time, text) = both.trim_end().split_once(' ').unwrap();
    assert!(text == "no newline" || text == "two", "{both:?}");
    assert!(humantime::parse_rfc3339(time).is_ok(), "{time}");
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(
        !log_file(&world, &uuid, "sh").exists(),
        "the log goes with the pod"
    );
}

#[test]
fn a_line_longer_than_the_split_comes_back_whole_and_a_big_log_rotates() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    // 40,000 bytes on one line (three records of at most 16 KiB), then 3,000 short lines.
    let script = "head -c 40000 /dev/zero | tr '\\0' x; echo; \
                  i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done";
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--stdout=log",
        "--log-max-size=64K",
        "--log-max-files=3",
        "--",
        "sh",
        "-c",
        script,
    ]);
    out.assert_success();
    let log = log_file(&world, &uuid, "sh");
    let rotated = |n: u32| PathBuf::from(format!("{}.{n}", log.display()));
    let listing = fs::read_dir(log.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect::<Vec<_>>();
    assert!(
        rotated(1).exists() && rotated(2).exists(),
        "rotated twice: {listing:?}"
    );
    assert!(!rotated(3).exists(), "three files kept");
    for file in [rotated(2), rotated(1), log.clone()] {
        // A record is never split by a rotation; the long line's are 16 KiB.
        assert!(fs::metadata(&file).unwrap().len() <= 64 * 1024);
    }
    let logs = world.rkt(&["logs", &uuid]).run();
    logs.assert_success();
    let text = logs.stdout();
    let last: Vec<&str> = text.lines().rev().take(2).collect();
    assert_eq!(last, ["line-2999", "line-2998"]);
    // Whatever the oldest file kept starts with, from there on no line is missing.
    let numbers: Vec<usize> = text
        .lines()
        .filter_map(|l| l.strip_prefix("line-"))
        .map(|n| n.parse().unwrap())
        .collect();
    let first = numbers[0];
    assert_eq!(numbers, (first..3000).collect::<Vec<_>>());

    // Not rotated away: the long line, in parts in the file, whole from `rkt logs`.
    let (out, uuid) = world.run_uuid(&[
        "--net=none",
        "--stdout=log",
        "--",
        "sh",
        "-c",
        "head -c 40000 /dev/zero | tr '\\0' x; echo",
    ]);
    out.assert_success();
    let records = fs::read_to_string(log_file(&world, &uuid, "sh")).unwrap();
    let tags: Vec<&str> = records.lines().map(|l| &l[31..39]).collect();
    assert_eq!(tags, ["stdout P", "stdout P", "stdout F"]);
    let logs = world.rkt(&["logs", &uuid]).run();
    assert_eq!(logs.stdout(), format!("{}\n", "x".repeat(40000)));
}

#[test]
fn follow_prints_lines_as_the_app_writes_them_and_ends_with_the_pod() {
    test_kit::require_root!();
    // The gate is outside /tmp: a host-command pod has a /tmp of its own.
    let mut world = support::world_off_tmp();
    let _g = leaks::Guard::new(world.leak_ctx());
    let gate = world.path("gate");
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        "--stdout=log",
        "--",
        "sh",
        "-c",
        &format!(
            "echo first; while [ ! -e {} ]; do sleep 0.05; done; echo second",
            gate.display()
        ),
    ]);
    world.wait_running(&uuid);
    let mut follow = world
        .command(&["logs", "--follow", &uuid])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A follow that never ends fails the test instead of hanging it.
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let pid = follow.id() as i32;
    std::thread::spawn(move || {
        if watchdog
            .recv_timeout(std::time::Duration::from_secs(30))
            .is_err()
        {
            // SAFETY: kill(2) has no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut reader = std::io::BufReader::new(follow.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    assert_eq!(line, "first\n");
    // The pod is still running: `logs --follow` is still there, waiting for more.
    assert!(follow.try_wait().unwrap().is_none());
    fs::write(&gate, "").unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
    assert_eq!(line, "second\n");
    let status = wait_for("rkt logs --follow to end with the pod", PATIENCE, || {
        follow.try_wait().unwrap()
    });
    let _ = done.send(());
    assert!(status.success(), "rkt logs --follow: {status}");
    assert_eq!(world.wait_child(index).0, Some(0));
}

#[test]
fn logs_of_a_pod_without_logs_or_of_an_unknown_app_say_so() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&["--net=none", "--", "true"]);
    out.assert_success();
    world
        .rkt(&["logs", &uuid])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains(&format!(
            "app true of pod {uuid} keeps no log: it ran without --stdout=log or --stderr=log"
        ));
    world
        .rkt(&["logs", "--app=web", &uuid])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--app=web: pod")
        .assert_stderr_contains("has no such app (its apps: true)");
    world
        .rkt(&["run", "--net=none", "--stdout=stream", "--", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--stdout=stream: not supported");
    world
        .rkt(&["run", "--net=none", "--log-max-size=10X", "--", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("unknown unit");
}

#[test]
fn an_app_whose_log_is_elsewhere_is_read_from_there() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (out, uuid) = world.run_uuid(&["--net=none", "--stdout=log", "--", "echo", "moved"]);
    out.assert_success();
    // As a CRI server records a container's log (its AppLog path, kubelet's choice): the
    // log moved there and the manifest saying so.
    let elsewhere = world.path("cri-logs/echo-0.log");
    fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    fs::rename(log_file(&world, &uuid, "echo"), &elsewhere).unwrap();
    let manifest = world.path(&format!("data/pods/{uuid}/pod.json"));
    let mut json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&manifest).unwrap()).unwrap();
    json["apps"][0]["log"] = serde_json::json!({
        "stdout": true, "stderr": true, "maxSize": 0, "maxFiles": 1,
        "path": elsewhere,
    });
    fs::write(&manifest, json.to_string()).unwrap();
    let logs = world.rkt(&["logs", &uuid]).run();
    logs.assert_success();
    assert_eq!(logs.stdout(), "moved\n");
    world.rkt(&["rm", &uuid]).run().assert_success();
}
