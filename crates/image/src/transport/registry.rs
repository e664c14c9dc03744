//! A registry client for the OCI distribution API (`docker://`): `GET
//! /v2/<name>/manifests/<ref>` with the OCI and Docker schema 2 media types in `Accept`,
//! `GET /v2/<name>/blobs/<digest>` for the rest (with `Range: bytes=N-` to continue a blob
//! whose download broke off after N bytes). A `401` with a `Bearer` challenge is
//! answered with a token from the realm it names (with the credentials, when given), a
//! `Basic` challenge with the credentials. Blocking HTTP (`ureq`): HTTPS with the trust
//! [`super::tls`] sets up, or plain HTTP when the caller allows it.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;

use super::{read_small, tls, Source, TopManifest, TransportError};
use crate::digest::Digest;
use crate::reference::{DockerRef, Target};

/// The manifest media types asked for, most wanted first.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// User name and password for a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub user: String,
    /// The password (or token).
    pub password: String,
}

/// How to reach a registry.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Plain HTTP instead of HTTPS (`--insecure-options=http`).
    pub plain_http: bool,
    /// Any server certificate is accepted (`--insecure-options=tls`).
    pub insecure_tls: bool,
    /// Directories of per-registry CA files in Docker's layout, `<dir>/HOST[:PORT]/*.crt`,
    /// trusted beside the system's store ([`tls::DOCKER_CERTS_D`] by default).
    pub certs_dirs: Vec<PathBuf>,
    /// Credentials for `Basic` auth and for token requests.
    pub credentials: Option<Credentials>,
    /// Directories of registry host configurations in containerd's layout,
    /// `<dir>/HOST[:PORT]/hosts.toml` (mirrors tried in order before the registry itself;
    /// [`super::mirrors`]); the first directory that has one for a host is used. Empty: every
    /// image comes from its own registry.
    pub hosts_dirs: Vec<PathBuf>,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            plain_http: false,
            insecure_tls: false,
            certs_dirs: vec![PathBuf::from(tls::DOCKER_CERTS_D)],
            credentials: None,
            hosts_dirs: Vec::new(),
        }
    }
}

/// One image on a registry.
pub struct Registry {
    image: String,
    reference: DockerRef,
    /// The host (and port) requests go to: the registry's, or a mirror's.
    host: String,
    base: String,
    agent: ureq::Agent,
    options: RegistryOptions,
    /// The `Authorization` header that worked last, reused for the next requests.
    authorization: Option<String>,
}

impl Registry {
    /// A client for `reference`.
    pub fn new(
        reference: &DockerRef,
        options: RegistryOptions,
    ) -> Result<Registry, TransportError> {
        let scheme = if options.plain_http { "http" } else { "https" };
        let endpoint = super::mirrors::Endpoint {
            host: reference.api_host().to_string(),
            plain_http: scheme == "http",
        };
        Registry::at(reference, &endpoint, options)
    }

