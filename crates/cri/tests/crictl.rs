//! rkt-cri as a node operator meets it, driven by `crictl` (cri-tools 1.26.1, built by
//! `../shared/cri-tools/build /tmp/critest-bin`; `$CRICTL` names another): info, version,
//! pull through a registry mirror, images, runp, create, start, ps, pods, inspect, inspectp,
//! logs, exec, stats, stop, rm, stopp, rmp, rmi; and the server killed with -9 and started
//! again while a pod runs, which it then finds. The pods use the host's network, so nothing
//! but the loopback registry is touched. Needs root, umoci, skopeo, docker-registry and
//! crictl; skips with a message otherwise.

#[path = "../../image/tests/common/mod.rs"]
mod image_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::{json, Value};
use test_kit::{wait_for, KillOnDrop, PATIENCE};

/// The test image, as pods ask for it (the loopback registry serves it as `mirror.test`'s
/// mirror).
const IMAGE: &str = "mirror.test/test/busybox:v1";

/// crictl, if built; under CI a missing one fails (tools/test.sh builds it).
fn crictl_path() -> Option<PathBuf> {
    let path = std::env::var_os("CRICTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/critest-bin/crictl"));
    if !path.is_file() && std::env::var_os("CI").is_some() {
        panic!(
            "no crictl at {} (tools/test.sh builds it from ../shared/cri-tools)",
            path.display()
        );
    }
    path.is_file().then_some(path)
}

/// What every test here starts from: its work directory, a loopback registry holding
/// busybox (reached as the mirror of `mirror.test`) and a server; `None` (the test skips,
/// saying why) without root, the image tools or crictl.
fn setup(test: &str) -> Option<(tempfile::TempDir, image_common::Registry, Server)> {
    if !image_common::ready(test, &["umoci", "skopeo", "docker-registry"]) {
        return None;
    }
    let Some(crictl) = crictl_path() else {
        eprintln!(
            "skipping {test}: no crictl (build it with ../shared/cri-tools/build \
             /tmp/critest-bin, or set $CRICTL)"
        );
        return None;
    };
    let work = tempfile::tempdir().unwrap();
    let layout = image_common::busybox_layout(work.path());
    let (registry, _) = image_common::registry_with(&layout);
    let server = Server::start(work.path(), crictl, &registry.addr);
    Some((work, registry, server))
}

/// A server on a socket of its own, with its own data and configuration directories.
struct Server {
    child: Option<Child>,
    socket: PathBuf,
    /// The data directory (`--dir`).
    data: PathBuf,
    args: Vec<String>,
    crictl: PathBuf,
}

impl Server {
    fn start(work: &Path, crictl: PathBuf, registry: &str) -> Server {
        let conf = work.join("etc");
        let net = conf.join("net.d");
        std::fs::create_dir_all(&net).unwrap();
        // mirror.test is served by the loopback registry; images keep their mirror.test name.
        let hosts = conf.join("certs.d/mirror.test");
        std::fs::create_dir_all(&hosts).unwrap();
        std::fs::write(
            hosts.join("hosts.toml"),
            format!(
                "server = \"https://mirror.test\"\n\n[host.\"http://{registry}\"]\n  \
                 capabilities = [\"pull\", \"resolve\"]\n"
            ),
        )
        .unwrap();
        let socket = work.join("cri.sock");
        let data = work.join("data");
        let args = vec![
            format!("--listen=unix://{}", socket.display()),
            format!("--dir={}", data.display()),
            format!("--local-config={}", conf.display()),
            format!("--net-conf-dir={}", net.display()),
        ];
        let mut server = Server {
            child: None,
            socket,
            data,
            args,
            crictl,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_rkt-cri"))
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start rkt-cri");
        self.child = Some(child);
        wait_for("rkt-cri to answer", PATIENCE, || {
            self.crictl(&["version"]).status.success().then_some(())
        });
    }

    /// The leak checker's context for this server's pods: its data directory (the pods use
    /// the host's network, so no network, subnet or link is theirs).
    fn leak_ctx(&self) -> leak_check::Ctx {
        leak_check::Ctx::new(&self.data)
    }

    fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn crictl(&self, args: &[&str]) -> Output {
        let endpoint = format!("unix://{}", self.socket.display());
        Command::new(&self.crictl)
            .args([
                "--runtime-endpoint",
                &endpoint,
                "--image-endpoint",
                &endpoint,
            ])
            .args(["--timeout", "60s"])
            .args(args)
            .output()
            .unwrap()
    }

    /// crictl's stdout as JSON (`inspect`, `inspectp`, `info`, `stats -o json`), the command
    /// having succeeded.
    fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("crictl {args:?}: not JSON ({e}): {text}"))
    }

    /// crictl's stdout, the command having succeeded.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.crictl(args);
        assert!(
            out.status.success(),
            "crictl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.crictl(&["rmp", "-fa"]);
        }
        self.kill_9();
    }
}

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).unwrap();
    path.display().to_string()
}

