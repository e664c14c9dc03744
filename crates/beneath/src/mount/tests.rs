//! The mount calls for real, as root, each in a forked child with a mount namespace of its
//! own (nothing reaches the host's mounts); without root they skip, saying so. The remount
//! fallback for kernels without mount_setattr(2) is run directly, whatever the kernel.

use std::os::fd::AsFd;

use super::*;

#[test]
fn mountinfo_gives_each_mount_point_unescaped_with_its_own_flags() {
    let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:5 / /my\\040dir ro,nosuid master:2 - tmpfs tmpfs rw,size=4k
short line
";
    assert_eq!(
        parse_mountinfo(text),
        [
            (PathBuf::from("/"), MountFlags::empty()),
            (
                PathBuf::from("/proc"),
                MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC
            ),
            (
                PathBuf::from("/my dir"),
                MountFlags::RDONLY | MountFlags::NOSUID
            ),
        ]
    );
    assert_eq!(unescape("/a\\011b\\134c\\0"), PathBuf::from("/a\tb\\c\\0"));
}

#[test]
fn attrs_set_clear_and_recurse() {
    let ro = Attr::set(Flag::ReadOnly);
    assert!(ro.set && !ro.recursive);
    assert!(Attr::clear(Flag::NoDev).recursive().recursive);
    assert_eq!(
        ro.apply(MountFlags::NOSUID),
        MountFlags::NOSUID | MountFlags::RDONLY
    );
    let writable = Attr::clear(Flag::ReadOnly);
    assert_eq!(
        writable.apply(MountFlags::RDONLY | MountFlags::NODEV),
        MountFlags::NODEV
    );
    let attr = Attr::set(Flag::NoDev).mount_attr();
    assert_eq!((attr.attr_set, attr.attr_clr), (MOUNT_ATTR_NODEV, 0));
}

/// Runs `child` as root in a forked child with a private mount namespace, a tmpfs `top`
/// (nosuid) with a tmpfs `top/below` (noexec) mounted, and fails with what it returns.
fn in_mount_namespace(test: &str, child: impl FnOnce(&Path, &Path) -> Result<(), String>) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping {test}: mounting needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (top, below) = (dir.path().join("top"), dir.path().join("top/below"));
    std::fs::create_dir(&top).unwrap();
    let setup = |top: &Path, below: &Path| -> Result<(), String> {
        // SAFETY: unshare with a flag only.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(format!("unshare: {}", io::Error::last_os_error()));
        }
        let fail = |what: &'static str| move |e: Errno| format!("{what}: {e}");
        rustix::mount::mount_change(
            "/",
            rustix::mount::MountPropagationFlags::PRIVATE
                | rustix::mount::MountPropagationFlags::REC,
        )
        .map_err(fail("make / private"))?;
        let tmpfs = |at: &Path, flags| {
            rustix::mount::mount(c"tmpfs", at, c"tmpfs", flags, c"").map_err(fail("mount a tmpfs"))
        };
        tmpfs(top, MountFlags::NOSUID)?;
        std::fs::create_dir(below).map_err(|e| e.to_string())?;
        tmpfs(below, MountFlags::NOEXEC)
    };
    // SAFETY: the child only makes system calls and small allocations, then _exits without
    // returning into the test harness.
    match unsafe { libc::fork() } {
        0 => {
            let code = match setup(&top, &below).and_then(|()| child(&top, &below)) {
                Ok(()) => 0,
                Err(msg) => {
                    let _ = std::fs::write(dir.path().join("error"), msg);
                    1
                }
            };
            // SAFETY: ends the child without running the harness's exit handlers.
            unsafe { libc::_exit(code) }
        }
        -1 => panic!("fork: {}", io::Error::last_os_error()),
        pid => {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is a valid out pointer.
            let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(waited, pid);
            let error = std::fs::read_to_string(dir.path().join("error")).unwrap_or_default();
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "{error}"
            );
        }
    }
}

