//! The mount calls the stage makes to build an app's view of the files, behind a trait, so
//! that their order (the root, then `/dev`, the volumes, `/proc`, then the masked and
//! read-only kernel paths, then `pivot_root`) can be tested without root
//! ([`super::test::Recorder`], `stage::app`'s tests); the escape tests
//! (`tests/isolation/escape.rs`) then prove the real ones ([`super::Linux`]).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;

use beneath::mount::Attr;
use beneath::MountAttrError;
use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags};

use super::Linux;

/// What building a mount namespace takes.
pub trait Mounts {
    /// `mount(2)`.
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<(), Errno>;
    /// Changes the flags of the mount at `path` ([`beneath::mount::set_attr`]).
    fn set_attr(&self, path: &Path, attr: Attr) -> Result<(), MountAttrError>;
    /// Changes the flags of the mount `fd` is open on, `path` naming it
    /// ([`beneath::mount::set_attr_fd`]).
    fn set_attr_fd(
        &self,
        fd: BorrowedFd<'_>,
        attr: Attr,
        path: &Path,
    ) -> Result<(), MountAttrError>;
    /// A detached copy of the mount at `path` beneath `at` ([`beneath::mount::clone_tree`]).
    fn clone_tree(
        &self,
        at: BorrowedFd<'_>,
        path: Option<&Path>,
        recursive: bool,
    ) -> Result<OwnedFd, Errno>;
    /// Attaches a copy onto `path` beneath `at` ([`beneath::mount::attach_tree`]).
    fn attach_tree(
        &self,
        tree: OwnedFd,
        at: BorrowedFd<'_>,
        path: Option<&Path>,
    ) -> Result<(), Errno>;
    /// `umount2(path, MNT_DETACH)`.
    fn detach(&self, path: &Path) -> Result<(), Errno>;
    /// `chdir(path)`.
    fn chdir(&self, path: &Path) -> Result<(), Errno>;
    /// `pivot_root(".", ".")`: the current directory becomes the root, the old root is
    /// stacked on it until detached.
    fn pivot_root_here(&self) -> Result<(), Errno>;
}

/// The errno of an I/O error (`EIO` for one that has none).
pub fn errno_of(e: std::io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

impl Mounts for Linux {
    fn mount(
        &self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<(), Errno> {
        nix::mount::mount(source, target, fstype, flags, data)
    }

    fn set_attr(&self, path: &Path, attr: Attr) -> Result<(), MountAttrError> {
        beneath::mount::set_attr(path, attr)
    }

    fn set_attr_fd(
        &self,
        fd: BorrowedFd<'_>,
        attr: Attr,
        path: &Path,
    ) -> Result<(), MountAttrError> {
        beneath::mount::set_attr_fd(fd, attr, path)
    }

    fn clone_tree(
        &self,
        at: BorrowedFd<'_>,
        path: Option<&Path>,
        recursive: bool,
    ) -> Result<OwnedFd, Errno> {
        beneath::mount::clone_tree(at, path, recursive).map_err(errno_of)
    }

    fn attach_tree(
        &self,
        tree: OwnedFd,
        at: BorrowedFd<'_>,
        path: Option<&Path>,
    ) -> Result<(), Errno> {
        beneath::mount::attach_tree(tree, at, path).map_err(errno_of)
    }

    fn detach(&self, path: &Path) -> Result<(), Errno> {
        nix::mount::umount2(path, MntFlags::MNT_DETACH)
    }

    fn chdir(&self, path: &Path) -> Result<(), Errno> {
        nix::unistd::chdir(path)
    }

    fn pivot_root_here(&self) -> Result<(), Errno> {
        nix::unistd::pivot_root(".", ".")
    }
}
