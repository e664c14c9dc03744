//! ADD and DEL of network lists through the real test plugin: chaining, prevResult,
//! reverse DEL, the cache, versions, capabilities, environment and name checks.

mod support;

use std::os::unix::fs::PermissionsExt;

use base64::Engine as _;
use cni::error::Error;
use cni::invoke::FindError;
use serde_json::{json, Value};
use support::{chain, list, result_with, rt, World};

#[test]
fn add_chains_plugins_in_order_with_each_prev_result() {
    let w = World::new();
    w.install("a", json!({"ADD": {"result": result_with("10.1.1.1/24")}}));
    w.install("b", json!({})); // default ADD passes prevResult through
    w.install("c", json!({"ADD": {"result": result_with("10.3.3.3/24")}}));
    let l = list(json!({
        "cniVersion": "1.0.0", "name": "net",
        "plugins": [{"type": "a", "custom": {"nested": [1, 2]}}, {"type": "b"}, {"type": "c"}]
    }));

    let res = w.cni().add_network_list(&l, &rt()).unwrap();
    assert_eq!(res.version(), "1.0.0");
    assert_eq!(res.to_value()["ips"][0]["address"], "10.3.3.3/24");

    let calls = w.calls();
    let seq: Vec<_> = calls
        .iter()
        .map(|c| (c.plugin.as_str(), c.command.as_str()))
        .collect();
    assert_eq!(seq, [("a", "ADD"), ("b", "ADD"), ("c", "ADD")]);
    for c in &calls {
        assert_eq!(c.stdin["name"], "net");
        assert_eq!(c.stdin["cniVersion"], "1.0.0");
    }
    assert!(calls[0].stdin.get("prevResult").is_none());
    assert_eq!(
        calls[0].stdin["custom"],
        json!({"nested": [1, 2]}),
        "unknown keys pass through"
    );
    assert_eq!(
        calls[1].stdin["prevResult"]["ips"][0]["address"],
        "10.1.1.1/24"
    );
    assert_eq!(
        calls[2].stdin["prevResult"]["ips"][0]["address"],
        "10.1.1.1/24"
    );
}

#[test]
fn del_runs_in_reverse_with_the_cached_result_and_removes_the_entry() {
    let w = World::new();
    for p in ["a", "b", "c"] {
        w.install(p, json!({}));
    }
    let l = chain("net", "1.0.0", &["a", "b", "c"]);
    let cni = w.cni();
    let added = cni.add_network_list(&l, &rt()).unwrap();
    let entry = w.cache.join("results/net-c1-eth0");
    assert!(entry.is_file());
    w.clear_log();

    cni.del_network_list(&l, &rt()).unwrap();
    let calls = w.calls();
    let seq: Vec<_> = calls
        .iter()
        .map(|c| (c.plugin.as_str(), c.command.as_str()))
        .collect();
    assert_eq!(seq, [("c", "DEL"), ("b", "DEL"), ("a", "DEL")]);
    for c in &calls {
        assert_eq!(c.stdin["prevResult"], added.to_value(), "{}", c.plugin);
    }
    assert!(!entry.exists());
    assert!(cni
        .get_network_list_cached_result(&l, &rt())
        .unwrap()
        .is_none());
}

#[test]
fn del_without_cache_runs_every_plugin_without_prev_result_and_twice_is_fine() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    let l = chain("net", "1.0.0", &["a", "b"]);
    let cni = w.cni();
    cni.del_network_list(&l, &rt()).unwrap();
    cni.del_network_list(&l, &rt()).unwrap();
    let calls = w.calls();
    assert_eq!(calls.len(), 4);
    assert_eq!(
        calls.iter().map(|c| c.plugin.as_str()).collect::<Vec<_>>(),
        ["b", "a", "b", "a"]
    );
    assert!(calls.iter().all(|c| c.stdin.get("prevResult").is_none()));
}

#[test]
fn double_del_after_add_only_first_has_prev_result() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("net", "0.4.0", &["a"]);
    let cni = w.cni();
    cni.add_network_list(&l, &rt()).unwrap();
    cni.del_network_list(&l, &rt()).unwrap();
    cni.del_network_list(&l, &rt()).unwrap();
    let dels: Vec<_> = w
        .calls()
        .into_iter()
        .filter(|c| c.command == "DEL")
        .collect();
    assert_eq!(dels.len(), 2);
    assert_eq!(dels[0].stdin["prevResult"]["cniVersion"], "0.4.0");
    assert!(dels[1].stdin.get("prevResult").is_none());
}

