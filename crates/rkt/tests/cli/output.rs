//! Commands whose stdout's reader has gone (`rkt list | head -1`) end quietly, killed by
//! SIGPIPE as Unix tools are, instead of panicking with "failed printing to stdout".

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

#[test]
fn a_closed_stdout_ends_every_command_quietly_by_sigpipe() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().display().to_string();
    let commands: [&[&str]; 5] = [
        &["list"],
        &["list", "--format=json"],
        &["version"],
        &["config"],
        &["net", "list", "--net-conf-dir", &data],
    ];
    for args in commands {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = Command::new(env!("CARGO_BIN_EXE_rkt"))
            .args([
                "--dir",
                &data,
                "--local-config",
                &data,
                "--system-config",
                &data,
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(write))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "rkt {args:?}: {:?}, stderr: {err}",
            out.status
        );
        assert_eq!(err, "", "rkt {args:?}");
    }
}

#[test]
fn an_open_stdout_is_written_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rkt"))
        .args(["--dir", &dir.path().display().to_string(), "list"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().next().unwrap().split('\t').collect::<Vec<_>>(),
        [
            "UUID",
            "APP",
            "IMAGE NAME",
            "STATE",
            "CREATED",
            "STARTED",
            "NETWORKS"
        ]
    );
    assert!(text.ends_with('\n'));
}
