//! A host-command pod's view of the host, attacked from inside: the host's tree is
//! read-only with every mount in it (a tmpfs of the host's too), rkt's own state (other
//! pods' files) is hidden, and only the pod's own mounts are writable: its volumes, its
//! `/dev`, and a private `/tmp` and `/var/tmp` unless `--readonly-rootfs`. Root only;
//! every test ends with the leak checker.

use crate::{leaks, pod_support, support};

use std::fs;
use std::path::Path;
use std::process::Command;

/// A shell script that tries to create a file in the root of every mount the pod sees
/// (removing it at once) and prints, sorted, the mount points where that worked.
const WRITABLE_MOUNTS: &str = r#"f=.rkt-write-probe-$$
while read -r _ _ _ _ mp _; do
  if touch "$mp/$f" 2>/dev/null; then rm -f "$mp/$f"; echo "$mp"; fi
done < /proc/self/mountinfo | sort -u"#;

/// `paths` one a line, in the byte order `sort -u` gives them in the pod (which has no locale),
/// wherever the test's own directory sorts among them.
fn sorted_lines(paths: &[&str]) -> String {
    let mut paths = paths.to_vec();
    paths.sort_unstable();
    paths.dedup();
    paths.iter().map(|p| format!("{p}\n")).collect()
}

#[test]
fn a_host_command_pod_cannot_write_the_hosts_files_nor_a_tmpfs_of_the_host() {
    test_kit::require_root!();
    let mut world = support::world_off_tmp();
    let _g = leaks::Guard::new(world.leak_ctx());
    let plain = world.path("plain");
    fs::create_dir(&plain).unwrap();
    // The host's /tmp (here no mount of its own) as the pod would find it.
    let host_tmp = tempfile::tempdir().unwrap();
    // A tmpfs of the host's, mounted by the test in a mount namespace of its own, where
    // rkt runs the pod.
    let tmpfs = world.path("tmpfs");
    fs::create_dir(&tmpfs).unwrap();
    let targets = [plain.join("x"), host_tmp.path().join("x"), tmpfs.join("x")];
    let script: String = targets
        .iter()
        .map(|t| format!("touch {0} && echo wrote {0}; ", t.display()))
        .collect();
    let mut args = vec!["run", "--net=none", "--", "sh", "-c", &script];
    let run = world.command(&args);
    let out = Command::new("unshare")
        .args(["--mount", "--propagation=private", "sh", "-c"])
        .arg(r#"mount -t tmpfs rkt-test-tmpfs "$0" && "$@"; echo "left: $(ls -A "$0")""#)
        .arg(&tmpfs)
        .arg(run.get_program())
        .args(run.get_args())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout, "left: \n", "{stderr}");
    assert_eq!(
        stderr.matches("Read-only file system").count(),
        2,
        "{stderr}"
    );
    for target in &targets[..2] {
        assert!(!target.exists(), "the pod wrote {}", target.display());
    }

    // Nor can a command entered into a running pod.
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "60"]);
    world.wait_running(&uuid);
    let entered = plain.join("entered");
    let touch = entered.display().to_string();
    args = vec!["enter", &uuid, "--", "touch", &touch];
    world
        .rkt(&args)
        .run()
        .assert_exit_code(1)
        .assert_stderr_contains("Read-only file system");
    assert!(!entered.exists(), "rkt enter wrote {touch}");
    world.rkt(&["stop", &uuid]).run().assert_success();
    assert!(world.wait_child(index).0.is_some());
}

