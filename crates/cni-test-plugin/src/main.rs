//! A CNI plugin for tests: one binary that plays any plugin, driven by a script.
//!
//! # Where the script comes from (first found wins)
//! 1. the JSON object under `"testPlugin"` in the network config on stdin;
//! 2. the file named by `$CNI_TEST_PLUGIN_SCRIPT`;
//! 3. the file `<argv0>.script`, so renamed copies (or symlinks) of the binary behave
//!    differently.
//!
//! Without a script the plugin behaves like a well-mannered plugin that does nothing.
//!
//! # Script format
//! ```json
//! {
//!   "log": "/path/to/calls.jsonl",
//!   "versions": ["0.4.0", "1.0.0"],
//!   "ADD": {"result": {...}, "exit": 0, "error": {"code": 7, "msg": "m", "details": "d"},
//!           "stdout": "raw text", "stderr": "text", "sleep_ms": 10, "signal": 9,
//!           "spawn": {"delay_ms": 500, "write": "/path/to/lease"}},
//!   "*": {...}
//! }
//! ```
//! A per-command entry (`ADD`, `DEL`, `CHECK`, `GC`, `STATUS`, `VERSION`) wins over `"*"`.
//! `spawn` starts a child process, as a plugin starts its IPAM plugin, that writes the file
//! `write` (with the call's `CNI_CONTAINERID`) after `delay_ms`, whatever the plugin does
//! meanwhile: it stands for an allocation a killed plugin's children could still make.
//! Steps run in this order: log the call, spawn, sleep, raise the signal, write `stderr`, then
//! print `stdout` verbatim, or the `error` object (exit 1 unless `exit` says otherwise),
//! or `result`, or the default answer; finally exit with `exit` (default 0).
//!
//! Defaults: ADD prints a result in the request's `cniVersion` (its `prevResult` passed
//! through if present, else a fixed address 10.99.0.2/24 on the request's interface);
//! VERSION prints the supported versions (`versions`, default 0.1.0 to 1.1.0); other
//! commands print nothing. Like plugins built on the reference `skel`, a request whose
//! `cniVersion` is not among the supported versions fails with code 1.
//!
//! # Call log
//! When the script names a `log` file, or `$CNI_TEST_PLUGIN_LOG` is set, every call appends
//! one JSON line `{"argv0", "command", "env": {CNI_* variables}, "stdin": <JSON or string>}`
//! with a single `O_APPEND` write, so concurrent calls do not interleave.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use serde_json::{json, Map, Value};

/// Every spec version the plugin supports unless the script narrows it.
const ALL_VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// Variables of the test harness itself, left out of the logged environment.
const OWN_VARS: &[&str] = &["CNI_TEST_PLUGIN_LOG", "CNI_TEST_PLUGIN_SCRIPT"];

/// Set on a `spawn` child: `<delay_ms>:<path>`.
const CHILD_VAR: &str = "CNI_TEST_PLUGIN_CHILD";

fn main() {
    if let Ok(job) = std::env::var(CHILD_VAR) {
        run_child(&job);
    }
    let argv0 = std::env::args().next().unwrap_or_default();
    let command = std::env::var("CNI_COMMAND").unwrap_or_default();

    let mut raw = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut raw) {
        fail(4, &format!("reading stdin: {e}"), "", None);
    }
    let stdin: Option<Value> = serde_json::from_slice(&raw).ok();
    let script = load_script(stdin.as_ref(), &argv0);

    let log_path = script
        .get("log")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| std::env::var("CNI_TEST_PLUGIN_LOG").ok());
    if let Some(path) = log_path {
        log_call(&path, &argv0, &command, &raw, stdin.as_ref());
    }

    let step = script
        .get(command.as_str())
        .or_else(|| script.get("*"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();

    if let Some(spawn) = step.get("spawn") {
        spawn_child(spawn);
    }
    if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(sig) = step.get("signal").and_then(Value::as_i64) {
        // SAFETY: kill(2) on our own pid with a caller-chosen signal number has no memory
        // effects; an invalid number just makes the call fail.
        unsafe {
            libc::kill(libc::getpid(), sig as libc::c_int);
        }
        // A signal that does not end the process (e.g. SIGCHLD) falls through.
    }
    if let Some(text) = step.get("stderr").and_then(Value::as_str) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    let exit = step.get("exit").and_then(Value::as_i64).map(|c| c as i32);

    let request_version = stdin
        .as_ref()
        .and_then(|v| v.get("cniVersion"))
        .and_then(Value::as_str)
        .unwrap_or("0.1.0")
        .to_owned();
    let versions: Vec<String> = match script.get("versions").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        None => ALL_VERSIONS.iter().map(|s| s.to_string()).collect(),
    };

    if let Some(text) = step.get("stdout").and_then(Value::as_str) {
        print_and_exit(text.as_bytes(), exit.unwrap_or(0));
    }
    if let Some(err) = step.get("error") {
        let code = err.get("code").and_then(Value::as_u64).unwrap_or(999);
        let msg = err.get("msg").and_then(Value::as_str).unwrap_or("");
        let details = err.get("details").and_then(Value::as_str).unwrap_or("");
        fail(
            code,
            msg,
            details,
            Some((&request_version, exit.unwrap_or(1))),
        );
    }
    if let Some(result) = step.get("result") {
        print_and_exit(&to_line(result), exit.unwrap_or(0));
    }

    // Default behaviour.
    if command == "VERSION" {
        let answer = json!({
            "cniVersion": versions.last().cloned().unwrap_or_else(|| "0.1.0".into()),
            "supportedVersions": versions,
        });
        print_and_exit(&to_line(&answer), exit.unwrap_or(0));
    }
    if !versions.contains(&request_version) {
        fail(
            1,
            &format!(
                "incompatible CNI versions: config is {request_version:?}, plugin supports {versions:?}"
            ),
            "",
            Some((&request_version, 1)),
        );
    }
    if command == "ADD" {
        let result = default_add_result(stdin.as_ref(), &request_version);
        print_and_exit(&to_line(&result), exit.unwrap_or(0));
    }
    std::process::exit(exit.unwrap_or(0));
}

