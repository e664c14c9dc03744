//! The mount template of a busy host (`rkt::mount_template`): with many namespaces under
//! `/run/netns`, pods' mount namespaces are copied from a small template instead of the
//! host's; the pods still see exactly the host's mounts, and the teardown that leaves no
//! namespace removes the template. One test, alone in its binary: the template is
//! host-wide, and test binaries run one after another.

mod leaks;
mod net_support;
mod support;

#[path = "../../image/tests/common/mod.rs"]
mod image_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use leaks::lab::{stderr, stdout, Lab};
use leaks::Guard;

const TEMPLATE: &str = rkt::mount_template::TEMPLATE_DIR;

/// A tmpfs mounted on the host, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// A tmpfs named `source` (as `/proc/self/mountinfo` shows it) at `at`.
    fn mount(source: &str, at: &Path) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", source])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount a tmpfs on {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `listmount(2)` and unique mount ids came with Linux 6.8.
fn kernel_lists_mounts() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']).map(|p| p.parse::<u32>());
    matches!((parts.next(), parts.next()), (Some(Ok(major)), Some(Ok(minor))) if (major, minor) >= (6, 8))
}

fn host_mountinfo() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

fn template_record() -> Option<String> {
    std::fs::read_to_string(Path::new(TEMPLATE).join("mounts")).ok()
}

#[test]
fn a_busy_hosts_pods_copy_the_template_and_still_see_exactly_the_hosts_mounts() {
    if !image_common::ready(
        "a_busy_hosts_pods_copy_the_template_and_still_see_exactly_the_hosts_mounts",
        &["umoci"],
    ) {
        return;
    }
    if !kernel_lists_mounts() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI's kernel must have listmount(2) (Linux 6.8) for the mount template"
        );
        eprintln!("skipping: the mount template needs Linux 6.8 or later");
        return;
    }
    let lab = Lab::new();
    let net = lab.plain_net("tmpl", "tmpl");
    let net_flag = format!("--net={net}");
    let _guard = Guard::new(lab.ctx(&[&net]));
    let run_pod = |args: &[&str]| {
        let mut all = vec![net_flag.as_str()];
        all.extend(args);
        let out = lab.run(&all);
        assert!(out.status.success(), "rkt run {args:?}: {}", stderr(&out));
        stdout(&out)
    };
    // Host commands see the lab's directory, where the test mounts, through a volume: the
    // pod's own /tmp hides the host's. A volume's mounts are cloned from the pod's mount
    // namespace with their flags, so they show what the template passed on.
    let lab_dir = lab.root.path().display().to_string();
    let volume = format!("--volume=lab,kind=host,source={lab_dir}");
    let mount = format!("--mount=volume=lab,target={lab_dir}");
    let run = |args: &[&str]| {
        let mut all = vec![volume.as_str(), mount.as_str(), "--"];
        all.extend(args);
        run_pod(&all)
    };

    // A file system the host already has when the template is made.
    let early = lab.path("early");
    let _early = Tmpfs::mount("rkt-test-early", &early);
    let writable = format!(
        "touch {}/probe 2>/dev/null && echo writable || echo read-only",
        early.display()
    );

    let namespaces: Vec<_> = (0..rkt::mount_template::MIN_NAMESPACES)
        .map(|_| net_support::TestNetns::new())
        .collect();
    let table = run(&["/bin/cat", "/proc/self/mountinfo"]);
    template_record().expect("a template with 32 namespaces mounted");
    assert!(
        host_mountinfo().contains(TEMPLATE),
        "the template is mounted on the host"
    );
    // The stage detaches /run/netns itself, but not the template's own mounts: a pod
    // without them was copied from the template.
    for absent in ["/run/netns", TEMPLATE, " - nsfs "] {
        assert!(!table.contains(absent), "{absent} in the pod:\n{table}");
    }

    // Made read-only on the host afterwards (a per-mount flag: the mount keeps its id),
    // it is read-only in the next pod too.
    assert_eq!(run(&["/bin/sh", "-c", &writable]), "writable\n");
    let remount = Command::new("mount")
        .args(["-o", "remount,bind,ro"])
        .arg(&early)
        .status()
        .unwrap();
    assert!(remount.success());
    assert_eq!(run(&["/bin/sh", "-c", &writable]), "read-only\n");
    let first = template_record().unwrap();

    // A file system mounted on the host after the template was made is in the next pod,
    // which gets a new template.
    let late = lab.path("late");
    let tmpfs = Tmpfs::mount("rkt-test-late", &late);
    std::fs::write(late.join("file"), "late\n").unwrap();
    let seen = run(&["/bin/cat", &late.join("file").display().to_string()]);
    assert_eq!(seen, "late\n");
    let second = template_record().unwrap();
    assert_ne!(first, second, "the template was remade");

    // And once unmounted, it is gone from the next pod too.
    drop(tmpfs);
    let listing = run(&["/bin/ls", "-A", &late.display().to_string()]);
    assert_eq!(listing, "", "the unmounted tmpfs is still in the pod");
    let third = run(&["/bin/cat", "/proc/self/mountinfo"]);
    assert!(!third.contains("rkt-test-late"), "{third}");
    assert!(!third.contains(TEMPLATE), "{third}");

    // Image pods: their overlays are no part of the template, each pod gets its own
    // (cloned before the stage enters the template), and another pod's overlay on the
    // host leaves the template as it is.
    let layout = image_common::busybox_layout(lab.root.path());
    let v1 = format!("oci:{}:v1", layout.display());
    let before = template_record().unwrap();
    let sleeping = lab.spawn(&[&net_flag, &v1, "--exec=/bin/busybox", "--", "sleep", "600"]);
    lab.wait_running(&sleeping.uuid);
    let seen = run_pod(&[&v1, "--exec=/bin/busybox", "--", "cat", "/etc/second"]);
    assert_eq!(seen, "layer 2\n");
    let seen = run_pod(&[
        &v1,
        "--name=one",
        "--exec=/bin/busybox",
        "--",
        "cat",
        "/etc/greeting",
        "---",
        &v1,
        "--name=two",
        "--exec=/bin/busybox",
        "--",
        "cat",
        "/etc/second",
    ]);
    let mut lines: Vec<&str> = seen.lines().collect();
    lines.sort();
    assert_eq!(lines, ["hello", "layer 2"], "{seen}");
    assert_eq!(
        template_record().unwrap(),
        before,
        "pods' overlays remade the template"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sleeping.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(sleeping.wait().status.code().is_some());

    // The teardown that leaves no namespace mounted takes the template with it.
    drop(namespaces);
    run(&["/bin/true"]);
    assert!(
        !Path::new(TEMPLATE).exists(),
        "the template is left after the last pod"
    );
    assert!(
        !host_mountinfo().contains(TEMPLATE),
        "a mount of the template is left after the last pod"
    );
}
