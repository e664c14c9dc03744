//! Hostile and bad input: network configuration files (malformed, wrong types, huge, deep
//! nesting, non-UTF-8, path traversal in names, plugin types that are paths, symlinks out
//! of the directory) and flags (`--net`, `--port`, `--dns*`, `--hosts-entry`,
//! `--hostname`, UUIDs). Each gets a clear error naming the thing, and nothing is set up:
//! no pod, no namespace, no plugin call (the leak guard checks the host).
//!
//! Policy (docs/RELIABILITY.md): a bad file in the configuration directory is skipped with
//! a warning naming the file and why; selecting the network it meant to define then fails
//! with "networks not found". Symlinks are followed, like libcni does, but as root the
//! target and every directory above it must pass the ownership check (see
//! reliability_perms.rs). No user input ever reaches a shell.

use crate::leaks;

use std::fs;
use std::os::unix::fs::symlink;

use leaks::lab::{stderr, stdout, Lab};
use leaks::Guard;
use serde_json::json;

/// `rkt run --net=<net> -- /bin/true` with the network file `10-bad.conflist` holding
/// `bytes`: the file is named with why it was skipped, the network is not found, exit 254,
/// no pod, no plugin call.
fn bad_file(bytes: &[u8], why: &str) {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("bad");
    lab.plugin("plug", json!({}));
    fs::write(lab.conf_dir().join("10-bad.conflist"), bytes).unwrap();
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains("10-bad.conflist"), "names the file: {err}");
    assert!(err.contains(why), "says {why:?}: {err}");
    assert!(err.contains(&format!("networks not found: {net}")), "{err}");
    assert!(lab.pods().is_empty(), "no pod: {:?}", lab.pods());
    assert!(lab.calls().is_empty(), "{:?}", lab.call_lines());
}

#[test]
fn malformed_json() {
    bad_file(b"{\"cniVersion\": \"1.0.0\", \"name\":", "invalid JSON");
}

#[test]
fn wrong_types() {
    bad_file(
        br#"{"cniVersion": "1.0.0", "name": 5, "plugins": [{"type": "plug"}]}"#,
        "must be a string",
    );
    bad_file(
        br#"{"cniVersion": "1.0.0", "name": "x", "plugins": "plug"}"#,
        "must be an array",
    );
}

#[test]
fn deep_nesting() {
    let mut deep =
        b"{\"cniVersion\":\"1.0.0\",\"name\":\"x\",\"plugins\":[{\"type\":\"plug\",\"a\":".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    bad_file(&deep, "recursion limit");
}

#[test]
fn non_utf8() {
    bad_file(
        b"{\"cniVersion\":\"1.0.0\",\"name\":\"x\xff\xfe\",\"plugins\":[{\"type\":\"plug\"}]}",
        "invalid JSON",
    );
}

#[test]
fn huge_garbage() {
    let mut huge = b"{\"cniVersion\":\"1.0.0\",\"name\":\"x\",\"pad\":\"".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 16 << 20));
    huge.extend(b"\",\"plugins\":[{\"type\":\"plug\"}");
    bad_file(&huge, "invalid JSON");
}

#[test]
fn network_name_with_path_traversal() {
    test_kit::require_root!();
    for name in ["../../etc/evil", "a/b", ".hidden", ""] {
        let lab = Lab::new();
        lab.plugin("plug", json!({}));
        lab.conf(
            "10-bad.conflist",
            &json!({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "plug"}]}),
        );
        let _g = Guard::new(lab.ctx(&[]));
        let out = lab.run(&["--net=all", "--", "/bin/true"]);
        let err = stderr(&out);
        // `all` still runs with the built-ins; the bad file is skipped, naming why.
        assert!(err.contains("10-bad.conflist"), "{name:?}: {err}");
        assert!(err.contains("invalid network name"), "{name:?}: {err}");
        assert!(lab.calls().is_empty(), "{:?}", lab.call_lines());
        assert!(!std::path::Path::new("/var/lib/cni/networks/../../etc/evil").exists());
        let _ = lab.gc();
    }
}

#[test]
fn plugin_type_that_is_a_path() {
    for ty in ["../../bin/sh", "/bin/sh", "./plug", "plug/../plug"] {
        let doc = json!({"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": ty}]});
        bad_file(doc.to_string().as_bytes(), "invalid plugin type");
    }
}

/// A configuration file that is a symlink out of the directory is followed (as libcni
/// does) when the target is as trusted as the directory.
#[test]
fn symlink_out_of_the_directory_to_a_trusted_file_is_followed() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("link");
    lab.plugin("plug", json!({}));
    fs::create_dir(lab.path("elsewhere")).unwrap();
    let target = lab.path("elsewhere/net.conflist");
    fs::write(
        &target,
        json!({"cniVersion": "1.0.0", "name": net, "plugins": [{"type": "plug"}]}).to_string(),
    )
    .unwrap();
    symlink(&target, lab.conf_dir().join("10-link.conflist")).unwrap();
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(lab.call_lines(), ["ADD plug eth0", "DEL plug eth0"]);
}

