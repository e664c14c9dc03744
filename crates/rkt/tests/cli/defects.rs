//! The command-line defects of issue 16, each tried as a user would through the binary: an
//! unknown option taken for the command, `--rootfs` pods without resolv.conf/hosts, a port
//! of a family the pod has no address of, `rkt net` disagreeing with `rkt run`, CNI_ARGS
//! that real plugins refuse, and the smaller ones; and issue 22's found following the docs
//! (names resolved in the rootfs, usage errors in one line, a `--rootfs` never written, its
//! own /etc/hostname, ping, setting up in two commands). Tests that run pods need root
//! (skipped otherwise) and end with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;

use pod_support::World;

/// Issue 16, defect 1: a word starting with '-' before the command is a known option or a
/// usage error naming it; nothing is created and no plugin runs.
#[test]
fn unknown_or_misplaced_option_before_the_command_is_a_usage_error_and_creates_nothing() {
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--bogus", "--net=none", "--", "true"], "--bogus"),
        (&["run", "--no-such=1", "--", "true"], "--no-such"),
        (&["prepare", "--bogus", "--", "true"], "--bogus"),
        (&["prepare", "--net=default", "--", "true"], "--net"),
        (&["prepare", "--dns=192.0.2.53", "--", "true"], "--dns"),
        (&["prepare", "-q", "true"], "-q"),
    ];
    for (args, word) in cases {
        world
            .rkt(args)
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains(&format!("{word} is not an option of `rkt "));
        assert_eq!(
            world.pods(),
            Vec::<String>::new(),
            "rkt {args:?} made a pod"
        );
    }
}

/// Issue 16, defect 1: the command starts at `--` or at the first word that is not an
/// option; what follows it is the command's, even if it starts with '-'.
#[test]
fn unknown_or_misplaced_option_the_command_starts_at_double_dash_or_first_word() {
    let world = World::new(support::RKT);
    let out = world
        .rkt(&["prepare", "--name=a", "sh", "-c", "--debug"])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest = std::fs::read_to_string(world.path(&format!("data/pods/{uuid}/pod.json")))
        .unwrap_or_else(|e| panic!("pod {uuid}'s manifest: {e}"));
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        manifest["apps"][0]["exec"],
        serde_json::json!(["sh", "-c", "--debug"])
    );
    // Taken for the command (which no PATH directory has, so no pod is made: issue 22,
    // defect 6), not for an option.
    world
        .rkt(&["prepare", "--", "--weird"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("\"--weird\" is neither a stored image nor a program");
    let out = world.rkt(&["prepare", "--", "/bin/--weird"]).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest =
        std::fs::read_to_string(world.path(&format!("data/pods/{uuid}/pod.json"))).unwrap();
    assert!(manifest.contains("\"/bin/--weird\""), "{manifest}");
}

/// Issue 22, defect 7: a command line rkt refuses gets one `rkt: …` line and exit status
/// 254, like rkt's other errors: the nearest real option of that command only when it is
/// really near (`--nte` is `--net`, not clap's `--interactive`), where an option belongs when
/// another command has it (a prepared pod's networks are chosen at `run-prepared`, not clap's
/// `--inherit-env`), the nearest command, the value missing or refused; `--help` is as it was.
#[test]
fn usage_errors_are_one_rkt_line_with_the_nearest_option_and_where_an_option_belongs() {
    let world = World::new(support::RKT);
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--nte", "--", "true"],
            "rkt: run: --nte is not an option of `rkt run`; did you mean --net?",
        ),
        (
            &["prepare", "--net=default", "--", "true"],
            "rkt: prepare: --net is not an option of `rkt prepare`; networks are chosen at \
             `rkt run-prepared --net=…`",
        ),
        (
            &["list", "--net=default"],
            "rkt: list: --net is not an option of `rkt list`; it is an option of `rkt run`, \
             `rkt run-prepared`, `rkt app sandbox`",
        ),
        (
            &["run", "--bogus", "--", "true"],
            "rkt: run: --bogus is not an option of `rkt run` (see `rkt run --help`)",
        ),
        (
            &["run", "--uuid-file-save"],
            "rkt: run: --uuid-file-save needs a value: --uuid-file-save=FILE",
        ),
        (
            &["runn", "--", "true"],
            "rkt: runn is not a command of `rkt`; did you mean `rkt run`?",
        ),
        (
            &["net", "lst"],
            "rkt: net: lst is not a command of `rkt net`; did you mean `rkt net list`?",
        ),
        (
            &["list", "--format=xml"],
            "rkt: list: --format=xml: invalid value (expected text, json, json-pretty)",
        ),
        (
            &["status"],
            "rkt: status: UUID is missing (see `rkt status --help`)",
        ),
    ];
    for (args, expected) in cases {
        let out = world.rkt(args).run();
        out.assert_exit_code(254);
        assert_eq!(out.stderr(), format!("{expected}\n"), "rkt {args:?}");
        assert_eq!(out.stdout(), "", "rkt {args:?}");
    }
    assert_eq!(world.pods(), Vec::<String>::new());
    let out = world.rkt(&["run", "--help"]).run();
    out.assert_success()
        .assert_stdout_contains("Usage: rkt run [OPTIONS] <COMMAND>...")
        .assert_stdout_contains("--net[=<LIST>]");
    assert_eq!(out.stderr(), "");
}