/// Writes `<work>/<name>.json`, the config of container `name` of [`IMAGE`] running
/// `sh -c SCRIPT` in the host's network and in PID namespace mode `pid` (0 the pod's, 1 its
/// own, 2 the host's); returns its path.
fn shell_container(work: &Path, name: &str, script: &str, pid: u8) -> String {
    let config = json!({
        "metadata": {"name": name},
        "image": {"image": IMAGE},
        "command": ["sh", "-c", script],
        "linux": {"security_context": {"namespace_options": {"network": 2, "pid": pid}}}
    });
    write(&work.join(format!("{name}.json")), &config.to_string())
}

#[test]
fn crictl_drives_pods_containers_and_images() {
    let Some((work, registry, mut server)) = setup("crictl_drives_pods_containers_and_images")
    else {
        return;
    };
    let guard = leak_check::Guard::new(server.leak_ctx());

    // info: the runtime is ready; the network is not until a configuration is written, and
    // one written now is seen without a restart.
    let info = server.json(&["info"]);
    let conditions = &info["status"]["conditions"];
    assert_eq!(conditions[0]["type"], "RuntimeReady");
    assert_eq!(conditions[0]["status"], true);
    assert_eq!(conditions[1]["type"], "NetworkReady");
    assert_eq!(conditions[1]["status"], false, "{info}");
    assert!(
        conditions[1]["message"].as_str().unwrap().contains("net.d"),
        "{info}"
    );
    write(
        &work.path().join("etc/net.d/10-late.conflist"),
        r#"{"cniVersion":"1.0.0","name":"late","plugins":[{"type":"bridge","bridge":"rktcri-unused"}]}"#,
    );
    let info = server.json(&["info"]);
    assert_eq!(info["status"]["conditions"][1]["status"], true, "{info}");
    assert!(server.ok(&["version"]).contains("RuntimeName:  rkt"));

    // pull through the mirror: the image keeps the name it was asked by.
    server.ok(&["pull", IMAGE]);
    let images = server.ok(&["images"]);
    assert!(
        images.contains("mirror.test/test/busybox") && images.contains("v1"),
        "{images}"
    );

    // a pod in the host's network, a container in it.
    let logs = work.path().join("logs");
    let pod = write(
        &work.path().join("pod.json"),
        &format!(
            r#"{{"metadata":{{"name":"web","namespace":"test","uid":"u1"}},
                "log_directory":"{}","labels":{{"app":"web"}},
                "linux":{{"security_context":{{"namespace_options":{{"network":2}}}}}}}}"#,
            logs.display()
        ),
    );
    let ctr = write(
        &work.path().join("ctr.json"),
        &format!(
            r#"{{"metadata":{{"name":"c1"}},"image":{{"image":"{IMAGE}"}},
                "command":["sh","-c","echo hello; echo oops >&2; exec sleep 1000"],
                "log_path":"c1.log","linux":{{}}}}"#
        ),
    );
    let pod_id = server.ok(&["runp", &pod]);
    assert_eq!(pod_id.len(), 32, "{pod_id}");
    guard.remember();
    assert!(server.ok(&["pods"]).contains("web"));
    let ctr_id = server.ok(&["create", &pod_id, &ctr, &pod]);
    assert!(ctr_id.starts_with(&pod_id), "{ctr_id}");
    server.ok(&["start", &ctr_id]);
    let ps = server.ok(&["ps"]);
    assert!(ps.contains("Running") && ps.contains("c1"), "{ps}");
    wait_for("the container's log", PATIENCE, || {
        let log = std::fs::read_to_string(logs.join("c1.log")).unwrap_or_default();
        (log.contains(" stdout F hello") && log.contains(" stderr F oops")).then_some(())
    });
    let out = server.crictl(&["logs", &ctr_id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    assert_eq!(
        server.ok(&["exec", "-s", &ctr_id, "sh", "-c", "echo in it"]),
        "in it"
    );
    let out = server.crictl(&[
        "exec",
        "-s",
        "--timeout",
        "1",
        &ctr_id,
        "sh",
        "-c",
        "sleep 300",
    ]);
    assert!(!out.status.success(), "a timed-out exec fails");
    // ... and its command was killed.
    wait_for("the timed-out command to be gone", PATIENCE, || {
        let ps = server.ok(&["exec", "-s", &ctr_id, "sh", "-c", "busybox ps"]);
        (!ps.contains("sleep 300")).then_some(())
    });
    let inspect = server.json(&["inspect", &ctr_id]);
    assert_eq!(inspect["status"]["state"], "CONTAINER_RUNNING", "{inspect}");
    assert_eq!(inspect["status"]["image"]["image"], IMAGE);
    assert_eq!(
        inspect["status"]["logPath"],
        logs.join("c1.log").display().to_string()
    );
    let inspectp = server.json(&["inspectp", &pod_id]);
    assert_eq!(inspectp["status"]["state"], "SANDBOX_READY");
    assert_eq!(inspectp["status"]["labels"]["app"], "web");
    let stats = server.json(&["stats", "-o", "json"]);
    let memory = &stats["stats"][0]["memory"]["workingSetBytes"]["value"];
    assert!(memory.as_str().unwrap_or("0") != "0", "{stats}");

    // killed with -9 and started again, the server finds the pod and its container.
    server.kill_9();
    server.spawn();
    assert!(server.ok(&["pods", "-q"]).contains(&pod_id));
    assert!(server.ok(&["ps", "-q"]).contains(&ctr_id));

    server.ok(&["stop", &ctr_id]);
    let inspect = server.json(&["inspect", &ctr_id]);
    assert_eq!(inspect["status"]["state"], "CONTAINER_EXITED", "{inspect}");
    server.ok(&["rm", &ctr_id]);
    assert_eq!(server.ok(&["ps", "-a", "-q"]), "");
    server.ok(&["stopp", &pod_id]);
    server.ok(&["rmp", &pod_id]);
    assert_eq!(server.ok(&["pods", "-q"]), "");
    server.ok(&["rmi", IMAGE]);
    assert!(!server.ok(&["images"]).contains("mirror.test"));
    // Nothing is left of the pod in the data directory.
    let store = rkt::pod::PodStore::new(work.path().join("data/pods"));
    assert_eq!(store.list().unwrap().len(), 0);
    guard.check();
    drop(registry);
}

/// The pod IDs crictl lists (all states).
fn pod_ids(server: &Server) -> Vec<String> {
    server
        .ok(&["pods", "-q"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// A sandbox ID as its pod's UUID.
fn uuid_of(id: &str) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        &id[..8],
        &id[8..12],
        &id[12..16],
        &id[16..20],
        &id[20..32]
    )
}

#[test]
fn killed_during_run_pod_sandbox_and_create_container_then_removed_leaves_nothing() {
    let test = "killed_during_run_pod_sandbox_and_create_container_then_removed_leaves_nothing";
    let Some((work, registry, mut server)) = setup(test) else {
        return;
    };
    let mut guard = leak_check::Guard::new(server.leak_ctx());
    server.ok(&["pull", IMAGE]);
    let pod = write(
        &work.path().join("pod.json"),
        r#"{"metadata":{"name":"k","namespace":"test","uid":"u2"},
            "linux":{"security_context":{"namespace_options":{"network":2}}}}"#,
    );
    let ctr = write(
        &work.path().join("ctr.json"),
        &format!(
            r#"{{"metadata":{{"name":"c"}},"image":{{"image":"{IMAGE}"}},
                "command":["sh","-c","exec sleep 1000"],"linux":{{}}}}"#
        ),
    );
    let endpoint = format!("unix://{}", server.socket.display());
    let crictl = server.crictl.clone();
    let background = |args: &[&str]| {
        Command::new(&crictl)
            .args([
                "--runtime-endpoint",
                &endpoint,
                "--image-endpoint",
                &endpoint,
            ])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };

    // Killed while a RunPodSandbox runs: the pod's runner goes on (a process of its own);
    // the restarted server lists the pod, and removes it.
    let mut runp = background(&["runp", &pod]);
    std::thread::sleep(std::time::Duration::from_millis(40));
    server.kill_9();
    let _ = runp.wait();
    server.spawn();
    // The runner may still be starting the pod: give it the time a start takes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while pod_ids(&server).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for id in pod_ids(&server) {
        guard.add_container(&uuid_of(&id));
    }
    server.ok(&["rmp", "-fa"]);
    assert!(pod_ids(&server).is_empty());

    // Killed while a CreateContainer runs: the pod and what the container left go with
    // RemovePodSandbox.
    let pod_id = server.ok(&["runp", &pod]);
    guard.add_container(&uuid_of(&pod_id));
    let mut create = background(&["create", &pod_id, &ctr, &pod]);
    std::thread::sleep(std::time::Duration::from_millis(40));
    server.kill_9();
    let _ = create.wait();
    server.spawn();
    assert_eq!(pod_ids(&server), vec![pod_id.clone()]);
    server.ok(&["rmp", "-fa"]);
    assert!(pod_ids(&server).is_empty());
    let store = rkt::pod::PodStore::new(work.path().join("data/pods"));
    assert_eq!(store.list().unwrap().len(), 0);
    guard.check();
    drop(registry);
}

