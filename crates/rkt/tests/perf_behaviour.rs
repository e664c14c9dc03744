//! Behaviour the pod-cycle optimisations rely on (docs/PERFORMANCE.md), through the real
//! binary: the stage, started without a pre-exec step, still refuses to run a pod whose
//! runner is not its parent.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

#[test]
fn a_stage_whose_parent_is_not_the_runner_reports_it_and_runs_nothing() {
    let pod_dir = tempfile::tempdir().unwrap();
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills `fds` with two new descriptors (without close-on-exec, so the
    // stage inherits the write end), each owned once below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both are fresh descriptors nothing else owns.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd = write_end.as_raw_fd().to_string();
    let dir = pod_dir.path().to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rkt"))
        .args(["stage1-init", "--pod-dir", dir, "--hostname", "h"])
        .args(["--status-fd", &fd, "--runner-pid", "1"])
        .spawn()
        .unwrap();
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
