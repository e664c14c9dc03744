//! The one verified copy every transport goes through: read the manifest the reference
//! names (choosing this platform's from a multi-arch index), check it against the digest
//! the reference or index gives, then store config and layers, each checked against its
//! descriptor's digest and size while it streams, the manifest last, and record the image.
//! Runs under the store's shared lock, so gc cannot remove blobs it is about to use.

use crate::digest::Digest;
use crate::lock::LockKind;
use crate::partial::Progress;
use crate::platform::Platform;
use crate::store::{ImageRecord, Store, StoreError};
use crate::transport::{Source, TransportError};

/// Layer media types that can be unpacked.
pub const LAYER_TYPES: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
];

const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// What went wrong copying an image; every variant names it.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The transport could not read the image from its source.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The store could not take a blob or the image.
    #[error("{image}")]
    Store {
        /// The image, as the user named it.
        image: String,
        /// What the store failed at.
        #[source]
        source: StoreError,
    },
    #[error("{image}: no manifest for this machine's platform {wanted} (the index has: {})",
        if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    /// The image's index has no manifest for the wanted platform.
    NoPlatform {
        /// The image, as the user named it.
        image: String,
        /// The platform asked for.
        wanted: Platform,
        /// The platforms the index has.
        available: Vec<String>,
    },
    #[error("{image}: {what} has media type {media_type:?}, which rkt cannot use")]
    /// A manifest, config or layer has a media type this crate cannot use.
    Unsupported {
        /// The image, as the user named it.
        image: String,
        /// Which part of it (`its manifest`, `layer sha256:…`).
        what: String,
        /// The media type it has.
        media_type: String,
    },
    #[error("{image}: {what}: {reason}")]
    /// A manifest, index or config does not parse or contradicts itself.
    Malformed {
        /// The image, as the user named it.
        image: String,
        /// Which part of it.
        what: String,
        /// What is wrong.
        reason: String,
    },
}

fn media_type(v: &serde_json::Value) -> Option<&str> {
    v.get("mediaType").and_then(|m| m.as_str())
}

/// Copies the image `source` names into `store`, recording it under `names`; returns its
/// record. Blobs already stored are not read again; a blob whose download broke off earlier
/// continues from the bytes kept. `progress` follows the config and layer downloads.
pub fn copy_image(
    source: &mut dyn Source,
    store: &Store,
    names: &[String],
    platform: &Platform,
    progress: &mut dyn Progress,
) -> Result<ImageRecord, CopyError> {
    let image = source.image();
    let store_err = |source| CopyError::Store {
        image: image.clone(),
        source,
    };
    let malformed = |what: &str, reason: String| CopyError::Malformed {
        image: image.clone(),
        what: what.to_string(),
        reason,
    };
    let _lock = store.lock(LockKind::Shared).map_err(store_err)?;

    let top = source.top()?;
    let mut bytes = top.bytes;
    let mut expected = top.digest;
    let mut expected_size = None;
    let mut value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| malformed("manifest", e.to_string()))?;
    if value.get("manifests").is_some()
        || media_type(&value).is_some_and(|m| INDEX_TYPES.contains(&m))
    {
        check_digest(&bytes, expected.as_ref(), None).map_err(store_err)?;
        let chosen =
            choose_platform(&value, platform).map_err(|available| CopyError::NoPlatform {
                image: image.clone(),
                wanted: platform.clone(),
                available,
            })?;
        let digest: Digest = chosen
            .get("digest")
            .and_then(|d| d.as_str())
            .unwrap_or("")
            .parse()
            .map_err(|e: crate::digest::DigestError| malformed("index", e.to_string()))?;
        let size = chosen.get("size").and_then(|s| s.as_u64());
        bytes = source.manifest(&digest)?;
        expected = Some(digest);
        expected_size = size;
        value = serde_json::from_slice(&bytes).map_err(|e| malformed("manifest", e.to_string()))?;
    }
    let manifest_digest =
        check_digest(&bytes, expected.as_ref(), expected_size).map_err(store_err)?;
    if value.get("schemaVersion").and_then(|v| v.as_u64()) != Some(2) {
        return Err(CopyError::Unsupported {
            image: image.clone(),
            what: "the manifest".into(),
            media_type: media_type(&value).unwrap_or("schema version 1").to_string(),
        });
    }
    let manifest: oci_spec::image::ImageManifest = serde_json::from_slice(&bytes)
        .map_err(|e| malformed(&format!("manifest {manifest_digest}"), e.to_string()))?;
    for (i, layer) in manifest.layers().iter().enumerate() {
        let mt = layer.media_type().to_string();
        if !LAYER_TYPES.contains(&mt.as_str()) {
            return Err(CopyError::Unsupported {
                image: image.clone(),
                what: format!("layer {} ({})", i + 1, layer.digest()),
                media_type: mt,
            });
        }
    }
    let digest_of = |d: &oci_spec::image::Digest| {
        Digest::try_from(d)
            .map_err(|e| malformed(&format!("manifest {manifest_digest}"), e.to_string()))
    };

    let config_digest = digest_of(manifest.config().digest())?;
    let mut total = bytes.len() as u64;
    total += put(
        source,
        store,
        &config_digest,
        manifest.config().size(),
        progress,
    )
    .map_err(|e| e.with_image(&image))?;
    let config_bytes = store.read_blob(&config_digest).map_err(store_err)?;
    let config: oci_spec::image::ImageConfiguration = serde_json::from_slice(&config_bytes)
        .map_err(|e| malformed(&format!("config {config_digest}"), e.to_string()))?;
    if config.rootfs().diff_ids().len() != manifest.layers().len() {
        return Err(malformed(
            &format!("config {config_digest}"),
            format!(
                "lists {} layer diff IDs for {} layers",
                config.rootfs().diff_ids().len(),
                manifest.layers().len()
            ),
        ));
    }
    for layer in manifest.layers() {
        let d = digest_of(layer.digest())?;
        total +=
            put(source, store, &d, layer.size(), progress).map_err(|e| e.with_image(&image))?;
    }
    store
        .put_blob(&manifest_digest, Some(bytes.len() as u64), &mut &bytes[..])
        .map_err(store_err)?;
    store
        .add_image(&config_digest, &manifest_digest, total, names)
        .map_err(store_err)
}

