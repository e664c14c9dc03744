//! A pod's volumes and an app's mounts of them, as the pod manifest records them, and the
//! command-line grammar they are given in (upstream rkt's):
//! - `--volume=NAME,kind=host,source=/abs/path[,readOnly=true][,recursive=true|false]`: a
//!   directory or file of the host, bind-mounted (with its submounts unless
//!   `recursive=false`);
//! - `--volume=NAME,kind=empty[,mode=0755][,uid=N][,gid=N]`: a directory of the pod's own
//!   (`<pod>/volumes/NAME`), shared by the apps that mount it, gone with the pod;
//! - `--mount=volume=NAME,target=/path`: where an app sees a volume.
//!
//! Only parsing and checking live here; the stage mounts them ([`crate::stage::volumes`]).

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A volume of the pod (`--volume`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The name apps mount it by.
    pub name: String,
    /// What it is.
    #[serde(flatten)]
    pub kind: VolumeKind,
}

/// What a volume is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum VolumeKind {
    /// A path of the host, bind-mounted.
    #[serde(rename_all = "camelCase")]
    Host {
        /// Absolute path on the host (checked to exist when the pod is created).
        source: PathBuf,
        /// `readOnly=true`: the mount, and with `recursive` every mount below it, is
        /// read-only.
        read_only: bool,
        /// The host's mounts below `source` come along (the default).
        recursive: bool,
        /// How mounts made later pass between the host's `source` and the app's copy
        /// (the CRI's mount propagation; rkt's command line sets none). `None`: rkt's own
        /// way, the source cloned in the app's mount namespace, which does not follow the
        /// host. `Some`: a sandbox app's source is cloned in the host's mount namespace
        /// when the app starts, with its submounts, and set so ([`Propagation`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        propagation: Option<Propagation>,
    },
    /// A directory of the pod's own, created empty when the pod starts.
    Empty {
        /// Its permission bits (default 0755).
        mode: u32,
        /// Its owner, as the pod sees it (default 0).
        uid: u32,
        /// Its group, as the pod sees it (default 0).
        gid: u32,
    },
}

/// A host volume's mount propagation (mount_namespaces(7)), the CRI's three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Propagation {
    /// `rprivate`: no mount made later passes either way.
    Private,
    /// `rslave`: mounts the host makes below the source later show in the app, not back;
    /// the source must be on a shared or slave mount of the host.
    Rslave,
    /// `rshared`: both ways; the source must be on a shared mount of the host.
    Rshared,
}

/// An app's mount of a volume (`--mount`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    /// The volume's name.
    pub volume: String,
    /// Where the app sees it: an absolute path inside the app's root, without `..`.
    pub target: String,
}

/// A `--volume` or `--mount` that cannot be used. Every variant names the flag and the
/// word at fault.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("--{flag}={given:?}: {why}")]
    Grammar {
        flag: &'static str,
        given: String,
        why: String,
    },
    #[error("--volume={given:?}: source {source_path}: {error}")]
    Source {
        given: String,
        source_path: PathBuf,
        error: std::io::Error,
    },
    #[error("--volume: the name {name:?} is given twice (a volume name names one volume)")]
    Duplicate { name: String },
    #[error("--mount=volume={volume},... of app {app:?}: no --volume={volume},... declares it (declared: {})", if declared.is_empty() { "none".to_string() } else { declared.join(", ") })]
    Undeclared {
        app: String,
        volume: String,
        declared: Vec<String>,
    },
    #[error("--mount of app {app:?}: target {target} is given twice")]
    DuplicateTarget { app: String, target: String },
}