/// The per-mount flags of the mount at `at`, as mountinfo shows them now.
fn flags(at: &Path) -> Option<MountFlags> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    parse_mountinfo(&info)
        .into_iter()
        .rfind(|(point, _)| point == at)
        .map(|(_, flags)| flags)
}

fn check(what: &str, ok: bool) -> Result<(), String> {
    ok.then_some(()).ok_or_else(|| what.to_string())
}

/// With `change` ([`set_attr`] or its fallback): the tree turns read-only, each mount
/// keeping its other flags; the top turns writable again alone; a path that is no mount
/// point fails as `is_error` says.
fn read_only_then_writable(
    top: &Path,
    below: &Path,
    change: fn(&Path, Attr) -> Result<(), MountAttrError>,
    is_error: fn(&MountAttrError) -> bool,
) -> Result<(), String> {
    change(top, Attr::set(Flag::ReadOnly).recursive()).map_err(|e| e.to_string())?;
    let ro = MountFlags::RDONLY;
    check(
        "top keeps nosuid",
        flags(top) == Some(ro | MountFlags::NOSUID),
    )?;
    check(
        "below keeps noexec",
        flags(below) == Some(ro | MountFlags::NOEXEC),
    )?;
    check("wrote below", std::fs::write(below.join("f"), "x").is_err())?;
    change(top, Attr::clear(Flag::ReadOnly)).map_err(|e| e.to_string())?;
    std::fs::write(top.join("f"), "x").map_err(|e| format!("top: {e}"))?;
    check(
        "below turned writable",
        std::fs::write(below.join("f"), "x").is_err(),
    )?;
    let err = change(&top.join("f"), Attr::set(Flag::NoDev)).unwrap_err();
    check(&format!("{err:?}"), is_error(&err))
}

#[test]
fn a_tree_turns_read_only_and_one_mount_writable_again() {
    in_mount_namespace("a_tree_turns_read_only", |top, below| {
        read_only_then_writable(top, below, set_attr, |e| {
            matches!(e, MountAttrError::Set { .. })
        })
    });
}

#[test]
fn by_descriptor_the_mount_changes_even_under_another() {
    in_mount_namespace("by_descriptor", |top, below| {
        let fd = crate::open_path(below, crate::Kind::Directory).map_err(|e| e.to_string())?;
        // Something else mounted over it since: by path, that would be changed.
        rustix::mount::mount(c"tmpfs", below, c"tmpfs", MountFlags::empty(), c"")
            .map_err(|e| e.to_string())?;
        set_attr_fd(fd.as_fd(), Attr::set(Flag::ReadOnly), below).map_err(|e| e.to_string())?;
        check(
            "the mount on top stays writable",
            std::fs::write(below.join("f"), "x").is_ok(),
        )?;
        let hidden = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        check(
            "the mount below is read-only",
            std::fs::write(hidden.join("f"), "x").is_err(),
        )?;
        check("top untouched", flags(top) == Some(MountFlags::NOSUID))
    });
}

#[test]
fn a_cloned_tree_attaches_elsewhere_with_its_flags() {
    in_mount_namespace("a_cloned_tree", |top, below| {
        std::fs::write(below.join("mark"), "below").map_err(|e| e.to_string())?;
        let cwd = rustix::fs::CWD;
        let tree = clone_tree(cwd, Some(top), true).map_err(|e| format!("clone: {e}"))?;
        let elsewhere = top.parent().unwrap().join("elsewhere");
        std::fs::create_dir(&elsewhere).map_err(|e| e.to_string())?;
        let target =
            crate::open_path(&elsewhere, crate::Kind::Directory).map_err(|e| e.to_string())?;
        attach_tree(tree, target.as_fd(), None).map_err(|e| format!("attach: {e}"))?;
        let mark = std::fs::read_to_string(elsewhere.join("below/mark")).unwrap_or_default();
        check("the submount came along", mark == "below")?;
        check(
            "its flags too",
            flags(&elsewhere.join("below")) == Some(MountFlags::NOEXEC),
        )
    });
}

