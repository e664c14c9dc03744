//! Replacing a file so that readers see the old content or the new, never a mix: the one
//! atomic-write routine that pod state, network records and the pod's DNS/hosts files use.
//!
//! Every replacement goes through a temporary file and a rename, so a reader, and whatever
//! runs after a crash of any process (`kill -9` included: the page cache survives it), sees
//! the old file or the new one. `fsync` adds only survival of a machine crash or power loss,
//! and costs a journal commit each (0.3–1 ms on ext4): it is paid only for the records that
//! teardown after a reboot reads (see [`Durability`]).
//!
//! May not touch: anything of rkt's; it knows files, not what is in them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A failed step of [`replace`], naming the step and the file it was about.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {path}")]
pub struct WriteError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// How far a replaced file must survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// No fsync: atomic for readers and against a crash of any process, but a machine crash
    /// may lose the write (or, on a filesystem that does not order a file's data before its
    /// rename, leave it empty). For files that matter only while the machine is up: pod
    /// state and manifest, the pod's `/etc` files.
    Rename,
    /// The content is fsynced before the rename: a crash leaves the old or the new file.
    File,
    /// Also fsync the directory, so the rename itself survives a machine crash. For records
    /// that teardown after a reboot depends on.
    Directory,
}

/// Writes `bytes` to `path` (mode `mode` for a new file) through `.<name>.tmp` in the same
/// directory, which is created if missing: write, fsync (not with [`Durability::Rename`]),
/// rename over `path`, and with [`Durability::Directory`] fsync the directory.
pub fn replace(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    durability: Durability,
) -> Result<(), WriteError> {
    let fail = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError {
            action,
            path,
            source,
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(fail("create", dir))?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(fail("create temporary file", &tmp))?;
    file.write_all(bytes).map_err(fail("write", &tmp))?;
    if durability != Durability::Rename {
        file.sync_all().map_err(fail("fsync", &tmp))?;
    }
    drop(file);
    fs::rename(&tmp, path).map_err(fail("rename into place", path))?;
    if durability == Durability::Directory {
        sync_dir(dir)?;
    }
    Ok(())
}

/// fsyncs directory `dir`, so that the names created or renamed in it survive a machine
/// crash.
pub fn sync_dir(dir: &Path) -> Result<(), WriteError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| WriteError {
            action: "fsync directory",
            path: dir.to_path_buf(),
            source,
        })
}

/// Writes a new file at `path` (mode `mode`, no fsync) in a directory that nobody else sees
/// yet, like a pod directory still named `.new-<uuid>`: readers cannot meet it half
/// written, so it needs no temporary file and no rename. Fails if `path` exists.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), WriteError> {
    let fail = |action| {
        move |source| WriteError {
            action,
            path: path.to_path_buf(),
            source,
        }
    };
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(fail("create"))?
        .write_all(bytes)
        .map_err(fail("write"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_content_with_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        replace(&path, b"one", 0o600, Durability::Directory).unwrap();
        replace(&path, b"two", 0o600, Durability::File).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        replace(&path, b"three", 0o600, Durability::Rename).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"three");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn create_new_writes_once_with_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod.json");
        create_new(&path, b"{}", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = create_new(&path, b"again", 0o600).unwrap_err();
        assert_eq!((err.action, err.path), ("create", path.clone()));
        assert_eq!(fs::read(&path).unwrap(), b"{}");
    }

    #[test]
    fn a_failure_names_the_step_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, b"").unwrap();
        let err = replace(&blocker.join("x"), b"", 0o600, Durability::File).unwrap_err();
        assert_eq!(err.action, "create");
        assert_eq!(err.path, blocker);
    }
}
