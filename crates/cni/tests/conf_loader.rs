//! Network configuration loading: file formats, directory order, shadowing, aggregated
//! plugin files, error messages, and the per-plugin request built by `inject`.

use std::fs;
use std::path::Path;

use cni::conf::{self, ConfError, NetworkConfig};
use serde_json::{json, Map, Value};

fn write(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&p, body).unwrap();
    p
}

fn conflist(name: &str, types: &[&str]) -> String {
    let plugins: Vec<Value> = types.iter().map(|t| json!({"type": t})).collect();
    json!({"cniVersion": "1.0.0", "name": name, "plugins": plugins}).to_string()
}

fn types(list: &conf::NetworkConfigList) -> Vec<&str> {
    list.plugins
        .iter()
        .map(|p| p.plugin_type.as_str())
        .collect()
}

#[test]
fn conflist_fields_and_raw_plugins() {
    let bytes = br#"{
        "cniVersion": "0.4.0",
        "cniVersions": ["1.0.0", "1.1.0"],
        "name": "pod-net",
        "disableCheck": "true",
        "disableGC": true,
        "plugins": [
            {"type": "bridge", "bridge": "rkt0", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.2.0.0/16"}]]}},
            {"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false}, "snat": true}
        ]
    }"#;
    let list = conf::parse_list(bytes, Some(Path::new("/etc/rkt/net.d/10-pod.conflist"))).unwrap();
    assert_eq!(list.name, "pod-net");
    assert_eq!(list.cni_version.as_deref(), Some("0.4.0"));
    assert_eq!(list.cni_versions, ["1.0.0", "1.1.0"]);
    assert!(list.disable_check && list.disable_gc && !list.load_only_inlined_plugins);
    assert_eq!(types(&list), ["bridge", "portmap"]);
    assert_eq!(
        list.source.as_deref(),
        Some(Path::new("/etc/rkt/net.d/10-pod.conflist"))
    );
    assert_eq!(list.bytes, bytes.to_vec());
    assert_eq!(list.negotiated_version().unwrap(), "1.1.0");
    let bridge = &list.plugins[0];
    assert_eq!(bridge.raw["ipam"]["ranges"][0][0]["subnet"], "10.2.0.0/16");
    assert_eq!(
        bridge.raw.keys().collect::<Vec<_>>(),
        ["type", "bridge", "ipam"]
    );
    let portmap = &list.plugins[1];
    assert!(portmap.has_capability("portMappings"));
    assert!(!portmap.has_capability("bandwidth"));
    assert!(!portmap.has_capability("ips"));
}

#[test]
fn single_conf_becomes_a_one_plugin_list() {
    let bytes = br#"{"cniVersion":"0.1.0","name":"default","type":"ptp","ipMasq":true,
                    "ipam":{"type":"host-local","subnet":"172.16.28.0/24","routes":[{"dst":"0.0.0.0/0"}]}}"#;
    let list = conf::parse_single(bytes, None).unwrap();
    assert_eq!(list.name, "default");
    assert_eq!(list.cni_version.as_deref(), Some("0.1.0"));
    assert!(list.cni_versions.is_empty() && !list.disable_check);
    assert_eq!(types(&list), ["ptp"]);
    assert_eq!(list.plugins[0].raw["ipMasq"], true);
    assert_eq!(list.plugins[0].raw["name"], "default");
    assert_eq!(list.bytes, bytes.to_vec());
    assert_eq!(list.negotiated_version().unwrap(), "0.1.0");
    // No cniVersion at all: libcni treats it as 0.1.0.
    let list = conf::parse_single(br#"{"name":"n","type":"ptp"}"#, None).unwrap();
    assert_eq!(list.cni_version, None);
    assert_eq!(list.negotiated_version().unwrap(), "0.1.0");
}

#[test]
fn load_dir_reads_three_extensions_in_bytewise_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "2-a.conf", r#"{"name":"a","type":"ptp"}"#);
    write(d, "10-b.conflist", &conflist("b", &["bridge"]));
    write(d, "30-c.json", r#"{"name":"c","type":"macvlan"}"#);
    write(d, "a-d.conflist", &conflist("d", &["ipvlan"]));
    write(d, "B-g.conf", r#"{"name":"g","type":"ptp"}"#);
    write(d, "README.md", "not a config");
    write(d, "40-e.conflist~", &conflist("e", &["bridge"]));
    write(d, "50-f.conf.bak", r#"{"name":"f","type":"ptp"}"#);
    fs::create_dir(d.join("60-dir.conf")).unwrap();
    std::os::unix::fs::symlink(d.join("30-c.json"), d.join("70-link.json")).unwrap();
    let loaded = conf::load_dir(d).unwrap();
    assert!(loaded.failed.is_empty(), "{:?}", loaded.failed);
    let names: Vec<&str> = loaded.networks.iter().map(|n| n.name.as_str()).collect();
    // Byte-wise, not numeric or locale order: "10-" < "2-" < "30-" < "B-" < "a-".
    assert_eq!(names, ["b", "a", "c", "g", "d"]);
    assert_eq!(
        loaded.find("c").unwrap().source.as_deref(),
        Some(d.join("30-c.json").as_path())
    );
    assert!(loaded.find("e").is_none() && loaded.find("f").is_none());
    // The symlink defines "c" again and is shadowed by the real file.
    assert_eq!(loaded.shadowed.len(), 1);
    assert_eq!(loaded.shadowed[0].file, d.join("70-link.json"));
}

#[test]
fn first_definition_of_a_name_wins() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "20-net.conf", r#"{"name":"net","type":"ptp"}"#);
    write(d, "10-net.conflist", &conflist("net", &["bridge"]));
    write(d, "30-net.json", r#"{"name":"net","type":"macvlan"}"#);
    let loaded = conf::load_dir(d).unwrap();
    assert_eq!(loaded.networks.len(), 1);
    assert_eq!(types(loaded.find("net").unwrap()), ["bridge"]);
    let shadowed: Vec<_> = loaded
        .shadowed
        .iter()
        .map(|s| (s.name.as_str(), s.file.clone(), s.shadowed_by.clone()))
        .collect();
    assert_eq!(
        shadowed,
        [
            ("net", d.join("20-net.conf"), d.join("10-net.conflist")),
            ("net", d.join("30-net.json"), d.join("10-net.conflist")),
        ]
    );
}

#[test]
fn missing_dir_is_empty_but_unreadable_dir_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = conf::load_dir(&dir.path().join("nope")).unwrap();
    assert!(loaded.networks.is_empty() && loaded.failed.is_empty() && loaded.shadowed.is_empty());
    let file = write(dir.path(), "plain", "x");
    let err = conf::load_dir(&file).unwrap_err();
    assert!(matches!(err, ConfError::Read { .. }), "{err:?}");
    assert_eq!(err.path(), Some(file.as_path()));
    assert!(
        cni::error::chain(&err).starts_with(&format!("{}: cannot read", file.display())),
        "{err}"
    );
}

#[test]
fn malformed_json_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bad = write(
        d,
        "10-a.conflist",
        "{\n  \"name\": \"a\",\n  \"plugins\" [\n}\n",
    );
    write(d, "20-b.conf", r#"{"name":"b","type":"ptp"}"#);
    let err = conf::load_file(&bad).unwrap_err();
    match &err {
        ConfError::Json { line, column, .. } => assert_eq!((*line, *column), (3, 13)),
        other => panic!("{other:?}"),
    }
    let msg = cni::error::chain(&err);
    assert!(
        msg.starts_with(&format!(
            "{}: invalid JSON at line 3, column 13: expected `:`",
            bad.display()
        )),
        "{msg}"
    );
    assert!(
        !msg.ends_with("column 13"),
        "serde's own position suffix is stripped: {msg}"
    );
    // In a directory, the bad file is reported and the good one still loads.
    let loaded = conf::load_dir(d).unwrap();
    assert_eq!(loaded.networks.len(), 1);
    assert_eq!(loaded.failed.len(), 1);
    assert_eq!(loaded.failed[0].path(), Some(bad.as_path()));
}

#[test]
fn network_name_errors() {
    let cases: &[(&str, &str)] = &[
        (r#"{"type":"ptp"}"#, "missing network name"),
        (r#"{"name":"","type":"ptp"}"#, "invalid network name \"\""),
        (
            r#"{"name":"../etc","type":"ptp"}"#,
            "invalid network name \"../etc\"",
        ),
        (
            r#"{"name":"a b","type":"ptp"}"#,
            "invalid network name \"a b\"",
        ),
        (
            r#"{"name":7,"type":"ptp"}"#,
            "field \"name\" must be a string, found a number",
        ),
    ];
    for (body, want) in cases {
        let err = conf::parse_single(body.as_bytes(), Some(Path::new("/x/a.conf"))).unwrap_err();
        let msg = cni::error::chain(&err);
        assert!(
            msg.starts_with("/x/a.conf: ") && msg.contains(want),
            "{body}: {msg}"
        );
    }
}

#[test]
fn plugin_type_errors_name_the_plugin_index() {
    for bad in ["../../bin/sh", "/bin/sh", ""] {
        let body = json!({"name": "n", "plugins": [{"type": "bridge"}, {"type": bad}]}).to_string();
        let err = conf::parse_list(body.as_bytes(), Some(Path::new("/x/n.conflist"))).unwrap_err();
        match &err {
            ConfError::InvalidType { index, network, .. } => {
                assert_eq!((*index, network.as_str()), (1, "n"))
            }
            other => panic!("{bad:?}: {other:?}"),
        }
        let msg = cni::error::chain(&err);
        assert!(
            msg.contains(&format!("{bad:?}")) && msg.contains("plugin 1"),
            "{msg}"
        );
        // Same rule for single-plugin files.
        let single = json!({"name": "n", "type": bad}).to_string();
        assert!(matches!(
            conf::parse_single(single.as_bytes(), None),
            Err(ConfError::InvalidType { index: 0, .. })
        ));
    }
    let err = conf::parse_list(
        br#"{"name":"n","plugins":[{"type":"bridge"},{"bridge":"x"}]}"#,
        None,
    )
    .unwrap_err();
    assert!(
        matches!(err, ConfError::MissingType { index: 1, .. }),
        "{err:?}"
    );
    assert!(
        cni::error::chain(&err).contains("<network configuration>"),
        "{err}"
    );
    let err =
        conf::parse_list(br#"{"name":"n","plugins":[{"type":["bridge"]}]}"#, None).unwrap_err();
    assert!(cni::error::chain(&err).contains("plugins[0].type"), "{err}");
}

#[test]
fn wrong_field_types_are_reported() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"name":"n","cniVersion":1,"plugins":[{"type":"p"}]}"#,
            "\"cniVersion\" must be a string",
        ),
        (
            r#"{"name":"n","cniVersions":"1.0.0","plugins":[{"type":"p"}]}"#,
            "\"cniVersions\" must be an array",
        ),
        (
            r#"{"name":"n","cniVersions":[1],"plugins":[{"type":"p"}]}"#,
            "\"cniVersions[0]\"",
        ),
        (
            r#"{"name":"n","disableCheck":"maybe","plugins":[{"type":"p"}]}"#,
            "\"disableCheck\" must be a boolean, found \"maybe\"",
        ),
        (
            r#"{"name":"n","disableGC":1,"plugins":[{"type":"p"}]}"#,
            "\"disableGC\" must be a boolean",
        ),
        (
            r#"{"name":"n","plugins":{"type":"p"}}"#,
            "\"plugins\" must be an array",
        ),
        (
            r#"{"name":"n","plugins":["p"]}"#,
            ": plugins[0] must be a JSON object, found a string",
        ),
        (
            r#"{"name":"n","plugins":[{"type":"p","capabilities":["ips"]}]}"#,
            "\"plugins[0].capabilities\" must be an object",
        ),
        (
            r#"{"name":"n","plugins":[{"type":"p","capabilities":{"ips":"yes"}}]}"#,
            "\"plugins[0].capabilities.ips\" must be a boolean",
        ),
        (
            r#"[{"name":"n"}]"#,
            "the configuration must be a JSON object, found an array",
        ),
    ];
    for (body, want) in cases {
        let err = conf::parse_list(body.as_bytes(), Some(Path::new("/c/n.conflist"))).unwrap_err();
        let msg = cni::error::chain(&err);
        assert!(
            msg.starts_with("/c/n.conflist: ") && msg.contains(want),
            "{body}: {msg}"
        );
    }
}

#[test]
fn empty_plugin_lists() {
    let err = conf::parse_list(br#"{"name":"n","plugins":[]}"#, None).unwrap_err();
    assert!(matches!(err, ConfError::NoPlugins { .. }), "{err:?}");
    let err = conf::parse_list(br#"{"name":"n"}"#, None).unwrap_err();
    assert!(matches!(err, ConfError::NoPlugins { .. }), "{err:?}");
    let err = conf::parse_list(br#"{"name":"n","loadOnlyInlinedPlugins":true}"#, None).unwrap_err();
    assert!(
        matches!(err, ConfError::InlinedWithoutPlugins { .. }),
        "{err:?}"
    );
    assert!(
        cni::error::chain(&err).contains("loadOnlyInlinedPlugins"),
        "{err}"
    );
}

#[test]
fn aggregated_plugin_files_are_appended_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let main = write(d, "10-agg.conflist", &conflist("agg", &["bridge"]));
    write(
        d,
        "agg/20-b.conf",
        r#"{"type":"portmap","capabilities":{"portMappings":true}}"#,
    );
    write(
        d,
        "agg/10-a.conf",
        r#"{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.rp_filter":"0"}}"#,
    );
    write(d, "agg/30-c.json", r#"{"type":"ignored-extension"}"#);
    write(d, "other/10-x.conf", r#"{"type":"wrong-network"}"#);
    let list = conf::load_file(&main).unwrap();
    assert_eq!(types(&list), ["bridge", "tuning", "portmap"]);
    assert!(list.plugins[2].has_capability("portMappings"));
    assert_eq!(
        list.plugins[1].raw["sysctl"]["net.ipv4.conf.eth0.rp_filter"],
        "0"
    );
    // load_dir does the same, and does not treat the subdirectory's files as networks.
    let loaded = conf::load_dir(d).unwrap();
    assert_eq!(loaded.networks.len(), 1);
    assert_eq!(
        types(loaded.find("agg").unwrap()),
        ["bridge", "tuning", "portmap"]
    );

    // loadOnlyInlinedPlugins skips them.
    let inlined = json!({"cniVersion":"1.1.0","name":"agg","loadOnlyInlinedPlugins":true,"plugins":[{"type":"bridge"}]});
    let main2 = write(d, "10-agg.conflist", &inlined.to_string());
    assert_eq!(types(&conf::load_file(&main2).unwrap()), ["bridge"]);

    // A list with no inlined plugins is complete with aggregated ones.
    let bare = write(
        d,
        "10-agg.conflist",
        r#"{"cniVersion":"1.1.0","name":"agg"}"#,
    );
    assert_eq!(
        types(&conf::load_file(&bare).unwrap()),
        ["tuning", "portmap"]
    );

    // An explicit empty "plugins" is an error even with aggregated files (libcni).
    let empty = write(
        d,
        "10-agg.conflist",
        r#"{"cniVersion":"1.1.0","name":"agg","plugins":[]}"#,
    );
    assert!(matches!(
        conf::load_file(&empty),
        Err(ConfError::NoPlugins { .. })
    ));

    // An aggregated file with a bad type is an error that names that file.
    let bare = write(
        d,
        "10-agg.conflist",
        r#"{"cniVersion":"1.1.0","name":"agg"}"#,
    );
    let bad = write(d, "agg/40-bad.conf", r#"{"type":"../sh"}"#);
    let err = conf::load_file(&bare).unwrap_err();
    assert_eq!(err.path(), Some(bad.as_path()), "{err}");
    assert!(
        matches!(err, ConfError::InvalidType { index: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn no_plugins_anywhere_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "10-e.conflist", r#"{"name":"e"}"#);
    let err = conf::load_file(&f).unwrap_err();
    assert!(matches!(err, ConfError::NoPlugins { .. }), "{err:?}");
    assert_eq!(err.path(), Some(f.as_path()));
}

#[test]
fn unknown_extension_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "net.yaml", "name: x");
    assert!(matches!(
        conf::load_file(&f),
        Err(ConfError::UnknownExtension { .. })
    ));
    let err = conf::load_file(&dir.path().join("gone.conf")).unwrap_err();
    assert!(matches!(err, ConfError::Read { .. }), "{err:?}");
    assert!(cni::error::chain(&err).contains("gone.conf"), "{err}");
}

#[test]
fn non_utf8_file_is_a_json_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("10-x.conf");
    fs::write(&f, b"{\"name\":\"x\xff\xfe\",\"type\":\"ptp\"}").unwrap();
    let err = conf::load_file(&f).unwrap_err();
    assert!(matches!(err, ConfError::Json { line: 1, .. }), "{err:?}");
    assert!(cni::error::chain(&err).contains("10-x.conf"), "{err}");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!(
        "{{\"name\":\"n\",\"type\":\"p\",\"x\":{}{}}}",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let err = conf::parse_single(deep.as_bytes(), None).unwrap_err();
    assert!(cni::error::chain(&err).contains("recursion limit"), "{err}");
}

#[test]
fn large_config_loads() {
    // About 4 MB of plugin data: loaded, and passed through untouched.
    let big: Vec<Value> = (0..100_000)
        .map(|i| json!({"k": i, "v": "xxxxxxxxxxxxxxxxxx"}))
        .collect();
    let body = json!({"name": "big", "plugins": [{"type": "p", "data": big}]}).to_string();
    assert!(body.len() > 3_000_000);
    let list = conf::parse_list(body.as_bytes(), None).unwrap();
    assert_eq!(
        list.plugins[0].raw["data"].as_array().unwrap().len(),
        100_000
    );
    assert_eq!(list.plugins[0].raw["data"][99_999]["k"], 99_999);
}

fn plugin(raw: Value) -> NetworkConfig {
    let list = conf::parse_list(
        json!({"name": "n", "plugins": [raw]})
            .to_string()
            .as_bytes(),
        None,
    )
    .unwrap();
    list.plugins.into_iter().next().unwrap()
}

#[test]
fn inject_keeps_unknown_keys_and_sets_the_reserved_ones() {
    let p = plugin(json!({
        "type": "bridge",
        "name": "stale",
        "cniVersion": "0.1.0",
        "capabilities": {"portMappings": true},
        "custom": {"nested": {"deep": [1, {"x": null}]}, "n": 1.5},
        "args": {"cni": {"labels": ["a"]}},
        "zzz": "last"
    }));
    let rc: Map<String, Value> = json!({"portMappings": [{"hostPort": 80}]})
        .as_object()
        .unwrap()
        .clone();
    let prev = json!({"cniVersion": "1.1.0", "ips": [{"address": "10.0.0.2/24"}]});
    let req = conf::inject(&p, "pod-net", "1.1.0", Some(&prev), &rc);
    let m = req.as_object().unwrap();
    assert_eq!(m["name"], "pod-net");
    assert_eq!(m["cniVersion"], "1.1.0");
    assert_eq!(m["prevResult"], prev);
    assert_eq!(
        m["runtimeConfig"],
        json!({"portMappings": [{"hostPort": 80}]})
    );
    assert!(!m.contains_key("capabilities"));
    assert_eq!(m["custom"], p.raw["custom"]);
    assert_eq!(m["custom"]["nested"]["deep"][1], json!({"x": null}));
    assert_eq!(m["args"], json!({"cni": {"labels": ["a"]}}));
    // Keys keep their written order; new keys go at the end.
    assert_eq!(
        m.keys().collect::<Vec<_>>(),
        [
            "type",
            "name",
            "cniVersion",
            "custom",
            "args",
            "zzz",
            "prevResult",
            "runtimeConfig"
        ]
    );
    // The plugin's own object is not modified.
    assert!(p.raw.contains_key("capabilities"));
    assert_eq!(p.raw["name"], "stale");
}

#[test]
fn inject_omits_prev_result_and_empty_runtime_config() {
    let p = plugin(json!({"type": "loopback", "capabilities": {"ips": false}}));
    let req = conf::inject(&p, "lo", "0.4.0", None, &Map::new());
    assert_eq!(
        req,
        json!({"type": "loopback", "name": "lo", "cniVersion": "0.4.0"})
    );
}

#[test]
fn runtime_config_contains_only_declared_capabilities() {
    let p = plugin(
        json!({"type": "portmap", "capabilities": {"portMappings": true, "bandwidth": false, "ips": true}}),
    );
    let args: Map<String, Value> = json!({
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
        "bandwidth": {"ingressRate": 1},
        "dns": {"servers": ["1.1.1.1"]},
        "ips": ["10.0.0.9/24"]
    })
    .as_object()
    .unwrap()
    .clone();
    let rc = conf::runtime_config_for(&p, &args);
    assert_eq!(
        Value::Object(rc),
        json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}], "ips": ["10.0.0.9/24"]})
    );
    let none = plugin(json!({"type": "bridge"}));
    assert!(conf::runtime_config_for(&none, &args).is_empty());
}

#[test]
fn flags_accept_booleans_and_true_false_strings_only() {
    let list = conf::parse_list(
        br#"{"name":"n","disableCheck":"TRUE","disableGC":"False","plugins":[{"type":"p"}]}"#,
        None,
    )
    .unwrap();
    assert!(list.disable_check && !list.disable_gc);
    for bad in [r#""t""#, r#""1""#, "1", "null"] {
        let body = format!(r#"{{"name":"n","disableCheck":{bad},"plugins":[{{"type":"p"}}]}}"#);
        let r = conf::parse_list(body.as_bytes(), None);
        if bad == "null" {
            assert!(!r.unwrap().disable_check);
        } else {
            assert!(matches!(r, Err(ConfError::FieldType { .. })), "{bad}");
        }
    }
}

#[test]
fn version_fields_must_parse() {
    let err = conf::parse_list(
        br#"{"name":"n","cniVersions":["1.0.0","one"],"plugins":[{"type":"p"}]}"#,
        None,
    )
    .unwrap_err();
    assert!(matches!(err, ConfError::InvalidVersion { .. }), "{err:?}");
    assert!(
        cni::error::chain(&err).contains("\"cniVersions[1]\"")
            && cni::error::chain(&err).contains("\"one\""),
        "{err}"
    );
    let err =
        conf::parse_single(br#"{"name":"n","cniVersion":"1.x","type":"p"}"#, None).unwrap_err();
    assert!(matches!(err, ConfError::InvalidVersion { .. }), "{err:?}");
    // Parseable but unsupported versions load; negotiation reports them.
    let list = conf::parse_list(
        br#"{"name":"n","cniVersion":"9.0.0","plugins":[{"type":"p"}]}"#,
        None,
    )
    .unwrap();
    let err = list.negotiated_version().unwrap_err();
    assert!(cni::error::chain(&err).contains("9.0.0"), "{err}");
}

#[test]
fn a_list_in_a_conf_file_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "10-l.conf", &conflist("l", &["bridge"]));
    let err = conf::load_file(&f).unwrap_err();
    assert!(matches!(err, ConfError::ListInSingleFile { .. }), "{err:?}");
    assert!(cni::error::chain(&err).contains(".conflist"), "{err}");
}
