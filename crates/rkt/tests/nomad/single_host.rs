//! One host: `nomad agent -dev` on loopback with its built-in rkt driver, exactly as shipped,
//! driving the rkt under test (through a `PATH` wrapper that only adds this test's
//! directories). Images come from a registry on loopback that the test fills.

use std::path::Path;

use serde_json::Value;
use test_kit::{wait_for, World};

use crate::agent::{
    events, free_ports, nomad_binary, rkt_wrapper, Agent, CLIENT_OPTIONS, RKT_PLUGIN,
};
use crate::image_common::{busybox_layout, ready, skopeo_copy, tag_exposing, Registry};
use crate::leaks;
use crate::pod_support::http_get_forwarded;
use crate::support::RKT;

/// A job of one task of the rkt driver: `group` holds the group's extra stanzas, `task` the
/// task's, `config` the driver's.
fn job(name: &str, kind: &str, group: &str, task: &str, config: &str) -> String {
    format!(
        r#"job "{name}" {{
  datacenters = ["dc1"]
  type = "{kind}"
  group "g" {{
    restart {{
      attempts = 0
      mode = "fail"
    }}
    {group}
    task "t" {{
      driver = "rkt"
      {task}
      config {{
        {config}
      }}
      resources {{
        cpu = 100
        memory = 64
        {resources}
      }}
    }}
  }}
}}
"#,
        resources = if config.contains("port_map") {
            "network {\n          mbits = 1\n          port \"http\" {}\n        }"
        } else {
            ""
        }
    )
}

/// Groups of batch jobs are not rescheduled: one allocation, whatever its task's exit.
const NO_RESCHEDULE: &str = "reschedule {\n      attempts = 0\n      unlimited = false\n    }";