#[test]
fn a_host_command_pod_can_neither_read_nor_write_another_pods_files() {
    test_kit::require_root!();
    let mut world = support::world_off_tmp();
    let _g = leaks::Guard::new(world.leak_ctx());
    let (victim, index) = world.spawn_run(&["--net=none", "--", "sleep", "60"]);
    world.wait_running(&victim);
    let data = world.path("data");
    let manifest = data.join("pods").join(&victim).join("pod.json");
    let before = fs::read(&manifest).unwrap();
    let script = format!(
        "cat {m} && echo read; echo x >> {m} && echo wrote; \
         echo entries: $(find {d} /var/lib/cni /run/rkt -mindepth 1 2>/dev/null | wc -l)",
        m = manifest.display(),
        d = data.display()
    );
    let out = world
        .rkt(&["run", "--net=none", "--", "sh", "-c", &script])
        .run();
    let stdout = out.stdout();
    assert!(
        !stdout.contains("read") && !stdout.contains("wrote"),
        "{stdout}"
    );
    assert!(!stdout.contains(&victim), "{stdout}");
    out.assert_stderr_contains("No such file or directory");
    // The data directory is empty, and so are CNI's leases and rkt's run-time state.
    assert_eq!(stdout, "entries: 0\n", "{}", out.stderr());
    assert_eq!(fs::read(&manifest).unwrap(), before);
    world.rkt(&["stop", &victim]).run().assert_success();
    assert!(world.wait_child(index).0.is_some());
}

#[test]
fn only_a_pods_own_mounts_are_writable_and_readonly_rootfs_leaves_its_volumes() {
    test_kit::require_root!();
    let world = support::world_off_tmp();
    let _g = leaks::Guard::new(world.leak_ctx());
    let (vol, volume, mount) = pod_support::shared_dir_in(&world, "vol");
    let locked = world.path("locked");
    fs::create_dir(&locked).unwrap();
    let ro_volume = format!(
        "--volume=ro,kind=host,source={},readOnly=true",
        locked.display()
    );
    let ro_mount = format!("--mount=volume=ro,target={}", locked.display());
    // Names no one else on the host uses.
    let scratch = format!("/tmp/rkt-scratch-{}", std::process::id());
    let scratch_mount = format!("--mount=volume=scratch,target={scratch}");
    let script = format!(
        "echo a > {v}/a && echo vol-ok; echo b > {scratch}/b && echo scratch-ok; \
         echo c > {l}/c || echo ro-refused; {WRITABLE_MOUNTS}",
        v = vol.display(),
        l = locked.display()
    );
    for net in ["--net=none", "--net=host"] {
        let out = world
            .rkt(&[
                "run",
                net,
                &volume,
                &ro_volume,
                "--volume=scratch,kind=empty",
                &mount,
                &ro_mount,
                // Created in the pod's own /tmp: the host's has no such directory.
                &scratch_mount,
                "--",
                "sh",
                "-c",
                &script,
            ])
            .run();
        out.assert_success();
        let vol_path = vol.display().to_string();
        let writable = sorted_lines(&["/dev", "/dev/shm", "/tmp", &scratch, "/var/tmp", &vol_path]);
        let expected = format!("vol-ok\nscratch-ok\nro-refused\n{writable}");
        assert_eq!(out.stdout(), expected, "{net}: {}", out.stderr());
        assert_eq!(fs::read_to_string(vol.join("a")).unwrap(), "a\n");
        assert!(!locked.join("c").exists());
        assert!(!Path::new(&scratch).exists());
    }

    // --readonly-rootfs: no /tmp of its own either; only the volume and the pod's /dev.
    let (tmp, var_tmp) = (format!("{scratch}-x"), format!("/var{scratch}-x"));
    let script = format!(
        "echo a > {}/b && echo vol-ok; touch {tmp} {var_tmp} || echo tmp-refused; \
         {WRITABLE_MOUNTS}",
        vol.display()
    );
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--readonly-rootfs",
            &volume,
            &mount,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .run();
    out.assert_success()
        .assert_stderr_contains("Read-only file system");
    let writable = sorted_lines(&["/dev", "/dev/shm", &vol.display().to_string()]);
    let expected = format!("vol-ok\ntmp-refused\n{writable}");
    assert_eq!(out.stdout(), expected, "{}", out.stderr());
    assert!(vol.join("b").exists());
    assert!(!Path::new(&tmp).exists() && !Path::new(&var_tmp).exists());
}
