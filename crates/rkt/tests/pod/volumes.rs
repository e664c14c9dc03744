//! Pod volumes as a user runs them: `--volume=NAME,kind=host|empty,...` and the app's
//! `--mount=volume=NAME,target=PATH`, proved from inside busybox rootfs pods: a host
//! directory read and written, read-only (EROFS, submounts included), with and without its
//! submounts, an `empty` volume with its mode and owner (also under `--private-users`),
//! gone with `rkt rm`, targets that cannot leave the root through a symlink, nothing
//! created on the host's root, an image pod's target made in its overlay, the grammar's
//! errors, and `kill -9` of `rkt run` then `gc`.
//! Pods need root (tests skip otherwise) and end with the leak checker.

use crate::{image_common, leaks, pod_support, support};

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};

use pod_support::{mounts_under, World};

/// A root filesystem with the static busybox as /bin/busybox and the applets the tests use.
/// The set-up most tests here share: a world, its leak checker (dropped first, so it judges
/// before the world's cleanup) and a busybox root filesystem in it.
fn busybox_world() -> (World, leaks::Guard, PathBuf) {
    let world = World::new(support::RKT);
    let guard = leaks::Guard::new(world.leak_ctx());
    let rootfs = busybox_rootfs(&world);
    (world, guard, rootfs)
}

fn busybox_rootfs(world: &World) -> PathBuf {
    let rootfs = world.path("rootfs");
    for d in ["bin", "etc", "proc", "sys", "tmp"] {
        fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    for applet in ["sh", "cat", "ls", "stat", "echo", "sleep", "touch", "grep"] {
        symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    rootfs
}

/// `rkt run --net=none --rootfs=ROOTFS <pod_and_app> -- sh -c SCRIPT`; returns the outcome
/// and the pod's UUID.
fn run_sh(
    world: &World,
    rootfs: &Path,
    options: &[&str],
    script: &str,
) -> (support::Outcome, String) {
    let root = format!("--rootfs={}", rootfs.display());
    let mut args = vec!["--net=none", root.as_str()];
    args.extend_from_slice(options);
    args.extend(["--", "sh", "-c", script]);
    world.run_uuid(&args)
}

/// A tmpfs mounted on the host at `dir` for the test's life (a host volume's submount).
struct TmpfsMount(PathBuf);

impl TmpfsMount {
    fn new(dir: &Path) -> TmpfsMount {
        fs::create_dir_all(dir).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            dir,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some("size=1m"),
        )
        .unwrap();
        TmpfsMount(dir.to_path_buf())
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_host_volume_is_read_and_written_and_its_missing_target_made_without_writing_the_rootfs() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    let host = world.path("host-data");
    fs::create_dir(&host).unwrap();
    fs::write(host.join("in"), "from the host\n").unwrap();
    // A file is a volume too: its target is made as an empty file.
    let conf = world.path("app.conf");
    fs::write(&conf, "setting=1\n").unwrap();
    let (out, _) = run_sh(
        &world,
        &rootfs,
        &[
            &format!("--volume=data,kind=host,source={}", host.display()),
            &format!("--volume=conf,kind=host,source={}", conf.display()),
            "--mount=volume=data,target=/srv/data",
            "--mount=volume=conf,target=/opt/app/app.conf",
        ],
        "cat /srv/data/in /opt/app/app.conf && echo from the pod > /srv/data/out",
    );
    out.assert_success()
        .assert_stdout_contains("from the host\nsetting=1\n");
    assert_eq!(
        fs::read_to_string(host.join("out")).unwrap(),
        "from the pod\n"
    );
    // The missing targets were made in the tmpfs over the rootfs, never in the rootfs.
    assert!(!rootfs.join("srv").exists() && !rootfs.join("opt").exists());
    assert!(mounts_under(world.root.path()).is_empty());
}

#[test]
fn a_read_only_host_volume_refuses_writes_with_erofs_below_its_submounts_too() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    let host = world.path("host-ro");
    let _sub = TmpfsMount::new(&host.join("sub"));
    fs::write(host.join("file"), "kept\n").unwrap();
    fs::write(host.join("sub/inner"), "inner\n").unwrap();
    let (out, _) = run_sh(
        &world,
        &rootfs,
        &[
            &format!(
                "--volume=ro,kind=host,source={},readOnly=true",
                host.display()
            ),
            "--mount=volume=ro,target=/ro",
        ],
        "cat /ro/file /ro/sub/inner; echo x > /ro/new; echo y > /ro/sub/new; \
         echo z >> /ro/file; echo done",
    );
    out.assert_success()
        .assert_stdout_contains("kept\ninner\n")
        .assert_stdout_contains("done");
    let refused = out.stderr().matches("Read-only file system").count();
    assert_eq!(refused, 3, "{}", out.stderr());
    assert!(!host.join("new").exists() && !host.join("sub/new").exists());
    assert_eq!(fs::read_to_string(host.join("file")).unwrap(), "kept\n");
}

#[test]
fn recursive_volumes_bring_the_hosts_submounts_and_non_recursive_ones_do_not() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    let host = world.path("host-tree");
    let _sub = TmpfsMount::new(&host.join("sub"));
    fs::write(host.join("sub/on-the-submount"), "").unwrap();
    let volume = format!("--volume=t,kind=host,source={}", host.display());
    let mount = "--mount=volume=t,target=/t";
    let script = "ls /t/sub; echo end";
    let (out, _) = run_sh(&world, &rootfs, &[&volume, mount], script);
    out.assert_success()
        .assert_stdout_contains("on-the-submount\nend");
    let flat = format!("{volume},recursive=false");
    let (out, _) = run_sh(&world, &rootfs, &[&flat, mount], script);
    out.assert_success();
    // Without its submounts the app sees the directory the tmpfs is mounted on: empty.
    assert_eq!(out.stdout(), "end\n");
}

