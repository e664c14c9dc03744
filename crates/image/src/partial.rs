//! Resumable blob downloads. A blob being downloaded lives in the store's `tmp/` as
//! `<hex>.partial`, locked (`flock`) by the one process writing it. When a download breaks
//! off (a dropped connection, a killed process), the bytes that arrived stay there; the next
//! attempt re-hashes them (the hasher state is never saved, it is recomputed from the bytes
//! on disk) and asks the source for the rest only. The whole blob is still checked against
//! its digest and size before it is renamed into `blobs/`, so a corrupt prefix costs one
//! failed attempt (the file is then removed) and never a bad blob. `gc` removes partial
//! downloads, as it removes every file of `tmp/`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use sha2::{Digest as _, Sha256};

use crate::digest::Digest;
use crate::store::{Store, StoreError};

/// Follows a blob download: told when a blob starts (with its size and the bytes already
/// stored from an earlier attempt) and as its bytes arrive. The default methods do nothing.
pub trait Progress {
    /// A blob of `size` bytes starts, `from` of them already stored.
    fn blob_started(&mut self, _digest: &Digest, _size: u64, _from: u64) {}
    /// `n` more bytes of the current blob arrived.
    fn advanced(&mut self, _n: u64) {}
    /// The current blob is complete (or failed).
    fn blob_done(&mut self) {}
}

/// A [`Progress`] that shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {}

/// A partial download of one blob, locked for this process.
#[derive(Debug)]
pub struct Partial {
    digest: Digest,
    path: PathBuf,
    /// Holds the `flock`; closing it releases the lock.
    file: File,
    hasher: Sha256,
    len: u64,
}

const CHUNK: usize = 1 << 16;

impl Store {
    /// The partial download of `digest` (a blob of `size` bytes), locked, with the bytes an
    /// earlier attempt left re-hashed; `None` when another process is downloading it now.
    pub fn partial(&self, digest: &Digest, size: u64) -> Result<Option<Partial>, StoreError> {
        let path = self.tmp_dir().join(format!("{}.partial", digest.hex()));
        let err = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(err)?;
            // SAFETY: the descriptor is valid for the lifetime of `file`; flock takes no
            // pointers.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    return Ok(None);
                }
                return Err(err(e));
            }
            // The writer before us may have finished and renamed the file we locked into
            // `blobs/`: then lock the file that is at the path now.
            let locked = file.metadata().map_err(err)?;
            match fs::metadata(&path) {
                Ok(now) if now.ino() == locked.ino() && now.dev() == locked.dev() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(err(e)),
            }
            let mut partial = Partial {
                digest: digest.clone(),
                path: path.clone(),
                file,
                hasher: Sha256::new(),
                len: 0,
            };
            if locked.len() > size {
                partial.restart_at(0)?;
            } else {
                partial.rehash(locked.len())?;
            }
            return Ok(Some(partial));
        }
    }
}

impl Partial {
    /// How many bytes an earlier attempt left.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is stored yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn io_err(&self) -> impl FnOnce(io::Error) -> StoreError + '_ {
        |source| StoreError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Hashes the first `len` bytes of the file, dropping anything after them.
    fn rehash(&mut self, len: u64) -> Result<(), StoreError> {
        self.hasher = Sha256::new();
        self.len = 0;
        let mut file = &self.file;
        file.seek(SeekFrom::Start(0)).map_err(self.io_err())?;
        let mut buf = vec![0; CHUNK];
        let mut reader = file.take(len);
        loop {
            let n = reader.read(&mut buf).map_err(self.io_err())?;
            if n == 0 {
                break;
            }
            self.hasher.update(&buf[..n]);
            self.len += n as u64;
        }
        self.file.set_len(self.len).map_err(self.io_err())
    }

    /// Keeps only the first `from` bytes (the source sends the blob again from there; a
    /// source that cannot skip sends it from 0).
    pub fn restart_at(&mut self, from: u64) -> Result<(), StoreError> {
        if from == 0 {
            self.file.set_len(0).map_err(self.io_err())?;
            self.hasher = Sha256::new();
            self.len = 0;
            return Ok(());
        }
        if from != self.len {
            self.rehash(from)?;
        }
        Ok(())
    }

