//! The CRI's ImageService over rkt's image store (`crates/image`, `<data>/images`): pull
//! (with the request's credentials, else auth.d's, and the registry mirrors of
//! `<config>/certs.d`), list, status, remove, fs info. A pull returns once every layer is
//! unpacked for overlay mounts, so the first container does not pay for it.
//!
//! Names: a CRI image name without a transport is a registry reference
//! (`busybox` is `docker.io/library/busybox:latest`); the store keeps it under that full
//! name, which is the image's `repo_tags` entry. IDs are the config's digest.

use std::collections::BTreeSet;

use anyhow::Context;
use image::transport::registry::{Credentials, RegistryOptions};
use image::{DockerRef, FetchOptions, ImageRecord, ImageRef, PullPolicy, Store, Target};

use crate::options::Config;
use crate::proto;

/// The store of the data directory in effect.
pub fn store(config: &Config) -> anyhow::Result<Store> {
    Ok(rkt::image_pod::app::open_store(config.data_dir())?)
}

/// A CRI image name as a registry reference.
pub fn docker_ref(name: &str) -> anyhow::Result<DockerRef> {
    let name = name.strip_prefix("docker://").unwrap_or(name);
    Ok(DockerRef::parse(name, name)?)
}

/// PullImage: returns the image's ID.
pub fn pull(
    config: &Config,
    name: &str,
    auth: Option<&proto::AuthConfig>,
) -> anyhow::Result<String> {
    let reference = docker_ref(name)?;
    let store = store(config)?;
    let mut registry = RegistryOptions {
        hosts_dirs: config.config_dirs.registry_hosts_dirs(),
        ..RegistryOptions::default()
    };
    registry.credentials = match auth {
        Some(a) if !a.username.is_empty() => Some(Credentials {
            user: a.username.clone(),
            password: a.password.clone(),
        }),
        Some(a) if !a.auth.is_empty() => {
            use base64::Engine as _;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(&a.auth)
                .context("the pull's auth is not base64")?;
            let text = String::from_utf8_lossy(&decoded).into_owned();
            let (user, password) = text
                .split_once(':')
                .context("the pull's auth is not base64 of USER:PASSWORD")?;
            Some(Credentials {
                user: user.to_string(),
                password: password.to_string(),
            })
        }
        _ => {
            let auth = rkt::config::auth::load_docker_auth(&config.config_dirs)?;
            auth.get(&reference.host)
                .or_else(|| auth.get(reference.api_host()))
                .map(|a| Credentials {
                    user: a.user.clone(),
                    password: a.password.clone(),
                })
        }
    };
    let options = FetchOptions {
        policy: PullPolicy::Update,
        registry,
        ..FetchOptions::default()
    };
    let text = format!("docker://{}", reference.store_name());
    let record = image::fetch(&store, &ImageRef::Docker(reference), &text, &options)
        .with_context(|| format!("pulling {name}"))?;
    // Ready to run: each layer unpacked once, for the overlays of the containers.
    image::layers::layer_dirs(&store, &record).with_context(|| format!("unpacking {name}"))?;
    Ok(record.id.to_string())
}

/// The stored image a CRI image spec names (a name, `name@digest`, an ID or a unique ID
/// prefix); `None` when it is not stored.
pub fn find(store: &Store, query: &str) -> anyhow::Result<Option<ImageRecord>> {
    let images = store.images()?;
    let bare = query.strip_prefix("sha256:").unwrap_or(query);
    if bare.len() >= 12 && bare.bytes().all(|b| b.is_ascii_hexdigit()) {
        let found: Vec<&ImageRecord> = images
            .iter()
            .filter(|r| r.id.hex().starts_with(bare))
            .collect();
        if found.len() == 1 {
            return Ok(Some(found[0].clone()));
        }
    }
    let Ok(reference) = docker_ref(query) else {
        return Ok(None);
    };
    match &reference.target {
        Target::Tag(_) => {
            let name = reference.store_name();
            Ok(images.into_iter().find(|r| r.names.contains(&name)))
        }
        // A repo digest: an image fetched from that repository with that manifest.
        Target::Digest(d) => {
            let repo = format!("{}/{}", reference.host, reference.repository);
            Ok(images.into_iter().find(|r| {
                r.names.iter().any(|n| {
                    repo_of(n) == repo && (r.name_manifests.get(n) == Some(d) || (r.manifest == *d))
                })
            }))
        }
    }
}

