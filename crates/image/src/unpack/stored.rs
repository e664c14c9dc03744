//! A stored image unpacked into one directory: its layers, bottom first, each checked
//! against the config's `diff_id` and applied by [`unpack_layer`]. Also the error of every
//! walk over a stored image's layers ([`UnpackError`]), which [`crate::layers`] shares.

use std::path::{Path, PathBuf};

use super::layer::{unpack_layer, LayerError, UnpackOptions};
use crate::digest::Digest;
use crate::store::{ImageRecord, Store, StoreError};

/// What went wrong unpacking a stored image: a layer that could not be applied, the store,
/// the image's own description of its layers, or the target.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// A layer could not be applied (it names the layer and the entry).
    #[error(transparent)]
    Layer(#[from] LayerError),
    /// The store could not give the image's manifest, config or a layer blob.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The image's manifest and config do not describe its layers consistently.
    #[error("image {image}: {reason}")]
    Image {
        /// The image ID.
        image: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The target directory (or a directory beside it) could not be made or owned.
    #[error("unpack target {}", path.display())]
    Target {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Unpacks every layer of a stored image, in order, into `target` (created if missing),
/// checking each against the config's `diff_id`.
pub fn unpack_image(
    store: &Store,
    image: &ImageRecord,
    target: &Path,
    options: &UnpackOptions,
) -> Result<(), UnpackError> {
    let manifest = store.manifest(image)?;
    let config = store.config(image)?;
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != manifest.layers().len() {
        return Err(UnpackError::Image {
            image: image.id.to_string(),
            reason: "the config's diff_ids do not match the manifest's layers".into(),
        });
    }
    std::fs::create_dir_all(target).map_err(|source| UnpackError::Target {
        path: target.to_path_buf(),
        source,
    })?;
    if let (Some(shift), true) = (options.id_shift, options.same_owner) {
        let root = shift.host_id(0);
        std::os::unix::fs::lchown(target, Some(root), Some(root)).map_err(|source| {
            UnpackError::Target {
                path: target.to_path_buf(),
                source,
            }
        })?;
    }
    for (layer, diff_id) in manifest.layers().iter().zip(diff_ids) {
        let digest = Digest::try_from(layer.digest()).map_err(|e| UnpackError::Image {
            image: image.id.to_string(),
            reason: e.to_string(),
        })?;
        let blob = store.open_blob(&digest)?;
        unpack_layer(blob, target, &digest.to_string(), Some(diff_id), options)?;
    }
    Ok(())
}
