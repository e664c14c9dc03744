//! A cluster (docs/multi-host.md, "Under Nomad"): one Nomad server on the simulated LAN and
//! three clients, each a simulated host of the routed recipe (its own network namespace,
//! rkt `--dir`, configuration directory naming its own pod subnet in `paths.d`, and routes
//! to the others' subnets). A job of six tasks spreads over them; a task reaches another on
//! another host by its pod address; draining a client moves its tasks and leaves it clean;
//! stopping the job leaves all three clean.

use std::collections::BTreeMap;
use std::fs;

use serde_json::{json, Value};
use test_kit::{unique, wait_for};

use crate::agent::{nomad_binary, rkt_wrapper, Agent, CLIENT_OPTIONS, NOMAD_PATIENCE, RKT_PLUGIN};
use crate::image_common::{busybox_layout, ready, skopeo_copy, Registry};
use crate::multi_host_support::routed::{routed_conf, routed_hosts};
use crate::multi_host_support::{in_netns, write_conf, Host, Lan, LAN_SERVER};

/// The job: six copies of a web server that serves its own allocation ID, spread over the
/// clients, on the routed pod network `net`.
fn six_job(image: &str, net: &str) -> String {
    format!(
        r#"job "six" {{
  datacenters = ["dc1"]
  type = "service"
  group "web" {{
    count = 6
    spread {{
      attribute = "${{node.unique.name}}"
    }}
    task "serve" {{
      driver = "rkt"
      config {{
        image = "{image}"
        args = ["echo $NOMAD_ALLOC_ID > /local/id && exec httpd -f -p 80 -h /local"]
        net = ["{net}"]
      }}
      resources {{
        cpu = 50
        memory = 32
      }}
    }}
  }}
}}
"#
    )
}

/// Running allocations of `job` by the name of the node they run on.
fn placement(server: &Agent, job: &str) -> BTreeMap<String, Vec<String>> {
    let nodes: BTreeMap<String, String> = server
        .get("/v1/nodes")
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["ID"].as_str().unwrap().to_string(),
                n["Name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for a in server.allocs(job) {
        if a["ClientStatus"] == "running" && a["DesiredStatus"] == "run" {
            let node = nodes[a["NodeID"].as_str().unwrap()].clone();
            by_node
                .entry(node)
                .or_default()
                .push(a["ID"].as_str().unwrap().to_string());
        }
    }
    by_node
}

/// The pod address of allocation `alloc` on `host`: the running pod whose manifest names the
/// allocation (its volumes do).
fn pod_ip_of(host: &Host, alloc: &str) -> Option<String> {
    let out = host.rkt(&["list", "--full", "--no-legend"]).run();
    out.stdout().lines().find_map(|line| {
        let uuid = line.split_whitespace().next()?;
        if !line.contains("running") {
            return None;
        }
        let manifest = host.rkt(&["cat-manifest", uuid]).run().stdout();
        if !manifest.contains(alloc) {
            return None;
        }
        Some(host.pod_ip(uuid).to_string())
    })
}

