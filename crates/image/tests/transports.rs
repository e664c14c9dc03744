//! Each transport against real tools: OCI layouts written by umoci, archives and registry
//! pushes by skopeo, a real registry (`docker-registry`) on loopback. Needs root (umoci
//! keeps owners) and skips with a message otherwise.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{busybox_layout, ready, skopeo_copy};
use rkt_image::fetch::store_name;
use rkt_image::transport::registry::RegistryOptions;
use rkt_image::unpack::{unpack_image, UnpackOptions};
use rkt_image::{fetch, FetchOptions, ImageRef, Platform, PullPolicy, Store};

const TOOLS: &[&str] = &["umoci", "skopeo"];

fn fetch_str(
    store: &Store,
    text: &str,
    options: &FetchOptions,
) -> Result<rkt_image::ImageRecord, rkt_image::FetchError> {
    fetch(store, &ImageRef::parse(text).unwrap(), text, options)
}

fn http() -> FetchOptions {
    FetchOptions {
        registry: RegistryOptions {
            plain_http: true,
            ..RegistryOptions::default()
        },
        ..FetchOptions::default()
    }
}

fn tmp_is_empty(store: &Store) -> bool {
    std::fs::read_dir(store.tmp_dir()).unwrap().next().is_none()
}

#[test]
fn oci_layout_and_archives() {
    if !ready("oci_layout_and_archives", TOOLS) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let store = Store::open(work.path().join("store")).unwrap();

    let text = format!("oci:{}:v1", layout.display());
    let rec = fetch_str(&store, &text, &FetchOptions::default()).unwrap();
    assert_eq!(
        rec.names,
        vec![store_name(&ImageRef::parse(&text).unwrap()).unwrap()]
    );
    let manifest = store.manifest(&rec).unwrap();
    assert_eq!(manifest.layers().len(), 2);
    for blob in store.referenced_blobs(&rec).unwrap() {
        assert!(store.has_blob(&blob), "{blob}");
    }
    let config = store.config(&rec).unwrap();
    assert_eq!(
        config.config().as_ref().unwrap().working_dir().as_deref(),
        Some("/etc")
    );
    // Policy never finds it by name; an unknown tag is an error naming the tags there are.
    let again = fetch_str(
        &store,
        &text,
        &FetchOptions {
            policy: PullPolicy::Never,
            ..FetchOptions::default()
        },
    )
    .unwrap();
    assert_eq!(again.id, rec.id);
    let err = fetch_str(
        &store,
        &format!("oci:{}:nope", layout.display()),
        &FetchOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("\"nope\"") && err.to_string().contains("v1"),
        "{err}"
    );
    let err = fetch_str(
        &store,
        &format!("oci:{}:v2", layout.display()),
        &FetchOptions {
            policy: PullPolicy::Never,
            ..FetchOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("never"), "{err}");

    // The same image as an oci-archive has the same ID.
    let archive = work.path().join("image.tar");
    skopeo_copy(&text, &format!("oci-archive:{}:v1", archive.display()));
    let from_archive = fetch_str(
        &store,
        &format!("oci-archive:{}:v1", archive.display()),
        &FetchOptions::default(),
    )
    .unwrap();
    assert_eq!(from_archive.id, rec.id);

    // docker save format: skopeo converts the config, so the ID differs; RepoTags name it.
    let saved = work.path().join("saved.tar");
    skopeo_copy(
        &text,
        &format!("docker-archive:{}:test/busybox:saved", saved.display()),
    );
    let from_docker = fetch_str(
        &store,
        &format!("docker-archive:{}", saved.display()),
        &FetchOptions::default(),
    )
    .unwrap();
    assert!(
        from_docker
            .names
            .contains(&"docker.io/test/busybox:saved".to_string()),
        "{:?}",
        from_docker.names
    );
    assert_eq!(store.manifest(&from_docker).unwrap().layers().len(), 2);
    assert_eq!(
        store.resolve("test/busybox:saved").unwrap().id,
        from_docker.id
    );
    assert!(tmp_is_empty(&store));

    // Both unpack to the same tree: busybox runs, the second layer's whiteout applied.
    for (i, record) in [&rec, &from_docker].into_iter().enumerate() {
        let rootfs = work.path().join(format!("rootfs{i}"));
        unpack_image(&store, record, &rootfs, &UnpackOptions::default()).unwrap();
        let out = common::run(
            std::process::Command::new(rootfs.join("bin/busybox"))
                .args(["cat"])
                .arg(rootfs.join("etc/greeting")),
        );
        assert_eq!(out, "hello\n");
        assert!(!rootfs.join("etc/remove-me").exists());
        assert_eq!(
            std::fs::read_to_string(rootfs.join("etc/second")).unwrap(),
            "layer 2\n"
        );
        assert_eq!(
            std::fs::read_link(rootfs.join("bin/sh")).unwrap(),
            std::path::Path::new("busybox")
        );
    }
}

#[test]
fn corrupt_blob_is_refused_and_nothing_kept() {
    if !ready("corrupt_blob_is_refused_and_nothing_kept", TOOLS) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let text = format!("oci:{}:v1", layout.display());
    let probe = Store::open(work.path().join("probe")).unwrap();
    let rec = fetch_str(&probe, &text, &FetchOptions::default()).unwrap();
    let layer =
        rkt_image::Digest::try_from(probe.manifest(&rec).unwrap().layers()[1].digest()).unwrap();
    // Same size, one byte changed.
    let path = layout.join("blobs/sha256").join(layer.hex());
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let store = Store::open(work.path().join("store")).unwrap();
    let err = fetch_str(&store, &text, &FetchOptions::default()).unwrap_err();
    let msg = rkt_image::error::chain(&err);
    assert!(
        msg.contains(&layer.to_string()) && msg.contains("nothing was stored"),
        "{msg}"
    );
    assert!(!store.has_blob(&layer));
    assert!(store.images().unwrap().is_empty());
    assert!(tmp_is_empty(&store));
    // A manifest whose bytes do not match the digest index.json gives for it.
    let index_path = layout.join("index.json");
    let index = std::fs::read_to_string(&index_path).unwrap();
    let fake = rkt_image::Digest::of(b"not this manifest");
    std::fs::copy(
        layout.join("blobs/sha256").join(rec.manifest.hex()),
        layout.join("blobs/sha256").join(fake.hex()),
    )
    .unwrap();
    std::fs::write(&index_path, index.replace(rec.manifest.hex(), fake.hex())).unwrap();
    let err =
        rkt_image::error::chain(&fetch_str(&store, &text, &FetchOptions::default()).unwrap_err());
    assert!(
        err.contains(&fake.to_string()) && err.contains(&rec.manifest.to_string()),
        "{err}"
    );
    assert!(store.images().unwrap().is_empty());
}

/// Adds an index to the layout under `tag`, listing the v1 manifest for `platforms`.
fn add_index(layout: &std::path::Path, tag: &str, platforms: &[(&str, &str)]) {
    let index_path = layout.join("index.json");
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    let v1 = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == "v1")
        .unwrap()
        .clone();
    let manifests: Vec<serde_json::Value> = platforms
        .iter()
        .map(|(os, arch)| {
            serde_json::json!({"mediaType": v1["mediaType"], "digest": v1["digest"], "size": v1["size"],
                "platform": {"os": os, "architecture": arch}})
        })
        .collect();
    let multi = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests
    }))
    .unwrap();
    let digest = rkt_image::Digest::of(&multi);
    std::fs::write(layout.join("blobs/sha256").join(digest.hex()), &multi).unwrap();
    index["manifests"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.index.v1+json", "digest": digest.to_string(),
            "size": multi.len(), "annotations": {"org.opencontainers.image.ref.name": tag}
        }));
    std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
}

