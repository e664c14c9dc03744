//! `--port`: a service in a pod reached from the host through the built-in `default`
//! network and through a user bridge network with portmap, `rkt status` showing the
//! forwarded ports, a second pod refused the same host port, and no firewall rule or chain
//! of the pod left after it exits (root only). Plus the errors found before anything is set
//! up (no root needed: no pod is created). Every test ends with the leak checker; user
//! networks have names unique to the test and subnets of their own (10.112.<n>.0/24).

use crate::{leaks, net_support, pod_support, support};

use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use net_support::{HostLocalDirs, NetWorld, TeardownGuard, TestNetns};
use pod_support::{assert_no_lease, assert_no_netns, held_port, World};
use rkt::networking::{self, NetError, NetFailure, PortMapping};
use serde_json::json;
use test_kit::{wait_for, PATIENCE};

/// The pod's app: answers every connection on ports 80 and 8080 with a line naming the port,
/// and echoes datagrams on UDP port 53 with `udp ` before them.
const SERVER: &str = r#"
import socket, threading
def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(16)
    while True:
        c, _ = s.accept()
        c.sendall(b"hello from the pod on %d\n" % port)
        c.close()
def echo_udp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    while True:
        data, peer = s.recvfrom(512)
        s.sendto(b"udp " + data, peer)
threading.Thread(target=serve, args=(8080,), daemon=True).start()
threading.Thread(target=echo_udp, args=(53,), daemon=True).start()
serve(80)
"#;

/// What the service behind `addr` says, retrying until the pod's server listens.
fn fetch(addr: SocketAddr) -> String {
    wait_for("the pod's service", PATIENCE, || {
        let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut got = String::new();
        conn.read_to_string(&mut got).ok()?;
        (!got.is_empty()).then_some(got)
    })
}

