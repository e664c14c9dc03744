//! `rkt version` and the `--help` texts that explain the options and their precedence.

use crate::support;

use support::rkt;

#[test]
fn version_names_rkt_and_every_supported_cni_spec_version() {
    let out = rkt(&["version"]).run();
    out.assert_success()
        .assert_stdout_contains(&format!("rkt-rs Version: {}\n", env!("CARGO_PKG_VERSION")));
    let supported = out
        .stdout()
        .lines()
        .find_map(|line| {
            line.strip_prefix("CNI Spec Versions Supported: ")
                .map(str::to_owned)
        })
        .expect("a line listing the supported CNI spec versions");
    let listed: Vec<&str> = supported.split(", ").collect();
    assert_eq!(listed, cni::version::SUPPORTED);
}

#[test]
fn top_level_help_explains_the_precedence() {
    let out = rkt(&["--help"]).run();
    out.assert_success()
        .assert_stdout_contains("--dir > \"data\" in paths.d > /var/lib/rkt")
        .assert_stdout_contains("--net-conf-dir > \"net-conf\" in paths.d > <local-config>/net.d")
        .assert_stdout_contains("/usr/lib/cni, /usr/libexec/cni, /opt/cni/bin")
        .assert_stdout_contains("--system-config")
        .assert_stdout_contains("--user-config")
        .assert_stdout_contains("254");
}

#[test]
fn config_help_explains_show_origin_and_the_net_flags() {
    let out = rkt(&["config", "--help"]).run();
    out.assert_success()
        .assert_stdout_contains("--show-origin")
        .assert_stdout_contains("\"origins\"")
        .assert_stdout_contains("--net-plugin-dir")
        .assert_stdout_contains("Overrides \"net-conf\" from the paths")
        // Global options are listed on every command.
        .assert_stdout_contains("--local-config");
}

#[test]
fn no_command_is_a_usage_error() {
    rkt::<&str>(&[])
        .run()
        .assert_failure()
        .assert_stderr_contains("Usage: rkt");
}

#[test]
fn the_test_plugin_helper_finds_a_built_binary() {
    let plugin = support::test_plugin();
    assert!(
        plugin.ends_with("debug/cni-test-plugin"),
        "{}",
        plugin.display()
    );
    assert!(plugin.is_file());
}
