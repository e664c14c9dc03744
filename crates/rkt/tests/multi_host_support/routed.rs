//! The routed multi-host setup of docs/multi-host.md ("a pod subnet per host"): each host a
//! bridge with its own pod subnet and routes to the other hosts' subnets. Shared by the
//! multi-host tests and the Nomad cluster test.

use serde_json::{json, Value};

use super::{Host, Lan};

/// The routed pod subnet of host `n`: `10.<x>.<n>.0/24`.
pub fn pod_subnet(x: u8, n: u8) -> String {
    format!("10.{x}.{n}.0/24")
}

/// The part of host `n`'s pod subnet that host-local hands out: `10.<x>.<n>.64/26` (the
/// leak checker watches it; the gateway `.1` and the subnet's own routes are host
/// configuration, outside it).
pub fn pod_range(x: u8, n: u8) -> String {
    format!("10.{x}.{n}.64/26")
}

/// The network configuration of host `n` in the routed setup: a bridge whose address is the
/// pods' gateway, no masquerading, host-local handing out [`pod_range`] of
/// `10.<x>.<n>.0/24` with a route to every pod subnet `10.<x>.0.0/16` through the bridge,
/// leases kept in the host's own directory.
pub fn routed_conf(host: &Host, net: &str, x: u8) -> Value {
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
pub fn routed_hosts(lan: &Lan, net: &str, x: u8) -> Vec<Host> {
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
