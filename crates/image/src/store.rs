//! The image store: a content-addressed, verified, crash-safe directory of blobs plus an
//! index of images and their names.
//!
//! Layout under the store's root:
//!
//! ```text
//! blobs/sha256/<hex>   every blob (layers, configs, manifests), named by its digest
//! tmp/                 partial writes; `<hex>.partial` is a download a retry continues
//!                      (see `partial`); gc removes everything here
//! images.json          the index: one record per image (ID, manifests, names, times)
//! layers/<hex>/        each layer unpacked on its own for overlay mounts (see `layers`)
//! lock                 shared while fetching or reading, exclusive for rm and gc
//! index.lock           exclusive while images.json is read, changed and replaced
//! ```
//!
//! A blob is written to a temporary file in `tmp/` while its digest and size are computed;
//! only when both match what was expected is it fsynced and renamed into `blobs/`, so a
//! blob in `blobs/` is always complete and correct. `images.json` is replaced the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::digest::{Digest, HashingWriter};
use crate::lock::{FileLock, LockKind};
use crate::reference::{ImageRef, MIN_ID_PREFIX};

/// What went wrong in the store; each variant names the path, blob or image at fault.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory of the store could not be read or written.
    #[error("image store {path}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    #[error("blob {expected}: content has digest {actual} ({size} bytes); nothing was stored")]
    /// A blob's content does not have the digest it was stored under.
    DigestMismatch {
        /// The digest asked for.
        expected: Digest,
        /// The digest of what was read.
        actual: Digest,
        /// How many bytes were read.
        size: u64,
    },
    #[error("blob {digest}: expected {expected} bytes, got {actual}; nothing was stored")]
    /// A blob does not have the size its descriptor gives.
    SizeMismatch {
        /// The blob.
        digest: Digest,
        /// The size asked for.
        expected: u64,
        /// The size read (reading stops one byte past `expected`).
        actual: u64,
    },
    #[error("blob {digest}: reading it failed, nothing was stored")]
    /// Reading a blob's content from its source failed.
    Read {
        /// The blob (or what names it, when its digest is not known yet).
        digest: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    #[error("blob {digest}: the download broke off after {kept} bytes (they are kept in the store's tmp/ and the next fetch continues from there; image gc removes them)")]
    /// A download broke off; what arrived is kept for the next fetch to continue.
    Interrupted {
        /// The blob.
        digest: Digest,
        /// How many bytes are kept in `tmp/`.
        kept: u64,
        /// Why it broke off.
        #[source]
        source: io::Error,
    },
    #[error("image store {path}: index is corrupt")]
    /// `images.json`, or a stored manifest or config, does not parse.
    CorruptIndex {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    #[error("image {query:?} is not in the store (see `rkt image list`)")]
    /// No image has this name or ID.
    NotFound {
        /// The name or ID asked for.
        query: String,
    },
    #[error("image ID prefix {query:?} matches several images: {}", matches.join(", "))]
    /// An ID prefix matches more than one image.
    Ambiguous {
        /// The prefix asked for.
        query: String,
        /// The IDs it matches.
        matches: Vec<String>,
    },
    #[error("blob {digest} is not in the store")]
    /// A blob an image needs is not in the store.
    BlobMissing {
        /// The blob.
        digest: Digest,
    },
    #[error("image {image}: cannot tell its layers: {reason}")]
    /// An image's config does not list its layers' diff IDs in a usable way.
    Layer {
        /// The image ID.
        image: Digest,
        /// What is wrong.
        reason: String,
    },
    #[error("image {image} is in use; it stays")]
    /// The image is used by a pod, so it is not removed.
    InUse {
        /// The image ID.
        image: Digest,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One image in the index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImageRecord {
    /// The digest of the image's config: the image ID.
    pub id: Digest,
    /// The digest of its (single-platform) manifest: the one it was last fetched with, or,
    /// from [`Store::resolve`] by name, the one that name was fetched with.
    pub manifest: Digest,
    /// Names it was fetched under (`docker.io/library/busybox:latest`, `oci:/path:tag`).
    pub names: Vec<String>,
    /// The manifest each of `names` was fetched with: the same image (config) can come
    /// with other manifests from other sources (layers compressed otherwise). An index
    /// written before this field has none; each name then has `manifest` (see
    /// `ImageRecord::settle`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub name_manifests: BTreeMap<String, Digest>,
    /// Bytes of the manifest, config and layers as stored.
    pub size: u64,
    /// When it was first stored, seconds since the epoch.
    pub imported: u64,
    /// When it was last fetched or used, seconds since the epoch.
    pub last_used: u64,
}

impl ImageRecord {
    /// Gives each name a manifest (the record's, for an index written before names had
    /// their own) and drops those of names it no longer has.
    fn settle(&mut self) {
        for name in &self.names {
            if !self.name_manifests.contains_key(name) {
                self.name_manifests
                    .insert(name.clone(), self.manifest.clone());
            }
        }
        let names = &self.names;
        self.name_manifests.retain(|name, _| names.contains(name));
    }

    /// Every manifest the image is stored with: its own and its names'.
    pub fn manifests(&self) -> BTreeSet<Digest> {
        let mut all: BTreeSet<Digest> = self.name_manifests.values().cloned().collect();
        all.insert(self.manifest.clone());
        all
    }
}

/// What [`Store::remove`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    /// The name is gone; the image stays with its other names.
    Untagged {
        /// The name removed.
        name: String,
        /// The image it named.
        image: Digest,
    },
    /// The image is gone (asked by ID, or its last name), with the names it had.
    Image(ImageRecord),
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Index {
    images: Vec<ImageRecord>,
}

/// An image store rooted at a directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// How stale a `last_used` [`Store::touch`] leaves alone, in seconds.
const TOUCH_PRECISION_SECS: u64 = 60;

/// Seconds since the epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Store {
    /// Opens the store at `root`, creating its directories when missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let store = Store { root: root.into() };
        for dir in [store.blobs_dir(), store.tmp_dir()] {
            fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        }
        Ok(store)
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blobs_dir(&self) -> PathBuf {
        self.root.join("blobs/sha256")
    }

    /// The directory of partial writes.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    fn index_path(&self) -> PathBuf {
        self.root.join("images.json")
    }

    /// Takes the store lock: [`LockKind::Shared`] to fetch or read images,
    /// [`LockKind::Exclusive`] to remove them.
    pub fn lock(&self, kind: LockKind) -> Result<FileLock, StoreError> {
        let path = self.root.join("lock");
        FileLock::acquire(&path, kind).map_err(io_err(&path))
    }

    /// Where the blob with `digest` lives (whether or not it is there).
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs_dir().join(digest.hex())
    }

    /// True when the blob is stored.
    pub fn has_blob(&self, digest: &Digest) -> bool {
        self.blob_path(digest).is_file()
    }

    /// Opens a stored blob.
    pub fn open_blob(&self, digest: &Digest) -> Result<File, StoreError> {
        let path = self.blob_path(digest);
        File::open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                StoreError::BlobMissing {
                    digest: digest.clone(),
                }
            } else {
                io_err(&path)(e)
            }
        })
    }

    /// Reads a stored blob whole (manifests and configs).
    pub fn read_blob(&self, digest: &Digest) -> Result<Vec<u8>, StoreError> {
        let mut bytes = Vec::new();
        self.open_blob(digest)?
            .read_to_end(&mut bytes)
            .map_err(io_err(&self.blob_path(digest)))?;
        Ok(bytes)
    }

    /// Stores the blob that `reader` yields, which must have `expected` as digest and, when
    /// given, `size` bytes. Returns the size. A blob already stored is not read again.
    /// On any mismatch or read error nothing is stored.
    pub fn put_blob(
        &self,
        expected: &Digest,
        size: Option<u64>,
        reader: &mut dyn Read,
    ) -> Result<u64, StoreError> {
        if let Ok(meta) = fs::metadata(self.blob_path(expected)) {
            return Ok(meta.len());
        }
        // Read at most one byte more than announced, so an endless stream cannot fill the
        // disk and a longer one is still caught.
        let mut limited: Box<dyn Read> = match size {
            Some(n) => Box::new(reader.take(n + 1)),
            None => Box::new(reader),
        };
        let (tmp, actual, written) = self.write_temp(&mut limited, &expected.to_string())?;
        if let Some(n) = size {
            if written != n {
                return Err(StoreError::SizeMismatch {
                    digest: expected.clone(),
                    expected: n,
                    actual: written,
                });
            }
        }
        if &actual != expected {
            return Err(StoreError::DigestMismatch {
                expected: expected.clone(),
                actual,
                size: written,
            });
        }
        self.commit(tmp, expected)?;
        Ok(written)
    }

    /// Stores what `reader` yields under the digest computed while writing it, for content
    /// whose digest is not known in advance (a `docker save` layer). Returns digest and size.
    pub fn put_blob_computed(&self, reader: &mut dyn Read) -> Result<(Digest, u64), StoreError> {
        let (tmp, digest, size) = self.write_temp(reader, "(computed)")?;
        if !self.has_blob(&digest) {
            self.commit(tmp, &digest)?;
        }
        Ok((digest, size))
    }

    /// Copies `reader` to a new temporary file in `tmp/`, hashing it; the file is fsynced.
    /// Dropping the returned file removes it.
    fn write_temp(
        &self,
        reader: &mut dyn Read,
        what: &str,
    ) -> Result<(tempfile::NamedTempFile, Digest, u64), StoreError> {
        let tmp_dir = self.tmp_dir();
        let tmp = tempfile::Builder::new()
            .prefix("blob-")
            .suffix(".partial")
            .tempfile_in(&tmp_dir)
            .map_err(io_err(&tmp_dir))?;
        let mut writer = HashingWriter::new(io::BufWriter::with_capacity(1 << 17, tmp));
        io::copy(reader, &mut writer).map_err(|source| StoreError::Read {
            digest: what.to_string(),
            source,
        })?;
        let (digest, size, buffered) = writer.finish();
        let tmp = buffered.into_inner().map_err(|e| StoreError::Io {
            path: tmp_dir.clone(),
            source: e.into_error(),
        })?;
        tmp.as_file().sync_all().map_err(io_err(tmp.path()))?;
        Ok((tmp, digest, size))
    }

    /// Renames a verified temporary file into place and makes the rename durable.
    fn commit(&self, tmp: tempfile::NamedTempFile, digest: &Digest) -> Result<(), StoreError> {
        let dest = self.blob_path(digest);
        tmp.persist(&dest).map_err(|e| StoreError::Io {
            path: dest.clone(),
            source: e.error,
        })?;
        sync_dir(&self.blobs_dir())
    }

    /// Renames a complete, verified and fsynced file into place as the blob `digest`, and
    /// makes the rename durable.
    pub(crate) fn commit_file(&self, path: &Path, digest: &Digest) -> Result<(), StoreError> {
        let dest = self.blob_path(digest);
        fs::rename(path, &dest).map_err(io_err(&dest))?;
        sync_dir(&self.blobs_dir())
    }

    /// All images in the index.
    pub fn images(&self) -> Result<Vec<ImageRecord>, StoreError> {
        Ok(self.read_index()?.images)
    }

    fn read_index(&self) -> Result<Index, StoreError> {
        let path = self.index_path();
        match fs::read(&path) {
            Ok(bytes) => {
                let mut index: Index = serde_json::from_slice(&bytes)
                    .map_err(|source| StoreError::CorruptIndex { path, source })?;
                index.images.iter_mut().for_each(ImageRecord::settle);
                Ok(index)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Index::default()),
            Err(e) => Err(io_err(&path)(e)),
        }
    }

    /// Reads, changes and atomically replaces the index under the index lock.
    fn update_index<T>(
        &self,
        change: impl FnOnce(&mut Index) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let lock_path = self.root.join("index.lock");
        let _lock =
            FileLock::acquire(&lock_path, LockKind::Exclusive).map_err(io_err(&lock_path))?;
        let mut index = self.read_index()?;
        let out = change(&mut index)?;
        let bytes = serde_json::to_vec_pretty(&index).expect("the index serialises");
        write_atomic(&self.index_path(), &bytes)?;
        Ok(out)
    }

    /// Records an image (its blobs must be stored) fetched with `manifest` under `names`. A
    /// name moves to this image from any other that had it; an image already recorded gets
    /// the new names and `last_used` now. Each of `names` now has `manifest`; the image's
    /// other names keep theirs.
    pub fn add_image(
        &self,
        id: &Digest,
        manifest: &Digest,
        size: u64,
        names: &[String],
    ) -> Result<ImageRecord, StoreError> {
        let now = now_secs();
        self.update_index(|index| {
            for other in index.images.iter_mut().filter(|r| &r.id != id) {
                other.names.retain(|n| !names.contains(n));
                other.settle();
            }
            let record = match index.images.iter_mut().find(|r| &r.id == id) {
                Some(r) => {
                    r.manifest = manifest.clone();
                    r.size = size;
                    r.last_used = now;
                    r
                }
                None => {
                    index.images.push(ImageRecord {
                        id: id.clone(),
                        manifest: manifest.clone(),
                        names: Vec::new(),
                        name_manifests: BTreeMap::new(),
                        size,
                        imported: now,
                        last_used: now,
                    });
                    index.images.last_mut().expect("just pushed")
                }
            };
            for name in names {
                if !record.names.contains(name) {
                    record.names.push(name.clone());
                }
                record.name_manifests.insert(name.clone(), manifest.clone());
            }
            Ok(record.clone())
        })
    }

    /// Sets an image's `last_used` to now. A use within the last minute is recorded already
    /// closely enough for gc's grace period: then the index is not rewritten (and fsynced),
    /// which keeps starting pods from a stored image cheap.
    pub fn touch(&self, id: &Digest) -> Result<(), StoreError> {
        let recent = now_secs().saturating_sub(TOUCH_PRECISION_SECS);
        let images = self.images()?;
        if images.iter().any(|r| &r.id == id && r.last_used >= recent) {
            return Ok(());
        }
        self.update_index(|index| {
            if let Some(r) = index.images.iter_mut().find(|r| &r.id == id) {
                r.last_used = now_secs();
            }
            Ok(())
        })
    }

    /// Finds an image by ID, unique ID prefix (12+ hex digits) or name. Found by name, its
    /// `manifest` is the one that name was fetched with.
    pub fn resolve(&self, query: &str) -> Result<ImageRecord, StoreError> {
        let images = self.images()?;
        let (record, name) = find(&images, query)?;
        let mut record = record.clone();
        if let Some(manifest) = name.and_then(|n| record.name_manifests.get(&n)) {
            record.manifest = manifest.clone();
        }
        Ok(record)
    }

    /// Removes what `query` names, as podman's `rmi` does: a name of an image that has
    /// others is untagged (the image stays); an image ID, ID prefix or an image's last name
    /// removes the image, unless it is in `in_use` ([`StoreError::InUse`]). Blobs no
    /// remaining image or name refers to go at the next gc. Takes the store lock
    /// exclusively, so it waits for fetches in progress.
    pub fn remove(&self, query: &str, in_use: &BTreeSet<Digest>) -> Result<Removed, StoreError> {
        let _lock = self.lock(LockKind::Exclusive)?;
        self.update_index(|index| {
            let (found, name) = find(&index.images, query)?;
            let id = found.id.clone();
            let pos = index.images.iter().position(|r| r.id == id).expect("found");
            let record = &mut index.images[pos];
            if let Some(name) = name.filter(|_| record.names.len() > 1) {
                record.names.retain(|n| *n != name);
                record.settle();
                // The image's own manifest follows its names: the untagged name's may go.
                if !record
                    .name_manifests
                    .values()
                    .any(|m| *m == record.manifest)
                {
                    let other = record.name_manifests.values().next().expect("a name left");
                    record.manifest = other.clone();
                }
                return Ok(Removed::Untagged { name, image: id });
            }
            if in_use.contains(&id) {
                return Err(StoreError::InUse { image: id });
            }
            Ok(Removed::Image(index.images.remove(pos)))
        })
    }

    /// Removes from the index the images last used before `cutoff` (seconds since the
    /// epoch) that are not in `in_use`, and returns them. Their blobs stay; gc removes
    /// them once nothing refers to them.
    pub(crate) fn remove_stale(
        &self,
        cutoff: u64,
        in_use: &BTreeSet<Digest>,
    ) -> Result<Vec<ImageRecord>, StoreError> {
        self.update_index(|index| {
            let (gone, kept): (Vec<_>, Vec<_>) = index
                .images
                .drain(..)
                .partition(|r| r.last_used < cutoff && !in_use.contains(&r.id));
            index.images = kept;
            Ok(gone)
        })
    }

    /// Removes every blob not in `referenced`; returns those removed and what failed.
    pub(crate) fn remove_unreferenced_blobs(
        &self,
        referenced: &BTreeSet<Digest>,
    ) -> (Vec<Digest>, Vec<StoreError>) {
        let (mut removed, mut errors) = (Vec::new(), Vec::new());
        let blobs_dir = self.blobs_dir();
        match fs::read_dir(&blobs_dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    let Some(digest) = name.to_str().and_then(|n| Digest::from_hex(n).ok()) else {
                        continue;
                    };
                    if referenced.contains(&digest) {
                        continue;
                    }
                    match fs::remove_file(entry.path()) {
                        Ok(()) => removed.push(digest),
                        Err(e) => errors.push(io_err(&entry.path())(e)),
                    }
                }
            }
            Err(e) => errors.push(io_err(&blobs_dir)(e)),
        }
        (removed, errors)
    }

    /// Removes everything in `tmp/` (partial downloads and unpacks); returns how many went
    /// and what failed.
    pub(crate) fn remove_partials(&self) -> (usize, Vec<StoreError>) {
        let (mut removed, mut errors) = (0, Vec::new());
        let tmp_dir = self.tmp_dir();
        match fs::read_dir(&tmp_dir) {
            Ok(entries) => {
                for entry in entries.flatten() {
                    let path = entry.path();
                    let result = if path.is_dir() {
                        fs::remove_dir_all(&path)
                    } else {
                        fs::remove_file(&path)
                    };
                    match result {
                        Ok(()) => removed += 1,
                        Err(e) => errors.push(io_err(&path)(e)),
                    }
                }
            }
            Err(e) => errors.push(io_err(&tmp_dir)(e)),
        }
        (removed, errors)
    }

    /// The blobs an image needs: its config, and every manifest it is stored with (its
    /// own and its names') with their layers.
    pub fn referenced_blobs(&self, image: &ImageRecord) -> Result<Vec<Digest>, StoreError> {
        let mut blobs = vec![image.id.clone()];
        for digest in image.manifests() {
            let with = ImageRecord {
                manifest: digest.clone(),
                ..image.clone()
            };
            let manifest = self.manifest(&with)?;
            blobs.push(digest);
            for layer in manifest.layers() {
                if let Ok(d) = Digest::try_from(layer.digest()) {
                    blobs.push(d);
                }
            }
        }
        Ok(blobs)
    }

    /// An image's parsed manifest.
    pub fn manifest(
        &self,
        image: &ImageRecord,
    ) -> Result<oci_spec::image::ImageManifest, StoreError> {
        let bytes = self.read_blob(&image.manifest)?;
        serde_json::from_slice(&bytes).map_err(|source| StoreError::CorruptIndex {
            path: self.blob_path(&image.manifest),
            source,
        })
    }

    /// An image's parsed config.
    pub fn config(
        &self,
        image: &ImageRecord,
    ) -> Result<oci_spec::image::ImageConfiguration, StoreError> {
        let bytes = self.read_blob(&image.id)?;
        serde_json::from_slice(&bytes).map_err(|source| StoreError::CorruptIndex {
            path: self.blob_path(&image.id),
            source,
        })
    }

    /// The diff IDs (digests of the uncompressed layers) of an image, bottom layer first,
    /// from its config's `rootfs.diff_ids`, read loosely: gc needs only these, and an image
    /// whose config has none has no unpacked layers.
    pub fn diff_ids(&self, image: &ImageRecord) -> Result<Vec<Digest>, StoreError> {
        let bad = |reason: String| StoreError::Layer {
            image: image.id.clone(),
            reason,
        };
        let bytes = self.read_blob(&image.id)?;
        let config: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|source| StoreError::CorruptIndex {
                path: self.blob_path(&image.id),
                source,
            })?;
        let ids = match config.pointer("/rootfs/diff_ids") {
            None => return Ok(Vec::new()),
            Some(serde_json::Value::Array(ids)) => ids,
            Some(_) => return Err(bad("its config's rootfs.diff_ids is not a list".into())),
        };
        ids.iter()
            .map(|d| {
                let text = d.as_str().unwrap_or_default();
                text.parse::<Digest>()
                    .map_err(|e| bad(format!("diff_id {text:?}: {e}")))
            })
            .collect()
    }

    /// Names in the index, each with the ID of its image.
    pub fn names(&self) -> Result<BTreeMap<String, Digest>, StoreError> {
        let mut names = BTreeMap::new();
        for r in self.images()? {
            for n in &r.names {
                names.insert(n.clone(), r.id.clone());
            }
        }
        Ok(names)
    }
}

