//! Small wire types of the CNI protocol: the error object a plugin prints, the
//! well-known error codes, a plugin's VERSION answer, and the GC attachment entry.

use serde::{Deserialize, Serialize};

/// The specification's error object, printed by a plugin on stdout when it fails.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorObject {
    /// The version the plugin answered in (often absent in older plugins).
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    /// A well-known code from [`codes`], or 100+ for plugin-specific errors.
    pub code: u32,
    /// Short message.
    #[serde(default)]
    pub msg: String,
    /// Longer explanation, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl ErrorObject {
    /// An error object for `code` with a message and optional details.
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> ErrorObject {
        ErrorObject {
            cni_version: String::new(),
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }
}

impl std::fmt::Display for ErrorObject {
    /// `msg; details` (libcni's form), followed by the code and its meaning.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)?;
        if !self.details.is_empty() {
            write!(f, "; {}", self.details)?;
        }
        write!(f, " (code {}: {})", self.code, codes::describe(self.code))
    }
}

/// Well-known error codes (spec "Error" section; 8 and 999 from libcni).
/// Codes 0-99 are reserved by the spec; 100 and up belong to plugins.
pub mod codes {
    /// The plugin does not support the requested version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// A field of the configuration is not supported; the message names it.
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// The container does not exist; no cleanup is needed.
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Required environment variables are missing or invalid.
    pub const INVALID_ENVIRONMENT: u32 = 4;
    /// An I/O failure.
    pub const IO: u32 = 5;
    /// The input could not be decoded.
    pub const DECODE: u32 = 6;
    /// The network configuration is invalid.
    pub const INVALID_CONFIG: u32 = 7;
    /// The network namespace is invalid (libcni).
    pub const INVALID_NETNS: u32 = 8;
    /// A transient failure: retry later.
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin cannot serve ADD requests.
    pub const NOT_AVAILABLE: u32 = 50;
    /// STATUS: cannot serve ADD, and existing containers may have limited connectivity.
    pub const NOT_AVAILABLE_LIMITED: u32 = 51;
    /// An internal error (libcni).
    pub const INTERNAL: u32 = 999;

    /// A short English description of a code.
    pub fn describe(code: u32) -> &'static str {
        match code {
            0 => "unknown error",
            INCOMPATIBLE_VERSION => "incompatible CNI version",
            UNSUPPORTED_FIELD => "unsupported field in network configuration",
            UNKNOWN_CONTAINER => "container unknown or does not exist",
            INVALID_ENVIRONMENT => "invalid necessary environment variables",
            IO => "I/O failure",
            DECODE => "failed to decode content",
            INVALID_CONFIG => "invalid network config",
            INVALID_NETNS => "invalid network namespace",
            TRY_AGAIN_LATER => "try again later",
            NOT_AVAILABLE => "plugin not available",
            NOT_AVAILABLE_LIMITED => {
                "plugin not available, existing containers may have limited connectivity"
            }
            INTERNAL => "internal error",
            12..=99 => "reserved error code",
            _ => "plugin-specific error",
        }
    }
}

/// Why a VERSION answer could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum VersionInfoError {
    /// Not JSON, or fields of the wrong type.
    #[error("decoding version info")]
    Json(#[from] serde_json::Error),
    /// `cniVersion` is missing or empty.
    #[error("decoding version info: missing field cniVersion")]
    MissingCniVersion,
}

/// A plugin's answer to the VERSION command.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct VersionInfo {
    /// The version the answer is written in.
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    /// The versions the plugin supports.
    #[serde(rename = "supportedVersions", default)]
    pub supported_versions: Vec<String>,
}

impl VersionInfo {
    /// What libcni assumes of a plugin that does not know the VERSION command:
    /// it supports only `0.1.0`.
    pub fn legacy() -> VersionInfo {
        VersionInfo {
            cni_version: crate::version::CURRENT.to_string(),
            supported_versions: vec![crate::version::IMPLICIT.to_string()],
        }
    }

