//! `RawExec` and `find_in_path` against real processes: output decoding, timeouts,
//! signals, big outputs, busy binaries and the plugin search.

mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cni::error::Error;
use cni::invoke::{find_in_path, Exec, ExecError, FindError, RawExec};
use serde_json::{json, Value};
use support::{chain, rt, World};

const LONG: Duration = Duration::from_secs(60);

fn add_env() -> Vec<(String, String)> {
    vec![
        ("CNI_COMMAND".into(), "ADD".into()),
        ("CNI_IFNAME".into(), "eth0".into()),
    ]
}

/// Runs the plugin at `path` for ADD with `stdin`.
fn run(path: &Path, stdin: Value, timeout: Duration) -> Result<Vec<u8>, ExecError> {
    RawExec.exec_plugin(path, stdin.to_string().as_bytes(), &add_env(), timeout)
}

fn scripted(w: &World, name: &str, add: Value) -> PathBuf {
    w.install(name, json!({ "ADD": add }))
}

#[test]
fn success_returns_stdout() {
    let w = World::new();
    let p = scripted(&w, "p", json!({"stdout": "{\"cniVersion\":\"1.0.0\"}\n"}));
    assert_eq!(
        run(&p, json!({"cniVersion": "1.0.0"}), LONG).unwrap(),
        b"{\"cniVersion\":\"1.0.0\"}\n"
    );
}