/// The `key=value` pairs after the name of a `--volume`, or all of a `--mount`'s, in order;
/// a key given twice, an empty key or a pair without `=` is an error naming it.
fn pairs<'a>(
    flag: &'static str,
    given: &str,
    words: impl Iterator<Item = &'a str>,
) -> Result<Vec<(&'a str, &'a str)>, VolumeError> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for word in words {
        let bad = |why: String| VolumeError::Grammar {
            flag,
            given: given.to_string(),
            why,
        };
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| bad(format!("{word:?} is not KEY=VALUE")))?;
        if k.is_empty() {
            return Err(bad(format!("{word:?} has no key")));
        }
        if out.iter().any(|(seen, _)| *seen == k) {
            return Err(bad(format!("key {k:?} is given twice")));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// A volume name: what appc allowed, lower-case letters, digits and `-`, starting with a
/// letter or digit (it also names `<pod>/volumes/NAME`).
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the name {name:?} is not a volume name (lower-case letters, digits and '-', \
             starting with a letter or digit)"
        ))
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{key}={value:?}: expected true or false")),
    }
}

fn parse_id(key: &str, value: &str) -> Result<u32, String> {
    value
        .parse::<u32>()
        .ok()
        .filter(|id| *id < crate::isolation::user_ns::SIZE)
        .ok_or_else(|| {
            format!(
                "{key}={value:?}: expected a number from 0 to {}",
                crate::isolation::user_ns::SIZE - 1
            )
        })
}

fn parse_mode(value: &str) -> Result<u32, String> {
    u32::from_str_radix(value, 8)
        .ok()
        .filter(|m| *m <= 0o7777 && !value.is_empty())
        .ok_or_else(|| format!("mode={value:?}: expected octal permission bits (0 to 7777)"))
}

impl Volume {
    /// Parses one `--volume` value. Does not look at the host: see [`parse_volumes`].
    pub fn parse(given: &str) -> Result<Volume, VolumeError> {
        let bad = |why: String| VolumeError::Grammar {
            flag: "volume",
            given: given.to_string(),
            why,
        };
        let mut words = given.split(',');
        let name = words.next().unwrap_or_default();
        if name.contains('=') {
            return Err(bad(format!(
                "{name:?}: the value starts with the volume's name (NAME,kind=host|empty,...)"
            )));
        }
        check_name(name).map_err(bad)?;
        let pairs = pairs("volume", given, words)?;
        let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let allowed: &[&str] = match get("kind") {
            Some("host") => &["kind", "source", "readOnly", "recursive"],
            Some("empty") => &["kind", "mode", "uid", "gid"],
            Some(other) => return Err(bad(format!("kind={other:?}: expected host or empty"))),
            None => return Err(bad("kind=host or kind=empty is missing".to_string())),
        };
        if let Some((key, _)) = pairs.iter().find(|(k, _)| !allowed.contains(k)) {
            return Err(bad(format!(
                "unknown key {key:?} for this kind (it takes {})",
                allowed[1..].join(", ")
            )));
        }
        let kind = match get("kind") {
            Some("host") => {
                let source = get("source").ok_or_else(|| {
                    bad("source=/ABSOLUTE/PATH is missing (kind=host)".to_string())
                })?;
                if !source.starts_with('/') {
                    return Err(bad(format!(
                        "source={source:?}: the source must be an absolute path"
                    )));
                }
                VolumeKind::Host {
                    source: PathBuf::from(source),
                    read_only: get("readOnly")
                        .map(|v| parse_bool("readOnly", v))
                        .transpose()
                        .map_err(bad)?
                        .unwrap_or(false),
                    propagation: None,
                    recursive: get("recursive")
                        .map(|v| parse_bool("recursive", v))
                        .transpose()
                        .map_err(bad)?
                        .unwrap_or(true),
                }
            }
            _ => VolumeKind::Empty {
                mode: get("mode")
                    .map(parse_mode)
                    .transpose()
                    .map_err(bad)?
                    .unwrap_or(0o755),
                uid: get("uid")
                    .map(|v| parse_id("uid", v))
                    .transpose()
                    .map_err(bad)?
                    .unwrap_or(0),
                gid: get("gid")
                    .map(|v| parse_id("gid", v))
                    .transpose()
                    .map_err(bad)?
                    .unwrap_or(0),
            },
        };
        Ok(Volume {
            name: name.to_string(),
            kind,
        })
    }
}