    /// Decodes a VERSION answer. A missing `supportedVersions` means the plugin
    /// supports only the version it answered in, except that a `0.2.0` plugin also
    /// speaks `0.1.0` (libcni's rule for the earliest plugins).
    pub fn from_slice(b: &[u8]) -> Result<VersionInfo, VersionInfoError> {
        let mut info: VersionInfo = serde_json::from_slice(b)?;
        if info.cni_version.is_empty() {
            return Err(VersionInfoError::MissingCniVersion);
        }
        if info.supported_versions.is_empty() {
            if info.cni_version == "0.2.0" {
                info.supported_versions = vec!["0.1.0".into(), "0.2.0".into()];
            } else {
                info.supported_versions = vec![info.cni_version.clone()];
            }
        }
        Ok(info)
    }

    /// True when the plugin lists `version` among its supported versions.
    pub fn supports(&self, version: &str) -> bool {
        self.supported_versions.iter().any(|v| v == version)
    }
}

/// One entry of `cni.dev/valid-attachments` in a GC request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attachment {
    /// `CNI_CONTAINERID` of the attachment.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// `CNI_IFNAME` of the attachment.
    #[serde(rename = "ifname")]
    pub ifname: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_object_round_trip_and_details_skipped_when_empty() {
        let e: ErrorObject = serde_json::from_str(r#"{"code":7,"msg":"bad"}"#).unwrap();
        assert_eq!(e, ErrorObject::new(codes::INVALID_CONFIG, "bad", ""));
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"cniVersion":"","code":7,"msg":"bad"})
        );
        let e = ErrorObject::new(11, "busy", "lock held");
        assert_eq!(e.to_string(), "busy; lock held (code 11: try again later)");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["details"], "lock held");
    }

    #[test]
    fn codes_have_spec_values() {
        assert_eq!(
            [
                codes::INCOMPATIBLE_VERSION,
                codes::UNSUPPORTED_FIELD,
                codes::UNKNOWN_CONTAINER,
                codes::INVALID_ENVIRONMENT,
                codes::IO,
                codes::DECODE,
                codes::INVALID_CONFIG,
                codes::INVALID_NETNS,
                codes::TRY_AGAIN_LATER,
                codes::NOT_AVAILABLE,
                codes::NOT_AVAILABLE_LIMITED,
                codes::INTERNAL
            ],
            [1, 2, 3, 4, 5, 6, 7, 8, 11, 50, 51, 999]
        );
        assert_eq!(codes::describe(3), "container unknown or does not exist");
        assert_eq!(codes::describe(42), "reserved error code");
        assert_eq!(codes::describe(100), "plugin-specific error");
    }

    #[test]
    fn version_info_current_shape() {
        let i = VersionInfo::from_slice(
            br#"{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}"#,
        )
        .unwrap();
        assert_eq!(i.cni_version, "1.0.0");
        assert!(i.supports("0.4.0") && i.supports("1.0.0") && !i.supports("1.1.0"));
    }

    #[test]
    fn version_info_missing_supported_versions() {
        let i = VersionInfo::from_slice(br#"{"cniVersion":"0.2.0"}"#).unwrap();
        assert_eq!(i.supported_versions, ["0.1.0", "0.2.0"]);
        let i = VersionInfo::from_slice(br#"{"cniVersion":"0.3.1"}"#).unwrap();
        assert_eq!(i.supported_versions, ["0.3.1"]);
        let i =
            VersionInfo::from_slice(br#"{"cniVersion":"0.1.0","supportedVersions":[]}"#).unwrap();
        assert_eq!(i.supported_versions, ["0.1.0"]);
    }

    #[test]
    fn version_info_rejects_garbage() {
        assert!(matches!(
            VersionInfo::from_slice(br#"{"supportedVersions":["1.0.0"]}"#),
            Err(VersionInfoError::Json(_))
        ));
        assert!(matches!(
            VersionInfo::from_slice(br#"{"cniVersion":""}"#),
            Err(VersionInfoError::MissingCniVersion)
        ));
        assert!(VersionInfo::from_slice(b"unknown CNI_COMMAND: VERSION").is_err());
        assert!(VersionInfo::from_slice(br#"{"cniVersion":1}"#).is_err());
    }

    #[test]
    fn attachment_json_keys() {
        let a = Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into(),
        };
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"containerID":"c1","ifname":"eth0"})
        );
    }
}