#[test]
fn failed_add_leaves_no_cache_and_del_cleans_up_every_plugin() {
    let w = World::new();
    w.install("a", json!({}));
    w.install(
        "b",
        json!({"ADD": {"error": {"code": 11, "msg": "address pool busy", "details": "try later"}}}),
    );
    w.install("c", json!({}));
    let l = chain("net", "1.0.0", &["a", "b", "c"]);
    let cni = w.cni();

    let err = cni.add_network_list(&l, &rt()).unwrap_err();
    match &err {
        Error::Plugin {
            network,
            plugin,
            command,
            code,
            msg,
            details,
        } => {
            assert_eq!(
                (network.as_str(), plugin.as_str(), *command),
                ("net", "b", "ADD")
            );
            assert_eq!(
                (*code, msg.as_str(), details.as_str()),
                (11, "address pool busy", "try later")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.code(), Some(11));
    assert_eq!(
        err.to_string(),
        r#"network "net": plugin "b" failed (ADD): code 11: address pool busy; try later"#
    );
    assert!(!w.cache.join("results/net-c1-eth0").exists());
    assert!(cni.get_cached_attachments("").unwrap().is_empty());

    cni.del_network_list(&l, &rt()).unwrap();
    assert_eq!(
        w.sequence(),
        [
            ("a", "ADD"),
            ("b", "ADD"),
            ("c", "DEL"),
            ("b", "DEL"),
            ("a", "DEL")
        ]
        .map(|(p, c)| (p.to_string(), c.to_string()))
    );
}

#[test]
fn failed_del_keeps_the_cache_entry_for_a_retry() {
    let w = World::new();
    w.install("a", json!({}));
    w.install(
        "b",
        json!({"DEL": {"error": {"code": 5, "msg": "cannot delete"}}}),
    );
    let l = chain("net", "1.0.0", &["a", "b"]);
    let cni = w.cni();
    cni.add_network_list(&l, &rt()).unwrap();
    let err = cni.del_network_list(&l, &rt()).unwrap_err();
    assert_eq!(err.code(), Some(5));
    // DEL halts at the first failure: "a" is not run.
    assert_eq!(
        w.sequence().last().unwrap(),
        &("b".to_string(), "DEL".to_string())
    );
    assert!(w.cache.join("results/net-c1-eth0").is_file());
}

#[test]
fn cache_entry_has_libcni_layout_modes_and_no_leftovers() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("net", "1.0.0", &["a"]);
    let mut r = rt();
    r.args = vec![
        ("IgnoreUnknown".into(), "1".into()),
        ("IP".into(), "10.1.2.3".into()),
    ];
    r.capability_args
        .insert("mac".into(), json!("0a:00:00:00:00:01"));
    let res = w.cni().add_network_list(&l, &r).unwrap();

    let results = w.cache.join("results");
    let names: Vec<_> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["net-c1-eth0"], "no temporary files left");
    let path = results.join("net-c1-eth0");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&results), 0o700);
    assert_eq!(mode(&w.cache), 0o700);

    let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["kind"], "cniCacheV1");
    assert_eq!(v["containerId"], "c1");
    assert_eq!(v["ifName"], "eth0");
    assert_eq!(v["networkName"], "net");
    assert_eq!(v["netns"], "/run/netns/test-ns");
    assert_eq!(
        v["cniArgs"],
        json!([["IgnoreUnknown", "1"], ["IP", "10.1.2.3"]])
    );
    assert_eq!(v["capabilityArgs"], json!({"mac": "0a:00:00:00:00:01"}));
    assert_eq!(v["result"], res.to_value());
    let config = base64::engine::general_purpose::STANDARD
        .decode(v["config"].as_str().unwrap())
        .unwrap();
    assert_eq!(config, l.bytes);

    let (bytes, cached_rt) = w
        .cni()
        .get_network_list_cached_config(&l, &rt())
        .unwrap()
        .unwrap();
    assert_eq!(bytes, l.bytes);
    assert_eq!(cached_rt, r);
    let attachments = w.cni().get_cached_attachments("c1").unwrap();
    assert_eq!(attachments.len(), 1);
    assert_eq!(attachments[0].network, "net");
    assert!(w.cni().get_cached_attachments("c2").unwrap().is_empty());
}

