//! What Nomad v0.10.9's rkt driver calls, read the way it reads it (issue 25, items 1-5):
//! `rkt version` through its two regular expressions and minimum version, `rkt
//! cat-manifest` through appc's own decoder, `--insecure-options` on every command,
//! `prepare IMAGE --port=NAME:HOSTPORT`, and `rkt trust`'s grammar and answers.
//!
//! The driver's reading is done by a small Go program of ours (`appc_decode/main.go`) built
//! against the appc/spec and go-version that Nomad vendors, from Nomad's source archive
//! (`../shared/nomad/nomad-0.10.9.tar.gz`, or `$RKT_NOMAD_ARCHIVE`), in GOPATH mode and
//! offline. Without `go` those checks are skipped, saying so; everything else still runs.

use crate::{image_common, leaks, pod_support, support};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use image_common::{busybox_layout, ready, tag_exposing};
use pod_support::{http_get_forwarded, World};

/// The archive of Nomad's sources, beside the workspace as `tools/test.sh` expects it.
fn nomad_archive() -> PathBuf {
    match std::env::var_os("RKT_NOMAD_ARCHIVE") {
        Some(path) => PathBuf::from(path),
        None => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/nomad/nomad-0.10.9.tar.gz")
        }
    }
}

/// The vendored packages the program needs, as paths in the archive.
const VENDORED: [&str; 6] = [
    "nomad/vendor/github.com/appc/spec",
    "nomad/vendor/github.com/coreos/go-semver",
    "nomad/vendor/github.com/spf13/pflag",
    "nomad/vendor/go4.org",
    "nomad/vendor/github.com/hashicorp/go-version",
    "nomad/vendor/gopkg.in/inf.v0",
];

/// The built decoder, once per test binary; `None` (with the reason printed) without `go`.
fn decoder() -> Option<&'static Path> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if image_common::which("go").is_none() {
                eprintln!(
                    "skipping the appc decoder's checks: no `go` on PATH (apt-get install \
                     golang-go; tools/test.sh installs it)"
                );
                return None;
            }
            Some(build_decoder())
        })
        .as_deref()
}

