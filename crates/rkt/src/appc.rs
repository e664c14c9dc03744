//! A pod's manifest in appc's form (`rkt cat-manifest`): the `PodManifest` of the App
//! Container specification [`APPC_VERSION`], as rkt 1.30 kept one for each pod, so that
//! tools that read it (Nomad's rkt driver finds an app's ports there) read ours.
//!
//! It is made from the pod's own manifest (`podstore`) each time it is asked for: nothing
//! here is stored. What appc requires and this rkt does not have is made the way rkt 1.30
//! and its docker2aci made it:
//!
//! - names: appc's `ACName` (`[a-z0-9]+(-[a-z0-9]+)*`) for apps, volumes and ports, an
//!   `ACIdentifier` for images and annotations: other characters become `-`, uppercase
//!   lowercase ([`ac_name`]); an app whose name changes keeps it unique with `-2`, `-3`, …
//! - `image.id`: `sha512-` and the SHA-512 of the image's config blob, the bytes whose
//!   SHA-256 is the image's ID (`rkt image list`); `image.name` the repository, its tag
//!   the `version` label, with `os` and `arch`. A host-command app (no image) has an empty
//!   `image`.
//! - `app.user`/`app.group`: the app's `--user`/`--group` resolved, else the image's
//!   `User`, else `0`.
//! - `app.ports`: the ports the image exposes, named as docker2aci did (`80/tcp` is
//!   `80-tcp`); the pod's `ports`: the host ports forwarded to them, `rkt prepare --port`'s
//!   and, while the pod runs, those its networks forward.
//! - `isolators`: `resource/memory` (`limit` in bytes), `resource/cpu` (`request` and
//!   `limit` in millicores), `os/linux/cpu-shares`, `os/linux/oom-score-adj`,
//!   `os/linux/capabilities-retain-set` or `-remove-set`: an app's own limits, else those
//!   given before it (the pod's, on the first app). The seccomp filter, the pids limit and
//!   a private user namespace have no appc isolator this rkt writes.
//! - an app's `annotations`: its `--annotation`s whose keys are `ACIdentifier`s.
//!
//! Takes from `podstore` (the manifest), `firewall` (port names and `--port` values) and
//! `isolation` (the isolators' types); reads the image's config from its store.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use sha2::{Digest as _, Sha512};

use crate::firewall::port_names::{exposed_port, resolve, AppPorts};
use crate::firewall::ports::{parse_all, push_unique, PortError, PortMapping};
use crate::isolation::capabilities::CapsFlag;
use crate::isolation::Isolators;
use crate::podstore::manifest::{App, AppImage, PodManifest};
use crate::podstore::volume::{Volume, VolumeKind};

/// The appc specification version of the manifests written here (`acVersion`): the one
/// Nomad's rkt driver vendors and decodes with.
pub const APPC_VERSION: &str = "0.8.11";

/// Why a pod's appc manifest cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum AppcError {
    /// The `--port` values `rkt prepare` recorded no longer resolve (a manifest edited by
    /// hand: prepare checks them).
    #[error("pod {uuid}: the ports recorded by rkt prepare")]
    Ports { uuid: String, source: PortError },
}

/// The appc `PodManifest` of the pod `manifest` describes; `forwarded` are the host ports
/// its networks forward now (from its live record; empty for a pod that is not running).
pub fn pod_manifest(manifest: &PodManifest, forwarded: &[PortMapping]) -> Result<Value, AppcError> {
    let mut used = BTreeSet::new();
    let apps: Vec<Value> = manifest
        .apps
        .iter()
        .map(|app| {
            let name = unique(ac_name(&app.name), &mut used);
            runtime_app(app, name, &manifest.volumes)
        })
        .collect();
    let mut out = Map::new();
    out.insert("acVersion".into(), json!(APPC_VERSION));
    out.insert("acKind".into(), json!("PodManifest"));
    out.insert("apps".into(), Value::Array(apps));
    out.insert(
        "volumes".into(),
        Value::Array(manifest.volumes.iter().map(volume).collect()),
    );
    out.insert(
        "isolators".into(),
        Value::Array(
            manifest
                .sandbox
                .as_ref()
                .map(|i| isolators(i, None))
                .unwrap_or_default(),
        ),
    );
    out.insert(
        "annotations".into(),
        annotations(manifest.meta.annotations.iter()),
    );
    let ports = pod_ports(manifest, forwarded).map_err(|source| AppcError::Ports {
        uuid: manifest.uuid.clone(),
        source,
    })?;
    out.insert("ports".into(), Value::Array(ports));
    if !manifest.meta.user_annotations.is_empty() {
        out.insert(
            "userAnnotations".into(),
            json!(manifest.meta.user_annotations),
        );
    }
    if !manifest.meta.user_labels.is_empty() {
        out.insert("userLabels".into(), json!(manifest.meta.user_labels));
    }
    Ok(Value::Object(out))
}

