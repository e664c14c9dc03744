//! rkt-cri as a node operator meets it: the real `rkt-cri` driven by the real `crictl`
//! (cri-tools 1.26.1, built from the shared directory, see `operator_support`), each test
//! with a server of its own (temporary `--dir`, socket and CNI configuration directory),
//! pods on bridge networks of the test's own (host-local on a `10.114.<n>.0/24` subnet,
//! masquerading, port mappings), images from a loopback registry reached as a mirror.
//!
//! - every non-streaming command an operator uses, on pods that serve on their address and
//!   on a host port;
//! - the server restarted (SIGTERM, and kill -9) while pods run: they run on and are listed
//!   again, then stopped and removed; SIGTERM during RPCs ends the server, leaving nothing;
//!   its spawner ends with it each time;
//! - the pods' runners and log monitors forked by the spawner, showing their own command
//!   lines; the spawner killed -9, started again by the next pod;
//! - the server killed -9 during RunPodSandbox and during CreateContainer, at several
//!   moments, started again, `crictl rmp -fa`: the leak checker finds nothing; the same
//!   during StartContainer, StopPodSandbox and RemovePodSandbox;
//! - NetworkReady follows the CNI configuration directory without a restart;
//! - pods on the networks the directories name (rkt's `paths` configuration, the server's
//!   `--net-conf-dir`, and a network named with `--net-name`);
//! - ten containers created, started, stopped and removed at once in one pod;
//! - 50 pods created at once, all ready, a container started in each at once, all
//!   removed, nothing left.
//!
//! Every test ends with the leak checker (namespaces, links, addresses, routes, iptables,
//! host-local leases, CNI cache, mounts, cgroups), no process of the test's left, and no
//! veth on its bridge. Needs root, umoci, skopeo, docker-registry, iptables, the CNI
//! plugins in /usr/lib/cni and crictl (or Go to build it); skips saying why otherwise, and
//! fails instead under `CI`. The tests run one at a time (they time what they do, on a
//! small machine); the timings are printed (`--nocapture`).

mod operator_support;

use std::time::{Duration, Instant};

use leak_check::Guard;
use serde_json::{json, Value};
use test_kit::{wait_for, PATIENCE};

use operator_support::*;

/// The condition `kind` of `crictl info`'s status.
fn condition(info: &Value, kind: &str) -> Value {
    info["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} condition in {info}"))
}

