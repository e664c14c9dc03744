//! `rkt trust`'s keystore: OpenPGP public keys kept where rkt 1.30 kept them, under the
//! local configuration directory, `trustedkeys/prefix.d/<prefix>/<fingerprint>` for keys
//! trusted for image names starting with a prefix and `trustedkeys/root.d/<fingerprint>`
//! for keys trusted for every image. The file is the key as given (armored or binary),
//! named by its OpenPGP v4 fingerprint in lowercase hex.
//!
//! This rkt verifies no image signatures: it runs OCI and Docker images, fetched by digest
//! and checked against it, which carry no appc signatures. The keystore is kept so that
//! scripts and tools written for rkt 1.30 work, and so that it is there as rkt 1.30 left
//! it; nothing reads it. The key is parsed ([`PublicKey::parse`]) to name its file and to
//! show who it belongs to, not to verify anything with it.
//!
//! Takes from `appc` (a prefix is an appc `ACIdentifier`, as in rkt 1.30) and `fsutil`.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::fsutil::{self, Durability};

/// The directory of the keystore below the local configuration directory.
pub const TRUSTED_KEYS: &str = "trustedkeys";

/// Why a key cannot be trusted.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The file is not an OpenPGP public key this rkt reads.
    #[error("{origin}: not an OpenPGP public key: {why}")]
    NotAKey { origin: String, why: String },
    /// `--prefix` is not an appc identifier.
    #[error("--prefix={0:?}: not an image name prefix (lowercase letters, digits and -._~/ between them, as appc's identifiers; e.g. example.com/app)")]
    BadPrefix(String),
    /// The key could not be written.
    #[error("cannot store the key for {what}")]
    Write {
        what: String,
        source: fsutil::WriteError,
    },
}

/// What a key is trusted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Images whose name starts with the prefix (an appc identifier).
    Prefix(String),
    /// Every image (`--root`).
    Root,
}

impl Scope {
    /// A `--prefix`, checked as rkt 1.30 checked it (an appc `ACIdentifier`).
    pub fn prefix(prefix: &str) -> Result<Scope, TrustError> {
        if crate::appc::is_ac_identifier(prefix) {
            Ok(Scope::Prefix(prefix.to_string()))
        } else {
            Err(TrustError::BadPrefix(prefix.to_string()))
        }
    }

    /// The scope's directory in the keystore of `local_config`.
    pub fn dir(&self, local_config: &Path) -> PathBuf {
        let keys = local_config.join(TRUSTED_KEYS);
        match self {
            Scope::Prefix(prefix) => keys.join("prefix.d").join(prefix),
            Scope::Root => keys.join("root.d"),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Prefix(prefix) => write!(f, "prefix {prefix:?}"),
            Scope::Root => f.write_str("every image (root key)"),
        }
    }
}

/// An OpenPGP public key, as far as the keystore needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The v4 fingerprint, 40 lowercase hex digits.
    pub fingerprint: String,
    /// Its user IDs (`Name <email>`).
    pub user_ids: Vec<String>,
    /// The key as given, stored as it is.
    pub bytes: Vec<u8>,
}

const ARMOR_BEGIN: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";
const ARMOR_END: &str = "-----END PGP PUBLIC KEY BLOCK-----";
/// OpenPGP packet tags (RFC 4880 section 4.3).
const TAG_PUBLIC_KEY: u8 = 6;
const TAG_USER_ID: u8 = 13;

impl PublicKey {
    /// Reads a transferable public key, ASCII-armored or binary; `origin` names it in
    /// errors. Its first packet must be a version 4 public key (rkt 1.30 read no other).
    pub fn parse(origin: &str, bytes: &[u8]) -> Result<PublicKey, TrustError> {
        let bad = |why: String| TrustError::NotAKey {
            origin: origin.to_string(),
            why,
        };
        let binary = if bytes.trim_ascii_start().starts_with(b"-----") {
            dearmor(bytes).map_err(bad)?
        } else {
            bytes.to_vec()
        };
        let packets = packets(&binary).map_err(bad)?;
        let Some((TAG_PUBLIC_KEY, key)) = packets.first().copied() else {
            return Err(bad("it does not start with a public key packet".into()));
        };
        match key.first() {
            Some(4) => {}
            Some(v) => return Err(bad(format!("version {v} keys are not supported (only 4)"))),
            None => return Err(bad("an empty public key packet".into())),
        }
        let len = u16::try_from(key.len()).map_err(|_| bad("a key packet too long".into()))?;
        let mut hashed = vec![0x99];
        hashed.extend_from_slice(&len.to_be_bytes());
        hashed.extend_from_slice(key);
        let sum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &hashed);
        let fingerprint = sum.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let user_ids = packets
            .iter()
            .filter(|(tag, _)| *tag == TAG_USER_ID)
            .map(|(_, body)| String::from_utf8_lossy(body).into_owned())
            .collect();
        Ok(PublicKey {
            fingerprint,
            user_ids,
            bytes: bytes.to_vec(),
        })
    }
}