/// A user network on the real `bridge` plugin (bridge and network names unique to the test,
/// subnet `10.113.<n>.0/24`); dropping it deletes the bridge and host-local's directory,
/// which the plugins leave by design.
struct BridgeNet {
    bridge: String,
    name: String,
    subnet: String,
}

impl BridgeNet {
    fn new(world: &World, n: u8, extra: serde_json::Value) -> BridgeNet {
        let seed = uuid::Uuid::new_v4().as_u128() as u32;
        let net = BridgeNet {
            bridge: format!("rktcd{:x}", seed & 0xfffff),
            name: format!("cd-{seed:x}"),
            subnet: format!("10.113.{n}.0/24"),
        };
        let mut plugin = serde_json::json!({
            "type": "bridge", "bridge": net.bridge, "isGateway": true,
            "ipam": {"type": "host-local", "subnet": net.subnet}
        });
        for (k, v) in extra.as_object().into_iter().flatten() {
            plugin[k] = v.clone();
        }
        let conf_dir = world.path("local/net.d");
        fs::create_dir_all(&conf_dir).unwrap();
        fs::write(
            conf_dir.join(format!("10-{}.conflist", net.name)),
            serde_json::json!({"cniVersion": "1.0.0", "name": net.name, "plugins": [plugin]})
                .to_string(),
        )
        .unwrap();
        net
    }

    fn ctx(&self, world: &World) -> leaks::Ctx {
        world
            .leak_ctx()
            .network(&self.name)
            .subnet(&self.subnet)
            .link(&self.bridge)
    }
}

impl Drop for BridgeNet {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        let _ = fs::remove_dir_all(format!("/var/lib/cni/networks/{}", self.name));
    }
}

/// Issue 16, defect 6: `--net=NET:IP=...` works with the real bridge plugin, which refuses
/// unknown CNI_ARGS keys unless `IgnoreUnknown` is set; and a user's own `IgnoreUnknown`
/// is sent instead of rkt's.
#[test]
fn cni_args_lead_with_ignore_unknown_so_the_real_bridge_plugin_takes_ip() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let net = BridgeNet::new(&world, 1, serde_json::json!({}));
    let g = leaks::Guard::new(net.ctx(&world));
    let out = world
        .rkt(&[
            "run",
            &format!("--net={}:IP=10.113.1.9", net.name),
            "--",
            "ip",
            "-4",
            "-o",
            "addr",
            "show",
            "eth0",
        ])
        .run();
    out.assert_success()
        .assert_stdout_contains("inet 10.113.1.9/24");
    // With the user's IgnoreUnknown=0 (sent as given, not overridden), bridge refuses the
    // key it does not know, as it did for every arg before.
    let out = world
        .rkt(&[
            "run",
            &format!("--net={}:IP=10.113.1.10;K=V;IgnoreUnknown=0", net.name),
            "--",
            "true",
        ])
        .run();
    out.assert_failure().assert_stderr_contains("unknown args");
    drop(net);
    g.check();
}

/// The names of the entries of `dir` (empty when it does not exist), sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Runs `sh -c 'cat /etc/resolv.conf; echo ---; cat /etc/hosts'` in a `--rootfs` pod with
/// `flags`; returns (resolv.conf, hosts) as the app saw them.
fn rootfs_etc_files(world: &World, rootfs: &std::path::Path, flags: &[&str]) -> (String, String) {
    let root_arg = format!("--rootfs={}", rootfs.display());
    let mut args = vec!["run", root_arg.as_str()];
    args.extend_from_slice(flags);
    args.extend_from_slice(&[
        "--",
        "/bin/sh",
        "-c",
        "cat /etc/resolv.conf && echo --- && cat /etc/hosts",
    ]);
    let out = world.rkt(&args).run();
    out.assert_success();
    let stdout = out.stdout();
    let (resolv, hosts) = stdout
        .split_once("---\n")
        .unwrap_or_else(|| panic!("rkt {args:?}: {stdout}"));
    (resolv.to_string(), hosts.to_string())
}

