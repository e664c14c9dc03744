//! Pod isolation: what keeps a pod's app from reaching the host's kernel, devices and
//! other processes, shaped like youki's libcontainer, one module per mechanism:
//! - [`capabilities`]: the capability sets (rkt's and Docker's 14 by default,
//!   `--caps-retain`, `--caps-remove`);
//! - [`seccomp`]: the syscall filter (rkt's default blacklist, `--seccomp`);
//! - [`paths`]: masked and read-only kernel paths, `nodev` mounts;
//! - [`user`]: the app's user and groups;
//! - [`cgroups`]: resource limits, the pids limit of every pod among them, in a cgroup of
//!   the pod's own (v1 and v2);
//! - [`user_ns`]: `--private-users`, the pod's user namespace and id range;
//! - [`oom`]: `--oom-score-adj`, the app's OOM score adjustment;
//! - [`syscall`]: the calls that narrow a process, behind a trait with a recording fake.
//!
//! The app's flags are recorded in its manifest ([`Isolators`]); what a pod actually ran
//! with, after `--insecure-options` turned parts off, in its state record ([`Isolation`]),
//! which the stage, `rkt enter` and `rkt status` read. The stage sets up [`paths`] while it
//! builds the pod's mount namespace, then, in the app's process just before `execve`,
//! [`apply`] narrows capabilities and loads the filter; `rkt enter` applies the same to
//! its command.

pub mod capabilities;
pub mod cgroups;
mod error;
mod narrow;
pub mod oom;
pub mod paths;
pub mod seccomp;
pub mod syscall;
pub mod user;
pub mod user_ns;

use seccompiler::BpfProgram;
use serde::{Deserialize, Serialize};

use capabilities::{CapSet, CapsFlag};
use seccomp::SeccompSpec;
use syscall::Syscall;
use user::Identity;

pub use error::IsolationError;

/// The app's isolation flags, recorded in its manifest: `None` means the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Isolators {
    /// `--caps-retain` or `--caps-remove`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<CapsFlag>,
    /// `--seccomp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<SeccompSpec>,
    /// `--readonly-rootfs`: the app's root read-only (a host-command pod's: no private
    /// `/tmp`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub readonly_rootfs: bool,
    /// `--user`, `--group`, `--supplementary-gids`, resolved to numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// `--memory`, `--cpu`, `--cpu-shares`, `--pids-limit`: the pod's (a sandbox's, or
    /// the first app's of a pod that `rkt run` or `rkt prepare` made, given before it), or
    /// a sandbox's app's own.
    #[serde(default, skip_serializing_if = "cgroups::Limits::is_none")]
    pub limits: cgroups::Limits,
    /// `--memory`, `--cpu`, `--cpu-shares` of the app alone (rkt 1.30's per-app isolators:
    /// given after its image, or with a later app), in a cgroup `app-<name>` of its own
    /// below the pod's, which the runner makes and the app's process joins (cgroup v1).
    #[serde(default, skip_serializing_if = "cgroups::Limits::is_none")]
    pub own_limits: cgroups::Limits,
    /// `--private-users`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private_users: bool,
    /// `no_new_privs` for the app: set-user-ID programs and file capabilities give it
    /// nothing (a CRI container's `no_new_privs`, Kubernetes' `allowPrivilegeEscalation:
    /// false`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_new_privs: bool,
    /// Masked and read-only paths in place of rkt's (a CRI container's).
    #[serde(default, skip_serializing_if = "paths::KernelPaths::is_default")]
    pub kernel_paths: paths::KernelPaths,
    /// A sandbox's only: the pod stays in the IPC namespace of its runner (the host's), as
    /// a CRI pod with `ipc: NODE`; an app's own is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_ipc: bool,
    /// A sandbox's only: the pod has no PID namespace of its own, its apps see the host's
    /// processes (a CRI pod with `pid: NODE`); its init, a subreaper, starts each app's
    /// helper so that it still reaps and reports the apps ([`crate::stage::sandbox`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_pid: bool,
}

impl Isolators {
    pub fn is_default(&self) -> bool {
        self.caps.is_none()
            && self.seccomp.is_none()
            && !self.readonly_rootfs
            && self.identity.is_none()
            && self.limits.is_none()
            && self.own_limits.is_none()
            && !self.private_users
            && !self.no_new_privs
            && self.kernel_paths.is_default()
            && !self.host_ipc
            && !self.host_pid
    }