#[test]
fn results_are_converted_to_the_negotiated_version() {
    let w = World::new();
    // The plugin answers in 1.0.0 although the network speaks 0.3.1.
    w.install("a", json!({"ADD": {"result": result_with("10.5.0.2/16")}}));
    w.install("b", json!({}));
    let l = chain("net", "0.3.1", &["a", "b"]);
    let cni = w.cni();
    let res = cni.add_network_list(&l, &rt()).unwrap();
    assert_eq!(res.version(), "0.3.1");
    let calls = w.calls();
    assert_eq!(calls[1].stdin["prevResult"]["cniVersion"], "0.3.1");
    assert_eq!(calls[1].stdin["prevResult"]["ips"][0]["version"], "4");
    let cached = cni
        .get_network_list_cached_result(&l, &rt())
        .unwrap()
        .unwrap();
    assert_eq!(cached.version(), "0.3.1");

    // cniVersions picks the highest supported version.
    let l = list(
        json!({"cniVersions": ["0.4.0", "1.1.0", "9.9.9"], "name": "multi", "plugins": [{"type": "b"}]}),
    );
    let res = cni.add_network_list(&l, &rt()).unwrap();
    assert_eq!(res.version(), "1.1.0");
    assert_eq!(w.calls().last().unwrap().stdin["cniVersion"], "1.1.0");
}

#[test]
fn del_before_040_gets_no_prev_result() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("old", "0.3.1", &["a"]);
    let cni = w.cni();
    cni.add_network_list(&l, &rt()).unwrap();
    cni.del_network_list(&l, &rt()).unwrap();
    let del = w.calls().pop().unwrap();
    assert_eq!(del.command, "DEL");
    assert!(del.stdin.get("prevResult").is_none());
    assert!(!w.cache.join("results/old-c1-eth0").exists());
}

#[test]
fn legacy_single_plugin_config_works() {
    let w = World::new();
    w.install("ptp", json!({}));
    let l = cni::conf::parse_single(
        br#"{"cniVersion":"0.1.0","name":"default","type":"ptp","ipMasq":true}"#,
        None,
    )
    .unwrap();
    let cni = w.cni();
    let res = cni.add_network_list(&l, &rt()).unwrap();
    assert_eq!(res.version(), "0.1.0");
    assert_eq!(res.to_value()["ip4"]["ip"], "10.99.0.2/24");
    // The cache holds a list, as libcni's ConfListFromConf makes, so any reader can use it.
    let (cached, _) = cni
        .get_network_list_cached_config(&l, &rt())
        .unwrap()
        .unwrap();
    let cached: Value = serde_json::from_slice(&cached).unwrap();
    assert_eq!(
        cached,
        json!({"cniVersion": "0.1.0", "name": "default", "plugins": [
            {"cniVersion": "0.1.0", "name": "default", "type": "ptp", "ipMasq": true}]})
    );
    assert_eq!(
        cni::conf::parse_list(&serde_json::to_vec(&cached).unwrap(), None)
            .unwrap()
            .plugins
            .len(),
        1
    );
    cni.del_network_list(&l, &rt()).unwrap();
    let calls = w.calls();
    assert_eq!(calls[0].stdin["ipMasq"], true);
    assert!(calls[1].stdin.get("prevResult").is_none());
}