#[test]
fn every_operator_command_on_a_pod_network() {
    let Some((_held, mut node, net, guard)) = setup(
        "every_operator_command_on_a_pod_network",
        "pods",
        Images::Registry,
    ) else {
        return;
    };

    // info and version: ready, on our network.
    let info = node.json(&["info"]);
    assert_eq!(condition(&info, "RuntimeReady")["status"], true, "{info}");
    assert_eq!(condition(&info, "NetworkReady")["status"], true, "{info}");
    let version = node.ok(&["version"]);
    assert!(version.contains("RuntimeName:  rkt"), "{version}");
    assert!(version.contains("RuntimeApiVersion:  v1"), "{version}");

    // pull and images: the mirror serves it, the name stays.
    let pulled = node.ok(&["pull", IMAGE]);
    assert!(pulled.contains("sha256:"), "{pulled}");
    let listed = node.json(&["images", "-o", "json"]);
    let image = listed["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["repoTags"].as_array().unwrap().iter().any(|t| t == IMAGE))
        .unwrap_or_else(|| panic!("{IMAGE} not listed: {listed}"))
        .clone();
    assert_ne!(image["size"], "0", "{image}");
    let table = node.ok(&["images"]);
    assert!(table.contains("operator.test/test/busybox") && table.contains("v1"));

    // runp: a pod on the network with a host port.
    let port = free_port();
    let pod = node.pod_config(
        "web",
        json!({"port_mappings": [{"protocol": 0, "container_port": 80, "host_port": port}]}),
    );
    let t = Instant::now();
    let pod_id = node.ok(&["runp", &pod]);
    eprintln!("runp on a bridge network: {:?}", t.elapsed());
    assert_eq!(pod_id.len(), 32, "{pod_id}");
    let ip = node.pod_ip(&pod_id);
    assert!(net.holds(&ip), "pod IP {ip} not in {}", net.subnet);
    assert_eq!(net.ports().len(), 1, "one veth on the bridge");

    // create and start: a web server and a container that talks.
    let web = node.container_config("httpd", &HTTPD, json!({}));
    let talker = node.container_config(
        "talker",
        &[
            "sh",
            "-c",
            "echo hello $WHO; echo oops >&2; exec sleep 100000",
        ],
        json!({"envs": [{"key": "WHO", "value": "operator"}]}),
    );
    let t = Instant::now();
    let web_id = node.ok(&["create", &pod_id, &web, &pod]);
    let talker_id = node.ok(&["create", "--no-pull", &pod_id, &talker, &pod]);
    node.ok(&["start", &web_id]);
    node.ok(&["start", &talker_id]);
    eprintln!("create + start of two containers: {:?}", t.elapsed());
    assert!(web_id.starts_with(&pod_id), "{web_id}");

    // ps and pods, with their filters.
    let ps = node.ok(&["ps"]);
    assert!(ps.contains("httpd") && ps.contains("talker") && ps.contains("Running"));
    let in_pod = node.ok(&["ps", "-q", "--pod", &pod_id]);
    assert_eq!(in_pod.lines().count(), 2, "{in_pod}");
    assert_eq!(node.ok(&["ps", "-q", "--name", "talker"]), talker_id);
    assert_eq!(node.ok(&["ps", "-q", "--label", "container=httpd"]), web_id);
    assert_eq!(node.ok(&["ps", "-q", "--state", "exited"]), "");
    let pods = node.json(&["pods", "-o", "json"]);
    assert_eq!(pods["items"][0]["id"], pod_id.as_str(), "{pods}");
    assert_eq!(pods["items"][0]["state"], "SANDBOX_READY");
    assert_eq!(pods["items"][0]["metadata"]["namespace"], "operator");
    assert_eq!(node.ok(&["pods", "-q", "--name", "web"]), pod_id);
    assert_eq!(node.ok(&["pods", "-q", "--label", "pod=web"]), pod_id);
    assert_eq!(node.ok(&["pods", "-q", "--label", "pod=other"]), "");
    assert_eq!(node.ok(&["pods", "-q", "--state", "notready"]), "");

    // The pod serves on its address and, through the port mapping, on the host's.
    let greeting = wait_for("the pod to serve on its address", PATIENCE, || {
        http_get(&format!("{ip}:80"), "/greeting").ok()
    });
    assert_eq!(greeting, "hello\n");
    let gateway = format!("{}.1:{port}", net.prefix);
    let via_host = wait_for("the host port to forward", PATIENCE, || {
        http_get(&gateway, "/greeting").ok()
    });
    assert_eq!(via_host, "hello\n");

    // inspect and inspectp.
    let inspect = node.json(&["inspect", &talker_id]);
    assert_eq!(inspect["status"]["state"], "CONTAINER_RUNNING", "{inspect}");
    assert_eq!(inspect["status"]["image"]["image"], IMAGE);
    assert_eq!(inspect["status"]["metadata"]["name"], "talker");
    assert_eq!(inspect["status"]["labels"]["container"], "talker");
    let log_path = node.logs.join("web/talker.log");
    assert_eq!(inspect["status"]["logPath"], log_path.display().to_string());
    assert!(
        inspect["info"]["pid"].as_u64().unwrap_or(0) > 1,
        "{inspect}"
    );
    let inspectp = node.json(&["inspectp", &pod_id]);
    assert_eq!(inspectp["status"]["state"], "SANDBOX_READY", "{inspectp}");
    assert_eq!(inspectp["status"]["metadata"]["name"], "web");
    assert_eq!(inspectp["status"]["metadata"]["uid"], "uid-web");
    assert_eq!(
        inspectp["status"]["annotations"]["operator.test/note"],
        "made by crictl"
    );
    assert_ne!(inspectp["status"]["createdAt"], "0");

    // logs: each stream apart, --tail.
    wait_for("the talker's log", PATIENCE, || {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        (log.contains(" stdout F hello operator") && log.contains(" stderr F oops")).then_some(())
    });
    let out = node.crictl(&["logs", &talker_id]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello operator\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    let out = node.crictl(&["logs", "--timestamps", &talker_id]);
    let stamped = String::from_utf8_lossy(&out.stdout);
    assert!(
        stamped.starts_with("20") && stamped.trim_end().ends_with(" hello operator"),
        "{stamped}"
    );

    // stats: both containers, memory and CPU read from their cgroups.
    let stats = node.json(&["stats", "-o", "json"]);
    let all = stats["stats"].as_array().unwrap();
    assert_eq!(all.len(), 2, "{stats}");
    let mine = node.json(&["stats", "-o", "json", "--id", &web_id]);
    let entry = &mine["stats"][0];
    assert_eq!(entry["attributes"]["id"], web_id.as_str(), "{mine}");
    let memory: u64 = entry["memory"]["workingSetBytes"]["value"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(memory > 0, "{mine}");
    assert_ne!(entry["cpu"]["timestamp"], "0", "{mine}");
    let table = node.ok(&["stats"]);
    assert!(table.contains("CPU %"), "{table}");

    // stop and rm a container; the other goes on serving.
    node.ok(&["stop", "--timeout", "5", &talker_id]);
    let inspect = node.json(&["inspect", &talker_id]);
    assert_eq!(inspect["status"]["state"], "CONTAINER_EXITED", "{inspect}");
    assert_ne!(inspect["status"]["finishedAt"], "0");
    assert_eq!(node.ok(&["ps", "-q", "--state", "exited"]), talker_id);
    node.ok(&["rm", &talker_id]);
    assert_eq!(node.ok(&["ps", "-a", "-q"]), web_id);
    assert!(http_get(&format!("{ip}:80"), "/greeting").is_ok());

    // rmi of the image a running container uses is refused, saying so; it serves on.
    let refused = node.fails(&["rmi", IMAGE]);
    assert!(refused.contains("in use"), "{refused}");
    assert!(node.ok(&["images"]).contains("operator.test/test/busybox"));
    assert!(http_get(&format!("{ip}:80"), "/greeting").is_ok());

    // stopp releases the network (no veth left), the pod stays listed, not ready; rmp
    // removes it, rmi the image.
    let t = Instant::now();
    node.ok(&["stopp", &pod_id]);
    eprintln!("stopp: {:?}", t.elapsed());
    assert_eq!(net.ports(), Vec::<String>::new(), "stopp left veths");
    assert!(http_get(&gateway, "/greeting").is_err());
    let inspectp = node.json(&["inspectp", &pod_id]);
    assert_eq!(
        inspectp["status"]["state"], "SANDBOX_NOTREADY",
        "{inspectp}"
    );
    assert_eq!(
        node.ok(&["ps", "-q"]),
        "",
        "no container runs in a stopped pod"
    );
    guard.remember();
    node.ok(&["rmp", &pod_id]);
    assert_eq!(node.ok(&["pods", "-q"]), "");
    assert_eq!(node.ok(&["ps", "-a", "-q"]), "");
    node.ok(&["rmi", IMAGE]);
    assert!(!node.ok(&["images"]).contains("operator.test"));

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &[uuid_of(&pod_id)]);
}

#[test]
fn a_restarted_server_finds_its_running_pods() {
    let Some((_held, mut node, net, guard)) = setup(
        "a_restarted_server_finds_its_running_pods",
        "restart",
        Images::Registry,
    ) else {
        return;
    };
    node.ok(&["pull", IMAGE]);

    // Two pods, each serving from a container.
    let mut pods = Vec::new();
    for name in ["one", "two"] {
        let pod = node.pod_config(name, json!({}));
        let ctr = node.container_config(&format!("{name}-web"), &HTTPD, json!({}));
        let pod_id = node.ok(&["runp", &pod]);
        let ctr_id = node.ok(&["create", "--no-pull", &pod_id, &ctr, &pod]);
        node.ok(&["start", &ctr_id]);
        let ip = node.pod_ip(&pod_id);
        wait_for("the pod to serve", PATIENCE, || {
            http_get(&format!("{ip}:80"), "/greeting").ok()
        });
        let pid = node.json(&["inspect", &ctr_id])["info"]["pid"].clone();
        pods.push((pod, pod_id, ctr_id, ip, pid));
    }
    // And a container that ends while the server is down (killed -9).
    let brief = node.container_config(
        "brief",
        &["sh", "-c", "sleep 1; echo done; exit 3"],
        json!({}),
    );
    let brief_id = node.ok(&["create", "--no-pull", &pods[0].1, &brief, &pods[0].0]);
    node.ok(&["start", &brief_id]);
    node.kill_9();
    std::thread::sleep(Duration::from_millis(1500));
    node.start();
    // Its pod's runner recorded the exit; the log is whole.
    let inspect = wait_for("the brief container to be exited", PATIENCE, || {
        let inspect = node.json(&["inspect", &brief_id]);
        (inspect["status"]["state"] == "CONTAINER_EXITED").then_some(inspect)
    });
    assert_eq!(inspect["status"]["exitCode"], 3, "{inspect}");
    let out = node.crictl(&["logs", &brief_id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let exited = node.ok(&["ps", "-q", "--state", "exited"]);
    assert_eq!(exited, brief_id);
    guard.remember();
    let seen: Vec<String> = pods.iter().map(|p| uuid_of(&p.1)).collect();

    // Restarted as a service manager does, then killed with -9 and started again: each
    // time the pods ran on (same processes, still serving) and are listed as before.
    for how in ["SIGTERM", "SIGKILL"] {
        if how == "SIGTERM" {
            node.terminate();
        } else {
            node.kill_9();
        }
        for (_, _, _, ip, _) in &pods {
            assert!(
                http_get(&format!("{ip}:80"), "/greeting").is_ok(),
                "a pod stopped serving while the server was down ({how})"
            );
        }
        let t = Instant::now();
        node.start();
        eprintln!("server up again after {how}: {:?}", t.elapsed());
        let mut listed = node.pod_ids();
        listed.sort();
        let mut want: Vec<String> = pods.iter().map(|p| p.1.clone()).collect();
        want.sort();
        assert_eq!(listed, want, "pods listed after {how}");
        for (_, pod_id, ctr_id, ip, pid) in &pods {
            let inspectp = node.json(&["inspectp", pod_id]);
            assert_eq!(inspectp["status"]["state"], "SANDBOX_READY", "{inspectp}");
            assert_eq!(inspectp["status"]["network"]["ip"], ip.as_str());
            let inspect = node.json(&["inspect", ctr_id]);
            assert_eq!(inspect["status"]["state"], "CONTAINER_RUNNING", "{inspect}");
            assert_eq!(&inspect["info"]["pid"], pid, "the same process after {how}");
        }
        let ps = node.ok(&["ps", "-q"]);
        assert_eq!(ps.lines().count(), 2, "{ps}");
    }

    // The restarted server drives them: a new container in the first pod, the second pod
    // stopped and removed, then the first.
    let (pod, pod_id, ..) = &pods[0];
    let late = node.container_config("late", &SLEEP, json!({}));
    let late_id = node.ok(&["create", "--no-pull", pod_id, &late, pod]);
    node.ok(&["start", &late_id]);
    assert_eq!(
        node.json(&["inspect", &late_id])["status"]["state"],
        "CONTAINER_RUNNING"
    );
    node.ok(&["stopp", &pods[1].1]);
    node.ok(&["rmp", &pods[1].1]);
    assert_eq!(node.pod_ids(), vec![pod_id.clone()]);
    assert!(http_get(&format!("{}:80", pods[0].3), "/greeting").is_ok());
    node.ok(&["stop", &late_id]);
    node.ok(&["rm", &late_id]);
    node.ok(&["stopp", pod_id]);
    node.ok(&["rmp", pod_id]);
    assert_eq!(node.ok(&["pods", "-q"]), "");

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &seen);
}

#[test]
fn pods_helpers_are_forked_by_a_spawner_that_comes_back() {
    let Some((_held, mut node, net, guard)) = setup(
        "pods_helpers_are_forked_by_a_spawner_that_comes_back",
        "spawner",
        Images::Registry,
    ) else {
        return;
    };
    node.ok(&["pull", IMAGE]);
    let spawner = node.spawner_pid().expect("the server's spawner runs");
    assert_eq!(args_of(spawner)[1..], ["spawner"], "{:?}", args_of(spawner));

    let (mut seen, mut containers) = (Vec::new(), Vec::new());
    // The second pod carries 300 KiB of annotations (kubectl's last-applied-configuration
    // can be that large): its runner's spec goes to the spawner in one message, larger
    // than a socket's default buffer and than one argument of an executed process.
    let large = "x".repeat(300 * 1024);
    for name in ["first", "second"] {
        let extra = match name {
            "second" => json!({"annotations": {"operator.test/large": large}}),
            _ => json!({}),
        };
        let pod = node.pod_config(name, extra);
        let ctr = node.container_config(
            &format!("{name}-talk"),
            &["sh", "-c", &format!("echo {name}; exec sleep 100000")],
            json!({}),
        );
        let pod_id = node.ok(&["runp", &pod]);
        let ctr_id = node.ok(&["create", "--no-pull", &pod_id, &ctr, &pod]);
        node.ok(&["start", &ctr_id]);
        seen.push(uuid_of(&pod_id));
        containers.push(ctr_id.clone());
        // The pod's runner and the container's log monitor are the spawner's children, and
        // show their own command lines, as executed ones would: the monitor names the
        // pod's directory; the runner, whose spec is cut in `ps` (the annotations come
        // first), is the one runner of this spawner (the first pod's, or the second's,
        // started by the spawner that replaced the first).
        let spawner = node.spawner_pid().expect("the server's spawner runs");
        let helpers: Vec<Vec<String>> = children_of(spawner).into_iter().map(args_of).collect();
        let command = |a: &Vec<String>, c: &str| a.get(1).map(String::as_str) == Some(c);
        let runners = helpers
            .iter()
            .filter(|a| command(a, "sandbox-runner"))
            .count();
        let monitors = helpers
            .iter()
            .filter(|a| command(a, "stage1-log") && a.iter().any(|x| x.contains(&uuid_of(&pod_id))))
            .count();
        assert_eq!(
            (runners, monitors),
            (1, 1),
            "the pod's helpers under the spawner: {helpers:?}"
        );
        let out = wait_for("the container's log", PATIENCE, || {
            let out = node.crictl(&["logs", &ctr_id]);
            (String::from_utf8_lossy(&out.stdout) == format!("{name}\n")).then_some(out)
        });
        assert!(out.status.success());
        if name == "first" {
            // The spawner killed: the next pod's start brings up another.
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(spawner as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
        }
    }
    let again = node.spawner_pid().expect("a spawner runs again");
    let second = node
        .pod_ids()
        .into_iter()
        .find(|id| node.json(&["inspectp", id])["status"]["metadata"]["name"] == "second")
        .expect("the second pod");
    let annotations = &node.json(&["inspectp", &second])["status"]["annotations"];
    assert_eq!(
        annotations["operator.test/large"].as_str().map(str::len),
        Some(300 * 1024),
        "the large annotation, kept whole"
    );
    assert_ne!(again, spawner, "a new spawner");
    // The first pod, whose helpers lost their parent, runs on: its container still runs,
    // its log is whole, and the pod stops and goes like the other.
    assert_eq!(node.pod_ids().len(), 2);
    for id in &containers {
        let state = &node.json(&["inspect", id])["status"]["state"];
        assert_eq!(state, "CONTAINER_RUNNING", "container {id}");
    }
    for pod_id in node.pod_ids() {
        node.ok(&["stopp", &pod_id]);
        node.ok(&["rmp", &pod_id]);
    }
    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &seen);
}

#[test]
fn a_server_stopped_during_rpcs_ends_and_leaves_nothing() {
    let Some((_held, mut node, net, guard)) = setup(
        "a_server_stopped_during_rpcs_ends_and_leaves_nothing",
        "term",
        Images::NoRegistry,
    ) else {
        return;
    };
    const PODS: usize = 10;

    // SIGTERM (a service manager's stop or restart) while RunPodSandboxes are under way:
    // the server ends (within PATIENCE, else the test fails), each RPC answered or cut.
    let children = node.runp_at_once("busy", PODS);
    soon("a pod's directory", || !node.stored_pods().is_empty());
    let t = Instant::now();
    node.terminate();
    let stop_wall = t.elapsed();
    let answered = answered_ids(children);

    // Started again, it lists every pod an answered RPC named; rmp -fa removes them all.
    node.start();
    let stored = node.stored_pods();
    guard.remember();
    let listed = node.pod_ids();
    eprintln!(
        "SIGTERM during {PODS} RunPodSandboxes: the server ended in {stop_wall:?}, {} \
         answered, {} pods after the restart",
        answered.len(),
        listed.len()
    );
    for id in &answered {
        assert!(
            listed.contains(id),
            "{id} answered but not listed: {listed:?}"
        );
    }
    node.ok(&["rmp", "-fa"]);
    let left = wait_for_settled(&node);
    assert!(left.is_empty(), "left after rmp -fa: {left:?}");

    // Idle after many calls (each a connection of its own), it ends promptly too.
    for _ in 0..20 {
        node.ok(&["version"]);
    }
    let t = Instant::now();
    node.terminate();
    eprintln!("SIGTERM, idle after 20 calls: ended in {:?}", t.elapsed());
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &stored);
}

/// When a test kills the server during an RPC.
#[derive(Debug, Clone)]
enum Moment {
    /// This long after crictl started.
    After(Duration),
    /// As soon as a new pod's directory is in the data directory (RunPodSandbox only).
    PodDir,
    /// As soon as this file exists (a container's facts, written before its app is added).
    Exists(&'static str),
}

/// Runs `crictl args` in the background, kills the server -9 at `moment`, and returns
/// whether the RPC succeeded (crictl's exit status) and its output.
fn kill_during(node: &mut Node, args: &[&str], moment: &Moment, before: &[String]) -> String {
    let child = node
        .crictl_command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    match moment {
        Moment::After(d) => std::thread::sleep(*d),
        Moment::PodDir => soon("a new pod's directory", || {
            node.stored_pods().iter().any(|p| !before.contains(p))
        }),
        Moment::Exists(path) => soon(path, || std::path::Path::new(path).exists()),
    }
    let killed_at = start.elapsed();
    node.kill_9();
    let out = child.wait_with_output().unwrap();
    format!(
        "killed at {killed_at:?}: crictl {} {}",
        if out.status.success() {
            "succeeded"
        } else {
            "failed"
        },
        String::from_utf8_lossy(&out.stdout).trim()
    )
}

/// When, as fractions of an undisturbed RPC's time, the server is killed during one.
const FRACTIONS: [f64; 5] = [0.05, 0.25, 0.5, 0.75, 0.95];

/// Polls `f` every millisecond (a moment inside an RPC is short) until it holds.
fn soon(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !f() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_server_killed_during_run_pod_sandbox_leaves_nothing() {
    let Some((_held, mut node, net, guard)) = setup(
        "a_server_killed_during_run_pod_sandbox_leaves_nothing",
        "kill-runp",
        Images::NoRegistry,
    ) else {
        return;
    };

    // How long an undisturbed RunPodSandbox takes here, to kill the server within it.
    let probe = node.pod_config("probe", json!({}));
    let t = Instant::now();
    let probe_id = node.ok(&["runp", &probe]);
    let rpc = t.elapsed();
    let mut seen = vec![uuid_of(&probe_id)];
    guard.remember();
    node.ok(&["rmp", "-f", &probe_id]);
    let mut moments = vec![Moment::PodDir];
    moments.extend(FRACTIONS.iter().map(|f| Moment::After(rpc.mul_f64(*f))));
    for (k, moment) in moments.iter().enumerate() {
        let before = node.stored_pods();
        let pod = node.pod_config(&format!("kill{k}"), json!({}));
        let what = kill_during(&mut node, &["runp", &pod], moment, &before);
        node.start();
        let stored = node.stored_pods();
        seen.extend(stored.iter().cloned());
        guard.remember();
        let listed = node.pod_ids();
        eprintln!(
            "RunPodSandbox (undisturbed {rpc:?}), {moment:?}: {what}; after the restart {} pod(s) stored, {} listed",
            stored.len(),
            listed.len()
        );
        node.ok(&["rmp", "-fa"]);
        // Whatever the killed RPC had begun is gone, also what its runner was still doing.
        let left = wait_for_settled(&node);
        assert!(left.is_empty(), "{moment:?}: left after rmp -fa: {left:?}");
        assert_eq!(net.ports(), Vec::<String>::new(), "{moment:?}: veths left");
    }

    // The network still works for a new pod.
    let pod = node.pod_config("after", json!({}));
    let pod_id = node.ok(&["runp", &pod]);
    seen.push(uuid_of(&pod_id));
    guard.remember();
    assert!(net.holds(&node.pod_ip(&pod_id)));
    node.ok(&["rmp", "-f", &pod_id]);

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &seen);
}

#[test]
fn a_server_killed_during_many_run_pod_sandboxes_leaves_nothing() {
    let Some((_held, mut node, net, guard)) = setup(
        "a_server_killed_during_many_run_pod_sandboxes_leaves_nothing",
        "kill-many",
        Images::NoRegistry,
    ) else {
        return;
    };
    const PODS: usize = 20;

    // Twenty RunPodSandboxes at once, the server killed once about half the pods exist.
    let children = node.runp_at_once("crowd", PODS);
    soon("half the pods' directories", || {
        node.stored_pods().len() >= PODS / 2
    });
    node.kill_9();
    let answered = answered_ids(children).len();
    node.start();
    let stored = node.stored_pods();
    guard.remember();
    eprintln!(
        "{PODS} RunPodSandboxes at once, the server killed -9 at {} pods: {answered} answered; \
         after the restart {} stored, {} listed",
        PODS / 2,
        stored.len(),
        node.pod_ids().len()
    );
    node.ok(&["rmp", "-fa"]);
    let left = wait_for_settled(&node);
    assert!(left.is_empty(), "left after rmp -fa: {left:?}");
    assert_eq!(node.ok(&["pods", "-q"]), "");

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &stored);
}

/// After `rmp -fa`: removes again what a still-working runner of a killed RPC made after
/// the first removal listed the pods, for up to 10 s; returns the pods still stored then.
fn wait_for_settled(node: &Node) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stored = node.stored_pods();
        let busy = !node.processes(&stored).is_empty();
        if stored.is_empty() && !busy {
            return stored;
        }
        if Instant::now() > deadline {
            return stored;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_server_killed_during_create_container_leaves_nothing() {
    let Some((_held, mut node, net, guard)) = setup(
        "a_server_killed_during_create_container_leaves_nothing",
        "kill-create",
        Images::Registry,
    ) else {
        return;
    };
    node.ok(&["pull", IMAGE]);

    // How long an undisturbed CreateContainer takes here, to kill the server within it.
    let probe = node.pod_config("probe", json!({}));
    let probe_id = node.ok(&["runp", &probe]);
    let mut seen = vec![uuid_of(&probe_id)];
    guard.remember();
    let ctr = node.container_config("probe", &SLEEP, json!({}));
    let t = Instant::now();
    node.ok(&["create", "--no-pull", &probe_id, &ctr, &probe]);
    let rpc = t.elapsed();
    node.ok(&["rmp", "-f", &probe_id]);
    for k in 0..=FRACTIONS.len() {
        let pod = node.pod_config(&format!("create{k}"), json!({}));
        let pod_id = node.ok(&["runp", &pod]);
        seen.push(uuid_of(&pod_id));
        guard.remember();
        let ctr = node.container_config(&format!("c{k}"), &HTTPD, json!({}));
        // First between the container's facts and its app (a file of the server's own),
        // then along the RPC's undisturbed time.
        let moment = match k.checked_sub(1) {
            None => {
                let facts = node
                    .data
                    .join(format!("pods/{}/cri/c{k}-0.json", uuid_of(&pod_id)));
                Moment::Exists(facts.display().to_string().leak())
            }
            Some(i) => Moment::After(rpc.mul_f64(FRACTIONS[i])),
        };
        let what = kill_during(
            &mut node,
            &["create", "--no-pull", &pod_id, &ctr, &pod],
            &moment,
            &[],
        );
        node.start();
        let listed = node.ok(&["ps", "-a", "-q", "--pod", &pod_id]);
        eprintln!(
            "CreateContainer (undisturbed {rpc:?}), {moment:?}: {what}; after the restart {} container(s) listed",
            listed.lines().count()
        );
        // The pod is usable: a container of the same name made again (or the one made)
        // starts and serves.
        let id = match listed.lines().next() {
            Some(id) => id.to_string(),
            None => node.ok(&["create", "--no-pull", &pod_id, &ctr, &pod]),
        };
        node.ok(&["start", &id]);
        let ip = node.pod_ip(&pod_id);
        wait_for("the container to serve", PATIENCE, || {
            http_get(&format!("{ip}:80"), "/greeting").ok()
        });
    }
    node.ok(&["rmp", "-fa"]);
    assert_eq!(node.ok(&["pods", "-q"]), "");

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &seen);
}

#[test]
fn a_server_killed_during_start_stop_or_remove_leaves_nothing() {
    let Some((_held, mut node, net, guard)) = setup(
        "a_server_killed_during_start_stop_or_remove_leaves_nothing",
        "kill-other",
        Images::Registry,
    ) else {
        return;
    };
    node.ok(&["pull", IMAGE]);

    let mut seen = Vec::new();
    let mut n = 0;
    for rpc in ["start", "stopp", "rmp"] {
        for ms in [5, 20, 60, 150, 300] {
            n += 1;
            let pod = node.pod_config(&format!("{rpc}{n}"), json!({}));
            let pod_id = node.ok(&["runp", &pod]);
            seen.push(uuid_of(&pod_id));
            guard.remember();
            let ctr = node.container_config(&format!("c{n}"), &HTTPD, json!({}));
            let ctr_id = node.ok(&["create", "--no-pull", &pod_id, &ctr, &pod]);
            if rpc != "start" {
                node.ok(&["start", &ctr_id]);
            }
            let args = match rpc {
                "start" => vec!["start", &ctr_id],
                "stopp" => vec!["stopp", &pod_id],
                _ => vec!["rmp", "-f", &pod_id],
            };
            let moment = Moment::After(Duration::from_millis(ms));
            let what = kill_during(&mut node, &args, &moment, &[]);
            node.start();
            let state = node.crictl(&["inspectp", "-o", "json", &pod_id]);
            let state: Value = serde_json::from_slice(&state.stdout).unwrap_or_default();
            eprintln!(
                "{rpc} killed {moment:?}: {what}; after the restart the pod is {}",
                state["status"]["state"].as_str().unwrap_or("gone")
            );
            node.ok(&["rmp", "-fa"]);
            let left = wait_for_settled(&node);
            assert!(
                left.is_empty(),
                "{rpc} {moment:?}: left after rmp -fa: {left:?}"
            );
            assert_eq!(net.ports(), Vec::<String>::new(), "{rpc} {moment:?}: veths");
        }
    }

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &seen);
}

#[test]
fn network_ready_follows_the_cni_directory() {
    let Some(crictl) = ready("network_ready_follows_the_cni_directory") else {
        return;
    };
    let _serial = serial();
    let mut node = Node::new(&crictl, "");
    let conf = node.path("net.d");
    let net = Net::new(node.work.path(), "late");
    let guard = Guard::new(node.leak_ctx(&[&net]));
    node.start();

    // No configuration: not ready, saying why and where; a pod is refused, leaving nothing.
    let info = node.json(&["info"]);
    let ready = condition(&info, "NetworkReady");
    assert_eq!(ready["status"], false, "{info}");
    assert_eq!(ready["reason"], "NetworkPluginNotReady", "{info}");
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains(&conf.display().to_string()), "{message}");
    assert_eq!(condition(&info, "RuntimeReady")["status"], true);
    let pod = node.pod_config("early", json!({}));
    let refused = node.fails(&["runp", &pod]);
    assert!(refused.contains("no CNI network"), "{refused}");
    assert_eq!(node.stored_pods(), Vec::<String>::new());

    // A file that is no configuration: still not ready, the reason naming the file.
    std::fs::write(conf.join("05-broken.conflist"), "{\"name\": ").unwrap();
    let info = node.json(&["info"]);
    let ready = condition(&info, "NetworkReady");
    assert_eq!(ready["status"], false, "{info}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("05-broken.conflist"),
        "{info}"
    );
    std::fs::remove_file(conf.join("05-broken.conflist")).unwrap();

    // A configuration dropped in: ready without a restart, and a pod gets an address.
    net.write(&conf, "10-late.conflist");
    let info = node.json(&["info"]);
    assert_eq!(condition(&info, "NetworkReady")["status"], true, "{info}");
    let pod_id = node.ok(&["runp", &pod]);
    let ip = node.pod_ip(&pod_id);
    assert!(net.holds(&ip), "{ip} not in {}", net.subnet);
    guard.remember();

    // The configuration taken away while the pod runs: not ready again; the running pod
    // is still stopped and removed completely (its network is released from what the pod
    // recorded, not from the directory).
    std::fs::remove_file(conf.join("10-late.conflist")).unwrap();
    let info = node.json(&["info"]);
    assert_eq!(condition(&info, "NetworkReady")["status"], false, "{info}");
    node.ok(&["stopp", &pod_id]);
    assert_eq!(net.ports(), Vec::<String>::new(), "stopp left veths");
    node.ok(&["rmp", &pod_id]);

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &[uuid_of(&pod_id)]);
}