/// Issue 16, defect 2: a `--rootfs` pod always gets /etc/resolv.conf and /etc/hosts, from
/// the host's files where the pod has none of its own (`--dns=host`, `--hosts-entry=host`,
/// `--net=host`, no DNS at all), and nothing is written into the user's directory, whether
/// its /etc lacks the files, has them, or is missing.
#[test]
fn rootfs_pods_get_resolv_conf_and_hosts_without_writing_into_the_rootfs() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    pod_support::tiny_rootfs(&rootfs);
    fs::write(rootfs.join("etc/os-release"), "ID=tiny\n").unwrap();
    let host_resolv = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let host_hosts = fs::read_to_string("/etc/hosts").unwrap_or_default();

    // No DNS setting: the host's resolv.conf (what a pod on the host's root sees), the
    // pod's own hosts; the rootfs's other /etc entries stay visible.
    let (resolv, hosts) = rootfs_etc_files(&world, &rootfs, &["--net=none", "--hostname=tiny1"]);
    assert_eq!(resolv, host_resolv);
    assert!(hosts.contains("tiny1"), "{hosts}");
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &format!("--rootfs={}", rootfs.display()),
            "--",
            "/bin/cat",
            "/etc/os-release",
        ])
        .run();
    out.assert_success().assert_stdout_contains("ID=tiny");

    let (resolv, hosts) = rootfs_etc_files(
        &world,
        &rootfs,
        &["--net=none", "--dns=host", "--hosts-entry=host"],
    );
    assert_eq!(
        (resolv.as_str(), hosts.as_str()),
        (host_resolv.as_str(), host_hosts.as_str())
    );
    let (resolv, hosts) = rootfs_etc_files(&world, &rootfs, &["--net=host"]);
    assert_eq!(
        (resolv.as_str(), hosts.as_str()),
        (host_resolv.as_str(), host_hosts.as_str())
    );
    let (resolv, _) = rootfs_etc_files(&world, &rootfs, &["--net=none", "--dns=192.0.2.53"]);
    assert!(resolv.contains("nameserver 192.0.2.53"), "{resolv}");
    assert_eq!(entries(&rootfs.join("etc")), ["os-release"]);

    // The rootfs has its own files: the pod's are mounted over them, which stay unchanged.
    fs::write(rootfs.join("etc/resolv.conf"), "# mine\n").unwrap();
    fs::write(rootfs.join("etc/hosts"), "# my hosts\n").unwrap();
    let (resolv, hosts) = rootfs_etc_files(&world, &rootfs, &["--net=none", "--dns=192.0.2.53"]);
    assert!(resolv.contains("nameserver 192.0.2.53"), "{resolv}");
    assert!(hosts.contains("localhost"), "{hosts}");
    assert_eq!(
        fs::read_to_string(rootfs.join("etc/resolv.conf")).unwrap(),
        "# mine\n"
    );
    assert_eq!(
        fs::read_to_string(rootfs.join("etc/hosts")).unwrap(),
        "# my hosts\n"
    );

    // No /etc at all: the pod still gets both, and the rootfs gets no /etc.
    fs::remove_dir_all(rootfs.join("etc")).unwrap();
    let (resolv, hosts) = rootfs_etc_files(&world, &rootfs, &["--net=none", "--dns=192.0.2.54"]);
    assert!(resolv.contains("nameserver 192.0.2.54"), "{resolv}");
    assert!(hosts.contains("localhost"), "{hosts}");
    assert!(
        !rootfs.join("etc").exists(),
        "rkt created {}/etc",
        rootfs.display()
    );
}