    /// A client for `reference` that asks `endpoint` (a mirror, or the registry itself)
    /// for it, under the same repository path.
    pub fn at(
        reference: &DockerRef,
        endpoint: &super::mirrors::Endpoint,
        options: RegistryOptions,
    ) -> Result<Registry, TransportError> {
        let image = reference.to_string();
        let host = endpoint.host.as_str();
        let mut agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(30))
            .timeout_read(Duration::from_secs(120))
            .redirects(5);
        // The TLS setup is needed for HTTPS, and also over plain HTTP: a token realm or a
        // redirect (to blob storage) may be an https:// URL.
        let config = tls::client_config(host, &options.certs_dirs, options.insecure_tls).map_err(
            |source| TransportError::TlsSetup {
                image: image.clone(),
                source,
            },
        )?;
        agent = agent.tls_config(config);
        let scheme = if endpoint.plain_http { "http" } else { "https" };
        Ok(Registry {
            base: format!("{scheme}://{host}"),
            host: host.to_string(),
            image,
            reference: reference.clone(),
            agent: agent.build(),
            options,
            authorization: None,
        })
    }

    fn registry(&self) -> String {
        self.host.clone()
    }

    /// GETs `path` (under `/v2/<name>/`), answering an auth challenge once.
    fn get(
        &mut self,
        path: &str,
        accept: Option<&str>,
        what: &str,
    ) -> Result<ureq::Response, TransportError> {
        self.get_with(path, accept, None, what)
    }

    /// [`Registry::get`] with an optional `Range` header value.
    fn get_with(
        &mut self,
        path: &str,
        accept: Option<&str>,
        range: Option<&str>,
        what: &str,
    ) -> Result<ureq::Response, TransportError> {
        let url = format!("{}/v2/{}/{path}", self.base, self.reference.repository);
        let mut challenged = false;
        loop {
            let mut req = self.agent.get(&url);
            if let Some(a) = accept {
                req = req.set("Accept", a);
            }
            if let Some(auth) = &self.authorization {
                req = req.set("Authorization", auth);
            }
            if let Some(range) = range {
                req = req.set("Range", range);
            }
            match req.call() {
                Ok(resp) => return Ok(resp),
                Err(ureq::Error::Status(401, resp)) if !challenged => {
                    challenged = true;
                    let challenge = resp.header("WWW-Authenticate").unwrap_or("").to_string();
                    self.authorization = Some(self.answer(&challenge)?);
                }
                Err(ureq::Error::Status(status @ (401 | 403), _)) => {
                    return Err(TransportError::Denied {
                        image: self.image.clone(),
                        registry: self.registry(),
                        status,
                        hint: if self.options.credentials.is_some() {
                            ": check the credentials for it"
                        } else {
                            ": it needs credentials (auth.d)"
                        },
                    })
                }
                Err(ureq::Error::Status(404, _)) => {
                    return Err(TransportError::NotFound {
                        image: self.image.clone(),
                        what: format!("registry {} has no {what}", self.registry()),
                    })
                }
                Err(ureq::Error::Status(status, resp)) => {
                    let message = resp.into_string().unwrap_or_default();
                    return Err(TransportError::Status {
                        image: self.image.clone(),
                        registry: self.registry(),
                        status,
                        what: what.to_string(),
                        message: message.trim().chars().take(300).collect(),
                    });
                }
                Err(ureq::Error::Transport(t)) => return Err(self.transport_error(t, None)),
            }
        }
    }

    /// A connection failure, a TLS one told apart with what to do about it; `url` is the
    /// address when it is not the registry's own (a token realm).
    fn transport_error(&self, t: ureq::Transport, url: Option<&str>) -> TransportError {
        let registry = url.map_or_else(|| self.registry(), str::to_string);
        match tls::tls_failure(&t) {
            Some(failure) => TransportError::Tls {
                image: self.image.clone(),
                registry,
                reason: failure.to_string(),
                hint: tls::advice(failure, &self.registry(), &self.options.certs_dirs),
            },
            None => TransportError::Connection {
                image: self.image.clone(),
                registry,
                message: t.to_string(),
            },
        }
    }

    /// The `Authorization` header answering a `WWW-Authenticate` challenge.
    fn answer(&self, challenge: &str) -> Result<String, TransportError> {
        let denied = || TransportError::Denied {
            image: self.image.clone(),
            registry: self.registry(),
            status: 401,
            hint: ": it needs credentials (auth.d)",
        };
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let basic = self.options.credentials.as_ref().map(|c| {
            let raw = format!("{}:{}", c.user, c.password);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(raw)
            )
        });
        if scheme.eq_ignore_ascii_case("basic") {
            return basic.ok_or_else(denied);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(denied());
        }
        let params = parse_challenge(params);
        let realm = params
            .iter()
            .find(|(k, _)| k == "realm")
            .map(|(_, v)| v.clone())
            .ok_or_else(denied)?;
        let mut url = realm;
        let mut sep = if url.contains('?') { '&' } else { '?' };
        for key in ["service", "scope"] {
            if let Some((_, v)) = params.iter().find(|(k, _)| k == key) {
                url.push_str(&format!("{sep}{key}={}", percent_encode(v)));
                sep = '&';
            }
        }
        let mut req = self.agent.get(&url);
        if let Some(b) = &basic {
            req = req.set("Authorization", b);
        }
        let resp = req.call().map_err(|e| match e {
            ureq::Error::Status(..) => denied(),
            ureq::Error::Transport(t) => self.transport_error(t, Some(&url)),
        })?;
        let text = resp.into_string().unwrap_or_default();
        let body: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| TransportError::Malformed {
                image: self.image.clone(),
                what: format!("token from {url}"),
                reason: e.to_string(),
            })?;
        body.get("token")
            .or_else(|| body.get("access_token"))
            .and_then(|t| t.as_str())
            .map(|t| format!("Bearer {t}"))
            .ok_or_else(|| TransportError::Malformed {
                image: self.image.clone(),
                what: format!("token from {url}"),
                reason: "no \"token\" in the answer".into(),
            })
    }
}