fn build_decoder() -> PathBuf {
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("appc_decode");
    let _ = std::fs::remove_dir_all(&work);
    let gopath = work.join("gopath");
    let hashicorp = gopath.join("src/github.com/hashicorp");
    std::fs::create_dir_all(&hashicorp).unwrap();
    let archive = nomad_archive();
    assert!(
        archive.is_file(),
        "Nomad's source archive {} is missing (set RKT_NOMAD_ARCHIVE)",
        archive.display()
    );
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&hashicorp)
        .args(VENDORED)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "extracting appc/spec and go-version from {}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let program = hashicorp.join("nomad/appc_decode");
    std::fs::create_dir_all(&program).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/appc_decode/main.go"),
        program.join("main.go"),
    )
    .unwrap();
    let binary = work.join("appc_decode");
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&program)
        .env("GO111MODULE", "off")
        .env("GOPATH", &gopath)
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .env("GOCACHE", work.join("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "building appc_decode: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    binary
}

/// The decoder's lines for `input`, or its error.
fn decode(decoder: &Path, args: &[&str], input: &str) -> Result<Vec<String>, String> {
    let out = test_kit::output_with_stdin(
        Command::new(decoder).args(args).stderr(Stdio::piped()),
        input.as_bytes(),
    );
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn has(lines: &[String], line: &str) -> bool {
    lines.iter().any(|l| l == line)
}

#[test]
fn version_passes_nomads_fingerprint() {
    let out = support::rkt(&["version"]).run();
    out.assert_success();
    let text = out.stdout();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "rkt Version: 1.30.0", "{text}");
    assert_eq!(lines[1], "appc Version: 0.8.11", "{text}");
    assert_eq!(
        lines[2],
        format!("rkt-rs Version: {}", env!("CARGO_PKG_VERSION"))
    );
    let Some(decoder) = decoder() else { return };
    let read = decode(decoder, &["version"], &text).unwrap();
    assert_eq!(read, ["rkt 1.30.0", "appc 0.8.11"]);
    // The decoder can fail: the text rkt printed before this issue was refused.
    let old = "rkt Version: 0.1.0\nappc Version: none (images are OCI)\n";
    let err = decode(decoder, &["version"], old).unwrap_err();
    assert!(err.contains("Unable to parse rkt version string"), "{err}");
}

/// Every value rkt 1.30 had, alone and in a list, with Nomad's `--debug=false`, on a command
/// that reads them (prepare of a host command), one that only lists pods and one that
/// takes no pod; an unknown value is refused alike by all, naming the flag and the values.
#[test]
fn insecure_options_mean_the_same_on_every_command() {
    let world = World::new(support::RKT);
    let values = [
        "none",
        "image",
        "tls",
        "ondisk",
        "http",
        "pubkey",
        "capabilities",
        "paths",
        "seccomp",
        "all-fetch",
        "all-run",
        "all",
        "image,tls,all-run",
    ];
    for value in values {
        let flag = format!("--insecure-options={value}");
        for args in [
            &[flag.as_str(), "--debug=false", "list"][..],
            &["config", flag.as_str()],
            &[flag.as_str(), "prepare", "--", "true"],
        ] {
            let out = world.rkt(args).run();
            assert_eq!(out.code(), Some(0), "{args:?}: {}", out.stderr());
        }
    }
    let pods = world.pods().len();
    for args in [
        &["--insecure-options=all,signatures", "list"][..],
        &["version", "--insecure-options=signatures"],
        &["--insecure-options=signatures", "prepare", "--", "true"],
        &["--insecure-options=signatures", "status", "00000000"],
    ] {
        world
            .rkt(args)
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains("--insecure-options: unknown value \"signatures\"")
            .assert_stderr_contains("none, image, tls, ondisk, http, pubkey, capabilities");
    }
    assert_eq!(world.pods().len(), pods, "a refused prepare made a pod");
}

/// A host-command pod's manifest, prepared and then exited, through appc's decoder: app
/// name made an appc name, user and group, isolators, volumes and mounts; an unknown UUID
/// is an error naming it.
#[test]
fn cat_manifest_of_a_host_command_pod_decodes_with_appcs_decoder() {
    let world = World::new(support::RKT);
    let out = world
        .rkt(&[
            "prepare",
            "--volume=data,kind=host,source=/tmp,readOnly=true",
            "--volume=scratch,kind=empty,mode=0700",
            "--mount=volume=data,target=/tmp/data",
            "--mount=volume=scratch,target=/tmp/scratch",
            "--name=My_App",
            "--memory=64M",
            "--cpu-shares=512",
            "--oom-score-adj=1000",
            "--annotation=nomad/alloc=a1",
            "--caps-retain=CAP_NET_BIND_SERVICE,CAP_CHOWN",
            "--user-annotation=team=web",
            "--",
            "/bin/true",
            "arg",
        ])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest = world.rkt(&["cat-manifest", &uuid]).run();
    manifest.assert_success();
    let json = manifest.json();
    assert_eq!(json["acKind"], "PodManifest");
    assert_eq!(json["apps"][0]["image"], serde_json::json!({}));
    assert_eq!(json["apps"][0]["app"]["userAnnotations"]["team"], "web");
    assert_eq!(
        json["apps"][0]["annotations"],
        serde_json::json!([{"name": "nomad/alloc", "value": "a1"}])
    );
    assert_eq!(json["volumes"][1]["mode"], "0700");
    // One line with --pretty-print=false, the same value.
    let compact = world
        .rkt(&["cat-manifest", "--pretty-print=false", &uuid])
        .run();
    compact.assert_success();
    assert_eq!(compact.stdout().lines().count(), 1);
    assert_eq!(compact.json(), json);
    world
        .rkt(&["cat-manifest", "0123abcd"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("0123abcd");

    let Some(decoder) = decoder() else { return };
    let read = decode(decoder, &["manifest"], &manifest.stdout()).unwrap();
    for line in [
        "kind PodManifest",
        "version 0.8.11",
        "app my-app image - id -",
        "exec my-app /bin/true arg",
        "user my-app 0:0",
        "isolator my-app resource/memory {\"limit\":\"67108864\"}",
        "isolator my-app os/linux/cpu-shares 512",
        "isolator my-app os/linux/oom-score-adj 1000",
        "isolator my-app os/linux/capabilities-retain-set {\"set\":[\"CAP_NET_BIND_SERVICE\",\"CAP_CHOWN\"]}",
        "mount my-app data /tmp/data",
        "mount my-app scratch /tmp/scratch",
        "volume data host",
        "volume scratch empty",
    ] {
        assert!(has(&read, line), "{line:?} not in {read:#?}");
    }
    // The decoder can fail: a name appc refuses is refused.
    let bad = manifest.stdout().replace("\"my-app\"", "\"My_App\"");
    let err = decode(decoder, &["manifest"], &bad).unwrap_err();
    assert!(err.contains("ACName"), "{err}");

    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping the exited pod's manifest: running a pod needs root");
        return;
    }
    world
        .rkt(&["run-prepared", "--net=none", &uuid])
        .run()
        .assert_success();
    let exited = world.rkt(&["cat-manifest", &uuid]).run();
    exited.assert_success();
    assert_eq!(exited.json(), json, "the manifest changed when the pod ran");
    world.rkt(&["rm", &uuid]).run().assert_success();
}

/// Nomad's prepare of an image: `--memory`, `--cpu` and `--port=NAME:HOSTPORT` after the
/// IMAGE, `--insecure-options=all` and `--debug=false` before. The port is checked at
/// prepare (an unknown name is an error listing the image's, no pod made), shown by
/// cat-manifest (the app's ports, read by port_map as Nomad does, and the pod's), kept for
/// run-prepared, which forwards it; the running pod's manifest still decodes.
#[test]
fn prepare_of_an_image_with_a_named_port_as_nomad_runs_it() {
    if !ready(
        "prepare_of_an_image_with_a_named_port_as_nomad_runs_it",
        &["umoci"],
    ) {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx().shared_network("default"));
    let layout = busybox_layout(world.root.path());
    let served = tag_exposing(&layout, "served", &["80/tcp", "53/udp"]);
    let held = pod_support::held_port();
    let port = held.port;
    let globals = ["--insecure-options=all", "--debug=false"];
    let prepare = |extra: &[&str]| {
        let mut args = globals.to_vec();
        args.extend(["prepare", &served, "--memory=67108864", "--cpu=100m"]);
        args.extend_from_slice(extra);
        world.rkt(&args).run()
    };

    let unknown = format!("--port=443-tcp:{port}");
    prepare(&[&unknown])
        .assert_exit_code(254)
        .assert_stderr_contains(&unknown)
        .assert_stderr_contains("80-tcp")
        .assert_stderr_contains("53-udp");
    assert!(world.pods().is_empty(), "a refused prepare made a pod");

    let forward = format!("--port=80-tcp:{port}");
    let mut extra = vec![forward.as_str()];
    extra.extend(image_common::HTTPD_ETC);
    let out = prepare(&extra);
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let manifest = world.rkt(&["cat-manifest", &uuid]).run();
    manifest.assert_success();
    let json = manifest.json();
    let image = &json["apps"][0]["image"];
    let id = image["id"].as_str().unwrap();
    assert!(id.starts_with("sha512-") && id.len() == 7 + 128, "{id}");
    assert_eq!(id, expected_image_id(&world, &served));
    assert_eq!(json["ports"][0]["name"], "80-tcp");
    assert_eq!(json["ports"][0]["hostPort"], port);

    let decoder = decoder();
    if let Some(decoder) = decoder {
        let read = decode(
            decoder,
            &["manifest", "http=80-tcp", "dns=53-udp", "other=8080-tcp"],
            &manifest.stdout(),
        )
        .unwrap();
        for line in [
            "port layout 80-tcp tcp/80".to_string(),
            "port layout 53-udp udp/53".to_string(),
            format!("podport 80-tcp {port}"),
            "port_map http 80".to_string(),
            "port_map dns 53".to_string(),
            "port_map other none".to_string(),
            "isolator layout resource/cpu {\"request\":\"100m\",\"limit\":\"100m\"}".to_string(),
            format!(
                "app layout image {} id {id}",
                image["name"].as_str().unwrap()
            ),
        ] {
            assert!(has(&read, &line), "{line:?} not in {read:#?}");
        }
    }

    // run-prepared forwards the port prepare kept, with nothing more than Nomad gives it.
    let mut args = globals.to_vec();
    args.extend(["run-prepared", "--net=default", &uuid]);
    let mut running = world
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    world.wait_running(&uuid);
    let body = http_get_forwarded(port, "/greeting");
    assert!(body.ends_with("hello\n"), "{body}");
    let live = world.rkt(&["cat-manifest", &uuid]).run();
    live.assert_success();
    assert_eq!(live.json()["ports"], json["ports"], "{}", live.stdout());
    if let Some(decoder) = decoder {
        decode(decoder, &["manifest"], &live.stdout()).unwrap();
    }
    world.rkt(&["stop", &uuid]).run().assert_success();
    running.wait().unwrap();
    drop(held);
    world.rkt(&["rm", &uuid]).run().assert_success();
}

/// appc's image ID of the stored image `reference`: `sha512-` and the SHA-512 of its
/// config, the blob whose SHA-256 `rkt fetch` prints.
fn expected_image_id(world: &World, reference: &str) -> String {
    use sha2::{Digest, Sha512};
    let out = world
        .rkt(&["fetch", "--pull-policy=never", reference])
        .run();
    out.assert_success();
    let id = out.stdout().trim().to_string();
    let hex = id.strip_prefix("sha256:").unwrap();
    let blob = walk_find(&world.data(), hex).expect("the config blob in the store");
    let config = std::fs::read(blob).unwrap();
    let sum: String = Sha512::digest(&config)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha512-{sum}")
}

/// A file named `name` below `dir`.
fn walk_find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if entry.file_name() == name && path.is_file() {
            return Some(path);
        }
        if entry.file_type().ok()?.is_dir() {
            if let Some(found) = walk_find(&path, name) {
                return Some(found);
            }
        }
    }
    None
}