/// Issue 16, defect 5: `--port` with a host address of a family the pod gets no address of
/// is refused naming the flag: before anything is created when the network's IPAM says
/// which families it gives (the built-in `default`), else right after the ADD, with the pod
/// rolled back.
#[test]
fn port_with_a_host_address_of_a_family_the_pod_has_none_of_is_refused() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let subnet = "10.113.2.0/24";
    let name = format!(
        "cd-static-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let g = leaks::Guard::new(
        world
            .leak_ctx()
            .shared_network("default")
            .network(&name)
            .subnet(subnet),
    );
    for (value, shown) in [
        ("[::1]:18080:80", "[::1]:18080:80"),
        ("::1:18080:80/udp", "[::1]:18080:80/udp"),
    ] {
        world
            .rkt(&["run", &format!("--port={value}"), "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(&format!("--port={shown}:"))
            .assert_stderr_contains("IPv6")
            .assert_stderr_contains("\"default\"");
        assert_eq!(world.pods(), Vec::<String>::new());
    }

    // A network whose IPAM (static) cannot be read ahead: refused after its ADD.
    let conf_dir = world.path("local/net.d");
    fs::create_dir_all(&conf_dir).unwrap();
    fs::write(
        conf_dir.join("10-static.conflist"),
        serde_json::json!({
            "cniVersion": "1.0.0", "name": name,
            "plugins": [
                {"type": "ptp", "ipMasq": false,
                 "ipam": {"type": "static", "addresses": [{"address": "10.113.2.2/24", "gateway": "10.113.2.1"}]}},
                {"type": "portmap", "capabilities": {"portMappings": true}}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let uuid_file = world.path("uuid-static");
    let out = world
        .rkt(&[
            "run",
            &format!("--uuid-file-save={}", uuid_file.display()),
            &format!("--net={name}"),
            "--port=[::1]:18081:80",
            "--",
            "true",
        ])
        .run();
    out.assert_failure()
        .assert_stderr_contains("--port=[::1]:18081:80:")
        .assert_stderr_contains(&format!("{name:?}"));
    let uuid = fs::read_to_string(&uuid_file).unwrap();
    pod_support::assert_no_netns(&uuid);
    assert_eq!(world.status_json(&uuid)["state"], "exited");
    g.check();
}

/// Issue 16, defect 4: `rkt net list` refuses a configuration directory that `rkt run`
/// refuses (writable by others), with the same error and exit status; the insecure option
/// lets both through.
#[test]
fn net_list_refuses_an_unsafe_directory_as_run_does() {
    use std::os::unix::fs::PermissionsExt;
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let conf = world.path("local/net.d");
    fs::create_dir_all(&conf).unwrap();
    fs::set_permissions(&conf, fs::Permissions::from_mode(0o777)).unwrap();
    let run = world.rkt(&["run", "--net=default", "--", "true"]).run();
    run.assert_failure()
        .assert_stderr_contains("writable by group or others");
    assert_eq!(world.pods(), Vec::<String>::new());
    for cmd in [
        &["net", "list"][..],
        &["net", "list", "--format=json"],
        &["net", "status"],
    ] {
        let out = world.rkt(cmd).run();
        out.assert_failure();
        assert_eq!(out.stderr(), run.stderr(), "rkt {cmd:?} and rkt run differ");
    }
    world
        .rkt(&["net", "list", "--insecure-options=net-plugins"])
        .run()
        .assert_success();
}

/// Issue 16, defect 4: `rkt net status` says "not ready" for a network whose plugin is
/// missing or does not speak the network's version (also below 1.1.0, where no STATUS
/// runs), naming the network and the plugin; STATUS gets none of the variables the spec
/// says it must not (container id, netns, interface, args).
#[test]
fn net_status_reports_missing_and_too_old_plugins_and_sends_status_only_what_the_spec_allows() {
    let world = World::new(support::RKT);
    let conf = world.path("local/net.d");
    let plugins = world.path("plugins");
    fs::create_dir_all(&conf).unwrap();
    fs::create_dir_all(&plugins).unwrap();
    let log = world.path("calls.jsonl");
    for name in ["tp", "tpold"] {
        std::os::unix::fs::symlink(support::test_plugin(), plugins.join(name)).unwrap();
    }
    fs::write(
        plugins.join("tp.script"),
        serde_json::json!({"log": log}).to_string(),
    )
    .unwrap();
    fs::write(
        plugins.join("tpold.script"),
        serde_json::json!({"versions": ["0.4.0", "1.0.0"]}).to_string(),
    )
    .unwrap();
    let conf_file = |file: &str, v: serde_json::Value| {
        fs::write(conf.join(file), v.to_string()).unwrap();
    };
    conf_file(
        "10-gone.conf",
        serde_json::json!({"cniVersion": "0.4.0", "name": "gone", "type": "no-such-plugin"}),
    );
    conf_file(
        "20-old.conf",
        serde_json::json!({"cniVersion": "1.1.0", "name": "old", "type": "tpold"}),
    );
    conf_file(
        "30-new.conf",
        serde_json::json!({"cniVersion": "1.1.0", "name": "new", "type": "tp"}),
    );
    let plugin_flag = format!("--net-plugin-dir={}", plugins.display());
    let out = world.rkt(&["net", "status", &plugin_flag]).run();
    out.assert_exit_code(1)
        .assert_stdout_contains("gone: not ready: plugin \"no-such-plugin\": not found in ")
        .assert_stdout_contains(
            "old: not ready: plugin \"tpold\": does not support cniVersion 1.1.0",
        )
        .assert_stdout_contains("new: ready\n");
    let calls: Vec<serde_json::Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let status = calls
        .iter()
        .find(|c| c["command"] == "STATUS")
        .expect("no STATUS call");
    let env = status["env"].as_object().unwrap();
    for var in ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS"] {
        assert!(!env.contains_key(var), "STATUS got {var}: {env:?}");
    }
    assert_eq!(env["CNI_COMMAND"], "STATUS");
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Issue 16, defect 7: an error about a pod names it once (a failed teardown said
/// `pod X: pod X: teardown failed`).
#[test]
fn smaller_defects_errors_name_the_pod_once() {
    test_kit::require_root!();
    let lab = leaks::lab::Lab::new();
    let net = lab.plain_net("once", "tpdel");
    let g = leaks::Guard::new(lab.ctx(&[&net]));
    lab.plugin(
        "tpdel",
        serde_json::json!({"DEL": {"error": {"code": 11, "msg": "busy"}}}),
    );
    let uuid_file = lab.path("uuid-once");
    let out = lab.run(&[
        &format!("--uuid-file-save={}", uuid_file.display()),
        &format!("--net={net}"),
        "--",
        "true",
    ]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(254), "{err}");
    let uuid = fs::read_to_string(&uuid_file).unwrap();
    assert!(err.contains("teardown failed"), "{err}");
    for line in err.lines() {
        assert!(
            line.matches(uuid.as_str()).count() <= 1,
            "the pod is named twice: {line}"
        );
    }
    lab.plugin("tpdel", serde_json::json!({}));
    assert!(lab.gc().status.success());
    g.check();
}

/// Issue 16, defect 7: `--debug run` prints its directories once; a repeated
/// `--net-plugin-dir` is searched and listed once.
#[test]
fn smaller_defects_debug_line_once_and_repeated_plugin_dir_once() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world
        .rkt(&["--debug", "run", "--net=none", "--", "true"])
        .run();
    out.assert_success();
    assert_eq!(
        out.stderr().matches("rkt: debug: data dir").count(),
        1,
        "{}",
        out.stderr()
    );
    let plugins = world.path("plugins");
    fs::create_dir_all(&plugins).unwrap();
    let flag = format!("--net-plugin-dir={}", plugins.display());
    let out = world.rkt(&["config", &flag, &flag]).run();
    out.assert_success();
    assert_eq!(
        out.json()["stage0"][0]["net-plugin"],
        serde_json::json!([plugins.display().to_string()])
    );
}

/// Issue 16, defect 7: `--net=host` with a flag that would write the pod's resolv.conf or
/// hosts (which a host-network pod does not have) is refused, naming the flag; nothing is
/// created.
#[test]
fn smaller_defects_net_host_refuses_dns_and_hosts_flags() {
    let world = World::new(support::RKT);
    for flag in [
        "--dns=192.0.2.53",
        "--dns-search=example.org",
        "--hosts-entry=192.0.2.1=db",
    ] {
        world
            .rkt(&["run", "--net=host", flag, "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(&format!("{flag} cannot be used with --net=host"));
    }
    assert_eq!(world.pods(), Vec::<String>::new());
}

/// Issue 16, defect 7: `networks not found` names the configuration directory searched.
#[test]
fn smaller_defects_networks_not_found_names_the_directory() {
    let world = World::new(support::RKT);
    world
        .rkt(&["run", "--net=a,b", "--", "true"])
        .run()
        .assert_failure()
        .assert_stderr_contains(&format!(
            "networks not found: a, b (searched {} and the built-in networks)",
            world.path("local/net.d").display()
        ));
}

/// Issue 16, defect 7: a pod that failed to start shows as `exited (failed)` in `rkt list`.
#[test]
fn smaller_defects_a_failed_pod_shows_as_failed_in_list() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    world
        .rkt(&["run", "--net=none", "--", "/no-such-command-xyz"])
        .run()
        .assert_failure();
    world
        .rkt(&["run", "--net=none", "--name=fine", "--", "true"])
        .run()
        .assert_success();
    let out = world.rkt(&["list", "--no-legend"]).run();
    out.assert_success();
    let stdout = out.stdout();
    let line = |app: &str| {
        stdout
            .lines()
            .find(|l| l.contains(app))
            .unwrap_or_else(|| panic!("no {app} in {stdout}"))
            .to_string()
    };
    assert!(
        line("no-such-command-xyz").contains("exited (failed)"),
        "{stdout}"
    );
    assert!(!line("fine").contains("failed"), "{stdout}");
}

/// Issue 22, defect 1: `--user=NAME` on a `--rootfs` pod resolves inside DIR, even when
/// DIR's /etc/passwd is an absolute symlink (which, followed on the host, would read the
/// host's file): `app` is DIR's, and the host's `daemon` is an error naming DIR's file.
#[test]
fn user_names_on_a_rootfs_pod_resolve_in_the_rootfs_not_the_host() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    pod_support::tiny_rootfs(&rootfs);
    fs::create_dir_all(rootfs.join("srv")).unwrap();
    fs::write(
        rootfs.join("srv/passwd"),
        "root:x:0:0::/root:/bin/sh\napp:x:1234:2345::/:/bin/sh\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/srv/passwd", rootfs.join("etc/passwd")).unwrap();
    let root_flag = format!("--rootfs={}", rootfs.display());
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &root_flag,
            "--user=app",
            "--",
            "/bin/cat",
            "/proc/self/status",
        ])
        .run();
    out.assert_success();
    assert!(
        out.stdout().contains("Uid:\t1234\t1234\t1234\t1234"),
        "{}",
        out.stdout()
    );
    world
        .rkt(&[
            "run",
            "--net=none",
            &root_flag,
            "--user=daemon",
            "--",
            "true",
        ])
        .run()
        .assert_failure()
        .assert_stderr_contains(&format!(
            "--user=daemon: no such user in {}'s /etc/passwd",
            rootfs.display()
        ));
}

/// Issue 22, defect 11: every pod has its own /etc/hostname, holding the name `hostname`
/// says: a host-command pod (not the host's file), one on the host's network (its UTS
/// namespace is still its own), and a `--rootfs` pod whose directory has no /etc/hostname
/// (and still gets none written into it).
#[test]
fn etc_hostname_is_the_pods_own_in_every_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let rootfs = world.path("rootfs");
    pod_support::tiny_rootfs(&rootfs);
    let root_flag = format!("--rootfs={}", rootfs.display());
    let read = "cat /etc/hostname; echo $(cat /proc/sys/kernel/hostname)";
    for flags in [
        &["--net=none", "--hostname=h1"][..],
        &["--net=host", "--hostname=h1"][..],
        &["--net=none", "--hostname=h1", &root_flag][..],
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend(["--", "/bin/sh", "-c", read]);
        world
            .rkt(&args)
            .run()
            .assert_success()
            .assert_stdout_contains("h1\nh1\n");
    }
    assert!(
        !rootfs.join("etc/hostname").exists(),
        "written into --rootfs"
    );
    // Without --hostname, the file says the pod's default name.
    let out = world
        .rkt(&["run", "--net=none", "--", "/bin/sh", "-c", read])
        .run();
    out.assert_success();
    let stdout = out.stdout();
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    assert!(
        lines.len() == 2 && lines[0] == lines[1] && lines[0].starts_with("rkt-"),
        "{lines:?}"
    );
}

/// Sends an ICMP echo request to 127.0.0.1 from an ICMP echo socket (what `ping` uses
/// without a raw socket, allowed by `net.ipv4.ping_group_range`) and prints the reply's type.
const ICMP_ECHO: &str = "use Socket; alarm 5; \
    socket(my $s, PF_INET, SOCK_DGRAM, 1) or die qq(socket: $!\\n); \
    send($s, pack(q(CCnnn), 8, 0, 0, 0, 1), 0, pack_sockaddr_in(0, inet_aton(q(127.0.0.1)))) \
    or die qq(send: $!\\n); \
    defined recv($s, my $r, 64, 0) or die qq(recv: $!\\n); \
    printf qq(icmp reply type %d\\n), unpack(q(C), $r);";

/// Issue 22, defect 9: a pod's own network namespace lets the pod's groups ping without a
/// raw socket: every group in an ordinary pod (so a non-root app pings), the pod's mapped
/// groups with `--private-users` (`0 65535` inside, not `65534 65534`); `--net=host` keeps
/// the host's setting, which is never changed.
#[test]
fn ping_group_range_is_the_pods_groups_so_unprivileged_ping_works() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let range = "/proc/sys/net/ipv4/ping_group_range";
    let host_range = fs::read_to_string(range).unwrap();
    let script = format!("cat {range}; perl -e '{ICMP_ECHO}'");
    let cases: [(&[&str], &str); 2] = [
        (&["--net=none", "--user=65534"], "0\t2147483647\n"),
        (&["--net=none", "--private-users"], "0\t65535\n"),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.extend(["--", "sh", "-c", &script]);
        let out = world.rkt(&args).run();
        out.assert_success();
        assert_eq!(
            out.stdout(),
            format!("{expected}icmp reply type 0\n"),
            "rkt {args:?}"
        );
    }
    let out = world.rkt(&["run", "--net=host", "--", "cat", range]).run();
    out.assert_success();
    assert_eq!(out.stdout(), host_range);
    assert_eq!(fs::read_to_string(range).unwrap(), host_range);
}

/// Issue 22, defect 9 as the user met it: busybox's `ping`, which knows raw sockets only,
/// works under `--private-users` (its network namespace is its user namespace's), on a
/// pod's loopback and to its gateway on the default network, as without the flag.
#[test]
fn busybox_ping_works_under_private_users() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let gateway = "busybox ping -c1 -W2 $(ip route | awk '/default/ {print $3}')";
    for (net, target) in [
        ("--net=none", "busybox ping -c1 -W2 127.0.0.1"),
        ("--net=default", gateway),
    ] {
        for private in [&["--private-users"][..], &[]] {
            let mut args = vec!["run", net];
            args.extend_from_slice(private);
            args.extend(["--", "sh", "-c", target]);
            let out = world.rkt(&args).run();
            out.assert_success()
                .assert_stdout_contains("1 packets received");
        }
    }
}