    /// Refuses, for an app's isolators, what only a sandbox sets for the whole pod: the
    /// host's IPC or PID namespace.
    pub fn check_for_app(&self) -> Result<(), IsolationError> {
        for (asked, flag, what) in [
            (self.host_ipc, "host IPC", "IPC"),
            (self.host_pid, "host PID", "PID"),
        ] {
            if asked {
                return Err(IsolationError::BadValue {
                    flag,
                    value: "an app's".into(),
                    why: format!(
                        "the host's {what} namespace is a sandbox's setting, for the whole pod"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The parts of isolation `--insecure-options` turns off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Disabled {
    pub capabilities: bool,
    pub seccomp: bool,
    pub paths: bool,
}

/// What a pod's app runs with, recorded in the pod's state (and shown by `rkt status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Isolation {
    /// The capability set, by name; `None`: all of the runner's
    /// (`--insecure-options=capabilities`).
    pub capabilities: Option<Vec<String>>,
    /// The filter; `None`: none (`--insecure-options=seccomp`).
    pub seccomp: Option<SeccompSpec>,
    /// Kernel paths masked and device nodes confined (`false`:
    /// `--insecure-options=paths`).
    pub paths: bool,
    /// The app's root filesystem is read-only (`--readonly-rootfs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub readonly_rootfs: bool,
    /// The app's user and groups; `None`: root, with rkt's groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// A non-root app keeps `capabilities` as ambient capabilities (`--caps-retain` given).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ambient: bool,
    /// Resource limits, in the pod's cgroup (`--memory`, `--cpu`, `--pids-limit`), the pids
    /// limit always written out (the default, when not given).
    #[serde(default, skip_serializing_if = "cgroups::Limits::is_none")]
    pub limits: cgroups::Limits,
    /// The pod's user namespace and its host ids (`--private-users`); set by the runner
    /// once the pod has its UUID ([`user_ns::allocate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_ns: Option<user_ns::IdMap>,
    /// `no_new_privs` is set before the app executes its program.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_new_privs: bool,
    /// The masked and read-only paths, when not rkt's (with `paths`).
    #[serde(default, skip_serializing_if = "paths::KernelPaths::is_default")]
    pub kernel_paths: paths::KernelPaths,
}

impl Default for Isolation {
    /// The defaults, all on.
    fn default() -> Self {
        Isolation::new(&Isolators::default(), Disabled::default()).expect("defaults are valid")
    }
}

impl Isolation {
    /// The app's flags with `disabled` turned off.
    pub fn new(isolators: &Isolators, disabled: Disabled) -> Result<Isolation, IsolationError> {
        let capabilities = if disabled.capabilities {
            None
        } else {
            let set = match &isolators.caps {
                Some(flag) => flag.set()?,
                None => CapSet::default_set(),
            };
            Some(set.names())
        };
        let seccomp = (!disabled.seccomp).then(|| isolators.seccomp.clone().unwrap_or_default());
        let non_root = isolators.identity.as_ref().is_some_and(|i| !i.is_root());
        let retained = matches!(isolators.caps, Some(CapsFlag::Retain(_)));
        Ok(Isolation {
            ambient: non_root && retained && capabilities.is_some(),
            capabilities,
            seccomp,
            paths: !disabled.paths,
            readonly_rootfs: isolators.readonly_rootfs,
            identity: isolators.identity.clone(),
            // What the pod runs with: the default pids limit written out.
            limits: isolators.limits.settled(),
            user_ns: None,
            no_new_privs: isolators.no_new_privs,
            kernel_paths: {
                isolators.kernel_paths.check()?;
                isolators.kernel_paths.clone()
            },
        })
    }

    /// Everything [`apply`] needs, computed before the app's process exists, so that a
    /// failure is reported before anything runs.
    pub fn prepare(&self) -> Result<Prepared, IsolationError> {
        match &self.capabilities {
            Some(_) => self.prepare_holding(capabilities::held()?),
            None => self.prepare_holding(CapSet(0)),
        }
    }

    /// [`Isolation::prepare`] for a process whose permitted set is `held`.
    fn prepare_holding(&self, held: CapSet) -> Result<Prepared, IsolationError> {
        let caps = match &self.capabilities {
            Some(names) => {
                let set =
                    CapSet::from_names(names.iter().map(String::as_str), "the pod's capabilities")?;
                capabilities::check_held(set, held)?;
                Some((set, capabilities::last_cap()?))
            }
            None => None,
        };
        let filters = match &self.seccomp {
            Some(spec) => seccomp::filter::compile(&spec.resolve()?)?,
            None => Vec::new(),
        };
        Ok(Prepared {
            caps,
            filters,
            identity: self.identity.clone(),
            ambient: self.ambient,
            no_new_privs: self.no_new_privs,
        })
    }
}

/// A compiled [`Isolation`].
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The set and the kernel's highest capability number.
    caps: Option<(CapSet, u8)>,
    /// Seccomp programs, in loading order.
    filters: Vec<BpfProgram>,
    identity: Option<Identity>,
    ambient: bool,
    no_new_privs: bool,
}

impl Prepared {
    /// Runs the app as `identity` when no `--user`/`--group` chose one (an image's `User`).
    /// Such an app gets no capabilities unless it is root, as the kernel does on `setuid`.
    pub fn default_identity(&mut self, identity: Identity) {
        if self.identity.is_none() {
            self.identity = Some(identity);
        }
    }

    /// The user and groups the app will run as; `None`: root.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }
}

/// Narrows the calling process (single-threaded, about to `execve` the app):
/// 1. drops the bounding set to the pod's set and clears the ambient set;
/// 2. with `--user`/`--group`: sets the supplementary groups, group and user (asking the
///    kernel to keep the permitted set across a change to a non-root user, for the steps
///    below);
/// 3. sets the inheritable set to the pod's set and the permitted and effective sets to it
///    plus `CAP_SYS_ADMIN` while filters are still to be loaded (loading them without
///    `no_new_privs` needs it; keeping `no_new_privs` off lets set-user-ID programs in the
///    pod work, as in Docker); a non-root app with `--caps-retain` raises the set as
///    ambient capabilities;
/// 4. with `no_new_privs` asked for, sets it;
/// 5. loads the filters.
///
/// Nothing but `execve` follows. At `execve` the kernel gives a root app permitted =
/// effective = inheritable ∪ bounding = the pod's set, and a non-root app its ambient set
/// (empty unless `--caps-retain`): no `capset` or `setuid` has to pass the filter, so a
/// whitelist needs only `execve`.
pub fn apply(sys: &dyn Syscall, prepared: &Prepared) -> Result<(), IsolationError> {
    if let Some((set, last)) = prepared.caps {
        narrow::limit_bounding(sys, set, last)?;
    }
    if let Some(id) = &prepared.identity {
        let failed = |source| IsolationError::SetIdentity {
            uid: id.uid,
            gid: id.gid,
            groups: id.supplementary_gids.clone(),
            source,
        };
        if !id.is_root() {
            sys.keep_capabilities().map_err(failed)?;
        }
        sys.set_identity(id).map_err(failed)?;
    }
    if let Some((set, _)) = prepared.caps {
        let extra = if prepared.filters.is_empty() {
            CapSet(0)
        } else {
            CapSet(1 << capabilities::CAP_SYS_ADMIN)
        };
        narrow::limit_process_sets(sys, set, extra)?;
        if prepared.ambient {
            narrow::raise_ambient(sys, set)?;
        }
    }
    if prepared.no_new_privs {
        sys.set_no_new_privs()
            .map_err(|source| IsolationError::NoNewPrivs { source })?;
    }
    for program in &prepared.filters {
        sys.load_seccomp(program)
            .map_err(|source| IsolationError::SeccompLoad { source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::syscall::test::{Call, Recorder};
    use super::*;

    /// A runner that holds every capability.
    const ALL: CapSet = CapSet(u64::MAX);

    #[test]
    fn bounding_then_ambient_then_capset_then_filters() {
        let prepared = Isolation::default().prepare_holding(ALL).unwrap();
        let sys = Recorder::default();
        apply(&sys, &prepared).unwrap();
        let calls = sys.calls.borrow();
        let last = capabilities::last_cap().unwrap();
        let default = CapSet::default_set();
        let dropped: Vec<u8> = (0..=last).filter(|c| !default.contains(*c)).collect();
        let n = dropped.len();
        assert_eq!(
            calls[..n],
            dropped
                .iter()
                .map(|&c| Call::DropBounding(c))
                .collect::<Vec<_>>()[..]
        );
        assert_eq!(calls[n], Call::ClearAmbient);
        let admin = CapSet(default.0 | 1 << capabilities::CAP_SYS_ADMIN);
        assert_eq!(calls[n + 1], Call::SetCapabilities(admin, default));
        assert!(matches!(calls[n + 2], Call::LoadSeccomp(len) if len > 50));
        assert!(matches!(calls[n + 3], Call::LoadSeccomp(8)));
        assert_eq!(calls.len(), n + 4);
    }

    #[test]
    fn no_new_privs_is_set_before_the_filters_when_asked_for() {
        let isolators = Isolators {
            no_new_privs: true,
            ..Isolators::default()
        };
        let iso = Isolation::new(&isolators, Disabled::default()).unwrap();
        let sys = Recorder::default();
        apply(&sys, &iso.prepare_holding(ALL).unwrap()).unwrap();
        let calls = sys.calls.borrow();
        let nnp = calls.iter().position(|c| *c == Call::NoNewPrivs).unwrap();
        let filter = calls
            .iter()
            .position(|c| matches!(c, Call::LoadSeccomp(_)))
            .unwrap();
        assert!(nnp < filter);
        // Not asked for: not set (set-user-ID programs work, as in Docker).
        let sys = Recorder::default();
        apply(&sys, &Isolation::default().prepare_holding(ALL).unwrap()).unwrap();
        assert!(!sys.calls.borrow().contains(&Call::NoNewPrivs));
    }

    #[test]
    fn a_user_is_set_before_the_sets_and_keeps_retained_caps_as_ambient() {
        let isolators = Isolators {
            caps: Some(CapsFlag::Retain(vec!["CAP_NET_BIND_SERVICE".into()])),
            identity: Some(Identity {
                uid: 1000,
                gid: 1000,
                supplementary_gids: vec![],
            }),
            ..Isolators::default()
        };
        let iso = Isolation::new(&isolators, Disabled::default()).unwrap();
        assert!(iso.ambient);
        let sys = Recorder::default();
        apply(&sys, &iso.prepare_holding(ALL).unwrap()).unwrap();
        let calls = sys.calls.borrow();
        let at = |c: &Call| calls.iter().position(|x| x == c).unwrap();
        let keep = at(&Call::KeepCapabilities);
        let id = at(&Call::SetIdentity(1000, 1000));
        let bind = CapSet(1 << 10);
        let admin = CapSet(bind.0 | 1 << capabilities::CAP_SYS_ADMIN);
        let sets = at(&Call::SetCapabilities(admin, bind));
        let ambient = at(&Call::RaiseAmbient(10));
        let filter = calls
            .iter()
            .position(|c| matches!(c, Call::LoadSeccomp(_)))
            .unwrap();
        assert!(at(&Call::ClearAmbient) < keep && keep < id && id < sets);
        assert!(sets < ambient && ambient < filter);
        // Without --caps-retain a non-root app keeps nothing.
        let iso = Isolation::new(
            &Isolators {
                caps: None,
                ..isolators
            },
            Disabled::default(),
        )
        .unwrap();
        assert!(!iso.ambient);
    }

    #[test]
    fn a_failing_step_stops_the_rest_and_names_itself() {
        let prepared = Isolation::default().prepare_holding(ALL).unwrap();
        let sys = Recorder {
            fail_at: Some(0),
            ..Recorder::default()
        };
        let e = apply(&sys, &prepared).unwrap_err().to_string();
        assert!(
            e.contains("drop CAP_DAC_READ_SEARCH from the bounding set"),
            "{e}"
        );
        assert_eq!(sys.calls.borrow().len(), 1);
    }

    #[test]
    fn insecure_options_turn_parts_off() {
        let all_off = Disabled {
            capabilities: true,
            seccomp: true,
            paths: true,
        };
        let iso = Isolation::new(&Isolators::default(), all_off).unwrap();
        assert_eq!(
            iso,
            Isolation {
                capabilities: None,
                seccomp: None,
                paths: false,
                readonly_rootfs: false,
                identity: None,
                ambient: false,
                limits: cgroups::Limits::default().settled(),
                user_ns: None,
                no_new_privs: false,
                kernel_paths: Default::default(),
            }
        );
        let sys = Recorder::default();
        apply(&sys, &iso.prepare_holding(ALL).unwrap()).unwrap();
        assert!(sys.calls.borrow().is_empty());
        let only_caps = Disabled {
            seccomp: true,
            paths: true,
            ..Disabled::default()
        };
        let iso = Isolation::new(&Isolators::default(), only_caps).unwrap();
        assert_eq!(iso.capabilities.as_ref().unwrap().len(), 14);
        // Without filters to load, CAP_SYS_ADMIN is not kept until execve.
        let sys = Recorder::default();
        apply(&sys, &iso.prepare_holding(ALL).unwrap()).unwrap();
        let default = CapSet::default_set();
        let calls = sys.calls.borrow();
        assert_eq!(calls.last(), Some(&Call::SetCapabilities(default, default)));
    }
}
