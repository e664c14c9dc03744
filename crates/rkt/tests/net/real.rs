//! Pod networks with the real plugins from /usr/lib/cni, in network namespaces the tests
//! create (root only; skipped otherwise). Every test ends with the leak checker: after
//! teardown nothing of the pod is left on the host (no veth, address or route, no host-local
//! reservation, no firewall rule or chain, no CNI cache entry). User networks have names
//! unique to the test and a subnet of their own in 10.110.0.0/16 (one /24 per test), so the
//! checker can attribute them; on the shared built-ins it goes by the pod's id and its veths.

use crate::{leaks, net_support};

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use net_support::{
    fw_chains, guard_links, host_ifaces, HostLocalDirs, NetWorld, TeardownGuard, TestNetns,
};
use rkt::networking::{self, NetError, NetInfo, NetOptions};
use serde_json::{json, Value};
use test_kit::unique;

const SYSTEM_PLUGINS: &str = "/usr/lib/cni";

/// Options with the system plugin directory (after the world's own one).
fn real_opts(w: &NetWorld, net: &[&str]) -> NetOptions {
    let mut opts = w.opts(net);
    opts.plugin_path = vec![w.plugin_dir(), PathBuf::from(SYSTEM_PLUGINS)];
    opts
}

/// A ptp + host-local network on `subnet` (each test has its own: 10.110.<n>.0/24).
fn ptp_net(name: &str, plugin: &str, subnet: &str) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": name,
        "plugins": [{
            "type": plugin,
            "ipMasq": false,
            "ipam": {"type": "host-local", "subnet": subnet}
        }]
    })
}

fn in_subnet(ip: Ipv4Addr, subnet: &str) -> bool {
    let (base, len) = subnet.split_once('/').unwrap();
    let base: Ipv4Addr = base.parse().unwrap();
    let len: u32 = len.parse().unwrap();
    let mask = u32::MAX << (32 - len);
    u32::from(ip) & mask == u32::from(base) & mask
}

/// Everything the leak check needs, taken before teardown.
struct Trace {
    ifaces: Vec<String>,
    chains: Vec<String>,
}

fn trace(uuid: &str, nets: &[NetInfo]) -> Trace {
    let results: Vec<Value> = nets.iter().filter_map(|n| n.result.clone()).collect();
    Trace {
        ifaces: host_ifaces(&results),
        chains: fw_chains(uuid),
    }
}

fn assert_addr_on(ns: &TestNetns, ifname: &str, ip: Ipv4Addr) {
    let addrs = ns.addrs();
    assert!(
        addrs
            .lines()
            .any(|l| l.contains(&format!(" {ifname} ")) && l.contains(&format!("inet {ip}/"))),
        "{ip} not on {ifname}:\n{addrs}"
    );
}

#[test]
fn builtin_default_gets_an_address_and_leaves_nothing() {
    test_kit::require_root!();
    let w = NetWorld::new();
    let ns = TestNetns::new();
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let mut g = leaks::Guard::new(w.leak_ctx().shared_network("default"));

    let nets = networking::setup(&pod, &real_opts(&w, &[])).unwrap();
    let t = trace(&w.uuid, &nets);
    guard_links(&mut g, &t.ifaces);

    assert_eq!(nets.len(), 1);
    assert_eq!(nets[0].net_name, "default");
    assert_eq!(nets[0].plugin_path, format!("{SYSTEM_PLUGINS}/ptp"));
    let ip = nets[0].ip4().expect("an IPv4 address");
    assert!(in_subnet(ip, "172.16.28.0/24"), "{ip}");
    assert_eq!(nets[0].mask, Some("255.255.255.0".parse().unwrap()));
    assert_addr_on(&ns, "eth0", ip);
    assert_eq!(t.ifaces.len(), 1, "ptp's host veth: {:?}", nets[0].result);
    assert!(!t.chains.is_empty(), "ipMasq made no chain for the pod");
    let reservation = Path::new("/var/lib/cni/networks/default").join(ip.to_string());
    assert!(reservation.exists());

    // CHECK passes on the healthy pod and fails once its interface is gone
    let reports = networking::check(&pod).unwrap();
    assert!(reports[0].result.is_ok(), "{reports:?}");
    net_support::sh(&["ip", "netns", "exec", &ns.name, "ip", "link", "del", "eth0"]);
    let reports = networking::check(&pod).unwrap();
    assert!(reports[0].result.is_err(), "CHECK passed without eth0");

    networking::teardown(&pod).unwrap();
    assert!(!reservation.exists());
    g.check();
    assert_eq!(ns.links(), ["lo"]);
}