#[test]
fn an_empty_volume_has_its_mode_and_owner_and_goes_with_rkt_rm() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    let (out, uuid) = run_sh(
        &world,
        &rootfs,
        &[
            "--volume=scratch,kind=empty,mode=1770,uid=12,gid=34",
            "--mount=volume=scratch,target=/scratch",
        ],
        "stat -c '%a %u %g' /scratch; echo kept > /scratch/f; ls /scratch",
    );
    out.assert_success()
        .assert_stdout_contains("1770 12 34\nf\n");
    let dir = world.path(&format!("data/pods/{uuid}/volumes/scratch"));
    let meta = fs::metadata(&dir).unwrap();
    assert_eq!(
        (meta.mode() & 0o7777, meta.uid(), meta.gid()),
        (0o1770, 12, 34)
    );
    assert_eq!(fs::read_to_string(dir.join("f")).unwrap(), "kept\n");
    // The target was made in the tmpfs over the rootfs, not in it.
    assert!(!rootfs.join("scratch").exists());
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(!dir.exists());
    assert!(world.pods().is_empty());
}

#[test]
fn a_prepared_pod_keeps_its_volumes_and_private_users_own_the_mapped_ids() {
    test_kit::require_root!();
    if fs::read_to_string("/proc/sys/user/max_user_namespaces").is_ok_and(|n| n.trim() == "0") {
        eprintln!("skipping: user namespaces are off");
        return;
    }
    let (world, _g, rootfs) = busybox_world();
    let out = world
        .rkt(&[
            "prepare",
            "--volume=e,kind=empty,mode=0700,uid=12,gid=34",
            &format!("--rootfs={}", rootfs.display()),
            "--private-users",
            "--mount=volume=e,target=/e",
            "--",
            "sh",
            "-c",
            "stat -c '%a %u %g' /e",
        ])
        .run();
    out.assert_success();
    let uuid = out.stdout().trim().to_string();
    let run = world.rkt(&["run-prepared", "--net=none", &uuid]).run();
    run.assert_success().assert_stdout_contains("700 12 34\n");
    let base = world.status_json(&uuid)["isolation"]["userNs"]["hostBase"]
        .as_u64()
        .expect("userNs in status");
    let meta = fs::metadata(world.path(&format!("data/pods/{uuid}/volumes/e"))).unwrap();
    assert_eq!(
        (u64::from(meta.uid()), u64::from(meta.gid())),
        (base + 12, base + 34)
    );
    world.rkt(&["rm", &uuid]).run().assert_success();
}