/// Every path below `dir` (itself included) with its type, mode, size, modification time
/// and, for a file its bytes' hash, for a symlink its target: what must not change.
fn tree_listing(dir: &std::path::Path) -> Vec<String> {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(dir).unwrap().display().to_string();
        let what = if meta.file_type().is_symlink() {
            format!("-> {}", fs::read_link(&path).unwrap().display())
        } else if meta.is_file() {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            fs::read(&path).unwrap().hash(&mut h);
            format!("{:x}", h.finish())
        } else {
            for entry in fs::read_dir(&path).unwrap() {
                todo.push(entry.unwrap().path());
            }
            String::new()
        };
        out.push(format!(
            "/{rel} {:o} {} {}.{} {what}",
            meta.mode(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        ));
    }
    out.sort();
    out
}

/// Issue 22, defect 4: a `--rootfs` directory holding only `bin/` (busybox) and `etc/` runs
/// with its /dev, /proc, /sys and /etc files, and nothing is written into it (not even the
/// missing mount points): on no network, on the default one, with `--readonly-rootfs` (its
/// entries read-only too), with volumes whose targets are missing at its top level; one
/// missing deeper is refused naming the path and the directory. What the app writes into
/// the directory's own entries still goes to it.
#[test]
fn rootfs_dir_is_never_written_missing_mount_points_come_from_elsewhere() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let rootfs = world.path("rootfs");
    fs::create_dir_all(rootfs.join("bin")).unwrap();
    fs::create_dir_all(rootfs.join("etc")).unwrap();
    fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sh")).unwrap();
    let before = tree_listing(&rootfs);
    let host = world.path("host-data");
    fs::create_dir(&host).unwrap();
    fs::write(host.join("in"), "from the host\n").unwrap();
    let root_flag = format!("--rootfs={}", rootfs.display());
    let volume = format!("--volume=data,kind=host,source={}", host.display());
    let see = "busybox ls -d /dev/null /proc/self /etc/resolv.conf /etc/hosts /etc/hostname \
               && busybox test -c /dev/null && echo ok > /dev/null && busybox cat /proc/1/comm";
    let net_see = format!("{see} && busybox ls /sys/class/net");
    let cases: Vec<(Vec<&str>, String, &str)> = vec![
        (vec!["--net=none"], net_see.clone(), "lo"),
        (vec!["--net=default"], net_see.clone(), "eth0"),
        (vec!["--net=host"], see.to_string(), "/etc/hostname"),
        (
            vec!["--net=none", "--readonly-rootfs"],
            format!(
                "{net_see} && ! busybox touch /bin/x 2>/dev/null && ! busybox mkdir /new \
                 2>/dev/null && ! busybox touch /etc/x 2>/dev/null && echo read-only"
            ),
            "read-only",
        ),
        (
            vec![
                "--net=none",
                &volume,
                "--mount=volume=data,target=/srv/data",
            ],
            "busybox cat /srv/data/in".to_string(),
            "from the host",
        ),
    ];
    for (flags, script, expected) in &cases {
        let mut args = vec!["run", root_flag.as_str()];
        args.extend(flags.iter().copied());
        args.extend(["--", "/bin/sh", "-c", script.as_str()]);
        let out = world.rkt(&args).run();
        out.assert_success().assert_stdout_contains(expected);
        assert_eq!(
            tree_listing(&rootfs),
            before,
            "rkt {args:?} wrote into the rootfs"
        );
    }
    // A target missing below an entry of the rootfs would have to be made in it: refused.
    world
        .rkt(&[
            "run",
            "--net=none",
            &root_flag,
            &volume,
            "--mount=volume=data,target=/etc/app/data",
            "--",
            "/bin/sh",
            "-c",
            "true",
        ])
        .run()
        .assert_failure()
        .assert_stderr_contains(&format!(
            "the target /etc/app/data does not exist in --rootfs {} (/etc/app is missing)",
            rootfs.display()
        ));
    assert_eq!(tree_listing(&rootfs), before);
    // The app's own writes into the rootfs's entries still go to it.
    world
        .rkt(&[
            "run",
            "--net=none",
            &root_flag,
            "--",
            "/bin/sh",
            "-c",
            "echo mine > /bin/written",
        ])
        .run()
        .assert_success();
    assert_eq!(
        fs::read_to_string(rootfs.join("bin/written")).unwrap(),
        "mine\n"
    );
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

