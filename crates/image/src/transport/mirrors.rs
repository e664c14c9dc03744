//! Registry mirrors in containerd's `hosts.toml` layout: for an image of registry `HOST`, the
//! file `<dir>/HOST/hosts.toml` (or `<dir>/_default/hosts.toml` when it has none) lists the
//! hosts to ask, in order, before the registry itself:
//!
//! ```toml
//! server = "https://registry.k8s.io"          # the registry itself, tried last
//!
//! [host."http://127.0.0.1:5000"]              # a mirror, tried first
//!   capabilities = ["pull", "resolve"]
//! ```
//!
//! A mirror serves the same repository paths as the registry (`/v2/<repository>/...`); the
//! image keeps the name it was asked by. A host is used for a pull when its `capabilities`
//! (default: all) hold `pull` and, for a tag (which must be resolved to a manifest),
//! `resolve`. `server` defaults to the registry's own HTTPS address. A URL's scheme says
//! whether it is plain HTTP; its path may be empty or `/v2` (no other prefix is supported).
//! Keys this reader does not use (`ca`, `skip_verify`, `header`, ...) are refused by name
//! rather than ignored, so that a setting never silently does nothing.

use std::path::{Path, PathBuf};

use crate::reference::DockerRef;

/// One place to ask for an image: a host (and port), over HTTPS or plain HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host[:port]`.
    pub host: String,
    /// Plain HTTP instead of HTTPS.
    pub plain_http: bool,
}

/// A `hosts.toml` that cannot be used; names the file.
#[derive(Debug, thiserror::Error)]
#[error("registry hosts file {path}: {reason}")]
pub struct MirrorError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// The file that configures `host`'s mirrors: the first of `dirs` that has
/// `HOST/hosts.toml`, else the first that has `_default/hosts.toml`.
pub fn hosts_file(dirs: &[PathBuf], host: &str) -> Option<PathBuf> {
    let find = |name: &str| {
        dirs.iter()
            .map(|d| d.join(name).join("hosts.toml"))
            .find(|f| f.is_file())
    };
    find(host).or_else(|| find("_default"))
}

/// The endpoints to ask for `reference`, in order: the mirrors that `dirs` configure for
/// its registry, then the registry itself. `plain_http` is how the registry itself is
/// reached when no `server` says otherwise. Without a file: the registry alone.
pub fn endpoints(
    dirs: &[PathBuf],
    reference: &DockerRef,
    plain_http: bool,
) -> Result<Vec<Endpoint>, MirrorError> {
    let own = Endpoint {
        host: reference.api_host().to_string(),
        plain_http,
    };
    match hosts_file(dirs, &reference.host) {
        None => Ok(vec![own]),
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| MirrorError {
                path: path.clone(),
                reason: format!("cannot read it: {e}"),
            })?;
            let is_tag = matches!(reference.target, crate::reference::Target::Tag(_));
            parse(&path, &text, own, is_tag)
        }
    }
}

/// The endpoints a `hosts.toml` (read from `path`) gives, `own` being the registry's when
/// it names no `server`; `is_tag`: the image is named by a tag (hosts need `resolve`).
pub fn parse(
    path: &Path,
    text: &str,
    own: Endpoint,
    is_tag: bool,
) -> Result<Vec<Endpoint>, MirrorError> {
    let err = |reason: String| MirrorError {
        path: path.to_path_buf(),
        reason,
    };
    let doc: toml::Table = text.parse().map_err(|e| err(format!("not TOML: {e}")))?;
    let mut out = Vec::new();
    let mut server = own;
    for (key, value) in &doc {
        match key.as_str() {
            "server" => {
                let url = value
                    .as_str()
                    .ok_or_else(|| err("`server` must be a string (a URL)".into()))?;
                server = endpoint_of(url).map_err(|r| err(format!("server {url:?}: {r}")))?;
            }
            "host" => {
                let hosts = value
                    .as_table()
                    .ok_or_else(|| err("`host` must be tables, [host.\"URL\"]".into()))?;
                for (url, settings) in hosts {
                    let endpoint =
                        endpoint_of(url).map_err(|r| err(format!("host {url:?}: {r}")))?;
                    let settings = settings
                        .as_table()
                        .ok_or_else(|| err(format!("host {url:?} must be a table")))?;
                    let mut caps = vec!["pull".to_string(), "resolve".to_string()];
                    for (k, v) in settings {
                        match k.as_str() {
                            "capabilities" => {
                                caps = v
                                    .as_array()
                                    .and_then(|a| {
                                        a.iter()
                                            .map(|c| c.as_str().map(str::to_string))
                                            .collect::<Option<Vec<_>>>()
                                    })
                                    .ok_or_else(|| {
                                        err(format!(
                                            "host {url:?}: capabilities must be a list of \
                                             strings (pull, resolve, push)"
                                        ))
                                    })?;
                            }
                            other => {
                                return Err(err(format!(
                                    "host {url:?}: {other:?} is not supported here (only \
                                     capabilities)"
                                )))
                            }
                        }
                    }
                    let can = |c: &str| caps.iter().any(|x| x == c);
                    if can("pull") && (!is_tag || can("resolve")) {
                        out.push(endpoint);
                    }
                }
            }
            other => {
                return Err(err(format!(
                    "{other:?} is not supported here (only server and [host.\"URL\"] tables)"
                )))
            }
        }
    }
    if !out.contains(&server) {
        out.push(server);
    }
    Ok(out)
}

