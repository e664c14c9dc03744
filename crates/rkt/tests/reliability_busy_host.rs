//! A busy host: plugins killed with everything they started, `rkt stop` of pods that are
//! still starting, and many pods started, stopped and collected at once without a failure
//! or a leak (issue 17).

mod leaks;
mod support;

use std::time::{Duration, Instant};

use leaks::lab::{ptp_masq_lab, stderr, Lab, RemoveHostLocal, Running};
use leaks::Guard;
use serde_json::json;
use test_kit::{wait_for, PATIENCE};

/// A network whose plugin, on ADD, starts a child that writes `lease` after `delay_ms` (as
/// ptp's host-local would record an address) and then hangs.
fn allocating_net(lab: &Lab, lease: &std::path::Path, delay_ms: u64) -> String {
    let net = lab.net("alloc");
    lab.plugin(
        "alloc",
        json!({"ADD": {"spawn": {"delay_ms": delay_ms, "write": lease}, "sleep_ms": 120_000}}),
    );
    lab.conflist("10-alloc.conflist", &net, &["alloc"]);
    net
}

/// A `rkt run` on `net` (see [`allocating_net`]) whose plugin is in the middle of its ADD.
fn run_in_add(lab: &Lab, net: &str) -> Running {
    let run = lab.spawn(&[&format!("--net={net}"), "--", "/bin/true"]);
    wait_for("the ADD of alloc", PATIENCE, || {
        lab.call_lines()
            .first()
            .is_some_and(|c| c == "ADD alloc eth0")
            .then_some(())
    });
    run
}

/// The ADD killed by the timeout takes its child along: no "lease" appears after the
/// rollback DEL.
#[test]
fn a_timed_out_add_leaves_nothing_written_after_its_rollback() {
    test_kit::require_root!();
    let lab = Lab::new();
    let lease = lab.path("lease");
    let net = allocating_net(&lab, &lease, 1500);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab
        .run_command(&[&format!("--net={net}"), "--", "/bin/true"])
        .env("RKT_NET_PLUGIN_TIMEOUT", "1s")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("timed out"), "{err}");
    assert_eq!(lab.call_lines(), ["ADD alloc eth0", "DEL alloc eth0"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !lease.exists(),
        "the killed ADD's child wrote after the DEL"
    );
}

/// SIGTERM to a runner whose ADD is running abandons the ADD: the plugin, which does not
/// end within the grace, and its child are killed, the DEL follows, rkt exits long before
/// the plugin timeout.
#[test]
fn sigterm_during_add_kills_the_plugin_and_its_children_before_the_del() {
    test_kit::require_root!();
    let lab = Lab::new();
    let lease = lab.path("lease");
    let net = allocating_net(&lab, &lease, 2500);
    let _g = Guard::new(lab.ctx(&[&net]));
    let run = run_in_add(&lab, &net);
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = run.wait();
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_eq!(lab.call_lines(), ["ADD alloc eth0", "DEL alloc eth0"]);
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        !lease.exists(),
        "the interrupted ADD's child wrote after the DEL"
    );
}

/// A plugin that notes when another call of it is in flight (a directory only one call
/// can create), taking 300 ms a call.
fn overlap_detecting_net(lab: &Lab) -> (String, std::path::PathBuf) {
    let marks = lab.path("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let script = format!(
        r#"#!/bin/sh
cat >/dev/null
if mkdir {m}/inflight 2>/dev/null; then mine=1; else touch {m}/overlap; fi
sleep 0.3
[ -n "$mine" ] && rmdir {m}/inflight
case "$CNI_COMMAND" in
ADD) echo '{{"cniVersion":"1.0.0","interfaces":[],"ips":[]}}' ;;
VERSION) echo '{{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}}' ;;
esac
exit 0
"#,
        m = marks.display()
    );
    lab.plugin_file("overlap", script.as_bytes(), 0o755);
    let net = lab.net("ovl");
    lab.conflist("10-ovl.conflist", &net, &["overlap"]);
    (net, marks.join("overlap"))
}

