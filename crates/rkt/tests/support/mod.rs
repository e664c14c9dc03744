//! Shared helpers of the `rkt` integration tests: run the real binary as a user would,
//! then assert on its exit status and output.
//!
//! ```ignore
//! mod support;
//! let out = support::rkt(&["config", "--local-config", dir]).run();
//! out.assert_success().assert_stdout_contains("\"net-conf\"");
//! ```

#![allow(dead_code)] // Each test file uses its own subset of these helpers.

pub mod config_tree;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// A command line for the `rkt` binary under test.
pub struct Rkt {
    command: Command,
    shown: String,
}

/// `rkt <args>`, run in the current directory with the inherited environment.
pub fn rkt<S: AsRef<OsStr>>(args: &[S]) -> Rkt {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rkt"));
    command.args(args);
    let shown = std::iter::once("rkt".to_owned())
        .chain(
            args.iter()
                .map(|arg| arg.as_ref().to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    Rkt { command, shown }
}

impl Rkt {
    /// Adds more arguments.
    pub fn args<S: AsRef<OsStr>>(mut self, args: &[S]) -> Rkt {
        for arg in args {
            self.shown.push(' ');
            self.shown.push_str(&arg.as_ref().to_string_lossy());
        }
        self.command.args(args);
        self
    }

    /// Runs in `dir` instead of the current directory.
    pub fn current_dir(mut self, dir: &Path) -> Rkt {
        self.command.current_dir(dir);
        self
    }

    /// Sets an environment variable for the run.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Rkt {
        self.command.env(key, value);
        self
    }

    /// The underlying command, for what this builder does not cover (a `pre_exec` that
    /// enters a namespace, say).
    pub fn command_mut(&mut self) -> &mut Command {
        &mut self.command
    }

    /// Runs the command to completion and captures its output.
    pub fn run(mut self) -> Outcome {
        let output = self
            .command
            .output()
            .unwrap_or_else(|err| panic!("cannot run `{}`: {err}", self.shown));
        Outcome {
            shown: self.shown,
            output,
        }
    }
}

/// The result of one run of `rkt`.
pub struct Outcome {
    shown: String,
    pub output: Output,
}

impl Outcome {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The exit code (`None` if killed by a signal).
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn describe(&self) -> String {
        format!(
            "`{}` exited with {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.shown,
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }

    pub fn assert_exit_code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code(),
            Some(expected),
            "unexpected exit code\n{}",
            self.describe()
        );
        self
    }

    pub fn assert_success(&self) -> &Self {
        self.assert_exit_code(0)
    }

    /// rkt's own failures exit with 254.
    pub fn assert_failure(&self) -> &Self {
        self.assert_exit_code(254)
    }

    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stdout().contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }

    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stderr().contains(needle),
            "stderr lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }

    pub fn assert_stderr_lacks(&self, needle: &str) -> &Self {
        assert!(
            !self.stderr().contains(needle),
            "stderr has {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Parses stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout())
            .unwrap_or_else(|err| panic!("stdout is not JSON: {err}\n{}", self.describe()))
    }
}

/// The `cni-test-plugin` binary, built once per test process on first use.
pub fn test_plugin() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let status = Command::new(env!("CARGO"))
                .args(["build", "-q", "-p", "cni-test-plugin"])
                .status()
                .expect("run cargo build for cni-test-plugin");
            assert!(status.success(), "cargo build -p cni-test-plugin failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
            let plugin = target.join("debug").join("cni-test-plugin");
            assert!(plugin.is_file(), "no test plugin at {}", plugin.display());
            plugin
        })
        .clone()
}