/// The fallback for kernels without mount_setattr(2), run for real, whatever the kernel.
#[test]
fn without_mount_setattr_each_mount_is_remounted_keeping_its_flags() {
    in_mount_namespace("without_mount_setattr", |top, below| {
        read_only_then_writable(top, below, remount_each, |e| {
            matches!(e, MountAttrError::Remount { .. })
        })
    });
}

#[test]
fn peer_state_is_read_from_the_optional_fields() {
    let text = "\
22 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw
24 22 0:5 / /a\\040b rw master:2 - tmpfs tmpfs rw
25 22 0:6 / /both rw shared:3 master:2 - tmpfs tmpfs rw
26 22 0:7 / /none rw - tmpfs tmpfs rw
";
    let state = |id| parse_peer_state(text, id);
    let shared = PeerState {
        shared: true,
        slave: false,
    };
    assert_eq!(state(22), Some((PathBuf::from("/"), shared)));
    let slave = PeerState {
        shared: false,
        slave: true,
    };
    assert_eq!(state(24), Some((PathBuf::from("/a b"), slave)));
    let both = PeerState {
        shared: true,
        slave: true,
    };
    assert_eq!(state(25).map(|s| s.1), Some(both));
    assert_eq!(state(26).map(|s| s.1), Some(PeerState::default()));
    assert_eq!(state(99), None);
}

/// A clone of the shared `top`, made `propagation` and attached at `elsewhere`: whether a
/// mount made in `top` afterwards shows there, and one made there shows in `top`.
fn propagates(top: &Path, propagation: Propagation) -> Result<(bool, bool), String> {
    rustix::mount::mount_change(top, rustix::mount::MountPropagationFlags::SHARED)
        .map_err(|e| format!("make top shared: {e}"))?;
    let (_, state) = mount_of(top).map_err(|e| format!("mount_of: {e}"))?;
    check("top is shared", state.shared)?;
    let tree = clone_tree(rustix::fs::CWD, Some(top), true).map_err(|e| format!("clone: {e}"))?;
    set_propagation(tree.as_fd(), propagation, true).map_err(|e| format!("set: {e}"))?;
    let elsewhere = top.parent().unwrap().join(format!("{propagation:?}"));
    std::fs::create_dir(&elsewhere).map_err(|e| e.to_string())?;
    let target = crate::open_path(&elsewhere, crate::Kind::Directory).map_err(|e| e.to_string())?;
    attach_tree(tree, target.as_fd(), None).map_err(|e| format!("attach: {e}"))?;
    let (into, back) = (top.join("into"), elsewhere.join("back"));
    for dir in [&into, &back] {
        std::fs::create_dir(dir).map_err(|e| e.to_string())?;
    }
    let tmpfs = |at: &Path| {
        rustix::mount::mount(c"tmpfs", at, c"tmpfs", MountFlags::empty(), c"")
            .map_err(|e| format!("mount: {e}"))
    };
    tmpfs(&into)?;
    std::fs::write(into.join("mark"), "").map_err(|e| e.to_string())?;
    tmpfs(&back)?;
    std::fs::write(back.join("mark"), "").map_err(|e| e.to_string())?;
    Ok((
        elsewhere.join("into/mark").exists(),
        top.join("back/mark").exists(),
    ))
}

#[test]
fn a_cloned_shared_mount_propagates_as_set() {
    for (propagation, expected) in [
        (Propagation::Private, (false, false)),
        (Propagation::Slave, (true, false)),
        (Propagation::Shared, (true, true)),
    ] {
        in_mount_namespace("a_cloned_shared_mount_propagates", |top, _| {
            let seen = propagates(top, propagation)?;
            check(
                &format!("{propagation:?}: (into the clone, back) = {seen:?}"),
                seen == expected,
            )
        });
    }
}
