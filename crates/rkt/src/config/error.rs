//! Errors of the configuration: every variant names the file, field or flag it is about.

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::origin::Origin;

/// What went wrong while loading the configuration or resolving a directory.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "${var}={value:?}: expected a whole number of at least 1 (network operations at once)"
    )]
    BadEnvCount { var: &'static str, value: String },

    #[error("cannot list configuration directory {}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("cannot read configuration file {}", path.display())]
    ReadFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The parser's message (with line and column) is part of this one, so it is not a
    /// `source` too: a caller printing the chain would show it twice.
    #[error("{}: malformed JSON: {reason}", path.display())]
    Json {
        path: PathBuf,
        reason: serde_json::Error,
    },

    #[error("{}: expected a JSON object, found {found}", path.display())]
    NotAnObject { path: PathBuf, found: &'static str },

    #[error("{}: required field \"{field}\" is missing", path.display())]
    MissingField { path: PathBuf, field: &'static str },

    #[error("{}: field \"{field}\" must not be empty", path.display())]
    EmptyField { path: PathBuf, field: &'static str },

    #[error("{}: field \"{field}\" must be {expected}, found {found}", path.display())]
    WrongType {
        path: PathBuf,
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },

    #[error(
        "{}: unknown configuration rktKind \"{kind}\" with rktVersion \"{version}\" \
         (files in paths.d must be rktKind \"paths\", rktVersion \"v1\")",
        path.display()
    )]
    UnknownKind {
        path: PathBuf,
        kind: String,
        version: String,
    },

    #[error(
        "{}: field \"{field}\" must be an absolute path, found \"{}\"",
        path.display(),
        value.display()
    )]
    RelativePath {
        path: PathBuf,
        field: &'static str,
        value: PathBuf,
    },

    #[error(
        "field \"{field}\" is set both in {} and in {} (within one configuration directory \
         a field may be set only once)",
        first.display(),
        second.display()
    )]
    Duplicate {
        field: &'static str,
        first: PathBuf,
        second: PathBuf,
    },

    #[error("{}: {problem}", describe_setting(field, dir, origin))]
    Dir {
        /// The configuration field the directory is for (`net-conf`, `data`, ...).
        field: &'static str,
        dir: PathBuf,
        origin: Origin,
        problem: DirProblem,
    },
}

/// Why an explicitly set directory cannot be used.
#[derive(Debug)]
pub enum DirProblem {
    Missing,
    NotADirectory,
    Inaccessible(io::Error),
}

impl fmt::Display for DirProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirProblem::Missing => f.write_str("no such directory"),
            DirProblem::NotADirectory => f.write_str("not a directory"),
            DirProblem::Inaccessible(err) => write!(f, "cannot access: {err}"),
        }
    }
}

/// `--net-conf-dir /x`, or `net-conf /x (set in /etc/rkt/paths.d/a.json)`.
fn describe_setting(field: &str, dir: &std::path::Path, origin: &Origin) -> String {
    match origin {
        Origin::Flag(flag) => format!("{flag} {}", dir.display()),
        Origin::File(file) => format!("{field} {} (set in {})", dir.display(), file.display()),
        Origin::Default => format!("{field} {} (default)", dir.display()),
        Origin::Env(var) => format!("${var} {}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_errors_say_where_the_directory_was_set() {
        let flag = ConfigError::Dir {
            field: "net-conf",
            dir: PathBuf::from("/x"),
            origin: Origin::Flag("--net-conf-dir"),
            problem: DirProblem::Missing,
        };
        assert_eq!(flag.to_string(), "--net-conf-dir /x: no such directory");

        let file = ConfigError::Dir {
            field: "net-conf",
            dir: PathBuf::from("/x"),
            origin: Origin::File(PathBuf::from("/etc/rkt/paths.d/a.json")),
            problem: DirProblem::NotADirectory,
        };
        assert_eq!(
            file.to_string(),
            "net-conf /x (set in /etc/rkt/paths.d/a.json): not a directory"
        );
    }
}