/// One app: `{name, image, app, readOnlyRootFS, mounts, annotations}`.
fn runtime_app(app: &App, name: String, volumes: &[Volume]) -> Value {
    let mut image_app = Map::new();
    image_app.insert("exec".into(), json!(app.exec));
    let (user, group) = user_group(app);
    image_app.insert("user".into(), json!(user));
    image_app.insert("group".into(), json!(group));
    if let Some(id) = app.isolators.identity.as_ref() {
        if !id.supplementary_gids.is_empty() {
            image_app.insert("supplementaryGIDs".into(), json!(id.supplementary_gids));
        }
    }
    let working_dir = app
        .working_dir
        .as_ref()
        .or(app.image.as_ref().and_then(|i| i.working_dir.as_ref()));
    if let Some(dir) = working_dir.filter(|d| d.starts_with('/')) {
        image_app.insert("workingDirectory".into(), json!(dir));
    }
    image_app.insert("environment".into(), environment(&app.env));
    let read_only = |volume: &str| {
        volumes.iter().any(|v| {
            v.name == volume
                && matches!(
                    v.kind,
                    VolumeKind::Host {
                        read_only: true,
                        ..
                    }
                )
        })
    };
    let mount_points: Vec<Value> = app
        .mounts
        .iter()
        .map(|m| {
            json!({
                "name": ac_name(&m.volume),
                "path": m.target,
                "readOnly": read_only(&m.volume),
            })
        })
        .collect();
    if !mount_points.is_empty() {
        image_app.insert("mountPoints".into(), Value::Array(mount_points));
    }
    let ports = app_ports(app);
    if !ports.is_empty() {
        image_app.insert("ports".into(), Value::Array(ports));
    }
    let isolators = isolators(&app.isolators, app.oom_score_adjust);
    if !isolators.is_empty() {
        image_app.insert("isolators".into(), Value::Array(isolators));
    }
    if !app.user_annotations.is_empty() {
        image_app.insert("userAnnotations".into(), json!(app.user_annotations));
    }
    if !app.user_labels.is_empty() {
        image_app.insert("userLabels".into(), json!(app.user_labels));
    }
    let mounts: Vec<Value> = app
        .mounts
        .iter()
        .map(|m| json!({"volume": ac_name(&m.volume), "path": m.target}))
        .collect();
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    out.insert(
        "image".into(),
        app.image.as_ref().map(image).unwrap_or_else(|| json!({})),
    );
    out.insert("app".into(), Value::Object(image_app));
    if app.isolators.readonly_rootfs {
        out.insert("readOnlyRootFS".into(), json!(true));
    }
    if !mounts.is_empty() {
        out.insert("mounts".into(), Value::Array(mounts));
    }
    if !app.annotations.is_empty() {
        out.insert("annotations".into(), annotations(app.annotations.iter()));
    }
    Value::Object(out)
}

/// The app's user and group, as appc wants them (both required): the resolved `--user`
/// and `--group`, else the image's `User` (`user[:group]`), else root's.
fn user_group(app: &App) -> (String, String) {
    if let Some(id) = &app.isolators.identity {
        return (id.uid.to_string(), id.gid.to_string());
    }
    let given = app.image.as_ref().and_then(|i| i.user.as_deref());
    match given.map(|u| u.split_once(':').unwrap_or((u, ""))) {
        Some((user, group)) if !user.is_empty() => (
            user.to_string(),
            if group.is_empty() { "0" } else { group }.to_string(),
        ),
        _ => ("0".to_string(), "0".to_string()),
    }
}

