//! The image's `User` (`uid`, `uid:gid`, `name`, `name:group`, or mixed), resolved to the
//! IDs the app runs with: names are looked up in the pod's own `/etc/passwd` and
//! `/etc/group` (read by the pod's init after it entered the root filesystem, so a symlink
//! there resolves inside the pod), as Docker and rkt's docker2aci did. A user without a
//! group gets the primary group of its passwd entry (0 when it has none); supplementary
//! groups are the `/etc/group` entries that list the user's name. The files are read by
//! [`crate::isolation::user`], which resolves `--user`/`--group` too.

use std::path::{Path, PathBuf};

use crate::isolation::user::{read_group, read_passwd};

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
