//! Unpacked layers for overlay root filesystems: each layer of a stored image unpacked once,
//! on its own, into `layers/<diff_id hex>/` under the store's root, with its whiteouts
//! recorded as overlayfs reads them (see [`UnpackOptions::overlay_whiteouts`]). A runtime
//! stacks an image's layer directories as the lower directories of an overlay mount.
//!
//! A layer is unpacked into `tmp/` and renamed into place only once complete, so a layer
//! directory is always whole; two processes unpacking the same layer at once both succeed
//! and one copy stays. [`Store::gc`](crate::Store::gc) (in [`crate::gc`]) removes the
//! directories of layers no remaining image has.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::digest::Digest;
use crate::lock::LockKind;
use crate::store::{ImageRecord, Store, StoreError};
use crate::unpack::{unpack_layer, UnpackError, UnpackOptions};

/// The directory under the store's root holding unpacked layers.
pub const LAYERS_DIR: &str = "layers";

/// Where the layer with `diff_id` is (or would be) unpacked.
pub fn layer_dir(store: &Store, diff_id: &Digest) -> PathBuf {
    store.root().join(LAYERS_DIR).join(diff_id.hex())
}

/// The unpacked directories of `image`'s layers, bottom layer first, unpacking those not
/// unpacked yet. Holds the store lock shared meanwhile, so `gc` does not remove them
/// half-way.
pub fn layer_dirs(store: &Store, image: &ImageRecord) -> Result<Vec<PathBuf>, UnpackError> {
    let _lock = store.lock(LockKind::Shared)?;
    let manifest = store.manifest(image)?;
    let diff_ids = store.diff_ids(image)?;
    if diff_ids.len() != manifest.layers().len() {
        return Err(UnpackError::Image {
            image: image.id.to_string(),
            reason: "the config's diff_ids do not match the manifest's layers".into(),
        });
    }
    let parent = store.root().join(LAYERS_DIR);
    fs::create_dir_all(&parent).map_err(|source| UnpackError::Target {
        path: parent.clone(),
        source,
    })?;
    let mut dirs = Vec::new();
    for (layer, diff_id) in manifest.layers().iter().zip(&diff_ids) {
        let dir = layer_dir(store, diff_id);
        if !dir.is_dir() {
            let digest = Digest::try_from(layer.digest()).map_err(|e| UnpackError::Image {
                image: image.id.to_string(),
                reason: e.to_string(),
            })?;
            unpack_into_place(store, &digest, diff_id, &dir)?;
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

fn unpack_into_place(
    store: &Store,
    blob: &Digest,
    diff_id: &Digest,
    dir: &Path,
) -> Result<(), UnpackError> {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("layer-{}-", diff_id.hex()))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .tempdir_in(store.tmp_dir())
        .map_err(|source| UnpackError::Target {
            path: store.tmp_dir(),
            source,
        })?;
    let options = UnpackOptions {
        overlay_whiteouts: true,
        ..UnpackOptions::default()
    };
    let reader = store.open_blob(blob)?;
    unpack_layer(
        reader,
        tmp.path(),
        &blob.to_string(),
        Some(&diff_id.to_string()),
        &options,
    )?;
    // tempdir makes it 0700; the root of an image's tree is 0755 unless a layer says else.
    let tmp = tmp.keep();
    match fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        // Another process unpacked it meanwhile: theirs stays.
        Err(e)
            if dir.is_dir() && matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) =>
        {
            let _ = fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(source) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(UnpackError::Target {
                path: dir.to_path_buf(),
                source,
            })
        }
    }
}

/// Removes the unpacked layers whose diff ID is not in `keep`; called by [`crate::gc`] with the store
/// lock held exclusively. Returns how many went and what failed.
pub(crate) fn remove_unused(store: &Store, keep: &BTreeSet<Digest>) -> (usize, Vec<StoreError>) {
    let parent = store.root().join(LAYERS_DIR);
    let mut removed = 0;
    let mut errors = Vec::new();
    let entries = match fs::read_dir(&parent) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (0, errors),
        Err(source) => {
            errors.push(StoreError::Io {
                path: parent,
                source,
            });
            return (0, errors);
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(digest) = name.to_str().and_then(|n| Digest::from_hex(n).ok()) else {
            continue;
        };
        if keep.contains(&digest) {
            continue;
        }
        match fs::remove_dir_all(entry.path()) {
            Ok(()) => removed += 1,
            Err(source) => errors.push(StoreError::Io {
                path: entry.path(),
                source,
            }),
        }
    }
    (removed, errors)
}
