//! The app's seccomp filter: `--seccomp=mode=retain|remove[,errno=ENAME],SYSCALL|@GROUP,…`
//! (rkt's syntax), the default, and turning a spec into BPF programs ([`filter`]).
//!
//! - `mode=remove`: the listed calls fail, everything else is allowed (a blacklist);
//!   `mode=retain`: only the listed calls are allowed (a whitelist).
//! - `errno=ENAME`: what a refused call returns (default `EPERM`, as rkt); never a signal.
//! - Groups are rkt's ([`groups::GROUPS`]); an unknown group or a syscall this
//!   architecture does not have is an error naming it.
//!
//! The default is `mode=remove,@rkt/default-blacklist`. Under every filter, `clone` may
//! not create a user namespace (the one namespace an app without `CAP_SYS_ADMIN` could
//! still make, and with it a root of its own), and `clone3`, whose flags a filter cannot
//! read, fails with `ENOSYS` so that the C library falls back to `clone`; `personality` is
//! allowed only with Docker's values ([`filter::PERSONALITY_ALLOWED`]).

pub mod filter;
pub mod groups;

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::IsolationError;

/// Blacklist or whitelist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Only the set is allowed.
    Retain,
    /// The set is refused.
    Remove,
}

/// A `--seccomp` value, as recorded in the pod (groups not expanded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeccompSpec {
    pub mode: Mode,
    /// The errno name refused calls return; `None` means `EPERM`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// Syscall names and `@groups`, as given.
    pub set: Vec<String>,
}

/// The errno of a refused call when the spec names none.
pub const DEFAULT_ERRNO: &str = "EPERM";

impl Default for SeccompSpec {
    /// rkt's default blacklist, refused with `EPERM`.
    fn default() -> Self {
        SeccompSpec {
            mode: Mode::Remove,
            errno: None,
            set: vec!["@rkt/default-blacklist".into()],
        }
    }
}

impl fmt::Display for SeccompSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.mode {
            Mode::Retain => "retain",
            Mode::Remove => "remove",
        };
        write!(f, "mode={mode}")?;
        if let Some(errno) = &self.errno {
            write!(f, ",errno={errno}")?;
        }
        for item in &self.set {
            write!(f, ",{item}")?;
        }
        Ok(())
    }
}

/// A spec with its groups expanded and names turned into numbers for this architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub mode: Mode,
    pub errno: u32,
    pub syscalls: BTreeSet<i64>,
}

impl SeccompSpec {
    /// Parses a `--seccomp` value and checks every name (see [`SeccompSpec::resolve`]).
    pub fn parse(text: &str) -> Result<SeccompSpec, IsolationError> {
        let bad = |why: String| IsolationError::Seccomp {
            value: text.to_string(),
            why,
        };
        let mut mode = None;
        let mut errno = None;
        let mut set = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if let Some(m) = item.strip_prefix("mode=") {
                mode = Some(match m {
                    "retain" => Mode::Retain,
                    "remove" => Mode::Remove,
                    other => {
                        return Err(bad(format!(
                            "unknown mode {other:?} (expected retain or remove)"
                        )))
                    }
                });
            } else if let Some(e) = item.strip_prefix("errno=") {
                errno = Some(e.to_string());
            } else {
                set.push(item.to_string());
            }
        }
        let mode =
            mode.ok_or_else(|| bad("no mode= (expected mode=retain or mode=remove)".into()))?;
        if set.is_empty() {
            return Err(bad("no syscall or @group listed".into()));
        }
        let spec = SeccompSpec { mode, errno, set };
        spec.resolve().map_err(|e| match e {
            IsolationError::Seccomp { why, .. } => bad(why),
            other => other,
        })?;
        Ok(spec)
    }

    /// Expands the groups and looks every name up for the architecture rkt was built for.
    pub fn resolve(&self) -> Result<Resolved, IsolationError> {
        let bad = |why: String| IsolationError::Seccomp {
            value: self.to_string(),
            why,
        };
        let errno_name = self.errno.as_deref().unwrap_or(DEFAULT_ERRNO);
        let errno = errno_number(errno_name).ok_or_else(|| {
            bad(format!(
                "unknown errno {errno_name:?} (expected e.g. EPERM)"
            ))
        })?;
        let mut syscalls = BTreeSet::new();
        for item in &self.set {
            if item.starts_with('@') {
                let members = groups::members(item).ok_or_else(|| {
                    bad(format!(
                        "unknown group {item:?} (known: {})",
                        groups::GROUPS.join(", ")
                    ))
                })?;
                // A group lists the calls of every architecture; keep this one's.
                syscalls.extend(members.into_iter().filter_map(syscall_number));
            } else {
                let nr = syscall_number(item).ok_or_else(|| {
                    bad(format!(
                        "unknown syscall {item:?} (not a system call of {})",
                        std::env::consts::ARCH
                    ))
                })?;
                syscalls.insert(nr);
            }
        }
        let execve = syscall_number("execve").expect("every architecture has execve");
        if self.mode == Mode::Retain && !syscalls.contains(&execve) {
            return Err(bad(
                "a retain list must allow execve, or the app cannot start".into(),
            ));
        }
        Ok(Resolved {
            mode: self.mode,
            errno,
            syscalls,
        })
    }
}

