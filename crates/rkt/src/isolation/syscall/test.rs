//! A [`Syscall`] and [`Mounts`] that records the calls instead of making them, and fails
//! the one a test picks. Everything else the code under test does (creating mount points,
//! reading directories) happens for real, in the test's temporary directory.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use beneath::mount::Attr;
use beneath::MountAttrError;
use nix::errno::Errno;
use nix::mount::MsFlags;
use seccompiler::sock_filter;

use super::{Mounts, Syscall};
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
    NoNewPrivs,
    /// `mount(2)`: the source (for a bind or a move), the target, the filesystem type, the
    /// flags.
    Mount {
        source: Option<PathBuf>,
        target: PathBuf,
        fstype: Option<String>,
        flags: MsFlags,
    },
    /// The mount and the change.
    SetAttr(PathBuf, Attr),
    /// The mount cloned, with those below it.
    CloneTree(PathBuf, bool),
    /// Where the clone is attached.
    AttachTree(PathBuf),
    Detach(PathBuf),
    Chdir(PathBuf),
    PivotRoot,
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
    fn set_no_new_privs(&self) -> Result<(), Errno> {
        self.record(Call::NoNewPrivs)
    }
}

/// The path `at` and `path` name, as the call would resolve it: `path` beneath what `at` is
/// open on, or as given from the current directory.
fn named(at: BorrowedFd<'_>, path: Option<&Path>) -> PathBuf {
    let base = if at.as_raw_fd() == libc::AT_FDCWD {
        PathBuf::new()
    } else {
        std::fs::read_link(format!("/proc/self/fd/{}", at.as_raw_fd())).unwrap_or_default()
    };
    match path {
        Some(path) => base.join(path),
        None => base,
    }
}

impl Recorder {
    fn record_attr(&self, path: &Path, attr: Attr) -> Result<(), MountAttrError> {
        self.record(Call::SetAttr(path.to_path_buf(), attr))
            .map_err(|errno| MountAttrError::Set {
                path: path.to_path_buf(),
                source: std::io::Error::from_raw_os_error(errno as i32),
            })
    }
}

impl Mounts for Recorder {
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        _data: Option<&str>,
    ) -> Result<(), Errno> {
        self.record(Call::Mount {
            source: source.map(Path::to_path_buf),
            target: target.to_path_buf(),
            fstype: fstype.map(str::to_string),
            flags,
        })
    }
    fn set_attr(&self, path: &Path, attr: Attr) -> Result<(), MountAttrError> {
        self.record_attr(path, attr)
    }
    fn set_attr_fd(
        &self,
        _fd: BorrowedFd<'_>,
        attr: Attr,
        path: &Path,
    ) -> Result<(), MountAttrError> {
        self.record_attr(path, attr)
    }
    fn clone_tree(
        &self,
        at: BorrowedFd<'_>,
        path: Option<&Path>,
        recursive: bool,
    ) -> Result<OwnedFd, Errno> {
        self.record(Call::CloneTree(named(at, path), recursive))?;
        let stand_in = std::fs::File::open("/dev/null").map_err(super::errno_of)?;
        Ok(stand_in.into())
    }
    fn attach_tree(
        &self,
        _tree: OwnedFd,
        at: BorrowedFd<'_>,
        path: Option<&Path>,
    ) -> Result<(), Errno> {
        self.record(Call::AttachTree(named(at, path)))
    }
    fn detach(&self, path: &Path) -> Result<(), Errno> {
        self.record(Call::Detach(path.to_path_buf()))
    }
    fn chdir(&self, path: &Path) -> Result<(), Errno> {
        self.record(Call::Chdir(path.to_path_buf()))
    }
    fn pivot_root_here(&self) -> Result<(), Errno> {
        self.record(Call::PivotRoot)
    }
}
