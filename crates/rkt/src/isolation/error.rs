//! The errors of pod isolation, apart from the mechanisms so that each of them (and the
//! recording fake of [`super::syscall`]) can take them without depending on the room's
//! top, which takes the mechanisms.

use std::path::PathBuf;

use nix::errno::Errno;

/// What can go wrong isolating an app. Each variant names the flag, path or call at fault.
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error("{flag}: unknown capability {name:?} (expected names like CAP_NET_ADMIN)")]
    UnknownCapability { flag: String, name: String },
    #[error("--seccomp={value}: {why}")]
    Seccomp { value: String, why: String },
    #[error("cannot {what}")]
    Capability { what: String, source: Errno },
    #[error("cannot load the seccomp filter{}", seccomp_hint(*source))]
    SeccompLoad { source: Errno },
    #[error("cannot set no_new_privs")]
    NoNewPrivs { source: Errno },
    #[error("cannot mount over {target}")]
    Mount { target: PathBuf, source: Errno },
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what}")]
    Unsupported { what: String },
    #[error("{flag}={value}: {why}")]
    BadValue {
        flag: &'static str,
        value: String,
        why: String,
    },
    #[error("cannot run the app as uid {uid}, gid {gid}, groups {groups:?}")]
    SetIdentity {
        uid: u32,
        gid: u32,
        groups: Vec<u32>,
        source: Errno,
    },
}

fn seccomp_hint(errno: Errno) -> &'static str {
    if errno == Errno::EINVAL {
        " (this kernel may lack seccomp filters, CONFIG_SECCOMP_FILTER; pass \
         --insecure-options=seccomp to run without)"
    } else {
        ""
    }
}