#[test]
fn a_symlink_in_the_target_resolves_inside_the_root_never_to_the_host() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    // What the absolute symlink names is then missing at the rootfs's top level, where the
    // pod may make it (beside the rootfs, which is never written).
    fs::remove_dir(rootfs.join("tmp")).unwrap();
    // Directories of the host the symlinks name: the mounts must not land there.
    let outside = world.path("outside");
    fs::create_dir(&outside).unwrap();
    symlink(&outside, rootfs.join("abs-link")).unwrap();
    symlink("../../../../../../../../../..", rootfs.join("up-link")).unwrap();
    let (out, _) = run_sh(
        &world,
        &rootfs,
        &[
            "--volume=v,kind=empty",
            "--mount=volume=v,target=/abs-link/in",
            "--mount=volume=v,target=/up-link/rkt-volumes-escape-probe",
        ],
        &format!(
            "echo seen > /abs-link/in/f; cat /up-link/rkt-volumes-escape-probe/f; \
             ls -d /rkt-volumes-escape-probe {}/in",
            outside.display()
        ),
    );
    // Each symlink was followed as the app would: from the rootfs's own root.
    out.assert_success().assert_stdout_contains(&format!(
        "seen\n/rkt-volumes-escape-probe\n{}/in\n",
        outside.display()
    ));
    assert!(!rootfs.join("tmp").exists() && !rootfs.join("rkt-volumes-escape-probe").exists());
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "host dir written"
    );
    assert!(!Path::new("/rkt-volumes-escape-probe").exists());
    assert!(mounts_under(&outside).is_empty());
}

#[test]
fn on_the_hosts_root_a_missing_target_is_an_error_and_nothing_is_created() {
    test_kit::require_root!();
    // Not under /tmp, where the pod has a tmpfs of its own to create targets in.
    let world = support::world_off_tmp();
    let _g = leaks::Guard::new(world.leak_ctx());
    let host = world.path("host-src");
    fs::create_dir(&host).unwrap();
    fs::write(host.join("f"), "on the host\n").unwrap();
    let volume = format!("--volume=h,kind=host,source={}", host.display());
    let missing = world.path("no-such-dir");
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &volume,
            &format!("--mount=volume=h,target={}/sub", missing.display()),
            "--",
            "true",
        ])
        .run();
    out.assert_failure().assert_stderr_contains(&format!(
        "volume h: the target {}/sub does not exist on the host's root",
        missing.display()
    ));
    assert!(!missing.exists());
    // An existing target is mounted over in the pod only.
    let target = world.path("host-target");
    fs::create_dir(&target).unwrap();
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &volume,
            &format!("--mount=volume=h,target={}", target.display()),
            "--",
            "cat",
            &format!("{}/f", target.display()),
        ])
        .run();
    out.assert_success().assert_stdout_contains("on the host");
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    assert!(mounts_under(world.root.path()).is_empty());
}