/// The fenced `sh` blocks of `text` between the headings `from` and `to`, their lines.
fn sh_lines_between(text: &str, from: &str, to: &str) -> Vec<String> {
    let start = text.find(from).unwrap_or_else(|| panic!("no {from:?}"));
    let end = start
        + text[start..]
            .find(to)
            .unwrap_or_else(|| panic!("no {to:?}"));
    let mut lines = Vec::new();
    let mut inside = false;
    for line in text[start..end].lines() {
        if line.starts_with("```") {
            inside = !inside && line.starts_with("```sh");
            continue;
        }
        if inside && !line.trim().is_empty() {
            lines.push(line.trim().to_string());
        }
    }
    lines
}

/// Issue 22, defect 12: setting up took eight commands. The README's Quick start is one
/// script and its Tests section another, the one CI runs; both scripts parse, say why the
/// install needs root, and refuse to start without it.
#[test]
fn setup_takes_two_commands_an_install_script_and_the_test_script_ci_runs() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs::read_to_string(repo.join("README.md")).unwrap();
    assert_eq!(
        sh_lines_between(&readme, "## Quick start", "### A first pod"),
        ["tools/install.sh"]
    );
    assert_eq!(
        sh_lines_between(&readme, "### Tests", "## Layout"),
        ["tools/test.sh"]
    );
    let ci = fs::read_to_string(repo.join(".ci/run")).unwrap();
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(commands.last(), Some(&"tools/test.sh"), "{ci}");
    assert!(
        !ci.contains("cargo test"),
        "CI runs its own test command: {ci}"
    );
    for script in ["tools/install.sh", "tools/test.sh", ".ci/run"] {
        let path = repo.join(script);
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&path).unwrap().permissions());
        assert!(mode & 0o111 != 0, "{script} is not executable");
        let check = std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .output()
            .unwrap();
        assert!(check.status.success(), "{script}: {check:?}");
    }
    let install = fs::read_to_string(repo.join("tools/install.sh")).unwrap();
    assert!(
        install.contains("It needs root"),
        "install.sh says why it needs root"
    );
    // Without root it stops before doing anything, saying so.
    let mut cmd = std::process::Command::new(repo.join("tools/install.sh"));
    if test_kit::is_root() {
        cmd = std::process::Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(repo.join("tools/install.sh"));
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("install.sh: needs root"), "{stderr}");
}

