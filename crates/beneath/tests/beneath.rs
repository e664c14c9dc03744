//! Resolution beneath a root, the `*at` calls and extended attributes, unprivileged, in a
//! temporary directory: a root with a sibling `outside` holding a `secret` that nothing may
//! reach or change.

use std::ffi::OsString;
use std::io::{ErrorKind, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};

use rkt_beneath::{at, open_beneath, open_path, xattr, Kind};

struct Fixture {
    _dir: tempfile::TempDir,
    root_path: PathBuf,
    root: OwnedFd,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root_path = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&root_path).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), "keep").unwrap();
    let root = open_path(&root_path, Kind::Directory).unwrap();
    Fixture {
        _dir: dir,
        root_path,
        root,
        outside,
    }
}

impl Fixture {
    /// What `fd` is open on, as a path.
    fn path_of(&self, fd: &OwnedFd) -> PathBuf {
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap()
    }
}

#[test]
fn symlinks_and_dotdot_resolve_inside_the_root() {
    let f = fixture();
    let r = &f.root_path;
    std::fs::create_dir_all(r.join("tmp/deep")).unwrap();
    std::fs::write(r.join("tmp/secret"), "inside").unwrap();
    symlink(&f.outside, r.join("abs")).unwrap();
    symlink("../outside", r.join("rel")).unwrap();
    symlink("../../../../../../../../tmp", r.join("tmp/deep/up")).unwrap();
    for (path, lands) in [
        (
            "abs",
            f.outside.strip_prefix("/").unwrap().to_str().unwrap(),
        ),
        ("rel", "outside"),
        ("../../..", ""),
        ("tmp/deep/../../../..", ""),
        ("tmp/deep/up/secret", "tmp/secret"),
    ] {
        match open_beneath(f.root.as_fd(), path, Kind::Any) {
            Ok(fd) => assert_eq!(f.path_of(&fd), r.join(lands), "{path}"),
            // `abs` and `rel` name a path in the root, which does not exist yet.
            Err(e) => assert_eq!(e.kind(), ErrorKind::NotFound, "{path}: {e}"),
        }
    }
    // The links reach their namesakes in the root once there are some, never the host's.
    for (link, lands) in [
        ("abs", r.join(f.outside.strip_prefix("/").unwrap())),
        ("rel", r.join("outside")),
    ] {
        std::fs::create_dir_all(&lands).unwrap();
        let fd = open_beneath(f.root.as_fd(), link, Kind::Directory).unwrap();
        assert_eq!(f.path_of(&fd), lands);
        let secret = open_beneath(f.root.as_fd(), format!("{link}/secret"), Kind::Any);
        assert_eq!(secret.unwrap_err().kind(), ErrorKind::NotFound);
    }
    let root = open_beneath(f.root.as_fd(), "", Kind::Directory).unwrap();
    assert_eq!(f.path_of(&root), *r);
}

#[test]
fn loops_magic_links_and_kinds_are_refused() {
    let f = fixture();
    let r = &f.root_path;
    symlink("b", r.join("a")).unwrap();
    symlink("a", r.join("b")).unwrap();
    let looped = open_beneath(f.root.as_fd(), "a", Kind::Any).unwrap_err();
    assert_eq!(looped.raw_os_error(), Some(libc::ELOOP), "{looped}");
    // A magic link (a /proc mounted in the root would hand out the host's files) is
    // refused, even where it is the root's own.
    let proc = open_path("/proc/self", Kind::Directory).unwrap();
    let magic = open_beneath(proc.as_fd(), "cwd", Kind::Any).unwrap_err();
    assert_eq!(magic.raw_os_error(), Some(libc::ELOOP), "{magic}");
    std::fs::write(r.join("file"), "").unwrap();
    let not_dir = open_beneath(f.root.as_fd(), "file", Kind::Directory).unwrap_err();
    assert_eq!(not_dir.raw_os_error(), Some(libc::ENOTDIR));
}