/// `http://host:port`, `https://host` (a path of `/v2` or none) as an endpoint.
fn endpoint_of(url: &str) -> Result<Endpoint, String> {
    let (plain_http, rest) = if let Some(rest) = url.strip_prefix("http://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (false, rest)
    } else {
        return Err("must start with http:// or https://".into());
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !matches!(path.trim_end_matches('/'), "" | "v2") {
        return Err(format!(
            "path /{path} is not supported (a mirror serves /v2/<repository> at its root)"
        ));
    }
    if host.is_empty() {
        return Err("no host".into());
    }
    Ok(Endpoint {
        host: host.to_string(),
        plain_http,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> Endpoint {
        Endpoint {
            host: "registry.k8s.io".into(),
            plain_http: false,
        }
    }

    #[test]
    fn mirrors_come_first_then_the_server() {
        let text = r#"
server = "https://registry.k8s.io"

[host."http://127.0.0.1:5000"]
  capabilities = ["pull", "resolve"]

[host."https://mirror.example:8443/v2"]
"#;
        let got = parse(Path::new("h.toml"), text, own(), true).unwrap();
        assert_eq!(
            got,
            vec![
                Endpoint {
                    host: "127.0.0.1:5000".into(),
                    plain_http: true
                },
                Endpoint {
                    host: "mirror.example:8443".into(),
                    plain_http: false
                },
                own(),
            ]
        );
    }

    #[test]
    fn a_pull_only_host_serves_digests_not_tags() {
        let text = "[host.\"http://m:1\"]\ncapabilities = [\"pull\"]\n";
        let m = Endpoint {
            host: "m:1".into(),
            plain_http: true,
        };
        assert_eq!(
            parse(Path::new("h"), text, own(), true).unwrap(),
            vec![own()]
        );
        assert_eq!(
            parse(Path::new("h"), text, own(), false).unwrap(),
            vec![m, own()]
        );
    }

    #[test]
    fn a_plain_http_server_replaces_the_registry() {
        let text = "server = \"http://127.0.0.1:5000\"\n";
        let got = parse(Path::new("h"), text, own(), true).unwrap();
        assert_eq!(
            got,
            vec![Endpoint {
                host: "127.0.0.1:5000".into(),
                plain_http: true
            }]
        );
    }

    #[test]
    fn unsupported_settings_are_refused_by_name() {
        for (text, word) in [
            ("[host.\"http://m\"]\nskip_verify = true\n", "skip_verify"),
            ("ca = \"x\"\n", "ca"),
            ("server = \"ftp://x\"\n", "http://"),
            ("[host.\"http://m/prefix\"]\n", "/prefix"),
            ("server = [", "TOML"),
        ] {
            let e = parse(Path::new("/etc/x/hosts.toml"), text, own(), true)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(word) && e.contains("/etc/x/hosts.toml"),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn the_hosts_file_of_the_registry_or_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        assert_eq!(hosts_file(std::slice::from_ref(&d), "gcr.io"), None);
        std::fs::create_dir_all(d.join("_default")).unwrap();
        std::fs::write(d.join("_default/hosts.toml"), "").unwrap();
        assert_eq!(
            hosts_file(std::slice::from_ref(&d), "gcr.io"),
            Some(d.join("_default/hosts.toml"))
        );
        std::fs::create_dir_all(d.join("gcr.io")).unwrap();
        std::fs::write(d.join("gcr.io/hosts.toml"), "").unwrap();
        assert_eq!(
            hosts_file(std::slice::from_ref(&d), "gcr.io"),
            Some(d.join("gcr.io/hosts.toml"))
        );
    }
}