/// The binary of an ASCII-armored public key block (RFC 4880 section 6.2), its CRC-24
/// checked when it has one.
fn dearmor(text: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "armor that is not text".to_string())?;
    let mut lines = text.lines().map(str::trim_end);
    if !lines.any(|l| l == ARMOR_BEGIN) {
        return Err(format!("no {ARMOR_BEGIN} line"));
    }
    // Armor headers (`Version: ...`) up to the first blank line.
    let mut body: Vec<&str> = Vec::new();
    let mut in_headers = true;
    let mut checksum = None;
    let mut ended = false;
    for line in lines {
        if line == ARMOR_END {
            ended = true;
            break;
        }
        if in_headers {
            if line.is_empty() {
                in_headers = false;
            } else if !line.contains(": ") {
                // No headers at all: this line is data.
                in_headers = false;
                body.push(line);
            }
            continue;
        }
        match line.strip_prefix('=') {
            Some(sum) if sum.len() == 4 => checksum = Some(sum),
            _ => body.push(line),
        }
    }
    if !ended {
        return Err(format!("no {ARMOR_END} line"));
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let data = engine
        .decode(body.concat())
        .map_err(|e| format!("bad base64 in the armor: {e}"))?;
    if let Some(sum) = checksum {
        let want = engine
            .decode(sum)
            .map_err(|e| format!("bad armor checksum: {e}"))?;
        let got = crc24(&data).to_be_bytes();
        if want[..] != got[1..] {
            return Err("the armor's checksum does not match: the key is damaged".into());
        }
    }
    Ok(data)
}

/// RFC 4880's CRC-24 (section 6.1).
fn crc24(data: &[u8]) -> u32 {
    let mut crc: u32 = 0x00B7_04CE;
    for byte in data {
        crc ^= u32::from(*byte) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x0100_0000 != 0 {
                crc ^= 0x0186_4CFB;
            }
        }
    }
    crc & 0x00FF_FFFF
}

/// The packets of a binary OpenPGP message, `(tag, body)`, old and new formats with
/// definite lengths (a key has no other).
fn packets(mut data: &[u8]) -> Result<Vec<(u8, &[u8])>, String> {
    let mut out = Vec::new();
    while let Some((&first, rest)) = data.split_first() {
        if first & 0x80 == 0 {
            return Err(format!("byte {first:#04x} does not start a packet"));
        }
        let short = || "a packet cut short".to_string();
        let (tag, len, rest) = if first & 0x40 != 0 {
            let tag = first & 0x3f;
            let (&o1, rest) = rest.split_first().ok_or_else(short)?;
            match o1 {
                0..=191 => (tag, usize::from(o1), rest),
                192..=223 => {
                    let (&o2, rest) = rest.split_first().ok_or_else(short)?;
                    (
                        tag,
                        ((usize::from(o1) - 192) << 8) + usize::from(o2) + 192,
                        rest,
                    )
                }
                255 => {
                    let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
                    (tag, u32::from_be_bytes(*len) as usize, rest)
                }
                _ => return Err("a packet of partial lengths, which keys do not have".into()),
            }
        } else {
            let tag = (first >> 2) & 0x0f;
            match first & 0x03 {
                0 => {
                    let (&len, rest) = rest.split_first().ok_or_else(short)?;
                    (tag, usize::from(len), rest)
                }
                1 => {
                    let (len, rest) = rest.split_first_chunk::<2>().ok_or_else(short)?;
                    (tag, usize::from(u16::from_be_bytes(*len)), rest)
                }
                2 => {
                    let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
                    (tag, u32::from_be_bytes(*len) as usize, rest)
                }
                _ => return Err("a packet of indeterminate length, which keys do not have".into()),
            }
        };
        if rest.len() < len {
            return Err(short());
        }
        out.push((tag, &rest[..len]));
        data = &rest[len..];
    }
    Ok(out)
}

