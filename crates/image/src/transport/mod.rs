//! Transports: small adapters that read an image's manifest and blobs from where it lives.
//! Each implements [`Source`]; [`crate::copy`] does the rest (platform choice, digest and
//! size checks, storing) the same way for all of them.
//!
//! - [`layout`]: an OCI image layout directory (`oci:`), and the same inside a tar
//!   (`oci-archive:`), read through [`archive`];
//! - [`docker_archive`]: what `docker save` writes (`docker-archive:`);
//! - [`registry`]: a registry speaking the OCI distribution API (`docker://`), over HTTPS
//!   as [`tls`] configures it.

pub mod archive;
pub mod docker_archive;
pub mod layout;
pub mod mirrors;
pub mod registry;
pub mod tls;

use std::io::{self, Read};
use std::path::PathBuf;

use crate::digest::Digest;

/// Manifests and indexes are small; anything larger than this is refused.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// What a transport failed at; every variant names the image source.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A file of a layout or archive could not be read.
    #[error("{image}: {path}")]
    Io {
        /// The image source, as the user named it.
        image: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The source has no such image, tag or blob.
    #[error("{image}: {what}")]
    NotFound {
        /// The image source, as the user named it.
        image: String,
        /// What is missing.
        what: String,
    },
    /// What the source gave does not parse.
    #[error("{image}: {what}: {reason}")]
    Malformed {
        /// The image source, as the user named it.
        image: String,
        /// Which part (`its index`, `manifest.json`).
        what: String,
        /// What is wrong.
        reason: String,
    },
    #[error("{image}: registry {registry} answered {status} for {what}: {message}")]
    /// The registry answered with an unexpected HTTP status.
    Status {
        /// The image source, as the user named it.
        image: String,
        /// The registry (`HOST[:PORT]`).
        registry: String,
        /// The HTTP status.
        status: u16,
        /// What was asked for.
        what: String,
        /// The registry's error message, or the body's start.
        message: String,
    },
    #[error("{image}: registry {registry} refused access ({status}){hint}")]
    /// The registry refused access (401 or 403).
    Denied {
        /// The image source, as the user named it.
        image: String,
        /// The registry (`HOST[:PORT]`).
        registry: String,
        /// The HTTP status.
        status: u16,
        /// What to do about it, appended to the message.
        hint: &'static str,
    },
    #[error("{image}: cannot reach registry {registry}: {message}")]
    /// The registry could not be reached.
    Connection {
        /// The image source, as the user named it.
        image: String,
        /// The registry (`HOST[:PORT]`).
        registry: String,
        /// Why.
        message: String,
    },
    #[error("{image}: TLS with registry {registry} failed: {reason}; {hint}")]
    /// The TLS handshake with the registry failed.
    Tls {
        /// The image source, as the user named it.
        image: String,
        /// The registry (`HOST[:PORT]`).
        registry: String,
        /// Why.
        reason: String,
        /// What to do about it.
        hint: String,
    },
    #[error("{image}")]
    /// The TLS configuration for the registry could not be built.
    TlsSetup {
        /// The image source, as the user named it.
        image: String,
        /// What failed.
        #[source]
        source: tls::TlsError,
    },
}

/// The manifest (or index) an image reference names, as the source gave it.
#[derive(Debug, Clone)]
pub struct TopManifest {
    /// Its bytes, exactly as served (digests are over these).
    pub bytes: Vec<u8>,
    /// The digest the reference or an index says it has, when one does; the copy checks it.
    pub digest: Option<Digest>,
}

/// Where an image is read from.
pub trait Source {
    /// The image as the user named it, for messages.
    fn image(&self) -> String;

    /// The manifest or index the reference names.
    fn top(&mut self) -> Result<TopManifest, TransportError>;

    /// A blob (a manifest from an index, a config or a layer) by digest; the caller checks
    /// digest and size while it reads.
    fn blob(&mut self, digest: &Digest, size: u64) -> Result<Box<dyn Read + '_>, TransportError>;

    /// A blob from byte `offset` on, to continue a download that broke off; returns the
    /// reader and the offset it really starts at. A source that cannot skip bytes sends the
    /// whole blob and says 0 (what this default does).
    fn blob_from(
        &mut self,
        digest: &Digest,
        size: u64,
        offset: u64,
    ) -> Result<(Box<dyn Read + '_>, u64), TransportError> {
        let _ = offset;
        Ok((self.blob(digest, size)?, 0))
    }

    /// A manifest an index lists, by digest (registries serve these apart from blobs);
    /// unchecked, like [`Source::blob`].
    fn manifest(&mut self, digest: &Digest) -> Result<Vec<u8>, TransportError> {
        let image = self.image();
        read_small(self.blob(digest, 0)?, &image, &format!("manifest {digest}"))
    }
}

/// Reads all of `r`, refusing more than [`MAX_MANIFEST_BYTES`].
pub(crate) fn read_small(
    mut r: impl Read,
    image: &str,
    what: &str,
) -> Result<Vec<u8>, TransportError> {
    let mut bytes = Vec::new();
    (&mut r)
        .take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| TransportError::Io {
            image: image.to_string(),
            path: what.into(),
            source,
        })?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(TransportError::Malformed {
            image: image.to_string(),
            what: what.to_string(),
            reason: format!("larger than {MAX_MANIFEST_BYTES} bytes"),
        });
    }
    Ok(bytes)
}
