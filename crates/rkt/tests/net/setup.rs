//! Setup and teardown of pod networks with the scriptable test plugin (no root needed):
//! order, interface names, CNI_ARGS, the record, rollback on failure, teardown from the
//! record alone, collected teardown failures, DNS and hosts files. Every test ends with the
//! leak checker (as root): nothing of its pod may be left, not even a CNI cache entry.

use crate::{leaks, net_support};

use std::fs;
use std::path::Path;

use net_support::NetWorld;
use rkt::etc_files as dns;
use rkt::networking::{self, record, NetError, NetSelection};
use serde_json::json;

fn list(name: &str, plugins: &[&str]) -> serde_json::Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": plugins.iter().map(|p| json!({"type": p, "marker": name})).collect::<Vec<_>>(),
    })
}

fn ok_plugin(w: &NetWorld, name: &str) {
    w.plugin(name, json!({}));
}

fn shorts(w: &NetWorld) -> Vec<String> {
    w.calls().iter().map(|c| c.short()).collect()
}

/// A file standing in for the namespace: the test plugin does not enter it.
fn fake_netns(w: &NetWorld) -> std::path::PathBuf {
    let p = w.root.path().join("netns");
    fs::write(&p, "").unwrap();
    p
}

#[test]
fn networks_are_set_up_in_file_order_on_eth0_eth1_with_args_and_recorded() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "pa");
    ok_plugin(&w, "pb");
    w.conf("20-a.conflist", list("a", &["pa"]));
    w.conf("10-b.conflist", list("b", &["pb"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));

    let nets = networking::setup(&pod, &w.opts(&["a:IP=fd00::1;X=y", "b"])).unwrap();

    assert_eq!(shorts(&w), ["ADD pb eth0", "ADD pa eth1"]);
    let calls = w.calls();
    assert_eq!(calls[0].env["CNI_CONTAINERID"], w.uuid.as_str());
    assert_eq!(calls[0].env["CNI_NETNS"], netns.display().to_string());
    assert_eq!(calls[0].env["CNI_ARGS"].as_str().unwrap_or(""), "");
    assert_eq!(calls[1].env["CNI_ARGS"], "IgnoreUnknown=1;IP=fd00::1;X=y");
    assert_eq!(calls[1].stdin["marker"], "a");

    assert_eq!(nets.len(), 2);
    assert_eq!(
        (nets[0].net_name.as_str(), nets[0].if_name.as_str()),
        ("b", "eth0")
    );
    assert_eq!(
        (nets[1].net_name.as_str(), nets[1].if_name.as_str()),
        ("a", "eth1")
    );
    assert_eq!(nets[1].args, "IP=fd00::1;X=y");
    // the test plugin's default ADD answer
    assert_eq!(nets[0].ip4(), Some("10.99.0.2".parse().unwrap()));
    assert_eq!(nets[0].mask, Some("255.255.255.0".parse().unwrap()));
    assert_eq!(nets[0].net_conf, "net/10-b.conflist");
    assert_eq!(
        nets[0].plugin_path,
        w.plugin_dir().join("pb").display().to_string()
    );
    assert_eq!(nets[0].plugin_dirs, vec![w.plugin_dir()]);
    assert!(nets[0].result.is_some());

    assert_eq!(networking::load_record(&pod_dir).unwrap(), nets);
    assert_eq!(
        fs::read(pod_dir.join("net/20-a.conflist")).unwrap(),
        fs::read(w.conf_dir().join("20-a.conflist")).unwrap()
    );
    // the default hosts file, no resolv.conf (no network returned DNS)
    let hosts = fs::read_to_string(dns::hosts_path(&pod_dir)).unwrap();
    assert!(
        hosts.contains(&format!("127.0.0.1\trkt-{}\n", w.uuid)),
        "{hosts}"
    );
    assert!(!dns::resolv_conf_path(&pod_dir).exists());

    networking::teardown(&pod).unwrap();
    assert_eq!(
        shorts(&w),
        ["ADD pb eth0", "ADD pa eth1", "DEL pa eth1", "DEL pb eth0"]
    );
    assert!(networking::load_record(&pod_dir).unwrap().is_empty());
    assert!(!record::record_path(&pod_dir).exists());
    // the CNI cache entries are gone too
    let cached: Vec<_> = fs::read_dir(w.cache_dir().join("results"))
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(cached.is_empty(), "{cached:?}");

    // idempotent: nothing more is called
    networking::teardown(&pod).unwrap();
    assert_eq!(shorts(&w).len(), 4);
}

