//! Pods that run an image: the app an image makes, and whether a word names one ([`app`]),
//! what the pod manifest records of the image ([`AppImage`]), the pod's root filesystem
//! built from the image's layers ([`rootfs`], with the overlay mount in [`overlay`]), the image's `User` resolved in the pod's own `/etc/passwd` and
//! `/etc/group` ([`user`], applied by the pod's init through [`process`]), and which images
//! pods use ([`images_in_use`]), so that the image store keeps them.
//!
//! An image app is a `--rootfs` app whose directory is `rootfs` in its [`app_dir`]: the stage
//! gives it `/proc`, a minimal `/dev`, `/etc/resolv.conf` and `/etc/hosts` the same way, and
//! enters its `WorkingDir` as it enters a `--working-dir`.

pub mod app;
pub mod overlay;
pub mod process;
pub mod rootfs;
pub mod user;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::podstore::{App, PodError, PodStore};

pub use crate::podstore::manifest::AppImage;

/// Where app `index` (named `name`) of the pod in `pod_dir` keeps its root filesystem: the
/// pod's directory for the first app (as for a pod of one app), `<pod>/apps/<name>` for the
/// others.
pub fn app_dir(pod_dir: &Path, index: usize, name: &str) -> PathBuf {
    if index == 0 {
        pod_dir.to_path_buf()
    } else {
        pod_dir.join("apps").join(name)
    }
}

/// The directory an image app's root filesystem is mounted or unpacked at, in its
/// [`app_dir`].
pub fn rootfs_dir(app_dir: &Path) -> PathBuf {
    app_dir.join("rootfs")
}

/// The app as the stage runs it: an image app's root directory is `rootfs` in its
/// [`app_dir`].
pub fn for_stage(mut app: App, app_dir: &Path) -> App {
    if app.image.is_some() {
        app.rootfs = Some(rootfs_dir(app_dir));
    }
    app
}

/// The IDs of the images pods in `store` use (prepared, running, or exited and not yet
/// removed by gc or rm), each with those pods' UUIDs. A pod whose manifest cannot be read
/// is an error: the caller must not take its image for unused.
pub fn images_in_use(store: &PodStore) -> Result<BTreeMap<String, Vec<String>>, PodError> {
    let mut used: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in store.list()? {
        match pod.manifest() {
            Ok(manifest) => {
                for image in manifest.apps.into_iter().filter_map(|app| app.image) {
                    let users = used.entry(image.id).or_default();
                    if !users.contains(&pod.uuid) {
                        users.push(pod.uuid.clone());
                    }
                }
            }
            Err(e) if e.is_gone() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(used)
}
