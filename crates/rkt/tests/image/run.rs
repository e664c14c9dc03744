//! `rkt run IMAGE` and `rkt prepare IMAGE` as a user runs them: pods from a busybox image
//! built here with umoci (an OCI layout) and pushed with skopeo to a real registry
//! (`docker-registry`) on loopback. The app is the image's Entrypoint + Cmd with its Env,
//! WorkingDir and User, on an overlay of the image's layers that rm and gc unmount, even
//! after the runner was killed. Needs root; skips with a message otherwise (under CI a
//! missing tool fails). Run under the root-tests lock (pods on the default network).

use crate::{image_common, leaks, pod_support, support};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use image_common::{busybox_layout, ready, run};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pod_support::{http_get_forwarded, mounts_under, World};

/// The layout of `busybox_layout` (tag `v1`: Entrypoint `/bin/sh -c`, Cmd
/// `echo $GREETING from $(pwd)`, Env `GREETING=hello`, WorkingDir `/etc`, a second layer
/// whiting out `/etc/remove-me`), plus tag `user` (a third layer with /etc/passwd and
/// /etc/group, User `web`) and tag `numeric` (User `4242:4343`).
fn layout(work: &Path) -> PathBuf {
    let layout = busybox_layout(work);
    let v1 = format!("{}:v1", layout.display());
    let bundle = work.join("user-bundle");
    run(Command::new("umoci")
        .args(["unpack", "--image", &v1])
        .arg(&bundle));
    let etc = bundle.join("rootfs/etc");
    fs::write(
        etc.join("passwd"),
        "root:x:0:0:root:/root:/bin/sh\nweb:x:1001:1002:Web:/srv/web:/bin/sh\n",
    )
    .unwrap();
    fs::write(
        etc.join("group"),
        "root:x:0:\nweb:x:1002:\nlogs:x:1003:web\n",
    )
    .unwrap();
    let user = format!("{}:user", layout.display());
    run(Command::new("umoci")
        .args(["repack", "--image", &user])
        .arg(&bundle));
    run(Command::new("umoci").args(["config", "--image", &user, "--config.user", "web"]));
    run(Command::new("umoci").args([
        "config",
        "--image",
        &v1,
        "--tag",
        "numeric",
        "--config.user",
        "4242:4343",
    ]));
    fs::remove_dir_all(&bundle).unwrap();
    layout
}

fn ready_for_images(test: &str) -> bool {
    ready(test, &["umoci", "skopeo", "docker-registry"])
}

