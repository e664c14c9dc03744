//! CHECK, STATUS, GC, validation, version info and cached attachments through the real
//! test plugin.

mod support;

use cni::api::RuntimeConf;
use cni::error::Error;
use cni::types::Attachment;
use serde_json::json;
use support::{chain, list, rt, World};

fn att(cid: &str, ifname: &str) -> Attachment {
    Attachment {
        container_id: cid.into(),
        ifname: ifname.into(),
    }
}

fn rt_for(cid: &str, ifname: &str) -> RuntimeConf {
    RuntimeConf::new(cid, Some(format!("/run/netns/{cid}").into()), ifname)
}

#[test]
fn check_runs_every_plugin_in_order_with_the_cached_result() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    let l = chain("net", "1.0.0", &["a", "b"]);
    let cni = w.cni();
    let added = cni.add_network_list(&l, &rt()).unwrap();
    w.clear_log();
    cni.check_network_list(&l, &rt()).unwrap();
    let calls = w.calls();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.plugin.as_str(), c.command.as_str()))
            .collect::<Vec<_>>(),
        [("a", "CHECK"), ("b", "CHECK")]
    );
    for c in &calls {
        assert_eq!(c.stdin["prevResult"], added.to_value());
    }
}

#[test]
fn check_needs_an_added_attachment() {
    let w = World::new();
    w.install("a", json!({}));
    let err = w
        .cni()
        .check_network_list(&chain("net", "1.0.0", &["a"]), &rt())
        .unwrap_err();
    assert!(matches!(err, Error::NotAdded { .. }), "{err}");
    assert!(w.calls().is_empty());
}

#[test]
fn check_before_040_is_an_error_and_disable_check_skips_it() {
    let w = World::new();
    w.install(
        "a",
        json!({"CHECK": {"error": {"code": 7, "msg": "must not run"}}}),
    );
    let cni = w.cni();
    let old = chain("old", "0.3.1", &["a"]);
    cni.add_network_list(&old, &rt()).unwrap();
    let err = cni.check_network_list(&old, &rt()).unwrap_err();
    assert!(
        matches!(&err, Error::CheckUnsupported { version, .. } if version == "0.3.1"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("does not support the CHECK command"),
        "{err}"
    );

    let disabled = list(
        json!({"cniVersion": "1.0.0", "name": "quiet", "disableCheck": true, "plugins": [{"type": "a"}]}),
    );
    cni.check_network_list(&disabled, &rt()).unwrap(); // not even added: still fine
    assert!(w.calls().iter().all(|c| c.command != "CHECK"));
}

#[test]
fn check_failure_stops_and_names_the_plugin() {
    let w = World::new();
    w.install(
        "a",
        json!({"CHECK": {"error": {"code": 100, "msg": "veth missing"}}}),
    );
    w.install("b", json!({}));
    let l = chain("net", "1.0.0", &["a", "b"]);
    let cni = w.cni();
    cni.add_network_list(&l, &rt()).unwrap();
    let err = cni.check_network_list(&l, &rt()).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"network "net": plugin "a" failed (CHECK): code 100: veth missing"#
    );
    assert!(w
        .calls()
        .iter()
        .all(|c| !(c.plugin == "b" && c.command == "CHECK")));
}

#[test]
fn status_is_a_no_op_before_110() {
    let w = World::new();
    w.install(
        "a",
        json!({"STATUS": {"error": {"code": 50, "msg": "down"}}}),
    );
    w.cni()
        .get_status_network_list(&chain("net", "1.0.0", &["a"]))
        .unwrap();
    assert!(w.calls().is_empty());
}

#[test]
fn status_surfaces_codes_50_and_51_and_stops_at_the_first() {
    let w = World::new();
    w.install("a", json!({}));
    w.install(
        "b",
        json!({"STATUS": {"error": {"code": 51, "msg": "no IPs left"}}}),
    );
    w.install("c", json!({}));
    let l = chain("net", "1.1.0", &["a", "b", "c"]);
    let err = w.cni().get_status_network_list(&l).unwrap_err();
    assert_eq!(err.code(), Some(51));
    assert!(
        matches!(&err, Error::Plugin { plugin, command, .. } if plugin == "b" && *command == "STATUS")
    );
    let calls = w.calls();
    assert_eq!(calls.len(), 2);
    for c in &calls {
        assert_eq!(c.stdin["name"], "net");
        assert_eq!(c.stdin["cniVersion"], "1.1.0");
        assert!(c.stdin.get("prevResult").is_none() && c.stdin.get("runtimeConfig").is_none());
    }
    w.install("ok", json!({}));
    w.cni()
        .get_status_network_list(&chain("fine", "1.1.0", &["ok"]))
        .unwrap();
}

