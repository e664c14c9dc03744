//! The test plugin as a runtime sees it: where its script comes from, its default answers
//! for each spec version, its failure modes, and its call log.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_cni-test-plugin");

/// Runs `path` for `command` with `stdin` and extra environment.
fn call(path: &Path, command: &str, stdin: &Value, env: &[(&str, &str)]) -> Output {
    test_kit::output_with_stdin(
        Command::new(path)
            .env_remove("CNI_TEST_PLUGIN_LOG")
            .env_remove("CNI_TEST_PLUGIN_SCRIPT")
            .env("CNI_COMMAND", command)
            .env("CNI_IFNAME", "eth7")
            .env("CNI_NETNS", "/run/netns/t")
            .envs(env.iter().copied()),
        stdin.to_string().as_bytes(),
    )
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn default_add_answers_in_the_requested_version() {
    let bin = Path::new(BIN);
    let v = |version: &str| stdout_json(&call(bin, "ADD", &json!({"cniVersion": version}), &[]));
    assert_eq!(v("0.2.0")["ip4"]["ip"], "10.99.0.2/24");
    let r = v("0.4.0");
    assert_eq!(r["cniVersion"], "0.4.0");
    assert_eq!(r["ips"][0]["version"], "4");
    assert_eq!(r["interfaces"][0]["name"], "eth7");
    assert_eq!(r["interfaces"][0]["sandbox"], "/run/netns/t");
    let r = v("1.1.0");
    assert!(r["ips"][0].get("version").is_none());
    assert_eq!(r["ips"][0]["address"], "10.99.0.2/24");

    // prevResult passes through, in the request's version.
    let prev = json!({"cniVersion": "1.0.0", "ips": [{"address": "10.7.0.9/16"}]});
    let out = call(
        bin,
        "ADD",
        &json!({"cniVersion": "1.1.0", "prevResult": prev}),
        &[],
    );
    let r = stdout_json(&out);
    assert_eq!(r["cniVersion"], "1.1.0");
    assert_eq!(r["ips"][0]["address"], "10.7.0.9/16");

    // Other commands print nothing and succeed.
    let out = call(bin, "DEL", &json!({"cniVersion": "1.0.0"}), &[]);
    assert!(out.status.success() && out.stdout.is_empty());
}

#[test]
fn version_and_incompatible_requests() {
    let bin = Path::new(BIN);
    let r = stdout_json(&call(bin, "VERSION", &json!({"cniVersion": "1.1.0"}), &[]));
    assert_eq!(
        r["supportedVersions"],
        json!(["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
    );
    let script = json!({"versions": ["0.4.0", "1.0.0"]});
    let r = stdout_json(&call(
        bin,
        "VERSION",
        &json!({"cniVersion": "1.1.0", "testPlugin": script}),
        &[],
    ));
    assert_eq!(
        r,
        json!({"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0"]})
    );
    let out = call(
        bin,
        "ADD",
        &json!({"cniVersion": "1.1.0", "testPlugin": script}),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["code"], 1);
}

#[test]
fn script_sources_in_order_stdin_then_env_then_argv0() {
    let tmp = tempfile::tempdir().unwrap();
    let renamed = tmp.path().join("renamed");
    std::os::unix::fs::symlink(BIN, &renamed).unwrap();
    let said = |text: &str| json!({"ADD": {"stdout": text}});
    std::fs::write(tmp.path().join("renamed.script"), said("argv0").to_string()).unwrap();
    let env_script = tmp.path().join("env.script");
    std::fs::write(&env_script, said("env").to_string()).unwrap();
    let env = [("CNI_TEST_PLUGIN_SCRIPT", env_script.to_str().unwrap())];
    let text = |out: Output| String::from_utf8(out.stdout).unwrap();

    let with_stdin = json!({"cniVersion": "1.0.0", "testPlugin": said("stdin")});
    assert_eq!(text(call(&renamed, "ADD", &with_stdin, &env)), "stdin");
    let plain = json!({"cniVersion": "1.0.0"});
    assert_eq!(text(call(&renamed, "ADD", &plain, &env)), "env");
    assert_eq!(text(call(&renamed, "ADD", &plain, &[])), "argv0");
    // The unrenamed binary has no script of its own: default behaviour.
    assert!(text(call(Path::new(BIN), "ADD", &plain, &[])).contains("10.99.0.2/24"));
}

#[test]
fn scripted_failures() {
    let bin = Path::new(BIN);
    let run = |step: Value| {
        call(
            bin,
            "CHECK",
            &json!({"cniVersion": "1.0.0", "testPlugin": {"*": step}}),
            &[],
        )
    };
    let out =
        run(json!({"error": {"code": 11, "msg": "busy", "details": "later"}, "stderr": "note"}));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout_json(&out),
        json!({"cniVersion": "1.0.0", "code": 11, "msg": "busy", "details": "later"})
    );
    assert_eq!(out.stderr, b"note");
    let out = run(json!({"stdout": "garbage", "exit": 42}));
    assert_eq!(
        (out.status.code(), out.stdout.as_slice()),
        (Some(42), b"garbage".as_slice())
    );
    let out = run(json!({"signal": 9}));
    assert_eq!(out.status.signal(), Some(9));
    let out = run(json!({"result": {"anything": true}}));
    assert_eq!(stdout_json(&out), json!({"anything": true}));
    // A command-specific entry wins over "*".
    let out = call(
        bin,
        "CHECK",
        &json!({"cniVersion": "1.0.0", "testPlugin": {"*": {"exit": 3}, "CHECK": {"exit": 4}}}),
        &[],
    );
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn concurrent_calls_log_whole_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log.jsonl");
    let padding = "x".repeat(20_000);
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let log = log.clone();
            let padding = padding.clone();
            std::thread::spawn(move || {
                let stdin = json!({"cniVersion": "1.0.0", "i": i, "padding": padding});
                let out = call(
                    Path::new(BIN),
                    "DEL",
                    &stdin,
                    &[
                        ("CNI_TEST_PLUGIN_LOG", log.to_str().unwrap()),
                        ("CNI_CONTAINERID", "c"),
                    ],
                );
                assert!(out.status.success());
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let mut seen: Vec<i64> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["command"], "DEL");
            assert_eq!(v["env"]["CNI_CONTAINERID"], "c");
            assert!(v["env"].get("CNI_TEST_PLUGIN_LOG").is_none());
            assert_eq!(v["argv0"], BIN);
            v["stdin"]["i"].as_i64().unwrap()
        })
        .collect();
    seen.sort();
    assert_eq!(seen, (0..16).collect::<Vec<_>>());
}

#[test]
fn unparsable_stdin_is_logged_as_text() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("log.jsonl");
    let mut child = Command::new(BIN)
        .env("CNI_COMMAND", "DEL")
        .env("CNI_TEST_PLUGIN_LOG", &log)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"not json").unwrap();
    child.wait().unwrap();
    let v: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(v["stdin"], "not json");
}