#[test]
fn registry_tag_digest_index_and_concurrency() {
    if !ready(
        "registry_tag_digest_index_and_concurrency",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let host = Platform::host();
    add_index(
        &layout,
        "multi",
        &[("linux", "s390x"), ("linux", host.architecture.as_str())],
    );
    add_index(
        &layout,
        "foreign",
        &[("linux", "s390x"), ("windows", "amd64")],
    );
    let registry = common::Registry::start("");
    let base = format!("docker://{}/test/busybox", registry.addr);
    skopeo_copy(
        &format!("oci:{}:v1", layout.display()),
        &format!("{base}:v1"),
    );
    run_all(
        &format!("oci:{}:multi", layout.display()),
        &format!("{base}:multi"),
    );
    run_all(
        &format!("oci:{}:foreign", layout.display()),
        &format!("{base}:foreign"),
    );

    let store = Store::open(work.path().join("store")).unwrap();
    let local = fetch_str(
        &store,
        &format!("oci:{}:v1", layout.display()),
        &FetchOptions::default(),
    )
    .unwrap();
    store
        .remove(&local.id.to_string(), &BTreeSet::new())
        .unwrap();
    assert!(store.gc(Duration::ZERO, &BTreeSet::new()).errors.is_empty());

    // Two fetches of the same image at once both succeed and store it once.
    let (a, b) = std::thread::scope(|s| {
        let one = s.spawn(|| fetch_str(&store, &format!("{base}:v1"), &http()));
        let two = s.spawn(|| fetch_str(&store, &format!("{base}:v1"), &http()));
        (one.join().unwrap().unwrap(), two.join().unwrap().unwrap())
    });
    assert_eq!(a.id, local.id);
    assert_eq!(b.id, local.id);
    assert_eq!(store.images().unwrap().len(), 1);

    // By digest.
    let by_digest = fetch_str(&store, &format!("{base}@{}", a.manifest), &http()).unwrap();
    assert_eq!(by_digest.id, a.id);
    // A multi-arch index picks this machine's platform.
    let multi = fetch_str(&store, &format!("{base}:multi"), &http()).unwrap();
    assert_eq!(multi.id, a.id);
    let err = rkt_image::error::chain(
        &fetch_str(&store, &format!("{base}:foreign"), &http()).unwrap_err(),
    );
    assert!(
        err.contains("linux/s390x")
            && err.contains("windows/amd64")
            && err.contains(&host.to_string()),
        "{err}"
    );
    // Unknown tag and unknown repository: errors name registry and image.
    let err =
        rkt_image::error::chain(&fetch_str(&store, &format!("{base}:nope"), &http()).unwrap_err());
    assert!(
        err.contains(&registry.addr) && err.contains("test/busybox:nope"),
        "{err}"
    );
    // Without plain HTTP allowed, HTTPS is tried, and the error says what to do.
    let err = rkt_image::error::chain(
        &fetch_str(
            &store,
            &format!("{base}:v1"),
            &FetchOptions {
                policy: PullPolicy::Update,
                ..FetchOptions::default()
            },
        )
        .unwrap_err(),
    );
    assert!(
        err.contains(&format!("TLS with registry {}", registry.addr))
            && err.contains("--insecure-options=http"),
        "{err}"
    );
    assert!(tmp_is_empty(&store));
}

/// `skopeo copy --all`, which keeps an index.
fn run_all(from: &str, to: &str) {
    common::run(std::process::Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--all",
        "--dest-tls-verify=false",
        from,
        to,
    ]));
}

