//! Where a configuration value came from, so errors and `rkt config --show-origin`
//! can answer "why is rkt looking there?".

use std::fmt;
use std::path::PathBuf;

/// The source of a configuration value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Built into rkt; nobody set it.
    Default,
    /// Set in this configuration file.
    File(PathBuf),
    /// Set on the command line by this flag (for example `--net-conf-dir`).
    Flag(&'static str),
    /// Set by this environment variable.
    Env(&'static str),
}

impl Origin {
    /// Whether somebody set the value (in a file or with a flag), as opposed to a default.
    pub fn is_explicit(&self) -> bool {
        !matches!(self, Origin::Default)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Env(var) => write!(f, "environment ${var}"),
        }
    }
}

/// A value together with the place it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T> Value<T> {
    pub fn new(value: T, origin: Origin) -> Self {
        Value { value, origin }
    }

    /// A value that nobody set.
    pub fn defaulted(value: T) -> Self {
        Value::new(value, Origin::Default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_display_as_rkt_config_shows_them() {
        assert_eq!(Origin::Default.to_string(), "default");
        assert_eq!(
            Origin::File(PathBuf::from("/etc/rkt/paths.d/a.json")).to_string(),
            "/etc/rkt/paths.d/a.json"
        );
        assert_eq!(
            Origin::Flag("--net-conf-dir").to_string(),
            "flag --net-conf-dir"
        );
    }

    #[test]
    fn only_defaults_are_implicit() {
        assert!(!Origin::Default.is_explicit());
        assert!(Origin::Flag("--dir").is_explicit());
        assert!(Origin::File(PathBuf::from("/a.json")).is_explicit());
    }
}
