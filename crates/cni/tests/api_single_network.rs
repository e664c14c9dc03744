//! The single-network operations (libcni `AddNetwork`, `CheckNetwork`, `DelNetwork`,
//! `GetNetworkCachedResult`, `GetNetworkCachedConfig`, `ValidateNetwork`), the checks made
//! before any plugin runs (`CNI_NETNS` for ADD and CHECK, libcni's error codes), the
//! per-call cache directory, `conf_files` and the plugin drop-in parser, over the test
//! plugin.

mod support;

use std::path::Path;

use cni::api::RuntimeConf;
use cni::conf::{self, ConfError};
use cni::error::Error;
use serde_json::json;
use support::{chain, rt, World};

/// A `.conf` network: one plugin object that carries the network's name and version.
fn single_conf(w: &World, name: &str, version: &str) -> conf::NetworkConfig {
    w.install("a", json!({}));
    let bytes = json!({"cniVersion": version, "name": name, "type": "a", "capabilities": {"mac": true}, "x": 1});
    let list = conf::parse_single(bytes.to_string().as_bytes(), None).unwrap();
    list.plugins[0].clone()
}

#[test]
fn single_network_lifecycle_runs_the_plugin_and_shares_the_list_cache() {
    let w = World::new();
    let net = single_conf(&w, "single", "1.0.0");
    let cni = w.cni();
    let r = rt();

    let added = cni.add_network(&net, &r).unwrap();
    assert_eq!(added.version(), "1.0.0");
    assert_eq!(
        added.first_ipv4().unwrap().address,
        "10.99.0.2/24",
        "{added:?}"
    );
    let cached = cni.get_network_cached_result(&net, &r).unwrap().unwrap();
    assert_eq!(cached, added);
    // The list operations see the very same entry.
    let as_list = conf::conf_list_from_conf(&net).unwrap();
    assert_eq!(as_list.name, "single");
    assert_eq!(
        cni.get_network_list_cached_result(&as_list, &r).unwrap(),
        Some(added.clone())
    );
    let (bytes, cached_rt) = cni.get_network_cached_config(&net, &r).unwrap().unwrap();
    let cached_conf: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(cached_conf["name"], "single");
    assert_eq!(cached_conf["plugins"][0]["x"], 1);
    assert_eq!(cached_rt.netns, r.netns);

    cni.check_network(&net, &r).unwrap();
    assert_eq!(cni.validate_network(&net).unwrap(), ["mac"]);
    cni.del_network(&net, &r).unwrap();
    assert_eq!(cni.get_network_cached_result(&net, &r).unwrap(), None);

    let seq: Vec<String> = w.sequence().into_iter().map(|(_, c)| c).collect();
    assert_eq!(seq, ["ADD", "CHECK", "VERSION", "DEL"]);
    let add = &w.calls()[0];
    assert_eq!(add.stdin["name"], "single");
    assert_eq!(add.stdin["cniVersion"], "1.0.0");
    assert_eq!(add.stdin["x"], 1);
    assert!(add.stdin.get("capabilities").is_none(), "{}", add.stdin);
}

