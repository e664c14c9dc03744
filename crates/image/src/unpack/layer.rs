//! One layer's tar stream (plain, gzip or zstd compressed) applied to a directory so that
//! nothing outside it is ever written, whatever the layer holds. It knows no store: the
//! caller hands it a reader and a target.
//!
//! Every entry's parent directory is opened with `openat2(2)` and `RESOLVE_IN_ROOT`
//! ([`beneath::open_beneath`]), so the
//! kernel resolves `..` and symlinks (absolute or relative) as if the target were `/`: a
//! link pointing out of the tree lands inside it, as it would in the container. The entry
//! itself is then created relative to that directory descriptor with `O_NOFOLLOW`/`*at`
//! calls, after removing whatever was there, so a symlink left by an earlier entry is
//! replaced, not followed. On top of that, entry names and hard-link targets with `..`
//! components or absolute paths are refused outright (no tool writes them), as are device
//! nodes (an image has no business shipping them; the runtime provides `/dev`).
//!
//! OCI whiteouts are applied: `.wh.NAME` removes `NAME` from the layers below, and
//! `.wh..wh..opq` empties its directory of everything the layers below put there. The
//! uncompressed stream of each layer is checked against its `diff_id` from the config.

use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use beneath::{at, open_beneath, xattr, Kind};
use sha2::{Digest as _, Sha256};

use crate::digest::Digest;

