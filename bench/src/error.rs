//! What can go wrong while benchmarking. Every variant names the program, file or scenario
//! it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The benchmark creates network namespaces and runs plugins.
    #[error("the benchmark must run as root (it creates network namespaces and runs CNI plugins)")]
    NotRoot,
    /// A program or file the benchmark needs is not there.
    #[error("{what} not found at {}: {hint}", path.display())]
    Missing {
        what: &'static str,
        path: PathBuf,
        hint: &'static str,
    },
    /// A program could not be started.
    #[error("cannot run {program}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    /// A program ran but failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: String,
        stderr: String,
    },
    /// Reading or writing a file of the benchmark failed.
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A scenario produced something it must not (a missing address, a bad answer).
    #[error("{scenario}: {message}")]
    Scenario {
        scenario: &'static str,
        message: String,
    },
    /// Following a process tree with ptrace (for peak RSS) failed.
    #[error("tracing {program} for its peak RSS")]
    Trace {
        program: String,
        source: std::io::Error,
    },
    /// SIGINT, SIGTERM or SIGHUP arrived; the run stops and cleans up.
    #[error("interrupted")]
    Interrupted,
}

impl BenchError {
    /// A [`BenchError::Scenario`]: `scenario` produced something it must not.
    pub fn scenario(scenario: &'static str, message: impl Into<String>) -> BenchError {
        BenchError::Scenario {
            scenario,
            message: message.into(),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }
}