#[test]
fn pods_on_the_networks_the_directories_name() {
    let Some(crictl) = ready("pods_on_the_networks_the_directories_name") else {
        return;
    };
    let _serial = serial();
    let mut node = Node::new(&crictl, "");
    // rkt's paths configuration names a directory of two networks; the server's flag
    // another, of one.
    let (from_paths, from_flag) = (node.path("paths-net.d"), node.path("flag-net.d"));
    let a = Net::new(node.work.path(), "a");
    let b = Net::new(node.work.path(), "b");
    let c = Net::new(node.work.path(), "c");
    // File-name order, not network-name order: "20-…" comes after "10-…".
    a.write(&from_paths, "10-first.conflist");
    b.write(&from_paths, "20-second.conflist");
    c.write(&from_flag, "10-flag.conflist");
    std::fs::create_dir_all(node.local.join("paths.d")).unwrap();
    std::fs::write(
        node.local.join("paths.d/paths.json"),
        json!({"rktKind": "paths", "rktVersion": "v1", "net-conf": from_paths}).to_string(),
    )
    .unwrap();
    let guard = Guard::new(node.leak_ctx(&[&a, &b, &c]));
    let mut seen = Vec::new();
    let mut on = Vec::new();

    // (server options, the network its pods get)
    let setups: [(Option<&std::path::Path>, &[String], &Net); 3] = [
        (None, &[], &a),
        (Some(&from_flag), &[], &c),
        (None, &[format!("--net-name={}", b.name)], &b),
    ];
    for (k, (conf_dir, extra, net)) in setups.iter().enumerate() {
        node.net_conf_dir = conf_dir.map(std::path::Path::to_path_buf);
        node.extra = extra.to_vec();
        node.start();
        let info = node.json(&["info"]);
        assert_eq!(condition(&info, "NetworkReady")["status"], true, "{info}");
        let shown = info["config"]["podNetwork"].clone();
        assert_eq!(shown, net.name.as_str(), "crictl info: {info}");
        for i in 0..2 {
            let pod = node.pod_config(&format!("p{k}-{i}"), json!({}));
            let pod_id = node.ok(&["runp", &pod]);
            let ip = node.pod_ip(&pod_id);
            assert!(net.holds(&ip), "setup {k}: {ip} not in {}", net.subnet);
            seen.push(uuid_of(&pod_id));
            on.push((pod_id, ip));
        }
        guard.remember();
        node.terminate();
    }
    // A network named that no file defines: refused, saying where it looked.
    node.net_conf_dir = None;
    node.extra = vec!["--net-name=nowhere".to_string()];
    node.start();
    let info = node.json(&["info"]);
    let ready = condition(&info, "NetworkReady");
    assert_eq!(ready["status"], false, "{info}");
    assert!(
        ready["message"].as_str().unwrap().contains("nowhere"),
        "{info}"
    );
    let refused = node.fails(&["runp", &node.pod_config("nowhere", json!({}))]);
    assert!(refused.contains("nowhere"), "{refused}");

    // Every pod, whichever configuration made it, is listed and keeps its address; each
    // bridge holds its two pods.
    let mut listed = node.pod_ids();
    listed.sort();
    let mut want: Vec<String> = on.iter().map(|(id, _)| id.clone()).collect();
    want.sort();
    assert_eq!(listed, want);
    for (id, ip) in &on {
        assert_eq!(&node.pod_ip(id), ip);
    }
    for net in [&a, &b, &c] {
        assert_eq!(net.ports().len(), 2, "bridge {}", net.bridge);
    }
    node.ok(&["rmp", "-fa"]);
    node.terminate();
    for net in [&a, &b, &c] {
        net.assert_empty_and_remove();
    }
    node.assert_clean(&guard, &seen);
}

