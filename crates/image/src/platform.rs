//! Platforms (OS, architecture, variant) in the OCI spelling, the one this machine runs,
//! and the choice of a manifest from a multi-arch index.

use std::fmt;

/// An OS/architecture pair, with the optional CPU variant (`v8` for arm64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// The OS, as OCI names it (`linux`).
    pub os: String,
    /// The CPU architecture, as OCI names it (`amd64`, `arm64`).
    pub architecture: String,
    /// The CPU variant, if one is asked for (`v8`, `v7`).
    pub variant: Option<String>,
}

impl Platform {
    /// The platform of this build of the program, in Go's names as images use them.
    pub fn host() -> Platform {
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "x86" => "386",
            "aarch64" => "arm64",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "powerpc64" => "ppc64",
            "loongarch64" => "loong64",
            other => other,
        };
        Platform {
            os: std::env::consts::OS.to_string(),
            architecture: architecture.to_string(),
            variant: None,
        }
    }

    /// Reads a platform from an index entry's `platform` object (or a config's top level).
    pub fn from_json(v: &serde_json::Value) -> Option<Platform> {
        Some(Platform {
            os: v.get("os")?.as_str()?.to_string(),
            architecture: v.get("architecture")?.as_str()?.to_string(),
            variant: v
                .get("variant")
                .and_then(|x| x.as_str())
                .map(str::to_string),
        })
    }

    /// True when an image for `candidate` runs here: same OS and architecture, and the
    /// same variant when this platform names one.
    pub fn accepts(&self, candidate: &Platform) -> bool {
        self.os == candidate.os
            && self.architecture == candidate.architecture
            && match &self.variant {
                Some(v) => candidate.variant.as_deref() == Some(v),
                None => true,
            }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_uses_go_names() {
        let host = Platform::host();
        assert_eq!(host.os, "linux");
        assert!(!["x86_64", "aarch64"].contains(&host.architecture.as_str()));
    }

    #[test]
    fn accepts_matching_os_and_arch() {
        let want = Platform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: None,
        };
        let v8 = Platform::from_json(
            &serde_json::json!({"os": "linux", "architecture": "arm64", "variant": "v8"}),
        )
        .unwrap();
        assert!(want.accepts(&v8));
        let amd = Platform::from_json(&serde_json::json!({"os": "linux", "architecture": "amd64"}))
            .unwrap();
        assert!(!want.accepts(&amd));
        let v7 = Platform {
            variant: Some("v7".into()),
            ..want.clone()
        };
        assert!(!v7.accepts(&v8));
        assert_eq!(v8.to_string(), "linux/arm64/v8");
    }
}