/// `[{name, value}]`, a later value of a name replacing an earlier one in its place; names
/// appc refuses (`[A-Za-z_][A-Za-z0-9_.-]*`) are left out.
fn environment(env: &[(String, String)]) -> Value {
    let valid = |name: &str| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    };
    let mut out: Vec<(&str, &str)> = Vec::new();
    for (k, v) in env.iter().filter(|(k, _)| valid(k)) {
        match out.iter_mut().find(|(name, _)| name == k) {
            Some(entry) => entry.1 = v,
            None => out.push((k, v)),
        }
    }
    Value::Array(
        out.into_iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect(),
    )
}

/// The ports the app's image exposes, `{name, protocol, port, count, socketActivated}`.
fn app_ports(app: &App) -> Vec<Value> {
    let mut seen = BTreeSet::new();
    app.image
        .iter()
        .flat_map(|i| &i.exposed_ports)
        .filter_map(|key| exposed_port(key))
        .filter(|(name, _, _)| seen.insert(name.clone()))
        .map(|(name, port, protocol)| {
            json!({
                "name": name,
                "protocol": protocol.to_string(),
                "port": port,
                "count": 1,
                "socketActivated": false,
            })
        })
        .collect()
}

/// The pod's forwarded ports, `{name, hostPort, hostIP, podPort}`: `rkt prepare --port`'s,
/// then those its networks forward now; each named after the pod port as docker2aci named
/// an image's (`80-tcp`).
fn pod_ports(manifest: &PodManifest, forwarded: &[PortMapping]) -> Result<Vec<Value>, PortError> {
    let mut ports = parse_all(&manifest.ports)?;
    let apps: Vec<AppPorts> = manifest
        .apps
        .iter()
        .map(|a| AppPorts {
            app: a.name.clone(),
            exposed: a
                .image
                .as_ref()
                .map(|i| i.exposed_ports.clone())
                .unwrap_or_default(),
        })
        .collect();
    for m in resolve(&manifest.ports, &apps)? {
        push_unique(&mut ports, m)?;
    }
    for m in forwarded {
        if !ports.contains(m) {
            ports.push(*m);
        }
    }
    Ok(ports
        .iter()
        .map(|m| {
            let name = format!("{}-{}", m.container_port, m.protocol);
            let mut port = json!({
                "name": name,
                "hostPort": m.host_port,
                "podPort": {
                    "name": name,
                    "protocol": m.protocol.to_string(),
                    "port": m.container_port,
                    "count": 1,
                    "socketActivated": false,
                },
            });
            if let Some(ip) = m.host_ip {
                port["hostIP"] = json!(ip.to_string());
            }
            port
        })
        .collect())
}

/// `{name, id, labels}` of an app's image.
fn image(image: &AppImage) -> Value {
    let (repository, tag) = split_name(&image.name);
    let mut out = Map::new();
    if let Some(name) = ac_identifier(repository) {
        out.insert("name".into(), json!(name));
    }
    if let Some(id) = image_id(image) {
        out.insert("id".into(), json!(id));
    }
    let mut labels = Vec::new();
    if let Some(tag) = tag {
        labels.push(json!({"name": "version", "value": tag}));
    }
    if let Some(arch) = appc_arch(std::env::consts::ARCH) {
        labels.push(json!({"name": "os", "value": "linux"}));
        labels.push(json!({"name": "arch", "value": arch}));
    }
    out.insert("labels".into(), Value::Array(labels));
    Value::Object(out)
}

/// appc's `sha512-<hex>` of an image: the SHA-512 of its config blob (whose SHA-256 is the
/// image ID). `None` when the blob is no longer in the store.
pub fn image_id(image: &AppImage) -> Option<String> {
    let hex = image.id.strip_prefix("sha256:").unwrap_or(&image.id);
    let digest = ::image::Digest::from_hex(hex).ok()?;
    let store = ::image::store::Store::open(&image.store).ok()?;
    let config = store.read_blob(&digest).ok()?;
    Some(sha512_id(&config))
}

/// `sha512-` and the lowercase hex of the SHA-512 of `bytes`.
pub fn sha512_id(bytes: &[u8]) -> String {
    let sum = Sha512::digest(bytes);
    let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha512-{hex}")
}

/// An image's name without its transport, split into the repository and its tag (a
/// digest reference has no tag).
fn split_name(name: &str) -> (&str, Option<&str>) {
    let name = name.split_once("://").map_or(name, |(_, rest)| rest);
    let name = ["oci-archive:", "docker-archive:", "oci:"]
        .iter()
        .find_map(|t| name.strip_prefix(t))
        .unwrap_or(name);
    if let Some((repository, _)) = name.split_once('@') {
        return (repository, None);
    }
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(colon) => (
            &name[..last_slash + colon],
            Some(&name[last_slash + colon + 1..]),
        ),
        None => (name, None),
    }
}

