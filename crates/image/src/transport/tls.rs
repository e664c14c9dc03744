//! TLS for registries: the `rustls` client configuration one registry is reached with. The
//! trusted roots are the system's store (`/etc/ssl/certs` on Debian, through
//! `rustls-native-certs`, which also honours `SSL_CERT_FILE`/`SSL_CERT_DIR`) plus the
//! registry's own CA files in Docker's layout, `<certs.d>/HOST[:PORT]/*.crt`. With
//! `--insecure-options=tls` any certificate is accepted (the handshake signatures are still
//! checked, so the connection is encrypted, only its peer is not verified).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// Docker's directory of per-registry CA files, searched by default.
pub const DOCKER_CERTS_D: &str = "/etc/docker/certs.d";

/// What building a registry's TLS configuration failed at.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A CA file could not be read or holds no usable certificate.
    #[error("CA file {path} for registry {registry}: {reason}")]
    CaFile {
        /// The registry (`HOST[:PORT]`).
        registry: String,
        /// The CA file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The TLS configuration could not be built.
    #[error("TLS configuration for registry {registry}: {reason}")]
    Config {
        /// The registry (`HOST[:PORT]`).
        registry: String,
        /// What failed.
        reason: String,
    },
}

/// The CA files for `registry` (`HOST[:PORT]`): every `*.crt` in `<dir>/<registry>` for each
/// of `certs_dirs` that has one, in name order.
pub fn ca_files(certs_dirs: &[PathBuf], registry: &str) -> Result<Vec<PathBuf>, TlsError> {
    let mut out = Vec::new();
    for dir in certs_dirs {
        let dir = dir.join(registry);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(TlsError::CaFile {
                    registry: registry.to_string(),
                    path: dir,
                    reason: e.to_string(),
                })
            }
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "crt"))
            .collect();
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// The client configuration for `registry`: system roots plus its CA files from
/// `certs_dirs`, or, with `accept_any`, no certificate checks at all.
pub fn client_config(
    registry: &str,
    certs_dirs: &[PathBuf],
    accept_any: bool,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config {
            registry: registry.to_string(),
            reason: e.to_string(),
        })?;
    let config = if accept_any {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(roots(registry, certs_dirs)?)
            .with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// The system's roots (those it can parse; a broken file in the system store does not stop
/// every fetch) and the registry's own CA files (each must parse: the operator put it there).
/// An empty store is no error here: plain HTTP needs none, and HTTPS then fails naming the
/// certificate it could not trust.
fn roots(registry: &str, certs_dirs: &[PathBuf]) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    store.add_parsable_certificates(native.certs);
    for path in ca_files(certs_dirs, registry)? {
        add_ca_file(&mut store, registry, &path)?;
    }
    Ok(store)
}

fn add_ca_file(store: &mut RootCertStore, registry: &str, path: &Path) -> Result<(), TlsError> {
    let bad = |reason: String| TlsError::CaFile {
        registry: registry.to_string(),
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    for cert in certs {
        store.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    Ok(())
}

/// `--insecure-options=tls`: any server certificate is taken; the handshake itself is still
/// verified with the provider's algorithms.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS failure inside a transport error, when it is one (a handshake that failed over a
/// certificate, say).
pub fn tls_failure<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(t) = e.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(t) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Some(t);
            }
        }
        cur = e.source();
    }
    None
}

/// What to do about `failure` with `registry`, whose CA files are looked for in `certs_dirs`.
pub fn advice(failure: &rustls::Error, registry: &str, certs_dirs: &[PathBuf]) -> String {
    match failure {
        // Not TLS at all in answer to ours: most likely a plain-HTTP registry.
        rustls::Error::InvalidMessage(_) => format!(
            "it does not seem to speak HTTPS; --insecure-options=http reaches {registry} \
             over plain HTTP"
        ),
        _ => format!(
            "trust its CA with {}/{registry}/ca.crt, or pass --insecure-options=tls to skip \
             certificate checks",
            certs_dirs
                .first()
                .map_or_else(|| DOCKER_CERTS_D.into(), |d| d.display().to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_files_follow_dockers_layout() {
        let dir = tempfile::tempdir().unwrap();
        let reg = dir.path().join("127.0.0.1:5000");
        std::fs::create_dir(&reg).unwrap();
        std::fs::write(reg.join("ca.crt"), "x").unwrap();
        std::fs::write(reg.join("b.crt"), "x").unwrap();
        std::fs::write(reg.join("client.cert"), "x").unwrap();
        std::fs::write(reg.join("client.key"), "x").unwrap();
        let dirs = [dir.path().join("missing"), dir.path().to_path_buf()];
        assert_eq!(
            ca_files(&dirs, "127.0.0.1:5000").unwrap(),
            vec![reg.join("b.crt"), reg.join("ca.crt")]
        );
        assert!(ca_files(&dirs, "127.0.0.1:5001").unwrap().is_empty());
    }

    #[test]
    fn a_broken_ca_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let reg = dir.path().join("reg.example");
        std::fs::create_dir(&reg).unwrap();
        std::fs::write(reg.join("ca.crt"), "not a certificate\n").unwrap();
        let err = client_config("reg.example", &[dir.path().to_path_buf()], false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("reg.example/ca.crt") && err.contains("no PEM certificate"),
            "{err}"
        );
    }
}