#[test]
fn image_apps_from_a_layout_and_a_registry() {
    if !ready_for_images("image_apps_from_a_layout_and_a_registry") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let none = "--net=none";

    // Entrypoint + Cmd, Env and WorkingDir; the second layer's whiteout hides a file.
    world
        .rkt(&["run", none, &v1])
        .run()
        .assert_success()
        .assert_stdout_contains("hello from /etc\n");
    world
        .rkt(&[
            "run",
            none,
            &v1,
            "--",
            "test ! -e /etc/remove-me && cat /etc/second",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("layer 2\n");
    // --set-env over the image's Env; -- ARGS replace the Cmd, not the Entrypoint.
    world
        .rkt(&["run", none, "--set-env=GREETING=bye", &v1])
        .run()
        .assert_success()
        .assert_stdout_contains("bye from /etc\n");
    world
        .rkt(&["run", none, &v1, "--", "echo replaced $GREETING"])
        .run()
        .assert_success()
        .assert_stdout_contains("replaced hello\n");
    // --exec replaces the Entrypoint and drops the Cmd, before or after the image.
    world
        .rkt(&[
            "run",
            none,
            &v1,
            "--exec=/bin/busybox",
            "--",
            "echo",
            "exec'd",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("exec'd\n");
    world
        .rkt(&["run", none, "--exec=/bin/busybox", &v1, "--", "pwd"])
        .run()
        .assert_success()
        .assert_stdout_contains("/etc\n");
    world
        .rkt(&["run", none, &v1, "stray"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("\"stray\"");
    // A pod that fails to start after its overlay was mounted leaves no mount.
    world
        .rkt(&["run", none, &v1, "--exec=/no/such/program"])
        .run()
        .assert_failure()
        .assert_stderr_contains("/no/such/program");
    assert!(mounts_under(&world.path("data")).is_empty());

    // User: a name from the image's own /etc/passwd and /etc/group, and numeric IDs.
    // HOME is the user's, from its passwd entry ("/" without one), unless set.
    let ids = "/bin/busybox id -u; /bin/busybox id -g; /bin/busybox id -G; echo $HOME";
    let user = format!("oci:{}:user", layout.display());
    world
        .rkt(&["run", none, &user, "--", ids])
        .run()
        .assert_success()
        .assert_stdout_contains("1001\n1002\n1002 1003\n/srv/web\n");
    world
        .rkt(&[
            "run",
            none,
            "--set-env=HOME=/mine",
            &user,
            "--",
            "echo $HOME",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("/mine\n");
    let numeric = format!("oci:{}:numeric", layout.display());
    world
        .rkt(&["run", none, &numeric, "--", ids])
        .run()
        .assert_success()
        .assert_stdout_contains("4242\n4343\n4343\n/\n");
    world
        .rkt(&["run", none, &v1, "--", "echo $HOME"])
        .run()
        .assert_success()
        .assert_stdout_contains("/root\n");

    // The pod writes to its overlay's upper directory; the image stays as it was.
    let out = world
        .rkt(&["run", none, &v1, "--", "echo changed > /etc/greeting"])
        .run();
    out.assert_success();
    world
        .rkt(&["run", none, &v1, "--", "cat /etc/greeting"])
        .run()
        .assert_success()
        .assert_stdout_contains("hello\n");
    let layers = world.path("data/images/layers");
    assert_eq!(
        fs::read_dir(&layers).unwrap().count(),
        3,
        "v1's two, user's one"
    );
    let uppers: Vec<PathBuf> = world
        .pods()
        .iter()
        .map(|u| world.path(&format!("data/pods/{u}/overlay/upper/etc/greeting")))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(uppers.len(), 1, "one pod wrote /etc/greeting");
    assert_eq!(fs::read_to_string(&uppers[0]).unwrap(), "changed\n");
    // --no-overlay: a copy in the pod directory.
    world
        .rkt(&["run", none, "--no-overlay", &v1])
        .run()
        .assert_success()
        .assert_stdout_contains("hello from /etc\n");
    assert!(mounts_under(&world.path("data")).is_empty());

    // From the registry (plain HTTP only when asked); status and list name the image.
    let (registry, remote) = image_common::registry_with(&layout);
    let uuid_file = world.path("uuid-registry");
    let save = format!("--uuid-file-save={}", uuid_file.display());
    let out = world
        .rkt(&["run", none, "--insecure-options=http", &save, &remote])
        .run();
    out.assert_success()
        .assert_stdout_contains("hello from /etc\n");
    // The fetch draws its progress line only on a terminal: none in a pipe.
    assert!(
        !out.stderr().contains("fetching blob") && !out.stderr().contains('\r'),
        "{:?}",
        out.stderr()
    );
    let uuid = fs::read_to_string(&uuid_file).unwrap();
    let id = world
        .rkt(&["fetch", "--pull-policy=never", &remote])
        .run()
        .stdout()
        .trim()
        .to_string();
    assert!(id.starts_with("sha256:"), "{id}");
    let status = world.status_json(&uuid);
    assert_eq!(status["apps"][0]["image_id"], id.as_str());
    assert_eq!(status["apps"][0]["name"], "busybox");
    let name = format!("{}/test/busybox:v1", registry.addr);
    let list = world.rkt(&["list", "--full", "--no-legend"]).run();
    let row = list
        .stdout()
        .lines()
        .find(|l| l.starts_with(&uuid))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{uuid} not listed:\n{}", list.stdout()));
    let cols: Vec<&str> = row.split('\t').collect();
    assert_eq!((cols[2], cols[3]), (name.as_str(), id.as_str()), "{row}");
    // A stored name and an ID prefix are images too; a host command stays one.
    for stored in [name.as_str(), &id[7..19], &id] {
        world
            .rkt(&["run", none, stored])
            .run()
            .assert_success()
            .assert_stdout_contains("hello from /etc\n");
    }
    world
        .rkt(&["run", none, "echo", "host command"])
        .run()
        .assert_success()
        .assert_stdout_contains("host command\n");

    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
    assert!(world.pods().is_empty());
}

#[test]
fn an_image_pod_on_the_default_network_has_an_address() {
    if !ready_for_images("an_image_pod_on_the_default_network_has_an_address") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    world
        .rkt(&[
            "run",
            "--net=default",
            &v1,
            "--exec=/bin/busybox",
            "--",
            "ip",
            "-4",
            "-o",
            "addr",
            "show",
            "dev",
            "eth0",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("inet 172.16.28.");
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

#[test]
fn kill_9_of_an_image_pod_runner_then_gc_or_rm_unmounts_the_overlay() {
    if !ready_for_images("kill_9_of_an_image_pod_runner_then_gc_or_rm_unmounts_the_overlay") {
        return;
    }
    let mut world = World::new(support::RKT);
    let guard = leaks::Guard::new(world.leak_ctx());
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        &v1,
        "--exec=/bin/busybox",
        "--",
        "sleep",
        "600",
    ]);
    world.wait_running(&uuid);
    let rootfs = world.path(&format!("data/pods/{uuid}/rootfs"));
    let mounted = mounts_under(&world.path("data"));
    assert_eq!(mounted.len(), 1, "{mounted:?}");
    assert!(Path::new(&mounted[0]).ends_with(format!("{uuid}/rootfs")));
    // The leak checker sees the overlay for what it is.
    let leaked = guard.leaked();
    assert!(
        leaked
            .iter()
            .any(|l| l.contains("rootfs") && l.contains("mount")),
        "{leaked:?}"
    );

    let pid = world.child(index).id() as i32;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    world.wait_child(index);
    // The pod's init dies with its stage; the overlay stays mounted until gc.
    world.wait_exited(&uuid);
    assert!(rootfs.exists());
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
    assert!(mounts_under(&world.path("data")).is_empty());
    assert!(!world.path(&format!("data/pods/{uuid}")).exists());

    // The same with `rkt rm` instead of gc.
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        &v1,
        "--exec=/bin/busybox",
        "--",
        "sleep",
        "600",
    ]);
    world.wait_running(&uuid);
    assert_eq!(mounts_under(&world.path("data")).len(), 1);
    let pid = world.child(index).id() as i32;
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    world.wait_child(index);
    world.wait_exited(&uuid);
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(mounts_under(&world.path("data")).is_empty());
    assert!(!world.path(&format!("data/pods/{uuid}")).exists());
    guard.check();
}

#[test]
fn image_rm_and_gc_keep_an_image_a_pod_uses() {
    if !ready_for_images("image_rm_and_gc_keep_an_image_a_pod_uses") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let out = world.rkt(&["prepare", &v1]).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let id = world
        .rkt(&["fetch", "--pull-policy=never", &v1])
        .run()
        .stdout()
        .trim()
        .to_string();
    // Refused while the pod is prepared, and once it ran and exited.
    world
        .rkt(&["image", "rm", &id])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains(&uuid);
    world
        .rkt(&["run-prepared", "--net=none", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains("hello from /etc\n");
    world
        .rkt(&["image", "rm", &id])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains(&uuid);
    world
        .rkt(&["image", "gc", "--grace-period=0s"])
        .run()
        .assert_success();
    world
        .rkt(&["image", "list", "--no-legend"])
        .run()
        .assert_stdout_contains(&id[7..19]);
    let layers = world.path("data/images/layers");
    assert_eq!(fs::read_dir(&layers).unwrap().count(), 2);

    // Once the pod is gone the image goes, with its unpacked layers.
    world.rkt(&["rm", &uuid]).run().assert_success();
    world.rkt(&["image", "rm", &id]).run().assert_success();
    world
        .rkt(&["image", "gc", "--grace-period=0s"])
        .run()
        .assert_success()
        .assert_stdout_contains("removed 2 unpacked layer(s)");
    assert_eq!(fs::read_dir(&layers).unwrap().count(), 0);
}

#[test]
fn a_bad_image_reference_is_an_error_naming_it_and_creates_nothing() {
    if !ready_for_images("a_bad_image_reference_is_an_error_naming_it_and_creates_nothing") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let missing = format!("oci:{}:v1", world.path("no-such-layout").display());
    for args in [
        &["run", "--net=none", "docker://Bad/Name"][..],
        &["run", "--net=none", missing.as_str()][..],
        &["prepare", missing.as_str()][..],
    ] {
        world
            .rkt(args)
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains(args[args.len() - 1]);
    }
    world
        .rkt(&["run", "--net=none", "--exec=/bin/true", "true"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--exec needs an IMAGE");
    assert!(world.pods().is_empty(), "{:?}", world.pods());
    let blobs = world.path("data/images/blobs/sha256");
    assert_eq!(fs::read_dir(&blobs).map_or(0, |d| d.count()), 0);
}

/// `--port=NAME:HOSTPORT` forwards a port the image exposes by its docker2aci name
/// (`80/tcp` is `80-tcp`): busybox httpd in an image pod on the default network answers
/// through 127.0.0.1:HOSTPORT. A name the image does not expose is an error listing the
/// names it does, before any pod exists.
#[test]
fn port_by_the_name_of_an_exposed_port() {
    if !ready_for_images("port_by_the_name_of_an_exposed_port") {
        return;
    }
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = busybox_layout(world.root.path());
    let served = image_common::tag_exposing(&layout, "served", &["80/tcp", "53/udp"]);
    let held = pod_support::held_port();
    let port = held.port;

    world
        .rkt(&[
            "run",
            "--net=default",
            &format!("--port=443-tcp:{port}"),
            &served,
        ])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains(&format!("--port=443-tcp:{port}"))
        .assert_stderr_contains("exposes")
        .assert_stderr_contains("80-tcp")
        .assert_stderr_contains("53-udp");
    assert!(world.pods().is_empty());
    // A prepared pod keeps the names its image exposes for run-prepared.
    let prepared = world.rkt(&["prepare", &served]).run();
    prepared.assert_success();
    let prepared = prepared.stdout().trim().to_string();
    world
        .rkt(&[
            "run-prepared",
            "--net=default",
            &format!("--port=443-tcp:{port}"),
            &prepared,
        ])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("(app layout exposes 53-udp, 80-tcp)");
    world
        .rkt(&["status", &prepared])
        .run()
        .assert_success()
        .assert_stdout_contains("state=prepared\n");
    world.rkt(&["rm", &prepared]).run().assert_success();

    let forward = format!("--port=80-tcp:127.0.0.1:{port}");
    let mut args = vec!["--net=default", forward.as_str(), served.as_str()];
    args.extend(image_common::HTTPD_ETC);
    let (uuid, index) = world.spawn_run(&args);
    world.wait_running(&uuid);
    let body = http_get_forwarded(port, "/greeting");
    assert!(body.ends_with("hello\n"), "{body}");
    world
        .rkt(&["status", &uuid])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("ports=tcp:127.0.0.1:{port}->80\n"));
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    drop(held);
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

/// Two pods from an image on the `default` network reach each other: one serves a file of
/// the image with busybox httpd, the other fetches it from the first one's address with
/// busybox wget. Nothing is left on the host afterwards.
#[test]
fn two_image_pods_on_the_default_network_reach_each_other() {
    if !ready_for_images("two_image_pods_on_the_default_network_reach_each_other") {
        return;
    }
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let mut args = vec!["--net=default", v1.as_str()];
    args.extend(image_common::HTTPD_ETC);
    let (server, index) = world.spawn_run(&args);
    world.wait_running(&server);
    let ip = world.status_json(&server)["networks"][0]["ip"]
        .as_str()
        .expect("the server pod's address")
        .to_string();
    assert!(ip.starts_with("172.16.28."), "{ip}");
    // The server may need a moment to listen: the client retries inside its pod.
    let script = format!(
        "for i in $(seq 50); do wget -q -O - http://{ip}/greeting && exit 0; sleep 0.1; done; exit 1"
    );
    world
        .rkt(&[
            "run",
            "--net=default",
            &v1,
            "--exec=/bin/sh",
            "--",
            "-c",
            &script,
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("hello\n");
    world.rkt(&["stop", &server]).run().assert_success();
    world.wait_child(index);
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

/// With `--private-users` an image pod gets its own copy of the image owned by the pod's id
/// range: root in the pod owns the image's files (as without the flag) and can change them;
/// on the host they belong to the range's ids, never to host root.
#[test]
fn an_image_pod_with_private_users_owns_its_copy_of_the_image() {
    use std::os::unix::fs::MetadataExt;
    if !ready_for_images("an_image_pod_with_private_users_owns_its_copy_of_the_image") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let uuid_file = world.path("uuid");
    let save = format!("--uuid-file-save={}", uuid_file.display());
    world
        .rkt(&[
            "run",
            "--net=none",
            "--private-users",
            &save,
            &v1,
            "--exec=/bin/sh",
            "--",
            "-c",
            "id -u; stat -c %u:%g / /bin /etc/second; echo new > /new; \
             echo changed >> /etc/second; cat /etc/second",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("0\n0:0\n0:0\n0:0\nlayer 2\nchanged\n");
    let uuid = fs::read_to_string(&uuid_file).unwrap();
    let base = world.status_json(&uuid)["isolation"]["userNs"]["hostBase"]
        .as_u64()
        .expect("the pod's host id base") as u32;
    assert!(base >= 1 << 24, "{base}");
    let rootfs = world.path(&format!("data/pods/{uuid}/rootfs"));
    eprintln!(
        "{:?}",
        std::process::Command::new("find")
            .arg(world.path("data/pods"))
            .arg("-maxdepth")
            .arg("3")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    );
    for file in ["", "bin", "bin/busybox", "new", "etc/second"] {
        let meta = fs::symlink_metadata(rootfs.join(file)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (base, base), "{file}");
    }
    // The copy is the pod's alone: another pod of the image sees the image unchanged.
    let other = world
        .rkt(&["run", "--net=none", &v1, "--", "cat /etc/second"])
        .run();
    other.assert_success();
    assert_eq!(other.stdout(), "layer 2\n");
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(!rootfs.exists());
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

/// Issue 22, defect 1: `--user=NAME` and `--group=NAME` on an image pod are the image's own
/// users and groups, not the host's: `web` (only in the image) runs as the image's 1001,
/// `daemon` (only on the host) is an error naming the image's /etc/passwd, found before any
/// pod exists. `prepare` resolves them the same way.
#[test]
fn user_and_group_names_on_an_image_pod_resolve_in_the_images_etc_passwd() {
    if !ready_for_images("user_and_group_names_on_an_image_pod_resolve_in_the_images_etc_passwd") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = layout(world.root.path());
    let user = format!("oci:{}:user", layout.display());
    let v1 = format!("oci:{}:v1", layout.display());
    let ids = "/bin/busybox id -u; /bin/busybox id -g";
    world
        .rkt(&[
            "run",
            "--net=none",
            "--user=web",
            "--group=logs",
            &user,
            "--",
            ids,
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("1001\n1003\n");
    // The image's numbers, even over the image's own User (root here).
    world
        .rkt(&["run", "--net=none", "--user=root", &user, "--", ids])
        .run()
        .assert_success()
        .assert_stdout_contains("0\n0\n");
    let pods = world.pods().len();
    for (flags, image, what) in [
        (
            &["--user=daemon"][..],
            &user,
            format!("--user=daemon: no such user in image {user}'s /etc/passwd"),
        ),
        (
            &["--group=daemon"][..],
            &user,
            format!("--group=daemon: no such group in image {user}'s /etc/group"),
        ),
        // v1 has no /etc/passwd at all: root is still a name it lacks.
        (
            &["--user=root"][..],
            &v1,
            format!("--user=root: no such user in image {v1}'s /etc/passwd"),
        ),
    ] {
        for verb in ["run", "prepare"] {
            let mut args = vec![verb, "--net=none"];
            if verb == "prepare" {
                args.pop();
            }
            args.extend_from_slice(flags);
            args.extend([image.as_str(), "--", "true"]);
            world
                .rkt(&args)
                .run()
                .assert_failure()
                .assert_stderr_contains(&what);
        }
    }
    assert_eq!(world.pods().len(), pods, "a refused pod was made");
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

/// Issue 22, defect 11: an image pod has /etc/hostname (the image has none) holding its
/// hostname, as `hostname` says.
#[test]
fn etc_hostname_of_an_image_pod_is_its_hostname() {
    if !ready_for_images("etc_hostname_of_an_image_pod_is_its_hostname") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    world
        .rkt(&[
            "run",
            "--net=none",
            "--hostname=web1",
            &v1,
            "--",
            "cat /etc/hostname; hostname",
        ])
        .run()
        .assert_success()
        .assert_stdout_contains("web1\nweb1\n");
}

/// Regular files under `dir`, relative to it (what a pod wrote into its upper directory or
/// its copy of the image).
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).unwrap().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                let rel = entry.path().strip_prefix(dir).unwrap().to_path_buf();
                found.push(rel.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// Issue 22, defect 2: `--readonly-rootfs` on an image pod makes its whole root read-only:
/// `/`, the image's own directories (`/bin`, `/etc`, which the stage binds into a tmpfs to
/// add the pod's `/etc` files and mount points) and its files, with `rkt run` and with
/// `prepare` + `run-prepared`, on the overlay, with `--no-overlay` and with
/// `--private-users`. Nothing lands in the overlay's upper directory (or the copy), while a
/// volume and `/dev/shm` stay writable.
#[test]
fn readonly_rootfs_of_an_image_pod_is_read_only_and_its_upper_untouched() {
    if !ready_for_images("readonly_rootfs_of_an_image_pod_is_read_only_and_its_upper_untouched") {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let script = "for f in /new /bin/new /etc/new /etc/greeting; do \
                    echo x 2>/dev/null >> $f && echo wrote $f; done; \
                  rm /etc/second 2>/dev/null && echo removed /etc/second; \
                  mkdir /bin/d 2>/dev/null && echo made /bin/d; \
                  echo v > /data/v && echo shm > /dev/shm/s && echo writable ok";
    let volume = [
        "--volume=data,kind=empty",
        "--mount=volume=data,target=/data",
    ];
    for extra in [&[][..], &["--no-overlay"], &["--private-users"]] {
        for verb in ["run", "prepare"] {
            let mut args = vec![verb, "--readonly-rootfs"];
            if verb == "run" {
                args.push("--net=none");
            }
            args.extend_from_slice(extra);
            args.extend_from_slice(&volume);
            args.extend([v1.as_str(), "--", script]);
            let (out, uuid) = if verb == "run" {
                world.run_uuid(&args[1..])
            } else {
                let out = world.rkt(&args).run();
                out.assert_success();
                let uuid = out.stdout().trim().to_string();
                (
                    world.rkt(&["run-prepared", "--net=none", &uuid]).run(),
                    uuid,
                )
            };
            let what = format!("{verb} {extra:?}");
            out.assert_success();
            assert_eq!(out.stdout(), "writable ok\n", "{what}");
            let pod = world.path(&format!("data/pods/{uuid}"));
            let written = if extra.is_empty() {
                files_under(&pod.join("overlay/upper"))
            } else {
                let copy = pod.join("rootfs");
                assert_eq!(
                    fs::read_to_string(copy.join("etc/greeting")).unwrap(),
                    "hello\n",
                    "{what}"
                );
                ["new", "bin/new", "etc/new", "bin/d"]
                    .into_iter()
                    .filter(|f| copy.join(f).exists())
                    .map(String::from)
                    .collect()
            };
            assert!(written.is_empty(), "{what}: the pod wrote {written:?}");
        }
    }
    world
        .rkt(&["gc", "--grace-period=0s"])
        .run()
        .assert_success();
}

/// The command line Nomad's rkt driver gives `rkt prepare` (issue 25): `--set-env` before
/// the image (every app's), then the image and its own options, rkt 1.30's per-app ones:
/// `--exec`, `--memory=BYTES`, `--cpu=N` (CPUs, as rkt read a bare number), and also
/// `--cpu-shares`, `--oom-score-adj`, `--annotation`. The manifest keeps them as the app's;
/// `run-prepared` runs the app in a cgroup of its own with its score and variables.
#[test]
fn nomad_prepare_with_the_apps_options_after_its_image() {
    if !ready(
        "nomad_prepare_with_the_apps_options_after_its_image",
        &["umoci"],
    ) {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let own: i16 = fs::read_to_string("/proc/self/oom_score_adj")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let raised = (own + 10).min(1000).to_string();
    let oom = format!("--oom-score-adj={raised}");
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let mut args = vec![
        "prepare",
        "--set-env=NOMAD_TASK_NAME=web",
        &v1,
        "--exec=/bin/sh",
        "--memory=268435456",
        "--cpu=100",
        "--cpu-shares=512",
        &oom,
        "--annotation=nomad/alloc=a1",
        "--",
        "-c",
        "echo task $NOMAD_TASK_NAME; /bin/busybox grep -E ':(memory|cpu|cpu,cpuacct):' \
         /proc/self/cgroup; /bin/busybox cat /proc/self/oom_score_adj",
    ];
    if v2 {
        // An app's own limits need cgroup v1: refused, nothing made.
        let before = world.pods().len();
        world
            .rkt(&args)
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains("cgroup v1");
        assert_eq!(world.pods().len(), before);
        args.retain(|a| !a.starts_with("--memory") && !a.starts_with("--cpu"));
    }
    let out = world.rkt(&args).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(world.path(&format!("data/pods/{uuid}/pod.json"))).unwrap(),
    )
    .unwrap();
    let app = &manifest["apps"][0];
    let name = app["name"].as_str().unwrap().to_string();
    assert_eq!(app["annotations"], serde_json::json!({"nomad/alloc": "a1"}));
    assert_eq!(app["oomScoreAdjust"], raised.parse::<i64>().unwrap());
    assert!(
        app["isolators"].get("limits").is_none(),
        "the pod has no limit of its own: {app}"
    );
    if !v2 {
        assert_eq!(
            app["isolators"]["ownLimits"],
            serde_json::json!({"memory": 268435456, "cpuMillis": 100000, "cpuShares": 512})
        );
    }
    let out = world.rkt(&["run-prepared", "--net=none", &uuid]).run();
    out.assert_success();
    let text = out.stdout();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "task web");
    assert_eq!(*lines.last().unwrap(), raised);
    if !v2 {
        let leaf = format!("/{uuid}/app-{name}");
        let cgroups: Vec<&&str> = lines[1..lines.len() - 1].iter().collect();
        assert!(
            cgroups.len() >= 2 && cgroups.iter().all(|l| l.ends_with(&leaf)),
            "the app is not in its own cgroup {leaf}: {text}"
        );
    }

    // rkt's --store-only on prepare and run: an image not stored is not fetched.
    let missing = format!("oci:{}:v9", layout.display());
    let before = world.pods().len();
    for cmd in ["prepare", "run"] {
        world
            .rkt(&[cmd, "--store-only", &missing])
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains("never");
    }
    assert_eq!(world.pods().len(), before);
}

/// As Nomad stops an image task: SIGINT to `rkt run-prepared` (the default network, a
/// `--port`) gives the app SIGTERM and leaves nothing, the overlay included; after SIGKILL
/// of the runner of an app that ignores SIGTERM, the next `rkt status` releases the pod,
/// unmounting its overlay, without `rkt gc`.
#[test]
fn sigint_or_sigkill_of_run_prepared_of_an_image_pod_leaves_no_overlay_and_no_network() {
    if !ready_for_images(
        "sigint_or_sigkill_of_run_prepared_of_an_image_pod_leaves_no_overlay_and_no_network",
    ) {
        return;
    }
    let world = World::new(support::RKT);
    let guard = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = busybox_layout(world.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let host = pod_support::held_port();
    let port = format!("--port={}:80", host.port);
    let start = |script: &str| {
        let out = world
            .rkt(&[
                "prepare",
                &v1,
                "--exec=/bin/busybox",
                "--",
                "sh",
                "-c",
                script,
            ])
            .run();
        out.assert_success();
        let uuid = out.stdout().trim().to_string();
        guard.remember();
        let runner = world
            .command(&["run-prepared", "--net=default", &port, &uuid])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        world.wait_running(&uuid);
        assert_eq!(mounts_under(&world.data()).len(), 1);
        (uuid, runner)
    };

    let (uuid, runner) = start("trap 'echo TERM; exit 7' TERM; while :; do sleep 1; done");
    kill(Pid::from_raw(runner.id() as i32), Signal::SIGINT).unwrap();
    let out = runner.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(mounts_under(&world.data()).is_empty());
    pod_support::assert_no_netns(&uuid);

    let (uuid, mut runner) = start("trap '' TERM INT; while :; do sleep 1; done");
    kill(Pid::from_raw(runner.id() as i32), Signal::SIGINT).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    runner.kill().unwrap();
    runner.wait().unwrap();
    world.rkt(&["status", &uuid]).run().assert_success();
    test_kit::wait_for("the pod released", test_kit::PATIENCE, || {
        guard.leaked().is_empty().then_some(())
    });
    assert!(mounts_under(&world.data()).is_empty());
    pod_support::assert_no_netns(&uuid);
    assert_eq!(world.state(&uuid), "exited");
}
