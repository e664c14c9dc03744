//! `rkt fetch` and `rkt image …` as a user runs them, against images made here with umoci
//! and skopeo and a real registry (`docker-registry`) on loopback. Needs root; skips with a
//! message otherwise (under CI a missing tool fails).

use crate::{image_common, support};

use image_common::{busybox_layout, ready};
use support::rkt;

#[test]
fn fetch_list_inspect_rm_and_gc() {
    if !ready(
        "fetch_list_inspect_rm_and_gc",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (registry, remote) = image_common::registry_with(&layout);
    let local = format!("oci:{}:v1", layout.display());
    let data = work.path().join("data");
    let data = data.to_str().unwrap();
    let dir = ["--dir", data];

    let out = rkt(&dir)
        .args(&["fetch", "--insecure-options=http", &remote, &local])
        .run();
    out.assert_success();
    let ids: Vec<String> = out.stdout().lines().map(str::to_string).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the same image from registry and layout");
    assert!(
        ids[0].starts_with("sha256:") && ids[0].len() == 71,
        "{ids:?}"
    );
    let id = ids[0].clone();

    // Plain HTTP only when asked; bad references and policies fail with 254, named.
    rkt(&dir)
        .args(&["fetch", "--pull-policy=update", &remote])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("--insecure-options=http");
    rkt(&dir)
        .args(&["fetch", "docker://Bad/Name"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("\"docker://Bad/Name\"");
    let missing = format!("oci:{}:v9", layout.display());
    rkt(&dir)
        .args(&["fetch", "--pull-policy=never", &missing])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("never");
    // Policy never finds a stored image by name, and an ID prefix is an image too.
    rkt(&dir)
        .args(&["fetch", "--pull-policy=never", &remote, &id[7..19]])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("{id}\n{id}\n"));

    let out = rkt(&dir).args(&["image", "list"]).run();
    out.assert_success()
        .assert_stdout_contains("ID")
        .assert_stdout_contains("IMPORT TIME")
        .assert_stdout_contains(&format!("{}/test/busybox:v1", registry.addr));
    assert_eq!(out.stdout().lines().count(), 2);
    let out = rkt(&dir).args(&["image", "list", "--no-legend"]).run();
    assert_eq!(out.stdout().lines().count(), 1);
    // Issue 22, defect 10: the ID column is 12 hex digits, no `sha256:`, as podman's, and
    // works as an image's name.
    let short = out.stdout().split_whitespace().next().unwrap().to_string();
    assert_eq!(short, id[7..19]);
    rkt(&dir)
        .args(&["image", "inspect", &short])
        .run()
        .assert_success();
    let json = rkt(&dir)
        .args(&["image", "list", "--format=json"])
        .run()
        .json();
    assert_eq!(json[0]["id"], id.as_str());
    assert_eq!(json[0]["names"].as_array().unwrap().len(), 2);

    let manifest = rkt(&dir)
        .args(&["image", "cat-manifest", &id[7..19]])
        .run()
        .json();
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 2);
    // A name without a host is a Docker Hub name: not this image.
    rkt(&dir)
        .args(&["image", "inspect", "test/busybox:v1"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("\"test/busybox:v1\" is not in the store");
    let inspect = rkt(&dir).args(&["image", "inspect", &id]).run().json();
    assert_eq!(inspect["config"]["config"]["WorkingDir"], "/etc");
    assert_eq!(inspect["config"]["config"]["Env"][0], "GREETING=hello");

    // gc keeps a fresh image but clears partial downloads.
    let partial = work.path().join("data/images/tmp/blob-killed.partial");
    std::fs::write(&partial, b"half a layer").unwrap();
    rkt(&dir)
        .args(&["image", "gc"])
        .run()
        .assert_success()
        .assert_stdout_contains("1 partial download(s)");
    assert!(!partial.exists());
    let blobs = work.path().join("data/images/blobs/sha256");
    assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 4);

    rkt(&dir)
        .args(&["image", "rm", &id, "sha256:000000000000"])
        .run()
        .assert_exit_code(254)
        .assert_stdout_contains(&format!("removed image {id}"))
        .assert_stderr_contains("\"sha256:000000000000\" is not in the store");
    rkt(&dir)
        .args(&["image", "gc", "--grace-period=0s"])
        .run()
        .assert_success()
        .assert_stdout_contains("removed 4 unreferenced blob(s)");
    assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 0);
    let out = rkt(&dir).args(&["image", "list", "--no-legend"]).run();
    assert_eq!(out.stdout(), "");
}

/// Registry mirrors (containerd's hosts.toml in `<config>/certs.d`): an image of a
/// registry that does not exist is fetched from its mirror, over plain HTTP as the file
/// says, and keeps the name it was asked by; a hosts file that cannot be used fails the
/// fetch, naming the file.
#[test]
fn fetch_through_a_mirror_keeps_the_name() {
    if !ready(
        "fetch_through_a_mirror_keeps_the_name",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (registry, _) = image_common::registry_with(&layout);
    let conf = work.path().join("etc");
    let hosts = conf.join("certs.d/mirror.invalid");
    std::fs::create_dir_all(&hosts).unwrap();
    std::fs::write(
        hosts.join("hosts.toml"),
        format!(
            "server = \"https://mirror.invalid\"\n\n[host.\"http://{}\"]\n  capabilities = \
             [\"pull\", \"resolve\"]\n",
            registry.addr
        ),
    )
    .unwrap();
    let data = work.path().join("data");
    let dir = [
        format!("--dir={}", data.display()),
        format!("--local-config={}", conf.display()),
    ];
    let dir: Vec<&str> = dir.iter().map(String::as_str).collect();
    rkt(&dir)
        .args(&["fetch", "docker://mirror.invalid/test/busybox:v1"])
        .run()
        .assert_success();
    rkt(&dir)
        .args(&["image", "list"])
        .run()
        .assert_success()
        .assert_stdout_contains("mirror.invalid/test/busybox:v1");
    std::fs::write(hosts.join("hosts.toml"), "ca = \"/nowhere\"\n").unwrap();
    rkt(&dir)
        .args(&[
            "fetch",
            "--pull-policy=update",
            "docker://mirror.invalid/test/busybox:v1",
        ])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("hosts.toml")
        .assert_stderr_contains("\"ca\"");
}

/// A fetch killed with SIGKILL while a layer streams leaves only a partial file in the
/// store's tmp/, never a blob or an image; `rkt image gc` clears it and the next fetch
/// succeeds. The layer is served through a FIFO, so the test decides when the fetch is
/// mid-blob.
#[test]
fn kill_9_during_fetch_then_gc() {
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;
    use std::time::{Duration, Instant};

    if !ready("kill_9_during_fetch_then_gc", &["umoci"]) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let data = work.path().join("data");
    let dir = ["--dir", data.to_str().unwrap()];
    // The largest blob is the busybox layer.
    let blobs = layout.join("blobs/sha256");
    let layer = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let bytes = std::fs::read(&layer).unwrap();
    assert!(
        bytes.len() > 512 * 1024,
        "busybox layer is {} bytes",
        bytes.len()
    );
    std::fs::remove_file(&layer).unwrap();
    image_common::run(std::process::Command::new("mkfifo").arg(&layer));

    let image = format!("oci:{}:v1", layout.display());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rkt"))
        .args(dir)
        .args(["fetch", &image])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Opening the FIFO for writing waits for the fetch to open it for reading.
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .open(&layer)
        .unwrap();
    fifo.write_all(&bytes[..bytes.len() / 2]).unwrap();
    let tmp = data.join("images/tmp");
    let deadline = Instant::now() + Duration::from_secs(30);
    let partial = loop {
        let found = std::fs::read_dir(&tmp).ok().and_then(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .find(|p| std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false))
        });
        if let Some(p) = found {
            break p;
        }
        assert!(Instant::now() < deadline, "no partial download appeared");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    drop(fifo);

    assert!(partial.exists());
    let stored = std::fs::read_dir(data.join("images/blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    let layer_hex = layer.file_name().unwrap().to_string_lossy().into_owned();
    assert!(!stored.contains(&layer_hex), "the half layer is not a blob");
    rkt(&dir)
        .args(&["image", "list", "--no-legend"])
        .run()
        .assert_success();
    assert_eq!(
        rkt(&dir)
            .args(&["image", "list", "--no-legend"])
            .run()
            .stdout(),
        ""
    );
    rkt(&dir)
        .args(&["image", "gc"])
        .run()
        .assert_success()
        .assert_stdout_contains("1 partial download(s)");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);

    // With the layer back, the fetch completes.
    assert!(std::fs::symlink_metadata(&layer)
        .unwrap()
        .file_type()
        .is_fifo());
    std::fs::remove_file(&layer).unwrap();
    std::fs::write(&layer, &bytes).unwrap();
    let out = rkt(&dir).args(&["fetch", &image]).run();
    out.assert_success().assert_stdout_contains("sha256:");
}

/// Two `rkt fetch` processes of the same image at once both succeed, store it once, and
/// leave no partial download.
#[test]
fn concurrent_fetches_from_a_registry() {
    if !ready(
        "concurrent_fetches_from_a_registry",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (_registry, remote) = image_common::registry_with(&layout);
    let data = work.path().join("data");
    let spawn = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rkt"))
            .args(["--dir", data.to_str().unwrap()])
            .args(["fetch", "--insecure-options=http", &remote])
            .output()
            .unwrap()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap(), b.join().unwrap())
    });
    for out in [&a, &b] {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(a.stdout, b.stdout);
    let json = rkt(&["--dir", data.to_str().unwrap()])
        .args(&["image", "list", "--format=json"])
        .run()
        .json();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(
        std::fs::read_dir(data.join("images/tmp")).unwrap().count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(data.join("images/blobs/sha256"))
            .unwrap()
            .count(),
        4
    );
}

/// Credentials from auth.d reach a registry with htpasswd auth; without them the fetch
/// fails naming the registry and the image.
#[test]
fn registry_credentials_from_auth_d() {
    if !ready(
        "registry_credentials_from_auth_d",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (registry, remote) = image_common::private_registry_with(work.path(), &layout);
    let system = work.path().join("system");
    let local = work.path().join("local");
    std::fs::create_dir_all(&system).unwrap();
    std::fs::create_dir_all(local.join("auth.d")).unwrap();
    let data = work.path().join("data");
    let args = [
        "--dir",
        data.to_str().unwrap(),
        "--system-config",
        system.to_str().unwrap(),
        "--local-config",
        local.to_str().unwrap(),
    ];
    rkt(&args)
        .args(&["fetch", "--insecure-options=http", &remote])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains(&format!("registry {} refused access", registry.addr))
        .assert_stderr_contains("test/private:v1");
    std::fs::write(
        local.join("auth.d/registry.json"),
        format!(
            r#"{{"rktKind":"dockerAuth","rktVersion":"v1","registries":["{}"],
               "credentials":{{"user":"tester","password":"right-password"}}}}"#,
            registry.addr
        ),
    )
    .unwrap();
    rkt(&args)
        .args(&["fetch", "--insecure-options=http", &remote])
        .run()
        .assert_success()
        .assert_stdout_contains("sha256:");
}

