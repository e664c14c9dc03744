//! Registry credentials in rkt's format: `auth.d/*.json` files in the system, local and user
//! configuration directories, each `{"rktKind": "dockerAuth", "rktVersion": "v1",
//! "registries": ["HOST[:PORT]", …], "credentials": {"user": …, "password": …}}`. Layered
//! like `paths.d`: for a registry named in several files, the user directory wins over the
//! local one, which wins over the system one; within a directory, the last file by name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ConfigDirs;

/// What is wrong with an `auth.d` file; each names it.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not valid JSON", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// A user name and password for one registry, and the file they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerAuth {
    pub user: String,
    pub password: String,
    pub origin: PathBuf,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthFile {
    rkt_kind: String,
    rkt_version: String,
    #[serde(default)]
    registries: Vec<String>,
    credentials: Option<Credentials>,
}

#[derive(serde::Deserialize)]
struct Credentials {
    user: String,
    password: String,
}

/// The `dockerAuth` credentials of every registry, by host. Files of other kinds (rkt's
/// `auth` for image hosts) are skipped; a file that cannot be read or parsed is an error.
pub fn load_docker_auth(dirs: &ConfigDirs) -> Result<BTreeMap<String, DockerAuth>, AuthError> {
    let mut out = BTreeMap::new();
    let layers = [Some(&dirs.system), Some(&dirs.local), dirs.user.as_ref()];
    for dir in layers.into_iter().flatten() {
        for path in json_files(&dir.join("auth.d"))? {
            let bytes = std::fs::read(&path).map_err(|source| AuthError::Read {
                path: path.clone(),
                source,
            })?;
            let file: AuthFile =
                serde_json::from_slice(&bytes).map_err(|source| AuthError::Parse {
                    path: path.clone(),
                    source,
                })?;
            if file.rkt_kind != "dockerAuth" {
                continue;
            }
            let invalid = |reason: String| AuthError::Invalid {
                path: path.clone(),
                reason,
            };
            if file.rkt_version != "v1" {
                return Err(invalid(format!(
                    "rktVersion {:?} is not supported (v1 is)",
                    file.rkt_version
                )));
            }
            let creds = file
                .credentials
                .ok_or_else(|| invalid("no \"credentials\"".into()))?;
            if file.registries.is_empty() {
                return Err(invalid("no \"registries\"".into()));
            }
            for registry in file.registries {
                out.insert(
                    registry,
                    DockerAuth {
                        user: creds.user.clone(),
                        password: creds.password.clone(),
                        origin: path.clone(),
                    },
                );
            }
        }
    }
    Ok(out)
}

/// The `*.json` files of `dir`, sorted by name; none when it does not exist.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, AuthError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(AuthError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, body: &str) {
        std::fs::create_dir_all(dir.join("auth.d")).unwrap();
        std::fs::write(dir.join("auth.d").join(name), body).unwrap();
    }

    fn docker_auth(host: &str, user: &str) -> String {
        format!(
            r#"{{"rktKind":"dockerAuth","rktVersion":"v1","registries":["{host}"],
               "credentials":{{"user":"{user}","password":"pw-{user}"}}}}"#
        )
    }

    #[test]
    fn layers_user_over_local_over_system() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = ConfigDirs {
            system: tmp.path().join("system"),
            local: tmp.path().join("local"),
            user: Some(tmp.path().join("user")),
        };
        write(&dirs.system, "a.json", &docker_auth("r1:5000", "sys"));
        write(&dirs.system, "b.json", &docker_auth("r2", "sys"));
        write(&dirs.local, "a.json", &docker_auth("r1:5000", "local"));
        write(
            dirs.user.as_ref().unwrap(),
            "x.json",
            &docker_auth("r2", "user"),
        );
        write(
            &dirs.local,
            "other.json",
            r#"{"rktKind":"auth","rktVersion":"v1","domains":["x"],"type":"basic"}"#,
        );
        let auth = load_docker_auth(&dirs).unwrap();
        assert_eq!(auth.len(), 2);
        assert_eq!(auth["r1:5000"].user, "local");
        assert_eq!(auth["r1:5000"].password, "pw-local");
        assert_eq!(auth["r2"].user, "user");
        assert!(auth["r2"].origin.ends_with("user/auth.d/x.json"));
    }

    #[test]
    fn errors_name_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = ConfigDirs {
            system: tmp.path().join("system"),
            local: tmp.path().join("local"),
            user: None,
        };
        write(&dirs.local, "bad.json", "{");
        let err = load_docker_auth(&dirs).unwrap_err().to_string();
        assert!(err.contains("local/auth.d/bad.json"), "{err}");
        write(
            &dirs.local,
            "bad.json",
            r#"{"rktKind":"dockerAuth","rktVersion":"v1","registries":["r"]}"#,
        );
        let err = load_docker_auth(&dirs).unwrap_err().to_string();
        assert!(
            err.contains("bad.json") && err.contains("credentials"),
            "{err}"
        );
    }
}