#[test]
fn failed_add_dels_the_failed_network_and_earlier_ones_in_reverse() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "good");
    w.plugin(
        "bad",
        json!({"ADD": {"error": {"code": 11, "msg": "no more addresses", "details": "pool full"}}}),
    );
    w.conf("10-one.conflist", list("one", &["good"]));
    w.conf("20-two.conflist", list("two", &["good"]));
    w.conf("30-three.conflist", list("three", &["good", "bad"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));

    let err = networking::setup(&pod, &w.opts(&["one,two,three"])).unwrap_err();

    let msg = err.to_string();
    assert!(
        matches!(&err, NetError::Add { net, plugin, cleanup, .. }
        if net == "three" && plugin == "bad" && cleanup.is_empty()),
        "{err:?}"
    );
    assert!(
        msg.contains("\"three\"") && msg.contains("\"bad\"") && msg.contains("no more addresses"),
        "{msg}"
    );
    assert_eq!(
        shorts(&w),
        [
            "ADD good eth0",
            "ADD good eth1",
            "ADD good eth2",
            "ADD bad eth2",
            // the failed network gets its DEL too (every plugin, in reverse)
            "DEL bad eth2",
            "DEL good eth2",
            "DEL good eth1",
            "DEL good eth0",
        ]
    );
    assert!(!record::record_path(&pod_dir).exists());
    assert!(!dns::hosts_path(&pod_dir).exists());
}

#[test]
fn record_is_written_before_add_so_a_failed_cleanup_can_be_retried() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "good");
    w.plugin(
        "stuck",
        json!({"ADD": {"signal": 9}, "DEL": {"error": {"code": 999, "msg": "busy"}}}),
    );
    w.conf("10-one.conflist", list("one", &["good"]));
    w.conf("20-two.conflist", list("two", &["stuck"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));

    let err = networking::setup(&pod, &w.opts(&["one,two"])).unwrap_err();
    let NetError::Add { net, cleanup, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(net, "two");
    assert_eq!(cleanup.len(), 1, "{cleanup:?}");
    assert!(err.to_string().contains("busy"), "{err}");
    // "one" came down; "two" (never finished its ADD) stays recorded for gc
    let left = networking::load_record(&pod_dir).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].net_name.as_str(), left[0].if_name.as_str()),
        ("two", "eth1")
    );
    assert!(left[0].result.is_none() && left[0].ip.is_none());
    assert!(pod_dir.join(&left[0].net_conf).exists());

    // the plugin recovers; teardown (as gc would run it) finishes the job
    w.script("stuck", &json!({"log": w.log().display().to_string()}));
    networking::teardown(&pod).unwrap();
    assert_eq!(shorts(&w).last().unwrap(), "DEL stuck eth1");
    assert!(!record::record_path(&pod_dir).exists());
}