/// The `<hex>.partial` files in a store's tmp/, with their sizes.
fn partials(data: &std::path::Path) -> Vec<(String, u64)> {
    // None before the fetch has created the store.
    std::fs::read_dir(data.join("images/tmp"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let hex = name.strip_suffix(".partial")?.to_string();
            Some((hex, e.metadata().unwrap().len()))
        })
        .collect()
}

/// The blob `hex` is stored and its content has that sha256.
fn assert_blob_verified(data: &std::path::Path, hex: &str) {
    let path = data.join("images/blobs/sha256").join(hex);
    let out = image_common::run(std::process::Command::new("sha256sum").arg(&path));
    assert!(out.starts_with(hex), "{out}");
}

/// A registry behind a proxy the test steers, holding the busybox test image; returns the
/// work dir, registry, proxy and the image's reference through the proxy.
fn proxied_registry() -> (
    tempfile::TempDir,
    image_common::Registry,
    image_common::Proxy,
    String,
) {
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (registry, _) = image_common::registry_with(&layout);
    let proxy = image_common::Proxy::start(&registry.addr);
    let remote = format!("docker://{}/test/busybox:v1", proxy.addr);
    (work, registry, proxy, remote)
}

/// A connection cut in the middle of a layer fails the fetch cleanly: no blob, no image,
/// the bytes that arrived kept in tmp/ (`image gc` clears them). The next fetch asks the
/// registry for the rest only (`Range: bytes=N-`), and the blob it stores has its digest.
/// A server that ignores the range (200) has the download start again from 0.
#[test]
fn a_dropped_connection_is_resumed_from_the_bytes_kept() {
    if !ready(
        "a_dropped_connection_is_resumed_from_the_bytes_kept",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let (work, _registry, proxy, remote) = proxied_registry();
    let data = work.path().join("data");
    let dir = ["--dir", data.to_str().unwrap()];
    let fetch = || {
        rkt(&dir)
            .args(&["fetch", "--insecure-options=http", &remote])
            .run()
    };

    // Cut, then gc clears what was kept.
    proxy.set(image_common::Fault::CutAfter(200_000));
    fetch()
        .assert_exit_code(254)
        .assert_stderr_contains("broke off after");
    assert_eq!(partials(&data).len(), 1);
    rkt(&dir)
        .args(&["image", "gc"])
        .run()
        .assert_success()
        .assert_stdout_contains("1 partial download(s)");
    assert!(partials(&data).is_empty());

    // Cut again; the retry continues from the bytes kept.
    proxy.set(image_common::Fault::CutAfter(200_000));
    fetch().assert_exit_code(254);
    assert_eq!(
        rkt(&dir)
            .args(&["image", "list", "--no-legend"])
            .run()
            .stdout(),
        "",
        "no image from a broken fetch"
    );
    let kept = partials(&data);
    let [(hex, len)] = kept.as_slice() else {
        panic!("{kept:?}")
    };
    assert!(*len > 100_000 && *len < 200_000, "{len}");
    assert!(!data.join("images/blobs/sha256").join(hex).exists());
    proxy.set(image_common::Fault::None);
    let before = proxy.ranges().len();
    fetch().assert_success().assert_stdout_contains("sha256:");
    assert_eq!(proxy.ranges()[before..], [format!("bytes={len}-")]);
    assert_blob_verified(&data, hex);
    assert!(partials(&data).is_empty());

    // A server that ignores Range: the download starts again and still verifies.
    let data2 = work.path().join("data2");
    let dir2 = ["--dir", data2.to_str().unwrap()];
    proxy.set(image_common::Fault::CutAfter(200_000));
    rkt(&dir2)
        .args(&["fetch", "--insecure-options=http", &remote])
        .run()
        .assert_exit_code(254);
    let kept = partials(&data2);
    assert_eq!(kept.len(), 1);
    proxy.set(image_common::Fault::HideRange);
    rkt(&dir2)
        .args(&["fetch", "--insecure-options=http", &remote])
        .run()
        .assert_success();
    assert_blob_verified(&data2, &kept[0].0);
    assert!(partials(&data2).is_empty());
}

/// `kill -9` of a fetch in the middle of a layer, then a fetch again: it continues from
/// the bytes the killed one wrote.
#[test]
fn kill_9_during_a_registry_fetch_then_fetch_resumes() {
    use std::time::{Duration, Instant};
    if !ready(
        "kill_9_during_a_registry_fetch_then_fetch_resumes",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let (work, _registry, proxy, remote) = proxied_registry();
    let data = work.path().join("data");
    let dir = ["--dir", data.to_str().unwrap()];
    proxy.set(image_common::Fault::StallAfter(400_000));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rkt"))
        .args(dir)
        .args(["fetch", "--insecure-options=http", &remote])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !partials(&data).iter().any(|(_, len)| *len > 0) {
        assert!(Instant::now() < deadline, "no partial download appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The stalled stream writes nothing more; let any write in flight land.
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = partials(&data);
    let [(hex, len)] = kept.as_slice() else {
        panic!("{kept:?}")
    };
    assert!(*len > 0 && *len < 400_000, "{len}");
    proxy.set(image_common::Fault::None);
    let before = proxy.ranges().len();
    rkt(&dir)
        .args(&["fetch", "--insecure-options=http", &remote])
        .run()
        .assert_success();
    assert_eq!(proxy.ranges()[before..], [format!("bytes={len}-")]);
    assert_blob_verified(&data, hex);
    assert!(partials(&data).is_empty());
}

/// On a terminal `rkt fetch` draws one progress line, rewritten in place and erased at the
/// end; with stderr in a pipe it writes nothing there.
#[test]
fn a_progress_line_on_a_terminal_and_none_in_a_pipe() {
    use std::io::Read;
    if !ready(
        "a_progress_line_on_a_terminal_and_none_in_a_pipe",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (_registry, remote) = image_common::registry_with(&layout);

    let piped = work.path().join("piped");
    let out = rkt(&["--dir", piped.to_str().unwrap()])
        .args(&["fetch", "--insecure-options=http", &remote])
        .run();
    out.assert_success();
    assert_eq!(out.stderr(), "", "no progress junk in a pipe");

    let pty = test_kit::pty::open(None);
    let tty = work.path().join("tty");
    let child = {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rkt"));
        cmd.args(["--dir", tty.to_str().unwrap()])
            .args(["fetch", "--insecure-options=http", &remote])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::from(pty.slave));
        cmd.spawn().unwrap()
        // The command, and with it our copy of the slave, is dropped here: the master
        // reads EOF (EIO) once the child is gone.
    };
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            bytes.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    });
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let id = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(id.starts_with("sha256:"), "{id}");
    let screen = reader.join().unwrap();
    assert!(screen.contains("\rfetching blob 1 sha256:"), "{screen:?}");
    assert!(screen.contains("(100%)"), "{screen:?}");
    assert!(!screen.contains('\n'), "one line, rewritten: {screen:?}");
    assert!(
        screen.ends_with("\r\x1b[K"),
        "erased at the end: {screen:?}"
    );
}

fn blob_count(data: &std::path::Path) -> usize {
    std::fs::read_dir(data.join("images/blobs/sha256"))
        .unwrap()
        .count()
}

/// Issue 22, defect 5: `rkt image rm NAME` removes that name only, as in podman and
/// Docker; the image goes with its last name (or by ID), refused while a pod uses it. The
/// same image fetched under two names with different manifests (gzip and zstd layers)
/// keeps each name's manifest, which `image gc` keeps too.
#[test]
fn image_rm_of_a_name_untags_it_and_its_last_name_removes_the_image() {
    if !ready(
        "image_rm_of_a_name_untags_it_and_its_last_name_removes_the_image",
        &["umoci", "skopeo"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let gzip = format!("oci:{}:v1", layout.display());
    let zstd_layout = work.path().join("zstd");
    let zstd = format!("oci:{}:v1", zstd_layout.display());
    image_common::run(std::process::Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-compress-format=zstd",
        &gzip,
        &zstd,
    ]));
    let data_dir = work.path().join("data");
    let data = data_dir.to_str().unwrap();
    let dir = ["--dir", data];
    let out = rkt(&dir).args(&["fetch", &gzip, &zstd]).run();
    out.assert_success();
    let ids: Vec<&str> = out.stdout().leak().lines().collect();
    assert_eq!(ids[0], ids[1], "one image, two manifests");
    let id = ids[0];
    let manifest = |name: &str| {
        rkt(&dir)
            .args(&["image", "cat-manifest", name])
            .run()
            .json()
    };
    let media = |m: &serde_json::Value| m["layers"][0]["mediaType"].as_str().unwrap().to_string();
    assert!(media(&manifest(&gzip)).ends_with("gzip"));
    assert!(media(&manifest(&zstd)).ends_with("zstd"));
    // Config, two manifests and their two layers each, all kept by gc.
    assert_eq!(blob_count(&data_dir), 7);
    rkt(&dir).args(&["image", "gc"]).run().assert_success();
    assert_eq!(blob_count(&data_dir), 7);
    assert!(media(&manifest(&gzip)).ends_with("gzip"));

    rkt(&dir)
        .args(&["image", "rm", &gzip])
        .run()
        .assert_success()
        .assert_stdout_contains(&format!("untagged {gzip}\n"));
    let list = rkt(&dir)
        .args(&["image", "list", "--format=json"])
        .run()
        .json();
    assert_eq!(list[0]["id"], id);
    assert_eq!(list[0]["names"], serde_json::json!([zstd]));
    rkt(&dir)
        .args(&["image", "gc"])
        .run()
        .assert_success()
        .assert_stdout_contains("removed 3 unreferenced blob(s)");
    assert!(media(&manifest(&zstd)).ends_with("zstd"));

    // The last name is the image: refused while a pod uses it.
    let out = rkt(&dir).args(&["prepare", &zstd]).run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    rkt(&dir)
        .args(&["image", "rm", &zstd])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains(&uuid);
    rkt(&dir).args(&["rm", &uuid]).run().assert_success();
    let out = rkt(&dir).args(&["image", "rm", &zstd]).run();
    out.assert_success();
    assert_eq!(
        out.stdout(),
        format!("untagged {zstd}\nremoved image {id}\n")
    );
    assert_eq!(
        rkt(&dir)
            .args(&["image", "list", "--no-legend"])
            .run()
            .stdout(),
        ""
    );
}
