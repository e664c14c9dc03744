//! A [`Syscall`] that records the calls instead of making them, and fails the one a test
//! picks.

use std::cell::RefCell;

use nix::errno::Errno;
use seccompiler::sock_filter;

use super::Syscall;
use crate::isolation::capabilities::CapSet;
use crate::isolation::user::Identity;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    DropBounding(u8),
    ClearAmbient,
    /// The program's length in instructions.
    LoadSeccomp(usize),
    /// Permitted and effective, inheritable.
    SetCapabilities(CapSet, CapSet),
    KeepCapabilities,
    /// uid, gid.
    SetIdentity(u32, u32),
    RaiseAmbient(u8),
}

/// Records every call; the call `fail_at` (0-based) fails with EPERM.
#[derive(Default)]
pub struct Recorder {
    pub calls: RefCell<Vec<Call>>,
    pub fail_at: Option<usize>,
}

impl Recorder {
    fn record(&self, call: Call) -> Result<(), Errno> {
        let mut calls = self.calls.borrow_mut();
        calls.push(call);
        if self.fail_at == Some(calls.len() - 1) {
            return Err(Errno::EPERM);
        }
        Ok(())
    }
}

impl Syscall for Recorder {
    fn drop_bounding(&self, cap: u8) -> Result<(), Errno> {
        self.record(Call::DropBounding(cap))
    }
    fn clear_ambient(&self) -> Result<(), Errno> {
        self.record(Call::ClearAmbient)
    }
    fn load_seccomp(&self, program: &[sock_filter]) -> Result<(), Errno> {
        self.record(Call::LoadSeccomp(program.len()))
    }
    fn set_capabilities(&self, held: CapSet, inheritable: CapSet) -> Result<(), Errno> {
        self.record(Call::SetCapabilities(held, inheritable))
    }
    fn keep_capabilities(&self) -> Result<(), Errno> {
        self.record(Call::KeepCapabilities)
    }
    fn set_identity(&self, id: &Identity) -> Result<(), Errno> {
        self.record(Call::SetIdentity(id.uid, id.gid))
    }
    fn raise_ambient(&self, cap: u8) -> Result<(), Errno> {
        self.record(Call::RaiseAmbient(cap))
    }
}
