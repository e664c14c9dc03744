//! `docker-archive:PATH`: the tar that `docker save` / `podman save` / skopeo write, with a
//! `manifest.json` (`[{"Config": …, "RepoTags": […], "Layers": […]}]`), the config file and
//! one tar per layer. There is no distribution manifest inside, so this adapter builds an
//! OCI manifest from the files' digests (computed in one read of each), and the copy then
//! reads and checks them again like any other source.

use std::io::{self, Read};
use std::path::Path;

use super::archive::TarFiles;
use super::{read_small, Source, TopManifest, TransportError};
use crate::digest::{Digest, HashingWriter};

/// A `docker save` archive.
#[derive(Debug)]
pub struct DockerArchive {
    image: String,
    files: TarFiles,
    /// Digest to file name, filled in by [`Source::top`].
    blobs: Vec<(Digest, String)>,
    /// `RepoTags` of the image, for naming it in the store.
    pub repo_tags: Vec<String>,
    /// The manifest built by the first [`Source::top`].
    top: Option<TopManifest>,
}

impl DockerArchive {
    /// Indexes the archive at `path`.
    pub fn open(path: &Path, image: &str) -> Result<DockerArchive, TransportError> {
        Ok(DockerArchive {
            image: image.to_string(),
            files: TarFiles::open(path, image)?,
            blobs: Vec::new(),
            repo_tags: Vec::new(),
            top: None,
        })
    }

    fn malformed(&self, reason: impl ToString) -> TransportError {
        TransportError::Malformed {
            image: self.image.clone(),
            what: "manifest.json".into(),
            reason: reason.to_string(),
        }
    }

    /// Digest, size and first bytes of a file in the archive.
    fn hash(&self, name: &str) -> Result<(Digest, u64, [u8; 4]), TransportError> {
        let mut r = self.files.open_file(name)?;
        let mut head = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = r
                .read(&mut head[got..])
                .map_err(|source| TransportError::Io {
                    image: self.image.clone(),
                    path: name.into(),
                    source,
                })?;
            if n == 0 {
                break;
            }
            got += n;
        }
        let mut w = HashingWriter::new(io::sink());
        io::Write::write_all(&mut w, &head[..got]).expect("sink");
        io::copy(&mut r, &mut w).map_err(|source| TransportError::Io {
            image: self.image.clone(),
            path: name.into(),
            source,
        })?;
        let (digest, size, _) = w.finish();
        Ok((digest, size, head))
    }
}

/// The OCI layer media type for a layer whose bytes start with `head`.
fn layer_media_type(head: &[u8; 4]) -> &'static str {
    match head {
        [0x1f, 0x8b, _, _] => "application/vnd.oci.image.layer.v1.tar+gzip",
        [0x28, 0xb5, 0x2f, 0xfd] => "application/vnd.oci.image.layer.v1.tar+zstd",
        _ => "application/vnd.oci.image.layer.v1.tar",
    }
}

impl Source for DockerArchive {
    fn image(&self) -> String {
        self.image.clone()
    }

    fn top(&mut self) -> Result<TopManifest, TransportError> {
        if let Some(top) = &self.top {
            return Ok(top.clone());
        }
        let bytes = read_small(
            self.files.open_file("manifest.json")?,
            &self.image,
            "manifest.json",
        )?;
        let list: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| self.malformed(e))?;
        let entry = match list.as_array().map(Vec::as_slice) {
            Some([one]) => one,
            Some([]) => return Err(self.malformed("lists no image")),
            Some(_) => {
                return Err(self
                    .malformed("lists several images; this transport reads archives of one image"))
            }
            None => return Err(self.malformed("not a list")),
        };
        let config_name = entry
            .get("Config")
            .and_then(|c| c.as_str())
            .ok_or_else(|| self.malformed("no \"Config\""))?
            .to_string();
        let layer_names: Vec<String> = entry
            .get("Layers")
            .and_then(|l| l.as_array())
            .ok_or_else(|| self.malformed("no \"Layers\""))?
            .iter()
            .map(|l| l.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| self.malformed("a layer that is not a file name"))?;
        self.repo_tags = entry
            .get("RepoTags")
            .and_then(|t| t.as_array())
            .map(|t| {
                t.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let (config_digest, config_size, _) = self.hash(&config_name)?;
        self.blobs.push((config_digest.clone(), config_name));
        let mut layers = Vec::new();
        for name in layer_names {
            let (digest, size, head) = self.hash(&name)?;
            layers.push(serde_json::json!({
                "mediaType": layer_media_type(&head),
                "digest": digest.to_string(),
                "size": size,
            }));
            self.blobs.push((digest, name));
        }
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": config_digest.to_string(),
                "size": config_size,
            },
            "layers": layers,
        });
        let top = TopManifest {
            bytes: serde_json::to_vec(&manifest).expect("a manifest serialises"),
            digest: None,
        };
        self.top = Some(top.clone());
        Ok(top)
    }

    fn blob(&mut self, digest: &Digest, _size: u64) -> Result<Box<dyn Read + '_>, TransportError> {
        let name = self
            .blobs
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, n)| n.clone())
            .ok_or_else(|| TransportError::NotFound {
                image: self.image.clone(),
                what: format!("no file with digest {digest} in manifest.json"),
            })?;
        self.files.open_file(&name)
    }
}