#[test]
fn gc_deletes_only_stale_attachments_then_runs_plugin_gc_with_both_keys() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    let l = chain("net", "1.1.0", &["a", "b"]);
    let other = chain("other", "1.1.0", &["a"]);
    let cni = w.cni();
    cni.add_network_list(&l, &rt_for("c1", "eth0")).unwrap();
    let mut stale = rt_for("c2", "eth0");
    stale.args = vec![("K".into(), "V".into())];
    stale
        .capability_args
        .insert("mac".into(), json!("0a:00:00:00:00:03"));
    cni.add_network_list(&l, &stale).unwrap();
    cni.add_network_list(&l, &rt_for("c1", "eth1")).unwrap();
    cni.add_network_list(&other, &rt_for("c9", "eth0")).unwrap();
    w.clear_log();

    let valid = [att("c1", "eth0"), att("c7", "eth3")];
    cni.gc_network_list(&l, &valid).unwrap();

    let calls = w.calls();
    let dels: Vec<_> = calls.iter().filter(|c| c.command == "DEL").collect();
    let mut deleted: Vec<_> = dels
        .iter()
        .map(|c| {
            (
                c.env["CNI_CONTAINERID"].as_str().unwrap(),
                c.env["CNI_IFNAME"].as_str().unwrap(),
            )
        })
        .collect();
    deleted.dedup();
    assert_eq!(deleted, [("c1", "eth1"), ("c2", "eth0")]);
    let c2_del = dels
        .iter()
        .find(|c| c.env["CNI_CONTAINERID"] == "c2")
        .unwrap();
    assert_eq!(c2_del.env["CNI_ARGS"], "K=V", "cached args are used");
    assert_eq!(
        c2_del.env["CNI_NETNS"], "/run/netns/c2",
        "cached netns is used"
    );
    assert_eq!(c2_del.stdin["prevResult"]["cniVersion"], "1.1.0");

    let gcs: Vec<_> = calls.iter().filter(|c| c.command == "GC").collect();
    assert_eq!(
        gcs.iter().map(|c| c.plugin.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let expected =
        json!([{"containerID": "c1", "ifname": "eth0"}, {"containerID": "c7", "ifname": "eth3"}]);
    for c in &gcs {
        assert_eq!(c.stdin["cni.dev/valid-attachments"], expected);
        assert_eq!(c.stdin["cni.dev/attachments"], expected);
        assert_eq!(c.stdin["name"], "net");
        assert!(c.stdin.get("runtimeConfig").is_none() && c.stdin.get("prevResult").is_none());
    }
    // GC calls come after every DEL.
    let first_gc = calls.iter().position(|c| c.command == "GC").unwrap();
    assert!(calls[first_gc..].iter().all(|c| c.command == "GC"));

    let left: Vec<_> = cni
        .get_cached_attachments("")
        .unwrap()
        .into_iter()
        .map(|a| (a.network, a.container_id, a.ifname))
        .collect();
    assert_eq!(
        left,
        [
            ("net".into(), "c1".into(), "eth0".into()),
            ("other".into(), "c9".into(), "eth0".into())
        ]
    );
}

#[test]
fn gc_before_110_only_deletes_and_disable_gc_does_nothing() {
    let w = World::new();
    w.install("a", json!({}));
    let cni = w.cni();
    let l = chain("net", "1.0.0", &["a"]);
    cni.add_network_list(&l, &rt()).unwrap();
    let disabled = list(
        json!({"cniVersion": "1.1.0", "name": "net", "disableGC": true, "plugins": [{"type": "a"}]}),
    );
    w.clear_log();
    cni.gc_network_list(&disabled, &[]).unwrap();
    assert!(w.calls().is_empty());
    assert_eq!(cni.get_cached_attachments("").unwrap().len(), 1);

    cni.gc_network_list(&l, &[]).unwrap();
    assert_eq!(w.sequence(), [("a".to_string(), "DEL".to_string())]);
    assert!(cni.get_cached_attachments("").unwrap().is_empty());
}

#[test]
fn gc_tries_every_step_and_reports_every_failure() {
    let w = World::new();
    w.install(
        "a",
        json!({
            "DEL": {"error": {"code": 5, "msg": "del failed"}},
            "GC": {"error": {"code": 11, "msg": "gc failed"}}
        }),
    );
    w.install("b", json!({"GC": {"stderr": "gc crashed", "exit": 2}}));
    let l = chain("net", "1.1.0", &["a", "b"]);
    let cni = w.cni();
    cni.add_network_list(&l, &rt_for("c1", "eth0")).unwrap();
    cni.add_network_list(&l, &rt_for("c2", "eth0")).unwrap();

    let err = cni.gc_network_list(&l, &[]).unwrap_err();
    let Error::Multiple(errors) = &err else {
        panic!("expected Multiple, got {err}")
    };
    assert_eq!(errors.len(), 4, "{err}");
    assert!(
        matches!(&errors[0], Error::StaleAttachment { container_id, .. } if container_id == "c1")
    );
    assert!(
        matches!(&errors[1], Error::StaleAttachment { container_id, .. } if container_id == "c2")
    );
    assert_eq!(errors[0].code(), Some(5));
    assert!(matches!(&errors[2], Error::Plugin { plugin, code: 11, .. } if plugin == "a"));
    assert!(
        matches!(&errors[3], Error::Plugin { plugin, msg, code: 0, .. } if plugin == "b" && msg == "gc crashed")
    );
    // Failed DELs keep their entries, so a later GC retries them.
    assert_eq!(cni.get_cached_attachments("").unwrap().len(), 2);
    // Both stale attachments were tried even though the first failed.
    let dels: Vec<_> = w
        .calls()
        .into_iter()
        .filter(|c| c.command == "DEL")
        .collect();
    assert_eq!(dels.len(), 4, "b then a (fails) for each attachment");
}

#[test]
fn validate_reports_capabilities_and_every_problem() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    w.install("old", json!({"versions": ["0.3.1", "0.4.0"]}));
    let good = list(json!({
        "cniVersion": "1.0.0", "name": "net",
        "plugins": [
            {"type": "a", "capabilities": {"portMappings": true, "mac": false}},
            {"type": "b", "capabilities": {"bandwidth": true, "portMappings": true}}
        ]
    }));
    let cni = w.cni();
    assert_eq!(
        cni.validate_network_list(&good).unwrap(),
        ["bandwidth", "portMappings"]
    );

    let bad = chain("net", "1.0.0", &["old", "missing", "a"]);
    let err = cni.validate_network_list(&bad).unwrap_err();
    let Error::Multiple(errors) = &err else {
        panic!("{err}")
    };
    assert_eq!(errors.len(), 2, "{err}");
    assert!(
        matches!(&errors[0], Error::UnsupportedByPlugin { plugin, version, supported, .. }
        if plugin == "old" && version == "1.0.0" && supported == &["0.3.1", "0.4.0"])
    );
    assert!(matches!(&errors[1], Error::PluginNotFound { .. }));
    assert!(w.calls().iter().all(|c| c.command == "VERSION"));
}