#[test]
fn nomad_spreads_rkt_tasks_over_three_hosts() {
    const TEST: &str = "nomad_spreads_rkt_tasks_over_three_hosts";
    if !ready(TEST, &["umoci", "skopeo", "docker-registry"]) {
        return;
    }
    let Some(nomad) = nomad_binary(TEST) else {
        return;
    };
    let lan = Lan::new();
    let net = format!("pods-{}", unique());
    let mut hosts = routed_hosts(&lan, &net, 203);

    // The image, in a registry on the LAN's address (every host reaches it).
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let registry = in_netns(&lan.netns.path, || {
        Registry::start_on(&format!("{LAN_SERVER}:5000"), "")
    });
    let image_ref = format!("{}/test/busybox:v1", registry.addr);
    let pushed = format!("docker://{image_ref}");
    in_netns(&lan.netns.path, {
        let from = format!("oci:{}:v1", layout.display());
        move || skopeo_copy(&from, &pushed)
    });

    // The server, on the LAN.
    let server_dir = work.path().join("server");
    let server_config = format!(
        "data_dir = \"{}\"\nbind_addr = \"{LAN_SERVER}\"\nserver {{\n  enabled = true\n  bootstrap_expect = 1\n}}\n",
        server_dir.display()
    );
    let server = Agent::start(
        &nomad,
        &server_dir,
        &server_config,
        &["-node=server"],
        work.path(),
        Some(&lan.netns.path),
        &format!("{LAN_SERVER}:4646"),
    );

    // Three clients, one per host, each with its own rkt directories and network
    // configuration directory (named in `paths.d`: the wrapper adds only the directories).
    let mut clients = Vec::new();
    for host in &hosts {
        let conf_dir = host.path("net.d");
        write_conf(&conf_dir, "10-pods.conflist", &routed_conf(host, &net, 203));
        let paths_d = host.path("local/paths.d");
        fs::create_dir_all(&paths_d).unwrap();
        fs::write(
            paths_d.join("net.json"),
            json!({"rktKind": "paths", "rktVersion": "v1", "net-conf": conf_dir}).to_string(),
        )
        .unwrap();
        let path = rkt_wrapper(&host.path("bin"), &host.globals());
        let addr = Lan::host_addr(host.n);
        let dir = host.path("nomad");
        let config = format!(
            "data_dir = \"{}\"\nbind_addr = \"{addr}\"\nname = \"host{}\"\n\
             client {{\n  enabled = true\n  servers = [\"{LAN_SERVER}:4647\"]\n  network_interface = \"lan0\"\n  {CLIENT_OPTIONS}\n}}\n{RKT_PLUGIN}\n",
            dir.display(),
            host.n
        );
        clients.push(Agent::start(
            &nomad,
            &dir,
            &config,
            &[],
            &path,
            Some(&host.netns.path),
            &format!("{addr}:4646"),
        ));
    }
    server.wait_rkt_healthy(3);

    // Six tasks, spread over the three clients.
    server.run_job("six", &six_job(&format!("docker://{image_ref}"), &net));
    let spread = server.wait("six", "six tasks running on three hosts", || {
        let p = placement(&server, "six");
        (p.len() == 3 && p.values().map(Vec::len).sum::<usize>() == 6).then_some(p)
    });

    // A task on host 1 reaches a task on host 2 by its pod address, and gets that task's
    // allocation ID back.
    let on = |n: u8| spread[&format!("host{n}")].clone();
    let (from, to) = (on(1)[0].clone(), on(2)[0].clone());
    let to_ip = wait_for(
        "the pod address of a task on host 2",
        NOMAD_PATIENCE,
        || pod_ip_of(&hosts[1], &to),
    );
    assert!(to_ip.starts_with("10.203.2."), "{to_ip}");
    let got = server.ok(&[
        "alloc",
        "exec",
        "-i=false",
        "-t=false",
        &from,
        "/bin/busybox",
        "wget",
        "-q",
        "-O",
        "-",
        &format!("http://{to_ip}/id"),
    ]);
    assert_eq!(got.trim(), to);

    // Draining host 1 moves its tasks to the others; host 1 is left clean.
    let node1 = server
        .get("/v1/nodes")
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["Name"] == "host1")
        .map(|n| n["ID"].as_str().unwrap().to_string())
        .unwrap();
    server.ok(&[
        "node",
        "drain",
        "-enable",
        "-yes",
        "-deadline=60s",
        "-detach",
        &node1,
    ]);
    let moved = server.wait("six", "host 1's tasks on the other hosts", || {
        let p = placement(&server, "six");
        (!p.contains_key("host1") && p.values().map(Vec::len).sum::<usize>() == 6).then_some(p)
    });
    assert_eq!(moved.len(), 2, "{moved:?}");
    hosts[0].check_leaks();

    // Stopping the job leaves all three clean.
    server.stop_job("six");
    for host in &mut hosts[1..] {
        host.check_leaks();
    }
    assert!(
        server
            .allocs("six")
            .iter()
            .all(|a: &Value| a["ClientStatus"] != "running"),
        "allocations still running"
    );

    drop(clients);
    drop(server);
    for host in &mut hosts {
        host.finish();
    }
}