/// appc's name of the architecture Rust calls `arch`, for the `os`/`arch` labels appc
/// checks against each other.
fn appc_arch(arch: &str) -> Option<&'static str> {
    Some(match arch {
        "x86_64" => "amd64",
        "x86" => "i386",
        "aarch64" => "aarch64",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        _ => return None,
    })
}

/// `--caps-*`, `--memory`, `--cpu`, `--cpu-shares`, `--oom-score-adj` as appc isolators:
/// the app's own limits (rkt 1.30's per-app ones), else those given before it (the pod's,
/// on the first app).
fn isolators(isolators: &Isolators, oom_score_adj: Option<i16>) -> Vec<Value> {
    let (own, pod) = (&isolators.own_limits, &isolators.limits);
    let mut out = Vec::new();
    if let Some(memory) = own.memory.or(pod.memory) {
        out.push(json!({
            "name": "resource/memory",
            "value": {"limit": memory.to_string()},
        }));
    }
    if let Some(millis) = own.cpu_millis.or(pod.cpu_millis) {
        let quantity = format!("{millis}m");
        out.push(json!({
            "name": "resource/cpu",
            "value": {"request": quantity, "limit": quantity},
        }));
    }
    if let Some(shares) = own.cpu_shares.or(pod.cpu_shares) {
        out.push(json!({"name": "os/linux/cpu-shares", "value": shares}));
    }
    if let Some(adj) = oom_score_adj {
        out.push(json!({"name": "os/linux/oom-score-adj", "value": adj}));
    }
    match &isolators.caps {
        Some(CapsFlag::Retain(set)) if !set.is_empty() => out.push(json!({
            "name": "os/linux/capabilities-retain-set",
            "value": {"set": set},
        })),
        Some(CapsFlag::Remove(set)) if !set.is_empty() => out.push(json!({
            "name": "os/linux/capabilities-remove-set",
            "value": {"set": set},
        })),
        _ => {}
    }
    out
}

/// `[{name, value}]` of the annotations whose name is an appc `ACIdentifier` (the others
/// are left out: appc refuses them, and changing a key would make another's).
fn annotations<'a>(map: impl Iterator<Item = (&'a String, &'a String)>) -> Value {
    Value::Array(
        map.filter(|(k, _)| is_ac_identifier(k))
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect(),
    )
}

/// `{name, kind, ...}` of a volume.
fn volume(volume: &Volume) -> Value {
    let name = ac_name(&volume.name);
    match &volume.kind {
        VolumeKind::Host {
            source,
            read_only,
            recursive,
            ..
        } => json!({
            "name": name,
            "kind": "host",
            "source": source,
            "readOnly": read_only,
            "recursive": recursive,
        }),
        VolumeKind::Empty { mode, uid, gid } => json!({
            "name": name,
            "kind": "empty",
            "mode": format!("{mode:04o}"),
            "uid": uid,
            "gid": gid,
        }),
    }
}

/// `name` as an appc `ACName`: lowercase, each run of other characters one `-`, none at
/// either end; `app` when nothing is left.
pub fn ac_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars().map(|c| c.to_ascii_lowercase()) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "app".to_string()
    } else {
        out.to_string()
    }
}

/// `name`, or `name-2`, `name-3`, … when an earlier app took it.
fn unique(name: String, used: &mut BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while !used.insert(candidate.clone()) {
        candidate = format!("{name}-{n}");
        n += 1;
    }
    candidate
}

/// `name` as an appc `ACIdentifier` (`[a-z0-9]+([-._~/][a-z0-9]+)*`): lowercase, other
/// characters `-`, separators not doubled nor at either end; `None` when nothing is left.
fn ac_identifier(name: &str) -> Option<String> {
    let separator = |c: char| matches!(c, '-' | '.' | '_' | '~' | '/');
    let mut out = String::with_capacity(name.len());
    for c in name.chars().map(|c| c.to_ascii_lowercase()) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || separator(c) {
            c
        } else {
            '-'
        };
        if separator(c) && (out.is_empty() || out.ends_with(separator)) {
            continue;
        }
        out.push(c);
    }
    let out = out.trim_end_matches(separator);
    (!out.is_empty()).then(|| out.to_string())
}