/// `key="value",key2="value2"` pairs of an auth challenge.
fn parse_challenge(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        out.push((key, value.to_string()));
        rest = next.trim_start().trim_start_matches(',');
    }
    out
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Source for Registry {
    fn image(&self) -> String {
        self.image.clone()
    }

    fn top(&mut self) -> Result<TopManifest, TransportError> {
        let reference = self.reference.reference();
        let what = format!("manifest {reference} of {}", self.reference.repository);
        let resp = self.get(
            &format!("manifests/{reference}"),
            Some(MANIFEST_ACCEPT),
            &what,
        )?;
        let image = self.image.clone();
        let bytes = read_small(resp.into_reader(), &image, &what)?;
        let digest = match &self.reference.target {
            Target::Digest(d) => Some(d.clone()),
            Target::Tag(_) => None,
        };
        Ok(TopManifest { bytes, digest })
    }

    fn manifest(&mut self, digest: &Digest) -> Result<Vec<u8>, TransportError> {
        let what = format!("manifest {digest} of {}", self.reference.repository);
        let resp = self.get(&format!("manifests/{digest}"), Some(MANIFEST_ACCEPT), &what)?;
        read_small(resp.into_reader(), &self.image, &what)
    }

    fn blob(&mut self, digest: &Digest, _size: u64) -> Result<Box<dyn Read + '_>, TransportError> {
        let resp = self.get(&format!("blobs/{digest}"), None, &format!("blob {digest}"))?;
        Ok(Box::new(resp.into_reader()))
    }

    /// Asks for `Range: bytes=OFFSET-`; a `206` whose `Content-Range` starts there continues
    /// the download, anything else (a server that ignores ranges answers `200` with the whole
    /// blob, a `416` refuses the range) starts it again from 0.
    fn blob_from(
        &mut self,
        digest: &Digest,
        size: u64,
        offset: u64,
    ) -> Result<(Box<dyn Read + '_>, u64), TransportError> {
        if offset == 0 || offset >= size {
            return Ok((self.blob(digest, size)?, 0));
        }
        let path = format!("blobs/{digest}");
        let what = format!("blob {digest}");
        let range = format!("bytes={offset}-");
        let resp = match self.get_with(&path, None, Some(&range), &what) {
            Err(TransportError::Status { status: 416, .. }) => {
                return Ok((self.blob(digest, size)?, 0))
            }
            other => other?,
        };
        let continues = resp.status() == 206
            && resp
                .header("Content-Range")
                .and_then(|r| r.strip_prefix("bytes "))
                .and_then(|r| r.split_once('-'))
                .is_some_and(|(start, _)| start.trim().parse() == Ok(offset));
        if continues {
            return Ok((Box::new(resp.into_reader()), offset));
        }
        if resp.status() == 206 {
            // Some other range than the one asked for: ask for the whole blob.
            drop(resp);
            return Ok((self.blob(digest, size)?, 0));
        }
        Ok((Box::new(resp.into_reader()), 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_challenge() {
        let p = parse_challenge(
            r#"realm="http://127.0.0.1:1/token",service="registry",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            p,
            vec![
                ("realm".into(), "http://127.0.0.1:1/token".into()),
                ("service".into(), "registry".into()),
                ("scope".into(), "repository:a/b:pull,push".into()),
            ]
        );
        assert_eq!(
            percent_encode("repository:a/b:pull"),
            "repository%3Aa%2Fb%3Apull"
        );
    }
}