/// Starts this binary again as a `spawn` child (see the module documentation).
fn spawn_child(spawn: &Value) {
    let delay = spawn.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
    let Some(path) = spawn.get("write").and_then(Value::as_str) else {
        fail(7, "spawn needs \"write\": a file path", "", None);
    };
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(5, &format!("{e}"), "", None));
    let started = std::process::Command::new(exe)
        .env(CHILD_VAR, format!("{delay}:{path}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = started {
        fail(5, &format!("spawning the child: {e}"), "", None);
    }
}

/// The `spawn` child: waits, then writes its file, as an IPAM plugin records a lease.
fn run_child(job: &str) -> ! {
    let (delay, path) = job.split_once(':').unwrap_or(("0", job));
    std::thread::sleep(Duration::from_millis(delay.parse().unwrap_or(0)));
    let id = std::env::var("CNI_CONTAINERID").unwrap_or_default();
    let code = match std::fs::write(path, id) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    std::process::exit(code)
}

/// Finds the script: stdin's `testPlugin`, then `$CNI_TEST_PLUGIN_SCRIPT`, then
/// `<argv0>.script`. Returns an empty object when there is none.
fn load_script(stdin: Option<&Value>, argv0: &str) -> Map<String, Value> {
    if let Some(Value::Object(m)) = stdin.and_then(|v| v.get("testPlugin")) {
        return m.clone();
    }
    let from_file = |path: &str| -> Option<Map<String, Value>> {
        let bytes = std::fs::read(path).ok()?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(m)) => Some(m),
            _ => fail(7, &format!("script {path} is not a JSON object"), "", None),
        }
    };
    if let Ok(path) = std::env::var("CNI_TEST_PLUGIN_SCRIPT") {
        if let Some(m) = from_file(&path) {
            return m;
        }
    }
    from_file(&format!("{argv0}.script")).unwrap_or_default()
}

/// Appends one JSON line describing this call to `path`, in a single write.
fn log_call(path: &str, argv0: &str, command: &str, raw: &[u8], stdin: Option<&Value>) {
    let env: Map<String, Value> = std::env::vars()
        .filter(|(k, _)| k.starts_with("CNI_") && !OWN_VARS.contains(&k.as_str()))
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let stdin = match stdin {
        Some(v) => v.clone(),
        None => Value::String(String::from_utf8_lossy(raw).into_owned()),
    };
    let line = to_line(&json!({
        "argv0": argv0,
        "command": command,
        "env": env,
        "stdin": stdin,
    }));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(path);
    match file {
        Ok(mut f) => {
            if let Err(e) = f.write_all(&line) {
                fail(5, &format!("writing log {path}: {e}"), "", None);
            }
        }
        Err(e) => fail(5, &format!("opening log {path}: {e}"), "", None),
    }
}

/// The default ADD answer: the prevResult converted to the request's version, or a
/// fixed address.
fn default_add_result(stdin: Option<&Value>, version: &str) -> Value {
    if let Some(Value::Object(prev)) = stdin.and_then(|v| v.get("prevResult")) {
        let mut prev = prev.clone();
        prev.insert("cniVersion".into(), Value::String(version.into()));
        return Value::Object(prev);
    }
    let ifname = std::env::var("CNI_IFNAME").unwrap_or_else(|_| "eth0".into());
    let netns = std::env::var("CNI_NETNS").unwrap_or_default();
    if version.starts_with("0.1.") || version.starts_with("0.2.") {
        return json!({
            "cniVersion": version,
            "ip4": {"ip": "10.99.0.2/24", "gateway": "10.99.0.1"},
            "dns": {},
        });
    }
    let mut ip = json!({"address": "10.99.0.2/24", "gateway": "10.99.0.1", "interface": 0});
    if version.starts_with("0.") {
        ip["version"] = json!("4");
    }
    json!({
        "cniVersion": version,
        "interfaces": [{"name": ifname, "mac": "0a:58:0a:63:00:02", "sandbox": netns}],
        "ips": [ip],
        "dns": {},
    })
}

fn to_line(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).unwrap_or_default();
    out.push(b'\n');
    out
}

fn print_and_exit(bytes: &[u8], code: i32) -> ! {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
    std::process::exit(code);
}

/// Prints a CNI error object on stdout and exits (with 1 unless told otherwise).
fn fail(code: u64, msg: &str, details: &str, how: Option<(&str, i32)>) -> ! {
    let (version, exit) = how.unwrap_or(("1.1.0", 1));
    let mut err = json!({"cniVersion": version, "code": code, "msg": msg});
    if !details.is_empty() {
        err["details"] = json!(details);
    }
    print_and_exit(&to_line(&err), exit)
}
