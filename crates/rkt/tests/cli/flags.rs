//! rkt 1.30's flags, as scripts written for upstream rkt use them (issue 16, "Flags"):
//! booleans with `=true`/`=false`, comma lists, the `--hosts-entry` grammar, `enter`
//! without `--`, `prepare --quiet`, `status --wait-ready`, a global `--insecure-options`,
//! the app flags rkt had (`--set-env-file`, `--environment`, `--ipc`, `--interactive`,
//! `--oom-score-adjust`) and the ones this rkt refuses by name. Tests that run pods need
//! root (skipped otherwise) and end with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;

use pod_support::World;
use serde_json::Value;

/// The manifest (`pod.json`) of the pod `rkt prepare <args>` makes.
fn prepared_manifest(world: &World, args: &[&str]) -> Value {
    let mut full = vec!["prepare"];
    full.extend_from_slice(args);
    let out = world.rkt(&full).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let text = fs::read_to_string(world.path(&format!("data/pods/{uuid}/pod.json")))
        .unwrap_or_else(|e| panic!("pod {uuid}'s manifest: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Flags: every boolean flag takes `=true` and `=false` (and stays a bare switch), before
/// and after the command name for the global ones.
#[test]
fn flags_every_boolean_flag_accepts_true_and_false() {
    let world = World::new(support::RKT);
    let debug_lines = |args: &[&str]| {
        let out = world.rkt(args).run();
        out.assert_success();
        out.stderr().matches("rkt: debug:").count()
    };
    assert!(debug_lines(&["--debug", "config"]) > 0);
    assert!(debug_lines(&["--debug=true", "config"]) > 0);
    assert!(debug_lines(&["config", "--debug=1"]) > 0);
    assert_eq!(debug_lines(&["--debug=false", "config"]), 0);

    let origins = |flag: &str| {
        let out = world.rkt(&["config", flag]).run();
        out.assert_success();
        out.json()["stage0"][0].get("origins").is_some()
    };
    assert!(origins("--show-origin"));
    assert!(origins("--show-origin=true"));
    assert!(!origins("--show-origin=false"));

    let inherit = |args: &[&str]| prepared_manifest(&world, args)["apps"][0]["inheritEnv"].clone();
    assert_eq!(inherit(&["--inherit-env", "true"]), true);
    assert_eq!(inherit(&["--inherit-env=true", "true"]), true);
    assert_eq!(inherit(&["--inherit-env=false", "true"]), false);

    let header = |flag: &str| {
        let out = world.rkt(&["list", flag]).run();
        out.assert_success();
        out.stdout().starts_with("UUID")
    };
    assert!(!header("--no-legend"));
    assert!(!header("--no-legend=true"));
    assert!(header("--no-legend=false"));
    let out = world.rkt(&["list", "--full=true"]).run();
    out.assert_success();
    world
        .rkt(&["list", "--full=maybe"])
        .run()
        .assert_failure()
        .assert_stderr_contains("--full");

    // A prepared pod: --wait=false does not wait, --force=false is a plain stop.
    let out = world.rkt(&["prepare", "true"]).run();
    let uuid = out.stdout().trim().to_string();
    world
        .rkt(&["status", "--wait=false", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains("state=prepared");
    world
        .rkt(&["stop", "--force=false", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("is not running");
}

/// Flags: `status --wait=true` waits for the pod to exit, as a bare `--wait`.
#[test]
fn flags_status_wait_true_waits_for_the_pod_to_exit() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "0.5"]);
    world
        .rkt(&["status", "--wait=true", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains("state=exited");
    assert_eq!(world.wait_child(index).0, Some(0));
}

/// Flags: `status --wait-ready[=DURATION]` returns once the pod runs its app; it fails when
/// the pod does not become ready in time, or ended first.
#[test]
fn flags_status_wait_ready() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let prepared = world.rkt(&["prepare", "true"]).run().stdout();
    let prepared = prepared.trim();
    world
        .rkt(&["status", "--wait-ready=200ms", prepared])
        .run()
        .assert_failure()
        .assert_stderr_contains("still not ready after --wait-ready");

    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "30"]);
    let out = world.rkt(&["status", "--wait-ready", &uuid]).run();
    out.assert_success()
        .assert_stdout_contains("state=running")
        .assert_stdout_contains("pid=");
    world
        .rkt(&["status", "--wait-ready=10s", &uuid])
        .run()
        .assert_success();
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    world
        .rkt(&["status", "--wait-ready=true", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("ended before it was ready");
}

/// Flags: `--insecure-options` is accepted before the subcommand, as upstream's global flag.
#[test]
fn flags_insecure_options_accepted_before_the_subcommand() {
    use std::os::unix::fs::PermissionsExt;
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let conf = world.path("local/net.d");
    fs::create_dir_all(&conf).unwrap();
    fs::set_permissions(&conf, fs::Permissions::from_mode(0o777)).unwrap();
    world.rkt(&["net", "list"]).run().assert_failure();
    world
        .rkt(&["--insecure-options=net-plugins", "net", "list"])
        .run()
        .assert_success();
    world
        .rkt(&["net", "status", "--insecure-options=net-plugins"])
        .run()
        .assert_success();
}

/// Flags: `prepare --quiet` prints the UUID and nothing else.
#[test]
fn flags_prepare_quiet_prints_only_the_uuid() {
    let world = World::new(support::RKT);
    for flag in ["--quiet", "--quiet=true"] {
        let out = world.rkt(&["prepare", flag, "--", "true"]).run();
        out.assert_success();
        let stdout = out.stdout();
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        assert!(
            world.pods().contains(&stdout.trim().to_string()),
            "{stdout}"
        );
    }
}

/// `rkt run --net=none <flags> -- cat FILE` as root; returns what the app printed.
fn cat_in_pod(world: &World, flags: &[&str], file: &str) -> String {
    let mut args = vec!["run", "--net=none"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "cat", file]);
    let out = world.rkt(&args).run();
    out.assert_success();
    out.stdout()
}

/// Flags: `--dns` takes a comma list; `--dns-search`, `--dns-opt` and `--dns-domain` work
/// without `--dns=IP` (on the host's name servers when no network gives DNS); and
/// `--hosts-entry` takes rkt's `IP=HOST[,IP=HOST...]`.
#[test]
fn flags_dns_lists_dns_search_alone_and_hosts_entry_grammar() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let resolv = cat_in_pod(&world, &["--dns=192.0.2.1,192.0.2.2"], "/etc/resolv.conf");
    assert!(
        resolv.contains("nameserver 192.0.2.1\nnameserver 192.0.2.2\n"),
        "{resolv}"
    );

    let resolv = cat_in_pod(
        &world,
        &[
            "--dns-search=a.example,b.example",
            "--dns-opt=ndots:2",
            "--dns-domain=d.example",
        ],
        "/etc/resolv.conf",
    );
    assert!(resolv.contains("search a.example b.example\n"), "{resolv}");
    assert!(resolv.contains("options ndots:2\n"), "{resolv}");
    assert!(resolv.contains("domain d.example\n"), "{resolv}");
    let host = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    for ns in host.lines().filter(|l| l.starts_with("nameserver")) {
        assert!(resolv.contains(ns), "{ns:?} of the host is not in {resolv}");
    }

    let hosts = cat_in_pod(
        &world,
        &["--hosts-entry=198.51.100.0=host1,198.51.100.1=host2"],
        "/etc/hosts",
    );
    assert!(hosts.contains("\n198.51.100.0\thost1\n"), "{hosts}");
    assert!(hosts.contains("\n198.51.100.1\thost2\n"), "{hosts}");
    assert!(!hosts.contains("198.51.100.1=host2"), "{hosts}");
}

/// `rkt enter <args>` with `input` on stdin; returns (exit code, stdout, stderr).
fn enter_with_stdin(world: &World, args: &[&str], input: &str) -> (Option<i32>, String, String) {
    let mut full = vec!["enter"];
    full.extend_from_slice(args);
    let out = world.output_with_stdin(&full, input);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Flags: `rkt enter UUID CMD ARGS` without `--`, `--app=NAME`, `--uuid-file=F CMD`, and a
/// default shell of /bin/bash falling back to /bin/sh when the pod's root has no bash.
#[test]
fn flags_enter_command_without_double_dash_app_and_default_shell() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let (uuid, index) = world.spawn_run(&["--net=none", "--name=idle", "--", "sleep", "1000"]);
    world.wait_running(&uuid);
    let out = world.rkt(&["enter", &uuid, "echo", "-n", "hi"]).run();
    out.assert_success();
    assert_eq!(out.stdout(), "hi");
    world
        .rkt(&["enter", "--app=idle", &uuid, "--", "echo", "two"])
        .run()
        .assert_success()
        .assert_stdout_contains("two\n");
    world
        .rkt(&["enter", "--app=other", &uuid, "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("--app=other")
        .assert_stderr_contains("its apps: idle");
    let uuid_file = world.path("uuid-bg-0");
    world
        .rkt(&[
            "enter",
            &format!("--uuid-file={}", uuid_file.display()),
            "echo",
            "from-file",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("from-file\n");
    // The host's root has bash: the default shell is bash.
    let (code, stdout, stderr) = enter_with_stdin(&world, &[&uuid], "echo \"bash=$BASH\"\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("bash=/"), "{stdout}");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);

    // A rootfs without bash: /bin/sh.
    let rootfs = world.path("rootfs");
    pod_support::tiny_rootfs(&rootfs);
    let root_arg = format!("--rootfs={}", rootfs.display());
    let (uuid, index) = world.spawn_run(&["--net=none", &root_arg, "--", "/bin/sleep", "1000"]);
    world.wait_running(&uuid);
    let (code, stdout, stderr) = enter_with_stdin(&world, &[&uuid], "echo \"bash=$BASH\"\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "bash=\n");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
}

/// `rkt run --net=none <flags> -- sh -c SCRIPT` with `input` on stdin; returns the outcome.
fn run_sh(world: &World, flags: &[&str], script: &str, input: &str) -> std::process::Output {
    let mut args = vec!["run", "--net=none"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    world.output_with_stdin(&args, input)
}

fn stdout_of(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Flags: `--set-env-file` (NAME=VALUE lines, comments and blank lines skipped),
/// overridden by `--set-env`, overridden by `--environment`; a bad line is named.
#[test]
fn flags_set_env_file_and_environment() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let file = world.path("app.env");
    fs::write(
        &file,
        "# settings\nA=from-file\n\nB=two words\nC=from-file\n",
    )
    .unwrap();
    let file_flag = format!("--set-env-file={}", file.display());
    let out = run_sh(
        &world,
        &[
            &file_flag,
            "--set-env=C=from-set-env",
            "--set-env=D=d",
            "--environment=D=from-environment",
        ],
        "echo \"$A|$B|$C|$D\"",
        "",
    );
    assert_eq!(
        stdout_of(&out),
        "from-file|two words|from-set-env|from-environment\n"
    );

    fs::write(&file, "A=1\nnot a variable\n").unwrap();
    let before = world.pods().len();
    world
        .rkt(&["prepare", &file_flag, "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("line 2")
        .assert_stderr_contains(&file.display().to_string());
    assert_eq!(world.pods().len(), before);
}

/// Flags: `--ipc=private|auto` (the default) gives the pod its own IPC namespace,
/// `--ipc=parent` the caller's; `--oom-score-adjust` (rkt's `--oom-score-adj`) sets the
/// app's oom_score_adj.
#[test]
fn flags_ipc_and_oom_score_adjust() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let host_ipc = fs::read_link("/proc/self/ns/ipc").unwrap();
    let host_ipc = host_ipc.to_string_lossy();
    let ipc = |flags: &[&str]| stdout_of(&run_sh(&world, flags, "readlink /proc/self/ns/ipc", ""));
    assert_ne!(ipc(&[]).trim(), host_ipc);
    assert_ne!(ipc(&["--ipc=private"]).trim(), host_ipc);
    assert_ne!(ipc(&["--ipc=auto"]).trim(), host_ipc);
    assert_eq!(ipc(&["--ipc=parent"]).trim(), host_ipc);
    world
        .rkt(&["run", "--ipc=shared", "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains("--ipc");

    let oom =
        |flags: &[&str]| stdout_of(&run_sh(&world, flags, "cat /proc/self/oom_score_adj", ""));
    assert_eq!(oom(&["--oom-score-adjust=500"]), "500\n");
    assert_eq!(oom(&["--oom-score-adjust", "300"]), "300\n");
    // Prepared pods keep it for run-prepared.
    let prepared = world
        .rkt(&[
            "prepare",
            "--oom-score-adjust=700",
            "--ipc=parent",
            "--",
            "sh",
            "-c",
            "cat /proc/self/oom_score_adj; readlink /proc/self/ns/ipc",
        ])
        .run();
    prepared.assert_success();
    let out = world
        .rkt(&["run-prepared", "--net=none", prepared.stdout().trim()])
        .run();
    out.assert_success();
    assert_eq!(out.stdout(), format!("700\n{host_ipc}\n"));
    world
        .rkt(&["run", "--oom-score-adjust=1001", "--", "true"])
        .run()
        .assert_failure()
        // Named by rkt 1.30's spelling of the same flag.
        .assert_stderr_contains("--oom-score-adj=1001");
}

/// Whether this process holds CAP_SYS_RESOURCE (bit 24 of CapEff).
fn has_cap_sys_resource() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap()
        .trim();
    u64::from_str_radix(hex, 16).unwrap() & (1 << 24) != 0
}

/// `--oom-score-adj` (rkt 1.30's per-app isolator): each app's own, set in its process
/// (a later app's too; the others keep the runner's); a value below rkt's own, which the
/// kernel lets only a holder of CAP_SYS_RESOURCE give, is refused before any pod exists,
/// naming the flag and the reason, when rkt lacks it (as root on this project's hosts does).
#[test]
fn flags_oom_score_adj_per_app_and_lowering() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let own: i16 = fs::read_to_string("/proc/self/oom_score_adj")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let raised = (own + 100).min(1000).to_string();
    let flag = format!("--oom-score-adj={raised}");
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--exit-policy=untilAll",
            "--name=first",
            "--",
            "sh",
            "-c",
            "echo first $(cat /proc/self/oom_score_adj)",
            "---",
            "--name=second",
            &flag,
            "sh",
            "-c",
            "echo second $(cat /proc/self/oom_score_adj)",
        ])
        .run();
    out.assert_success();
    assert!(
        out.stdout().contains(&format!("first {own}\n"))
            && out.stdout().contains(&format!("second {raised}\n")),
        "{}",
        out.stdout()
    );

    let before = world.pods().len();
    let lowered = (own - 100).max(-1000).to_string();
    let flag = format!("--oom-score-adj={lowered}");
    for cmd in ["run", "prepare"] {
        let mut args = vec![cmd, &flag, "--", "sh", "-c", "cat /proc/self/oom_score_adj"];
        if cmd == "run" {
            args.insert(1, "--net=none");
        }
        let out = world.rkt(&args).run();
        if has_cap_sys_resource() {
            out.assert_success();
            if cmd == "run" {
                assert_eq!(out.stdout(), format!("{lowered}\n"));
            }
        } else {
            out.assert_exit_code(254)
                .assert_stderr_contains(&flag)
                .assert_stderr_contains("CAP_SYS_RESOURCE");
            assert_eq!(world.pods().len(), before, "{cmd}: a pod was left behind");
        }
    }
    // The check left rkt's own score (and so this test's) where it was.
    let after: i16 = fs::read_to_string("/proc/self/oom_score_adj")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(after, own);
}

/// Flags: `--interactive` (the app reads rkt's stdin, as by default), `--interactive=false`
/// and `--stdin=null` (it reads /dev/null), `--stdout=null`; other stream modes refused.
#[test]
fn flags_interactive_and_null_streams() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let cat = |flags: &[&str]| stdout_of(&run_sh(&world, flags, "cat; echo end", "typed\n"));
    assert_eq!(cat(&[]), "typed\nend\n");
    assert_eq!(cat(&["--interactive"]), "typed\nend\n");
    assert_eq!(cat(&["--interactive=true"]), "typed\nend\n");
    assert_eq!(cat(&["--interactive=false"]), "end\n");
    assert_eq!(cat(&["--stdin=null"]), "end\n");
    assert_eq!(cat(&["--stdout=null"]), "");
    let before = world.pods().len();
    for flag in [
        "--stdin=tty",
        "--stdout=stream",
        "--stderr=tty",
        "--stdin=log",
    ] {
        world
            .rkt(&["run", flag, "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(&format!("{flag}: not supported by this rkt: "));
    }
    assert_eq!(world.pods().len(), before);
}

/// Flags: upstream's `--mds-register` and `--stage1-*` are recognised and refused with
/// "not supported by this rkt: <why>" before anything is created (never taken for the
/// command); `--mds-register=false` is accepted.
#[test]
fn flags_mds_register_and_stage1_are_refused_by_name() {
    let world = World::new(support::RKT);
    for cmd in ["run", "prepare"] {
        for flag in [
            "--mds-register",
            "--mds-register=true",
            "--stage1-url=docker://x",
            "--stage1-path=/usr/lib/rkt/stage1.aci",
            "--stage1-name=coreos.com/rkt/stage1-coreos",
            "--stage1-hash=sha512-0",
            "--stage1-from-dir=stage1-fly.aci",
        ] {
            let name = flag.split('=').next().unwrap();
            world
                .rkt(&[cmd, flag, "--", "true"])
                .run()
                .assert_failure()
                .assert_stderr_contains(name)
                .assert_stderr_contains("not supported by this rkt: ");
        }
    }
    assert_eq!(world.pods(), Vec::<String>::new());
    let out = world
        .rkt(&["prepare", "--mds-register=false", "--", "true"])
        .run();
    out.assert_success();
    let prepared = out.stdout().trim().to_string();
    world
        .rkt(&["run-prepared", "--stage1-path=/x", &prepared])
        .run()
        .assert_failure()
        .assert_stderr_contains("--stage1-path=/x: not supported by this rkt: ");
}

/// `--annotation=K=V` (rkt 1.30's app annotation): kept in the pod manifest as the app's
/// `annotations`, each app its own (a later K replaces an earlier one); a word that is not
/// KEY=VALUE is refused naming it, before any pod exists.
#[test]
fn flags_annotation_is_kept_per_app_in_the_manifest() {
    let world = World::new(support::RKT);
    let manifest = prepared_manifest(
        &world,
        &[
            "--annotation=team=web",
            "--annotation=note=two words",
            "--annotation=team=api",
            "--name=a",
            "true",
            "---",
            "--annotation=only=b",
            "--name=b",
            "true",
        ],
    );
    assert_eq!(
        manifest["apps"][0]["annotations"],
        serde_json::json!({"team": "api", "note": "two words"})
    );
    assert_eq!(
        manifest["apps"][1]["annotations"],
        serde_json::json!({"only": "b"})
    );
    // None given: no field.
    let plain = prepared_manifest(&world, &["true"]);
    assert!(plain["apps"][0].get("annotations").is_none(), "{plain}");
    let before = world.pods().len();
    world
        .rkt(&["prepare", "--annotation=novalue", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--annotation=\"novalue\"");
    assert_eq!(world.pods().len(), before);
}

/// rkt's `--set-env` and `--set-env-file` are the pod's: given before the first `---` every
/// app has them, under a later app's own `--set-env` and `--environment`.
#[test]
fn flags_set_env_before_the_first_app_is_every_apps() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let file = world.path("pod.env");
    fs::write(&file, "FROM_FILE=f\nOVER=file\n").unwrap();
    let file_flag = format!("--set-env-file={}", file.display());
    let show = "echo $0 $POD $FROM_FILE $OVER";
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--exit-policy=untilAll",
            "--set-env=POD=p",
            &file_flag,
            "--set-env=OVER=pod",
            "--name=a",
            "sh",
            "-c",
            show,
            "a",
            "---",
            "--name=b",
            "--set-env=OVER=b",
            "sh",
            "-c",
            show,
            "b",
            "---",
            "--name=c",
            "--environment=POD=c",
            "sh",
            "-c",
            show,
            "c",
        ])
        .run();
    out.assert_success();
    let text = out.stdout();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines, ["a p f pod", "b p f b", "c c f pod"], "{text}");
}
