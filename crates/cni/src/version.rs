//! CNI specification versions: parsing, ordering, the set this library supports, and
//! negotiating the version to speak for a network configuration list.
//!
//! A configuration states `cniVersion` and, since spec 1.1.0, optionally `cniVersions`;
//! the runtime picks the highest version it supports from both. A configuration that
//! states neither is, as in libcni, version `0.1.0`.

use std::fmt;
use std::str::FromStr;

/// Every specification version this library can speak, oldest first.
pub const SUPPORTED: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

/// The newest specification version this library implements.
pub const CURRENT: &str = "1.1.0";

/// The version a configuration without `cniVersion` is taken to have.
pub const IMPLICIT: &str = "0.1.0";

/// Errors about version strings and version negotiation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The string is not `MAJOR[.MINOR[.PATCH]]` with decimal numbers.
    #[error("invalid CNI version {0:?}: expected MAJOR.MINOR.PATCH with decimal numbers, e.g. \"1.0.0\"")]
    Invalid(String),
    /// None of the offered versions is one this library supports.
    #[error(
        "no supported CNI version offered: the configuration offers {offered}, this runtime supports {}",
        SUPPORTED.join(", ")
    )]
    Unsupported {
        /// The offered versions, already formatted for the message.
        offered: String,
    },
}

/// A parsed specification version. Ordering is numeric: `0.3.1 < 0.4.0 < 1.0.0`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub struct Version {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Patch number.
    pub patch: u32,
}

impl Version {
    /// Builds a version from its three numbers.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Version {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// Parses `MAJOR[.MINOR[.PATCH]]`; missing parts are zero, as in libcni's
    /// `version.ParseVersion`. The empty string is rejected: callers that want the
    /// "missing means 0.1.0" rule apply it themselves (see [`negotiate`]).
    pub fn parse(s: &str) -> Result<Version, VersionError> {
        let invalid = || VersionError::Invalid(s.to_string());
        if s.is_empty() {
            return Err(invalid());
        }
        let mut nums = [0u32; 3];
        for (i, part) in s.split('.').enumerate() {
            if i == 3 || part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            nums[i] = part.parse().map_err(|_| invalid())?;
        }
        Ok(Version::new(nums[0], nums[1], nums[2]))
    }

