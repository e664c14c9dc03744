//! The app's identity: `--user=UID|NAME`, `--group=GID|NAME`, `--supplementary-gids`.
//!
//! Names are looked up in the app's own root filesystem's `/etc/passwd` and `/etc/group`
//! (the image's, `--rootfs`'s, or the host's for a host-command pod; found by the caller,
//! see `image_pod::user::accounts`) when the flags are parsed, and recorded as numbers. A user given without a group gets its primary group from
//! `passwd` (0 when the number is not listed there, as Docker does). The switch happens
//! in the app's process before `execve` (see [`super::apply`]): supplementary groups,
//! group, then user. A non-root app loses its capabilities the way the kernel drops them
//! at `setuid` and `execve`, unless `--caps-retain` names them: those it keeps as ambient
//! capabilities.
//!
//! The one reader of `passwd` and `group` files ([`read_passwd`], [`read_group`]): the
//! image's `User` is resolved with it too (`image_pod::user`).

use std::path::Path;

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

/// The users and groups names are looked up in: one root filesystem's `/etc/passwd` and
/// `/etc/group` (the caller finds them inside that root), and whose they are, for errors
/// (`image busybox`, `/srv/root`, `the host`).
#[derive(Debug, Clone, Default)]
pub struct Accounts {
    pub whose: String,
    pub passwd: Vec<PasswdEntry>,
    pub groups: Vec<GroupEntry>,
}

impl Accounts {
    /// The entries of the files `passwd` and `group` (`None`, or unreadable: no entries).
    pub fn read(whose: String, passwd: Option<&Path>, group: Option<&Path>) -> Accounts {
        Accounts {
            whose,
            passwd: passwd.map(read_passwd).unwrap_or_default(),
            groups: group.map(read_group).unwrap_or_default(),
        }
    }
}

/// Whether any of the three flags is given (and so [`resolve`] needs the [`Accounts`]).
pub fn any_given(user: Option<&str>, group: Option<&str>, supplementary: Option<&str>) -> bool {
    user.is_some() || group.is_some() || supplementary.is_some()
}

