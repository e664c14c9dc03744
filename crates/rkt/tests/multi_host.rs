//! Pods across hosts (docs/multi-host.md, tested): three simulated hosts (network
//! namespaces on one simulated LAN, `192.0.2.0/24`), each running the real `rkt` with its own
//! `--dir`, `--local-config` and network configuration, and pods on one host reaching pods on
//! the others by TCP and UDP with their real addresses:
//! - routed: a `bridge` + `host-local` network per host with that host's pod subnet
//!   (`10.201.<n>.0/24`), and routes on each host to the other hosts' pod subnets;
//! - one L2 segment with DHCP: a `macvlan` network on each host's LAN interface with the
//!   `dhcp` IPAM plugin, the CNI `dhcp` daemon on each host, `dnsmasq` on the LAN;
//! - the same host configuration given by `--net-conf-dir`, by `net-conf` in `paths.d`, and
//!   in `<local-config>/net.d` (each in turn the only place it is) gives the same cluster;
//! - without its `dhcp` daemon, `rkt run` fails before the app starts, saying how to start
//!   the daemon, and leaves nothing behind.
//!
//! Root only. Every address lives inside the test's own namespaces; each host's leak checker
//! runs inside that host's namespace.

mod leaks;
mod multi_host_support;
mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

use multi_host_support::dhcp::{DhcpDaemon, Dnsmasq, DHCP_POOL};
use multi_host_support::probe::{self, Received};
use multi_host_support::routed::{routed_conf, routed_hosts};
use multi_host_support::{write_conf, Host, Lan};
use serde_json::{json, Value};
use test_kit::unique;

/// How long a listener waits for the traffic a pod's app sends (a deadline, not a timing
/// assertion).
const TRAFFIC: Duration = Duration::from_secs(10);

/// Starts sleeping pods on hosts 2 and 3 at once, with `args_of(host)` (network selection
/// and directories), and opens the probe's listeners in their namespaces; returns each
/// pod's address and listeners.
fn servers(
    hosts: &mut [Host],
    args_of: impl Fn(&Host) -> Vec<String>,
) -> Vec<(Ipv4Addr, probe::Listeners)> {
    let starting: Vec<_> = hosts[1..]
        .iter_mut()
        .map(|host| {
            let mut args = args_of(host);
            args.extend(["--", "sleep", "600"].map(String::from));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            host.start(&args)
        })
        .collect();
    hosts[1..]
        .iter_mut()
        .zip(starting)
        .map(|(host, starting)| {
            let uuid = host.wait_started(starting);
            let ip = host.pod_ip(&uuid);
            let listeners = probe::listen(&rkt::netns::pod_netns_path(&uuid), 7000);
            (ip, listeners)
        })
        .collect()
}

/// Runs, on `host`, a pod whose app sends `tag` to `targets` by TCP and UDP; asserts it
/// succeeded and returns the pod's UUID and address.
fn send_from(host: &Host, args: &[&str], tag: &str, targets: &[Ipv4Addr]) -> (String, Ipv4Addr) {
    let app = probe::sender_app(tag, targets, 7000);
    let mut full: Vec<&str> = args.to_vec();
    full.push("--");
    full.extend(app.iter().map(String::as_str));
    let (out, uuid) = host.run(&full);
    out.assert_success();
    let ip = host.pod_ip(&uuid);
    (uuid, ip)
}

/// Asserts `listeners` got `tag` by TCP and by UDP from `from` (the sender's own address:
/// nothing translated it on the way).
fn assert_received(listeners: &probe::Listeners, tag: &str, from: Ipv4Addr) {
    let want = Received {
        from: IpAddr::V4(from),
        payload: tag.to_string(),
    };
    assert_eq!(listeners.tcp(TRAFFIC), want, "TCP");
    assert_eq!(listeners.udp(TRAFFIC), want, "UDP");
}

/// Asserts `rkt list` on `host` shows exactly the pods of its own data dir.
fn assert_lists_own_pods(host: &Host, others: &[&str]) {
    let out = host.rkt(&["list", "--full", "--no-legend"]).run();
    out.assert_success();
    let mut listed: Vec<String> = out
        .stdout()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let mut own = host.pods();
    listed.sort();
    own.sort();
    assert_eq!(listed, own, "host {}: rkt list", host.n);
    for uuid in others {
        assert!(
            !listed.iter().any(|l| l == uuid),
            "host {} lists {uuid}",
            host.n
        );
    }
}

fn in_subnet(ip: Ipv4Addr, x: u8, n: u8) -> bool {
    ip.octets()[..3] == [10, x, n]
}