/// Parses every `--volume`: each as [`Volume::parse`], no name twice, and each host
/// source existing now.
pub fn parse_volumes(given: &[String]) -> Result<Vec<Volume>, VolumeError> {
    let mut volumes: Vec<Volume> = Vec::new();
    for text in given {
        let volume = Volume::parse(text)?;
        if volumes.iter().any(|v| v.name == volume.name) {
            return Err(VolumeError::Duplicate { name: volume.name });
        }
        if let VolumeKind::Host { source, .. } = &volume.kind {
            std::fs::metadata(source).map_err(|error| VolumeError::Source {
                given: text.clone(),
                source_path: source.clone(),
                error,
            })?;
        }
        volumes.push(volume);
    }
    Ok(volumes)
}

impl Mount {
    /// Parses one `--mount` value (`volume=NAME,target=/PATH`, in any order). The target
    /// must be absolute, must not be `/`, and must not hold `..` (it could leave the app's
    /// root); `.` and repeated `/` are dropped.
    pub fn parse(given: &str) -> Result<Mount, VolumeError> {
        let bad = |why: String| VolumeError::Grammar {
            flag: "mount",
            given: given.to_string(),
            why,
        };
        let pairs = pairs("mount", given, given.split(','))?;
        if let Some((key, _)) = pairs
            .iter()
            .find(|(k, _)| !["volume", "target"].contains(k))
        {
            return Err(bad(format!(
                "unknown key {key:?} (it takes volume and target)"
            )));
        }
        let get = |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let volume = get("volume").ok_or_else(|| bad("volume=NAME is missing".to_string()))?;
        check_name(volume).map_err(bad)?;
        let target = get("target").ok_or_else(|| bad("target=/PATH is missing".to_string()))?;
        let target = clean_target(target).map_err(bad)?;
        Ok(Mount {
            volume: volume.to_string(),
            target,
        })
    }

    /// The target as a path relative to the app's root (`/var/lib/x` → `var/lib/x`).
    pub fn relative_target(&self) -> &Path {
        Path::new(self.target.trim_start_matches('/'))
    }
}

/// `target` made canonical in form (no `.`, no repeated or trailing `/`), or why it cannot
/// be a mount target.
fn clean_target(target: &str) -> Result<String, String> {
    if !target.starts_with('/') {
        return Err(format!(
            "target={target:?}: the target must be an absolute path in the app's root"
        ));
    }
    let mut parts = Vec::new();
    for part in Path::new(target).components() {
        match part {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!(
                    "target={target:?}: '..' could leave the app's root; give the path without it"
                ))
            }
        }
    }
    if parts.is_empty() {
        return Err(format!(
            "target={target:?}: a volume cannot be mounted over the app's root"
        ));
    }
    if parts[0] == "proc" {
        return Err(format!(
            "target={target:?}: /proc is the pod's own (mounted after the volumes, it would hide this one)"
        ));
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Checks app `app`'s mounts against the pod's volumes: each names a declared volume, and
/// no target is given twice.
pub fn check_mounts(volumes: &[Volume], app: &str, mounts: &[Mount]) -> Result<(), VolumeError> {
    for (i, mount) in mounts.iter().enumerate() {
        if !volumes.iter().any(|v| v.name == mount.volume) {
            return Err(VolumeError::Undeclared {
                app: app.to_string(),
                volume: mount.volume.clone(),
                declared: volumes.iter().map(|v| v.name.clone()).collect(),
            });
        }
        if mounts[..i].iter().any(|m| m.target == mount.target) {
            return Err(VolumeError::DuplicateTarget {
                app: app.to_string(),
                target: mount.target.clone(),
            });
        }
    }
    Ok(())
}

/// The names of the volumes no mount in `mounts` uses (allowed, as in rkt; worth a note).
pub fn unused<'a>(volumes: &'a [Volume], mounts: &[&Mount]) -> Vec<&'a str> {
    volumes
        .iter()
        .filter(|v| !mounts.iter().any(|m| m.volume == v.name))
        .map(|v| v.name.as_str())
        .collect()
}