/// Parses the three flags, names looked up in `accounts`; `None` when none is given.
pub fn resolve(
    accounts: &Accounts,
    user: Option<&str>,
    group: Option<&str>,
    supplementary: Option<&str>,
) -> Result<Option<Identity>, IsolationError> {
    if !any_given(user, group, supplementary) {
        return Ok(None);
    }
    let (uid, primary) = match user {
        Some(text) => lookup_user(accounts, text)?,
        None => (0, Some(0)),
    };
    let gid = match group {
        Some(text) => lookup_group(accounts, text, "--group")?,
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
fn lookup_user(accounts: &Accounts, text: &str) -> Result<(u32, Option<u32>), IsolationError> {
    let users = &accounts.passwd;
    if let Ok(uid) = text.parse::<u32>() {
        let primary = users.iter().find(|u| u.uid == uid).and_then(|u| u.gid);
        return Ok((uid, primary));
    }
    let found = users.iter().find(|u| u.name == text);
    found
        .map(|u| (u.uid, u.gid))
        .ok_or_else(|| IsolationError::BadValue {
            flag: "--user",
            value: text.to_string(),
            why: format!("no such user in {}'s /etc/passwd", accounts.whose),
        })
}

/// The number of `text` (a number, or a group's name in `group`).
fn lookup_group(
    accounts: &Accounts,
    text: &str,
    flag: &'static str,
) -> Result<u32, IsolationError> {
    if let Ok(n) = text.parse::<u32>() {
        return Ok(n);
    }
    let found = accounts.groups.iter().find(|g| g.name == text);
    found
        .map(|g| g.gid)
        .ok_or_else(|| IsolationError::BadValue {
            flag,
            value: text.to_string(),
            why: format!("no such group in {}'s /etc/group", accounts.whose),
        })
}

/// One `passwd` line: `name:password:uid:gid:gecos:home:shell`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    /// The primary group, when the line gives a number.
    pub gid: Option<u32>,
    /// The home directory (empty when the line has none).
    pub home: String,
}

/// One `group` line: `name:password:gid:member,member`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The entries of a `passwd` file; none when it cannot be read. Comments and lines without
/// a numeric uid are skipped.
pub fn read_passwd(file: &Path) -> Vec<PasswdEntry> {
    fields(file)
        .into_iter()
        .filter_map(|f| {
            Some(PasswdEntry {
                uid: f.get(2)?.parse().ok()?,
                gid: f.get(3)?.parse().ok(),
                home: f.get(5).cloned().unwrap_or_default(),
                name: f.into_iter().next()?,
            })
        })
        .collect()
}

/// The entries of a `group` file; none when it cannot be read. Comments and lines without
/// a numeric gid are skipped.
pub fn read_group(file: &Path) -> Vec<GroupEntry> {
    fields(file)
        .into_iter()
        .filter_map(|f| {
            Some(GroupEntry {
                gid: f.get(2)?.parse().ok()?,
                members: f
                    .get(3)
                    .map(|m| {
                        m.split(',')
                            .filter(|m| !m.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                name: f.into_iter().next()?,
            })
        })
        .collect()
}

/// The colon-separated fields of each non-comment line of `file`.
fn fields(file: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(':').map(str::to_string).collect())
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

    fn accounts(root: &Path) -> Accounts {
        Accounts::read(
            "image test".into(),
            Some(&root.join("etc/passwd")),
            Some(&root.join("etc/group")),
        )
    }

    #[test]
    fn names_resolve_in_the_root_and_numbers_stand() {
        let r = root();
        let id = resolve(&accounts(r.path()), Some("app"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!((id.uid, id.gid), (1234, 2345));
        let id = resolve(&accounts(r.path()), Some("app"), Some("grp"), Some("7,8"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (id.uid, id.gid, id.supplementary_gids),
            (1234, 3456, vec![7, 8])
        );
        let id = resolve(&accounts(r.path()), Some("1234"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(id.gid, 2345);
        let id = resolve(&accounts(r.path()), Some("99"), None, None)
            .unwrap()
            .unwrap();
        assert_eq!((id.uid, id.gid), (99, 0));
        assert_eq!(
            resolve(&accounts(r.path()), None, None, None).unwrap(),
            None
        );
    }

    #[test]
    fn unknown_names_are_errors_naming_name_and_file() {
        let r = root();
        let e = resolve(&accounts(r.path()), Some("ghost"), None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--user=ghost: no such user in image test's /etc/passwd"),
            "{e}"
        );
        let e = resolve(&accounts(r.path()), None, Some("nogrp"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--group=nogrp: no such group in image test's /etc/group"),
            "{e}"
        );
        let e = resolve(&accounts(r.path()), None, None, Some("1,x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--supplementary-gids=x"), "{e}");
    }

    #[test]
    fn the_readers_skip_comments_and_lines_without_numbers() {
        let r = root();
        std::fs::write(
            r.path().join("etc/group"),
            "# c\nroot:x:0:\nbad:x:no:\ngrp:x:3456:app,,web\nshort:x:7\n",
        )
        .unwrap();
        let users = read_passwd(&r.path().join("etc/passwd"));
        let names: Vec<_> = users
            .iter()
            .map(|u| (u.name.as_str(), u.uid, u.gid))
            .collect();
        assert_eq!(names, [("root", 0, Some(0)), ("app", 1234, Some(2345))]);
        let groups = read_group(&r.path().join("etc/group"));
        let names: Vec<_> = groups.iter().map(|g| (g.name.as_str(), g.gid)).collect();
        assert_eq!(names, [("root", 0), ("grp", 3456), ("short", 7)]);
        assert_eq!(groups[1].members, ["app", "web"]);
        assert!(read_passwd(&r.path().join("etc/missing")).is_empty());
    }
}