#[test]
fn routed_pods_on_three_hosts_reach_each_other_without_nat() {
    test_kit::require_root!();
    let lan = Lan::new();
    let net = format!("pods-{}", unique());
    let mut hosts = routed_hosts(&lan, &net, 201);
    for host in &hosts {
        write_conf(
            &host.path("net.d"),
            "10-pods.conflist",
            &routed_conf(host, &net, 201),
        );
    }
    let flags = |h: &Host| {
        vec![
            format!("--net-conf-dir={}", h.path("net.d").display()),
            format!("--net={net}"),
        ]
    };

    let on = servers(&mut hosts, flags);
    let [(ip2, on2), (ip3, on3)] = &on[..] else {
        unreachable!()
    };
    let (ip2, ip3) = (*ip2, *ip3);
    assert!(in_subnet(ip2, 201, 2), "host 2's pod got {ip2}");
    assert!(in_subnet(ip3, 201, 3), "host 3's pod got {ip3}");

    let f1 = flags(&hosts[0]);
    let (_, ip1) = send_from(&hosts[0], &[&f1[0], &f1[1]], "from-h1", &[ip2, ip3]);
    assert!(in_subnet(ip1, 201, 1), "host 1's pod got {ip1}");
    assert_received(on2, "from-h1", ip1);
    assert_received(on3, "from-h1", ip1);

    let all: Vec<Vec<String>> = hosts.iter().map(Host::pods).collect();
    for (i, host) in hosts.iter().enumerate() {
        let others: Vec<&str> = (0..3)
            .filter(|j| *j != i)
            .flat_map(|j| all[j].iter().map(String::as_str))
            .collect();
        assert_lists_own_pods(host, &others);
    }
    for host in &mut hosts {
        host.finish();
    }
}

/// The network configuration of a host on the DHCP segment: macvlan on the host's LAN
/// interface, addresses from the LAN's DHCP server through this host's `dhcp` daemon.
fn dhcp_conf(net: &str, socket: &Path) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": net,
        "plugins": [{
            "type": "macvlan",
            "master": "lan0",
            "mode": "bridge",
            "ipam": {"type": "dhcp", "daemonSocketPath": socket}
        }]
    })
}

fn in_pool(ip: Ipv4Addr) -> bool {
    ip.octets()[..3] == [192, 0, 2] && (128..192).contains(&ip.octets()[3])
}

#[test]
fn dhcp_pods_on_one_segment_get_distinct_leases_from_one_server_and_release_them() {
    test_kit::require_root!();
    let lan = Lan::new();
    let dnsmasq = Dnsmasq::start(&lan);
    let net = format!("lan-{}", unique());
    let mut hosts: Vec<Host> = (1..=3).map(|n| Host::new(&lan, n)).collect();
    for host in &mut hosts {
        let daemon = DhcpDaemon::start(host);
        write_conf(
            &host.path("net.d"),
            "10-lan.conflist",
            &dhcp_conf(&net, &daemon.socket),
        );
        let ctx = host.leak_ctx().network(&net).subnet(DHCP_POOL);
        host.watch(ctx);
    }
    let flags = |h: &Host| {
        vec![
            format!("--net-conf-dir={}", h.path("net.d").display()),
            format!("--net={net}"),
        ]
    };

    let on = servers(&mut hosts, flags);
    let [(ip2, on2), (ip3, on3)] = &on[..] else {
        unreachable!()
    };
    let (ip2, ip3) = (*ip2, *ip3);
    let f1 = flags(&hosts[0]);
    let (_, ip1) = send_from(&hosts[0], &[&f1[0], &f1[1]], "from-h1", &[ip2, ip3]);
    assert_received(on2, "from-h1", ip1);
    assert_received(on3, "from-h1", ip1);

    let mut ips = vec![ip1, ip2, ip3];
    assert!(ips.iter().all(|ip| in_pool(*ip)), "addresses {ips:?}");
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), 3, "three distinct addresses");
    dnsmasq.wait_until("an ACK logged and a lease for each pod", |d| {
        let log = d.log();
        let leased = d.leased();
        ips.iter()
            .all(|ip| log.contains(&format!("DHCPACK(br0) {ip} ")))
            && leased.contains(&ip2)
            && leased.contains(&ip3)
    });

    for host in &mut hosts {
        host.finish();
    }
    dnsmasq.wait_until("a release logged for each pod and no lease left", |d| {
        let log = d.log();
        d.leased().is_empty()
            && ips
                .iter()
                .all(|ip| log.contains(&format!("DHCPRELEASE(br0) {ip} ")))
    });
}