#[test]
fn environment_per_command() {
    let w = World::new();
    let second = w.tmp.path().join("more-plugins");
    std::fs::create_dir(&second).unwrap();
    w.install("a", json!({}));
    let mut cni = w.cni();
    cni.path.push(second.clone());
    let cni_path = format!("{}:{}", w.plugins.display(), second.display());
    let l = chain("net", "1.1.0", &["a"]);
    let mut r = rt();
    r.args = vec![
        ("K8S_POD_NAME".into(), "p".into()),
        ("IP".into(), "10.0.0.9".into()),
    ];

    cni.add_network_list(&l, &r).unwrap();
    cni.check_network_list(&l, &r).unwrap();
    cni.get_status_network_list(&l).unwrap();
    cni.gc_network_list(&l, &[r.attachment()]).unwrap();
    cni.get_version_info("a").unwrap();
    let mut no_netns = r.clone();
    no_netns.netns = None;
    cni.del_network_list(&l, &no_netns).unwrap();

    let calls = w.calls();
    let env_of = |cmd: &str| calls.iter().find(|c| c.command == cmd).unwrap().env.clone();
    for cmd in ["ADD", "CHECK"] {
        assert_eq!(
            env_of(cmd),
            json!({
                "CNI_COMMAND": cmd, "CNI_CONTAINERID": "c1", "CNI_NETNS": "/run/netns/test-ns",
                "CNI_IFNAME": "eth0", "CNI_ARGS": "K8S_POD_NAME=p;IP=10.0.0.9", "CNI_PATH": cni_path
            }),
            "{cmd}"
        );
    }
    assert_eq!(
        env_of("DEL"),
        json!({"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1", "CNI_IFNAME": "eth0",
               "CNI_ARGS": "K8S_POD_NAME=p;IP=10.0.0.9", "CNI_PATH": cni_path})
    );
    for cmd in ["STATUS", "GC"] {
        assert_eq!(
            env_of(cmd),
            json!({"CNI_COMMAND": cmd, "CNI_PATH": cni_path}),
            "{cmd}"
        );
    }
    assert_eq!(
        env_of("VERSION"),
        json!({"CNI_COMMAND": "VERSION", "CNI_NETNS": "dummy", "CNI_IFNAME": "dummy", "CNI_PATH": "dummy"})
    );
    let version_call = calls.iter().find(|c| c.command == "VERSION").unwrap();
    assert_eq!(version_call.stdin, json!({"cniVersion": "1.1.0"}));
    // Without args, CNI_ARGS is left out.
    w.clear_log();
    cni.add_network_list(&l, &rt()).unwrap();
    assert!(w.calls()[0].env.get("CNI_ARGS").is_none());
}

#[test]
fn runtime_config_carries_only_declared_capabilities() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    let l = list(json!({
        "cniVersion": "1.0.0", "name": "net",
        "plugins": [
            {"type": "a", "capabilities": {"portMappings": true, "mac": false, "dns": true}},
            {"type": "b"}
        ]
    }));
    let mut r = rt();
    let ports = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]);
    r.capability_args
        .insert("portMappings".into(), ports.clone());
    r.capability_args
        .insert("mac".into(), json!("0a:00:00:00:00:02"));
    r.capability_args
        .insert("bandwidth".into(), json!({"ingressRate": 1}));
    let cni = w.cni();
    cni.add_network_list(&l, &r).unwrap();
    cni.del_network_list(&l, &r).unwrap();
    for c in w.calls() {
        assert!(
            c.stdin.get("capabilities").is_none(),
            "capabilities must not be passed"
        );
        match c.plugin.as_str() {
            "a" => assert_eq!(
                c.stdin["runtimeConfig"],
                json!({"portMappings": ports}),
                "{}",
                c.command
            ),
            _ => assert!(c.stdin.get("runtimeConfig").is_none(), "{}", c.command),
        }
    }
}

#[test]
fn invalid_names_are_rejected_before_any_plugin_runs() {
    let w = World::new();
    w.install("a", json!({}));
    let l = chain("net", "1.0.0", &["a"]);
    let cni = w.cni();
    for (cid, ifname) in [
        ("bad/id", "eth0"),
        ("", "eth0"),
        ("c1", "much-too-long-ifname"),
        ("c1", "a:b"),
    ] {
        let mut r = rt();
        r.container_id = cid.into();
        r.ifname = ifname.into();
        let err = cni.add_network_list(&l, &r).unwrap_err();
        assert!(
            matches!(err, Error::Validate(_)),
            "{cid:?} {ifname:?}: {err}"
        );
    }
    assert!(w.calls().is_empty());
}

#[test]
fn missing_plugin_error_names_the_plugin_and_every_dir() {
    let w = World::new();
    w.install("a", json!({}));
    let mut cni = w.cni();
    cni.path.push("/nonexistent/cni/bin".into());
    let l = chain("net", "1.0.0", &["a", "bridgee"]);
    let err = cni.add_network_list(&l, &rt()).unwrap_err();
    match &err {
        Error::PluginNotFound {
            network,
            source: FindError::NotFound { plugin, dirs },
        } => {
            assert_eq!(network, "net");
            assert_eq!(plugin, "bridgee");
            assert_eq!(dirs, &cni.path);
        }
        other => panic!("unexpected {other:?}"),
    }
    let text = cni::error::chain(&err);
    assert!(text.contains("\"bridgee\""), "{text}");
    assert!(
        text.contains(&format!("{}:/nonexistent/cni/bin", w.plugins.display())),
        "{text}"
    );
    assert!(w
        .cache
        .join("results")
        .read_dir()
        .map_or(true, |mut d| d.next().is_none()));
}

