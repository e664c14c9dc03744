//! Image references: what a user types to name an image, parsed into where it comes from.
//!
//! - `docker://[HOST[:PORT]/]NAME[:TAG|@sha256:DIGEST]`: a registry (Docker Hub's defaults
//!   for a bare name: host `docker.io`, namespace `library/`, tag `latest`);
//! - `oci:PATH[:TAG]`: an OCI image layout directory; `oci-archive:PATH[:TAG]`: the same as
//!   a tar file; `docker-archive:PATH`: the tar that `docker save` writes;
//! - an image ID in the store: `sha256:<hex>` or a bare hex prefix of at least 12 digits;
//! - anything else that is a valid image name (`busybox`, `example.com/app:1`) is a name to
//!   look up in the store.

use std::fmt;
use std::path::PathBuf;

use crate::digest::{is_lower_hex, Digest};

/// The host Docker Hub images are named with.
pub const DOCKER_HUB: &str = "docker.io";
/// The host Docker Hub's registry API answers on.
pub const DOCKER_HUB_API: &str = "registry-1.docker.io";
/// The shortest image ID prefix accepted.
pub const MIN_ID_PREFIX: usize = 12;

/// Why a reference cannot be parsed.
#[derive(Debug, thiserror::Error)]
#[error("image reference {reference:?}: {reason}")]
pub struct ReferenceError {
    /// The reference as given.
    pub reference: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A parsed image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRef {
    /// `docker://…`
    Docker(DockerRef),
    /// `oci:PATH[:TAG]`
    OciLayout {
        /// The layout's directory.
        path: PathBuf,
        /// The tag (`org.opencontainers.image.ref.name`), if given.
        tag: Option<String>,
    },
    /// `oci-archive:PATH[:TAG]`
    OciArchive {
        /// The archive (a tar of an OCI layout).
        path: PathBuf,
        /// The tag (`org.opencontainers.image.ref.name`), if given.
        tag: Option<String>,
    },
    /// `docker-archive:PATH`
    DockerArchive {
        /// The archive (as `docker save` writes it).
        path: PathBuf,
    },
    /// `sha256:<hex>` or a bare hex prefix (at least [`MIN_ID_PREFIX`] digits, lowercase):
    /// an image already in the store.
    Id(String),
    /// An image name to look up in the store, normalised like a `docker://` name
    /// (`busybox` is `docker.io/library/busybox:latest`).
    Name(DockerRef),
}

/// Which part of a registry image is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tag, `latest` when none is given.
    Tag(String),
    /// A manifest digest, which pins the content.
    Digest(Digest),
}

/// A registry image: `HOST[:PORT]/NAME` plus a tag or digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerRef {
    /// Host and optional port, as named (`docker.io` for Docker Hub).
    pub host: String,
    /// Repository path, `library/busybox` for a bare Docker Hub name.
    pub repository: String,
    /// Tag or digest.
    pub target: Target,
}

impl DockerRef {
    /// The host to send API requests to (`registry-1.docker.io` for `docker.io`).
    pub fn api_host(&self) -> &str {
        if self.host == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.host
        }
    }

    /// The tag or digest as the registry API takes it in a manifest URL.
    pub fn reference(&self) -> String {
        match &self.target {
            Target::Tag(t) => t.clone(),
            Target::Digest(d) => d.to_string(),
        }
    }

    /// The name the store indexes the image under: `HOST/REPOSITORY:TAG` or
    /// `HOST/REPOSITORY@sha256:…`.
    pub fn store_name(&self) -> String {
        match &self.target {
            Target::Tag(t) => format!("{}/{}:{t}", self.host, self.repository),
            Target::Digest(d) => format!("{}/{}@{d}", self.host, self.repository),
        }
    }

    /// Parses `[HOST[:PORT]/]NAME[:TAG|@sha256:DIGEST]` (no transport prefix); errors name
    /// `whole`, the reference as the user gave it.
    pub fn parse(s: &str, whole: &str) -> Result<DockerRef, ReferenceError> {
        let bad = |reason: String| ReferenceError {
            reference: whole.to_string(),
            reason,
        };
        if s.is_empty() {
            return Err(bad("no image name".into()));
        }
        let (name_part, digest) = match s.split_once('@') {
            Some((n, d)) => (
                n,
                Some(d.parse::<Digest>().map_err(|e| bad(e.to_string()))?),
            ),
            None => (s, None),
        };
        // A tag is after the last ':' that follows the last '/', so a port stays with the host.
        let last_slash = name_part.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_part[last_slash..].rfind(':') {
            Some(i) => (
                &name_part[..last_slash + i],
                Some(&name_part[last_slash + i + 1..]),
            ),
            None => (name_part, None),
        };
        if digest.is_some() && tag.is_some() {
            return Err(bad("give a tag or a digest, not both".into()));
        }
        let (host, repository) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad(format!("invalid registry host {host:?}")));
        }
        validate_repository(&repository).map_err(&bad)?;
        let repository = if host == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let target = match (tag, digest) {
            (_, Some(d)) => Target::Digest(d),
            (Some(t), None) => {
                validate_tag(t).map_err(&bad)?;
                Target::Tag(t.to_string())
            }
            (None, None) => Target::Tag("latest".to_string()),
        };
        Ok(DockerRef {
            host,
            repository,
            target,
        })
    }
}

