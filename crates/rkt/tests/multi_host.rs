//! Pods across hosts (docs/multi-host.md, tested): three simulated hosts (network
//! namespaces on one simulated LAN, `192.0.2.0/24`), each running the real `rkt` with its own
//! `--dir`, `--local-config` and network configuration, and pods on one host reaching pods on
//! the others by TCP and UDP with their real addresses:
//! - routed: a `bridge` + `host-local` network per host with that host's pod subnet
//!   (`10.201.<n>.0/24`), and routes on each host to the other hosts' pod subnets;
//! - the same host configuration given by `--net-conf-dir`, by `net-conf` in `paths.d`, and
//!   in `<local-config>/net.d`.
//!
//! Root only. Every address lives inside the test's own namespaces; each host's leak checker
//! runs inside that host's namespace.

mod leaks;
mod multi_host_support;
mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use multi_host_support::probe::{self, Received};
use multi_host_support::{unique, write_conf, Host, Lan};
use serde_json::{json, Value};

/// How long a listener waits for the traffic a pod's app sends (a deadline, not a timing
/// assertion).
const TRAFFIC: Duration = Duration::from_secs(10);

/// The routed pod subnet of host `n`: `10.<x>.<n>.0/24`.
fn pod_subnet(x: u8, n: u8) -> String {
    format!("10.{x}.{n}.0/24")
}

/// The part of host `n`'s pod subnet that host-local hands out: `10.<x>.<n>.64/26` (the
/// leak checker watches it; the gateway `.1` and the subnet's own routes are host
/// configuration, outside it).
fn pod_range(x: u8, n: u8) -> String {
    format!("10.{x}.{n}.64/26")
}

/// The network configuration of host `n` in the routed setup: a bridge whose address is the
/// pods' gateway, no masquerading, host-local handing out `10.<x>.<n>.0/24` with a route to
/// every pod subnet `10.<x>.0.0/16` through the bridge, leases kept in the host's own
/// directory.
fn routed_conf(host: &Host, net: &str, x: u8) -> Value {
    json!({
        "cniVersion": "1.0.0",
        "name": net,
        "plugins": [{
            "type": "bridge",
            "bridge": "cni-pods",
            "isGateway": true,
            "ipMasq": false,
            "ipam": {
                "type": "host-local",
                "ranges": [[{
                    "subnet": pod_subnet(x, host.n),
                    "rangeStart": format!("10.{x}.{}.64", host.n),
                    "rangeEnd": format!("10.{x}.{}.127", host.n),
                }]],
                "routes": [{"dst": format!("10.{x}.0.0/16")}],
                "dataDir": host.path("ipam"),
            }
        }]
    })
}

/// Three hosts on `lan` for the routed setup, each with: forwarding on; the pod bridge
/// `cni-pods` with the gateway address `10.<x>.<n>.1/24` (host configuration: the plugin
/// would create both on first use, but never removes them); a route to every other host's
/// pod subnet through that host's LAN address. Their leak checkers start after this.
fn routed_hosts(lan: &Lan, net: &str, x: u8) -> Vec<Host> {
    let mut hosts: Vec<Host> = (1..=3).map(|n| Host::new(lan, n)).collect();
    for host in &hosts {
        let gateway = format!("10.{x}.{}.1/24", host.n);
        host.netns
            .ip(&["link", "add", "cni-pods", "type", "bridge"]);
        host.netns.ip(&["addr", "add", &gateway, "dev", "cni-pods"]);
        host.netns.ip(&["link", "set", "cni-pods", "up"]);
        host.netns.sysctl("net.ipv4.ip_forward", "1");
        for other in hosts.iter().filter(|o| o.n != host.n) {
            host.netns.ip(&[
                "route",
                "add",
                &pod_subnet(x, other.n),
                "via",
                &Lan::host_addr(other.n).to_string(),
            ]);
        }
    }
    for host in &mut hosts {
        let ctx = host.leak_ctx().network(net).subnet(&pod_range(x, host.n));
        host.watch(ctx);
    }
    hosts
}

/// Starts a sleeping pod on `host` with `args` (network selection and directories) and
/// opens the probe's listeners in its namespace; returns the pod's address and listeners.
fn server(host: &mut Host, args: &[&str]) -> (String, Ipv4Addr, probe::Listeners) {
    let mut full = args.to_vec();
    full.extend(["--", "sleep", "600"]);
    let uuid = host.spawn(&full);
    let ip = host.pod_ip(&uuid);
    let listeners = probe::listen(&rkt::netns::pod_netns_path(&uuid), 7000);
    (uuid, ip, listeners)
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
    require_root!();
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
        [
            format!("--net-conf-dir={}", h.path("net.d").display()),
            format!("--net={net}"),
        ]
    };

    let f2 = flags(&hosts[1]);
    let (pod2, ip2, on2) = server(&mut hosts[1], &[&f2[0], &f2[1]]);
    let f3 = flags(&hosts[2]);
    let (pod3, ip3, on3) = server(&mut hosts[2], &[&f3[0], &f3[1]]);
    assert!(in_subnet(ip2, 201, 2), "host 2's pod got {ip2}");
    assert!(in_subnet(ip3, 201, 3), "host 3's pod got {ip3}");

    let f1 = flags(&hosts[0]);
    let (pod1, ip1) = send_from(&hosts[0], &[&f1[0], &f1[1]], "from-h1", &[ip2, ip3]);
    assert!(in_subnet(ip1, 201, 1), "host 1's pod got {ip1}");
    assert_received(&on2, "from-h1", ip1);
    assert_received(&on3, "from-h1", ip1);

    assert_lists_own_pods(&hosts[0], &[&pod2, &pod3]);
    assert_lists_own_pods(&hosts[1], &[&pod1, &pod3]);
    assert_lists_own_pods(&hosts[2], &[&pod1, &pod2]);
    for host in &mut hosts {
        host.finish();
    }
}
