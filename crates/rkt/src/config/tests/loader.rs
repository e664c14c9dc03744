//! The `paths.d` loader: file selection, every error naming its file and field, layering
//! field by field, and warnings for unknown fields.

use std::fs;
use std::path::PathBuf;

use super::{paths_file, Tree};
use crate::config::{
    load_paths, parse_paths_file, ConfigDirs, ConfigError, ConfigWarning, Origin, PathsConfig,
    Value,
};

fn parse(body: &str) -> Result<PathsConfig, ConfigError> {
    parse_paths_file(&PathBuf::from("/cfg/paths.d/a.json"), body.as_bytes())
}

fn parse_err(body: &str) -> String {
    match parse(body) {
        Ok(config) => panic!("expected an error for {body}, got {config:?}"),
        Err(err) => err.to_string(),
    }
}

fn in_file(path: &str) -> Origin {
    Origin::File(PathBuf::from(path))
}

#[test]
fn a_full_file_sets_every_field_with_its_origin() {
    let config = parse(&paths_file(
        r#""data":"/d","stage1-images":"/s","net-conf":"/c","net-plugin":["/p1","/p2"]"#,
    ))
    .unwrap();
    let origin = in_file("/cfg/paths.d/a.json");
    assert_eq!(
        config.data,
        Some(Value::new(PathBuf::from("/d"), origin.clone()))
    );
    assert_eq!(
        config.stage1_images,
        Some(Value::new(PathBuf::from("/s"), origin.clone()))
    );
    assert_eq!(
        config.net_conf,
        Some(Value::new(PathBuf::from("/c"), origin.clone()))
    );
    assert_eq!(
        config.net_plugin,
        Some(Value::new(
            vec![PathBuf::from("/p1"), PathBuf::from("/p2")],
            origin
        ))
    );
    assert!(config.warnings.is_empty());
}