/// `host/repository` of a stored name `host/repository:tag` or `…@digest`.
fn repo_of(name: &str) -> &str {
    if let Some((repo, _)) = name.split_once('@') {
        return repo;
    }
    match name.rfind(':') {
        Some(colon) if !name[colon..].contains('/') => &name[..colon],
        _ => name,
    }
}

/// The CRI's view of a stored image.
pub fn to_cri(store: &Store, record: &ImageRecord) -> proto::Image {
    let mut tags = Vec::new();
    let mut digests = BTreeSet::new();
    for name in &record.names {
        if name.contains('@') {
            digests.insert(name.clone());
            continue;
        }
        tags.push(name.clone());
        let manifest = record.name_manifests.get(name).unwrap_or(&record.manifest);
        digests.insert(format!("{}@{manifest}", repo_of(name)));
    }
    let user = store
        .config(record)
        .ok()
        .and_then(|c| c.config().clone())
        .and_then(|c| c.user().clone())
        .unwrap_or_default();
    let user = user.split(':').next().unwrap_or_default().to_string();
    let (uid, username) = match user.parse::<i64>() {
        Ok(n) => (Some(proto::Int64Value { value: n }), String::new()),
        Err(_) => (None, user),
    };
    proto::Image {
        id: record.id.to_string(),
        repo_tags: tags,
        repo_digests: digests.into_iter().collect(),
        size: record.size,
        uid,
        username,
        spec: Some(proto::ImageSpec {
            image: record.id.to_string(),
            annotations: Default::default(),
        }),
        pinned: false,
    }
}

/// RemoveImage: nothing when it is not stored; refused while a container uses it.
pub fn remove(config: &Config, query: &str) -> anyhow::Result<()> {
    let store = store(config)?;
    let Some(record) = find(&store, query)? else {
        return Ok(());
    };
    let pods = rkt::pod::PodStore::new(config.pods_dir());
    let in_use: BTreeSet<image::Digest> = rkt::image_pod::images_in_use(&pods)?
        .into_keys()
        .filter_map(|id| id.parse().ok())
        .collect();
    // Every name goes: removing by a name that is one of several would only untag it.
    store
        .remove(&record.id.to_string(), &in_use)
        .with_context(|| format!("removing image {query}"))?;
    Ok(())
}

/// ImageFsInfo: the bytes and files of the store's directory.
pub fn fs_info(config: &Config) -> anyhow::Result<proto::FilesystemUsage> {
    let store = store(config)?;
    let root = store.root().to_path_buf();
    let (mut bytes, mut inodes) = (0u64, 0u64);
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            inodes += 1;
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                bytes += meta.len();
            }
        }
    }
    Ok(proto::FilesystemUsage {
        timestamp: now_ns(),
        fs_id: Some(proto::FilesystemIdentifier {
            mountpoint: root.display().to_string(),
        }),
        used_bytes: Some(proto::UInt64Value { value: bytes }),
        inodes_used: Some(proto::UInt64Value { value: inodes }),
    })
}

/// Now, in nanoseconds since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_of_stored_names() {
        assert_eq!(
            repo_of("docker.io/library/busybox:1.36"),
            "docker.io/library/busybox"
        );
        assert_eq!(repo_of("127.0.0.1:5000/a/b:t"), "127.0.0.1:5000/a/b");
        assert_eq!(repo_of("127.0.0.1:5000/a/b"), "127.0.0.1:5000/a/b");
        assert_eq!(repo_of("gcr.io/x@sha256:00"), "gcr.io/x");
    }

    #[test]
    fn a_bare_name_is_docker_hubs_latest() {
        assert_eq!(
            docker_ref("busybox").unwrap().store_name(),
            "docker.io/library/busybox:latest"
        );
    }
}