#[test]
fn teardown_uses_the_record_after_config_and_plugins_dir_changed() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "pa");
    w.conf("10-a.conflist", list("a", &["pa"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    networking::setup(&pod, &w.opts(&["a:K=V"])).unwrap();

    fs::remove_dir_all(w.conf_dir()).unwrap();
    networking::teardown(&pod).unwrap();

    let calls = w.calls();
    let del = calls.last().unwrap();
    assert_eq!(del.short(), "DEL pa eth0");
    assert_eq!(del.stdin["marker"], "a");
    assert_eq!(del.stdin["name"], "a");
    assert_eq!(del.env["CNI_ARGS"], "IgnoreUnknown=1;K=V");
    assert_eq!(del.env["CNI_PATH"], w.plugin_dir().display().to_string());
    // the ADD result came back as prevResult from the recorded cache directory
    assert_eq!(del.stdin["prevResult"]["ips"][0]["address"], "10.99.0.2/24");
}

#[test]
fn teardown_tries_every_network_and_keeps_the_failed_ones() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "good");
    w.plugin("flaky", json!({}));
    w.conf("10-a.conflist", list("a", &["flaky"]));
    w.conf("20-b.conflist", list("b", &["good"]));
    w.conf("30-c.conflist", list("c", &["flaky"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    networking::setup(&pod, &w.opts(&["a,b,c"])).unwrap();

    w.plugin(
        "flaky",
        json!({"DEL": {"error": {"code": 999, "msg": "try later"}}}),
    );
    let err = networking::teardown(&pod).unwrap_err();
    let NetError::Teardown { failures, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(failures.len(), 2, "{failures:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("\"a\"") && msg.contains("\"c\"") && !msg.contains("\"b\""),
        "{msg}"
    );
    let dels: Vec<_> = shorts(&w)
        .into_iter()
        .filter(|s| s.starts_with("DEL"))
        .collect();
    assert_eq!(dels, ["DEL flaky eth2", "DEL good eth1", "DEL flaky eth0"]);
    let left: Vec<_> = networking::load_record(&pod_dir)
        .unwrap()
        .into_iter()
        .map(|n| n.net_name)
        .collect();
    assert_eq!(left, ["a", "c"]);
    assert!(!pod_dir.join("net/20-b.conflist").exists());

    w.plugin("flaky", json!({}));
    networking::teardown(&pod).unwrap();
    let dels: Vec<_> = shorts(&w)
        .into_iter()
        .filter(|s| s.starts_with("DEL"))
        .collect();
    assert_eq!(dels[3..], ["DEL flaky eth2", "DEL flaky eth0"]);
    assert!(!record::record_path(&pod_dir).exists());
}

#[test]
fn unknown_networks_fail_before_anything_is_set_up() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "pa");
    w.conf("10-a.conflist", list("a", &["pa"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    let err = networking::setup(&pod, &w.opts(&["a,nope", "missing"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "networks not found: nope, missing (searched {} and the built-in networks)",
            w.conf_dir().display()
        )
    );
    assert!(w.calls().is_empty());
    assert_eq!(fs::read_dir(&pod_dir).unwrap().count(), 0);
}

#[test]
fn host_writes_nothing_and_none_writes_only_hosts() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, None);
    let mut opts = w.opts(&["host"]);
    opts.hosts.entries = vec!["10.1.1.1=db".into()];
    opts.dns.servers = vec!["8.8.8.8".into()];
    assert!(networking::setup(&pod, &opts).unwrap().is_empty());
    // Only the pod's own /etc/hostname: the UTS namespace is the pod's even then.
    let written: Vec<_> = fs::read_dir(pod_dir.join("etc"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(written.iter().all(|n| n == "hostname"), "{written:?}");
    assert_eq!(
        fs::read_dir(&pod_dir).unwrap().count(),
        written.len().min(1)
    );

    let netns = fake_netns(&w);
    let pod = w.pod(&pod_dir, Some(&netns));
    let mut opts = w.opts(&["none"]);
    opts.hosts.entries = vec!["10.1.1.1=db,db.lan".into()];
    assert!(networking::setup(&pod, &opts).unwrap().is_empty());
    let hosts = fs::read_to_string(dns::hosts_path(&pod_dir)).unwrap();
    assert!(
        hosts.ends_with("\n# Added by rkt run --hosts-entry\n10.1.1.1\tdb db.lan\n"),
        "{hosts}"
    );
    assert!(!dns::resolv_conf_path(&pod_dir).exists());
    assert!(!record::record_path(&pod_dir).exists());

    opts.dns.servers = vec!["192.0.2.53".into()];
    opts.dns.search = vec!["lan".into()];
    networking::setup(&pod, &opts).unwrap();
    assert_eq!(
        fs::read_to_string(dns::resolv_conf_path(&pod_dir)).unwrap(),
        "# Generated by rkt run\n\nsearch lan\nnameserver 192.0.2.53\n"
    );
    assert!(w.calls().is_empty());
}

fn dns_plugin(w: &NetWorld, name: &str, ns: &str) {
    w.plugin(
        name,
        json!({"ADD": {"result": {
            "cniVersion": "1.0.0",
            "ips": [{"address": "10.50.0.9/16"}],
            "dns": {"nameservers": [ns], "search": ["pod.lan"], "options": ["ndots:1"]}
        }}}),
    );
}

#[test]
fn first_network_with_dns_writes_resolv_conf() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "plain");
    dns_plugin(&w, "dns1", "10.50.0.1");
    dns_plugin(&w, "dns2", "10.60.0.1");
    w.conf("10-plain.conflist", list("plain", &["plain"]));
    w.conf("20-first.conflist", list("first", &["dns1"]));
    w.conf("30-second.conflist", list("second", &["dns2"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    let nets = networking::setup(&pod, &w.opts(&["plain,first,second"])).unwrap();
    assert_eq!(nets[1].ip4(), Some("10.50.0.9".parse().unwrap()));
    assert_eq!(nets[1].mask, Some("255.255.0.0".parse().unwrap()));
    assert_eq!(
        fs::read_to_string(dns::resolv_conf_path(&pod_dir)).unwrap(),
        "# Generated by rkt from network first\n\nsearch pod.lan\nnameserver 10.50.0.1\noptions ndots:1\n"
    );
    networking::teardown(&pod).unwrap();
}

/// What `--dns`, `--dns-domain` and `--hosts-entry` make of a network whose result carries
/// DNS settings: one case a line, each pod in a directory of its own.
#[test]
fn dns_flags_override_or_ignore_cni_dns() {
    struct Case {
        name: &'static str,
        servers: &'static [&'static str],
        domain: Option<&'static str>,
        hosts: &'static [&'static str],
        /// The pod's resolv.conf (`None`: none written), or `Err` for a refused setup.
        resolv_conf: Result<Option<&'static str>, ()>,
    }
    let cases = [
        Case {
            name: "none ignores the network's DNS",
            servers: &["none"],
            domain: None,
            hosts: &["host"],
            resolv_conf: Ok(None),
        },
        Case {
            name: "addresses replace the network's DNS",
            servers: &["192.0.2.1", "2001:db8::1"],
            domain: Some("example"),
            hosts: &["host"],
            resolv_conf: Ok(Some(
                "# Generated by rkt run\n\nnameserver 192.0.2.1\nnameserver 2001:db8::1\ndomain example\n",
            )),
        },
        Case {
            name: "host mixed with an address is refused",
            servers: &["host", "192.0.2.1"],
            domain: Some("example"),
            hosts: &["host"],
            resolv_conf: Err(()),
        },
    ];
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    dns_plugin(&w, "dns1", "10.50.0.1");
    w.conf("20-first.conflist", list("first", &["dns1"]));
    let netns = fake_netns(&w);
    for (i, case) in cases.iter().enumerate() {
        let name = case.name;
        let pod_dir = w.root.path().join(format!("pod-{i}"));
        let pod = w.pod(&pod_dir, Some(&netns));
        let mut opts = w.opts(&["first"]);
        opts.dns.servers = case.servers.iter().map(|s| s.to_string()).collect();
        opts.dns.domain = case.domain.map(str::to_string);
        opts.hosts.entries = case.hosts.iter().map(|s| s.to_string()).collect();
        match (networking::setup(&pod, &opts), case.resolv_conf) {
            (Err(err), Err(())) => assert!(matches!(err, NetError::Dns(_)), "{name}: {err:?}"),
            (Ok(_), Ok(expected)) => {
                let written = fs::read_to_string(dns::resolv_conf_path(&pod_dir)).ok();
                assert_eq!(written.as_deref(), expected, "{name}: resolv.conf");
                assert!(
                    !dns::hosts_path(&pod_dir).exists(),
                    "{name}: --hosts-entry=host wrote a hosts file"
                );
                networking::teardown(&pod).unwrap();
            }
            (got, _) => panic!("{name}: setup gave {got:?}"),
        }
    }
}

#[test]
fn a_pod_with_recorded_networks_is_not_set_up_twice() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "pa");
    w.conf("10-a.conflist", list("a", &["pa"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    networking::setup(&pod, &w.opts(&["a"])).unwrap();
    let err = networking::setup(&pod, &w.opts(&["a"])).unwrap_err();
    assert!(matches!(err, NetError::AlreadySetUp { .. }), "{err:?}");
    assert_eq!(shorts(&w), ["ADD pa eth0"]);
    networking::teardown(&pod).unwrap();
}

#[test]
fn networks_need_a_namespace() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, None);
    let err = networking::setup(&pod, &w.opts(&[])).unwrap_err();
    assert!(matches!(err, NetError::NoNetns { .. }), "{err:?}");
}

#[test]
fn all_selects_user_networks_and_both_builtins() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "pa");
    // stand-ins for ptp and host-local so the built-ins run without root
    ok_plugin(&w, "ptp");
    ok_plugin(&w, "portmap");
    w.conf("10-a.conflist", list("a", &["pa"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    let sel = NetSelection::parse(&["all".into()]).unwrap();
    let mut opts = w.opts(&[]);
    opts.selection = sel;
    let nets = networking::setup(&pod, &opts).unwrap();
    let names: Vec<_> = nets
        .iter()
        .map(|n| (n.net_name.as_str(), n.if_name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("a", "eth0"),
            ("default-restricted", "eth1"),
            ("default", "eth2")
        ]
    );
    assert_eq!(nets[2].net_conf, "net/99-default.conflist");
    let add_default = &w.calls()[2];
    assert_eq!(add_default.stdin["ipMasq"], true);
    assert_eq!(add_default.stdin["ipam"]["subnet"], "172.16.28.0/24");
    networking::teardown(&pod).unwrap();
    assert!(!record::record_path(Path::new(&pod_dir)).exists());
}

#[test]
fn missing_plugin_in_the_middle_of_a_list_does_not_hide_the_others() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "first");
    ok_plugin(&w, "last");
    w.conf("10-a.conflist", list("a", &["first", "gone", "last"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));

    // setup: "gone" is not found; the rollback DELs the plugins that exist
    let err = networking::setup(&pod, &w.opts(&["a"])).unwrap_err();
    assert!(
        matches!(&err, NetError::Add { plugin, cleanup, .. }
        if plugin == "gone" && cleanup.is_empty()),
        "{err:?}"
    );
    assert_eq!(
        shorts(&w),
        ["ADD first eth0", "DEL last eth0", "DEL first eth0"]
    );
    assert!(!record::record_path(&pod_dir).exists());

    // teardown of a working pod whose plugin was removed since: the others are DELeted and
    // the missing one is reported, so the record stays for a later retry
    ok_plugin(&w, "gone");
    networking::setup(&pod, &w.opts(&["a"])).unwrap();
    fs::remove_file(w.plugin_dir().join("gone")).unwrap();
    let err = networking::teardown(&pod).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("\"gone\"") && msg.contains("not found"),
        "{msg}"
    );
    assert_eq!(shorts(&w)[6..], ["DEL last eth0", "DEL first eth0"]);
    assert_eq!(networking::load_record(&pod_dir).unwrap().len(), 1);

    // once the plugin is back, the retry DELs every plugin with the cached ADD result
    ok_plugin(&w, "gone");
    networking::teardown(&pod).unwrap();
    let calls = w.calls();
    let retry: Vec<String> = calls[8..].iter().map(|c| c.short()).collect();
    assert_eq!(retry, ["DEL last eth0", "DEL gone eth0", "DEL first eth0"]);
    for call in &calls[8..] {
        assert!(call.stdin["prevResult"].is_object(), "{call:?}");
    }
    assert!(networking::load_record(&pod_dir).unwrap().is_empty());
}

#[test]
fn plugin_refusing_its_config_for_add_and_del_alike_does_not_block_rollback() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "good");
    let refusal = json!({"code": 7, "msg": "invalid CIDR address: 10.300.0.0/24"});
    w.plugin(
        "picky",
        json!({"ADD": {"error": refusal}, "DEL": {"error": refusal}}),
    );
    w.plugin(
        "moody",
        json!({"ADD": {"error": refusal}, "DEL": {"error": {"code": 5, "msg": "io"}}}),
    );
    w.conf("10-a.conflist", list("a", &["good"]));
    w.conf("20-b.conflist", list("b", &["good", "picky"]));
    w.conf("30-c.conflist", list("c", &["good", "moody"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));

    let err = networking::setup(&pod, &w.opts(&["a,b"])).unwrap_err();
    assert!(
        matches!(&err, NetError::Add { cleanup, .. } if cleanup.is_empty()),
        "{err:?}"
    );
    assert_eq!(
        shorts(&w),
        [
            "ADD good eth0",
            "ADD good eth1",
            "ADD picky eth1",
            "DEL picky eth1",
            "DEL good eth1",
            "DEL good eth0"
        ]
    );
    assert!(!record::record_path(&pod_dir).exists());

    // a DEL failing differently from the ADD is a real cleanup failure, kept for gc
    let err = networking::setup(&pod, &w.opts(&["a,c"])).unwrap_err();
    assert!(
        matches!(&err, NetError::Add { cleanup, .. } if cleanup.len() == 1),
        "{err:?}"
    );
    let left = networking::load_record(&pod_dir).unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].net_name, "c");
}

