//! Why a plugin's result could not be used: [`ResultError`].

use crate::version;

/// A result that could not be parsed or converted.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// Not JSON at all.
    #[error("result is not valid JSON")]
    Json(#[source] serde_json::Error),
    /// Valid JSON, but not an object.
    #[error("result must be a JSON object, found {0}")]
    NotAnObject(&'static str),
    /// `cniVersion` is present but not a string.
    #[error("result field \"cniVersion\" must be a string")]
    VersionNotString,
    /// The result's version (or the configuration's, if the result has none) is not supported.
    #[error("result has unsupported cniVersion {version:?}; supported: {}", version::SUPPORTED.join(", "))]
    UnsupportedVersion {
        /// The version that was found.
        version: String,
    },
    /// The fields do not fit the shape of the version family.
    #[error("result (cniVersion {version}) is malformed: {message}")]
    Shape {
        /// The result's version.
        version: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The result cannot be expressed in the requested version.
    #[error("cannot convert result from cniVersion {from} to {to}: {reason}")]
    Convert {
        /// The result's version.
        from: String,
        /// The requested version.
        to: String,
        /// Why not.
        reason: String,
    },
}