/// The answer of the pod's UDP echo behind `addr` to `ping`, retrying until it comes.
fn echo_udp(addr: SocketAddr) -> String {
    wait_for("the pod's UDP echo", PATIENCE, || {
        let sock = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .ok()?;
        sock.send_to(b"ping", addr).ok()?;
        let mut buf = [0u8; 64];
        let (n, _) = sock.recv_from(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    })
}

/// The `nat` table as `iptables -w -t nat -S` prints it.
fn nat_rules() -> String {
    let out = Command::new("iptables")
        .args(["-w", "-t", "nat", "-S"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The portmap chains (`CNI-DN-…`) that rules tagged with the pod's UUID jump to.
fn dnat_chains(uuid: &str) -> Vec<String> {
    nat_rules()
        .lines()
        .filter(|l| l.contains(uuid))
        .filter_map(|l| l.split(" -j ").nth(1))
        .map(|t| t.split_whitespace().next().unwrap_or("").to_string())
        .filter(|c| c.starts_with("CNI-DN-"))
        .collect()
}

/// Asserts that no rule mentions the pod and none of `chains` exists any more (the chains
/// portmap shares between pods, `CNI-HOSTPORT-*`, may stay, empty of this pod's rules).
fn assert_no_rules(uuid: &str, chains: &[String]) {
    let rules = nat_rules();
    let left: Vec<&str> = rules.lines().filter(|l| l.contains(uuid)).collect();
    assert!(left.is_empty(), "rules of pod {uuid} left: {left:#?}");
    for chain in chains {
        assert!(
            !rules.lines().any(|l| l == format!("-N {chain}")),
            "chain {chain} left:\n{rules}"
        );
    }
}

/// The host-side gateway address the pod's first network result names.
fn gateway(world: &World, uuid: &str) -> String {
    let info: serde_json::Value = serde_json::from_slice(
        &fs::read(world.path(&format!("data/pods/{uuid}/net-info.json"))).unwrap(),
    )
    .unwrap();
    info[0]["result"]["ips"][0]["gateway"]
        .as_str()
        .expect("a gateway in the result")
        .to_string()
}

#[test]
fn port_on_default_reaches_the_pod_shows_in_status_and_is_exclusive() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let (held_local, held_any, held_udp) = (held_port(), held_port(), held_port());
    let (local, any, udp) = (held_local.port, held_any.port, held_udp.port);
    let (uuid, index) = world.spawn_run(&[
        &format!("--port=127.0.0.1:{local}:80"),
        &format!("--port={any}:8080/tcp"),
        &format!("--port={udp}:53/udp"),
        "--",
        "python3",
        "-c",
        SERVER,
    ]);
    world.wait_running(&uuid);
    let chains = dnat_chains(&uuid);
    assert!(!chains.is_empty(), "no portmap chain for {uuid}");

    assert_eq!(
        fetch(SocketAddr::from(([127, 0, 0, 1], local))),
        "hello from the pod on 80\n"
    );
    assert_eq!(
        fetch(SocketAddr::from(([127, 0, 0, 1], any))),
        "hello from the pod on 8080\n"
    );
    let gw: std::net::IpAddr = gateway(&world, &uuid).parse().unwrap();
    assert_eq!(
        fetch(SocketAddr::new(gw, any)),
        "hello from the pod on 8080\n"
    );
    assert_eq!(
        echo_udp(SocketAddr::from(([127, 0, 0, 1], udp))),
        "udp ping"
    );

    world
        .rkt(&["status", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!(
            "\nports=tcp:127.0.0.1:{local}->80, tcp:{any}->8080, udp:{udp}->53\n"
        ));
    let st = world.status_json(&uuid);
    assert_eq!(
        st["ports"],
        json!([
            {"hostPort": local, "containerPort": 80, "protocol": "tcp", "hostIP": "127.0.0.1"},
            {"hostPort": any, "containerPort": 8080, "protocol": "tcp"},
            {"hostPort": udp, "containerPort": 53, "protocol": "udp"}
        ])
    );

    // Another pod cannot take a forwarded host port; the message names the pod holding it.
    let other = world
        .rkt(&["run", &format!("--port={local}:80"), "--", "true"])
        .run();
    other.assert_failure().assert_stderr_contains(&format!(
        "host port tcp:{local} is already forwarded by pod {uuid}"
    ));
    // The same port over UDP is another port.
    world
        .rkt(&["run", &format!("--port={local}:80/udp"), "--", "true"])
        .run()
        .assert_success();

    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    assert_no_netns(&uuid);
    assert_no_lease("default", &uuid);
    assert_no_rules(&uuid, &chains);
    // Exited pods forward nothing.
    assert!(!world
        .rkt(&["status", &uuid])
        .run()
        .stdout()
        .contains("ports="));
    // And the port is free again.
    world
        .rkt(&["run", &format!("--port={local}:80"), "--", "true"])
        .run()
        .assert_success();
}

/// A bridge the test made, deleted on drop even when the test fails; and host-local's
/// state directory of the test network.
struct BridgeGuard {
    bridge: String,
    net: String,
}

impl BridgeGuard {
    /// Deletes the bridge (the bridge plugin leaves it after the last DEL, by design).
    fn delete_bridge(&self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
    }
}

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        self.delete_bridge();
        let _ = fs::remove_dir_all(format!("/var/lib/cni/networks/{}", self.net));
    }
}

#[test]
fn port_on_a_user_bridge_network_with_portmap_through_run_prepared() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let seed = uuid::Uuid::new_v4().as_u128();
    let guard = BridgeGuard {
        bridge: format!("rktpt{:x}", seed as u32 & 0xfffff),
        net: format!("ports-{:x}", seed as u32),
    };
    let subnet = "10.112.1.0/24";
    let g = leaks::Guard::new(
        world
            .leak_ctx()
            .network(&guard.net)
            .subnet(subnet)
            .link(&guard.bridge),
    );
    let conf_dir = world.path("local/net.d");
    fs::create_dir_all(&conf_dir).unwrap();
    fs::write(
        conf_dir.join("10-lan.conflist"),
        json!({
            "cniVersion": "1.0.0",
            "name": guard.net,
            "plugins": [
                {"type": "bridge", "bridge": guard.bridge, "isGateway": true,
                 "ipam": {"type": "host-local", "subnet": subnet}},
                {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let held = held_port();
    let port = held.port;
    // Through prepare and run-prepared, which takes the network options.
    let prepared = world.rkt(&["prepare", "--", "python3", "-c", SERVER]).run();
    prepared.assert_success();
    let uuid = prepared.stdout().trim().to_string();
    let runner = world
        .command(&[
            "run-prepared",
            &format!("--net={}", guard.net),
            &format!("--port=127.0.0.1:{port}:80"),
            &uuid,
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut runner = Runs(vec![(world.path("unused"), runner)]);
    world.wait_running(&uuid);
    let chains = dnat_chains(&uuid);
    assert!(!chains.is_empty(), "no portmap chain for {uuid}");
    assert_eq!(
        fetch(SocketAddr::from(([127, 0, 0, 1], port))),
        "hello from the pod on 80\n"
    );
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_stdout_contains(&format!("ports=tcp:127.0.0.1:{port}->80\n"));
    world.rkt(&["stop", &uuid]).run().assert_success();
    assert_eq!(runner.0[0].1.wait().unwrap().code(), Some(143));
    assert_no_netns(&uuid);
    assert_no_lease(&guard.net, &uuid);
    assert_no_rules(&uuid, &chains);
    guard.delete_bridge();
    g.check();
}

#[test]
fn port_errors_come_before_anything_is_set_up() {
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let conf_dir = world.path("local/net.d");
    fs::create_dir_all(&conf_dir).unwrap();
    fs::write(
        conf_dir.join("10-plain.conf"),
        json!({"cniVersion": "1.0.0", "name": "plain", "type": "ptp",
               "ipam": {"type": "host-local", "subnet": "10.254.254.0/24"}})
        .to_string(),
    )
    .unwrap();
    let cases: [(&[&str], &str); 7] = [
        (
            &["--net=host", "--port=8080:80"],
            "--port cannot be used with --net=host",
        ),
        (
            &["--net=none", "--port=8080:80"],
            "--port cannot be used with --net=none",
        ),
        (
            &["--net=plain", "--port=8080:80"],
            "none of the selected networks (plain) has a plugin declaring the \"portMappings\" capability",
        ),
        (&["--port=80"], "--port=\"80\": missing the host port"),
        (
            &["--port=8080:80/sctp"],
            "--port=\"8080:80/sctp\": unknown protocol \"sctp\"",
        ),
        (
            &["--port=host:8080:80"],
            "--port=\"host:8080:80\": \"host\" is not an IP address",
        ),
        (
            &["--port=8080:80", "--port=0.0.0.0:8080:81"],
            "--port: host port tcp:8080 is given twice",
        ),
    ];
    for (args, message) in cases {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--", "true"]);
        world
            .rkt(&full)
            .run()
            .assert_failure()
            .assert_stderr_contains(message);
    }
    // Nothing was created, not even an exited pod.
    assert!(world.pods().is_empty(), "{:?}", world.pods());

    // run-prepared checks the same before touching the prepared pod.
    let out = world.rkt(&["prepare", "--", "true"]).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    world
        .rkt(&["run-prepared", "--net=none", "--port=8080:80", &uuid])
        .run()
        .assert_failure()
        .assert_stderr_contains("--port cannot be used with --net=none");
    let st = world.rkt(&["status", &uuid]).run();
    st.assert_success()
        .assert_stdout_contains("state=prepared\n");
}

#[test]
fn teardown_removes_portmap_rules_even_when_portmap_is_gone() {
    test_kit::require_root!();
    let w = NetWorld::new();
    for p in ["ptp", "host-local", "portmap"] {
        symlink(Path::new("/usr/lib/cni").join(p), w.plugin_dir().join(p)).unwrap();
    }
    let net = format!("pm-{}", test_kit::unique());
    let _leases = HostLocalDirs(vec![net.clone()]);
    let subnet = "10.112.2.0/24";
    w.conf(
        "10-pm.conflist",
        json!({"cniVersion": "1.0.0", "name": net, "plugins": [
            {"type": "ptp", "ipam": {"type": "host-local", "subnet": subnet}},
            {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}
        ]}),
    );
    let ns = TestNetns::new();
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&ns.path));
    let _guard = TeardownGuard(pod);
    let g = leaks::Guard::new(w.leak_ctx().network(&net).subnet(subnet));
    let mut opts = w.opts(&[&net]);
    let held = held_port();
    let port = held.port;
    opts.ports = vec![PortMapping::parse(&format!("127.0.0.1:{port}:80")).unwrap()];
    let nets = networking::setup(&pod, &opts).unwrap();
    assert_eq!(
        networking::record::forwarded_ports(&nets),
        opts.ports,
        "the record names the ports"
    );
    let chains = dnat_chains(&w.uuid);
    assert_eq!(chains.len(), 1, "{chains:?}");

    // portmap vanished: ptp is still deleted, and the sweep removes portmap's jump and chain.
    fs::remove_file(w.plugin_dir().join("portmap")).unwrap();
    match networking::teardown(&pod) {
        Err(NetError::Teardown { failures, .. }) => assert!(
            matches!(&failures[..], [NetFailure::PluginMissing { plugins, .. }] if plugins == &["portmap"]),
            "{failures:?}"
        ),
        other => panic!("expected the missing portmap to be reported, got {other:?}"),
    }
    assert_no_rules(&w.uuid, &chains);
    // Once it is back, teardown completes (the record kept the network for that).
    symlink("/usr/lib/cni/portmap", w.plugin_dir().join("portmap")).unwrap();
    networking::teardown(&pod).unwrap();
    assert!(networking::load_record(&pod_dir).unwrap().is_empty());
    assert_no_rules(&w.uuid, &chains);
    g.check();
}

/// Background `rkt run`s with the files their UUIDs go to; killed on drop if still running
/// (the world's gc then cleans up after them).
struct Runs(Vec<(std::path::PathBuf, std::process::Child)>);

impl Drop for Runs {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn pods_started_at_once_on_one_host_port_get_it_once() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let held = held_port();
    let port = held.port;
    let port_flag = format!("--port={port}:80");
    let mut children = Runs(
        (0..4)
            .map(|i| {
                let file = world.path(&format!("uuid-race-{i}"));
                let save = format!("--uuid-file-save={}", file.display());
                let child = world
                    .command(&["run", &save, &port_flag, "--", "sleep", "100"])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                (file, child)
            })
            .collect(),
    );
    // Three give up at setup; the one left forwards the port.
    let mut failed = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while failed.len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "more than one pod kept port {port}"
        );
        let done = children
            .0
            .iter_mut()
            .position(|(_, c)| c.try_wait().unwrap().is_some());
        match done {
            Some(i) => failed.push(children.0.remove(i)),
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let (winner_file, _) = &children.0[0];
    let winner_file = winner_file.clone();
    let winner_uuid = wait_for("the winner's UUID", PATIENCE, || {
        fs::read_to_string(&winner_file)
            .ok()
            .filter(|s| !s.is_empty())
    });
    world.wait_running(&winner_uuid);
    for (_, child) in failed {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(254), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "host port tcp:{port} is already forwarded by pod {winner_uuid}"
            )),
            "{stderr}"
        );
    }
    world.rkt(&["stop", &winner_uuid]).run().assert_success();
    assert_eq!(children.0[0].1.wait().unwrap().code(), Some(143));
    assert_no_netns(&winner_uuid);
    assert_no_rules(&winner_uuid, &[]);
}

#[test]
fn ports_go_to_the_first_forwarding_network_only_and_are_recorded_there() {
    let w = NetWorld::new();
    for p in ["plain", "fwd"] {
        w.plugin(p, json!({}));
    }
    let capable = |name: &str| {
        json!({"cniVersion": "1.0.0", "name": name, "plugins": [
            {"type": "plain"},
            {"type": "fwd", "capabilities": {"portMappings": true}}
        ]})
    };
    w.conf(
        "05-a.conflist",
        json!({"cniVersion": "1.0.0", "name": "a", "plugins": [{"type": "plain"}]}),
    );
    w.conf("10-b.conflist", capable("b"));
    w.conf("20-c.conflist", capable("c"));
    let netns = w.root.path().join("netns");
    fs::write(&netns, "").unwrap();
    let pod_dir = w.pod_dir();
    let pod = w.pod(&pod_dir, Some(&netns));
    let _guard = TeardownGuard(pod);
    let _g = leaks::Guard::new(w.leak_ctx());
    let mut opts = w.opts(&["a,b,c"]);
    opts.ports = vec![PortMapping::parse("127.0.0.1:8080:80/udp").unwrap()];
    let nets = networking::setup(&pod, &opts).unwrap();
    let mapping = json!([{"hostPort": 8080, "containerPort": 80, "protocol": "udp",
                          "hostIP": "127.0.0.1"}]);
    // Only fwd on b gets runtimeConfig; plugins without the capability never do.
    let with_runtime: Vec<(String, String)> = w
        .calls()
        .iter()
        .filter(|c| c.command == "ADD" && c.stdin.get("runtimeConfig").is_some())
        .map(|c| {
            (
                c.plugin.clone(),
                c.stdin["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(with_runtime, [("fwd".to_string(), "b".to_string())]);
    let fwd_add = w
        .calls()
        .into_iter()
        .find(|c| c.command == "ADD" && c.plugin == "fwd")
        .unwrap();
    assert_eq!(fwd_add.stdin["runtimeConfig"]["portMappings"], mapping);
    let recorded: Vec<bool> = nets.iter().map(|n| !n.capability_args.is_empty()).collect();
    assert_eq!(recorded, [false, true, false]);
    assert_eq!(networking::record::forwarded_ports(&nets), opts.ports);
    // DEL gets the same mappings, from the record.
    networking::teardown(&pod).unwrap();
    let fwd_del = w
        .calls()
        .into_iter()
        .find(|c| c.command == "DEL" && c.plugin == "fwd" && c.stdin["name"] == "b")
        .unwrap();
    assert_eq!(fwd_del.stdin["runtimeConfig"]["portMappings"], mapping);
}

/// A pod whose runner was killed keeps forwarding its host port until something releases
/// it; the next `rkt run` that wants the port releases the dead pod on the way (waiting for
/// the background releaser when one is at it) and gets the port.
#[test]
fn a_dead_runners_port_goes_to_the_next_run_that_wants_it() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let held = held_port();
    let port = held.port;
    let (uuid, index) = world.spawn_run(&[&format!("--port={port}:80"), "--", "sleep", "1000"]);
    let init = world.wait_running(&uuid);
    let chains = dnat_chains(&uuid);
    assert!(!chains.is_empty(), "no portmap chain for {uuid}");
    world.child(index).kill().unwrap();
    world.wait_child(index);
    pod_support::wait_gone(init);
    // Nothing ran since: the rules are still there.
    assert_eq!(dnat_chains(&uuid), chains);
    world
        .rkt(&["run", &format!("--port={port}:80"), "--", "true"])
        .run()
        .assert_success();
    assert_no_netns(&uuid);
    assert_no_rules(&uuid, &chains);
    world.rkt(&["gc"]).run().assert_success();
}