#[test]
fn check_reports_per_network_with_the_recorded_config() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "good");
    w.plugin("sick", json!({}));
    w.conf("10-a.conflist", list("a", &["good"]));
    w.conf("20-b.conflist", list("b", &["sick"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    networking::setup(&pod, &w.opts(&["a,b"])).unwrap();
    fs::remove_dir_all(w.conf_dir()).unwrap();

    let reports = networking::check(&pod).unwrap();
    assert_eq!(reports.len(), 2);
    assert!(reports.iter().all(|r| r.result.is_ok()), "{reports:?}");

    w.plugin(
        "sick",
        json!({"CHECK": {"error": {"code": 999, "msg": "eth1 is gone"}}}),
    );
    let reports = networking::check(&pod).unwrap();
    assert_eq!(
        (reports[0].net_name.as_str(), reports[0].if_name.as_str()),
        ("a", "eth0")
    );
    assert!(reports[0].result.is_ok());
    let err = rkt::error::chain(reports[1].result.as_ref().unwrap_err());
    assert!(
        err.contains("\"b\"") && err.contains("eth1 is gone"),
        "{err}"
    );
    let checks: Vec<_> = w
        .calls()
        .into_iter()
        .filter(|c| c.command == "CHECK")
        .collect();
    assert_eq!(checks.len(), 4);
    // CHECK gets the ADD result as prevResult, from the recorded cache directory
    assert_eq!(
        checks[0].stdin["prevResult"]["ips"][0]["address"],
        "10.99.0.2/24"
    );
    networking::teardown(&pod).unwrap();
    assert!(networking::check(&pod).unwrap().is_empty());
}

#[test]
fn failing_to_write_the_pod_files_tears_the_networks_down() {
    let w = NetWorld::new();
    let _g = leaks::Guard::new(w.leak_ctx());
    ok_plugin(&w, "pa");
    w.conf("10-a.conflist", list("a", &["pa"]));
    let netns = fake_netns(&w);
    let pod_dir = w.pod_dir();
    // <pod>/etc cannot become a directory
    fs::write(pod_dir.join("etc"), "not a directory").unwrap();
    let pod = w.pod(&pod_dir, Some(&netns));
    let err = networking::setup(&pod, &w.opts(&["a"])).unwrap_err();
    assert!(
        matches!(&err, NetError::Aborted { cleanup, .. } if cleanup.is_empty()),
        "{err:?}"
    );
    assert!(err.to_string().contains("etc/hosts"), "{err}");
    assert_eq!(shorts(&w), ["ADD pa eth0", "DEL pa eth0"]);
    assert!(!record::record_path(&pod_dir).exists());
}