/// A dangling symlink is a file that failed to load, named in the warning.
#[test]
fn dangling_symlink_is_skipped_with_its_name() {
    test_kit::require_root!();
    let lab = Lab::new();
    let net = lab.net("dang");
    symlink(
        "/nonexistent/x.conflist",
        lab.conf_dir().join("10-dang.conflist"),
    )
    .unwrap();
    let _g = Guard::new(lab.ctx(&[&net]));
    let out = lab.run(&[&format!("--net={net}"), "--", "/bin/true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    assert!(err.contains(&format!("networks not found: {net}")), "{err}");
    assert!(lab.pods().is_empty());
}

/// Every bad flag: exit 254, the flag and the value named, no pod, nothing on the host.
#[test]
fn bad_flags_are_refused_before_anything_is_set_up() {
    let lab = Lab::new();
    let net = lab.plain_net("flags", "plug");
    let _g = Guard::new(lab.ctx(&[&net]));
    let long = "a".repeat(70);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--net=a,,b".into()], "--net"),
        (vec!["--net=:x".into()], "--net"),
        (vec!["--net=all:x".into()], "\"all\""),
        (vec![format!("--net={net},{net}")], "more than once"),
        (
            vec![format!("--net={net}"), format!("--net={net}")],
            "more than once",
        ),
        (
            vec!["--net=nosuch-net-x".into()],
            "networks not found: nosuch-net-x",
        ),
        (vec!["--dns=1.2.3.999".into()], "\"1.2.3.999\""),
        (
            vec!["--dns=host".into(), "--dns=8.8.8.8".into()],
            "--dns=host",
        ),
        (
            vec![
                "--dns=1.1.1.1".into(),
                "--dns-search=a\nnameserver 6.6.6.6".into(),
            ],
            "--dns-search",
        ),
        (
            vec![
                "--dns=1.1.1.1".into(),
                "--dns-opt=x\nnameserver 6.6.6.6".into(),
            ],
            "--dns-opt",
        ),
        (
            vec![
                "--dns=1.1.1.1".into(),
                "--dns-domain=x\nnameserver 6.6.6.6".into(),
            ],
            "--dns-domain",
        ),
        (vec!["--hosts-entry=1.2.3.4".into()], "\"1.2.3.4\""),
        (vec!["--hosts-entry=notanip=x".into()], "not an IP address"),
        (vec!["--hosts-entry=1.2.3.4=a\nb".into()], "--hosts-entry"),
        (vec!["--port=foo".into()], "--port=\"foo\""),
        (vec!["--port=99999:80".into()], "99999"),
        (vec![format!("--hostname={long}")], "--hostname"),
        (vec!["--hostname=".into()], "--hostname"),
        (vec!["--hostname=ok\n6.6.6.6 evil".into()], "--hostname"),
        (vec!["--hostname=$(touch /tmp/pwned)".into()], "--hostname"),
        (vec!["--hostname=a b".into()], "--hostname"),
    ];
    for (flags, needle) in &cases {
        let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
        args.extend(["--", "/bin/true"]);
        let out = lab.run(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(254), "{flags:?}: {err}");
        assert!(
            err.contains(needle),
            "{flags:?}: stderr lacks {needle:?}: {err}"
        );
        assert!(lab.pods().is_empty(), "{flags:?} created a pod");
    }
    assert!(lab.calls().is_empty(), "{:?}", lab.call_lines());
}

#[test]
fn bad_uuids_are_refused_naming_them() {
    let lab = Lab::new();
    let _g = Guard::new(lab.ctx(&[]));
    for cmd in ["status", "rm", "stop", "enter", "run-prepared"] {
        for uuid in [
            "zzzz",
            "../../etc",
            "",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            let out = lab.output(&[cmd, uuid]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(254), "{cmd} {uuid:?}: {err}");
            assert!(
                err.contains(&format!("{uuid:?}")),
                "{cmd} {uuid:?}: names it: {err}"
            );
        }
    }
    let file = lab.path("uuid");
    fs::write(&file, "\n").unwrap();
    let out = lab.output(&["status", &format!("--uuid-file={}", file.display())]);
    assert_eq!(out.status.code(), Some(254));
    assert!(stderr(&out).contains(&file.display().to_string()));
    assert!(stdout(&out).is_empty());
}

/// The hostname reaches /etc/hosts and the UTS namespace as given, never a shell.
#[test]
fn no_shell_interprets_user_input() {
    test_kit::require_root!();
    let lab = Lab::new();
    let _g = Guard::new(lab.ctx(&[]));
    let marker = lab.path("pwned");
    let out = lab.run(&[
        "--net=none",
        "--hostname=host-1.example",
        &format!("--set-env=X=$(touch {})", marker.display()),
        "--",
        "/bin/cat",
        "/etc/hosts",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("host-1.example"));
    assert!(!marker.exists(), "something ran a shell on user input");
}

/// A bad `paths.d` file stops every command with an error naming the file; no pod.
#[test]
fn bad_paths_configuration_files() {
    let mut deep = b"{\"rktKind\":\"paths\",\"rktVersion\":\"v1\",\"x\":".to_vec();
    deep.extend(std::iter::repeat_n(b'[', 10_000));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{\"rktKind\":\"paths\",".to_vec(), "malformed JSON"),
        (
            br#"{"rktKind":"paths","rktVersion":"v1","data":5}"#.to_vec(),
            "must be a string",
        ),
        (deep, "recursion limit"),
        (
            b"{\"rktKind\":\"paths\",\"rktVersion\":\"v1\",\"data\":\"/x\xff\"}".to_vec(),
            "malformed JSON",
        ),
        (
            br#"{"rktKind":"paths","rktVersion":"v1","net-plugin":"../../bin"}"#.to_vec(),
            "absolute",
        ),
    ];
    for (bytes, why) in cases {
        let lab = Lab::new();
        let file = lab.path("local/paths.d/p.json");
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, &bytes).unwrap();
        let out = lab.run(&["--net=none", "--", "/bin/true"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(254), "{why}: {err}");
        assert!(err.contains(&file.display().to_string()), "{why}: {err}");
        assert!(err.contains(why), "{why}: {err}");
        assert!(lab.pods().is_empty());
    }
}