/// Issue 22, defect 3: `--port` of a host port a host process serves is refused, naming the
/// port, its protocol and the process, before any pod exists: on the address asked for, on
/// any address when none is given, and a wildcard listener against a specific address.
/// The host's service keeps its port.
#[test]
fn port_a_host_process_serves_is_refused_naming_it_and_leaves_no_pod() {
    use std::net::{TcpListener, TcpStream, UdpSocket};
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let me = format!("process {} (", std::process::id());
    let local = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = local.local_addr().unwrap().port();
    let any = TcpListener::bind("0.0.0.0:0").unwrap();
    let q = any.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let u = udp.local_addr().unwrap().port();
    let cases = [
        (
            format!("{p}:80"),
            format!("tcp:{p} is in use"),
            format!("listening on 127.0.0.1:{p}"),
        ),
        (
            format!("127.0.0.1:{p}:80"),
            format!("tcp:127.0.0.1:{p} is in use"),
            format!("listening on 127.0.0.1:{p}"),
        ),
        (
            format!("127.0.0.1:{q}:80"),
            format!("tcp:127.0.0.1:{q} is in use"),
            format!("listening on 0.0.0.0:{q}"),
        ),
        (
            format!("{u}:53/udp"),
            format!("udp:{u} is in use"),
            format!("bound on 127.0.0.1:{u}"),
        ),
    ];
    for (value, port, holder) in cases {
        world
            .rkt(&["run", &format!("--port={value}"), "--", "true"])
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains(&format!("--port={value}: host port {port}"))
            .assert_stderr_contains(&me)
            .assert_stderr_contains(&holder);
        assert_eq!(
            world.pods(),
            Vec::<String>::new(),
            "--port={value} left a pod"
        );
    }
    // Still the host's: a connection reaches the test's listener.
    let _conn = TcpStream::connect(("127.0.0.1", p)).unwrap();
    local.accept().unwrap();
}