    /// True when this version is `other` or newer. An `other` that does not parse
    /// yields false, so a typo never enables a feature.
    pub fn at_least(&self, other: &str) -> bool {
        Version::parse(other).is_ok_and(|o| *self >= o)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Version, VersionError> {
        Version::parse(s)
    }
}

/// True when `v` is, byte for byte, one of [`SUPPORTED`]. Plugins compare version
/// strings exactly, so `"1.0"` is not treated as `"1.0.0"`.
pub fn is_supported(v: &str) -> bool {
    SUPPORTED.contains(&v)
}

/// True when `a` is older than `b`; unparsable strings sort before everything.
pub fn older_than(a: &str, b: &str) -> bool {
    match (Version::parse(a), Version::parse(b)) {
        (Ok(a), Ok(b)) => a < b,
        (Err(_), Ok(_)) => true,
        _ => false,
    }
}

/// Picks the version to speak for a configuration: the highest version in
/// `cni_version` ∪ `cni_versions` that this library supports.
///
/// When both are absent (or `cniVersion` is empty and `cniVersions` is empty) the
/// configuration is taken to be `0.1.0`, as libcni does. The error lists what was
/// offered.
pub fn negotiate(
    cni_version: Option<&str>,
    cni_versions: &[String],
) -> Result<String, VersionError> {
    let explicit = cni_version.filter(|v| !v.is_empty());
    let mut offered: Vec<&str> = Vec::new();
    match explicit {
        Some(v) => offered.push(v),
        None if cni_versions.is_empty() => offered.push(IMPLICIT),
        None => {}
    }
    offered.extend(cni_versions.iter().map(String::as_str));
    offered
        .iter()
        .copied()
        .filter(|v| is_supported(v))
        .filter_map(|v| Version::parse(v).ok().map(|p| (p, v)))
        .max_by_key(|(p, _)| *p)
        .map(|(_, v)| v.to_string())
        .ok_or_else(|| {
            let mut parts = Vec::new();
            if let Some(v) = explicit {
                parts.push(format!("cniVersion {v:?}"));
            }
            if !cni_versions.is_empty() {
                parts.push(format!("cniVersions {cni_versions:?}"));
            }
            VersionError::Unsupported {
                offered: parts.join(" and "),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_accepts_short_forms_and_orders_numerically() {
        assert_eq!(Version::parse("1.1.0").unwrap(), Version::new(1, 1, 0));
        assert_eq!(Version::parse("1").unwrap(), Version::new(1, 0, 0));
        assert_eq!(Version::parse("0.3").unwrap(), Version::new(0, 3, 0));
        assert!(Version::parse("0.10.0").unwrap() > Version::parse("0.9.9").unwrap());
        assert_eq!("0.3.1".parse::<Version>().unwrap().to_string(), "0.3.1");
    }

    #[test]
    fn parse_rejects_malformed() {
        for bad in [
            "", "1.", ".1", "1.0.0.0", "v1.0.0", "1.x.0", "1.0.-1", "1..0", " 1.0.0",
        ] {
            let err = Version::parse(bad).unwrap_err();
            assert_eq!(err, VersionError::Invalid(bad.to_string()), "{bad:?}");
            assert!(err.to_string().contains(&format!("{bad:?}")));
        }
    }

    #[test]
    fn at_least_compares_and_rejects_garbage() {
        let v = Version::parse("0.4.0").unwrap();
        assert!(v.at_least("0.4.0"));
        assert!(v.at_least("0.3.1"));
        assert!(!v.at_least("1.0.0"));
        assert!(!v.at_least("junk"));
    }

    #[test]
    fn supported_is_exact_and_sorted() {
        assert!(is_supported("1.1.0"));
        assert!(is_supported("0.1.0"));
        assert!(!is_supported("1.0"));
        assert!(!is_supported("1.2.0"));
        assert!(!is_supported(""));
        let parsed: Vec<Version> = SUPPORTED.iter().map(|v| v.parse().unwrap()).collect();
        assert!(parsed.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*SUPPORTED.last().unwrap(), CURRENT);
    }

    #[test]
    fn negotiate_plain_cni_version() {
        assert_eq!(negotiate(Some("0.4.0"), &[]).unwrap(), "0.4.0");
        assert_eq!(negotiate(Some("1.0.0"), &[]).unwrap(), "1.0.0");
    }

    #[test]
    fn negotiate_missing_or_empty_means_0_1_0() {
        assert_eq!(negotiate(None, &[]).unwrap(), "0.1.0");
        assert_eq!(negotiate(Some(""), &[]).unwrap(), "0.1.0");
    }

    #[test]
    fn negotiate_picks_highest_supported_from_union() {
        let vs = strings(&["0.4.0", "1.0.0", "2.5.0", "1.1.0"]);
        assert_eq!(negotiate(Some("0.3.1"), &vs).unwrap(), "1.1.0");
        // cniVersion higher than anything in cniVersions still counts.
        assert_eq!(
            negotiate(Some("1.0.0"), &strings(&["0.3.1"])).unwrap(),
            "1.0.0"
        );
        // cniVersions alone, order does not matter, unsupported entries skipped.
        assert_eq!(
            negotiate(None, &strings(&["9.0.0", "0.3.0", "0.2.0"])).unwrap(),
            "0.3.0"
        );
        // An unsupported cniVersion falls back to a supported cniVersions entry.
        assert_eq!(
            negotiate(Some("3.0.0"), &strings(&["1.0.0"])).unwrap(),
            "1.0.0"
        );
    }

    #[test]
    fn negotiate_error_names_what_was_offered() {
        let err = negotiate(Some("2.0.0"), &strings(&["3.0.0", "1.0"])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("\"2.0.0\""), "{msg}");
        assert!(msg.contains("3.0.0") && msg.contains("\"1.0\""), "{msg}");
        assert!(msg.contains("1.1.0"), "lists what we support: {msg}");
        // cniVersions given but nothing usable, no cniVersion: no implicit 0.1.0.
        assert!(negotiate(None, &strings(&["5.0.0"])).is_err());
    }
}