#[test]
fn net_plugin_may_be_a_single_string() {
    let config = parse(&paths_file(r#""net-plugin":"/p""#)).unwrap();
    assert_eq!(config.net_plugin.unwrap().value, vec![PathBuf::from("/p")]);
}

#[test]
fn a_file_with_only_kind_and_version_sets_nothing() {
    let config = parse(&paths_file("")).unwrap();
    assert_eq!(config, PathsConfig::default());
}

#[test]
fn malformed_json_names_the_file_line_and_column() {
    let msg = parse_err("{\n  \"rktKind\": \"paths\",\n  oops\n}");
    assert!(
        msg.starts_with("/cfg/paths.d/a.json: malformed JSON"),
        "{msg}"
    );
    assert!(msg.contains("line 3 column 3"), "{msg}");
}

#[test]
fn a_non_object_names_the_file() {
    let msg = parse_err("[1]");
    assert_eq!(
        msg,
        "/cfg/paths.d/a.json: expected a JSON object, found an array"
    );
}

#[test]
fn missing_kind_or_version_names_the_file_and_field() {
    assert_eq!(
        parse_err(r#"{"rktVersion":"v1"}"#),
        "/cfg/paths.d/a.json: required field \"rktKind\" is missing"
    );
    assert_eq!(
        parse_err(r#"{"rktKind":"paths"}"#),
        "/cfg/paths.d/a.json: required field \"rktVersion\" is missing"
    );
}

#[test]
fn empty_kind_or_version_names_the_file_and_field() {
    assert_eq!(
        parse_err(r#"{"rktKind":"","rktVersion":"v1"}"#),
        "/cfg/paths.d/a.json: field \"rktKind\" must not be empty"
    );
    assert_eq!(
        parse_err(r#"{"rktKind":"paths","rktVersion":""}"#),
        "/cfg/paths.d/a.json: field \"rktVersion\" must not be empty"
    );
}

#[test]
fn a_non_string_kind_is_a_wrong_type() {
    assert_eq!(
        parse_err(r#"{"rktKind":1,"rktVersion":"v1"}"#),
        "/cfg/paths.d/a.json: field \"rktKind\" must be a string, found a number"
    );
}

#[test]
fn an_unknown_kind_or_version_names_the_pair() {
    for (kind, version) in [("auth", "v1"), ("paths", "v2")] {
        let msg = parse_err(&format!(
            r#"{{"rktKind":"{kind}","rktVersion":"{version}"}}"#
        ));
        assert!(msg.starts_with("/cfg/paths.d/a.json: "), "{msg}");
        assert!(
            msg.contains(&format!("rktKind \"{kind}\" with rktVersion \"{version}\"")),
            "{msg}"
        );
    }
}

#[test]
fn a_relative_path_names_the_field() {
    for (field, value) in [
        ("data", r#""rel/data""#),
        ("stage1-images", r#""s1""#),
        ("net-conf", r#""./net.d""#),
        ("net-plugin", r#""plugins""#),
        ("net-plugin", r#"["/ok","plugins"]"#),
        ("net-conf", r#""""#),
    ] {
        let msg = parse_err(&paths_file(&format!(r#""{field}":{value}"#)));
        assert!(
            msg.starts_with(&format!(
                "/cfg/paths.d/a.json: field \"{field}\" must be an absolute path"
            )),
            "{msg}"
        );
    }
}

#[test]
fn a_wrong_type_names_the_field_and_both_types() {
    for (field, value, expected, found) in [
        ("data", "1", "a string", "a number"),
        ("stage1-images", "true", "a string", "a boolean"),
        ("net-conf", r#"["/a"]"#, "a string", "an array"),
        (
            "net-plugin",
            "{}",
            "a string or an array of strings",
            "an object",
        ),
        (
            "net-plugin",
            r#"["/a",2]"#,
            "a string or an array of strings",
            "a number",
        ),
        (
            "net-plugin",
            "null",
            "a string or an array of strings",
            "null",
        ),
    ] {
        let msg = parse_err(&paths_file(&format!(r#""{field}":{value}"#)));
        assert_eq!(
            msg,
            format!("/cfg/paths.d/a.json: field \"{field}\" must be {expected}, found {found}")
        );
    }
}

#[test]
fn an_empty_net_plugin_list_is_rejected() {
    assert_eq!(
        parse_err(&paths_file(r#""net-plugin":[]"#)),
        "/cfg/paths.d/a.json: field \"net-plugin\" must not be empty"
    );
}

#[test]
fn unknown_fields_are_warnings_not_errors() {
    let config = parse(&paths_file(r#""data":"/d","future-dir":"/f""#)).unwrap();
    assert_eq!(config.data.unwrap().value, PathBuf::from("/d"));
    assert_eq!(
        config.warnings,
        vec![ConfigWarning::UnknownField {
            file: PathBuf::from("/cfg/paths.d/a.json"),
            field: "future-dir".to_owned(),
        }]
    );
    assert!(config.warnings[0]
        .to_string()
        .starts_with("/cfg/paths.d/a.json: unknown field \"future-dir\""));
}

#[test]
fn missing_configuration_directories_hold_nothing() {
    let tree = Tree::new();
    assert_eq!(load_paths(&tree.dirs()).unwrap(), PathsConfig::default());
    let no_paths_d = ConfigDirs {
        system: tree.mkdir("system"),
        local: tree.mkdir("local"),
        user: None,
    };
    assert_eq!(load_paths(&no_paths_d).unwrap(), PathsConfig::default());
}

#[test]
fn only_json_files_directly_in_paths_d_are_read() {
    let tree = Tree::new();
    let good = tree.write("local", "a.json", &paths_file(r#""data":"/d""#));
    // None of these is read; each would be a duplicate "data" or an error if it were.
    tree.write("local", "b.conf", &paths_file(r#""data":"/conf""#));
    tree.write("local", "c.json~", "not json");
    tree.write("local", "README", "not json");
    tree.mkdir("local/paths.d/sub.json");
    tree.mkdir("local/paths.d/sub");
    fs::write(
        tree.root().join("local/paths.d/sub/d.json"),
        paths_file(r#""data":"/sub""#),
    )
    .unwrap();

    let config = load_paths(&tree.dirs()).unwrap();
    assert_eq!(
        config.data,
        Some(Value::new(PathBuf::from("/d"), Origin::File(good)))
    );
}

#[test]
fn a_field_set_twice_in_one_directory_names_both_files_in_name_order() {
    let tree = Tree::new();
    let first = tree.write("system", "10-a.json", &paths_file(r#""net-conf":"/one""#));
    let second = tree.write("system", "20-b.json", &paths_file(r#""net-conf":"/two""#));
    let msg = load_paths(&tree.dirs()).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "field \"net-conf\" is set both in {} and in {} (within one configuration \
             directory a field may be set only once)",
            first.display(),
            second.display()
        )
    );
}

#[test]
fn different_fields_in_files_of_one_directory_combine() {
    let tree = Tree::new();
    let a = tree.write("local", "a.json", &paths_file(r#""data":"/d""#));
    let b = tree.write("local", "b.json", &paths_file(r#""net-conf":"/c""#));
    let config = load_paths(&tree.dirs()).unwrap();
    assert_eq!(config.data.unwrap().origin, Origin::File(a));
    assert_eq!(config.net_conf.unwrap().origin, Origin::File(b));
}

#[test]
fn layers_override_field_by_field_system_then_local_then_user() {
    let tree = Tree::new();
    let system = tree.write(
        "system",
        "s.json",
        &paths_file(r#""data":"/sys-data","net-conf":"/sys-conf","net-plugin":["/sys-p"],"stage1-images":"/sys-s1""#),
    );
    let local = tree.write(
        "local",
        "l.json",
        &paths_file(r#""net-conf":"/local-conf","net-plugin":"/local-p""#),
    );
    let user = tree.write(
        "user",
        "u.json",
        &paths_file(r#""net-plugin":["/u1","/u2"]"#),
    );

    let config = load_paths(&tree.dirs()).unwrap();
    assert_eq!(
        config.data,
        Some(Value::new(
            PathBuf::from("/sys-data"),
            Origin::File(system.clone())
        ))
    );
    assert_eq!(
        config.stage1_images,
        Some(Value::new(PathBuf::from("/sys-s1"), Origin::File(system)))
    );
    assert_eq!(
        config.net_conf,
        Some(Value::new(
            PathBuf::from("/local-conf"),
            Origin::File(local)
        ))
    );
    assert_eq!(
        config.net_plugin,
        Some(Value::new(
            vec![PathBuf::from("/u1"), PathBuf::from("/u2")],
            Origin::File(user)
        ))
    );
}

#[test]
fn without_a_user_directory_local_wins() {
    let tree = Tree::new();
    tree.write("system", "s.json", &paths_file(r#""data":"/sys""#));
    let local = tree.write("local", "l.json", &paths_file(r#""data":"/local""#));
    tree.write("user", "u.json", &paths_file(r#""data":"/user""#));
    let dirs = ConfigDirs {
        user: None,
        ..tree.dirs()
    };
    assert_eq!(
        load_paths(&dirs).unwrap().data,
        Some(Value::new(PathBuf::from("/local"), Origin::File(local)))
    );
}

#[test]
fn an_error_in_any_layer_names_its_file() {
    let tree = Tree::new();
    tree.write("system", "s.json", &paths_file(r#""data":"/sys""#));
    let bad = tree.write("user", "bad.json", &paths_file(r#""data":"relative""#));
    let msg = load_paths(&tree.dirs()).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!("{}: field \"data\"", bad.display())),
        "{msg}"
    );
}

#[test]
fn warnings_from_every_layer_are_kept() {
    let tree = Tree::new();
    tree.write("system", "s.json", &paths_file(r#""x":1"#));
    tree.write("user", "u.json", &paths_file(r#""y":2"#));
    let fields: Vec<String> = load_paths(&tree.dirs())
        .unwrap()
        .warnings
        .iter()
        .filter_map(|w| match w {
            ConfigWarning::UnknownField { field, .. } => Some(field.clone()),
            ConfigWarning::NotUsed { .. } => None,
        })
        .collect();
    assert_eq!(fields, ["x", "y"]);
}

#[test]
fn a_paths_d_that_is_not_a_directory_is_an_error_naming_it() {
    let tree = Tree::new();
    tree.mkdir("local");
    let paths_d = tree.root().join("local/paths.d");
    fs::write(&paths_d, "").unwrap();
    let msg = load_paths(&tree.dirs()).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!("cannot list configuration directory {}", paths_d.display())
    );
}
