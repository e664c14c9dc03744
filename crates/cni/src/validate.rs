//! Validation of the names a runtime passes to plugins: container IDs, network names,
//! interface names and plugin types. Invalid values are rejected before any plugin runs,
//! so a name can never smuggle a path or a separator into a plugin's environment.

use crate::types::codes;

/// A value that breaks one of the naming rules. The message names the value and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidateError {
    /// A container ID that is empty or has characters outside the allowed set.
    #[error("invalid container ID {id:?}: {rule}")]
    ContainerId {
        /// The rejected ID.
        id: String,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A network name that is empty or has characters outside the allowed set.
    #[error("invalid network name {name:?}: {rule}")]
    NetworkName {
        /// The rejected name.
        name: String,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// An interface name the kernel would not accept.
    #[error("invalid interface name {name:?}: {rule}")]
    InterfaceName {
        /// The rejected name.
        name: String,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// A plugin type that is empty or could name a file outside the plugin directories.
    #[error("invalid plugin type {plugin_type:?}: {rule}")]
    PluginType {
        /// The rejected type.
        plugin_type: String,
        /// The rule it breaks.
        rule: &'static str,
    },
}

impl ValidateError {
    /// The CNI error code libcni gives the same mistake: 3 (unknown container) for a
    /// missing container ID, 4 (invalid environment variables) for a malformed container
    /// ID or interface name, 7 (invalid network configuration) for a network name.
    /// Plugin types get none (libcni reports them without a code).
    pub fn code(&self) -> Option<u32> {
        match self {
            ValidateError::ContainerId { id, .. } if id.is_empty() => {
                Some(codes::UNKNOWN_CONTAINER)
            }
            ValidateError::ContainerId { .. } | ValidateError::InterfaceName { .. } => {
                Some(codes::INVALID_ENVIRONMENT)
            }
            ValidateError::NetworkName { .. } => Some(codes::INVALID_CONFIG),
            ValidateError::PluginType { .. } => None,
        }
    }
}

const NAME_EMPTY: &str = "must not be empty";
const NAME_CHARS: &str =
    "must start with a letter or digit and contain only letters, digits, '_', '.' and '-'";

/// Maximum interface name length in bytes (Linux `IFNAMSIZ` minus the NUL).
pub const MAX_INTERFACE_NAME: usize = 15;

/// The rule shared by container IDs and network names: `^[A-Za-z0-9][A-Za-z0-9_.\-]*$`.
fn name_rule(s: &str) -> Result<(), &'static str> {
    let mut bytes = s.bytes();
    match bytes.next() {
        None => return Err(NAME_EMPTY),
        Some(b) if !b.is_ascii_alphanumeric() => return Err(NAME_CHARS),
        Some(_) => {}
    }
    if bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) {
        Ok(())
    } else {
        Err(NAME_CHARS)
    }
}

/// Checks a container ID (`CNI_CONTAINERID`) against `^[A-Za-z0-9][A-Za-z0-9_.\-]*$`.
pub fn container_id(id: &str) -> Result<(), ValidateError> {
    name_rule(id).map_err(|rule| ValidateError::ContainerId {
        id: id.to_string(),
        rule,
    })
}

/// Checks a network name against `^[A-Za-z0-9][A-Za-z0-9_.\-]*$`.
pub fn network_name(n: &str) -> Result<(), ValidateError> {
    name_rule(n).map_err(|rule| ValidateError::NetworkName {
        name: n.to_string(),
        rule,
    })
}

/// Checks an interface name (`CNI_IFNAME`): 1 to 15 bytes, not `.` or `..`, and no
/// `/`, `:` or whitespace.
pub fn interface_name(n: &str) -> Result<(), ValidateError> {
    let rule = if n.is_empty() {
        Some(NAME_EMPTY)
    } else if n.len() > MAX_INTERFACE_NAME {
        Some("must be at most 15 bytes long")
    } else if n == "." || n == ".." {
        Some("must not be \".\" or \"..\"")
    } else if n.chars().any(|c| c == '/' || c == ':' || c.is_whitespace()) {
        Some("must not contain '/', ':' or whitespace")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(ValidateError::InterfaceName {
            name: n.to_string(),
            rule,
        }),
        None => Ok(()),
    }
}

/// Checks a plugin `type`: a bare file name, so non-empty, without `/`, `..` or NUL.
pub fn plugin_type(t: &str) -> Result<(), ValidateError> {
    let rule = if t.is_empty() {
        Some(NAME_EMPTY)
    } else if t.contains('/') {
        Some("must be a file name without '/'")
    } else if t.contains("..") {
        Some("must not contain \"..\"")
    } else if t.contains('\0') {
        Some("must not contain NUL")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(ValidateError::PluginType {
            plugin_type: t.to_string(),
            rule,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids() {
        for ok in [
            "a",
            "0",
            "abc-123_x.y",
            "A.",
            "f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
        ] {
            container_id(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        for bad in ["", "-a", "_a", ".a", "a b", "a/b", "a:b", "é", "a\n", "a\0"] {
            let err = container_id(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn network_names_follow_same_rule() {
        network_name("default-restricted").unwrap();
        network_name("10.net").unwrap();
        let err = network_name("../etc").unwrap_err();
        assert_eq!(
            err,
            ValidateError::NetworkName {
                name: "../etc".into(),
                rule: NAME_CHARS
            }
        );
        assert!(err.to_string().contains("letters, digits"));
        assert!(network_name("").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn interface_names() {
        interface_name("eth0").unwrap();
        interface_name("a").unwrap();
        interface_name("..a").unwrap();
        interface_name(&"x".repeat(15)).unwrap();
        let err = interface_name(&"x".repeat(16)).unwrap_err();
        assert!(err.to_string().contains("15 bytes"), "{err}");
        // 15 characters but more than 15 bytes.
        assert!(interface_name(&"é".repeat(8)).is_err());
        for bad in ["", ".", "..", "a:b", "a b", "a/b", "a\tb", "a\u{a0}b"] {
            assert!(interface_name(bad).is_err(), "{bad:?}");
        }
    }

    /// The codes libcni's `ValidateContainerID`, `ValidateNetworkName` and
    /// `ValidateInterfaceName` return for the same mistakes.
    #[test]
    fn codes_match_libcni() {
        assert_eq!(container_id("").unwrap_err().code(), Some(3));
        assert_eq!(container_id("a/b").unwrap_err().code(), Some(4));
        assert_eq!(network_name("").unwrap_err().code(), Some(7));
        assert_eq!(network_name("../x").unwrap_err().code(), Some(7));
        assert_eq!(interface_name("").unwrap_err().code(), Some(4));
        assert_eq!(interface_name(&"x".repeat(16)).unwrap_err().code(), Some(4));
        assert_eq!(plugin_type("a/b").unwrap_err().code(), None);
    }

    #[test]
    fn plugin_types() {
        plugin_type("bridge").unwrap();
        plugin_type("host-local").unwrap();
        plugin_type("a.b").unwrap();
        for bad in [
            "",
            "/bin/sh",
            "../../bin/sh",
            "..",
            "a..b",
            "sub/dir",
            "a\0b",
        ] {
            let err = plugin_type(bad).unwrap_err();
            assert!(matches!(err, ValidateError::PluginType { .. }), "{bad:?}");
        }
        assert!(plugin_type("/bin/sh")
            .unwrap_err()
            .to_string()
            .contains("'/'"));
    }
}