/// Issue 22, defect 3: a forwarded host port is held on the host for the pod's life (no host
/// process can bind it meanwhile, on any address), the pod is still reached through it on
/// 127.0.0.1, and the port is free again once the pod has ended.
#[test]
fn port_forwarded_is_held_on_the_host_while_the_pod_runs_and_still_reaches_the_pod() {
    use std::net::{TcpListener, UdpSocket};
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let port = TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (uuid, index) = world.spawn_run(&[
        &format!("--port={port}:80"),
        &format!("--port={port}:53/udp"),
        "--",
        "busybox",
        "httpd",
        "-f",
        "-p",
        "80",
        "-h",
        "/etc",
    ]);
    world.wait_running(&uuid);
    // The pod's own /etc/hostname: it is the pod that answers, not the host.
    let got = pod_support::http_get_forwarded(port, "/hostname");
    assert!(got.contains(&format!("rkt-{uuid}")), "{got}");
    for addr in ["127.0.0.1", "0.0.0.0"] {
        let e = TcpListener::bind((addr, port)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "tcp {addr}:{port}");
        let e = UdpSocket::bind((addr, port)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "udp {addr}:{port}");
    }
    let e = TcpListener::bind(("::1", port)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "tcp [::1]:{port}");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    TcpListener::bind(("127.0.0.1", port)).unwrap();
    UdpSocket::bind(("0.0.0.0", port)).unwrap();
    g.check();
}

/// Issue 22, defect 6: a typo'd or unfetched image name is an error saying it is neither a
/// stored image nor a program, and how to fetch it, never a host command that fails to
/// execute; no pod is made. A bare name on PATH that no stored image has stays a host
/// command, and so does a relative path that exists.
#[test]
fn typoed_image_name_is_neither_image_nor_program_not_a_host_command() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    for word in [
        "nc/web:v2",
        "nc/web",
        "busybox:latest",
        "no-such-program-xyz",
    ] {
        world
            .rkt(&["run", "--net=none", word])
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains(&format!("{word:?} is neither a stored image nor a program"))
            .assert_stderr_contains(&format!("`rkt fetch docker://{word}`"))
            .assert_stderr_lacks("cannot execute");
        assert_eq!(
            world.pods(),
            Vec::<String>::new(),
            "rkt run {word} made a pod"
        );
    }
    world
        .rkt(&["run", "--net=none", "true"])
        .run()
        .assert_success();
    world
        .rkt(&["run", "--net=none", "bin/true"])
        .current_dir(std::path::Path::new("/usr"))
        .run()
        .assert_success();
}

/// Issue 22, defect 6: failures found before anything runs (a bad `IP=` in `--net`'s
/// arguments, a `--mount` target the host lacks, a busy host port) leave no `exited
/// (failed)` pod behind for gc.
#[test]
fn typoed_image_name_and_other_early_failures_leave_no_failed_pod() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let port_flag = format!("--port={port}:80");
    let cases: [(&[&str], &str); 3] = [
        (
            &["run", "--net=default:IP=10.0.0.300", "--", "true"],
            "IP=\"10.0.0.300\", which is not an IP address",
        ),
        (
            &[
                "run",
                "--net=none",
                "--volume=v,kind=empty",
                "--mount=volume=v,target=/no-such-dir-xyz/x",
                "--",
                "true",
            ],
            "/no-such-dir-xyz is missing",
        ),
        (&["run", &port_flag, "--", "true"], "is in use on the host"),
    ];
    for (args, error) in cases {
        world
            .rkt(args)
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains(error);
        assert_eq!(
            world.pods(),
            Vec::<String>::new(),
            "rkt {args:?} left a pod"
        );
    }
}