#[test]
fn grammar_mistakes_name_the_word_and_leave_no_pod() {
    let world = World::new(support::RKT);
    let host = world.path("src");
    fs::create_dir(&host).unwrap();
    let ok = format!("--volume=v,kind=host,source={}", host.display());
    for (args, word) in [
        (
            vec!["--volume=v,kind=host,source=relative"],
            "source=\"relative\": the source must be an absolute path",
        ),
        (
            vec!["--volume=v,kind=host,source=/no/such/rkt-source"],
            "source /no/such/rkt-source: No such file or directory",
        ),
        (
            vec![ok.as_str(), "--volume=v,kind=empty,mode=0755,size=1"],
            "unknown key \"size\"",
        ),
        (vec!["--volume=v,kind=empty,uid=x"], "uid=\"x\""),
        (
            vec![ok.as_str(), "--volume=v,kind=empty"],
            "\"v\" is given twice",
        ),
        (
            vec![ok.as_str(), "--mount=volume=w,target=/x"],
            "--mount=volume=w,... of app \"sh\": no --volume=w,... declares it (declared: v)",
        ),
        (
            vec![ok.as_str(), "--mount=volume=v,target=/a/../../etc"],
            "'..' could leave the app's root",
        ),
        (
            vec![ok.as_str(), "--mount=volume=v,target=x"],
            "target=\"x\"",
        ),
    ] {
        for verb in ["run", "prepare"] {
            let mut full = vec![verb];
            full.extend(&args);
            full.extend(["--", "sh", "-c", "true"]);
            world
                .rkt(&full)
                .run()
                .assert_failure()
                .assert_stderr_contains(word);
        }
    }
    assert!(world.pods().is_empty());
}

#[test]
fn kill_9_of_rkt_run_with_volumes_then_gc_leaves_nothing() {
    test_kit::require_root!();
    let (mut world, _g, rootfs) = busybox_world();
    let host = world.path("host-k");
    let _sub = TmpfsMount::new(&host.join("sub"));
    let (uuid, index) = world.spawn_run(&[
        "--net=none",
        &format!(
            "--volume=h,kind=host,source={},readOnly=true",
            host.display()
        ),
        "--volume=e,kind=empty",
        &format!("--rootfs={}", rootfs.display()),
        "--mount=volume=h,target=/h",
        "--mount=volume=e,target=/e",
        "--",
        "sleep",
        "1000",
    ]);
    let init = world.wait_running(&uuid);
    let mounts = fs::read_to_string(format!("/proc/{init}/mountinfo")).unwrap();
    assert!(
        mounts.contains(" /h ro,") && mounts.contains(" /h/sub ro,"),
        "{mounts}"
    );
    // Protected kernel paths (the default): no device node opens through a volume.
    assert!(mounts.contains(" /e rw,nodev,"), "{mounts}");
    world.child(index).kill().unwrap();
    world.wait_child(index);
    pod_support::wait_gone(init);
    world.assert_gc_removes(&["--grace-period=0s"], &uuid);
    // Only the test's own tmpfs is mounted on the host under the world.
    assert_eq!(
        mounts_under(world.root.path()),
        [host.join("sub").display().to_string()]
    );
}

/// Every path at or below `dir` whose end is `tail` (`new/dir`).
fn find_ending(dir: &Path, tail: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.ends_with(tail) {
            found.push(path.clone());
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(find_ending(&path, tail));
        }
    }
    found
}

#[test]
fn an_image_pods_target_is_made_in_its_overlay_and_goes_with_the_pod() {
    if !image_common::ready(
        "an_image_pods_target_is_made_in_its_overlay_and_goes_with_the_pod",
        &["umoci"],
    ) {
        return;
    }
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let layout = image_common::busybox_layout(world.root.path());
    let image = format!("oci:{}:v1", layout.display());
    let uuid_file = world.path("uuid");
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &format!("--uuid-file-save={}", uuid_file.display()),
            "--volume=e,kind=empty",
            "--mount=volume=e,target=/new/dir",
            &image,
            "--",
            "echo kept > /new/dir/f && cat /new/dir/f",
        ])
        .run();
    out.assert_success().assert_stdout_contains("kept\n");
    let uuid = fs::read_to_string(&uuid_file).unwrap();
    let pod = world.path(&format!("data/pods/{uuid}"));
    // The pod's writes: the target in the overlay's upper directory, the file in the volume.
    assert!(pod.join("overlay/upper/new/dir").is_dir());
    assert_eq!(
        fs::read_to_string(pod.join("volumes/e/f")).unwrap(),
        "kept\n"
    );
    // The image's layers are untouched.
    let tail = Path::new("new/dir");
    assert!(find_ending(&world.path("data/images"), tail).is_empty());
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(!pod.exists());
}

