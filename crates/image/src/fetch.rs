//! Fetching by reference: turns an [`ImageRef`] into the right transport, applies the pull
//! policy against the store, and runs the verified copy.

use std::path::Path;

use crate::copy::{copy_image, CopyError};
use crate::partial::{NoProgress, Progress};
use crate::platform::Platform;
use crate::reference::{DockerRef, ImageRef};
use crate::store::{ImageRecord, Store, StoreError};
use crate::transport::docker_archive::DockerArchive;
use crate::transport::layout::OciLayout;
use crate::transport::mirrors::{self, MirrorError};
use crate::transport::registry::{Registry, RegistryOptions};
use crate::transport::Source;

/// When to go to the image's source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    /// Only the store; a missing image is an error.
    Never,
    /// The store when the image is there under this name, else the source.
    #[default]
    New,
    /// Always the source (blobs already stored are not read again).
    Update,
}

/// How to fetch.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// When to fetch an image already in the store.
    pub policy: PullPolicy,
    /// How to reach registries (credentials, TLS, plain HTTP).
    pub registry: RegistryOptions,
    /// The platform whose manifest is taken from a multi-platform index.
    pub platform: Platform,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            policy: PullPolicy::New,
            registry: RegistryOptions::default(),
            platform: Platform::host(),
        }
    }
}

/// What fetching failed at.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Copying the image from its source failed.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The registry's hosts file (mirrors) cannot be used.
    #[error(transparent)]
    Mirrors(#[from] MirrorError),
    /// The image is not stored and the pull policy forbids fetching it.
    #[error("image {name:?} is not in the store and --pull-policy=never forbids fetching it")]
    NotStored {
        /// The image, as the user named it.
        name: String,
    },
}

/// The name an image from `reference` is indexed under, when it has one.
pub fn store_name(reference: &ImageRef) -> Option<String> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match reference {
        ImageRef::Docker(d) | ImageRef::Name(d) => Some(d.store_name()),
        ImageRef::OciLayout { path, tag } => Some(format!(
            "oci:{}{}",
            abs(path).display(),
            tag.as_ref().map(|t| format!(":{t}")).unwrap_or_default()
        )),
        ImageRef::OciArchive { path, tag } => Some(format!(
            "oci-archive:{}{}",
            abs(path).display(),
            tag.as_ref().map(|t| format!(":{t}")).unwrap_or_default()
        )),
        ImageRef::DockerArchive { path } => Some(format!("docker-archive:{}", abs(path).display())),
        ImageRef::Id(_) => None,
    }
}

/// Stores the image `reference` names (subject to the pull policy) and returns its record.
pub fn fetch(
    store: &Store,
    reference: &ImageRef,
    text: &str,
    options: &FetchOptions,
) -> Result<ImageRecord, FetchError> {
    fetch_with_progress(store, reference, text, options, &mut NoProgress)
}

/// [`fetch`], telling `progress` of the blobs it downloads.
pub fn fetch_with_progress(
    store: &Store,
    reference: &ImageRef,
    text: &str,
    options: &FetchOptions,
    progress: &mut dyn Progress,
) -> Result<ImageRecord, FetchError> {
    let name = store_name(reference);
    // An ID, or a bare name, can only come from the store.
    if matches!(reference, ImageRef::Id(_) | ImageRef::Name(_)) {
        let query = name.as_deref().unwrap_or(text);
        let record = store.resolve(query).map_err(|e| match e {
            StoreError::NotFound { .. } if matches!(reference, ImageRef::Name(_)) => {
                StoreError::NotFound {
                    query: format!("{text}\" (give a transport to fetch it, e.g. docker://{text}"),
                }
            }
            e => e,
        })?;
        store.touch(&record.id)?;
        return Ok(record);
    }
    let name = name.expect("transports have names");
    if options.policy != PullPolicy::Update {
        match store.resolve(&name) {
            Ok(record) => {
                store.touch(&record.id)?;
                return Ok(record);
            }
            Err(StoreError::NotFound { .. }) if options.policy == PullPolicy::New => {}
            Err(StoreError::NotFound { .. }) => return Err(FetchError::NotStored { name }),
            Err(e) => return Err(e.into()),
        }
    }
    let mut names = vec![name];
    let record = match reference {
        ImageRef::Docker(d) => {
            // The mirrors configured for its registry in order, then the registry itself;
            // the first that has the image gives it, under the name it was asked by.
            let registry = &options.registry;
            let endpoints = mirrors::endpoints(&registry.hosts_dirs, d, registry.plain_http)?;
            let mut failed = None;
            let mut record = None;
            for endpoint in &endpoints {
                let copied = Registry::at(d, endpoint, registry.clone())
                    .map_err(CopyError::from)
                    .and_then(|mut source| {
                        copy_image(&mut source, store, &names, &options.platform, progress)
                    });
                match copied {
                    Ok(r) => {
                        record = Some(r);
                        break;
                    }
                    Err(e) => failed = Some(e),
                }
            }
            match (record, failed) {
                (Some(r), _) => r,
                (None, Some(e)) => return Err(e.into()),
                (None, None) => unreachable!("endpoints always hold the registry"),
            }
        }
        ImageRef::OciLayout { path, tag } => {
            let mut source = OciLayout::dir(path, tag.clone(), text);
            copy_image(&mut source, store, &names, &options.platform, progress)?
        }
        ImageRef::OciArchive { path, tag } => {
            let mut source =
                OciLayout::archive(path, tag.clone(), text).map_err(CopyError::from)?;
            copy_image(&mut source, store, &names, &options.platform, progress)?
        }
        ImageRef::DockerArchive { path } => {
            let mut source = DockerArchive::open(path, text).map_err(CopyError::from)?;
            // RepoTags become names too, once the archive's manifest.json is read.
            source.top().map_err(CopyError::from)?;
            names.extend(
                source
                    .repo_tags
                    .iter()
                    .filter_map(|t| DockerRef::parse(t, t).ok())
                    .map(|d| d.store_name()),
            );
            copy_image(
                &mut source as &mut dyn Source,
                store,
                &names,
                &options.platform,
                progress,
            )?
        }
        ImageRef::Id(_) | ImageRef::Name(_) => unreachable!("handled above"),
    };
    Ok(record)
}