#[test]
fn user_network_from_conf_dir_and_renamed_plugin_from_plugin_dir() {
    test_kit::require_root!();
    let w = NetWorld::new();
    let ns = TestNetns::new();
    let renamed = format!("myptp{}", unique());
    fs::copy(
        format!("{SYSTEM_PLUGINS}/ptp"),
        w.plugin_dir().join(&renamed),
    )
    .unwrap();
    let name_a = format!("rkt-test-a-{}", unique());
    let name_b = format!("rkt-test-b-{}", unique());
    let _dirs = HostLocalDirs(vec![name_a.clone(), name_b.clone()]);
    let (subnet_a, subnet_b) = ("10.110.1.0/24", "10.110.2.0/24");
    w.conf("10-a.conflist", ptp_net(&name_a, "ptp", subnet_a));
    w.conf("20-b.conflist", ptp_net(&name_b, &renamed, subnet_b));
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let mut g = leaks::Guard::new(
        w.leak_ctx()
            .network(&name_a)
            .network(&name_b)
            .subnet(subnet_a)
            .subnet(subnet_b),
    );

    let nets = networking::setup(&pod, &real_opts(&w, &[&format!("{name_b},{name_a}")])).unwrap();
    let t = trace(&w.uuid, &nets);
    guard_links(&mut g, &t.ifaces);

    assert_eq!(nets.len(), 2);
    assert_eq!(
        (nets[0].net_name.as_str(), nets[0].if_name.as_str()),
        (name_a.as_str(), "eth0")
    );
    assert_eq!(
        (nets[1].net_name.as_str(), nets[1].if_name.as_str()),
        (name_b.as_str(), "eth1")
    );
    assert_eq!(nets[0].plugin_path, format!("{SYSTEM_PLUGINS}/ptp"));
    assert_eq!(
        nets[1].plugin_path,
        w.plugin_dir().join(&renamed).display().to_string()
    );
    let (ip_a, ip_b) = (nets[0].ip4().unwrap(), nets[1].ip4().unwrap());
    assert!(
        in_subnet(ip_a, subnet_a) && in_subnet(ip_b, subnet_b),
        "{ip_a} {ip_b}"
    );
    assert_addr_on(&ns, "eth0", ip_a);
    assert_addr_on(&ns, "eth1", ip_b);
    assert_eq!(t.ifaces.len(), 2);

    // teardown works from the record alone
    fs::remove_dir_all(w.conf_dir()).unwrap();
    networking::teardown(&pod).unwrap();
    g.check();
    assert_eq!(ns.links(), ["lo"]);
}

#[test]
fn failing_second_network_tears_down_the_first() {
    test_kit::require_root!();
    let w = NetWorld::new();
    let ns = TestNetns::new();
    let name_a = format!("rkt-test-a-{}", unique());
    let name_b = format!("rkt-test-b-{}", unique());
    let _dirs = HostLocalDirs(vec![name_a.clone(), name_b.clone()]);
    let subnet_a = "10.110.3.0/24";
    w.conf("10-a.conflist", ptp_net(&name_a, "ptp", subnet_a));
    w.conf(
        "20-b.conflist",
        json!({
            "cniVersion": "1.0.0",
            "name": name_b,
            "plugins": [{"type": "ptp", "ipam": {"type": "host-local", "subnet": "10.300.0.0/24"}}]
        }),
    );
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let g = leaks::Guard::new(
        w.leak_ctx()
            .network(&name_a)
            .network(&name_b)
            .subnet(subnet_a),
    );
    let chains_before = fw_chains(&w.uuid);
    assert!(chains_before.is_empty());

    let err =
        networking::setup(&pod, &real_opts(&w, &[&format!("{name_a},{name_b}")])).unwrap_err();

    let NetError::Add { net, cleanup, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(net, &name_b);
    assert!(cleanup.is_empty(), "{cleanup:?}");
    assert!(err.to_string().contains(&name_b), "{err}");
    assert_eq!(ns.links(), ["lo"]);
    assert!(!rkt::networking::record::record_path(&pod_dir).exists());
    // the first network's host veth is gone: no link on the host points into our namespace
    let host_links = net_support::sh(&["ip", "-o", "link"]);
    assert!(!host_links.contains(&ns.name), "{host_links}");
    g.check();
}

#[test]
fn missing_plugin_names_it_and_leaves_nothing() {
    test_kit::require_root!();
    let w = NetWorld::new();
    let ns = TestNetns::new();
    let name = format!("rkt-test-{}", unique());
    let _dirs = HostLocalDirs(vec![name.clone()]);
    let subnet = "10.110.4.0/24";
    w.conf("10-x.conflist", ptp_net(&name, "no-such-plugin", subnet));
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let g = leaks::Guard::new(w.leak_ctx().network(&name).subnet(subnet));
    let err = networking::setup(&pod, &real_opts(&w, &[&name])).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("no-such-plugin") && msg.contains(&name) && msg.contains(SYSTEM_PLUGINS),
        "{msg}"
    );
    assert!(!rkt::networking::record::record_path(&pod_dir).exists());
    assert_eq!(ns.links(), ["lo"]);
    g.check();
}

