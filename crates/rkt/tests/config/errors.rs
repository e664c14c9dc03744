//! `rkt config` on bad configuration: one test per bad input of the paths configuration,
//! each checking exit status 254 and that stderr names the file, field or flag.

use crate::support;

use support::config_tree::{paths_file, ConfigTree};
use support::{rkt, Outcome};

fn rkt_config(tree: &ConfigTree) -> Outcome {
    rkt(&["config"]).args(&tree.flags()).run()
}

/// Writes one bad file into `local/paths.d`, runs `rkt config`, checks that it fails with
/// a message on stderr starting with `rkt: <file>: ` and containing `needle`.
fn check_bad_file(body: &str, needle: &str) {
    let tree = ConfigTree::new();
    let file = tree.write("local", "bad.json", body);
    let out = rkt_config(&tree);
    out.assert_failure()
        .assert_stderr_contains(&format!("rkt: {}: ", file.display()))
        .assert_stderr_contains(needle);
    assert!(
        out.stdout().is_empty(),
        "nothing on stdout: {}",
        out.stdout()
    );
}

#[test]
fn malformed_json_names_the_file_line_and_column() {
    check_bad_file(
        "{\"rktKind\": \"paths\",\n \"rktVersion\": v1}",
        "malformed JSON: expected value at line 2 column 16",
    );
}

#[test]
fn missing_rkt_kind_names_the_field() {
    check_bad_file(
        r#"{"rktVersion":"v1"}"#,
        "required field \"rktKind\" is missing",
    );
}

#[test]
fn empty_rkt_kind_names_the_field() {
    check_bad_file(
        r#"{"rktKind":"","rktVersion":"v1"}"#,
        "field \"rktKind\" must not be empty",
    );
}

#[test]
fn missing_rkt_version_names_the_field() {
    check_bad_file(
        r#"{"rktKind":"paths"}"#,
        "required field \"rktVersion\" is missing",
    );
}

#[test]
fn empty_rkt_version_names_the_field() {
    check_bad_file(
        r#"{"rktKind":"paths","rktVersion":""}"#,
        "field \"rktVersion\" must not be empty",
    );
}

#[test]
fn unknown_kind_names_the_pair() {
    check_bad_file(
        r#"{"rktKind":"auth","rktVersion":"v1"}"#,
        "unknown configuration rktKind \"auth\" with rktVersion \"v1\"",
    );
}

#[test]
fn unknown_version_names_the_pair() {
    check_bad_file(
        r#"{"rktKind":"paths","rktVersion":"v9"}"#,
        "unknown configuration rktKind \"paths\" with rktVersion \"v9\"",
    );
}

#[test]
fn relative_path_names_the_field() {
    check_bad_file(
        &paths_file(r#""net-conf":"etc/net.d""#),
        "field \"net-conf\" must be an absolute path, found \"etc/net.d\"",
    );
}

#[test]
fn relative_path_in_a_net_plugin_list_names_the_field() {
    check_bad_file(
        &paths_file(r#""net-plugin":["/usr/lib/cni","plugins"]"#),
        "field \"net-plugin\" must be an absolute path, found \"plugins\"",
    );
}

#[test]
fn wrong_type_names_the_field() {
    check_bad_file(
        &paths_file(r#""data":42"#),
        "field \"data\" must be a string, found a number",
    );
}

#[test]
fn wrong_type_of_net_plugin_names_the_field() {
    check_bad_file(
        &paths_file(r#""net-plugin":{"dir":"/x"}"#),
        "field \"net-plugin\" must be a string or an array of strings, found an object",
    );
}

#[test]
fn not_an_object_names_the_file() {
    check_bad_file("\"paths\"", "expected a JSON object, found a string");
}

#[test]
fn a_field_set_in_two_files_of_one_directory_names_both() {
    let tree = ConfigTree::new();
    let a = tree.write("system", "a.json", &paths_file(r#""data":"/one""#));
    let b = tree.write("system", "b.json", &paths_file(r#""data":"/two""#));
    rkt_config(&tree)
        .assert_failure()
        .assert_stderr_contains(&format!(
            "rkt: field \"data\" is set both in {} and in {}",
            a.display(),
            b.display()
        ));
}

#[test]
fn a_missing_configured_directory_says_where_it_was_set() {
    let tree = ConfigTree::new();
    let missing = tree.root().join("no-such-net.d");
    let file = tree.write(
        "user",
        "net.json",
        &paths_file(&format!(r#""net-conf":"{}""#, missing.display())),
    );
    rkt_config(&tree)
        .assert_failure()
        .assert_stderr_contains(&format!(
            "rkt: net-conf {} (set in {}): no such directory",
            missing.display(),
            file.display()
        ));
}

#[test]
fn a_missing_flag_directory_names_the_flag() {
    let tree = ConfigTree::new();
    let missing = tree.root().join("no-such-plugins");
    let plugins = format!("{}:{}", tree.mkdir("plugins").display(), missing.display());
    rkt(&["config", "--net-plugin-dir", &plugins])
        .args(&tree.flags())
        .run()
        .assert_failure()
        .assert_stderr_contains(&format!(
            "rkt: --net-plugin-dir {}: no such directory",
            missing.display()
        ));
}

#[test]
fn a_missing_configuration_directory_given_as_a_flag_is_an_error() {
    let tree = ConfigTree::new();
    let missing = tree.root().join("no-such-config");
    rkt(&["config", "--user-config"])
        .args(&[&missing])
        .run()
        .assert_failure()
        .assert_stderr_contains(&format!(
            "rkt: --user-config {}: no such directory",
            missing.display()
        ));
}

#[test]
fn an_error_in_the_system_layer_is_reported_even_if_overridden() {
    let tree = ConfigTree::new();
    let bad = tree.write("system", "old.json", &paths_file(r#""data":"relative""#));
    tree.write("user", "new.json", &paths_file(r#""data":"/fine""#));
    rkt_config(&tree)
        .assert_failure()
        .assert_stderr_contains(&format!("rkt: {}: field \"data\"", bad.display()));
}

#[test]
fn stage1_d_files_are_reported_as_not_used_under_debug() {
    let tree = ConfigTree::new();
    let dir = tree.layer("local").join("stage1.d");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("coreos.json");
    std::fs::write(&file, r#"{"rktKind":"stage1","rktVersion":"v1"}"#).unwrap();
    let warning = format!("rkt: warning: {}: not used: pods run with", file.display());
    rkt_config(&tree)
        .assert_success()
        .assert_stderr_lacks("stage1.d");
    rkt(&["config", "--debug"])
        .args(&tree.flags())
        .run()
        .assert_success()
        .assert_stderr_contains(&warning);
}

#[test]
fn unknown_fields_are_ignored_with_a_warning_under_debug() {
    let tree = ConfigTree::new();
    let file = tree.write(
        "local",
        "new.json",
        &paths_file(r#""from-the-future":true"#),
    );
    let warning = format!(
        "rkt: warning: {}: unknown field \"from-the-future\"",
        file.display()
    );
    rkt_config(&tree)
        .assert_success()
        .assert_stderr_lacks("warning");
    rkt(&["config", "--debug"])
        .args(&tree.flags())
        .run()
        .assert_success()
        .assert_stderr_contains(&warning);
}

#[test]
fn a_usage_error_exits_254() {
    rkt(&["config", "--no-such-flag"])
        .run()
        .assert_failure()
        .assert_stderr_contains("--no-such-flag");
}
