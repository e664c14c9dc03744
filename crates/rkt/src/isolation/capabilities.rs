//! Linux capabilities of a pod's app: their names, the default set, `--caps-retain` and
//! `--caps-remove`, and narrowing a process to a set.
//!
//! The default is the set rkt and Docker give an app (14 capabilities, `CapBnd:
//! 00000000a80425fb`). Narrowing drops every other capability from the bounding set, clears
//! the ambient set, and sets the inheritable set to the set (see [`super::apply`] for the
//! order relative to the seccomp filter); at `execve` a root app then gets exactly the set
//! as permitted and effective set too. One that changes to another user loses it the usual
//! way.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::IsolationError;

/// Capability names by number (the kernel's numbering, `linux/capability.h`).
pub(super) const NAMES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The default set of rkt and Docker: what ordinary root programs (package managers, web
/// servers binding port 80, ping, su) need, and nothing that reaches the host's kernel
/// configuration, devices or other processes.
pub const DEFAULT: [&str; 14] = [
    "CAP_AUDIT_WRITE",
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_MKNOD",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_RAW",
    "CAP_SETFCAP",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_SETUID",
    "CAP_SYS_CHROOT",
];

/// A set of capabilities, bit `n` for capability number `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSet(pub u64);

impl CapSet {
    /// The default set ([`DEFAULT`]).
    pub fn default_set() -> CapSet {
        CapSet::from_names(DEFAULT.iter().copied(), "default").expect("known names")
    }

    /// The set of `names` (each `CAP_X`, case-insensitive, `CAP_` optional); `flag` names
    /// where they came from, for the error.
    pub fn from_names<'a>(
        names: impl IntoIterator<Item = &'a str>,
        flag: &str,
    ) -> Result<CapSet, IsolationError> {
        let mut set = 0u64;
        for name in names {
            set |= 1
                << number(name).ok_or_else(|| IsolationError::UnknownCapability {
                    flag: flag.to_string(),
                    name: name.to_string(),
                })?;
        }
        Ok(CapSet(set))
    }

    pub fn contains(self, cap: u8) -> bool {
        self.0 & (1 << cap) != 0
    }

    /// The names in the set, by number.
    pub fn names(self) -> Vec<String> {
        (0..NAMES.len() as u8)
            .filter(|&c| self.contains(c))
            .map(|c| NAMES[c as usize].to_string())
            .collect()
    }
}

impl fmt::Display for CapSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// The number of the capability `name` (`CAP_NET_ADMIN`, `net_admin`).
pub fn number(name: &str) -> Option<u8> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    NAMES.iter().position(|n| *n == full).map(|n| n as u8)
}

/// `--caps-retain` or `--caps-remove`, as recorded in the pod manifest (names as given,
/// checked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CapsFlag {
    /// Exactly these.
    Retain(Vec<String>),
    /// The default set minus these.
    Remove(Vec<String>),
}

impl CapsFlag {
    /// `--caps-retain=LIST` or `--caps-remove=LIST` (comma-separated names). An empty list
    /// or an unknown name is an error naming the flag and the word.
    pub fn parse(retain: bool, list: &str) -> Result<CapsFlag, IsolationError> {
        let flag = if retain {
            "--caps-retain"
        } else {
            "--caps-remove"
        };
        let names: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            return Err(IsolationError::UnknownCapability {
                flag: flag.into(),
                name: list.to_string(),
            });
        }
        CapSet::from_names(names.iter().map(String::as_str), flag)?;
        Ok(if retain {
            CapsFlag::Retain(names)
        } else {
            CapsFlag::Remove(names)
        })
    }

    /// The resulting set.
    pub fn set(&self) -> Result<CapSet, IsolationError> {
        match self {
            CapsFlag::Retain(names) => {
                CapSet::from_names(names.iter().map(String::as_str), "--caps-retain")
            }
            CapsFlag::Remove(names) => {
                let removed =
                    CapSet::from_names(names.iter().map(String::as_str), "--caps-remove")?;
                Ok(CapSet(CapSet::default_set().0 & !removed.0))
            }
        }
    }
}