#[test]
fn path_like_plugin_types_never_run() {
    let w = World::new();
    w.install("a", json!({}));
    let cni = w.cni();
    for bad in ["../x", "/bin/sh", "", "..", "a/../../bin/true"] {
        let mut l = chain("net", "1.0.0", &["a"]);
        l.plugins[0].plugin_type = bad.into();
        let err = cni.add_network_list(&l, &rt()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::PluginNotFound {
                    source: FindError::InvalidName(_),
                    ..
                }
            ),
            "{bad:?}: {err}"
        );
    }
    assert!(w.calls().is_empty());
}

#[test]
fn del_passes_over_a_missing_plugin_so_earlier_plugins_clean_up() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("c", json!({}));
    let l = chain("net", "1.0.0", &["a", "gone", "c"]);
    let cni = w.cni();
    let err = cni.add_network_list(&l, &rt()).unwrap_err();
    assert!(matches!(err, Error::PluginNotFound { .. }), "{err}");

    let err = cni.del_network_list(&l, &rt()).unwrap_err();
    assert!(
        matches!(&err, Error::PluginNotFound { source: FindError::NotFound { plugin, .. }, .. } if plugin == "gone"),
        "{err}"
    );
    let strs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect()
    };
    assert_eq!(
        w.sequence(),
        strs(&[("a", "ADD"), ("c", "DEL"), ("a", "DEL")])
    );
}

/// Runs in a child process of this test binary, whose environment carries stale protocol
/// variables (setting them in this multi-threaded process would race other tests).
#[test]
fn inherited_protocol_variables_do_not_leak_into_plugins() {
    if std::env::var_os("CNI_LEAK_TEST_CHILD").is_some() {
        let w = World::new();
        w.install("a", json!({}));
        let l = chain("net", "1.1.0", &["a"]);
        w.cni().gc_network_list(&l, &[]).unwrap();
        let mut r = rt();
        r.netns = None;
        w.cni().del_network_list(&l, &r).unwrap();
        let calls = w.calls();
        assert_eq!(calls[0].env["CNI_COMMAND"], "GC");
        for var in ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS"] {
            assert!(calls[0].env.get(var).is_none(), "{var}: {:?}", calls[0].env);
        }
        assert_eq!(calls[1].env["CNI_CONTAINERID"], "c1");
        assert!(
            calls[1].env.get("CNI_NETNS").is_none(),
            "{:?}",
            calls[1].env
        );
        assert!(calls[1].env.get("CNI_ARGS").is_none(), "{:?}", calls[1].env);
        assert_eq!(
            calls[1].env["CNI_UNRELATED"], "kept",
            "other variables are inherited"
        );
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "inherited_protocol_variables_do_not_leak_into_plugins",
            "--nocapture",
        ])
        .env("CNI_LEAK_TEST_CHILD", "1")
        .env(support::BUILT_PLUGIN_VAR, support::plugin_binary())
        .env("CNI_NETNS", "/proc/1/ns/net")
        .env("CNI_CONTAINERID", "leaked")
        .env("CNI_ARGS", "LEAKED=1")
        .env("CNI_IFNAME", "leak0")
        .env("CNI_UNRELATED", "kept")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "the child ran the test: {text}");
}

#[test]
fn containers_can_be_added_and_deleted_from_many_threads() {
    let w = World::new();
    w.install("a", json!({}));
    w.install("b", json!({}));
    let l = chain("net", "1.0.0", &["a", "b"]);
    let cni = w.cni();
    std::thread::scope(|s| {
        for i in 0..12 {
            let (cni, l) = (&cni, &l);
            s.spawn(move || {
                // ADD needs a netns (the spec says so); DEL below goes without one.
                let netns = Some("/run/netns/test-ns".into());
                let r = cni::api::RuntimeConf::new(format!("c{i}"), netns, "eth0");
                cni.add_network_list(l, &r).unwrap();
            });
        }
    });
    let cached = cni.get_cached_attachments("").unwrap();
    assert_eq!(cached.len(), 12);
    assert!(cached.iter().all(|a| a.result.is_some()));
    std::thread::scope(|s| {
        for a in &cached {
            let (cni, l) = (&cni, &l);
            s.spawn(move || {
                let r = cni::api::RuntimeConf::new(a.container_id.clone(), None, "eth0");
                cni.del_network_list(l, &r).unwrap();
            });
        }
    });
    assert!(cni.get_cached_attachments("").unwrap().is_empty());
    assert_eq!(w.calls().len(), 48);
}