/// The UUID of the pod that rkt ran for `alloc`: the task's `rkt run-prepared` names it on
/// its command line, and the driver's state keeps it; we read it from rkt's own list, as
/// the pod whose volumes are this allocation's directories.
fn pod_of(world: &World, alloc_id: &str) -> Option<String> {
    let out = world.output(&["list", "--full", "--no-legend"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find(|uuid| {
            let out = world.output(&["cat-manifest", uuid]);
            String::from_utf8_lossy(&out.stdout).contains(alloc_id)
        })
        .map(str::to_string)
}

fn alloc_id(alloc: &Value) -> String {
    alloc["ID"].as_str().unwrap().to_string()
}

#[test]
fn nomad_runs_rkt_tasks_on_one_host() {
    const TEST: &str = "nomad_runs_rkt_tasks_on_one_host";
    if !ready(TEST, &["umoci", "skopeo", "docker-registry"]) {
        return;
    }
    let Some(nomad) = nomad_binary(TEST) else {
        return;
    };
    let world = World::new(RKT);
    let guard = leaks::Guard::new(world.leak_ctx().shared_network("default"));

    // A busybox image exposing 80/tcp, in a registry on loopback.
    let layout = busybox_layout(world.root.path());
    tag_exposing(&layout, "web", &["80/tcp"]);
    let registry = Registry::start("");
    let image = format!("docker://{}/test/busybox:web", registry.addr);
    skopeo_copy(&format!("oci:{}:web", layout.display()), &image);

    let path = rkt_wrapper(&world.path("bin"), &world.globals());
    let [http, rpc, serf] = free_ports();
    let config = format!(
        "data_dir = \"{data}\"\nbind_addr = \"127.0.0.1\"\nports {{\n  http = {http}\n  rpc = {rpc}\n  serf = {serf}\n}}\n\
         client {{\n  enabled = true\n  {CLIENT_OPTIONS}\n}}\n{RKT_PLUGIN}\n",
        data = world.path("nomad").display()
    );
    let agent = Agent::start(
        &nomad,
        &world.path("nomad"),
        &config,
        &["-dev"],
        &path,
        None,
        &format!("127.0.0.1:{http}"),
    );

    // The driver's fingerprint (`rkt version`) finds a version it accepts.
    let nodes = agent.wait_rkt_healthy(1);
    let attrs = &nodes[0]["Attributes"];
    assert_eq!(attrs["driver.rkt.version"], "1.30.0", "{attrs}");
    assert!(attrs["driver.rkt.appc.version"].is_string(), "{attrs}");

    // A batch job: its exit code and both streams reach Nomad.
    agent.run_job(
        "batch",
        &job(
            "batch",
            "batch",
            NO_RESCHEDULE,
            "",
            &format!(
                "image = \"{image}\"\n        command = \"/bin/sh\"\n        \
                 args = [\"-c\", \"echo out-line; echo err-line >&2; exit 3\"]"
            ),
        ),
    );
    let batch = agent.wait_alloc("batch", "the batch task to end", |a| {
        (a["ClientStatus"] == "failed" || a["ClientStatus"] == "complete").then(|| a.clone())
    });
    let evs = events(&batch, "t");
    assert!(
        evs.iter()
            .any(|(t, m)| t == "Terminated" && m.contains("Exit Code: 3")),
        "{evs:?}"
    );
    let id = alloc_id(&batch);
    assert_eq!(agent.ok(&["alloc", "logs", &id, "t"]), "out-line\n");
    assert_eq!(
        agent.ok(&["alloc", "logs", "-stderr", &id, "t"]),
        "err-line\n"
    );

    // A service on rkt's default network with a port_map: reachable from the host on the
    // port Nomad picked.
    agent.run_job(
        "web",
        &job(
            "web",
            "service",
            "",
            "",
            &format!(
                "image = \"{image}\"\n        command = \"/bin/busybox\"\n        \
                 args = [\"httpd\", \"-f\", \"-p\", \"80\", \"-h\", \"/etc\"]\n        \
                 port_map {{\n          http = \"80-tcp\"\n        }}"
            ),
        ),
    );
    let web = agent.wait_alloc("web", "the web task to run", |a| {
        (a["ClientStatus"] == "running").then(|| a.clone())
    });
    let web_id = alloc_id(&web);
    let port = web["Resources"]["Networks"][0]["DynamicPorts"][0]["Value"]
        .as_u64()
        .unwrap_or_else(|| panic!("no dynamic port in {}", web["Resources"])) as u16;
    let got = http_get_forwarded(port, "/greeting");
    assert!(got.ends_with("hello\n"), "{got}");
    let web_pod = wait_for("the web task's pod", crate::agent::NOMAD_PATIENCE, || {
        pod_of(&world, &web_id)
    });

    // `nomad alloc exec` runs `rkt enter` in the pod.
    let out = agent.ok(&[
        "alloc",
        "exec",
        "-i=false",
        "-t=false",
        &web_id,
        "/bin/cat",
        "/etc/greeting",
    ]);
    assert_eq!(out, "hello\n");

    // `nomad job stop`: SIGINT to `rkt run-prepared`, which stops the pod and releases it.
    agent.stop_job("web");
    wait_for(
        "the web pod to be released",
        crate::agent::NOMAD_PATIENCE,
        || (!Path::new(&format!("/run/netns/rkt-{web_pod}")).exists()).then_some(()),
    );
    assert_eq!(world.state(&web_pod), "exited");

    // A task that ignores SIGTERM and SIGINT: Nomad SIGKILLs `rkt run-prepared` after its
    // kill_timeout. The pod's app dies with it, and its network is released by the next rkt
    // command that starts pods (here, the next job's), with no `rkt gc`.
    agent.run_job(
        "stubborn",
        &job(
            "stubborn",
            "service",
            "",
            "kill_timeout = \"2s\"",
            &format!(
                "image = \"{image}\"\n        command = \"/bin/sh\"\n        \
                 args = [\"-c\", \"trap '' TERM INT; while true; do sleep 1; done\"]"
            ),
        ),
    );
    let stubborn = agent.wait_alloc("stubborn", "the stubborn task to run", |a| {
        (a["ClientStatus"] == "running").then(|| a.clone())
    });
    let stubborn_pod = wait_for(
        "the stubborn task's pod",
        crate::agent::NOMAD_PATIENCE,
        || pod_of(&world, &alloc_id(&stubborn)),
    );
    agent.stop_job("stubborn");
    let evs = events(
        &agent.get(&format!("/v1/allocation/{}", alloc_id(&stubborn))),
        "t",
    );
    assert!(
        evs.iter()
            .any(|(t, m)| t == "Terminated" && m.contains("Signal: 9")),
        "Nomad did not have to SIGKILL the stubborn task: {evs:?}"
    );
    // A task whose image is missing: a clear failed event, and no pod.
    agent.run_job(
        "missing",
        &job(
            "missing",
            "batch",
            NO_RESCHEDULE,
            "",
            &format!(
                "image = \"docker://{}/test/no-such-image:v1\"",
                registry.addr
            ),
        ),
    );
    let missing = agent.wait_alloc("missing", "the missing image's task to fail", |a| {
        (a["ClientStatus"] == "failed").then(|| a.clone())
    });
    let evs = events(&missing, "t");
    assert!(
        evs.iter().any(|(t, m)| t == "Driver Failure"
            && m.contains("no-such-image")
            && m.contains("Error preparing rkt pod")),
        "{evs:?}"
    );
    // The next job's `rkt prepare` and `run-prepared` start pods: the stubborn pod, whose
    // runner Nomad killed, is released on the way, with no operator and no `rkt gc`.
    agent.run_job(
        "after",
        &job(
            "after",
            "batch",
            NO_RESCHEDULE,
            "",
            &format!("image = \"{image}\"\n        args = [\"true\"]"),
        ),
    );
    wait_for(
        "the SIGKILLed task's pod to be released",
        std::time::Duration::from_secs(20),
        || (!Path::new(&format!("/run/netns/rkt-{stubborn_pod}")).exists()).then_some(()),
    );
    assert!(
        !leaks::process_running(&stubborn_pod),
        "the SIGKILLed task's pod still has processes"
    );
    agent.wait_alloc("after", "the next job to end", |a| {
        (a["ClientStatus"] == "complete").then_some(())
    });

    for job in ["batch", "missing", "after"] {
        agent.stop_job(job);
    }
    drop(agent);
    guard.check();
}