#[test]
fn error_object_is_decoded_from_stdout() {
    let w = World::new();
    let p = scripted(
        &w,
        "p",
        json!({"error": {"code": 7, "msg": "bad config", "details": "field x"}, "exit": 3}),
    );
    match run(&p, json!({"cniVersion": "1.0.0"}), LONG).unwrap_err() {
        ExecError::Plugin {
            exit_status,
            code,
            msg,
            details,
            plugin,
        } => {
            assert_eq!((exit_status, code), (3, Some(7)));
            assert_eq!((msg.as_str(), details.as_str()), ("bad config", "field x"));
            assert_eq!(plugin, p);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn garbage_stdout_is_quoted_with_the_exit_status_and_stderr() {
    let w = World::new();
    let p = scripted(
        &w,
        "p",
        json!({"stdout": "panic: runtime error", "stderr": "goroutine 1", "exit": 2}),
    );
    let err = run(&p, json!({}), LONG).unwrap_err();
    let ExecError::Plugin { code, msg, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*code, None);
    assert!(msg.contains("exit status 2"), "{msg}");
    assert!(msg.contains("panic: runtime error"), "{msg}");
    assert!(msg.contains("goroutine 1"), "{msg}");
    assert_eq!(err.code(), None);
}

#[test]
fn stderr_is_the_message_when_stdout_is_empty() {
    let w = World::new();
    let p = scripted(
        &w,
        "p",
        json!({"stdout": "", "stderr": "cannot open /dev/net/tun\n", "exit": 1}),
    );
    let err = run(&p, json!({}), LONG).unwrap_err();
    assert!(
        matches!(&err, ExecError::Plugin { code: None, msg, .. } if msg == "cannot open /dev/net/tun"),
        "{err:?}"
    );

    let q = scripted(&w, "q", json!({"stdout": "", "exit": 4}));
    let err = run(&q, json!({}), LONG).unwrap_err();
    assert!(
        matches!(&err, ExecError::Plugin { msg, .. } if msg == "exit status 4 with no error message"),
        "{err:?}"
    );
}

#[test]
fn hanging_plugin_is_killed_at_the_timeout() {
    let w = World::new();
    let p = scripted(&w, "hang", json!({"sleep_ms": 30000}));
    let err = run(&p, json!({}), Duration::from_millis(300)).unwrap_err();
    assert!(
        matches!(&err, ExecError::Timeout { plugin, .. } if plugin == &p),
        "{err:?}"
    );
    assert!(err.to_string().contains("timed out after 0.3s"), "{err}");

    // Through the API: the error names the network, plugin and command.
    w.install("slow", json!({"DEL": {"sleep_ms": 30000}}));
    let cni = w.cni().with_timeout(Duration::from_millis(300));
    let err = cni
        .del_network_list(&chain("net", "1.0.0", &["slow"]), &rt())
        .unwrap_err();
    assert!(
        matches!(&err, Error::Timeout { network, plugin, command, .. } if network == "net" && plugin == "slow" && *command == "DEL"),
        "{err}"
    );
}

#[test]
fn killed_plugin_names_the_signal() {
    let w = World::new();
    let p = scripted(&w, "p", json!({"signal": 9}));
    let err = run(&p, json!({}), LONG).unwrap_err();
    assert!(
        matches!(err, ExecError::Signal { signal: 9, .. }),
        "{err:?}"
    );

    w.install("term", json!({"ADD": {"signal": 15}}));
    let err = w
        .cni()
        .add_network_list(&chain("net", "1.0.0", &["term"]), &rt())
        .unwrap_err();
    assert!(matches!(err, Error::Signal { signal: 15, .. }), "{err}");
    assert!(
        err.to_string().contains("killed by signal 15 (SIGTERM)"),
        "{err}"
    );
}

#[test]
fn big_outputs_on_both_pipes_do_not_deadlock() {
    let w = World::new();
    let out = "o".repeat(300_000);
    let errs = "e".repeat(300_000);
    let p = scripted(&w, "p", json!({"stdout": out, "stderr": errs, "exit": 1}));
    // A big stdin too, bigger than a pipe buffer.
    let stdin = json!({"cniVersion": "1.0.0", "padding": "p".repeat(300_000)});
    let err = run(&p, stdin, LONG).unwrap_err();
    let ExecError::Plugin { msg, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(msg.contains(&out) && msg.contains(&errs));
    let logged: Value = serde_json::from_str(
        std::fs::read_to_string(&w.log)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(logged["stdin"]["padding"].as_str().unwrap().len(), 300_000);
}

#[test]
fn busy_binary_is_retried_until_it_can_run() {
    let w = World::new();
    let path = w.plugins.join("busy");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"#!/bin/sh\necho '{\"ok\":true}'\n").unwrap();
    f.flush().unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The file stays open for writing (ETXTBSY on exec) until the thread closes it.
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        drop(f);
    });
    let out = RawExec.exec_plugin(&path, b"{}", &add_env(), LONG).unwrap();
    closer.join().unwrap();
    assert_eq!(out, b"{\"ok\":true}\n");
}

#[test]
fn missing_binary_is_a_spawn_error() {
    let err = RawExec
        .exec_plugin(Path::new("/nonexistent/plugin"), b"{}", &add_env(), LONG)
        .unwrap_err();
    assert!(matches!(err, ExecError::Spawn { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/plugin"), "{err}");
}

#[test]
fn find_in_path_takes_the_first_executable_regular_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = ["d1", "d2", "d3", "d4"]
        .iter()
        .map(|d| tmp.path().join(d))
        .collect();
    for d in &dirs {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(dirs[0].join("p"), "not executable").unwrap();
    std::fs::create_dir(dirs[1].join("p")).unwrap();
    for d in &dirs[2..] {
        std::fs::write(d.join("p"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(d.join("p"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert_eq!(find_in_path("p", &dirs).unwrap(), dirs[2].join("p"));

    let err = find_in_path("q", &dirs).unwrap_err();
    assert!(matches!(&err, FindError::NotFound { plugin, dirs: d } if plugin == "q" && d == &dirs));
    let text = err.to_string();
    for d in &dirs {
        assert!(text.contains(&d.display().to_string()), "{text}");
    }
    assert!(find_in_path("p", &[])
        .unwrap_err()
        .to_string()
        .contains("no plugin directories"));
}

#[test]
fn find_in_path_rejects_names_that_are_paths() {
    let dirs = [PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
    for bad in ["../x", "/bin/sh", "", "..", "sh/", "a\0b"] {
        assert!(
            matches!(find_in_path(bad, &dirs), Err(FindError::InvalidName(_))),
            "{bad:?}"
        );
    }
    assert!(find_in_path("sh", &dirs).is_ok());
}

#[test]
fn a_leftover_process_holding_the_pipes_ends_in_a_timeout_not_a_hang() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("daemonizes");
    std::fs::write(&path, "#!/bin/sh\necho '{}'\nsleep 5 &\nexit 0\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = RawExec
        .exec_plugin(&path, b"{}", &add_env(), Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(err, ExecError::Timeout { .. }), "{err:?}");
}

/// A plugin that started a child (as ptp starts host-local) and is killed by the timeout
/// takes the child with it: the child's delayed "lease" is never written.
#[test]
fn a_plugin_killed_by_the_timeout_takes_its_children() {
    let w = World::new();
    let lease = w.tmp.path().join("lease");
    let p = scripted(
        &w,
        "allocating",
        json!({"spawn": {"delay_ms": 1500, "write": lease}, "sleep_ms": 30000}),
    );
    let started = std::time::Instant::now();
    let err = run(&p, json!({}), Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err, ExecError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !lease.exists(),
        "the killed plugin's child wrote {} after the call returned",
        lease.display()
    );

    // The same script with time to spare: the child does write (the test can fail).
    let p = scripted(
        &w,
        "finishing",
        json!({"spawn": {"delay_ms": 100, "write": lease}, "sleep_ms": 400}),
    );
    run(&p, json!({}), LONG).unwrap();
    assert!(lease.exists());
}

/// An interrupted caller gets its call back once the grace has passed, the plugin that
/// would not end and its children killed.
#[test]
fn an_interrupted_call_kills_the_plugin_and_its_children() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let w = World::new();
    let lease = w.tmp.path().join("lease");
    let p = scripted(
        &w,
        "allocating",
        json!({"spawn": {"delay_ms": 1500, "write": lease}, "sleep_ms": 30000}),
    );
    let flag = Arc::new(AtomicBool::new(false));
    let exec = cni::invoke::InterruptibleExec::new({
        let flag = flag.clone();
        move || flag.load(Ordering::SeqCst)
    });
    let setter = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::SeqCst);
        })
    };
    let started = std::time::Instant::now();
    let err = exec.exec_plugin(&p, b"{}", &add_env(), LONG).unwrap_err();
    setter.join().unwrap();
    assert!(
        matches!(&err, ExecError::Interrupted { plugin } if plugin == &p),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Killed at the end of the grace (which began with the interruption, 200 ms in),
    // before its child wrote.
    assert!(
        started.elapsed() >= Duration::from_millis(200) + cni::invoke::INTERRUPT_GRACE,
        "{:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!lease.exists());

    // Already interrupted: the plugin does not even start.
    w.clear_log();
    let err = exec.exec_plugin(&p, b"{}", &add_env(), LONG).unwrap_err();
    assert!(matches!(err, ExecError::Interrupted { .. }), "{err:?}");
    assert!(w.calls().is_empty());

    // Not interrupted: an ordinary call.
    let calm = cni::invoke::InterruptibleExec::new(|| false);
    let ok = scripted(&w, "ok", json!({"stdout": "{}\n"}));
    assert_eq!(
        calm.exec_plugin(&ok, b"{}", &add_env(), LONG).unwrap(),
        b"{}\n"
    );
}

/// A plugin interrupted in the middle of its work that ends within the grace is let finish
/// it (an IPAM plugin killed between creating its lease file and writing the container's
/// ID into it leaves a lease no DEL releases); the call is abandoned all the same.
#[test]
fn an_interrupted_plugin_that_ends_within_the_grace_finishes_its_work() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let w = World::new();
    let lease = w.tmp.path().join("lease");
    let p = scripted(
        &w,
        "quick",
        json!({"spawn": {"delay_ms": 400, "write": lease}, "sleep_ms": 1000, "stdout": "{}\n"}),
    );
    // Runs the plugin through `exec`, interrupted 50 ms after it started.
    let run_interrupted = |grace: Duration| {
        let flag = Arc::new(AtomicBool::new(false));
        let exec = cni::invoke::InterruptibleExec::new({
            let flag = flag.clone();
            move || flag.load(Ordering::SeqCst)
        })
        .with_grace(grace);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            flag.store(true, Ordering::SeqCst);
        });
        let started = std::time::Instant::now();
        let err = exec.exec_plugin(&p, b"{}", &add_env(), LONG).unwrap_err();
        setter.join().unwrap();
        assert!(matches!(err, ExecError::Interrupted { .. }), "{err:?}");
        started.elapsed()
    };

    // A grace long enough for the plugin, which ends 1 s in; the call returns then.
    let grace = Duration::from_secs(5);
    let took = run_interrupted(grace);
    assert!(
        lease.exists(),
        "the plugin was killed before its child wrote"
    );
    assert!(
        took < grace,
        "the call waited for more than the plugin: {took:?}"
    );

    // Without a grace, the same plugin is killed before its child writes.
    std::fs::remove_file(&lease).unwrap();
    run_interrupted(Duration::ZERO);
    std::thread::sleep(Duration::from_millis(700));
    assert!(!lease.exists(), "the plugin's child wrote after the call");
    assert_eq!(w.calls().len(), 2, "both calls ran the plugin");
}
