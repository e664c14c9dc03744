//! Content digests: the `sha256:<64 hex>` names that address every blob in the store, and
//! the hashing writer that checks a stream against one while it is copied.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// Why a string is not a sha256 digest.
#[derive(Debug, thiserror::Error)]
#[error("digest {digest:?}: {reason} (expected sha256:<64 lowercase hex digits>)")]
pub struct DigestError {
    /// The string given.
    pub digest: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A sha256 digest. Only sha256 is accepted: it is what the OCI image spec requires
/// implementations to support and what every registry and tool writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    pub(crate) fn from_hasher(hasher: Sha256) -> Digest {
        let hash = hasher.finalize();
        let mut hex = String::with_capacity(64);
        for byte in hash {
            hex.push_str(&format!("{byte:02x}"));
        }
        Digest { hex }
    }

    /// A digest from its 64 hex digits (no `sha256:` prefix).
    pub fn from_hex(hex: &str) -> Result<Digest, DigestError> {
        if hex.len() != 64 {
            return Err(DigestError {
                digest: hex.to_string(),
                reason: "not 64 hex digits",
            });
        }
        if !is_lower_hex(hex) {
            return Err(DigestError {
                digest: hex.to_string(),
                reason: "not lowercase hex",
            });
        }
        Ok(Digest {
            hex: hex.to_string(),
        })
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The first 12 hex digits, as image lists show them.
    pub fn short(&self) -> &str {
        &self.hex[..12]
    }
}

/// True when `s` is non-empty and only lowercase hex digits.
pub fn is_lower_hex(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl FromStr for Digest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Digest, DigestError> {
        match s.strip_prefix("sha256:") {
            Some(hex) => Digest::from_hex(hex).map_err(|e| DigestError {
                digest: s.to_string(),
                reason: e.reason,
            }),
            None => Err(DigestError {
                digest: s.to_string(),
                reason: "only sha256 digests are supported",
            }),
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Digest, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl TryFrom<&oci_spec::image::Digest> for Digest {
    type Error = DigestError;

    fn try_from(d: &oci_spec::image::Digest) -> Result<Digest, DigestError> {
        d.as_ref().parse()
    }
}

/// A writer that hashes and counts what passes through it to an inner writer.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            written: 0,
        }
    }

    /// The digest and the number of bytes written so far, and the inner writer.
    pub fn finish(self) -> (Digest, u64, W) {
        (Digest::from_hasher(self.hasher), self.written, self.inner)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_of_known_input() {
        assert_eq!(
            Digest::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parse_rejects_bad_digests() {
        let good = format!("sha256:{}", "a".repeat(64));
        assert!(good.parse::<Digest>().is_ok());
        for bad in [
            format!("sha512:{}", "a".repeat(64)),
            format!("sha256:{}", "a".repeat(63)),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:{}/..", "a".repeat(61)),
            "a".repeat(64),
        ] {
            let err = bad.parse::<Digest>().unwrap_err();
            assert!(err.to_string().contains(&bad), "{err}");
        }
    }

    #[test]
    fn hashing_writer_counts_and_hashes() {
        let mut w = HashingWriter::new(Vec::new());
        w.write_all(b"hello ").unwrap();
        w.write_all(b"world").unwrap();
        let (d, n, inner) = w.finish();
        assert_eq!(n, 11);
        assert_eq!(inner, b"hello world");
        assert_eq!(d, Digest::of(b"hello world"));
    }
}