/// A container in a PID namespace of its own (`namespace_options.pid: CONTAINER`) is its
/// PID 1 and sees only its processes, while one beside it in the pod's sees both; stopped,
/// it shows exited with its exit code (the pod's init reaped it).
#[test]
fn a_container_of_its_own_pid_namespace_is_its_pid_1() {
    let test = "a_container_of_its_own_pid_namespace_is_its_pid_1";
    let Some((work, registry, server)) = setup(test) else {
        return;
    };
    let guard = leak_check::Guard::new(server.leak_ctx());
    server.ok(&["pull", IMAGE]);
    let pod = write(
        &work.path().join("pod.json"),
        r#"{"metadata":{"name":"pids","namespace":"test","uid":"u2"},
            "linux":{"security_context":{"namespace_options":{"network":2}}}}"#,
    );
    let trapping = "trap 'exit 7' TERM; while :; do sleep 1; done";
    let container = |name: &str, pid| shell_container(work.path(), name, trapping, pid);
    let pod_id = server.ok(&["runp", &pod]);
    guard.remember();
    let own = server.ok(&["create", &pod_id, &container("own", 1), &pod]);
    let shared = server.ok(&["create", &pod_id, &container("shared", 0), &pod]);
    server.ok(&["start", &own]);
    server.ok(&["start", &shared]);
    let pid_1 = |id: &str| server.ok(&["exec", "-s", id, "busybox", "cat", "/proc/1/cmdline"]);
    let shells = |id: &str| {
        server
            .ok(&[
                "exec",
                "-s",
                id,
                "sh",
                "-c",
                "busybox grep -l 'tra[p] ' /proc/[0-9]*/cmdline",
            ])
            .lines()
            .count()
    };
    assert!(pid_1(&own).starts_with("sh\0-c\0trap"), "{:?}", pid_1(&own));
    assert_eq!(shells(&own), 1, "the own namespace shows its shell alone");
    assert!(!pid_1(&shared).contains("trap"), "{:?}", pid_1(&shared));
    assert_eq!(shells(&shared), 2, "the pod's namespace shows both shells");
    server.ok(&["stop", "--timeout", "10", &own]);
    let inspect = server.json(&["inspect", &own]);
    assert_eq!(inspect["status"]["state"], "CONTAINER_EXITED", "{inspect}");
    assert_eq!(inspect["status"]["exitCode"], 7, "{inspect}");
    server.ok(&["stopp", &pod_id]);
    server.ok(&["rmp", &pod_id]);
    guard.check();
    drop(registry);
}

