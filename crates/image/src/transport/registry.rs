//! A registry client for the OCI distribution API (`docker://`): `GET
//! /v2/<name>/manifests/<ref>` with the OCI and Docker schema 2 media types in `Accept`,
//! `GET /v2/<name>/blobs/<digest>` for the rest. A `401` with a `Bearer` challenge is
//! answered with a token from the realm it names (with the credentials, when given), a
//! `Basic` challenge with the credentials. Blocking HTTP (`ureq`), plain HTTP only: this
//! build has no TLS, so a registry is reached only when the caller allows plain HTTP.

use std::io::Read;
use std::time::Duration;

use base64::Engine as _;

use super::{read_small, Source, TopManifest, TransportError};
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
    pub user: String,
    pub password: String,
}

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Plain HTTP is allowed (`--insecure-options=http`). Without it the client refuses,
    /// since this build speaks no HTTPS.
    pub plain_http: bool,
    /// Credentials for `Basic` auth and for token requests.
    pub credentials: Option<Credentials>,
}

/// One image on a registry.
pub struct Registry {
    image: String,
    reference: DockerRef,
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
        let image = reference.to_string();
        if !options.plain_http {
            return Err(TransportError::HttpsUnsupported {
                image,
                registry: reference.api_host().to_string(),
            });
        }
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(30))
            .timeout_read(Duration::from_secs(120))
            .redirects(5)
            .build();
        Ok(Registry {
            base: format!("http://{}", reference.api_host()),
            image,
            reference: reference.clone(),
            agent,
            options,
            authorization: None,
        })
    }

    fn registry(&self) -> String {
        self.reference.api_host().to_string()
    }

    /// GETs `path` (under `/v2/<name>/`), answering an auth challenge once.
    fn get(
        &mut self,
        path: &str,
        accept: Option<&str>,
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
                Err(ureq::Error::Transport(t)) => {
                    return Err(TransportError::Connection {
                        image: self.image.clone(),
                        registry: self.registry(),
                        message: t.to_string(),
                    })
                }
            }
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
            ureq::Error::Transport(t) => TransportError::Connection {
                image: self.image.clone(),
                registry: url.clone(),
                message: t.to_string(),
            },
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

    #[test]
    fn refuses_https_without_plain_http() {
        let r = DockerRef::parse("example.com/app", "docker://example.com/app").unwrap();
        let err = Registry::new(&r, RegistryOptions::default()).err().unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("example.com") && msg.contains("--insecure-options=http"),
            "{msg}"
        );
    }
}