/// A version 4 public key (an Ed25519 key packet and its user ID, `Test Key
/// <t@example.com>`), ASCII-armored as gpg exports it; its fingerprint is gpg's.
const KEY: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEaxS2GRYJKwYBBAHaRw8BAQdAepHaqLgja+qrn06/SJo+kQj6Mt4mdwxo4Fx3bOZ1ikS0GFRl
c3QgS2V5IDx0QGV4YW1wbGUuY29tPg==
-----END PGP PUBLIC KEY BLOCK-----
";
const FINGERPRINT: &str = "be7396cf703643e60caeaf39d40c502fc6cab02a";

#[test]
fn trust_keeps_keys_where_rkt_did_and_says_it_verifies_nothing() {
    let world = World::new(support::RKT);
    let key = world.path("key.asc");
    std::fs::write(&key, KEY).unwrap();
    let key = key.to_str().unwrap();
    let local = world.path("local");

    let out = world
        .rkt(&[
            "trust",
            "--skip-fingerprint-review=true",
            "--prefix=example.com/app",
            "--debug=false",
            key,
        ])
        .run();
    out.assert_success()
        .assert_stderr_contains("verifies no image signatures");
    let stored = local
        .join("trustedkeys/prefix.d/example.com/app")
        .join(FINGERPRINT);
    assert_eq!(std::fs::read_to_string(&stored).unwrap(), KEY);
    assert_eq!(
        out.stdout(),
        format!(
            "Added key for prefix \"example.com/app\" at {:?}\n",
            stored.display().to_string()
        )
    );

    // The review: the fingerprint shown, only `yes` stores the key.
    let answered =
        |answer: &str| world.output_with_stdin(&["trust", "--root", key], &format!("{answer}\n"));
    let no = answered("no");
    assert_eq!(no.status.code(), Some(254));
    let err = String::from_utf8_lossy(&no.stderr);
    assert!(
        err.contains(&FINGERPRINT.to_uppercase()) && err.contains("Test Key <t@example.com>"),
        "{err}"
    );
    let root = local.join("trustedkeys/root.d").join(FINGERPRINT);
    assert!(!root.exists());
    assert_eq!(answered("yes").status.code(), Some(0));
    assert!(root.is_file());

    // What rkt fetched is refused, saying why; nothing is stored.
    for (args, needle) in [
        (
            &[
                "trust",
                "--skip-fingerprint-review=true",
                "--prefix=example.org/x",
            ][..],
            "does not discover keys",
        ),
        (
            &["trust", "--root", "https://example.org/key.asc"],
            "keys from URLs are not fetched",
        ),
        (&["trust", key], "--root is needed"),
        (&["trust"], "needs --prefix=PREFIX"),
        (
            &["trust", "--root", "--prefix=example.org/x", key],
            "--prefix",
        ),
        (
            &["trust", "--prefix=Example.org", key],
            "--prefix=\"Example.org\"",
        ),
        (
            &[
                "trust",
                "--root",
                "--skip-fingerprint-review",
                "/etc/hostname",
            ],
            "not an OpenPGP public key",
        ),
    ] {
        world
            .rkt(args)
            .run()
            .assert_exit_code(254)
            .assert_stderr_contains(needle);
    }
    assert!(!local.join("trustedkeys/prefix.d/example.org").exists());
}
