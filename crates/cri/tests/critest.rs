//! critest (cri-tools 1.26.1, the suite containerd and CRI-O run) against rkt-cri, through
//! the offline harness in `../shared/critest` (its README: a private network namespace, a
//! local registry with the suite's images under their upstream names, the CNI
//! configuration, a cleanup that leaves the host as it was).
//!
//! Part of the suite (CI runs it): about 100 s, with the harness's fixed paths (`/tmp/ctd-*`,
//! `/tmp/rt.sock`), so two runs on one machine must not overlap. Run it alone with
//! `cargo test -p rkt-cri --test critest -- --nocapture` (as root; critest is built into
//! `/tmp/critest-bin` from `../shared/cri-tools` when missing). It fails when a spec fails that is
//! not in [`KNOWN_FAILING`], the one place where the specs that do not pass yet are named
//! with the reason; it also fails when one of those passes, so the list stays true.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Specs that fail today, each with why (a fragment of the spec's text, the reason).
const KNOWN_FAILING: &[(&str, &str)] = &[];

fn harness() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/critest")
}

fn sh(dir: &Path, script: &str) -> bool {
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn critest_passes_all_but_the_known_failing() {
    if !test_kit::is_root() {
        eprintln!("skipping critest: needs root");
        return;
    }
    let here = harness();
    assert!(
        here.join("run.sh").is_file(),
        "no harness at {}",
        here.display()
    );
    assert!(
        sh(&here, "../cri-tools/build /tmp/critest-bin >/dev/null"),
        "cannot build critest"
    );
    let results = tempfile::tempdir().unwrap();
    let results = results.path().join("results");
    let setup = "./registry.sh start && \
        { ./netns.sh exec python3 images.py check 2>/dev/null || \
          { python3 images.py build && ./netns.sh exec python3 images.py push; }; } && \
        ./containerd.sh config";
    assert!(sh(&here, setup), "the harness's setup failed");
    let data = "/tmp/ctd-rkt";
    let mut server = Command::new(here.join("netns.sh"))
        .arg("exec")
        .arg(env!("CARGO_BIN_EXE_rkt-cri"))
        .args([
            "--listen=unix:///tmp/rt.sock",
            &format!("--dir={data}"),
            "--local-config=/tmp/ctd-etc",
            "--net-conf-dir=/tmp/ctd-etc/net.d",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("start rkt-cri in the harness's netns");
    let run = Command::new(here.join("run.sh"))
        .args(["--runtime", "external", "--endpoint", "unix:///tmp/rt.sock"])
        .arg("--results")
        .arg(&results)
        .current_dir(&here)
        .status()
        .expect("run.sh");
    let _ = server.kill();
    let _ = server.wait();
    let cleaned = sh(
        &here,
        &format!(
            "CRITEST_SHM_BEFORE={}/ipcs-before.txt ./cleanup.sh",
            results.display()
        ),
    );
    let summary = std::fs::read_to_string(results.join("summary.txt")).unwrap_or_default();
    eprintln!("{summary}");
    let failed: Vec<&str> = summary
        .lines()
        .filter_map(|l| l.strip_prefix("FAILED [failed] "))
        .collect();
    let unexpected: Vec<&&str> = failed
        .iter()
        .filter(|f| !KNOWN_FAILING.iter().any(|(frag, _)| f.contains(frag)))
        .collect();
    let fixed: Vec<&str> = KNOWN_FAILING
        .iter()
        .filter(|(frag, _)| !failed.iter().any(|f| f.contains(frag)))
        .map(|(frag, _)| *frag)
        .collect();
    assert!(
        summary.contains(" passed, "),
        "critest did not run (run.sh: {run:?})"
    );
    assert!(unexpected.is_empty(), "specs failed: {unexpected:#?}");
    assert!(
        fixed.is_empty(),
        "these pass now: take them out of KNOWN_FAILING: {fixed:#?}"
    );
    assert!(
        cleaned,
        "the harness's cleanup did not leave the host clean"
    );
}
