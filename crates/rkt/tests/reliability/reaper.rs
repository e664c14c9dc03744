//! The release of pods whose `rkt run` was killed, by the commands that start or list pods
//! and `rkt version` (`rkt release-dead-pods` in the background) racing `rkt gc` and each
//! other: each pod is
//! released exactly once (one DEL per ADD); a releaser killed in the middle of a DEL leaves
//! the pod to the next command, which releases it again. Root only; the lab's test plugin
//! logs every call.

use crate::leaks;

use std::process::{Child, Stdio};

use leaks::lab::{stderr, Lab};
use leaks::Guard;
use serde_json::json;
use test_kit::{wait_for, PATIENCE};

fn kill9(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

fn count(lab: &Lab, line: &str) -> usize {
    lab.call_lines().iter().filter(|c| *c == line).count()
}

/// Whether pod `uuid` of `lab` is released: recorded exited, unmarked, no namespace.
fn released(lab: &Lab, uuid: &str) -> bool {
    lab.state(uuid) == "exited"
        && !lab.data().join("pods/.running").join(uuid).exists()
        && !std::path::Path::new(&format!("/run/netns/rkt-{uuid}")).exists()
}

/// The PIDs of the releasers working on `lab`'s data directory.
fn releasers(lab: &Lab) -> Vec<u32> {
    let pods = lab.data().join("pods").display().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            args.contains(&&b"release-dead-pods"[..]) && args.contains(&pods.as_bytes())
        })
        .collect()
}

#[test]
fn gc_lists_and_statuses_at_once_release_a_killed_runners_pod_exactly_once() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.plain_net("rp", "plain");
    let _g = Guard::new(lab.ctx(&[&net]));
    let mut uuids = Vec::new();
    for _ in 0..3 {
        let pod = lab.start_sleeping_pod(&net);
        let uuid = pod.uuid.clone();
        kill9(pod.pid());
        pod.wait();
        let mut racers: Vec<(&str, Child)> = Vec::new();
        for args in [
            &["gc"][..],
            &["list"],
            &["status", &uuid],
            &["list", "--format=json"],
            &["status", &uuid],
            &["version"],
        ] {
            let child = lab
                .command(args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            racers.push((args[0], child));
        }
        for (what, child) in racers {
            let out = child.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr(&out));
        }
        wait_for("the pod to be released", PATIENCE, || {
            released(&lab, &uuid).then_some(())
        });
        uuids.push(uuid);
    }
    wait_for("the releasers to end", PATIENCE, || {
        releasers(&lab).is_empty().then_some(())
    });
    assert_eq!(count(&lab, "ADD plain eth0"), 3, "{:?}", lab.call_lines());
    assert_eq!(
        count(&lab, "DEL plain eth0"),
        3,
        "a pod released twice (or not at all): {:?}",
        lab.call_lines()
    );
    lab.assert_every_add_deleted();
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(lab.pods().is_empty(), "{:?}", lab.pods());
}

#[test]
fn a_releaser_killed_during_its_del_leaves_the_pod_to_the_next_command() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("rk");
    lab.plugin("slowdel", json!({"DEL": {"sleep_ms": 3000}}));
    lab.conflist("10-rk.conflist", &net, &["slowdel"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let pod = lab.start_sleeping_pod(&net);
    let uuid = pod.uuid.clone();
    kill9(pod.pid());
    pod.wait();

    let list = lab.output(&["list"]);
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    wait_for("the releaser's DEL", PATIENCE, || {
        (count(&lab, "DEL slowdel eth0") == 1).then_some(())
    });
    // Recorded exited before the DEL: status shows it so while its networks go.
    assert_eq!(lab.state(&uuid), "exited");
    let pids = releasers(&lab);
    assert_eq!(pids.len(), 1, "{pids:?}");
    kill9(pids[0]);
    wait_for("the killed releaser's plugin to end", PATIENCE, || {
        (!leaks::plugin_running_for(&uuid)).then_some(())
    });
    assert!(
        lab.data().join("pods/.running").join(&uuid).exists(),
        "a releaser that did not finish must leave the mark"
    );

    // The next command that lists pods releases it again, completely.
    lab.plugin("slowdel", json!({}));
    let status = lab.output(&["status", &uuid]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    wait_for("the pod to be released", PATIENCE, || {
        released(&lab, &uuid).then_some(())
    });
    assert_eq!(count(&lab, "DEL slowdel eth0"), 2, "{:?}", lab.call_lines());
    lab.assert_every_add_deleted();
    wait_for("the releasers to end", PATIENCE, || {
        releasers(&lab).is_empty().then_some(())
    });
}

/// `rkt version`, which Nomad's driver runs every 30 s on each client, releases too.
#[test]
fn rkt_version_alone_releases_a_killed_runners_pod() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.plain_net("rv", "plain");
    let _g = Guard::new(lab.ctx(&[&net]));
    let pod = lab.start_sleeping_pod(&net);
    let uuid = pod.uuid.clone();
    kill9(pod.pid());
    pod.wait();
    assert_eq!(lab.state(&uuid), "running", "nothing released it yet");
    let version = lab.output(&["version"]);
    assert_eq!(version.status.code(), Some(0), "{}", stderr(&version));
    wait_for("the pod to be released", PATIENCE, || {
        released(&lab, &uuid).then_some(())
    });
    assert_eq!(count(&lab, "DEL plain eth0"), 1, "{:?}", lab.call_lines());
    wait_for("the releasers to end", PATIENCE, || {
        releasers(&lab).is_empty().then_some(())
    });
}

/// The releaser keeps none of the command's descriptors: a caller waiting for the end of a
/// pipe it gave `rkt list` (as descriptor 7, inherited) is not kept waiting by the release.
#[test]
fn the_releaser_holds_no_descriptor_the_command_inherited() {
    use std::io::Read;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("rf");
    lab.plugin("slowdel", json!({"DEL": {"sleep_ms": 3000}}));
    lab.conflist("10-rf.conflist", &net, &["slowdel"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let pod = lab.start_sleeping_pod(&net);
    let uuid = pod.uuid.clone();
    kill9(pod.pid());
    pod.wait();

    let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
    let write_fd = write.as_raw_fd();
    let mut list = lab.command(&["list"]);
    list.stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: dup2(2) is async-signal-safe; the child only duplicates a descriptor it has.
    unsafe {
        list.pre_exec(move || match libc::dup2(write_fd, 7) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    let started = std::time::Instant::now();
    let status = list.status().unwrap();
    drop(write);
    assert!(status.success());
    let mut rest = Vec::new();
    std::fs::File::from(read).read_to_end(&mut rest).unwrap();
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_millis(2500),
        "the pipe stayed open {took:?}: held by the releaser"
    );
    assert_eq!(
        releasers(&lab).len(),
        1,
        "the releaser should still be at its DEL"
    );
    wait_for("the pod to be released", PATIENCE, || {
        released(&lab, &uuid).then_some(())
    });
    lab.assert_every_add_deleted();
    wait_for("the releasers to end", PATIENCE, || {
        releasers(&lab).is_empty().then_some(())
    });
}