const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// What went wrong applying a layer; each variant names the layer and, where there is one,
/// the entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("layer {layer}: entry {entry:?} {reason}; refused, nothing outside {} was written", target.display())]
    /// An entry would write outside the target, or is a device node; nothing was written
    /// outside.
    Hostile {
        /// The layer (its digest, or what names it).
        layer: String,
        /// The entry's name in the tar stream.
        entry: String,
        /// What is wrong with it.
        reason: String,
        /// The directory unpacked into.
        target: PathBuf,
    },
    #[error("layer {layer}: entry {entry:?}")]
    /// An entry could not be created.
    Entry {
        /// The layer (its digest, or what names it).
        layer: String,
        /// The entry's name in the tar stream.
        entry: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    #[error("layer {layer}: reading it failed")]
    /// The layer's stream could not be read or decompressed, or is not a tar stream.
    Read {
        /// The layer (its digest, or what names it).
        layer: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    #[error("layer {layer}: its uncompressed content has digest {actual}, the image config says {expected}")]
    /// The uncompressed stream does not have the diff ID the image config gives.
    DiffId {
        /// The layer (its digest, or what names it).
        layer: String,
        /// The diff ID from the config.
        expected: String,
        /// The digest of the uncompressed stream.
        actual: Digest,
    },
    #[error("unpack target {}", path.display())]
    /// The target directory could not be opened.
    Target {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Options for unpacking.
#[derive(Debug, Clone)]
pub struct UnpackOptions {
    /// Give entries the owners the layer names (needs root); otherwise they keep the
    /// caller's. Defaults to whether the caller is root.
    pub same_owner: bool,
    /// Record whiteouts the way overlayfs reads them instead of applying them: `.wh.NAME`
    /// becomes a character device 0/0 named `NAME`, `.wh..wh..opq` the extended attribute
    /// `trusted.overlay.opaque=y` on its directory. For a layer unpacked on its own, to be
    /// one lower directory of an overlay mount.
    pub overlay_whiteouts: bool,
    /// Shift every owner into a range of host ids (a user namespace's): id `n` becomes
    /// `base + n`. With `same_owner`; directories the layers do not list, and the target
    /// itself, become `base`'s (the namespace's root).
    pub id_shift: Option<IdShift>,
}

/// A range of host ids that ids `0..size` are shifted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdShift {
    /// The host id that id 0 becomes.
    pub base: u32,
    /// How many ids the range holds.
    pub size: u32,
}

impl IdShift {
    /// The host id of `id`; an id beyond the range becomes the range's overflow id
    /// (`nobody`, 65534, or the range's last id when it is smaller).
    pub fn host_id(&self, id: u32) -> u32 {
        let inside = if id < self.size {
            id
        } else {
            65534.min(self.size.saturating_sub(1))
        };
        self.base + inside
    }
}

impl Default for UnpackOptions {
    fn default() -> Self {
        UnpackOptions {
            // SAFETY: geteuid has no preconditions.
            same_owner: unsafe { libc::geteuid() } == 0,
            overlay_whiteouts: false,
            id_shift: None,
        }
    }
}

/// A reader that hashes what is read through it.
struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Applies one layer (compression detected from its first bytes) to `target`, an existing
/// directory. `layer` names it in errors; `diff_id`, when given, is checked.
pub fn unpack_layer(
    reader: impl Read,
    target: &Path,
    layer: &str,
    diff_id: Option<&str>,
    options: &UnpackOptions,
) -> Result<(), LayerError> {
    let read_err = |source| LayerError::Read {
        layer: layer.to_string(),
        source,
    };
    let mut buffered = BufReader::with_capacity(1 << 16, reader);
    let head = buffered.fill_buf().map_err(read_err)?.to_vec();
    let decompressed: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(buffered))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(
            ruzstd::decoding::StreamingDecoder::new(buffered)
                .map_err(|e| read_err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())))?,
        )
    } else {
        Box::new(buffered)
    };
    let mut hashing = HashingReader {
        inner: decompressed,
        hasher: Sha256::new(),
    };
    let root_fd = open_root(target)?;
    let mut unpacker = Unpacker {
        root: root_fd,
        target: target.to_path_buf(),
        layer: layer.to_string(),
        created: HashSet::new(),
        options: options.clone(),
    };
    {
        let mut archive = tar::Archive::new(&mut hashing);
        for entry in archive.entries().map_err(read_err)? {
            let mut entry = entry.map_err(read_err)?;
            unpacker.apply(&mut entry)?;
        }
    }
    // The tar may end before the stream does (padding); the digest covers all of it.
    io::copy(&mut hashing, &mut io::sink()).map_err(read_err)?;
    if let Some(expected) = diff_id {
        let actual = Digest::from_hex(&hex(&hashing.hasher.finalize())).expect("sha256 hex");
        if actual.to_string() != expected {
            return Err(LayerError::DiffId {
                layer: layer.to_string(),
                expected: expected.to_string(),
                actual,
            });
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn open_root(target: &Path) -> Result<OwnedFd, LayerError> {
    beneath::open_path(target, Kind::Directory).map_err(|source| LayerError::Target {
        path: target.to_path_buf(),
        source,
    })
}

struct Unpacker {
    root: OwnedFd,
    target: PathBuf,
    layer: String,
    /// Paths this layer has created, which an opaque whiteout keeps.
    created: HashSet<String>,
    options: UnpackOptions,
}

impl Unpacker {
    fn hostile(&self, entry: &str, reason: impl Into<String>) -> LayerError {
        LayerError::Hostile {
            layer: self.layer.clone(),
            entry: entry.to_string(),
            reason: reason.into(),
            target: self.target.clone(),
        }
    }

    /// Splits an entry name (or, for `link_of`, the hard-link target of that entry) into
    /// its clean components, refusing `..` and absolute paths.
    fn components(&self, raw: &str, link_of: Option<&str>) -> Result<Vec<String>, LayerError> {
        let refuse = |what: &str| match link_of {
            None => self.hostile(raw, format!("has {what}")),
            Some(entry) => self.hostile(entry, format!("links to {raw:?}, {what}")),
        };
        if raw.starts_with('/') {
            return Err(refuse("an absolute path"));
        }
        let mut out = Vec::new();
        for c in raw.split('/') {
            match c {
                "" | "." => {}
                ".." => return Err(refuse("a \"..\" component")),
                c => out.push(c.to_string()),
            }
        }
        Ok(out)
    }

    /// Opens the directory `components` names beneath the root, creating missing ones.
    fn parent_dir(&self, components: &[String]) -> io::Result<OwnedFd> {
        let root = self.root.as_fd();
        match open_beneath(root, components.join("/"), Kind::Directory) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        let mut dir = open_beneath(root, "", Kind::Directory)?;
        for i in 0..components.len() {
            let path = components[..=i].join("/");
            dir = match open_beneath(root, &path, Kind::Directory) {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let name = &components[i];
                    at::mkdir(dir.as_fd(), name, 0o755)?;
                    if let (Some(shift), true) = (self.options.id_shift, self.options.same_owner) {
                        let id = shift.host_id(0);
                        at::chown(dir.as_fd(), name, id, id)?;
                    }
                    open_beneath(root, &path, Kind::Directory)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(dir)
    }

    fn apply<R: Read>(&mut self, entry: &mut tar::Entry<R>) -> Result<(), LayerError> {
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let components = self.components(&raw, None)?;
        let Some((name, parents)) = components.split_last() else {
            return Ok(()); // the root itself
        };
        let kind = entry.header().entry_type();
        if matches!(kind, tar::EntryType::Char | tar::EntryType::Block) {
            return Err(self.hostile(&raw, "is a device node"));
        }
        let entry_err = |source| LayerError::Entry {
            layer: self.layer.clone(),
            entry: raw.clone(),
            source,
        };
        let dir = self.parent_dir(parents).map_err(entry_err)?;
        let dirfd = dir.as_fd();
        let parent_path = parents.join("/");

        if name == OPAQUE && self.options.overlay_whiteouts {
            return xattr::set(dirfd, c"trusted.overlay.opaque", b"y").map_err(entry_err);
        }
        if let (Some(hidden), true) = (name.strip_prefix(WHITEOUT), self.options.overlay_whiteouts)
        {
            at::remove(dirfd, hidden).map_err(entry_err)?;
            at::make_whiteout(dirfd, hidden).map_err(entry_err)?;
            self.created.insert(join(&parent_path, hidden));
            return Ok(());
        }
        if name == OPAQUE {
            for child in at::list(dirfd).map_err(entry_err)? {
                let child_path = join(&parent_path, &child.to_string_lossy());
                if !self.created.contains(&child_path) {
                    at::remove(dirfd, &child).map_err(entry_err)?;
                }
            }
            return Ok(());
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            return at::remove(dirfd, hidden).map_err(entry_err);
        }

        let mut xattrs = layer_xattrs(entry).map_err(entry_err)?;
        if self.options.id_shift.is_some() {
            // An ACL names users and groups by the ids the layer gives them, which the
            // shift would leave pointing outside the pod's range.
            xattrs.retain(|(name, _)| !name.to_bytes().starts_with(b"system.posix_acl_"));
        }
        let header = entry.header();
        let meta = Meta {
            mode: header.mode().map_err(entry_err)? & 0o7777,
            uid: header.uid().map_err(entry_err)? as u32,
            gid: header.gid().map_err(entry_err)? as u32,
            mtime: header.mtime().unwrap_or(0) as i64,
        };
        let existing = at::lstat(dirfd, name).map_err(entry_err)?;
        let existing_is_dir = existing.is_some_and(|st| st.is_dir());

        match kind {
            tar::EntryType::Directory => {
                if !existing_is_dir {
                    at::remove(dirfd, name).map_err(entry_err)?;
                    at::mkdir(dirfd, name, 0o700).map_err(entry_err)?;
                }
                self.set_meta(dirfd, name, &meta, false)
                    .map_err(entry_err)?;
                set_xattrs(dirfd, name, &xattrs).map_err(entry_err)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                at::remove(dirfd, name).map_err(entry_err)?;
                let mut file = at::create_file(dirfd, name, 0o600).map_err(entry_err)?;
                io::copy(entry, &mut file).map_err(entry_err)?;
                drop(file);
                self.set_meta(dirfd, name, &meta, false)
                    .map_err(entry_err)?;
                // After chown, which would clear a file capability.
                set_xattrs(dirfd, name, &xattrs).map_err(entry_err)?;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| self.hostile(&raw, "is a symlink without a target"))?;
                let target = CString::new(target.into_owned())
                    .map_err(|_| self.hostile(&raw, "has a NUL byte in its link target"))?;
                at::remove(dirfd, name).map_err(entry_err)?;
                let target = OsStr::from_bytes(target.as_bytes());
                at::symlink(target, dirfd, name).map_err(entry_err)?;
                self.set_meta(dirfd, name, &meta, true).map_err(entry_err)?;
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| self.hostile(&raw, "is a hard link without a target"))?;
                let target = String::from_utf8_lossy(&target).into_owned();
                let tcomps = self.components(&target, Some(&raw))?;
                let Some((tname, tparents)) = tcomps.split_last() else {
                    return Err(self.hostile(&raw, "is a hard link to the root"));
                };
                let tdir = open_beneath(self.root.as_fd(), tparents.join("/"), Kind::Directory)
                    .map_err(entry_err)?;
                at::remove(dirfd, name).map_err(entry_err)?;
                at::hard_link(tdir.as_fd(), tname, dirfd, name).map_err(entry_err)?;
            }
            tar::EntryType::Fifo => {
                at::remove(dirfd, name).map_err(entry_err)?;
                at::make_fifo(dirfd, name, 0o600).map_err(entry_err)?;
                self.set_meta(dirfd, name, &meta, false)
                    .map_err(entry_err)?;
            }
            // Extended headers are consumed by the tar reader; anything else (sparse
            // files, volume labels) is not in image layers and is skipped.
            _ => return Ok(()),
        }
        self.created.insert(join(&parent_path, name));
        Ok(())
    }

    /// Owner, mode and modification time of `name` in `dir`, without following it.
    fn set_meta(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
        meta: &Meta,
        symlink: bool,
    ) -> io::Result<()> {
        if self.options.same_owner {
            let (uid, gid) = match self.options.id_shift {
                Some(shift) => (shift.host_id(meta.uid), shift.host_id(meta.gid)),
                None => (meta.uid, meta.gid),
            };
            at::chown(dir, name, uid, gid)?;
        }
        if !symlink {
            // After chown, which clears set-id bits. chmod does not follow a symlink
            // here: the entry was just created by us as a non-symlink.
            at::chmod(dir, name, meta.mode)?;
        }
        at::set_times(dir, name, meta.mtime)
    }
}

/// What a tar header gives an entry: its permission bits, owner and modification time.
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: i64,
}

/// The extended attributes a layer gives an entry (PAX `SCHILY.xattr.NAME` records), but
/// overlayfs's own (`trusted.overlay.*`): whiteouts and opaque directories are made from
/// the layer's `.wh.` entries, and a layer must not steer how the overlay reads its lower
/// directories.
fn layer_xattrs<R: Read>(entry: &mut tar::Entry<R>) -> io::Result<Vec<(CString, Vec<u8>)>> {
    let mut xattrs = Vec::new();
    let Some(pax) = entry.pax_extensions()? else {
        return Ok(xattrs);
    };
    for ext in pax {
        let ext = ext?;
        let Some(name) = ext.key_bytes().strip_prefix(b"SCHILY.xattr.") else {
            continue;
        };
        if name.starts_with(b"trusted.overlay.") {
            continue;
        }
        let name = CString::new(name.to_vec())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "NUL in an xattr name"))?;
        xattrs.push((name, ext.value_bytes().to_vec()));
    }
    Ok(xattrs)
}