impl fmt::Display for DockerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "docker://{}", self.store_name())
    }
}

/// A repository path: components of lowercase letters and digits, joined by single
/// separators (`.`, `_`, `__`, `-`), separated by `/`.
fn validate_repository(repo: &str) -> Result<(), String> {
    if repo.is_empty() {
        return Err("no image name".into());
    }
    if repo.len() > 255 {
        return Err("image name longer than 255 characters".into());
    }
    for component in repo.split('/') {
        let ok = !component.is_empty()
            && component
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && component.as_bytes()[0].is_ascii_alphanumeric()
            && component.as_bytes()[component.len() - 1].is_ascii_alphanumeric();
        if !ok {
            return Err(format!(
                "invalid name component {component:?} (lowercase letters, digits and . _ - \
                 between them)"
            ));
        }
    }
    Ok(())
}

/// A tag: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn validate_tag(tag: &str) -> Result<(), String> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        && !tag.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid tag {tag:?} (letters, digits, _ . -, at most 128, not starting with . or -)"
        ))
    }
}

/// Splits `PATH[:TAG]`: the part after the last ':' is a tag when it is a valid one.
fn split_path_tag(s: &str, whole: &str) -> Result<(PathBuf, Option<String>), ReferenceError> {
    let (path, tag) = match s.rsplit_once(':') {
        Some((p, t)) if !t.contains('/') && validate_tag(t).is_ok() => (p, Some(t.to_string())),
        _ => (s, None),
    };
    if path.is_empty() {
        return Err(ReferenceError {
            reference: whole.to_string(),
            reason: "no path".into(),
        });
    }
    Ok((PathBuf::from(path), tag))
}

