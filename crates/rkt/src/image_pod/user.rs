//! The image's `User` (`uid`, `uid:gid`, `name`, `name:group`, or mixed), resolved to the
//! IDs the app runs with: names are looked up in the pod's own `/etc/passwd` and
//! `/etc/group` (read by the pod's init after it entered the root filesystem, so a symlink
//! there resolves inside the pod), as Docker and rkt's docker2aci did. A user without a
//! group gets the primary group of its passwd entry (0 when it has none); supplementary
//! groups are the `/etc/group` entries that list the user's name. The files are read by
//! [`crate::isolation::user`], which resolves `--user`/`--group` too.
//!
//! `--user`/`--group` names are resolved earlier, when the flags are parsed, before any pod
//! exists: [`accounts`] finds the app's own `/etc/passwd` and `/etc/group` — an image's in
//! its unpacked layers, merged as the pod's overlay will show them
//! ([`image::merged::merged_file`], symlinks followed inside the image), a `--rootfs`
//! directory's inside it, the host's for a host-command pod.

use std::path::{Path, PathBuf};

use image::merged::merged_file;
use image::unpack::UnpackError;
use image::{ImageRecord, Store};

use crate::isolation::user::{read_group, read_passwd, Accounts};

/// The root filesystem an app's `--user`/`--group` names are looked up in.
#[derive(Clone, Copy)]
pub enum AppRoot<'a> {
    /// A host-command pod's, the host's own.
    Host,
    /// `--rootfs=DIR`.
    Dir(&'a Path),
    /// An image's layers (the store's unpacked copies); `name` as the user gave it.
    Image {
        store: &'a Store,
        record: &'a ImageRecord,
        name: &'a str,
    },
}

/// The users and groups of `root`, read from its own `/etc/passwd` and `/etc/group` (none
/// when it has no such file). An image's layers are unpacked in the store if they are not
/// yet (the pod's overlay needs them anyway).
pub fn accounts(root: AppRoot<'_>) -> Result<Accounts, UserError> {
    let (whose, layers) = match root {
        AppRoot::Host => {
            return Ok(Accounts::read(
                "the host".into(),
                Some(Path::new("/etc/passwd")),
                Some(Path::new("/etc/group")),
            ))
        }
        AppRoot::Dir(dir) => (dir.display().to_string(), vec![dir.to_path_buf()]),
        AppRoot::Image {
            store,
            record,
            name,
        } => {
            let layers =
                image::layers::layer_dirs(store, record).map_err(|source| UserError::Layers {
                    image: name.to_string(),
                    source: Box::new(source),
                })?;
            (format!("image {name}"), layers)
        }
    };
    let find = |file: &str| {
        merged_file(&layers, Path::new(file)).map_err(|source| UserError::Read {
            whose: whose.clone(),
            file: file.to_string(),
            source,
        })
    };
    let (passwd, group) = (find("etc/passwd")?, find("etc/group")?);
    Ok(Accounts::read(whose, passwd.as_deref(), group.as_deref()))
}

/// Why the image's user could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("the image's User {spec:?}: user {name:?} is not in the pod's {}", path.display())]
    UnknownUser {
        spec: String,
        name: String,
        path: PathBuf,
    },
    #[error("the image's User {spec:?}: group {name:?} is not in the pod's {}", path.display())]
    UnknownGroup {
        spec: String,
        name: String,
        path: PathBuf,
    },
    #[error("the image's User {spec:?}: empty user")]
    Empty { spec: String },
    #[error("cannot read /{file} of {whose}")]
    Read {
        whose: String,
        file: String,
        source: std::io::Error,
    },
    #[error("cannot unpack the layers of image {image} to look up --user/--group")]
    Layers {
        image: String,
        source: Box<UnpackError>,
    },
}

/// The IDs the app runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the primary group not repeated).
    pub groups: Vec<u32>,
    /// The passwd entry's home directory, when the user has one.
    pub home: Option<String>,
}

/// Resolves `spec` against the files in `etc` (normally `/etc` inside the pod). A missing
/// file holds no entries: numeric IDs still work.
pub fn resolve(spec: &str, etc: &Path) -> Result<Credentials, UserError> {
    let passwd_path = etc.join("passwd");
    let group_path = etc.join("group");
    let passwd = read_passwd(&passwd_path);
    let groups = read_group(&group_path);
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if user.is_empty() {
        return Err(UserError::Empty {
            spec: spec.to_string(),
        });
    }
    let entry =
        match user.parse::<u32>() {
            Ok(uid) => passwd.iter().find(|p| p.uid == uid),
            Err(_) => Some(passwd.iter().find(|p| p.name == user).ok_or_else(|| {
                UserError::UnknownUser {
                    spec: spec.to_string(),
                    name: user.to_string(),
                    path: passwd_path.clone(),
                }
            })?),
        };
    let uid = user
        .parse::<u32>()
        .unwrap_or_else(|_| entry.map_or(0, |e| e.uid));
    let gid = match group {
        Some(g) if !g.is_empty() => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => groups
                .iter()
                .find(|e| e.name == g)
                .map(|e| e.gid)
                .ok_or_else(|| UserError::UnknownGroup {
                    spec: spec.to_string(),
                    name: g.to_string(),
                    path: group_path.clone(),
                })?,
        },
        _ => entry.and_then(|e| e.gid).unwrap_or(0),
    };
    let mut supplementary = Vec::new();
    if let Some(e) = entry {
        for g in &groups {
            if g.gid != gid && g.members.contains(&e.name) && !supplementary.contains(&g.gid) {
                supplementary.push(g.gid);
            }
        }
    }
    Ok(Credentials {
        uid,
        gid,
        groups: supplementary,
        home: entry.map(|e| e.home.clone()).filter(|h| !h.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etc() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("passwd"),
            "root:x:0:0:root:/root:/bin/sh\nweb:x:1001:1002:Web:/srv/web:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("group"),
            "root:x:0:\nweb:x:1002:\nlogs:x:1003:other,web\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn names_and_numbers_resolve_in_the_pods_files() {
        let etc = etc();
        let web = resolve("web", etc.path()).unwrap();
        assert_eq!(
            (web.uid, web.gid, web.groups.clone()),
            (1001, 1002, vec![1003])
        );
        assert_eq!(web.home.as_deref(), Some("/srv/web"));
        let mixed = resolve("1001:logs", etc.path()).unwrap();
        assert_eq!((mixed.uid, mixed.gid, mixed.groups), (1001, 1003, vec![]));
        let numeric = resolve("4242:4343", etc.path()).unwrap();
        assert_eq!((numeric.uid, numeric.gid), (4242, 4343));
        // A uid without an entry has group 0, as in Docker.
        assert_eq!(resolve("4242", etc.path()).unwrap().gid, 0);
    }

    #[test]
    fn unknown_names_are_errors_naming_the_file() {
        let etc = etc();
        let err = resolve("nobody", etc.path()).unwrap_err().to_string();
        assert!(
            err.contains("\"nobody\"") && err.contains("passwd"),
            "{err}"
        );
        let err = resolve("web:nogroup", etc.path()).unwrap_err().to_string();
        assert!(
            err.contains("\"nogroup\"") && err.contains("group"),
            "{err}"
        );
        assert!(resolve(":1", etc.path()).is_err());
    }
}
