//! Running a binary as a user would, then asserting on its exit status and output
//! (ripgrep's `tests/util.rs`): a failed assertion shows the command line, the exit code and
//! both streams.
//!
//! ```ignore
//! let out = test_kit::Rkt::new(env!("CARGO_BIN_EXE_rkt")).args(&["config"]).run();
//! out.assert_success().assert_stdout_contains("\"net-conf\"");
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `command` to completion with `input` written to its stdin (then closed), stdout and
/// stderr captured.
pub fn output_with_stdin(command: &mut Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", command.get_program()));
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// A command line for the `rkt` binary under test, built up then [run](Rkt::run).
pub struct Rkt {
    command: Command,
    shown: String,
}

impl Rkt {
    /// `rkt`, the binary at `program` (shown as `rkt` in messages), with no argument yet,
    /// run in the current directory with the inherited environment.
    pub fn new(program: impl AsRef<OsStr>) -> Rkt {
        Rkt {
            command: Command::new(program),
            shown: "rkt".to_owned(),
        }
    }

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
    /// The exit status and the captured streams.
    pub output: Output,
}

impl Outcome {
    /// What the command wrote to stdout (lossy UTF-8).
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// What the command wrote to stderr (lossy UTF-8).
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

    /// Panics, showing the command and its output, unless it exited with `expected`.
    pub fn assert_exit_code(&self, expected: i32) -> &Self {
        assert_eq!(
            self.code(),
            Some(expected),
            "unexpected exit code\n{}",
            self.describe()
        );
        self
    }

    /// Panics unless the command exited with 0.
    pub fn assert_success(&self) -> &Self {
        self.assert_exit_code(0)
    }

    /// rkt's own failures exit with 254.
    pub fn assert_failure(&self) -> &Self {
        self.assert_exit_code(254)
    }

    /// Panics unless stdout contains `needle`.
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stdout().contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Panics unless stderr contains `needle`.
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stderr().contains(needle),
            "stderr lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Panics if stderr contains `needle`.
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