#[test]
fn two_apps_share_an_empty_volume_each_at_its_own_target_and_only_where_mounted() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    let root = format!("--rootfs={}", rootfs.display());
    let host = world.path("host-ro");
    fs::create_dir(&host).unwrap();
    fs::write(host.join("config"), "from the host\n").unwrap();
    let uuid_file = world.path("uuid");
    // The writer runs to completion; the reader waits for its file (untilAll: both run
    // to the end, whatever the other does).
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            &format!("--uuid-file-save={}", uuid_file.display()),
            "--exit-policy=untilAll",
            "--volume=shared,kind=empty,mode=0777",
            &format!(
                "--volume=conf,kind=host,source={},readOnly=true",
                host.display()
            ),
            "--name=writer",
            &root,
            "--mount=volume=shared,target=/out",
            "--mount=volume=conf,target=/conf",
            "--",
            "sh",
            "-c",
            "cat /conf/config > /out/note; echo x > /conf/denied",
            "---",
            "--name=reader",
            &root,
            "--mount=volume=shared,target=/in/shared",
            "--",
            "sh",
            "-c",
            "for i in $(seq 400); do test -s /in/shared/note && break; sleep 0.05; done; \
             cat /in/shared/note; cat /conf/config 2>/dev/null || echo no-conf-here",
        ])
        .run();
    // The writer's refused write makes it fail (sh exits 1); the reader read its file,
    // and sees no host volume it did not mount (both apps share one rootfs directory).
    out.assert_exit_code(1)
        .assert_stdout_contains("from the host\nno-conf-here\n")
        .assert_stderr_contains("Read-only file system");
    let uuid = fs::read_to_string(&uuid_file).unwrap();
    let note = world.path(&format!("data/pods/{uuid}/volumes/shared/note"));
    assert_eq!(fs::read_to_string(note).unwrap(), "from the host\n");
    world.rkt(&["rm", &uuid]).run().assert_success();
    assert!(world.pods().is_empty());
}

#[test]
fn volumes_stay_writable_under_a_read_only_rootfs() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    let (out, _) = run_sh(
        &world,
        &rootfs,
        &[
            "--readonly-rootfs",
            "--volume=data,kind=empty",
            "--mount=volume=data,target=/data",
        ],
        "echo kept > /data/f && cat /data/f; echo x > /denied",
    );
    out.assert_exit_code(1)
        .assert_stdout_contains("kept\n")
        .assert_stderr_contains("can't create /denied: Read-only file system");
    // The target was made (in the tmpfs over the rootfs, not in it) before the root became
    // read-only.
    assert!(!rootfs.join("data").exists());
}

/// Issue 22, defect 2 (as a `--rootfs` pod hits it): a rootfs whose `/etc` lacks `hosts`
/// and `resolv.conf` has its `/etc` replaced in the pod by a tmpfs of binds of its entries;
/// under `--readonly-rootfs` those are read-only too: no new file in `/etc`, no change to
/// its files, nothing written into DIR.
#[test]
fn a_read_only_rootfs_keeps_etc_read_only_when_the_pod_adds_its_etc_files() {
    test_kit::require_root!();
    let (world, _g, rootfs) = busybox_world();
    fs::write(rootfs.join("etc/motd"), "hi\n").unwrap();
    let (out, _) = run_sh(
        &world,
        &rootfs,
        &["--readonly-rootfs"],
        "echo x 2>/dev/null > /etc/new && echo wrote new; \
         echo x 2>/dev/null >> /etc/motd && echo wrote motd; cat /etc/motd",
    );
    out.assert_success();
    assert_eq!(out.stdout(), "hi\n");
    assert!(!rootfs.join("etc/new").exists());
    assert_eq!(fs::read_to_string(rootfs.join("etc/motd")).unwrap(), "hi\n");
}
