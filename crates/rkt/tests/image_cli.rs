//! `rkt fetch` and `rkt image …` as a user runs them, against images made here with umoci
//! and skopeo and a real registry (`docker-registry`) on loopback. Needs root; skips with a
//! message otherwise (under CI a missing tool fails).

mod support;

#[path = "../../image/tests/common/mod.rs"]
mod image_common;

use image_common::{busybox_layout, ready, skopeo_copy};
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
    let registry = image_common::Registry::start("");
    let remote = format!("docker://{}/test/busybox:v1", registry.addr);
    let local = format!("oci:{}:v1", layout.display());
    skopeo_copy(&local, &remote);
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
        .assert_stdout_contains(&format!("sha256:{}", &id[7..19]))
        .assert_stdout_contains(&format!("{}/test/busybox:v1", registry.addr));
    assert_eq!(out.stdout().lines().count(), 2);
    let out = rkt(&dir).args(&["image", "list", "--no-legend"]).run();
    assert_eq!(out.stdout().lines().count(), 1);
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
