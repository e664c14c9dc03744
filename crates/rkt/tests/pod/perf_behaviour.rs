//! Behaviour the pod-cycle optimisations rely on (docs/PERFORMANCE.md), through the real
//! binary: the stage, started without a pre-exec step, still refuses to run a pod whose
//! runner is not its parent.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

#[test]
fn a_stage_whose_parent_is_not_the_runner_reports_it_and_runs_nothing() {
    let pod_dir = tempfile::tempdir().unwrap();
    // Close-on-exec, so that no child another test of this binary starts meanwhile keeps
    // the write end open; the stage alone gets it, below.
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
    let fd = write_end.as_raw_fd().to_string();
    let dir = pod_dir.path().to_str().unwrap();
    let raw = write_end.as_raw_fd();
    let mut command = Command::new(env!("CARGO_BIN_EXE_rkt"));
    command
        .args(["stage1-init", "--pod-dir", dir, "--hostname", "h"])
        .args(["--status-fd", &fd, "--runner-pid", "1"]);
    // SAFETY: fcntl(2) is async-signal-safe; it clears close-on-exec of the write end in
    // the child only, which the parent keeps open until the spawn returns.
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(raw, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    drop(write_end);
    let mut report = String::new();
    std::fs::File::from(read_end)
        .read_to_string(&mut report)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(125), "{report}");
    assert_eq!(
        report,
        "error the runner (PID 1) ended before the pod stage started\n"
    );
}

#[test]
fn a_stage_with_bad_arguments_fails_naming_them() {
    let out = Command::new(env!("CARGO_BIN_EXE_rkt"))
        .args([
            "stage1-init",
            "--pod-dir",
            "/nonexistent",
            "--status-fd",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--status-fd: \"x\" is not a number"),
        "{stderr}"
    );
}