#[test]
fn teardown_after_the_namespace_is_gone_leaves_nothing() {
    test_kit::require_root!();
    let w = NetWorld::new();
    let ns = TestNetns::new();
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let mut g = leaks::Guard::new(w.leak_ctx().shared_network("default"));
    let nets = networking::setup(&pod, &real_opts(&w, &["default"])).unwrap();
    let t = trace(&w.uuid, &nets);
    guard_links(&mut g, &t.ifaces);
    assert!(!t.chains.is_empty());

    // as after a crash where the namespace went first: the plugins cannot look inside
    net_support::sh(&["ip", "netns", "del", &ns.name]);
    networking::teardown(&pod).unwrap();
    assert!(networking::load_record(&pod_dir).unwrap().is_empty());
    g.check();
}

/// An address pinned through CNI_ARGS (`--net=NAME:IP=ADDR`) is the pod's, with the
/// network's mask, on eth0, and goes with the teardown; one case per network and family.
#[test]
fn addresses_pinned_through_net_args() {
    test_kit::require_root!();
    // a random address in 172.31.0.0/16, away from the low end host-local hands out first
    let seed = uuid::Uuid::new_v4().as_u128();
    let v4 = Ipv4Addr::new(
        172,
        31,
        100 + (seed % 150) as u8,
        2 + ((seed >> 8) % 250) as u8,
    );
    let v6_net = format!("rkt-test-v6-{}", unique());
    let v6_subnet = "fd00:110:7::/64";
    struct Case<'a> {
        name: &'a str,
        /// The network, and its configuration when it is no built-in.
        net: &'a str,
        conf: Option<Value>,
        ip: IpAddr,
        mask: &'a str,
        /// `ip -o addr`'s words for the address: `inet 172.31.…/` or `inet6 fd00:…/64`.
        shown: String,
    }
    let cases = [
        Case {
            name: "IPv4 on the built-in default-restricted",
            net: "default-restricted",
            conf: None,
            ip: v4.into(),
            mask: "255.255.0.0",
            shown: format!("inet {v4}/"),
        },
        Case {
            name: "IPv6 on a user network",
            net: &v6_net,
            conf: Some(json!({
                "cniVersion": "1.0.0",
                "name": v6_net,
                "plugins": [{
                    "type": "ptp",
                    "ipMasq": false,
                    "ipam": {"type": "host-local", "subnet": v6_subnet}
                }]
            })),
            ip: "fd00:110:7::5".parse().unwrap(),
            mask: "ffff:ffff:ffff:ffff::",
            shown: "inet6 fd00:110:7::5/64".to_string(),
        },
    ];
    for case in cases {
        let name = case.name;
        if case.ip.is_ipv6() && !Path::new("/proc/sys/net/ipv6").exists() {
            eprintln!("{name}: skipped, no IPv6 in this kernel");
            continue;
        }
        let w = NetWorld::new();
        let ns = TestNetns::new();
        // A user network's host-local directory goes with the case; a built-in's is shared.
        let (ctx, _dirs) = match &case.conf {
            Some(conf) => {
                w.conf("10-pinned.conflist", conf.clone());
                let ctx = w.leak_ctx().network(case.net).subnet(v6_subnet);
                (ctx, HostLocalDirs(vec![case.net.to_string()]))
            }
            None => (w.leak_ctx().shared_network(case.net), HostLocalDirs(vec![])),
        };
        let pod_dir = w.pod_dir();
        let pod = w.pod(&pod_dir, Some(&ns.path));
        let _guard = TeardownGuard(pod);
        let mut g = leaks::Guard::new(ctx);

        let arg = format!("{}:IP={}", case.net, case.ip);
        let nets = networking::setup(&pod, &real_opts(&w, &[&arg]))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let t = trace(&w.uuid, &nets);
        guard_links(&mut g, &t.ifaces);
        assert_eq!(nets[0].ip, Some(case.ip), "{name}");
        assert_eq!(nets[0].mask, Some(case.mask.parse().unwrap()), "{name}");
        let addrs = ns.addrs();
        assert!(
            addrs
                .lines()
                .any(|l| l.contains(" eth0 ") && l.contains(&case.shown)),
            "{name}: {} not on eth0:\n{addrs}",
            case.ip
        );
        assert!(
            t.chains.is_empty(),
            "{name}: the network must not masquerade"
        );

        networking::teardown(&pod).unwrap();
        g.check();
    }
}