impl ImageRef {
    /// Parses a reference; see the module documentation for the forms.
    pub fn parse(s: &str) -> Result<ImageRef, ReferenceError> {
        let bad = |reason: &str| ReferenceError {
            reference: s.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = s.strip_prefix("docker://") {
            return DockerRef::parse(rest, s).map(ImageRef::Docker);
        }
        if let Some(rest) = s.strip_prefix("oci-archive:") {
            let (path, tag) = split_path_tag(rest, s)?;
            return Ok(ImageRef::OciArchive { path, tag });
        }
        if let Some(rest) = s.strip_prefix("oci:") {
            let (path, tag) = split_path_tag(rest, s)?;
            return Ok(ImageRef::OciLayout { path, tag });
        }
        if let Some(rest) = s.strip_prefix("docker-archive:") {
            if rest.is_empty() {
                return Err(bad("no path"));
            }
            return Ok(ImageRef::DockerArchive {
                path: PathBuf::from(rest),
            });
        }
        if let Some(hex) = s.strip_prefix("sha256:") {
            if hex.len() < MIN_ID_PREFIX || hex.len() > 64 || !is_lower_hex(hex) {
                return Err(bad(
                    "an image ID is sha256: and 12 to 64 lowercase hex digits",
                ));
            }
            return Ok(ImageRef::Id(hex.to_string()));
        }
        if s.len() >= MIN_ID_PREFIX && s.len() <= 64 && is_lower_hex(s) {
            return Ok(ImageRef::Id(s.to_string()));
        }
        if let Some((transport, _)) = s.split_once(':') {
            if !transport.contains(['/', '.']) && s.contains("://") {
                return Err(bad(
                    "unknown transport (docker://, oci:, oci-archive:, docker-archive:)",
                ));
            }
        }
        DockerRef::parse(s, s).map(ImageRef::Name)
    }

    /// True when the string names a transport or an image ID: what `rkt run` takes as an
    /// image rather than a host command.
    pub fn is_explicit(s: &str) -> bool {
        matches!(
            ImageRef::parse(s),
            Ok(ImageRef::Docker(_)
                | ImageRef::OciLayout { .. }
                | ImageRef::OciArchive { .. }
                | ImageRef::DockerArchive { .. }
                | ImageRef::Id(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docker(s: &str) -> DockerRef {
        match ImageRef::parse(s).unwrap() {
            ImageRef::Docker(d) => d,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn docker_hub_defaults() {
        let d = docker("docker://busybox");
        assert_eq!(d.host, "docker.io");
        assert_eq!(d.api_host(), "registry-1.docker.io");
        assert_eq!(d.repository, "library/busybox");
        assert_eq!(d.target, Target::Tag("latest".into()));
        assert_eq!(d.store_name(), "docker.io/library/busybox:latest");
        let d = docker("docker://someone/app:1.2");
        assert_eq!(d.repository, "someone/app");
        assert_eq!(d.reference(), "1.2");
    }

    #[test]
    fn docker_host_port_tag_and_digest() {
        let d = docker("docker://127.0.0.1:5000/test/busybox:v1");
        assert_eq!(d.host, "127.0.0.1:5000");
        assert_eq!(d.api_host(), "127.0.0.1:5000");
        assert_eq!(d.repository, "test/busybox");
        assert_eq!(d.target, Target::Tag("v1".into()));
        let d = docker("docker://localhost/app");
        assert_eq!(d.host, "localhost");
        assert_eq!(d.repository, "app");
        let hex = "0123456789abcdef".repeat(4);
        let d = docker(&format!("docker://example.com:443/app@sha256:{hex}"));
        assert_eq!(d.host, "example.com:443");
        assert_eq!(d.reference(), format!("sha256:{hex}"));
        assert_eq!(d.store_name(), format!("example.com:443/app@sha256:{hex}"));
    }

    #[test]
    fn docker_errors_name_the_reference() {
        for bad in [
            "docker://",
            "docker://Busybox",
            "docker://busybox:",
            "docker://busybox:-x",
            "docker://busybox@sha256:abc",
            "docker://busybox@md5:0123",
            "docker://a//b",
            "docker://busybox:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            let err = ImageRef::parse(bad).unwrap_err();
            assert_eq!(err.reference, bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn oci_layout_and_archives() {
        assert_eq!(
            ImageRef::parse("oci:/tmp/layout:v1").unwrap(),
            ImageRef::OciLayout {
                path: "/tmp/layout".into(),
                tag: Some("v1".into())
            }
        );
        assert_eq!(
            ImageRef::parse("oci:rel/dir").unwrap(),
            ImageRef::OciLayout {
                path: "rel/dir".into(),
                tag: None
            }
        );
        assert_eq!(
            ImageRef::parse("oci-archive:/tmp/a.tar:latest").unwrap(),
            ImageRef::OciArchive {
                path: "/tmp/a.tar".into(),
                tag: Some("latest".into())
            }
        );
        assert_eq!(
            ImageRef::parse("docker-archive:/tmp/save.tar").unwrap(),
            ImageRef::DockerArchive {
                path: "/tmp/save.tar".into()
            }
        );
        for bad in ["oci:", "oci::v1", "oci-archive:", "docker-archive:"] {
            let err = ImageRef::parse(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn ids_and_prefixes() {
        let hex = "0123456789abcdef".repeat(4);
        assert_eq!(
            ImageRef::parse(&format!("sha256:{hex}")).unwrap(),
            ImageRef::Id(hex.clone())
        );
        assert_eq!(
            ImageRef::parse(&hex[..12]).unwrap(),
            ImageRef::Id(hex[..12].into())
        );
        assert!(ImageRef::parse("sha256:0123").is_err());
        assert!(ImageRef::parse("sha256:0123456789ABCDEF").is_err());
        // Eleven hex digits are a name, not an ID.
        assert!(matches!(
            ImageRef::parse("0123456789a").unwrap(),
            ImageRef::Name(_)
        ));
    }

    #[test]
    fn names_and_explicit_references() {
        match ImageRef::parse("busybox").unwrap() {
            ImageRef::Name(d) => assert_eq!(d.store_name(), "docker.io/library/busybox:latest"),
            other => panic!("{other:?}"),
        }
        assert!(ImageRef::parse("ftp://x").is_err());
        assert!(ImageRef::is_explicit("docker://busybox"));
        assert!(ImageRef::is_explicit("oci:/x"));
        assert!(ImageRef::is_explicit(&"a".repeat(12)));
        assert!(!ImageRef::is_explicit("/bin/sh"));
        assert!(!ImageRef::is_explicit("busybox"));
        assert!(!ImageRef::is_explicit("true"));
    }
}