/// Finds `query` among `images`: a full ID, a unique prefix of 12+ hex digits
/// (`sha256:` optional), or a name (normalised like a `docker://` name, or exact). Returns
/// the image and, when found by name, the name as stored.
fn find<'a>(
    images: &'a [ImageRecord],
    query: &str,
) -> Result<(&'a ImageRecord, Option<String>), StoreError> {
    let not_found = || StoreError::NotFound {
        query: query.to_string(),
    };
    let by_name = |name: &str| {
        images
            .iter()
            .find(|r| r.names.iter().any(|n| n == name))
            .map(|r| (r, Some(name.to_string())))
    };
    if let Some(found) = by_name(query) {
        return Ok(found);
    }
    match ImageRef::parse(query) {
        Ok(ImageRef::Id(prefix)) if prefix.len() >= MIN_ID_PREFIX => {
            let matches: Vec<_> = images
                .iter()
                .filter(|r| r.id.hex().starts_with(&prefix))
                .collect();
            match matches.as_slice() {
                [one] => Ok((one, None)),
                [] => Err(not_found()),
                many => Err(StoreError::Ambiguous {
                    query: query.to_string(),
                    matches: many.iter().map(|r| r.id.to_string()).collect(),
                }),
            }
        }
        Ok(ImageRef::Name(d) | ImageRef::Docker(d)) => {
            by_name(&d.store_name()).ok_or_else(not_found)
        }
        _ => Err(not_found()),
    }
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, rename, fsync of
/// the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(io_err(dir))?;
    tmp.write_all(bytes).map_err(io_err(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io_err(tmp.path()))?;
    tmp.persist(path).map_err(|e| StoreError::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;

    pub(crate) fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("images")).unwrap();
        (dir, store)
    }

    fn tmp_count(store: &Store) -> usize {
        fs::read_dir(store.tmp_dir()).unwrap().count()
    }

    #[test]
    fn put_blob_verifies_digest_and_size() {
        let (_d, store) = store();
        let data = b"layer bytes";
        let digest = Digest::of(data);
        assert_eq!(
            store.put_blob(&digest, Some(11), &mut &data[..]).unwrap(),
            11
        );
        assert_eq!(store.read_blob(&digest).unwrap(), data);

        let other = Digest::of(b"something else");
        let err = store
            .put_blob(&other, Some(11), &mut &data[..])
            .unwrap_err();
        assert!(matches!(err, StoreError::DigestMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&other.to_string()));
        assert!(!store.has_blob(&other));

        let err = store.put_blob(&other, Some(5), &mut &data[..]).unwrap_err();
        assert!(
            matches!(err, StoreError::SizeMismatch { actual: 6, .. }),
            "{err}"
        );
        assert!(!store.has_blob(&other));
        assert_eq!(
            tmp_count(&store),
            0,
            "a failed write leaves no partial file"
        );
    }

    #[test]
    fn put_blob_read_error_keeps_nothing() {
        struct Broken(usize);
        impl Read for Broken {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::new(io::ErrorKind::ConnectionReset, "dropped"));
                }
                self.0 -= 1;
                buf[0] = b'x';
                Ok(1)
            }
        }
        let (_d, store) = store();
        let digest = Digest::of(b"xxxxxxxx");
        let err = store
            .put_blob(&digest, Some(8), &mut Broken(3))
            .unwrap_err();
        assert!(crate::error::chain(&err).contains("dropped"), "{err}");
        assert!(!store.has_blob(&digest));
        assert_eq!(tmp_count(&store), 0);
        // A retry stores it.
        store
            .put_blob(&digest, Some(8), &mut &b"xxxxxxxx"[..])
            .unwrap();
        assert!(store.has_blob(&digest));
    }

    pub(crate) fn add(store: &Store, config: &[u8], layer: &[u8], names: &[&str]) -> ImageRecord {
        let layer_d = Digest::of(layer);
        store.put_blob(&layer_d, None, &mut &layer[..]).unwrap();
        let id = Digest::of(config);
        store.put_blob(&id, None, &mut &config[..]).unwrap();
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": id.to_string(), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": layer_d.to_string(), "size": layer.len()}],
        });
        let bytes = serde_json::to_vec(&manifest).unwrap();
        let (m, _) = store.put_blob_computed(&mut &bytes[..]).unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        store.add_image(&id, &m, 1, &names).unwrap()
    }

    #[test]
    fn index_resolves_ids_prefixes_and_names() {
        let (_d, store) = store();
        let a = add(
            &store,
            b"{\"a\":1}",
            b"la",
            &["docker.io/library/busybox:latest"],
        );
        let b = add(&store, b"{\"b\":1}", b"lb", &["oci:/x:v1"]);
        assert_eq!(store.resolve(&a.id.to_string()).unwrap().id, a.id);
        assert_eq!(store.resolve(&a.id.hex()[..12]).unwrap().id, a.id);
        assert_eq!(store.resolve("busybox").unwrap().id, a.id);
        assert_eq!(store.resolve("docker://busybox:latest").unwrap().id, a.id);
        assert_eq!(store.resolve("oci:/x:v1").unwrap().id, b.id);
        let err = store.resolve("nothere").unwrap_err();
        assert!(err.to_string().contains("\"nothere\""), "{err}");
        // A name moves to the image fetched last under it.
        add(
            &store,
            b"{\"b\":1}",
            b"lb",
            &["docker.io/library/busybox:latest"],
        );
        assert_eq!(store.resolve("busybox").unwrap().id, b.id);
        assert!(store.resolve(&a.id.to_string()).unwrap().names.is_empty());
    }

    /// Issue 22, defect 5: the same image (config) under two names fetched with different
    /// manifests keeps each name's manifest, and gc keeps both; removing a name untags it,
    /// the last name (or the ID) removes the image, refused while it is in use.
    #[test]
    fn image_rm_of_a_name_untags_it_and_each_name_keeps_its_manifest() {
        let (_d, store) = store();
        let a = add(&store, b"{\"c\":1}", b"l1", &["a"]);
        let b = add(&store, b"{\"c\":1}", b"l2", &["b"]);
        assert_eq!(a.id, b.id);
        assert_ne!(a.manifest, b.manifest);
        assert_eq!(store.resolve("a").unwrap().manifest, a.manifest);
        assert_eq!(store.resolve("b").unwrap().manifest, b.manifest);
        let report = store.gc(Duration::from_secs(3600), &BTreeSet::new());
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(report.blobs.is_empty(), "gc removed {:?}", report.blobs);

        assert_eq!(
            store.remove("a", &BTreeSet::new()).unwrap(),
            Removed::Untagged {
                name: "a".into(),
                image: a.id.clone()
            }
        );
        assert_eq!(store.resolve(&a.id.to_string()).unwrap().names, ["b"]);
        let report = store.gc(Duration::from_secs(3600), &BTreeSet::new());
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(!store.has_blob(&a.manifest) && !store.has_blob(&Digest::of(b"l1")));
        assert!(store.has_blob(&b.manifest) && store.has_blob(&Digest::of(b"l2")));

        let in_use = BTreeSet::from([a.id.clone()]);
        let err = store.remove("b", &in_use).unwrap_err();
        assert!(matches!(err, StoreError::InUse { .. }), "{err}");
        match store.remove("b", &BTreeSet::new()).unwrap() {
            Removed::Image(r) => assert_eq!((r.id, r.names), (a.id.clone(), vec!["b".into()])),
            other => panic!("{other:?}"),
        }
        assert!(store.images().unwrap().is_empty());
    }

    /// An `images.json` of the version before names had their own manifests (no
    /// `name_manifests`) is read: every name has the image's manifest, and rm and gc work
    /// on it.
    #[test]
    fn an_index_written_before_names_had_manifests_is_read() {
        let (_d, store) = store();
        let a = add(&store, b"{\"c\":1}", b"l1", &[]);
        let old = serde_json::json!({"images": [{
            "id": a.id.to_string(),
            "manifest": a.manifest.to_string(),
            "names": ["a", "b"],
            "size": 1,
            "imported": now_secs(),
            "last_used": now_secs(),
        }]});
        fs::write(store.index_path(), serde_json::to_vec_pretty(&old).unwrap()).unwrap();
        let record = store.resolve("b").unwrap();
        assert_eq!(
            (record.id.clone(), record.manifest.clone()),
            (a.id.clone(), a.manifest.clone())
        );
        assert_eq!(record.name_manifests.len(), 2);
        assert!(matches!(
            store.remove("a", &BTreeSet::new()).unwrap(),
            Removed::Untagged { .. }
        ));
        let report = store.gc(Duration::from_secs(3600), &BTreeSet::new());
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert!(store.has_blob(&a.manifest) && store.has_blob(&Digest::of(b"l1")));
        assert_eq!(store.resolve("b").unwrap().manifest, a.manifest);
        assert!(matches!(
            store.remove("b", &BTreeSet::new()).unwrap(),
            Removed::Image(_)
        ));
    }
}
