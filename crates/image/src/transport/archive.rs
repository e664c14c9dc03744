//! Read access to the files inside an uncompressed tar archive without unpacking it: one
//! pass records where each regular file's bytes are, then a file is read by seeking there.
//! Both `oci-archive:` and `docker-archive:` are read this way.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::TransportError;

/// The regular files of a tar archive, by normalised path (no leading `./` or `/`).
#[derive(Debug)]
pub struct TarFiles {
    path: PathBuf,
    image: String,
    entries: HashMap<String, (u64, u64)>,
}

/// Normalises a path inside an archive: no leading `./` or `/`, no `.` components.
pub fn normalise(p: &str) -> String {
    p.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

impl TarFiles {
    /// Indexes the archive at `path`; `image` names the image for messages.
    pub fn open(path: &Path, image: &str) -> Result<TarFiles, TransportError> {
        let io = |source| TransportError::Io {
            image: image.to_string(),
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let mut archive = tar::Archive::new(file);
        let mut entries = HashMap::new();
        let mut links = Vec::new();
        for entry in archive.entries().map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = normalise(&String::from_utf8_lossy(&entry.path_bytes()));
            let kind = entry.header().entry_type();
            if kind.is_file() {
                entries.insert(name, (entry.raw_file_position(), entry.size()));
            } else if kind.is_symlink() || kind.is_hard_link() {
                // `docker save` links repeated layers to the first copy.
                if let Some(target) = entry.link_name_bytes() {
                    let target = String::from_utf8_lossy(&target).to_string();
                    let target = if kind.is_symlink() {
                        let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
                        resolve_relative(dir, &target)
                    } else {
                        normalise(&target)
                    };
                    links.push((name, target));
                }
            }
        }
        for (name, target) in links {
            if let Some(&pos) = entries.get(&target) {
                entries.insert(name, pos);
            }
        }
        Ok(TarFiles {
            path: path.to_path_buf(),
            image: image.to_string(),
            entries,
        })
    }

    /// Opens the file at `name` inside the archive.
    pub fn open_file(&self, name: &str) -> Result<Box<dyn Read>, TransportError> {
        let key = normalise(name);
        let Some(&(offset, size)) = self.entries.get(&key) else {
            return Err(TransportError::NotFound {
                image: self.image.clone(),
                what: format!("{key} is not in archive {}", self.path.display()),
            });
        };
        let io = |source| TransportError::Io {
            image: self.image.clone(),
            path: self.path.clone(),
            source,
        };
        let mut file = File::open(&self.path).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        Ok(Box::new(file.take(size)))
    }

    /// True when the archive has a regular file at `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(&normalise(name))
    }
}

/// `target` relative to `dir`, with `..` applied (never above the archive's top).
fn resolve_relative(dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        dir.split('/').filter(|c| !c.is_empty()).collect()
    };
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_files_and_links_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.tar");
        let mut b = tar::Builder::new(File::create(&path).unwrap());
        let mut h = tar::Header::new_gnu();
        h.set_size(5);
        h.set_mode(0o644);
        b.append_data(&mut h, "./x/one", &b"hello"[..]).unwrap();
        let mut l = tar::Header::new_gnu();
        l.set_entry_type(tar::EntryType::Symlink);
        l.set_size(0);
        b.append_link(&mut l, "y/two", "../x/one").unwrap();
        b.finish().unwrap();
        drop(b);
        let files = TarFiles::open(&path, "test").unwrap();
        let mut s = String::new();
        files
            .open_file("x/one")
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "hello");
        s.clear();
        files
            .open_file("/y/two")
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "hello");
        let err = files.open_file("nope").err().unwrap();
        assert!(err.to_string().contains("nope is not in archive"), "{err}");
    }
}
