//! One path of an image's root filesystem as a pod will see it, found without mounting
//! anything: looked up in the image's unpacked layer directories (see [`crate::layers`]) as
//! overlayfs merges them. The topmost layer holding a name wins; a whiteout (a 0/0
//! character device) hides it below, and an opaque directory (`trusted.overlay.opaque=y`)
//! hides everything below it. Symlinks are followed inside the image, as if its root were
//! `/` (an absolute link, or `..` above the root, stays in the image), so that a runtime
//! can read, say, the image's own `/etc/passwd` before any pod exists.
//!
//! A single directory (a root filesystem given as is) is a stack of one layer.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// How many symlinks a lookup follows before it gives up (as the kernel's `ELOOP`).
const MAX_LINKS: usize = 40;

/// What a name is in the merged view.
enum Entry {
    /// A directory, made of these layers' directories (top first).
    Dir(Vec<PathBuf>),
    /// A file (or anything not a directory or symlink), at this path in its layer.
    Other(PathBuf),
    Link(PathBuf),
    Missing,
}

/// The file at `path` (taken as relative to the image's root) in the merged view of
/// `layers` (bottom layer first, as [`crate::layers::layer_dirs`] returns them): the path
/// of the layer's file that a pod would read, or `None` when the image has none (or it is
/// a directory).
pub fn merged_file(layers: &[PathBuf], path: &Path) -> io::Result<Option<PathBuf>> {
    let root: Vec<PathBuf> = layers.iter().rev().cloned().collect();
    let mut pending: Vec<OsString> = components(path);
    pending.reverse();
    // The directories resolved so far, each with its layers, from the root down.
    let mut dirs: Vec<Vec<PathBuf>> = vec![root];
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            if dirs.len() > 1 {
                dirs.pop();
            }
            continue;
        }
        let last = pending.is_empty();
        match lookup(dirs.last().expect("the root stays"), &name)? {
            Entry::Dir(stack) => dirs.push(stack),
            Entry::Other(file) if last => return Ok(Some(file)),
            Entry::Other(_) | Entry::Missing => return Ok(None),
            Entry::Link(target) => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
                if target.is_absolute() {
                    dirs.truncate(1);
                }
                let mut rest = components(&target);
                rest.reverse();
                pending.extend(rest);
            }
        }
    }
    Ok(None)
}

/// The names of `path`'s normal and `..` components (`/` and `.` dropped).
fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

/// `name` in the merged directory made of `stack` (top first, down to its first opaque
/// one). Every directory in `stack` is a real directory (never reached through a symlink),
/// so `lstat` below follows none.
fn lookup(stack: &[PathBuf], name: &OsString) -> io::Result<Entry> {
    let mut dirs = Vec::new();
    for layer_dir in stack {
        let path = layer_dir.join(name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            let opaque = is_opaque(&path);
            dirs.push(path);
            if opaque {
                break;
            }
            continue;
        }
        // A non-directory under a directory of a higher layer is hidden by it.
        if !dirs.is_empty() {
            break;
        }
        if kind.is_char_device() && meta.rdev() == 0 {
            return Ok(Entry::Missing);
        }
        if kind.is_symlink() {
            return Ok(Entry::Link(fs::read_link(&path)?));
        }
        return Ok(Entry::Other(path));
    }
    Ok(if dirs.is_empty() {
        Entry::Missing
    } else {
        Entry::Dir(dirs)
    })
}

/// Whether overlayfs takes directory `dir` as opaque.
fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 1];
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: both strings are NUL-terminated and `value` is valid for its length.
    let n = unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            c"trusted.overlay.opaque".as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    n == 1 && value[0] == b'y'
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::symlink;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn read(layers: &[PathBuf], path: &str) -> Option<String> {
        merged_file(layers, Path::new(path))
            .unwrap()
            .map(|p| fs::read_to_string(p).unwrap())
    }

    #[test]
    fn the_top_layer_wins_and_symlinks_stay_in_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let (low, high) = (dir.path().join("low"), dir.path().join("high"));
        write(&low.join("etc/passwd"), "low");
        write(&low.join("etc/group"), "low group");
        write(&high.join("etc/passwd"), "high");
        // An absolute link and one climbing above the root both land in the image.
        write(&high.join("real/shadow"), "in the image");
        symlink("/real/shadow", high.join("etc/shadow")).unwrap();
        symlink("../../../../real", high.join("etc/up")).unwrap();
        symlink("etc", high.join("conf")).unwrap();
        symlink("loop", high.join("loop")).unwrap();
        let layers = vec![low, high];
        assert_eq!(read(&layers, "etc/passwd").as_deref(), Some("high"));
        assert_eq!(read(&layers, "/etc/group").as_deref(), Some("low group"));
        assert_eq!(read(&layers, "etc/shadow").as_deref(), Some("in the image"));
        assert_eq!(
            read(&layers, "etc/up/shadow").as_deref(),
            Some("in the image")
        );
        assert_eq!(read(&layers, "conf/passwd").as_deref(), Some("high"));
        assert_eq!(read(&layers, "etc/missing"), None);
        assert_eq!(read(&layers, "etc"), None);
        assert_eq!(
            merged_file(&layers, Path::new("loop/x"))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ELOOP)
        );
    }

    #[test]
    fn whiteouts_and_opaque_directories_hide_the_layers_below() {
        // SAFETY: no arguments, no failure.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: whiteouts and trusted xattrs need root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (low, high) = (dir.path().join("low"), dir.path().join("high"));
        write(&low.join("etc/passwd"), "low");
        write(&low.join("etc/group"), "low group");
        write(&low.join("opt/kept"), "low");
        fs::create_dir_all(high.join("etc")).unwrap();
        let cpath = |p: PathBuf| std::ffi::CString::new(p.into_os_string().into_vec()).unwrap();
        let whiteout = cpath(high.join("etc/passwd"));
        // SAFETY: a NUL-terminated path; a 0/0 character device is overlayfs's whiteout.
        let made = unsafe { libc::mknod(whiteout.as_ptr(), libc::S_IFCHR, 0) };
        assert_eq!(made, 0, "{}", io::Error::last_os_error());
        write(&high.join("opt/new"), "high");
        let opt = cpath(high.join("opt"));
        // SAFETY: NUL-terminated strings and a one-byte value.
        let set = unsafe {
            libc::setxattr(
                opt.as_ptr(),
                c"trusted.overlay.opaque".as_ptr(),
                c"y".as_ptr().cast(),
                1,
                0,
            )
        };
        assert_eq!(set, 0, "{}", io::Error::last_os_error());
        let layers = vec![low, high];
        assert_eq!(read(&layers, "etc/passwd"), None);
        assert_eq!(read(&layers, "etc/group").as_deref(), Some("low group"));
        assert_eq!(read(&layers, "opt/new").as_deref(), Some("high"));
        assert_eq!(read(&layers, "opt/kept"), None);
    }
}