/// Sets `xattrs` on `name` in `dir` (a directory or a regular file this unpacking just
/// made, never a symlink), opened `O_PATH`, which neither follows a symlink nor blocks. A
/// filesystem without an attribute's namespace skips it.
fn set_xattrs(dir: BorrowedFd<'_>, name: &str, xattrs: &[(CString, Vec<u8>)]) -> io::Result<()> {
    if xattrs.is_empty() {
        return Ok(());
    }
    let entry = at::open_entry(dir, name)?;
    for (key, value) in xattrs {
        match xattr::set(entry.as_fd(), key, value) {
            // This attribute's namespace is not supported here; the others may be.
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => continue,
            other => other?,
        }
    }
    Ok(())
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_shift_maps_into_the_range_and_overflows_to_nobody() {
        let shift = IdShift {
            base: 1 << 24,
            size: 65536,
        };
        assert_eq!(shift.host_id(0), 1 << 24);
        assert_eq!(shift.host_id(1001), (1 << 24) + 1001);
        assert_eq!(shift.host_id(70000), (1 << 24) + 65534);
        let small = IdShift {
            base: 100,
            size: 10,
        };
        assert_eq!(small.host_id(42), 109);
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A tar layer built entry by entry, names and link targets written raw so that
    /// hostile ones (`..`, absolute) can be made.
    struct Layer(tar::Builder<Vec<u8>>);

    impl Layer {
        fn new() -> Layer {
            Layer(tar::Builder::new(Vec::new()))
        }

        fn entry(
            mut self,
            kind: tar::EntryType,
            name: &str,
            link: &str,
            data: &[u8],
            mode: u32,
        ) -> Layer {
            let mut h = tar::Header::new_old();
            let old = h.as_old_mut();
            old.name[..name.len()].copy_from_slice(name.as_bytes());
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_size(data.len() as u64);
            h.set_mtime(1_000_000);
            h.set_uid(0);
            h.set_gid(0);
            h.set_cksum();
            self.0.append(&h, data).unwrap();
            self
        }

        fn file(self, name: &str, data: &str) -> Layer {
            self.entry(tar::EntryType::Regular, name, "", data.as_bytes(), 0o644)
        }

        fn dir(self, name: &str) -> Layer {
            self.entry(tar::EntryType::Directory, name, "", b"", 0o755)
        }

        fn symlink(self, name: &str, target: &str) -> Layer {
            self.entry(tar::EntryType::Symlink, name, target, b"", 0o777)
        }

        fn hardlink(self, name: &str, target: &str) -> Layer {
            self.entry(tar::EntryType::Link, name, target, b"", 0o644)
        }

        fn bytes(self) -> Vec<u8> {
            self.0.into_inner().unwrap()
        }
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "keep").unwrap();
        Fixture {
            _dir: dir,
            root,
            outside,
        }
    }

    impl Fixture {
        fn unpack(&self, layer: &[u8]) -> Result<(), LayerError> {
            unpack_layer(
                layer,
                &self.root,
                "test-layer",
                None,
                &UnpackOptions::default(),
            )
        }

        /// Nothing outside the root changed.
        fn assert_outside_untouched(&self) {
            let names: Vec<_> = std::fs::read_dir(&self.outside)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, vec![std::ffi::OsString::from("secret")]);
            assert_eq!(
                std::fs::read_to_string(self.outside.join("secret")).unwrap(),
                "keep"
            );
            assert_eq!(
                std::fs::metadata(self.outside.join("secret"))
                    .unwrap()
                    .nlink(),
                1
            );
        }
    }

    #[test]
    fn unpacks_files_dirs_links_and_modes() {
        let f = fixture();
        let layer = Layer::new()
            .dir("./bin")
            .entry(tar::EntryType::Regular, "bin/tool", "", b"#!x", 0o750)
            .symlink("bin/alias", "tool")
            .hardlink("bin/again", "./bin/tool")
            .entry(tar::EntryType::Fifo, "pipe", "", b"", 0o600)
            .file("deep/er/file", "made parents")
            .bytes();
        f.unpack(&layer).unwrap();
        let tool = f.root.join("bin/tool");
        assert_eq!(std::fs::read(&tool).unwrap(), b"#!x");
        assert_eq!(
            std::fs::metadata(&tool).unwrap().permissions().mode() & 0o7777,
            0o750
        );
        assert_eq!(std::fs::metadata(&tool).unwrap().mtime(), 1_000_000);
        assert_eq!(
            std::fs::read_link(f.root.join("bin/alias")).unwrap(),
            Path::new("tool")
        );
        assert_eq!(std::fs::metadata(&tool).unwrap().nlink(), 2);
        assert!(std::fs::symlink_metadata(f.root.join("pipe"))
            .unwrap()
            .file_type()
            .is_fifo_like());
        assert_eq!(
            std::fs::read_to_string(f.root.join("deep/er/file")).unwrap(),
            "made parents"
        );
    }

    #[test]
    fn extended_attributes_are_kept_but_the_overlays_own() {
        let f = fixture();
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data) in [
            ("dir", tar::EntryType::Directory, &b""[..]),
            ("dir/file", tar::EntryType::Regular, &b"x"[..]),
        ] {
            b.append_pax_extensions([
                ("SCHILY.xattr.user.origin", &b"layer"[..]),
                ("SCHILY.xattr.trusted.overlay.opaque", &b"y"[..]),
            ])
            .unwrap();
            let mut h = tar::Header::new_gnu();
            h.set_path(name).unwrap();
            h.set_entry_type(kind);
            h.set_mode(0o755);
            h.set_size(data.len() as u64);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(1_000_000);
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        f.unpack(&b.into_inner().unwrap()).unwrap();
        let get = |path: &Path, name: &str| {
            let path = CString::new(path.as_os_str().as_bytes()).unwrap();
            let name = CString::new(name).unwrap();
            let mut buf = [0u8; 64];
            // SAFETY: NUL-terminated strings and a buffer of the length given.
            let n = unsafe {
                libc::getxattr(
                    path.as_ptr(),
                    name.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            (n >= 0).then(|| buf[..n as usize].to_vec())
        };
        for path in [f.root.join("dir"), f.root.join("dir/file")] {
            assert_eq!(get(&path, "user.origin").as_deref(), Some(&b"layer"[..]));
            assert_eq!(get(&path, "trusted.overlay.opaque"), None);
        }
        assert_eq!(std::fs::read(f.root.join("dir/file")).unwrap(), b"x");
    }

    #[test]
    fn a_shifted_copy_drops_acls_whose_ids_the_shift_would_leave_outside_the_range() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: an id shift needs root (chown)");
            return;
        }
        let f = fixture();
        let mut b = tar::Builder::new(Vec::new());
        b.append_pax_extensions([
            ("SCHILY.xattr.system.posix_acl_access", &b"\x02\0\0\0"[..]),
            ("SCHILY.xattr.user.kept", &b"yes"[..]),
        ])
        .unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_path("file").unwrap();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(1);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(1_000_000);
        h.set_cksum();
        b.append(&h, &b"x"[..]).unwrap();
        let options = UnpackOptions {
            id_shift: Some(IdShift {
                base: 200_000,
                size: 65536,
            }),
            ..UnpackOptions::default()
        };
        unpack_layer(
            &b.into_inner().unwrap()[..],
            &f.root,
            "test-layer",
            None,
            &options,
        )
        .unwrap();
        let file = f.root.join("file");
        assert_eq!(std::fs::metadata(&file).unwrap().uid(), 200_000);
        let names = xattr_names(&file);
        assert!(names.contains(&"user.kept".to_string()), "{names:?}");
        assert!(
            !names.iter().any(|n| n.starts_with("system.posix_acl")),
            "{names:?}"
        );
    }

    fn xattr_names(path: &Path) -> Vec<String> {
        let path = CString::new(path.as_os_str().as_bytes()).unwrap();
        let mut buf = [0u8; 1024];
        // SAFETY: a NUL-terminated path and a buffer of the length given.
        let n = unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        assert!(n >= 0);
        buf[..n as usize]
            .split(|b| *b == 0)
            .filter(|n| !n.is_empty())
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect()
    }

    trait FifoLike {
        fn is_fifo_like(&self) -> bool;
    }
    impl FifoLike for std::fs::FileType {
        fn is_fifo_like(&self) -> bool {
            std::os::unix::fs::FileTypeExt::is_fifo(self)
        }
    }

    #[test]
    fn whiteouts_and_opaque_directories() {
        let f = fixture();
        f.unpack(
            &Layer::new()
                .file("a/x", "1")
                .file("a/y", "2")
                .file("b/z", "3")
                .file("b/sub/w", "4")
                .bytes(),
        )
        .unwrap();
        f.unpack(
            &Layer::new()
                .file("b/new", "5")
                .file("a/.wh.x", "")
                .file("b/.wh..wh..opq", "")
                .file(".wh.nothing-there", "")
                .bytes(),
        )
        .unwrap();
        assert!(!f.root.join("a/x").exists());
        assert!(f.root.join("a/y").exists());
        assert!(!f.root.join("b/z").exists() && !f.root.join("b/sub").exists());
        assert_eq!(std::fs::read_to_string(f.root.join("b/new")).unwrap(), "5");
        assert!(!f.root.join("a/.wh.x").exists() && !f.root.join("b/.wh..wh..opq").exists());
    }

    #[test]
    fn overlay_whiteouts_are_recorded_for_overlayfs() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: device nodes and trusted.* attributes need root");
            return;
        }
        let f = fixture();
        let options = UnpackOptions {
            overlay_whiteouts: true,
            ..UnpackOptions::default()
        };
        let layer = Layer::new()
            .file("a/.wh.x", "")
            .file("b/.wh..wh..opq", "")
            .file("b/new", "5")
            .bytes();
        unpack_layer(&layer[..], &f.root, "test-layer", None, &options).unwrap();
        let x = std::fs::symlink_metadata(f.root.join("a/x")).unwrap();
        assert!(
            std::os::unix::fs::FileTypeExt::is_char_device(&x.file_type()) && x.rdev() == 0,
            "a/x is not a 0/0 character device"
        );
        let path = CString::new(f.root.join("b").as_os_str().as_bytes()).unwrap();
        let mut value = [0u8; 8];
        // SAFETY: NUL-terminated strings and a buffer of the length given.
        let n = unsafe {
            libc::getxattr(
                path.as_ptr(),
                c"trusted.overlay.opaque".as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        assert_eq!(&value[..n.max(0) as usize], b"y");
        assert_eq!(std::fs::read_to_string(f.root.join("b/new")).unwrap(), "5");
        assert!(!f.root.join("a/.wh.x").exists() && !f.root.join("b/.wh..wh..opq").exists());
    }

    #[test]
    fn refuses_dotdot_and_absolute_names() {
        for name in [
            "../outside/evil",
            "a/../../outside/evil",
            "/outside-abs-evil",
        ] {
            let f = fixture();
            let err = f.unpack(&Layer::new().file(name, "x").bytes()).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, LayerError::Hostile { .. }), "{msg}");
            assert!(msg.contains(name) && msg.contains("test-layer"), "{msg}");
            f.assert_outside_untouched();
            assert!(!Path::new("/outside-abs-evil").exists());
        }
    }

    #[test]
    fn symlinks_never_lead_out() {
        let f = fixture();
        let abs = f.outside.to_str().unwrap().to_string();
        // Directories reached through links that point out, absolute and relative; then a
        // file written over a link that points out.
        for (link, target, through) in [
            ("abs", abs.as_str(), "abs/secret"),
            ("rel", "../outside", "rel/secret"),
            ("deep", "../../../../../../..", "deep/tmp/evil"),
            ("file", &format!("{abs}/secret"), "file"),
        ] {
            let result = f.unpack(
                &Layer::new()
                    .symlink(link, target)
                    .file(through, "pwned")
                    .bytes(),
            );
            if let Err(e) = &result {
                assert!(e.to_string().contains(through), "{e}");
            }
            f.assert_outside_untouched();
        }
        // What did land, landed inside.
        assert_eq!(
            std::fs::read_to_string(f.root.join("file")).unwrap(),
            "pwned"
        );
        assert!(
            f.root.join("tmp/evil").exists(),
            "\"..\" above the root stays at the root"
        );
    }

    #[test]
    fn hardlinks_never_lead_out() {
        let f = fixture();
        let abs = format!("{}/secret", f.outside.display());
        for target in ["../outside/secret", abs.as_str()] {
            let err = f
                .unpack(&Layer::new().hardlink("h", target).bytes())
                .unwrap_err();
            assert!(matches!(err, LayerError::Hostile { .. }), "{err}");
            assert!(err.to_string().contains("\"h\""), "{err}");
        }
        // Through a symlink that points out: resolved inside the root, where there is no
        // such file.
        let err = f
            .unpack(
                &Layer::new()
                    .symlink("s", f.outside.to_str().unwrap())
                    .hardlink("h2", "s/secret")
                    .bytes(),
            )
            .unwrap_err();
        assert!(matches!(err, LayerError::Entry { .. }), "{err}");
        f.assert_outside_untouched();
    }

    #[test]
    fn refuses_device_nodes() {
        let f = fixture();
        let err = f
            .unpack(
                &Layer::new()
                    .entry(tar::EntryType::Char, "dev/kmem", "", b"", 0o600)
                    .bytes(),
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("dev/kmem") && err.to_string().contains("device"),
            "{err}"
        );
        assert!(!f.root.join("dev/kmem").exists());
    }

    #[test]
    fn gzip_zstd_and_diff_id() {
        let plain = Layer::new().file("hello", "world").bytes();
        let diff_id = Digest::of(&plain).to_string();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut gz, &plain).unwrap();
        let gz = gz.finish().unwrap();
        let zst = ruzstd::encoding::compress_to_vec(
            &plain[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        for layer in [&plain, &gz, &zst] {
            let f = fixture();
            unpack_layer(
                &layer[..],
                &f.root,
                "l",
                Some(&diff_id),
                &UnpackOptions::default(),
            )
            .unwrap();
            assert_eq!(
                std::fs::read_to_string(f.root.join("hello")).unwrap(),
                "world"
            );
        }
        let f = fixture();
        let wrong = Digest::of(b"other").to_string();
        let err = unpack_layer(
            &gz[..],
            &f.root,
            "l",
            Some(&wrong),
            &UnpackOptions::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains(&wrong) && err.to_string().contains(&diff_id),
            "{err}"
        );
    }
}