/// The number of syscall `name` on this architecture.
pub fn syscall_number(name: &str) -> Option<i64> {
    syscalls::Sysno::from_str(name).ok().map(|s| s.id() as i64)
}

/// The number of errno `name` (`EPERM`, `ENOSYS`, ...).
pub fn errno_number(name: &str) -> Option<u32> {
    (1..4096).find_map(|n| (syscalls::Errno::new(n).name() == Some(name)).then_some(n as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_rkts_blacklist_with_eperm() {
        let r = SeccompSpec::default().resolve().unwrap();
        assert_eq!(r.mode, Mode::Remove);
        assert_eq!(r.errno, libc::EPERM as u32);
        for name in [
            "keyctl",
            "reboot",
            "finit_module",
            "mount",
            "unshare",
            "setns",
            "bpf",
        ] {
            assert!(
                r.syscalls.contains(&syscall_number(name).unwrap()),
                "{name}"
            );
        }
        assert!(!r.syscalls.contains(&syscall_number("read").unwrap()));
        assert!(!r.syscalls.contains(&syscall_number("clone").unwrap()));
    }

    #[test]
    fn flags_parse_as_rkt_wrote_them() {
        let s = SeccompSpec::parse("mode=retain,errno=ENOSYS,@docker/default-whitelist,keyctl")
            .unwrap();
        assert_eq!(s.mode, Mode::Retain);
        let r = s.resolve().unwrap();
        assert_eq!(r.errno, libc::ENOSYS as u32);
        assert!(r.syscalls.contains(&syscall_number("keyctl").unwrap()));
        assert!(r.syscalls.contains(&syscall_number("statx").unwrap()));
        assert_eq!(
            s.to_string(),
            "mode=retain,errno=ENOSYS,@docker/default-whitelist,keyctl"
        );
    }

    #[test]
    fn unknown_names_are_errors_naming_them() {
        let err = |t: &str| SeccompSpec::parse(t).unwrap_err().to_string();
        let e = err("mode=remove,keyctl,frobnicate");
        assert!(e.contains("unknown syscall \"frobnicate\""), "{e}");
        assert!(e.contains("--seccomp="), "{e}");
        let e = err("mode=remove,@rkt/everything");
        assert!(e.contains("unknown group \"@rkt/everything\""), "{e}");
        let e = err("mode=remove,errno=EWHAT,keyctl");
        assert!(e.contains("\"EWHAT\""), "{e}");
        let e = err("mode=maybe,keyctl");
        assert!(e.contains("\"maybe\""), "{e}");
        let e = err("keyctl");
        assert!(e.contains("mode="), "{e}");
        let e = err("mode=remove");
        assert!(e.contains("no syscall"), "{e}");
        let e = err("mode=retain,read,exit_group");
        assert!(e.contains("must allow execve"), "{e}");
    }
}
