//! The OCI image layout (`oci:PATH[:TAG]`, as skopeo and umoci write it): `oci-layout`,
//! `index.json` listing manifests with their `org.opencontainers.image.ref.name` tags, and
//! `blobs/sha256/<hex>`. The same layout inside a tar file is `oci-archive:PATH[:TAG]`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::archive::TarFiles;
use super::{read_small, Source, TopManifest, TransportError};
use crate::digest::Digest;

const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Where the layout's files are.
#[derive(Debug)]
enum Files {
    Dir(PathBuf),
    Tar(TarFiles),
}

/// An OCI image layout, in a directory or a tar archive.
#[derive(Debug)]
pub struct OciLayout {
    image: String,
    files: Files,
    tag: Option<String>,
}

impl OciLayout {
    /// The layout directory at `dir`; `tag` picks a manifest from `index.json`.
    pub fn dir(dir: &Path, tag: Option<String>, image: &str) -> OciLayout {
        OciLayout {
            image: image.to_string(),
            files: Files::Dir(dir.to_path_buf()),
            tag,
        }
    }

    /// The layout inside the tar archive at `path`.
    pub fn archive(
        path: &Path,
        tag: Option<String>,
        image: &str,
    ) -> Result<OciLayout, TransportError> {
        Ok(OciLayout {
            image: image.to_string(),
            files: Files::Tar(TarFiles::open(path, image)?),
            tag,
        })
    }

    fn open(&self, name: &str) -> Result<Box<dyn Read>, TransportError> {
        match &self.files {
            Files::Dir(dir) => {
                let path = dir.join(name);
                File::open(&path)
                    .map(|f| Box::new(f) as Box<dyn Read>)
                    .map_err(|source| TransportError::Io {
                        image: self.image.clone(),
                        path,
                        source,
                    })
            }
            Files::Tar(tar) => tar.open_file(name),
        }
    }

    fn malformed(&self, what: &str, reason: impl ToString) -> TransportError {
        TransportError::Malformed {
            image: self.image.clone(),
            what: what.to_string(),
            reason: reason.to_string(),
        }
    }
}

impl Source for OciLayout {
    fn image(&self) -> String {
        self.image.clone()
    }

    fn top(&mut self) -> Result<TopManifest, TransportError> {
        let bytes = read_small(self.open("index.json")?, &self.image, "index.json")?;
        let index: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| self.malformed("index.json", e))?;
        let manifests = index
            .get("manifests")
            .and_then(|m| m.as_array())
            .ok_or_else(|| self.malformed("index.json", "no \"manifests\" list"))?;
        let tag_of = |m: &serde_json::Value| {
            m.pointer(&format!("/annotations/{}", REF_NAME.replace('/', "~1")))
                .and_then(|t| t.as_str())
                .map(str::to_string)
        };
        let chosen = match &self.tag {
            Some(tag) => manifests
                .iter()
                .find(|m| tag_of(m).as_deref() == Some(tag))
                .ok_or_else(|| {
                    let tags: Vec<String> = manifests.iter().filter_map(tag_of).collect();
                    TransportError::NotFound {
                        image: self.image.clone(),
                        what: format!("no manifest tagged {tag:?} (tags: {})", tags.join(", ")),
                    }
                })?,
            None => match manifests.as_slice() {
                [one] => one,
                [] => return Err(self.malformed("index.json", "lists no manifest")),
                many => {
                    let tags: Vec<String> = many.iter().filter_map(tag_of).collect();
                    return Err(TransportError::NotFound {
                        image: self.image.clone(),
                        what: format!(
                            "the layout has {} manifests; name one with :TAG (tags: {})",
                            many.len(),
                            tags.join(", ")
                        ),
                    });
                }
            },
        };
        let digest: Digest = chosen
            .get("digest")
            .and_then(|d| d.as_str())
            .ok_or_else(|| self.malformed("index.json", "a manifest without a digest"))?
            .parse()
            .map_err(|e| self.malformed("index.json", e))?;
        let image = self.image.clone();
        let bytes = read_small(
            self.blob(&digest, 0)?,
            &image,
            &format!("manifest {digest}"),
        )?;
        Ok(TopManifest {
            bytes,
            digest: Some(digest),
        })
    }

    fn blob(&mut self, digest: &Digest, _size: u64) -> Result<Box<dyn Read + '_>, TransportError> {
        // The digest is validated hex, so the path cannot leave blobs/.
        self.open(&format!("blobs/sha256/{}", digest.hex()))
    }
}