#[test]
fn without_its_dhcp_daemon_rkt_run_fails_before_the_app_saying_how_to_start_it() {
    test_kit::require_root!();
    let lan = Lan::new();
    let mut host = Host::new(&lan, 1);
    let net = format!("lan-{}", unique());
    let socket = DhcpDaemon::socket_of(&host);
    write_conf(
        &host.path("net.d"),
        "10-lan.conflist",
        &dhcp_conf(&net, &socket),
    );
    let ctx = host.leak_ctx().network(&net).subnet(DHCP_POOL);
    host.watch(ctx);
    let links = host.links();

    // Where the app would leave its mark on the host: a volume (the pod's root is the
    // host's, read-only, with a /tmp of its own).
    let out_dir = host.path("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let marker = out_dir.join("the-app-ran");
    let conf = format!("--net-conf-dir={}", host.path("net.d").display());
    let select = format!("--net={net}");
    let volume = format!("--volume=out,kind=host,source={}", out_dir.display());
    let mount = format!("--mount=volume=out,target={}", out_dir.display());
    let marker_arg = marker.display().to_string();
    let (out, uuid) = host.run(&[&conf, &select, &volume, &mount, "--", "touch", &marker_arg]);
    out.assert_failure()
        .assert_stderr_contains("the CNI dhcp daemon is not running")
        .assert_stderr_contains(&format!("`dhcp daemon -socketpath {}`", socket.display()));
    assert!(!marker.exists(), "the app ran");
    assert!(
        !rkt::netns::pod_netns_path(uuid.trim()).exists(),
        "pod netns left"
    );
    assert_eq!(host.links(), links, "links of the host");
    host.finish();
}

/// Where a host's network configuration comes from in
/// [`one_host_configuration_given_three_ways_gives_the_same_cluster`].
#[derive(Debug, Clone, Copy)]
enum Way {
    /// `<local-config>/net.d`, the default.
    LocalNetD,
    /// `net-conf` in `<local-config>/paths.d/net.json`.
    PathsD,
    /// `--net-conf-dir`.
    Flag,
}

/// Puts `conf` where `way` makes rkt find it on `host`, and removes it from where the
/// previous ways put it, so that only `way` can provide it; returns the extra `rkt run`
/// arguments `way` needs.
fn configure(host: &Host, way: Way, conf: &Value) -> Vec<String> {
    let local_net_d = host.path("local/net.d");
    let paths_d = host.path("local/paths.d");
    let site_net_d = host.path("site-net.d");
    for old in [&local_net_d, &paths_d, &site_net_d] {
        let _ = std::fs::remove_dir_all(old);
    }
    match way {
        Way::LocalNetD => {
            write_conf(&local_net_d, "10-pods.conflist", conf);
            vec![]
        }
        Way::PathsD => {
            write_conf(&site_net_d, "10-pods.conflist", conf);
            let paths = json!({
                "rktKind": "paths",
                "rktVersion": "v1",
                "net-conf": site_net_d,
            });
            write_conf(&paths_d, "net.json", &paths);
            vec![]
        }
        Way::Flag => {
            write_conf(&site_net_d, "10-pods.conflist", conf);
            vec![format!("--net-conf-dir={}", site_net_d.display())]
        }
    }
}

#[test]
fn one_host_configuration_given_three_ways_gives_the_same_cluster() {
    test_kit::require_root!();
    let lan = Lan::new();
    let net = format!("pods-{}", unique());
    let mut hosts = routed_hosts(&lan, &net, 202);
    for way in [Way::LocalNetD, Way::PathsD, Way::Flag] {
        let extra: Vec<Vec<String>> = hosts
            .iter()
            .map(|h| configure(h, way, &routed_conf(h, &net, 202)))
            .collect();
        let listed: Vec<String> = hosts
            .iter()
            .zip(&extra)
            .map(|(h, extra)| {
                let mut args = vec!["net", "list"];
                args.extend(extra.iter().map(String::as_str));
                let out = h.rkt(&args).run();
                out.assert_success();
                out.stdout()
            })
            .collect();
        for (h, text) in hosts.iter().zip(&listed) {
            assert!(text.contains(&net), "{way:?}: host {} lists\n{text}", h.n);
        }
        let select = format!("--net={net}");
        let on = servers(&mut hosts, |h| {
            let mut args = extra[usize::from(h.n) - 1].clone();
            args.push(select.clone());
            args
        });
        let [(ip2, on2), (ip3, on3)] = &on[..] else {
            unreachable!()
        };
        let (ip2, ip3) = (*ip2, *ip3);
        let mut args: Vec<&str> = extra[0].iter().map(String::as_str).collect();
        args.push(&select);
        let (pod1, ip1) = send_from(&hosts[0], &args, "three-ways", &[ip2, ip3]);
        assert_received(on2, "three-ways", ip1);
        assert_received(on3, "three-ways", ip1);
        for (ip, n) in [(ip1, 1), (ip2, 2), (ip3, 3)] {
            assert!(in_subnet(ip, 202, n), "{way:?}: host {n}'s pod got {ip}");
        }
        let st = hosts[0].status(&pod1);
        assert_eq!(st["networks"][0]["netName"], net.as_str(), "{way:?}: {st}");
        for host in &mut hosts {
            host.stop_all();
        }
    }
    for host in &mut hosts {
        host.finish();
    }
}