#[test]
fn ten_containers_in_one_pod_at_once() {
    let Some((_held, mut node, net, guard)) = setup(
        "ten_containers_in_one_pod_at_once",
        "crowd",
        Images::Registry,
    ) else {
        return;
    };
    const CONTAINERS: usize = 10;
    node.ok(&["pull", IMAGE]);
    let pod = node.pod_config("crowded", json!({}));
    let pod_id = node.ok(&["runp", &pod]);
    guard.remember();

    // RPCs on one pod run one at a time in the server; sent at once, each still succeeds.
    let configs: Vec<String> = (0..CONTAINERS)
        .map(|i| node.container_config(&format!("member{i}"), &SLEEP, json!({})))
        .collect();
    let all = |f: &(dyn Fn(&str) -> String + Sync), items: &[String]| -> Vec<String> {
        std::thread::scope(|s| {
            let handles: Vec<_> = items.iter().map(|i| s.spawn(move || f(i))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let t = Instant::now();
    let ids = all(
        &|c: &str| node.ok(&["create", "--no-pull", &pod_id, c, &pod]),
        &configs,
    );
    all(&|id: &str| node.ok(&["start", id]), &ids);
    eprintln!(
        "{CONTAINERS} containers created and started at once in one pod: {:?}",
        t.elapsed()
    );
    let running = node.ok(&["ps", "-q", "--pod", &pod_id, "--state", "running"]);
    assert_eq!(running.lines().count(), CONTAINERS, "{running}");
    let mut names: Vec<String> = ids
        .iter()
        .map(|id| node.json(&["inspect", id])["status"]["metadata"]["name"].to_string())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), CONTAINERS, "{names:?}");

    // Half stopped and the other half removed at once.
    let (stop, remove) = ids.split_at(CONTAINERS / 2);
    std::thread::scope(|s| {
        for id in stop {
            s.spawn(|| node.ok(&["stop", "--timeout", "2", id]));
        }
        for id in remove {
            s.spawn(|| node.ok(&["rm", "-f", id]));
        }
    });
    let left = node.ok(&["ps", "-a", "-q", "--pod", &pod_id]);
    assert_eq!(left.lines().count(), CONTAINERS / 2, "{left}");
    assert_eq!(node.ok(&["ps", "-q", "--pod", &pod_id]), "", "none runs");
    node.ok(&["rmp", "-f", &pod_id]);

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &[uuid_of(&pod_id)]);
}

#[test]
fn fifty_pods_at_once() {
    let Some((_held, mut node, net, guard)) =
        setup("fifty_pods_at_once", "fifty", Images::Registry)
    else {
        return;
    };
    const PODS: usize = 50;
    node.ok(&["pull", IMAGE]);

    let configs: Vec<String> = (0..PODS)
        .map(|i| node.pod_config(&format!("many{i}"), json!({})))
        .collect();
    let t = Instant::now();
    let ids: Vec<String> = std::thread::scope(|s| {
        let node = &node;
        let handles: Vec<_> = configs
            .iter()
            .map(|c| s.spawn(move || node.crictl(&["runp", c])))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let out = h.join().unwrap();
                assert!(
                    out.status.success(),
                    "runp: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8_lossy(&out.stdout).trim().to_string()
            })
            .collect()
    });
    let run_wall = t.elapsed();
    let seen: Vec<String> = ids.iter().map(|id| uuid_of(id)).collect();
    guard.remember();

    // All ready, each with its own address on the network, one veth each.
    let pods = node.json(&["pods", "-o", "json"]);
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), PODS);
    assert!(
        items.iter().all(|p| p["state"] == "SANDBOX_READY"),
        "{pods}"
    );
    let mut ips: Vec<String> = ids.iter().map(|id| node.pod_ip(id)).collect();
    assert!(ips.iter().all(|ip| net.holds(ip)), "{ips:?}");
    ips.sort();
    ips.dedup();
    assert_eq!(ips.len(), PODS, "addresses shared");
    assert_eq!(net.ports().len(), PODS);

    // Listed quickly, and again by a server killed -9 and started again.
    let t = Instant::now();
    assert_eq!(node.pod_ids().len(), PODS);
    let list_wall = t.elapsed();
    node.kill_9();
    let t = Instant::now();
    node.start();
    let mut listed = node.pod_ids();
    let relist_wall = t.elapsed();
    listed.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(listed, want, "pods listed after kill -9");

    // A container created and started in each, all at once, as kubelet does.
    let ctr = node.container_config("worker", &SLEEP, json!({}));
    let t = Instant::now();
    let containers: Vec<String> = std::thread::scope(|s| {
        let (node, ctr) = (&node, &ctr);
        let handles: Vec<_> = ids
            .iter()
            .zip(&configs)
            .map(|(id, pod)| {
                s.spawn(move || {
                    let c = node.ok(&["create", "--no-pull", id, ctr, pod]);
                    node.ok(&["start", &c]);
                    c
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let start_wall = t.elapsed();
    let running = node.ok(&["ps", "-q", "--state", "running"]);
    assert_eq!(running.lines().count(), PODS, "{running}");
    assert!(containers.iter().all(|c| running.contains(c.as_str())));
    let (server_kib, held_kib, held) = node.memory_kib();
    eprintln!(
        "with {PODS} pods running (proportional set sizes): server {server_kib} KiB, its pods' \
         {held} runners, inits, apps and log copiers {held_kib} KiB"
    );

    let t = Instant::now();
    std::thread::scope(|s| {
        let node = &node;
        for id in &ids {
            s.spawn(move || node.ok(&["rmp", "-f", id]));
        }
    });
    let remove_wall = t.elapsed();
    assert_eq!(node.ok(&["pods", "-q"]), "");
    eprintln!(
        "{PODS} pods at once: runp {run_wall:?} ({:.1} pods/s), pods -q {list_wall:?}, up \
         again after kill -9 and listed {relist_wall:?}, a container created and started in \
         each {start_wall:?}, rmp -f {remove_wall:?}",
        PODS as f64 / run_wall.as_secs_f64()
    );

    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &seen);
}