#[test]
fn the_at_calls_work_on_the_entry_never_through_it() {
    let f = fixture();
    let root = f.root.as_fd();
    at::mkdir(root, "d", 0o700).unwrap();
    let d = open_beneath(root, "d", Kind::Directory).unwrap();
    let mut file = at::create_file(d.as_fd(), "f", 0o600).unwrap();
    file.write_all(b"data").unwrap();
    drop(file);
    at::chmod(d.as_fd(), "f", 0o640).unwrap();
    at::set_times(d.as_fd(), "f", 1_000_000).unwrap();
    let meta = std::fs::metadata(f.root_path.join("d/f")).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.mtime()), (0o640, 1_000_000));
    // SAFETY: no arguments, no failure.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    at::chown(d.as_fd(), "f", uid, gid).unwrap();

    // A symlink pointing out is the entry itself to every call.
    let secret = f.outside.join("secret");
    at::symlink(&secret, d.as_fd(), "out").unwrap();
    assert_eq!(at::readlink(d.as_fd(), "out").unwrap(), secret);
    let st = at::lstat(d.as_fd(), "out").unwrap().unwrap();
    assert_eq!(st.mode & libc::S_IFMT, libc::S_IFLNK);
    let exists = at::create_file(d.as_fd(), "out", 0o600).unwrap_err();
    assert_eq!(exists.kind(), ErrorKind::AlreadyExists);
    at::set_times(d.as_fd(), "out", 42).unwrap();
    at::hard_link(d.as_fd(), "out", root, "linked").unwrap();
    assert_eq!(at::readlink(root, "linked").unwrap(), secret);
    at::remove(d.as_fd(), "out").unwrap();
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
    assert_eq!(std::fs::metadata(&secret).unwrap().nlink(), 1);

    at::make_fifo(d.as_fd(), "pipe", 0o600).unwrap();
    at::create_mount_point(d.as_fd(), "mp", Kind::Directory).unwrap();
    at::create_mount_point(d.as_fd(), "mp", Kind::Directory).unwrap();
    at::create_mount_point(d.as_fd(), "mf", Kind::Any).unwrap();
    assert!(
        at::fstat(open_beneath(root, "d/mp", Kind::Any).unwrap().as_fd())
            .unwrap()
            .is_dir()
    );
    let mut names = at::list(d.as_fd()).unwrap();
    names.sort();
    assert_eq!(names, ["f", "mf", "mp", "pipe"].map(OsString::from));
    assert_eq!(
        at::fstat(d.as_fd()).unwrap().dev,
        std::fs::metadata(&f.root_path).unwrap().dev()
    );

    // Recursive removal, a symlink out in it removed, not followed; nothing there is fine.
    at::mkdir(d.as_fd(), "mp/inner", 0o755).unwrap();
    std::fs::write(f.root_path.join("d/mp/inner/x"), "").unwrap();
    symlink(&f.outside, f.root_path.join("d/mp/inner/escape")).unwrap();
    at::remove(root, "d").unwrap();
    at::remove(root, "d").unwrap();
    assert_eq!(at::lstat(root, "d").unwrap(), None);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
}

#[test]
fn extended_attributes_of_an_o_path_entry() {
    let f = fixture();
    let root = f.root.as_fd();
    std::fs::write(f.root_path.join("file"), "x").unwrap();
    let entry = at::open_entry(root, "file").unwrap();
    match xattr::set(entry.as_fd(), c"user.origin", b"layer") {
        Err(e) if e.kind() == ErrorKind::Unsupported => {
            eprintln!(
                "skipping: the filesystem of {} has no user.* attributes",
                f.root_path.display()
            );
            return;
        }
        other => other.unwrap(),
    }
    assert_eq!(
        xattr::get(entry.as_fd(), c"user.origin")
            .unwrap()
            .as_deref(),
        Some(&b"layer"[..])
    );
    assert_eq!(xattr::get(entry.as_fd(), c"user.none").unwrap(), None);
    let names = xattr::list(entry.as_fd()).unwrap();
    assert!(names.contains(&OsString::from("user.origin")), "{names:?}");
    // A directory opened beneath the root, too.
    let dir = open_beneath(root, "", Kind::Directory).unwrap();
    xattr::set(dir.as_fd(), c"user.dir", b"").unwrap();
    assert_eq!(
        xattr::get(dir.as_fd(), c"user.dir").unwrap().as_deref(),
        Some(&b""[..])
    );
    assert!(!Path::new(&f.outside).join("user.dir").exists());
}