#[test]
fn single_network_without_a_name_is_code_7_before_any_plugin_runs() {
    let w = World::new();
    w.install("a", json!({}));
    let drop_in = conf::parse_plugin(br#"{"type":"a"}"#, None).unwrap();
    let err = w.cni().add_network(&drop_in, &rt()).unwrap_err();
    assert!(
        matches!(err, Error::Conf(ConfError::MissingName { .. })),
        "{err}"
    );
    assert_eq!(err.code(), Some(7));
    assert!(w.calls().is_empty());
}

#[test]
fn add_and_check_need_a_netns_del_does_not() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("net", "1.0.0", &["a"]);
    let cni = w.cni();
    let mut r = rt();
    cni.add_network_list(&l, &r).unwrap();
    w.clear_log();

    for netns in [None, Some("".into())] {
        r.netns = netns;
        let err = cni.add_network_list(&l, &r).unwrap_err();
        assert!(
            matches!(err, Error::MissingNetns { command: "ADD", .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            r#"network "net": ADD needs the network namespace (CNI_NETNS), and none was given"#
        );
        assert_eq!(err.code(), Some(4));
        let err = cni.check_network_list(&l, &r).unwrap_err();
        assert!(
            matches!(
                err,
                Error::MissingNetns {
                    command: "CHECK",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.code(), Some(4));
    }
    assert!(w.calls().is_empty(), "{:?}", w.sequence());
    r.netns = None;
    cni.del_network_list(&l, &r).unwrap();
    assert_eq!(w.sequence(), [("a".to_string(), "DEL".to_string())]);
}

#[test]
fn invalid_names_carry_libcni_codes() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("net", "1.0.0", &["a"]);
    let cni = w.cni();
    let with = |cid: &str, ifname: &str| RuntimeConf::new(cid, rt().netns, ifname);
    let cases = [
        (with("", "eth0"), 3),
        (with("bad/id", "eth0"), 4),
        (with("c1", ""), 4),
        (with("c1", "bad name"), 4),
        (with("c1", "waytoolongname16"), 4),
    ];
    for (r, code) in cases {
        for err in [
            cni.add_network_list(&l, &r).unwrap_err(),
            cni.check_network_list(&l, &r).unwrap_err(),
            cni.del_network_list(&l, &r).unwrap_err(),
        ] {
            assert!(matches!(err, Error::Validate(_)), "{err}");
            assert_eq!(err.code(), Some(code), "{r:?}: {err}");
        }
    }
    assert!(w.calls().is_empty());
}

#[test]
fn a_per_call_cache_dir_replaces_the_runtime_one() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("net", "1.0.0", &["a"]);
    let cni = w.cni();
    let own = w.tmp.path().join("own-cache");
    let mut r = rt();
    r.cache_dir = Some(own.clone());

    cni.add_network_list(&l, &r).unwrap();
    let entry = own.join("results/net-c1-eth0");
    assert!(entry.is_file(), "no cache entry at {}", entry.display());
    assert!(!w.cache.join("results").exists());
    assert!(cni
        .get_network_list_cached_result(&l, &r)
        .unwrap()
        .is_some());
    assert!(cni
        .get_network_list_cached_result(&l, &rt())
        .unwrap()
        .is_none());
    cni.check_network_list(&l, &r).unwrap();
    cni.del_network_list(&l, &r).unwrap();
    assert!(!entry.exists());
}

#[test]
fn conf_files_lists_matching_files_in_name_order() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for f in ["b.conf", "a.json", "c.conflist", "d.txt", "e.conf"] {
        std::fs::write(d.join(f), "{}").unwrap();
    }
    std::fs::create_dir(d.join("dir.conf")).unwrap();
    std::os::unix::fs::symlink(d.join("b.conf"), d.join("link.conf")).unwrap();
    let names = |exts: &[&str]| -> Vec<String> {
        conf::conf_files(d, exts)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&[".conf"]), ["b.conf", "e.conf", "link.conf"]);
    assert_eq!(
        names(&["conf", "json", "conflist"]),
        ["a.json", "b.conf", "c.conflist", "e.conf", "link.conf"]
    );
    assert_eq!(
        conf::conf_files(d, &[".conf"]).unwrap()[0],
        d.join("b.conf")
    );
    assert!(conf::conf_files(&d.join("missing"), &["conf"])
        .unwrap()
        .is_empty());
}

#[test]
fn plugin_drop_in_parser_keeps_every_key_and_names_the_file() {
    let p = conf::parse_plugin(
        br#"{"type":"tuning","capabilities":{"mac":true},"sysctl":{"a":"1"}}"#,
        None,
    )
    .unwrap();
    assert_eq!(p.plugin_type, "tuning");
    assert!(p.has_capability("mac"));
    assert_eq!(p.raw["sysctl"], json!({"a": "1"}));

    let file = Path::new("/etc/cni/net.d/net/10-tuning.conf");
    let err = conf::parse_plugin(br#"{"sysctl":{}}"#, Some(file)).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"/etc/cni/net.d/net/10-tuning.conf: the plugin has no "type""#
    );
    let err = conf::parse_plugin(br#"{"type":"../sh"}"#, Some(file)).unwrap_err();
    assert!(matches!(err, ConfError::InvalidType { .. }), "{err}");
    assert!(conf::parse_plugin(b"[1]", Some(file)).is_err());
}