/// A pod in the host's PID namespace (`namespace_options.pid: NODE`): its container sees
/// the host's processes, its exit is still reported after a stop, and stopping the pod
/// ends its processes and nothing of the host's.
#[test]
fn a_pod_in_the_hosts_pid_namespace_sees_the_hosts_processes() {
    let test = "a_pod_in_the_hosts_pid_namespace_sees_the_hosts_processes";
    let Some((work, registry, server)) = setup(test) else {
        return;
    };
    let guard = leak_check::Guard::new(server.leak_ctx());
    server.ok(&["pull", IMAGE]);
    let mut bystander = KillOnDrop(Command::new("sleep").arg("300").spawn().unwrap());
    let pod = write(
        &work.path().join("pod.json"),
        r#"{"metadata":{"name":"hostpid","namespace":"test","uid":"u3"},
            "linux":{"security_context":{"namespace_options":{"network":2,"pid":2}}}}"#,
    );
    let config = |name: &str, script: &str| shell_container(work.path(), name, script, 2);
    let pod_id = server.ok(&["runp", &pod]);
    guard.remember();
    let inspectp = server.json(&["inspectp", &pod_id]);
    let options = &inspectp["status"]["linux"]["namespaces"]["options"];
    assert_eq!(options["pid"], "NODE", "{inspectp}");
    let trapped = config("trapped", "trap 'exit 7' TERM; while :; do sleep 1; done");
    let trapped = server.ok(&["create", &pod_id, &trapped, &pod]);
    let stubborn = config("stubborn", "trap '' TERM; while :; do sleep 1; done");
    let stubborn = server.ok(&["create", &pod_id, &stubborn, &pod]);
    server.ok(&["start", &trapped]);
    server.ok(&["start", &stubborn]);
    let seen = server.crictl(&[
        "exec",
        "-s",
        &trapped,
        "busybox",
        "test",
        "-d",
        &format!("/proc/{}", bystander.id()),
    ]);
    assert!(seen.status.success(), "the host's process is seen");
    server.ok(&["stop", "--timeout", "10", &trapped]);
    let inspect = server.json(&["inspect", &trapped]);
    assert_eq!(inspect["status"]["state"], "CONTAINER_EXITED", "{inspect}");
    assert_eq!(inspect["status"]["exitCode"], 7, "{inspect}");
    let stubborn_pid = server.json(&["inspect", &stubborn])["info"]["pid"]
        .as_i64()
        .unwrap();
    assert!(Path::new(&format!("/proc/{stubborn_pid}")).exists());
    server.ok(&["stopp", &pod_id]);
    wait_for("the pod's process to end", PATIENCE, || {
        (!Path::new(&format!("/proc/{stubborn_pid}")).exists()).then_some(())
    });
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "stopping the pod left the host's processes alone"
    );
    drop(bystander);
    server.ok(&["rmp", &pod_id]);
    guard.check();
    drop(registry);
}