/// Whether `name` is an appc `ACIdentifier` as it is.
pub fn is_ac_identifier(name: &str) -> bool {
    ac_identifier(name).as_deref() == Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(apps: Vec<App>, ports: &[&str]) -> PodManifest {
        PodManifest {
            uuid: "u".into(),
            created: crate::podstore::time::Timestamp::now(),
            apps,
            exit_policy: Default::default(),
            volumes: Vec::new(),
            sandbox: None,
            meta: Default::default(),
            cgroup_parent: None,
            ports: ports.iter().map(|p| p.to_string()).collect(),
        }
    }

    fn image_app(name: &str, exposed: &[&str]) -> App {
        App {
            image: Some(AppImage {
                id: "sha256:00".into(),
                name: "docker.io/library/web:1.0".into(),
                store: "/nonexistent".into(),
                working_dir: Some("/srv".into()),
                user: None,
                no_overlay: false,
                home_from_user: false,
                exposed_ports: exposed.iter().map(|p| p.to_string()).collect(),
            }),
            ..App::new(name, ["/bin/web"])
        }
    }

    /// The pod's ports: prepare's, named and numeric, then the live ones not among them.
    #[test]
    fn the_pods_ports_are_prepares_then_the_live_ones() {
        let m = manifest(
            vec![image_app("web", &["80/tcp"])],
            &["80-tcp:8080", "127.0.0.1:5353:53/udp"],
        );
        let live = PortMapping::parse("9090:90").unwrap();
        let again = PortMapping::parse("127.0.0.1:5353:53/udp").unwrap();
        let pod = pod_manifest(&m, &[again, live]).unwrap();
        let ports = pod["ports"].as_array().unwrap();
        let brief: Vec<(String, u64, Option<&str>)> = ports
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["hostPort"].as_u64().unwrap(),
                    p["hostIP"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            brief,
            [
                ("53-udp".to_string(), 5353, Some("127.0.0.1")),
                ("80-tcp".to_string(), 8080, None),
                ("90-tcp".to_string(), 9090, None),
            ]
        );
        assert_eq!(ports[1]["podPort"]["port"], 80);
        let app = &pod["apps"][0];
        assert_eq!(app["image"]["name"], "docker.io/library/web");
        assert_eq!(
            app["image"]["labels"][0],
            json!({"name": "version", "value": "1.0"})
        );
        assert_eq!(app["app"]["workingDirectory"], "/srv");
        // A name the image does not expose (a hand-edited pod.json) names the pod.
        let m = manifest(vec![image_app("web", &[])], &["80-tcp:8080"]);
        let err = pod_manifest(&m, &[]).unwrap_err();
        assert!(err.to_string().starts_with("pod u: "), "{err}");
    }

    /// Two apps whose names become the same appc name stay apart; a sandbox without apps
    /// has its own isolators; annotations appc refuses are left out.
    #[test]
    fn apps_keep_apart_and_a_sandbox_has_the_pods_isolators() {
        let mut m = manifest(vec![App::new("a_b", ["/x"]), App::new("a-b", ["/y"])], &[]);
        m.meta
            .annotations
            .insert("example.com/ok".into(), "1".into());
        m.meta.annotations.insert("Not OK".into(), "2".into());
        let pod = pod_manifest(&m, &[]).unwrap();
        assert_eq!(pod["apps"][0]["name"], "a-b");
        assert_eq!(pod["apps"][1]["name"], "a-b-2");
        assert_eq!(
            pod["annotations"],
            json!([{"name": "example.com/ok", "value": "1"}])
        );
        let mut sandbox = manifest(Vec::new(), &[]);
        let mut isolators = Isolators::default();
        isolators.limits.memory = Some(1 << 20);
        isolators.limits.cpu_millis = Some(500);
        sandbox.sandbox = Some(isolators);
        let pod = pod_manifest(&sandbox, &[]).unwrap();
        assert_eq!(pod["apps"], json!([]));
        assert_eq!(
            pod["isolators"],
            json!([
                {"name": "resource/memory", "value": {"limit": "1048576"}},
                {"name": "resource/cpu", "value": {"request": "500m", "limit": "500m"}},
            ])
        );
    }

    #[test]
    fn names_become_appc_names() {
        assert_eq!(ac_name("busybox"), "busybox");
        assert_eq!(ac_name("My_App.sh"), "my-app-sh");
        assert_eq!(ac_name("--x--y--"), "x-y");
        assert_eq!(ac_name("_"), "app");
        let mut used = BTreeSet::new();
        assert_eq!(unique("a".into(), &mut used), "a");
        assert_eq!(unique("a".into(), &mut used), "a-2");
        assert_eq!(unique("a".into(), &mut used), "a-3");
    }

    #[test]
    fn image_names_become_identifiers_and_a_version_label() {
        assert_eq!(
            split_name("docker.io/library/busybox:latest"),
            ("docker.io/library/busybox", Some("latest"))
        );
        assert_eq!(
            split_name("docker://localhost:5000/web:1.0"),
            ("localhost:5000/web", Some("1.0"))
        );
        assert_eq!(
            split_name("localhost:5000/web"),
            ("localhost:5000/web", None)
        );
        assert_eq!(split_name("a/b@sha256:00"), ("a/b", None));
        assert_eq!(split_name("oci:/tmp/img:v1"), ("/tmp/img", Some("v1")));
        assert_eq!(
            ac_identifier("localhost:5000/web").as_deref(),
            Some("localhost-5000/web")
        );
        assert_eq!(ac_identifier("/tmp//Img").as_deref(), Some("tmp/img"));
        assert_eq!(ac_identifier("::"), None);
        assert!(is_ac_identifier("example.com/team"));
        assert!(!is_ac_identifier("Team"));
    }

    #[test]
    fn image_ids_are_sha512_in_appc_s_form() {
        // SHA-512 of "abc" (FIPS 180-2's example).
        assert_eq!(
            sha512_id(b"abc"),
            "sha512-ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        );
    }

    #[test]
    fn a_later_environment_value_replaces_an_earlier_one() {
        let env = [("A", "1"), ("B", "2"), ("A", "3"), ("1BAD", "x")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            environment(&env),
            json!([{"name": "A", "value": "3"}, {"name": "B", "value": "2"}])
        );
    }

    #[test]
    fn user_and_group_default_to_root_and_follow_the_image() {
        let mut app = App::new("a", ["/bin/sh"]);
        assert_eq!(user_group(&app), ("0".into(), "0".into()));
        app.image = Some(AppImage {
            id: "sha256:00".into(),
            name: "x".into(),
            store: "/nonexistent".into(),
            working_dir: None,
            user: Some("nobody".into()),
            no_overlay: false,
            home_from_user: false,
            exposed_ports: vec!["80/tcp".into(), "53/udp".into(), "80/tcp".into()],
        });
        assert_eq!(user_group(&app), ("nobody".into(), "0".into()));
        let ports = app_ports(&app);
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[0]["name"], "80-tcp");
        assert_eq!(ports[1]["protocol"], "udp");
        // The config is not in a store: no id rather than a made-up one.
        assert_eq!(image(app.image.as_ref().unwrap()).get("id"), None);
    }

    #[test]
    fn an_apps_own_limits_score_and_annotations_are_its_isolators_and_annotations() {
        let mut app = App::new("a", ["/bin/sh"]);
        app.isolators.limits.memory = Some(1 << 30);
        app.isolators.own_limits.memory = Some(268_435_456);
        app.isolators.own_limits.cpu_millis = Some(100_000);
        app.isolators.own_limits.cpu_shares = Some(512);
        app.oom_score_adjust = Some(300);
        app.annotations.insert("nomad/alloc".into(), "a1".into());
        app.annotations
            .insert("Not An Identifier".into(), "x".into());
        let value = runtime_app(&app, "a".into(), &[]);
        assert_eq!(
            value["app"]["isolators"],
            json!([
                {"name": "resource/memory", "value": {"limit": "268435456"}},
                {"name": "resource/cpu", "value": {"request": "100000m", "limit": "100000m"}},
                {"name": "os/linux/cpu-shares", "value": 512},
                {"name": "os/linux/oom-score-adj", "value": 300},
            ])
        );
        assert_eq!(
            value["annotations"],
            json!([{"name": "nomad/alloc", "value": "a1"}])
        );
        // The pod's limits, given before the first app, are its when it has none of its own.
        app.isolators.own_limits = Default::default();
        let value = runtime_app(&app, "a".into(), &[]);
        assert_eq!(value["app"]["isolators"][0]["value"]["limit"], "1073741824");
    }
}