#[test]
fn registry_basic_auth_missing_wrong_right() {
    if !ready(
        "registry_basic_auth_missing_wrong_right",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (registry, image) = common::private_registry_with(work.path(), &layout);
    let store = Store::open(work.path().join("store")).unwrap();
    let with = |user: &str, password: &str| FetchOptions {
        registry: RegistryOptions {
            plain_http: true,
            credentials: Some(rkt_image::transport::registry::Credentials {
                user: user.into(),
                password: password.into(),
            }),
            ..RegistryOptions::default()
        },
        ..FetchOptions::default()
    };
    let err = rkt_image::error::chain(&fetch_str(&store, &image, &http()).unwrap_err());
    assert!(
        err.contains(&registry.addr)
            && err.contains("test/private:v1")
            && err.contains("needs credentials"),
        "{err}"
    );
    let err =
        rkt_image::error::chain(&fetch_str(&store, &image, &with("tester", "wrong")).unwrap_err());
    assert!(
        err.contains("refused access (401)") && err.contains("check the credentials"),
        "{err}"
    );
    let rec = fetch_str(&store, &image, &with("tester", "right-password")).unwrap();
    assert_eq!(store.manifest(&rec).unwrap().layers().len(), 2);
}

/// A CA and a server certificate for 127.0.0.1 it signed, as PEM: (ca, cert, key).
fn test_pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "rkt test registry CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(Vec::new()).unwrap();
    server.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
    let cert = server.signed_by(&key, &ca_cert, &ca_key).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn registry_https_trusted_untrusted_and_insecure_tls() {
    if !ready(
        "registry_https_trusted_untrusted_and_insecure_tls",
        &["umoci", "skopeo", "docker-registry"],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let layout = busybox_layout(work.path());
    let (ca, cert, key) = test_pki();
    let (cert_path, key_path) = (
        work.path().join("server.crt"),
        work.path().join("server.key"),
    );
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    let registry = common::Registry::start(&format!(
        "  tls:\n    certificate: {}\n    key: {}\n",
        cert_path.display(),
        key_path.display()
    ));
    let image = format!("docker://{}/test/secure:v1", registry.addr);
    skopeo_copy(&format!("oci:{}:v1", layout.display()), &image);

    // The registry's CA in Docker's layout, in a directory of the test's own.
    let certs_d = work.path().join("certs.d");
    std::fs::create_dir_all(certs_d.join(&registry.addr)).unwrap();
    std::fs::write(certs_d.join(&registry.addr).join("ca.crt"), ca).unwrap();
    let empty_d = work.path().join("empty.d");
    std::fs::create_dir(&empty_d).unwrap();
    let with = |certs_dir: &std::path::Path, insecure_tls: bool| FetchOptions {
        registry: RegistryOptions {
            insecure_tls,
            certs_dirs: vec![certs_dir.to_path_buf()],
            ..RegistryOptions::default()
        },
        ..FetchOptions::default()
    };

    // Not trusted: refused, naming the registry, the image and the TLS failure.
    let store = Store::open(work.path().join("store-untrusted")).unwrap();
    let err =
        rkt_image::error::chain(&fetch_str(&store, &image, &with(&empty_d, false)).unwrap_err());
    assert!(
        err.contains(&format!("TLS with registry {}", registry.addr))
            && err.contains("test/secure:v1")
            && err.contains("UnknownIssuer")
            && err.contains("--insecure-options=tls"),
        "{err}"
    );
    assert!(store.images().unwrap().is_empty() && tmp_is_empty(&store));

    // Trusted through certs.d: HTTPS is the default, no option needed.
    let store = Store::open(work.path().join("store-trusted")).unwrap();
    let rec = fetch_str(&store, &image, &with(&certs_d, false)).unwrap();
    assert_eq!(store.manifest(&rec).unwrap().layers().len(), 2);

    // Not trusted, but certificate checks skipped (`tls`): the same image.
    let store = Store::open(work.path().join("store-insecure")).unwrap();
    let insecure = fetch_str(&store, &image, &with(&empty_d, true)).unwrap();
    assert_eq!(insecure.id, rec.id);
}
