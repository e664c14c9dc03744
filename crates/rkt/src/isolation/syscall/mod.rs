//! The system calls that narrow a process, behind a trait, so that the order in which
//! [`super::apply`] makes them can be tested without root (`test::Recorder`); the escape
//! tests (`tests/isolation/escape.rs`) then prove the real ones ([`Linux`]). Its sibling
//! [`Mounts`] does the same for the mounts that build an app's view of the files.

mod mounts;
#[cfg(test)]
pub mod test;

pub use mounts::{errno_of, Mounts};

use nix::errno::Errno;
use seccompiler::sock_filter;

use super::capabilities::CapSet;
use super::user::Identity;

/// What narrowing a process takes.
pub trait Syscall {
    /// `prctl(PR_CAPBSET_DROP, cap)`.
    fn drop_bounding(&self, cap: u8) -> Result<(), Errno>;
    /// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
    fn clear_ambient(&self) -> Result<(), Errno>;
    /// `seccomp(SECCOMP_SET_MODE_FILTER, 0, program)`, without `no_new_privs`.
    fn load_seccomp(&self, program: &[sock_filter]) -> Result<(), Errno>;
    /// `capset(2)`: permitted and effective `held`, inheritable `inheritable`.
    fn set_capabilities(&self, held: CapSet, inheritable: CapSet) -> Result<(), Errno>;
    /// `prctl(PR_SET_KEEPCAPS, 1)`: keep the permitted set across a change of user.
    fn keep_capabilities(&self) -> Result<(), Errno>;
    /// `setgroups`, `setgid`, `setuid`, in that order.
    fn set_identity(&self, id: &Identity) -> Result<(), Errno>;
    /// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap)`.
    fn raise_ambient(&self, cap: u8) -> Result<(), Errno>;
    /// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
    fn set_no_new_privs(&self) -> Result<(), Errno>;
}

/// The real calls, on the calling thread.
pub struct Linux;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets in two data structs.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const sock_filter,
}

impl Syscall for Linux {
    fn drop_bounding(&self, cap: u8) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) };
        Errno::result(rc).map(drop)
    }

    fn clear_ambient(&self) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        match Errno::result(rc) {
            // Kernels before 4.3 have no ambient set: nothing to clear.
            Err(Errno::EINVAL) => Ok(()),
            other => other.map(drop),
        }
    }

    fn load_seccomp(&self, program: &[sock_filter]) -> Result<(), Errno> {
        let len = libc::c_ushort::try_from(program.len()).map_err(|_| Errno::E2BIG)?;
        let prog = SockFprog {
            len,
            filter: program.as_ptr(),
        };
        // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies
        // the instructions.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0 as libc::c_ulong,
                &prog as *const SockFprog,
            )
        };
        Errno::result(rc).map(drop)
    }

    fn set_capabilities(&self, held: CapSet, inheritable: CapSet) -> Result<(), Errno> {
        let header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let half = |shift: u32| CapData {
            effective: (held.0 >> shift) as u32,
            permitted: (held.0 >> shift) as u32,
            inheritable: (inheritable.0 >> shift) as u32,
        };
        let data = [half(0), half(32)];
        // SAFETY: header and two data structs, as capset(2) with version 3 reads them.
        let rc =
            unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) };
        Errno::result(rc).map(drop)
    }

    fn set_no_new_privs(&self) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
        Errno::result(rc).map(drop)
    }

    fn keep_capabilities(&self) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1 as libc::c_ulong, 0, 0, 0) };
        Errno::result(rc).map(drop)
    }

    fn set_identity(&self, id: &Identity) -> Result<(), Errno> {
        let groups: Vec<nix::unistd::Gid> = id
            .supplementary_gids
            .iter()
            .map(|&g| nix::unistd::Gid::from_raw(g))
            .collect();
        nix::unistd::setgroups(&groups)?;
        nix::unistd::setgid(nix::unistd::Gid::from_raw(id.gid))?;
        nix::unistd::setuid(nix::unistd::Uid::from_raw(id.uid))
    }

    fn raise_ambient(&self, cap: u8) -> Result<(), Errno> {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                libc::c_ulong::from(cap),
                0,
                0,
            )
        };
        Errno::result(rc).map(drop)
    }
}
