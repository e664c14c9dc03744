//! Building and releasing an image app's root filesystem at `rootfs` in its app directory
//! (`<pod>/rootfs` for the first app, see [`super::app_dir`]): an overlay of
//! the image's layers (each unpacked once in the image store) when the kernel and the
//! filesystem under the pod directory support it, else, or with `--no-overlay`, a copy of
//! the image unpacked into the pod directory. Built by the runner before the stage starts;
//! released with the pod's networks (at the end of `rkt run`, by `rkt rm` and `rkt gc`).
//!
//! A pod in a user namespace of its own (`--private-users`) always gets a copy, with every
//! owner shifted into the pod's host id range: the shared layers (owned by host ids) would
//! be `nobody`'s in the pod, and its root could not write anywhere in its own image.

use std::fs;
use std::path::{Path, PathBuf};

use image::layers::layer_dirs;
use image::unpack::{unpack_image, IdShift, UnpackError, UnpackOptions};
use image::{Store, StoreError};

use super::overlay::{mount_overlay, unmount_all, OverlayError};
use super::{rootfs_dir, AppImage};

/// Why an image pod's root filesystem could not be built or released.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error("image {image} (was it removed with `rkt image rm`?)")]
    Store { image: String, source: StoreError },
    #[error("image {image}")]
    Unpack { image: String, source: UnpackError },
    #[error(transparent)]
    Overlay(#[from] OverlayError),
    #[error("cannot create {path}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot remove {path}")]
    Remove {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How the root filesystem was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built {
    Overlay,
    Copy,
}

/// Builds the root filesystem of the app whose directory is `app_dir` from `image`;
/// `shift` is the pod's user namespace range (`--private-users`), which makes it a copy
/// owned by that range.
pub fn build(
    app_dir: &Path,
    image: &AppImage,
    shift: Option<IdShift>,
) -> Result<Built, RootfsError> {
    let store_err = |source| RootfsError::Store {
        image: image.id.clone(),
        source,
    };
    let unpack_err = |source| RootfsError::Unpack {
        image: image.id.clone(),
        source,
    };
    let store = Store::open(&image.store).map_err(store_err)?;
    let record = store.resolve(&image.id).map_err(store_err)?;
    fs::create_dir_all(app_dir).map_err(|source| RootfsError::Create {
        path: app_dir.to_path_buf(),
        source,
    })?;
    let target = rootfs_dir(app_dir);
    if !image.no_overlay && shift.is_none() {
        let lowers = layer_dirs(&store, &record).map_err(unpack_err)?;
        match mount_overlay(&lowers, &app_dir.join("overlay"), &target) {
            Ok(()) => return Ok(Built::Overlay),
            Err(e) if e.unsupported() => remove_dir(&app_dir.join("overlay"))?,
            Err(e) => return Err(e.into()),
        }
    }
    remove_dir(&target)?;
    let _lock = store
        .lock(image::lock::LockKind::Shared)
        .map_err(store_err)?;
    let options = UnpackOptions {
        id_shift: shift,
        ..UnpackOptions::default()
    };
    unpack_image(&store, &record, &target, &options).map_err(unpack_err)?;
    Ok(Built::Copy)
}

fn remove_dir(path: &Path) -> Result<(), RootfsError> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(RootfsError::Remove {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Unmounts the overlays of the pod's apps, if mounted; what is left (upper directories,
/// copies) goes with the pod directory. Safe to call for any pod, any number of times.
pub fn release(pod_dir: &Path) -> Result<(), RootfsError> {
    let mut app_dirs = vec![pod_dir.to_path_buf()];
    if let Ok(others) = fs::read_dir(pod_dir.join("apps")) {
        app_dirs.extend(others.flatten().map(|entry| entry.path()));
    }
    // Every app's, even after one fails; the first failure is reported (gc retries).
    let mut first_error = None;
    for app_dir in app_dirs {
        let target = rootfs_dir(&app_dir);
        if target.exists() {
            if let Err(e) = unmount_all(&target) {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