/// Starts `n` pods on `net` at once with `RKT_NET_OPERATIONS=limit`; all must succeed.
fn start_at_once(lab: &Lab, net: &str, n: usize, limit: &str) {
    let children: Vec<_> = (0..n)
        .map(|_| {
            lab.run_command(&[&format!("--net={net}"), "--", "/bin/true"])
                .env("RKT_NET_OPERATIONS", limit)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

/// With one network operation at a time on the host, ADDs and DELs of pods started at once
/// never overlap; with four, they do (so the check can fail).
#[test]
fn network_operations_are_admitted_one_at_a_time_when_the_limit_says_one() {
    test_kit::require_root!();
    let lab = Lab::new();
    let (net, overlap) = overlap_detecting_net(&lab);
    let _g = Guard::new(lab.ctx(&[&net]));
    start_at_once(&lab, &net, 4, "1");
    assert!(!overlap.exists(), "two plugin calls ran at once");
    assert_eq!(lab.pods().len(), 4);
    start_at_once(&lab, &net, 4, "4");
    assert!(overlap.exists(), "the detector never saw calls overlap");
    let gc = lab.gc();
    assert!(gc.status.success(), "{}", stderr(&gc));
}

/// A lab with a real ptp network that masquerades, on subnets of its own below 10.200.
fn masquerading_lab(name: &str) -> (Lab, String, String) {
    ptp_masq_lab(name, "10-m.conf", 200)
}

/// `iptables-save` and `ip6tables-save` wrappers that log each call rkt itself makes
/// (not the plugins') to `<dir>/saves`; returns a PATH putting them first.
fn logging_table_dumps(lab: &Lab) -> (String, std::path::PathBuf) {
    let bin = lab.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = lab.path("saves");
    for tool in ["iptables-save", "ip6tables-save"] {
        let real = ["/usr/sbin", "/sbin", "/usr/bin"]
            .iter()
            .map(|d| std::path::Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        let script = format!(
            "#!/bin/sh\n[ \"$(cat /proc/$PPID/comm)\" = rkt ] && echo {tool} >> {}\nexec {} \"$@\"\n",
            log.display(),
            real.display()
        );
        let path = bin.join(tool);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    (path, log)
}

/// Starts `rkt run --net=<net> -- sleep 600` with `PATH`, returns it once the app runs.
fn sleeping_pod_with_path(lab: &Lab, net: &str, path: &str) -> (std::process::Child, String) {
    let uuid_file = lab.path(&format!("uuid-{}", test_kit::unique()));
    let child = lab
        .run_command(&[
            &format!("--uuid-file-save={}", uuid_file.display()),
            &format!("--net={net}"),
            "--",
            "/bin/sleep",
            "600",
        ])
        .env("PATH", path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let uuid = wait_for("the pod's UUID", PATIENCE, || {
        let text = std::fs::read_to_string(&uuid_file).ok()?;
        (!text.trim().is_empty()).then(|| text.trim().to_string())
    });
    lab.wait_running(&uuid);
    (child, uuid)
}

/// The clean teardown of a masquerading pod dumps no firewall table (ptp removes its own
/// rules); a teardown after the pod's interface vanished does, and removes what ptp could
/// not. Nothing is left either way.
#[test]
fn the_clean_teardown_dumps_no_table_and_the_unclean_one_sweeps() {
    test_kit::require_root!();
    let (lab, net, subnet) = masquerading_lab("sw");
    let _hl = RemoveHostLocal(net.clone());
    let _g = Guard::new(lab.ctx(&[&net]).subnet(&subnet));
    let (path, saves) = logging_table_dumps(&lab);

    let (child, uuid) = sleeping_pod_with_path(&lab, &net, &path);
    let stop = lab.output(&["stop", &uuid]);
    assert!(stop.status.success(), "{}", stderr(&stop));
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("fail"), "{}", stderr(&out));
    assert!(!saves.exists(), "the clean teardown dumped a table");

    // The interface goes before the teardown: ptp's DEL can no longer find the address
    // it masquerades, and leaves its chain; the sweep finds and removes it.
    let (child, uuid) = sleeping_pod_with_path(&lab, &net, &path);
    let del = std::process::Command::new("ip")
        .args(["-n", &format!("rkt-{uuid}"), "link", "del", "eth0"])
        .status()
        .unwrap();
    assert!(del.success());
    let stop = lab.output(&["stop", &uuid]);
    assert!(stop.status.success(), "{}", stderr(&stop));
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("fail"), "{}", stderr(&out));
    let dumps = std::fs::read_to_string(&saves).unwrap_or_default();
    assert!(dumps.contains("iptables-save"), "no sweep: {dumps:?}");
    let gc = lab.gc();
    assert!(gc.status.success(), "{}", stderr(&gc));
}

/// A network whose plugin's ADD hangs (logging its calls).
fn hanging_net(lab: &Lab) -> String {
    let net = lab.net("hang");
    lab.plugin("hang", json!({"ADD": {"sleep_ms": 120_000}}));
    lab.conflist("10-hang.conflist", &net, &["hang"]);
    net
}

/// `rkt stop` (and `--force`) of a pod still running its ADD stops it: stop succeeds, the
/// runner abandons the ADD, DELs, and ends long before the plugin timeout.
#[test]
fn stop_of_a_pod_setting_up_its_networks_aborts_its_start() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = hanging_net(&lab);
    let _g = Guard::new(lab.ctx(&[&net]));
    for force in [false, true] {
        let _ = std::fs::remove_file(lab.log());
        let run = lab.spawn(&[&format!("--net={net}"), "--", "/bin/true"]);
        wait_for("the ADD of hang", PATIENCE, || {
            lab.call_lines()
                .first()
                .is_some_and(|c| c == "ADD hang eth0")
                .then_some(())
        });
        let started = Instant::now();
        let mut args = vec!["stop"];
        if force {
            args.push("--force");
        }
        args.push(&run.uuid);
        let stop = lab.output(&args);
        assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
        let uuid = run.uuid.clone();
        let out = run.wait();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(lab.call_lines(), ["ADD hang eth0", "DEL hang eth0"]);
        assert_eq!(lab.state(&uuid), "exited");
    }
    let gc = lab.gc();
    assert!(gc.status.success(), "{}", stderr(&gc));
}

/// A pod waiting for its turn to run plugins (one operation at a time, taken by a hung
/// ADD) is stopped without ever running one.
#[test]
fn stop_of_a_pod_queued_for_its_turn_aborts_before_any_plugin_runs() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = hanging_net(&lab);
    let _g = Guard::new(lab.ctx(&[&net]));
    let spawn = || {
        let mut cmd = lab.run_command(&[&format!("--net={net}"), "--", "/bin/true"]);
        cmd.env("RKT_NET_OPERATIONS", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        cmd.spawn().unwrap()
    };
    let first = spawn();
    wait_for("the first ADD", PATIENCE, || {
        (lab.call_lines().len() == 1).then_some(())
    });
    let second = spawn();
    let queued = wait_for("the second pod, queued", PATIENCE, || {
        let pods = lab.pods();
        (pods.len() == 2).then_some(())?;
        pods.into_iter()
            .find(|p| lab.calls().iter().all(|c| &c.container != p))
    });
    std::thread::sleep(Duration::from_millis(300));
    let stop = lab.output(&["stop", &queued]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
    let out = second.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert!(
        lab.calls()
            .iter()
            .all(|c| c.container != queued || c.command == "DEL"),
        "{:?}",
        lab.call_lines()
    );
    // The first one too.
    let first_uuid = lab.pods().into_iter().find(|p| p != &queued).unwrap();
    let stop = lab.output(&["stop", &first_uuid]);
    assert_eq!(stop.status.code(), Some(0), "{}", stderr(&stop));
    let _ = first.wait_with_output().unwrap();
    lab.assert_every_add_deleted();
    let gc = lab.gc();
    assert!(gc.status.success(), "{}", stderr(&gc));
}

/// The DEL calls logged so far.
fn dels(lab: &Lab) -> usize {
    lab.call_lines()
        .iter()
        .filter(|c| c.starts_with("DEL"))
        .count()
}

/// Issue 16, defect 3: plain `rkt gc` (grace period 30 minutes) retries a failed teardown
/// at once, on every run, and exits non-zero naming what still fails; once the DEL
/// succeeds it says so, and the exited pod itself stays for its grace period.
#[test]
fn gc_retries_a_failed_teardown_on_every_run_whatever_the_grace_period() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("d");
    lab.plugin(
        "delfail",
        json!({"DEL": {"error": {"code": 9, "msg": "cannot release"}}}),
    );
    lab.conflist("10-d.conflist", &net, &["delfail"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(254), "{}", stderr(&out));
    let uuid = lab.pods().pop().unwrap();
    for _ in 0..2 {
        let before = dels(&lab);
        let gc = lab.output(&["gc"]);
        let err = stderr(&gc);
        assert_eq!(gc.status.code(), Some(254), "{err}");
        assert!(
            err.contains(&uuid) && err.contains(&net) && err.contains("cannot release"),
            "{err}"
        );
        assert_eq!(dels(&lab), before + 1, "{:?}", lab.call_lines());
    }
    lab.plugin("delfail", json!({}));
    let gc = lab.output(&["gc"]);
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(
        leaks::lab::stdout(&gc).contains(&format!("released the networks of pod {uuid}")),
        "{}",
        leaks::lab::stdout(&gc)
    );
    assert_eq!(lab.pods(), vec![uuid], "kept for its grace period");
    let before = dels(&lab);
    let gc = lab.output(&["gc"]);
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert_eq!(dels(&lab), before, "nothing left to release");
}

/// Kills `rkt run` (SIGKILL) and waits for it.
fn kill_9(run: leaks::lab::Running) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(run.pid() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = run.wait();
}

/// gc of a pod whose runner died, and whose DEL fails: one gc run tries it once and
/// reports the failure once (it used to release the pod twice and report both).
#[test]
fn gc_reports_a_dead_runners_failed_teardown_once() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("o");
    lab.plugin(
        "delfail",
        json!({"DEL": {"error": {"code": 9, "msg": "cannot release"}}}),
    );
    lab.conflist("10-o.conflist", &net, &["delfail"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let run = lab.start_sleeping_pod(&net);
    kill_9(run);
    let before = dels(&lab);
    let gc = lab.gc();
    let err = stderr(&gc);
    assert_eq!(gc.status.code(), Some(254), "{err}");
    assert_eq!(err.matches("cannot release").count(), 1, "{err}");
    assert_eq!(dels(&lab), before + 1, "{:?}", lab.call_lines());
    lab.plugin("delfail", json!({}));
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(lab.pods().is_empty());
}

/// gc right after `rkt run` was killed during an ADD: the orphaned plugin (and the child it
/// started), still running after the grace, is killed before the DEL, so nothing it would have written appears after gc.
#[test]
fn gc_kills_a_dead_runners_orphaned_plugin_before_its_del() {
    test_kit::require_root!();
    let lab = Lab::new();
    let lease = lab.path("lease");
    let net = allocating_net(&lab, &lease, 2500);
    let _g = Guard::new(lab.ctx(&[&net]));
    let run = run_in_add(&lab, &net);
    kill_9(run);
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(lab.call_lines().contains(&"DEL alloc eth0".to_string()));
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        !lease.exists(),
        "the orphaned ADD's child wrote after gc's DEL"
    );
    assert!(lab.pods().is_empty());
}

/// gc right after `rkt run` was killed during an ADD that is about to end: the orphaned
/// plugin is let finish (its child writes the "lease" 400 ms in, the plugin ends at 450 ms)
/// rather than killed half-way, then DELed. Killed at once, it would have left the lease
/// half-made, as `host-local` leaves an empty lease file no DEL releases.
#[test]
fn gc_lets_a_dead_runners_plugin_that_is_about_to_end_finish_before_its_del() {
    test_kit::require_root!();
    let lab = Lab::new();
    let lease = lab.path("lease");
    let net = lab.net("alloc");
    lab.plugin(
        "alloc",
        json!({"ADD": {"spawn": {"delay_ms": 400, "write": lease}, "sleep_ms": 450}}),
    );
    lab.conflist("10-alloc.conflist", &net, &["alloc"]);
    let _g = Guard::new(lab.ctx(&[&net]));
    let run = run_in_add(&lab, &net);
    kill_9(run);
    // gc must come while the plugin is still at work, or this proves nothing.
    assert!(
        !lease.exists(),
        "the plugin's child wrote before gc started"
    );
    let gc = lab.gc();
    assert_eq!(gc.status.code(), Some(0), "{}", stderr(&gc));
    assert!(lease.exists(), "gc killed the plugin before it finished");
    assert_eq!(lab.call_lines(), ["ADD alloc eth0", "DEL alloc eth0"]);
    assert!(lab.pods().is_empty());
}

/// A lab with a network like the built-in `default` (ptp masquerading, host-local, a
/// default route, portmap) on a /21 of its own: room for 1,000 pods.
fn default_like_lab() -> (Lab, String, String) {
    let lab = Lab::new();
    let net = lab.net("busy");
    let n = u32::from_str_radix(&lab.id[..4], 16).unwrap();
    let subnet = format!("10.{}.{}.0/21", 230 + n % 20, ((n >> 5) % 32) * 8);
    lab.conf(
        "10-busy.conflist",
        &json!({"cniVersion": "1.0.0", "name": net, "plugins": [
            {"type": "ptp", "ipMasq": true,
             "ipam": {"type": "host-local", "subnet": subnet, "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
        ]}),
    );
    (lab, net, subnet)
}

/// `n` pods started at once (not throttled by the caller), then all stopped at once, then
/// gc: every start and every teardown succeeds with the default plugin timeout, and nothing
/// is left (leases, rules, chains, links, namespaces: the leak checker).
fn fill_and_drain(n: usize) {
    let (lab, net, subnet) = default_like_lab();
    let _hl = RemoveHostLocal(net.clone());
    let _g = Guard::new(lab.ctx(&[&net]).subnet(&subnet));
    let started = Instant::now();
    let mut runs: Vec<(std::process::Child, std::path::PathBuf)> = (0..n)
        .map(|i| {
            let uuid_file = lab.path(&format!("uuid-{i}"));
            let child = lab
                .run_command(&[
                    &format!("--uuid-file-save={}", uuid_file.display()),
                    &format!("--net={net}"),
                    "--",
                    "/bin/sleep",
                    "600",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (child, uuid_file)
        })
        .collect();
    // Every pod runs its app (its init's PID recorded), or a start failed.
    let pods = lab.data().join("pods");
    let uuids: Vec<String> = wait_long(|| {
        for (child, _) in runs.iter_mut() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("a start failed ({status})");
            }
        }
        let uuids: Vec<String> = runs
            .iter()
            .filter_map(|(_, f)| std::fs::read_to_string(f).ok())
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
        let running = uuids
            .iter()
            .filter(|u| {
                std::fs::read_to_string(pods.join(u).join("state.json"))
                    .is_ok_and(|s| s.contains("\"pid\""))
            })
            .count();
        (running == n).then_some(uuids)
    });
    let start_all = started.elapsed();

    // All stopped at once: 10 `rkt stop`s side by side, each naming a tenth of the pods.
    let stopped = Instant::now();
    let stops: Vec<_> = uuids
        .chunks(n.div_ceil(10))
        .map(|chunk| {
            let mut args = vec!["stop"];
            args.extend(chunk.iter().map(String::as_str));
            lab.command(&args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for stop in stops {
        let out = stop.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mut failed = Vec::new();
    for (child, _) in runs {
        let out = child.wait_with_output().unwrap();
        // The app dies of SIGTERM (143); 254 or any mention of gc is a failed teardown.
        let err = stderr(&out);
        if out.status.code() != Some(143) || !err.trim().is_empty() {
            failed.push(format!("{:?}: {err}", out.status.code()));
        }
    }
    let stop_all = stopped.elapsed();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    let gc = lab.gc();
    assert!(gc.status.success(), "{}", stderr(&gc));
    eprintln!(
        "{n} pods: all started in {:.1} s ({:.1} pods/s), all stopped in {:.1} s ({:.1} pods/s)",
        start_all.as_secs_f64(),
        n as f64 / start_all.as_secs_f64(),
        stop_all.as_secs_f64(),
        n as f64 / stop_all.as_secs_f64()
    );
}

/// [`wait_for`] with a deadline for a thousand pods (10 minutes).
fn wait_long<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up waiting");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn two_hundred_pods_started_at_once_stopped_at_once_then_gc() {
    test_kit::require_root!();
    fill_and_drain(200);
}

/// The busy host of issue 17 (several minutes; run before a release).
#[test]
#[ignore]
fn a_thousand_pods_started_at_once_stopped_at_once_then_gc() {
    test_kit::require_root!();
    fill_and_drain(1000);
}
