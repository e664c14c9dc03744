//! `rkt completion bash|zsh|fish` and the manual pages of `rkt man DIR`: generated from the
//! command line's own definitions, so they know every command and flag.

use crate::support;

use support::rkt;

#[test]
fn bash_completion_is_valid_bash_and_knows_every_command_and_flag() {
    let out = rkt(&["completion", "bash"]).run();
    out.assert_success();
    let script = out.stdout();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rkt.bash");
    std::fs::write(&file, &script).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    for word in [
        "run-prepared",
        "--uuid-file-save",
        "--user-annotation",
        "--no-legend",
    ] {
        assert!(
            script.contains(word),
            "{word} missing from the bash completion"
        );
    }
}

#[test]
fn zsh_and_fish_completions_are_generated() {
    for (shell, marker) in [("zsh", "#compdef rkt"), ("fish", "complete -c rkt")] {
        let out = rkt(&["completion", shell]).run();
        out.assert_success();
        assert!(out.stdout().contains(marker), "{shell}: {}", out.stdout());
        assert!(out.stdout().contains("run-prepared"), "{shell}");
    }
    rkt(&["completion", "tcsh"])
        .run()
        .assert_exit_code(254)
        .assert_stderr_contains("tcsh");
}

#[test]
fn man_writes_a_page_per_visible_command() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = rkt(&[std::ffi::OsStr::new("man"), pages.as_os_str()]).run();
    out.assert_success();
    for page in [
        "rkt",
        "rkt-run",
        "rkt-status",
        "rkt-list",
        "rkt-net-list",
        "rkt-completion",
    ] {
        let path = pages.join(format!("{page}.1"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        assert!(text.contains(".TH"), "{page}: not a manual page");
        out.assert_stdout_contains(&path.display().to_string());
    }
    let run = std::fs::read_to_string(pages.join("rkt-run.1")).unwrap();
    assert!(run.contains("user\\-annotation"), "rkt-run.1 lacks a flag");
    assert!(
        !pages.join("rkt-man.1").exists(),
        "the hidden command has no page"
    );
}
