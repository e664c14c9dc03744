//! The app's isolation flags (`run`, `prepare`), rkt's names and syntax; flattened into
//! the app options. What they mean: [`rkt::isolation`] and docs/isolation.md.

use clap::Args;

use super::on_off::OnOff;
use rkt::image_pod::user::{accounts, AppRoot};
use rkt::isolation::capabilities::CapsFlag;
use rkt::isolation::seccomp::SeccompSpec;
use rkt::isolation::{cgroups, user, Isolators};

/// Capabilities, seccomp filter, read-only root, identity and resource limits of the app.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Isolation")]
pub struct IsolationArgs {
    /// Give the app exactly these capabilities (comma-separated, e.g.
    /// CAP_NET_ADMIN,CAP_CHOWN) instead of the default 14 (rkt's and Docker's).
    #[arg(long, value_name = "CAP[,CAP...]", conflicts_with = "caps_remove")]
    pub caps_retain: Option<String>,

    /// Take these capabilities out of the default 14.
    #[arg(long, value_name = "CAP[,CAP...]")]
    pub caps_remove: Option<String>,

    /// The app's seccomp filter instead of the default
    /// (mode=remove,@rkt/default-blacklist): `mode=remove` refuses the listed calls,
    /// `mode=retain` allows only them; refused calls fail with errno (default EPERM).
    /// Groups: @rkt/default-blacklist, @rkt/default-whitelist, @docker/default-blacklist,
    /// @docker/default-whitelist.
    #[arg(
        long,
        value_name = "mode=retain|remove[,errno=ENAME],SYSCALL|@GROUP[,...]"
    )]
    pub seccomp: Option<String>,

    /// Mount the app's root filesystem (--rootfs, an image) read-only; a host-command pod
    /// (whose view of the host is always read-only) gets no private /tmp and /var/tmp.
    /// /dev, /dev/shm, /proc, /sys, volumes and the pod's /etc/resolv.conf and /etc/hosts
    /// are separate mounts.
    #[arg(long, on_off = false)]
    pub readonly_rootfs: bool,

    /// Run the app as this user (a number, or a name from the app's own /etc/passwd: the
    /// image's, --rootfs's, or the host's for a host command). A non-root app has no
    /// capabilities unless --caps-retain names them.
    #[arg(long, value_name = "UID|NAME")]
    pub user: Option<String>,

    /// Run the app with this group (a number, or a name from the app's own /etc/group)
    /// [default: the user's primary group, or 0].
    #[arg(long, value_name = "GID|NAME")]
    pub group: Option<String>,

    /// The app's supplementary groups (comma-separated numbers) [default: none once
    /// --user or --group is given].
    #[arg(long, value_name = "GID[,GID...]")]
    pub supplementary_gids: Option<String>,

    /// Limit memory: bytes, or with a K, M, G or T suffix (64M, 1G, 268435456). Given
    /// before the first app, the pod's, for all its apps together; after an app's IMAGE
    /// (rkt 1.30's place), with a later app or to `app add`, that app's alone, in a cgroup
    /// of its own below the pod's (cgroup v1).
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,

    /// Limit CPU time, in thousandths of a CPU (500m) or CPUs (1, 0.5; a bare number is
    /// CPUs, as rkt 1.30 read it). The pod's or one app's, as --memory.
    #[arg(long, value_name = "MILLICORES")]
    pub cpu: Option<String>,

    /// The CPU weight against the host's other cgroups when its CPUs are busy, 2 to 262144
    /// (1024: the kernel's default; cgroup v2's cpu.weight is derived from it). The pod's
    /// or one app's, as --memory.
    #[arg(long, value_name = "N")]
    pub cpu_shares: Option<String>,

    /// Limit the pod's tasks (processes and threads) to N at once, in a cgroup of its own; 0
    /// or -1: no limit [default: 2048].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub pids_limit: Option<String>,

    /// Run the pod in a user namespace of its own: root inside is an unprivileged range of
    /// 65536 host ids, one per pod (see docs/isolation.md).
    #[arg(long, on_off = false)]
    pub private_users: bool,
}

impl IsolationArgs {
    /// The flags, checked (unknown capabilities, syscalls, groups and errnos are errors
    /// naming them); names of users and groups are looked up in the app's own `root`.
    pub fn isolators(&self, root: AppRoot<'_>) -> anyhow::Result<Isolators> {
        let caps = match (&self.caps_retain, &self.caps_remove) {
            (Some(list), _) => Some(CapsFlag::parse(true, list)?),
            (None, Some(list)) => Some(CapsFlag::parse(false, list)?),
            (None, None) => None,
        };
        let seccomp = self
            .seccomp
            .as_deref()
            .map(SeccompSpec::parse)
            .transpose()?;
        let (u, g, s) = (
            self.user.as_deref(),
            self.group.as_deref(),
            self.supplementary_gids.as_deref(),
        );
        let identity = match user::any_given(u, g, s) {
            true => user::resolve(&accounts(root)?, u, g, s)?,
            false => None,
        };
        let limits = cgroups::Limits {
            memory: self
                .memory
                .as_deref()
                .map(cgroups::parse_memory)
                .transpose()?,
            cpu_millis: self.cpu.as_deref().map(cgroups::parse_cpu).transpose()?,
            cpu_shares: self
                .cpu_shares
                .as_deref()
                .map(cgroups::parse_cpu_shares)
                .transpose()?,
            pids: self
                .pids_limit
                .as_deref()
                .map(cgroups::parse_pids)
                .transpose()?,
        };
        Ok(Isolators {
            caps,
            seccomp,
            readonly_rootfs: self.readonly_rootfs,
            identity,
            limits,
            own_limits: Default::default(),
            private_users: self.private_users,
            no_new_privs: false,
            kernel_paths: Default::default(),
            host_ipc: false,
            host_pid: false,
        })
    }
}