#[test]
fn version_info_of_current_and_ancient_plugins() {
    let w = World::new();
    w.install("new", json!({"versions": ["0.4.0", "1.0.0", "1.1.0"]}));
    w.install(
        "ancient",
        json!({"VERSION": {"error": {"code": 4, "msg": "unknown CNI_COMMAND: VERSION"}}}),
    );
    w.install("broken", json!({"VERSION": {"stdout": "hello"}}));
    let cni = w.cni();
    assert_eq!(
        cni.get_version_info("new").unwrap().supported_versions,
        ["0.4.0", "1.0.0", "1.1.0"]
    );
    assert_eq!(
        cni.get_version_info("ancient").unwrap().supported_versions,
        ["0.1.0"]
    );
    let err = cni.get_version_info("broken").unwrap_err();
    assert!(
        matches!(&err, Error::InvalidResult { command, .. } if *command == "VERSION"),
        "{err}"
    );
    assert!(matches!(
        cni.get_version_info("../new"),
        Err(Error::PluginNotFound { .. })
    ));
}

#[test]
fn invalid_plugin_result_is_reported_and_not_cached() {
    let w = World::new();
    w.install("a", json!({"ADD": {"stdout": "all good!"}}));
    w.install(
        "b",
        json!({"ADD": {"result": {"cniVersion": "1.0.0", "ips": "nope"}}}),
    );
    let cni = w.cni();
    for (p, l) in [
        ("a", chain("n1", "1.0.0", &["a"])),
        ("b", chain("n2", "1.0.0", &["b"])),
    ] {
        let err = cni.add_network_list(&l, &rt()).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidResult { plugin, command, .. } if plugin == p && *command == "ADD"),
            "{err}"
        );
    }
    assert!(cni.get_cached_attachments("").unwrap().is_empty());
}

#[test]
fn gc_deletes_with_the_configuration_cached_at_add_time() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    let cni = w.cni();
    let at_add = list(json!({"cniVersion": "1.0.0", "name": "net", "plugins": [
        {"type": "a", "marker": "old"}, {"type": "b"}]}));
    cni.add_network_list(&at_add, &rt_for("c1", "eth0"))
        .unwrap();
    w.clear_log();

    // The file changed since: one plugin fewer. The stale attachment is still torn down by
    // the plugins that set it up, with their old configuration.
    let now = list(
        json!({"cniVersion": "1.0.0", "name": "net", "plugins": [{"type": "a", "marker": "new"}]}),
    );
    cni.gc_network_list(&now, &[]).unwrap();
    let calls = w.calls();
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.plugin.as_str(), c.command.as_str()))
            .collect::<Vec<_>>(),
        [("b", "DEL"), ("a", "DEL")]
    );
    assert_eq!(calls[1].stdin["marker"], "old");
    assert!(cni.get_cached_attachments("").unwrap().is_empty());
}