/// Stores `key` for `scope` in the keystore of `local_config` (replacing the same key
/// stored before) and returns the file's path.
pub fn store(local_config: &Path, scope: &Scope, key: &PublicKey) -> Result<PathBuf, TrustError> {
    let path = scope.dir(local_config).join(&key.fingerprint);
    fsutil::replace(&path, &key.bytes, 0o644, Durability::File).map_err(|source| {
        TrustError::Write {
            what: scope.to_string(),
            source,
        }
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v4 key packet (RSA, made up: a 1-byte modulus and exponent) and a user ID, in the
    /// new packet format.
    fn binary_key() -> Vec<u8> {
        let key = [4, 0x5f, 0x00, 0x00, 0x00, 1, 0, 8, 0xc5, 0, 2, 0x03];
        let uid = b"Test <test@example.com>";
        let mut out = vec![0xc0 | TAG_PUBLIC_KEY, key.len() as u8];
        out.extend_from_slice(&key);
        out.extend_from_slice(&[0xc0 | TAG_USER_ID, uid.len() as u8]);
        out.extend_from_slice(uid);
        out
    }

    fn armored(data: &[u8], checksum: bool) -> String {
        let engine = base64::engine::general_purpose::STANDARD;
        let mut text = format!("{ARMOR_BEGIN}\nComment: test\n\n{}\n", engine.encode(data));
        if checksum {
            text += &format!("={}\n", engine.encode(&crc24(data).to_be_bytes()[1..]));
        }
        text + ARMOR_END + "\n"
    }

    #[test]
    fn the_fingerprint_is_sha1_of_the_key_packet_as_openpgp_says() {
        let data = binary_key();
        let key = PublicKey::parse("k", &data).unwrap();
        let mut hashed = vec![0x99, 0, 12];
        hashed.extend_from_slice(&data[2..14]);
        let want: String = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &hashed)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(key.fingerprint, want);
        assert_eq!(key.user_ids, ["Test <test@example.com>"]);
        let armored_key = PublicKey::parse("k", armored(&data, true).as_bytes()).unwrap();
        assert_eq!(armored_key.fingerprint, key.fingerprint);
        assert_eq!(armored_key.bytes, armored(&data, true).as_bytes());
    }

    #[test]
    fn crc24_is_rfc_4880_s() {
        // The CRC of no bytes is the initial value; any one changed bit changes it.
        assert_eq!(crc24(b""), 0xB7_04CE);
        assert_ne!(crc24(b"abc"), crc24(b"abb"));
        assert!(crc24(b"abc") <= 0xFF_FFFF);
    }

    #[test]
    fn damaged_or_foreign_files_are_refused_naming_the_file() {
        let data = binary_key();
        let mut damaged = armored(&data, true).into_bytes();
        // One base64 character of the body changed.
        let at = damaged.iter().position(|b| *b == b'\n').unwrap() + 16;
        damaged[at + 2] = if damaged[at + 2] == b'A' { b'B' } else { b'A' };
        let err = PublicKey::parse("key.asc", &damaged)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("key.asc: not an OpenPGP public key"),
            "{err}"
        );
        for bad in [&b"hello"[..], &data[..5], b"-----BEGIN PGP MESSAGE-----\n"] {
            let err = PublicKey::parse("f", bad).unwrap_err().to_string();
            assert!(err.starts_with("f: not an OpenPGP public key"), "{err}");
        }
        let mut v3 = data.clone();
        v3[2] = 3;
        let err = PublicKey::parse("f", &v3).unwrap_err().to_string();
        assert!(err.contains("version 3"), "{err}");
    }

    #[test]
    fn keys_go_where_rkt_1_30_kept_them() {
        let tmp = tempfile::tempdir().unwrap();
        let key = PublicKey::parse("k", &binary_key()).unwrap();
        let scope = Scope::prefix("example.com/app").unwrap();
        let path = store(tmp.path(), &scope, &key).unwrap();
        assert_eq!(
            path,
            tmp.path()
                .join("trustedkeys/prefix.d/example.com/app")
                .join(&key.fingerprint)
        );
        assert_eq!(std::fs::read(&path).unwrap(), key.bytes);
        let root = store(tmp.path(), &Scope::Root, &key).unwrap();
        assert!(root.starts_with(tmp.path().join("trustedkeys/root.d")));
        for bad in ["Example.com", "/abs", "a//b", "", "a b"] {
            assert!(Scope::prefix(bad).is_err(), "{bad}");
        }
    }
}
