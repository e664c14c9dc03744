//! Where a configuration came from and why it could not be loaded: [`Origin`] and
//! [`ConfError`], whose every variant names the file at fault.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::validate::ValidateError;
use crate::version::VersionError;

/// Where a configuration came from: a file, or bytes handed over by a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin(pub Option<PathBuf>);

impl Origin {
    pub(crate) fn of(p: Option<&Path>) -> Origin {
        Origin(p.map(Path::to_path_buf))
    }

    /// The file, if the configuration came from one.
    pub fn path(&self) -> Option<&Path> {
        self.0.as_deref()
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(p) => write!(f, "{}", p.display()),
            None => f.write_str("<network configuration>"),
        }
    }
}

/// `plugin 2 of network "n"`, or `the plugin` for a plugin parsed on its own.
fn which_plugin(index: usize, network: &str) -> String {
    if network.is_empty() {
        "the plugin".to_string()
    } else {
        format!("plugin {index} of network {network:?}")
    }
}

/// A configuration that could not be loaded. Every variant says which file.
#[derive(Debug, thiserror::Error)]
pub enum ConfError {
    /// The file or directory could not be read.
    #[error("{origin}: cannot read")]
    Read {
        /// The file or directory.
        origin: Origin,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON (or not UTF-8, or nested too deeply).
    #[error("{origin}: invalid JSON at line {line}, column {column}: {message}")]
    Json {
        /// The file.
        origin: Origin,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What serde_json found wrong, without its position suffix.
        message: String,
    },
    /// The top level, or a plugin entry, is not a JSON object.
    #[error("{origin}: {what} must be a JSON object, found {found}")]
    NotAnObject {
        /// The file.
        origin: Origin,
        /// "the configuration" or "plugins\[2\]".
        what: String,
        /// The JSON kind that was found.
        found: &'static str,
    },
    /// A field has the wrong JSON type.
    #[error("{origin}: field {field:?} must be {expected}, found {found}")]
    FieldType {
        /// The file.
        origin: Origin,
        /// The field, e.g. `cniVersion` or `plugins[1].capabilities.portMappings`.
        field: String,
        /// The expected type.
        expected: &'static str,
        /// What was there.
        found: String,
    },
    /// A version field that is not `MAJOR.MINOR.PATCH`.
    #[error("{origin}: field {field:?}")]
    InvalidVersion {
        /// The file.
        origin: Origin,
        /// `cniVersion` or `cniVersions[i]`.
        field: String,
        /// What is wrong with it.
        source: VersionError,
    },
    /// A `.conf`/`.json` file that holds a configuration list.
    #[error("{origin}: has \"plugins\" but no \"type\": a network configuration list must be in a .conflist file")]
    ListInSingleFile {
        /// The file.
        origin: Origin,
    },
    /// The network has no `name`.
    #[error("{origin}: missing network name (field \"name\")")]
    MissingName {
        /// The file.
        origin: Origin,
    },
    /// The network name breaks the naming rule.
    #[error("{origin}")]
    InvalidName {
        /// The file.
        origin: Origin,
        /// The rule it breaks.
        source: ValidateError,
    },
    /// A plugin object has no `type`.
    #[error("{origin}: {} has no \"type\"", which_plugin(*index, network))]
    MissingType {
        /// The file.
        origin: Origin,
        /// The network; empty for a plugin parsed on its own ([`super::parse_plugin`]).
        network: String,
        /// Position in the `plugins` array (0-based).
        index: usize,
    },
    /// A plugin's `type` could name a file outside the plugin directories.
    #[error("{origin}: {}", which_plugin(*index, network))]
    InvalidType {
        /// The file.
        origin: Origin,
        /// The network; empty for a plugin parsed on its own ([`super::parse_plugin`]).
        network: String,
        /// Position in the `plugins` array (0-based).
        index: usize,
        /// The rule it breaks.
        source: ValidateError,
    },
    /// The list has no plugins at all (neither inlined nor aggregated).
    #[error("{origin}: network {network:?} has no plugins")]
    NoPlugins {
        /// The file.
        origin: Origin,
        /// The network.
        network: String,
    },
    /// `loadOnlyInlinedPlugins` is true but there is no `plugins` key.
    #[error("{origin}: network {network:?} sets loadOnlyInlinedPlugins but has no \"plugins\"")]
    InlinedWithoutPlugins {
        /// The file.
        origin: Origin,
        /// The network.
        network: String,
    },
    /// The file's extension is none of `.conflist`, `.conf`, `.json`.
    #[error("{origin}: not a network configuration file (expected .conflist, .conf or .json)")]
    UnknownExtension {
        /// The file.
        origin: Origin,
    },
}

impl ConfError {
    /// The file the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ConfError::Read { origin, .. }
            | ConfError::Json { origin, .. }
            | ConfError::NotAnObject { origin, .. }
            | ConfError::FieldType { origin, .. }
            | ConfError::InvalidVersion { origin, .. }
            | ConfError::ListInSingleFile { origin }
            | ConfError::MissingName { origin }
            | ConfError::InvalidName { origin, .. }
            | ConfError::MissingType { origin, .. }
            | ConfError::InvalidType { origin, .. }
            | ConfError::NoPlugins { origin, .. }
            | ConfError::InlinedWithoutPlugins { origin, .. }
            | ConfError::UnknownExtension { origin } => origin.path(),
        }
    }
}