    /// Appends what `reader` yields, the rest of a blob of `size` bytes; when it is all
    /// there and digest and size match, moves it into `blobs/`. A read error keeps what
    /// arrived for the next attempt; a mismatch removes the file. Returns the size.
    pub fn finish(
        mut self,
        store: &Store,
        size: u64,
        reader: &mut dyn Read,
        progress: &mut dyn Progress,
    ) -> Result<u64, StoreError> {
        let mut file = &self.file;
        file.seek(SeekFrom::End(0)).map_err(self.io_err())?;
        let mut out = BufWriter::with_capacity(1 << 17, file);
        // At most one byte more than announced, so an endless stream cannot fill the disk
        // and a longer one is still caught.
        let mut limited = reader.take(size.saturating_sub(self.len) + 1);
        let mut buf = vec![0; CHUNK];
        loop {
            let n = match limited.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    // Keep what arrived: it is flushed so the next attempt finds it. Nothing
                    // arrived: no file is kept either.
                    let kept = out.flush().map(|()| self.len).unwrap_or(0);
                    if self.len == 0 {
                        let _ = fs::remove_file(&self.path);
                    }
                    return Err(StoreError::Interrupted {
                        digest: self.digest.clone(),
                        kept,
                        source,
                    });
                }
            };
            out.write_all(&buf[..n]).map_err(|source| StoreError::Io {
                path: self.path.clone(),
                source,
            })?;
            self.hasher.update(&buf[..n]);
            self.len += n as u64;
            progress.advanced(n as u64);
        }
        out.flush().map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })?;
        drop(out);
        if self.len != size {
            let _ = fs::remove_file(&self.path);
            return Err(StoreError::SizeMismatch {
                digest: self.digest.clone(),
                expected: size,
                actual: self.len,
            });
        }
        let actual = Digest::from_hasher(self.hasher.clone());
        if actual != self.digest {
            let _ = fs::remove_file(&self.path);
            return Err(StoreError::DigestMismatch {
                expected: self.digest.clone(),
                actual,
                size: self.len,
            });
        }
        self.file.sync_all().map_err(self.io_err())?;
        store.commit_file(&self.path, &self.digest)?;
        Ok(size)
    }

    /// Removes the file (a blob another process stored meanwhile).
    pub fn discard(self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Yields `data` but fails after `cut` bytes.
    struct Cut<'a> {
        data: &'a [u8],
        cut: usize,
    }

    impl Read for Cut<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.cut == 0 {
                return Err(io::Error::new(io::ErrorKind::ConnectionReset, "dropped"));
            }
            let n = buf.len().min(self.cut).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            self.cut -= n;
            Ok(n)
        }
    }

    fn data() -> Vec<u8> {
        (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn a_broken_download_continues_from_the_bytes_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = data();
        let digest = Digest::of(&data);
        let size = data.len() as u64;

        let partial = store.partial(&digest, size).unwrap().unwrap();
        assert!(partial.is_empty());
        let err = partial
            .finish(
                &store,
                size,
                &mut Cut {
                    data: &data,
                    cut: 100_000,
                },
                &mut NoProgress,
            )
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Interrupted { kept: 100_000, .. }),
            "{err}"
        );
        assert!(crate::error::chain(&err).contains("dropped"), "{err}");
        assert!(!store.has_blob(&digest), "no partial blob in blobs/");

        // While one process holds it, another gets None (and downloads on its own).
        let partial = store.partial(&digest, size).unwrap().unwrap();
        assert_eq!(partial.len(), 100_000);
        assert!(store.partial(&digest, size).unwrap().is_none());
        partial
            .finish(&store, size, &mut &data[100_000..], &mut NoProgress)
            .unwrap();
        assert_eq!(store.read_blob(&digest).unwrap(), data);
        assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
    }

    #[test]
    fn a_download_that_breaks_off_before_any_byte_keeps_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = data();
        let digest = Digest::of(&data);
        let partial = store.partial(&digest, data.len() as u64).unwrap().unwrap();
        let err = partial
            .finish(
                &store,
                data.len() as u64,
                &mut Cut {
                    data: &data,
                    cut: 0,
                },
                &mut NoProgress,
            )
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Interrupted { kept: 0, .. }),
            "{err}"
        );
        assert_eq!(fs::read_dir(store.tmp_dir()).unwrap().count(), 0);
    }

    #[test]
    fn a_source_that_restarts_or_a_bad_prefix_still_gives_the_right_blob_or_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let data = data();
        let digest = Digest::of(&data);
        let size = data.len() as u64;
        let path = store.tmp_dir().join(format!("{}.partial", digest.hex()));

        // A source that ignores the offset sends everything: the kept bytes go.
        fs::write(&path, &data[..5000]).unwrap();
        let mut partial = store.partial(&digest, size).unwrap().unwrap();
        assert_eq!(partial.len(), 5000);
        partial.restart_at(0).unwrap();
        partial
            .finish(&store, size, &mut &data[..], &mut NoProgress)
            .unwrap();
        assert_eq!(store.read_blob(&digest).unwrap(), data);

        // A corrupt prefix fails the digest check and is removed; nothing is stored.
        let other: Vec<u8> = data.iter().map(|b| b ^ 1).collect();
        let other_digest = Digest::of(&other);
        let other_path = store
            .tmp_dir()
            .join(format!("{}.partial", other_digest.hex()));
        fs::write(&other_path, &data[..5000]).unwrap();
        let partial = store.partial(&other_digest, size).unwrap().unwrap();
        let err = partial
            .finish(&store, size, &mut &other[5000..], &mut NoProgress)
            .unwrap_err();
        assert!(matches!(err, StoreError::DigestMismatch { .. }), "{err}");
        assert!(!other_path.exists());
        assert!(!store.has_blob(&other_digest));
        // A prefix longer than the blob is dropped.
        fs::write(&other_path, vec![0u8; data.len() + 10]).unwrap();
        let partial = store.partial(&other_digest, size).unwrap().unwrap();
        assert!(partial.is_empty());
    }
}