/// The highest capability number the running kernel knows
/// (`/proc/sys/kernel/cap_last_cap`; 40 on kernels from 5.9 on).
pub fn last_cap() -> Result<u8, IsolationError> {
    let path = "/proc/sys/kernel/cap_last_cap";
    let text = std::fs::read_to_string(path).map_err(|source| IsolationError::Io {
        what: "read",
        path: path.into(),
        source,
    })?;
    text.trim()
        .parse()
        .map_err(|_| IsolationError::Unsupported {
            what: format!("{path} holds {text:?}, not a capability number"),
        })
}

/// `CAP_SYS_ADMIN`: loading a seccomp filter without `no_new_privs` needs it.
pub const CAP_SYS_ADMIN: u8 = 21;

/// The permitted set of the calling process (`CapPrm` of `/proc/self/status`).
pub fn held() -> Result<CapSet, IsolationError> {
    let path = "/proc/self/status";
    let text = std::fs::read_to_string(path).map_err(|source| IsolationError::Io {
        what: "read",
        path: path.into(),
        source,
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix("CapPrm:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .map(CapSet)
        .ok_or_else(|| IsolationError::Unsupported {
            what: format!("{path} shows no CapPrm line"),
        })
}

/// Checks that rkt holds every capability of `set`: a pod cannot get one its runner lacks
/// (rkt itself run in a container, say).
pub fn check_held(set: CapSet, held: CapSet) -> Result<(), IsolationError> {
    let missing = CapSet(set.0 & !held.0);
    if missing.0 == 0 {
        return Ok(());
    }
    Err(IsolationError::Unsupported {
        what: format!(
            "the app is to keep {}, which rkt itself does not hold (its permitted set is \
             {held}); pass --caps-retain or --caps-remove without them",
            missing.names().join(", ")
        ),
    })
}

pub(super) fn cap_name(cap: u8) -> String {
    NAMES
        .get(cap as usize)
        .map(|n| n.to_string())
        .unwrap_or_else(|| format!("capability {cap}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_set_is_dockers_and_rkts_mask() {
        assert_eq!(CapSet::default_set().0, 0xa80425fb);
        assert_eq!(CapSet::default_set().names().len(), 14);
        assert_eq!(CapSet::default_set().to_string(), "00000000a80425fb");
    }

    #[test]
    fn names_are_case_insensitive_and_cap_prefix_is_optional() {
        assert_eq!(number("CAP_NET_ADMIN"), Some(12));
        assert_eq!(number("net_admin"), Some(12));
        assert_eq!(number("cap_checkpoint_restore"), Some(40));
        assert_eq!(number("CAP_NET_ADMINN"), None);
    }

    #[test]
    fn retain_is_exact_and_remove_subtracts_from_the_default() {
        let retain = CapsFlag::parse(true, "CAP_NET_ADMIN,CAP_CHOWN").unwrap();
        assert_eq!(retain.set().unwrap(), CapSet((1 << 12) | 1));
        let remove = CapsFlag::parse(false, "CAP_NET_RAW").unwrap();
        assert_eq!(remove.set().unwrap().0, 0xa80425fb & !(1 << 13));
    }

    #[test]
    fn a_capability_rkt_lacks_is_refused_by_name() {
        let held = CapSet(0x1fffeffffff); // no CAP_SYS_RESOURCE (24)
        check_held(CapSet::default_set(), held).unwrap();
        let wanted = CapsFlag::parse(true, "CAP_SYS_RESOURCE,CAP_CHOWN").unwrap();
        let e = check_held(wanted.set().unwrap(), held)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("CAP_SYS_RESOURCE") && !e.contains("CAP_CHOWN"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_flag_and_word() {
        let e = CapsFlag::parse(true, "CAP_CHOWN,CAP_FLY").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("--caps-retain") && msg.contains("\"CAP_FLY\""),
            "{msg}"
        );
        let e = CapsFlag::parse(false, " , ").unwrap_err().to_string();
        assert!(e.contains("--caps-remove"), "{e}");
    }
}