#[test]
fn all_sets_up_user_networks_and_both_builtins_and_dns_comes_from_the_result() {
    test_kit::require_root!();
    let w = NetWorld::new();
    let ns = TestNetns::new();
    let name = format!("rkt-test-all-{}", unique());
    let _dirs = HostLocalDirs(vec![name.clone()]);
    let subnet = "10.110.8.0/24";
    let mut conf = ptp_net(&name, "ptp", subnet);
    // ptp hands the configured DNS settings back in its result
    conf["plugins"][0]["dns"] = json!({"nameservers": ["192.0.2.53"], "search": ["pods.example"]});
    w.conf("10-user.conflist", conf);
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let mut g = leaks::Guard::new(
        w.leak_ctx()
            .network(&name)
            .subnet(subnet)
            .shared_network("default")
            .shared_network("default-restricted"),
    );

    let nets = networking::setup(&pod, &real_opts(&w, &["all"])).unwrap();
    let t = trace(&w.uuid, &nets);
    guard_links(&mut g, &t.ifaces);
    let names: Vec<_> = nets
        .iter()
        .map(|n| (n.net_name.as_str(), n.if_name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (name.as_str(), "eth0"),
            ("default-restricted", "eth1"),
            ("default", "eth2")
        ]
    );
    assert!(in_subnet(nets[0].ip4().unwrap(), subnet));
    assert!(in_subnet(nets[1].ip4().unwrap(), "172.31.0.0/16"));
    assert!(in_subnet(nets[2].ip4().unwrap(), "172.16.28.0/24"));
    for n in &nets {
        assert_addr_on(&ns, &n.if_name, n.ip4().unwrap());
    }
    assert_eq!(
        fs::read_to_string(pod_dir.join("etc/resolv.conf")).unwrap(),
        format!("# Generated by rkt from network {name}\n\nsearch pods.example\nnameserver 192.0.2.53\n")
    );

    networking::teardown(&pod).unwrap();
    g.check();
    assert_eq!(ns.links(), ["lo"]);
}

#[test]
fn concurrent_pods_on_default_get_distinct_addresses_and_all_come_down() {
    test_kit::require_root!();
    const PODS: usize = 4;
    let worlds: Vec<NetWorld> = (0..PODS).map(|_| NetWorld::new()).collect();
    let namespaces: Vec<TestNetns> = (0..PODS).map(|_| TestNetns::new()).collect();
    let pod_dirs: Vec<PathBuf> = worlds.iter().map(NetWorld::pod_dir).collect();
    let _guards: Vec<TeardownGuard> = worlds
        .iter()
        .zip(&pod_dirs)
        .zip(&namespaces)
        .map(|((w, d), ns)| TeardownGuard(w.pod(d, Some(&ns.path))))
        .collect();
    let mut leak_guards: Vec<leaks::Guard> = worlds
        .iter()
        .map(|w| leaks::Guard::new(w.leak_ctx().shared_network("default")))
        .collect();
    let results: Vec<(Vec<NetInfo>, Trace)> = std::thread::scope(|s| {
        let handles: Vec<_> = worlds
            .iter()
            .zip(&namespaces)
            .map(|(w, ns)| {
                s.spawn(move || {
                    let pod_dir = w.pod_dir();
                    let pod = w.pod(&pod_dir, Some(&ns.path));
                    let nets = networking::setup(&pod, &real_opts(w, &["default"])).unwrap();
                    let t = trace(&w.uuid, &nets);
                    (nets, t)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ips: Vec<Ipv4Addr> = results.iter().map(|(n, _)| n[0].ip4().unwrap()).collect();
    for ((nets, _), ns) in results.iter().zip(&namespaces) {
        assert_addr_on(ns, "eth0", nets[0].ip4().unwrap());
    }
    for (g, (_, t)) in leak_guards.iter_mut().zip(&results) {
        guard_links(g, &t.ifaces);
    }
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), PODS, "addresses handed out twice: {ips:?}");

    std::thread::scope(|s| {
        for (w, ns) in worlds.iter().zip(&namespaces) {
            s.spawn(move || {
                let pod_dir = w.pod_dir();
                networking::teardown(&w.pod(&pod_dir, Some(&ns.path))).unwrap();
            });
        }
    });
    for g in &leak_guards {
        g.check();
    }
}