/// The directory of empty volume `name` in the pod directory `pod_dir`.
pub fn empty_dir(pod_dir: &Path, name: &str) -> PathBuf {
    pod_dir.join("volumes").join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(given: &str) -> String {
        Volume::parse(given).unwrap_err().to_string()
    }

    fn mount_err(given: &str) -> String {
        Mount::parse(given).unwrap_err().to_string()
    }

    #[test]
    fn host_volumes_parse_with_rkt_defaults() {
        let v = Volume::parse("data,kind=host,source=/srv/data").unwrap();
        assert_eq!(v.name, "data");
        assert_eq!(
            v.kind,
            VolumeKind::Host {
                source: PathBuf::from("/srv/data"),
                read_only: false,
                recursive: true,
                propagation: None,
            }
        );
        let v = Volume::parse("d,source=/x,recursive=false,kind=host,readOnly=true").unwrap();
        assert_eq!(
            v.kind,
            VolumeKind::Host {
                source: PathBuf::from("/x"),
                read_only: true,
                recursive: false,
                propagation: None,
            }
        );
    }

    #[test]
    fn empty_volumes_parse_mode_uid_gid() {
        let v = Volume::parse("scratch,kind=empty").unwrap();
        assert_eq!(
            v.kind,
            VolumeKind::Empty {
                mode: 0o755,
                uid: 0,
                gid: 0
            }
        );
        let v = Volume::parse("s,kind=empty,mode=1777,uid=1000,gid=100").unwrap();
        assert_eq!(
            v.kind,
            VolumeKind::Empty {
                mode: 0o1777,
                uid: 1000,
                gid: 100
            }
        );
    }

    #[test]
    fn each_volume_mistake_names_the_word_at_fault() {
        for (given, word) in [
            ("", "the name \"\""),
            ("Data,kind=host,source=/x", "\"Data\""),
            ("kind=host,source=/x", "\"kind=host\""),
            ("d", "kind=host or kind=empty is missing"),
            ("d,kind=hots,source=/x", "kind=\"hots\""),
            ("d,kind=host", "source=/ABSOLUTE/PATH is missing"),
            ("d,kind=host,source=rel/dir", "source=\"rel/dir\""),
            (
                "d,kind=host,source=/x,readonly=true",
                "unknown key \"readonly\"",
            ),
            ("d,kind=host,source=/x,mode=0755", "unknown key \"mode\""),
            ("d,kind=empty,source=/x", "unknown key \"source\""),
            ("d,kind=host,source=/x,readOnly=yes", "readOnly=\"yes\""),
            ("d,kind=host,source=/x,recursive=1", "recursive=\"1\""),
            (
                "d,kind=host,source=/x,source=/y",
                "key \"source\" is given twice",
            ),
            ("d,kind=host,kind=empty", "key \"kind\" is given twice"),
            ("d,kind=empty,mode=0999", "mode=\"0999\""),
            ("d,kind=empty,mode=", "mode=\"\""),
            ("d,kind=empty,mode=17777", "mode=\"17777\""),
            ("d,kind=empty,uid=-1", "uid=\"-1\""),
            ("d,kind=empty,uid=65536", "uid=\"65536\""),
            ("d,kind=empty,gid=x", "gid=\"x\""),
            ("d,kind=empty,oops", "\"oops\" is not KEY=VALUE"),
            ("d,kind=empty,=1", "\"=1\" has no key"),
        ] {
            let msg = err(given);
            assert!(msg.starts_with("--volume="), "{given}: {msg}");
            assert!(msg.contains(word), "{given}: {msg} should name {word}");
        }
    }

    #[test]
    fn volumes_are_unique_and_host_sources_must_exist() {
        let given = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let all = parse_volumes(&given(&["a,kind=host,source=/", "b,kind=empty"])).unwrap();
        assert_eq!(all.len(), 2);
        let e = parse_volumes(&given(&["a,kind=empty", "a,kind=host,source=/"])).unwrap_err();
        assert!(e.to_string().contains("\"a\" is given twice"), "{e}");
        let e = parse_volumes(&given(&["m,kind=host,source=/no/such/rkt-volume"])).unwrap_err();
        assert!(
            e.to_string()
                .contains("source /no/such/rkt-volume: No such file"),
            "{e}"
        );
    }

    #[test]
    fn mounts_parse_and_targets_stay_in_the_root() {
        let m = Mount::parse("volume=data,target=/var//lib/./data/").unwrap();
        assert_eq!(m.volume, "data");
        assert_eq!(m.target, "/var/lib/data");
        assert_eq!(m.relative_target(), Path::new("var/lib/data"));
        let m = Mount::parse("target=/x,volume=v").unwrap();
        assert_eq!((m.volume.as_str(), m.target.as_str()), ("v", "/x"));
        for (given, word) in [
            ("volume=data", "target=/PATH is missing"),
            ("target=/x", "volume=NAME is missing"),
            ("volume=d,target=rel", "target=\"rel\""),
            ("volume=d,target=/a/../../etc", "'..'"),
            ("volume=d,target=/", "over the app's root"),
            ("volume=d,target=/proc/x", "/proc"),
            (
                "volume=d,target=/x,readOnly=true",
                "unknown key \"readOnly\"",
            ),
            (
                "volume=d,volume=e,target=/x",
                "key \"volume\" is given twice",
            ),
            ("volume=D,target=/x", "\"D\""),
            ("data:/x", "\"data:/x\" is not KEY=VALUE"),
        ] {
            let msg = mount_err(given);
            assert!(msg.starts_with("--mount="), "{given}: {msg}");
            assert!(msg.contains(word), "{given}: {msg} should name {word}");
        }
    }

    #[test]
    fn mounts_must_name_declared_volumes_once_per_target() {
        let volumes = vec![Volume::parse("data,kind=empty").unwrap()];
        let ok = [Mount::parse("volume=data,target=/a").unwrap()];
        check_mounts(&volumes, "web", &ok).unwrap();
        let undeclared = [Mount::parse("volume=logs,target=/l").unwrap()];
        let e = check_mounts(&volumes, "web", &undeclared).unwrap_err();
        assert!(
            e.to_string()
                .contains("--mount=volume=logs,... of app \"web\": no --volume=logs"),
            "{e}"
        );
        assert!(e.to_string().contains("(declared: data)"), "{e}");
        let twice = [
            ok[0].clone(),
            Mount::parse("volume=data,target=/a/").unwrap(),
        ];
        let e = check_mounts(&volumes, "web", &twice).unwrap_err();
        assert!(e.to_string().contains("target /a is given twice"), "{e}");
        assert_eq!(unused(&volumes, &[]), ["data"]);
        assert!(unused(&volumes, &[&ok[0]]).is_empty());
    }

    #[test]
    fn volumes_round_trip_through_json_in_rkt_s_words() {
        let volumes = vec![
            Volume::parse("h,kind=host,source=/srv,readOnly=true").unwrap(),
            Volume::parse("e,kind=empty,mode=0700,uid=5").unwrap(),
        ];
        let text = serde_json::to_string(&volumes).unwrap();
        assert!(text.contains(r#""kind":"host""#), "{text}");
        assert!(text.contains(r#""readOnly":true"#), "{text}");
        let back: Vec<Volume> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, volumes);
    }
}