enum PutError {
    Transport(TransportError),
    Store(StoreError),
}

impl PutError {
    fn with_image(self, image: &str) -> CopyError {
        match self {
            PutError::Transport(e) => CopyError::Transport(e),
            PutError::Store(source) => CopyError::Store {
                image: image.to_string(),
                source,
            },
        }
    }
}

fn put(
    source: &mut dyn Source,
    store: &Store,
    digest: &Digest,
    size: u64,
    progress: &mut dyn Progress,
) -> Result<u64, PutError> {
    if store.has_blob(digest) {
        return Ok(size);
    }
    let Some(mut partial) = store.partial(digest, size).map_err(PutError::Store)? else {
        // Another process is downloading this blob: download it apart, as before resuming
        // existed; the first to finish stores it.
        let mut reader = source.blob(digest, size).map_err(PutError::Transport)?;
        progress.blob_started(digest, size, 0);
        let mut counted = Counted {
            inner: &mut reader,
            progress,
        };
        let result = store.put_blob(digest, Some(size), &mut counted);
        counted.progress.blob_done();
        return result.map_err(PutError::Store);
    };
    if store.has_blob(digest) {
        partial.discard();
        return Ok(size);
    }
    let (mut reader, from) = match source.blob_from(digest, size, partial.len()) {
        Ok(r) => r,
        Err(e) => {
            // Keep a partial download for the next attempt, but not an empty file.
            if partial.is_empty() {
                partial.discard();
            }
            return Err(PutError::Transport(e));
        }
    };
    partial.restart_at(from).map_err(PutError::Store)?;
    progress.blob_started(digest, size, from);
    let result = partial.finish(store, size, &mut reader, progress);
    progress.blob_done();
    result.map_err(PutError::Store)
}

/// A reader that tells `progress` of the bytes it passes on.
struct Counted<'a, R> {
    inner: R,
    progress: &'a mut dyn Progress,
}

impl<R: std::io::Read> std::io::Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advanced(n as u64);
        Ok(n)
    }
}

/// The digest of `bytes`, which must match `expected` (and `size`) when given.
fn check_digest(
    bytes: &[u8],
    expected: Option<&Digest>,
    size: Option<u64>,
) -> Result<Digest, StoreError> {
    let actual = Digest::of(bytes);
    if let Some(expected) = expected {
        if let Some(size) = size {
            if size != bytes.len() as u64 {
                return Err(StoreError::SizeMismatch {
                    digest: expected.clone(),
                    expected: size,
                    actual: bytes.len() as u64,
                });
            }
        }
        if &actual != expected {
            return Err(StoreError::DigestMismatch {
                expected: expected.clone(),
                actual,
                size: bytes.len() as u64,
            });
        }
    }
    Ok(actual)
}

/// The index entry for `platform`, or the platforms the index has.
fn choose_platform<'a>(
    index: &'a serde_json::Value,
    platform: &Platform,
) -> Result<&'a serde_json::Value, Vec<String>> {
    let entries = index
        .get("manifests")
        .and_then(|m| m.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut available = Vec::new();
    for entry in entries {
        match entry.get("platform").and_then(Platform::from_json) {
            Some(p) if platform.accepts(&p) => return Ok(entry),
            Some(p) => available.push(p.to_string()),
            None => {}
        }
    }
    Err(available)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chooses_this_platform_or_lists_the_others() {
        let index = serde_json::json!({"manifests": [
            {"digest": "a", "platform": {"os": "linux", "architecture": "s390x"}},
            {"digest": "b", "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"digest": "c", "platform": {"os": "unknown", "architecture": "unknown"}},
        ]});
        let arm = Platform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: None,
        };
        assert_eq!(choose_platform(&index, &arm).unwrap()["digest"], "b");
        let riscv = Platform {
            architecture: "riscv64".into(),
            ..arm
        };
        assert_eq!(
            choose_platform(&index, &riscv).unwrap_err(),
            vec!["linux/s390x", "linux/arm64/v8", "unknown/unknown"]
        );
    }
}
