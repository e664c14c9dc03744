//! The app's identity: `--user=UID|NAME`, `--group=GID|NAME`, `--supplementary-gids`.
//!
//! Names are looked up in the pod's root filesystem (`<rootfs>/etc/passwd` and
//! `<rootfs>/etc/group`, or the host's for a host-command pod) when the flags are parsed,
//! and recorded as numbers. A user given without a group gets its primary group from
//! `passwd` (0 when the number is not listed there, as Docker does). The switch happens
//! in the app's process before `execve` (see [`super::apply`]): supplementary groups,
//! group, then user. A non-root app loses its capabilities the way the kernel drops them
//! at `setuid` and `execve`, unless `--caps-retain` names them: those it keeps as ambient
//! capabilities.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::IsolationError;

/// The identity the app runs as; all `None`/empty: root, with rkt's own groups cleared
/// only when something was given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supplementary_gids: Vec<u32>,
}

impl Identity {
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// Parses the three flags against the root filesystem `root`; `None` when none is given.
pub fn resolve(
    root: &Path,
    user: Option<&str>,
    group: Option<&str>,
    supplementary: Option<&str>,
) -> Result<Option<Identity>, IsolationError> {
    if user.is_none() && group.is_none() && supplementary.is_none() {
        return Ok(None);
    }
    let passwd = root.join("etc/passwd");
    let groups = root.join("etc/group");
    let (uid, primary) = match user {
        Some(text) => lookup_user(&passwd, text)?,
        None => (0, Some(0)),
    };
    let gid = match group {
        Some(text) => lookup(&groups, text, 2, "--group")?,
        None => primary.unwrap_or(0),
    };
    let supplementary_gids = match supplementary {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(|g| {
                g.parse::<u32>().map_err(|_| IsolationError::BadValue {
                    flag: "--supplementary-gids",
                    value: g.to_string(),
                    why: "not a number".into(),
                })
            })
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    Ok(Some(Identity {
        uid,
        gid,
        supplementary_gids,
    }))
}

/// A user's number and primary group (when `passwd` lists it).
fn lookup_user(passwd: &Path, text: &str) -> Result<(u32, Option<u32>), IsolationError> {
    let entries = read_entries(passwd);
    let row = |pred: &dyn Fn(&[&str]) -> bool| {
        entries
            .iter()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() > 3 && pred(f))
            .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok())))
    };
    if let Ok(uid) = text.parse::<u32>() {
        let primary = row(&|f| f[2] == text).and_then(|(_, g)| g);
        return Ok((uid, primary));
    }
    row(&|f| f[0] == text).ok_or_else(|| IsolationError::BadValue {
        flag: "--user",
        value: text.to_string(),
        why: format!("no such user in {}", passwd.display()),
    })
}

/// The number of `text` (a number, or a name in column 0 of `file`, number in `column`).
fn lookup(
    file: &Path,
    text: &str,
    column: usize,
    flag: &'static str,
) -> Result<u32, IsolationError> {
    if let Ok(n) = text.parse::<u32>() {
        return Ok(n);
    }
    read_entries(file)
        .iter()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > column && f[0] == text)
        .and_then(|f| f[column].parse().ok())
        .ok_or_else(|| IsolationError::BadValue {
            flag,
            value: text.to_string(),
            why: format!("no such group in {}", file.display()),
        })
}

/// The non-comment lines of `file` (none when it cannot be read).
fn read_entries(file: &Path) -> Vec<String> {
    std::fs::read_to_string(PathBuf::from(file))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\n# comment\napp:x:1234:2345::/:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("etc/group"), "root:x:0:\ngrp:x:3456:app\n").unwrap();
        dir
    }

    #[test]
    fn names_resolve_in_the_root_and_numbers_stand() {
        let r = root();
        let id = resolve(r.path(), Some("app"), None, None).unwrap().unwrap();
        assert_eq!((id.uid, id.gid), (1234, 2345));
        let id = resolve(r.path(), Some("app"), Some("grp"), Some("7,8"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (id.uid, id.gid, id.supplementary_gids),
            (1234, 3456, vec![7, 8])
        );
        let id = resolve(r.path(), Some("1234"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(id.gid, 2345);
        let id = resolve(r.path(), Some("99"), None, None).unwrap().unwrap();
        assert_eq!((id.uid, id.gid), (99, 0));
        assert_eq!(resolve(r.path(), None, None, None).unwrap(), None);
    }

    #[test]
    fn unknown_names_are_errors_naming_name_and_file() {
        let r = root();
        let e = resolve(r.path(), Some("ghost"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--user=ghost") && e.contains("etc/passwd"),
            "{e}"
        );
        let e = resolve(r.path(), None, Some("nogrp"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--group=nogroup") || e.contains("--group=nogrp"),
            "{e}"
        );
        let e = resolve(r.path(), None, None, Some("1,x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--supplementary-gids=x"), "{e}");
    }
}
