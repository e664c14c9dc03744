//! critest (cri-tools 1.26.1, the suite containerd and CRI-O run) against rkt-cri, through
//! the offline harness in `../shared/critest` (its README: a private network namespace, a
//! local registry with the suite's images under their upstream names, the CNI
//! configuration, a cleanup that leaves the host as it was).
//!
//! Part of the suite (CI runs it): about 55 s once its images are built, with the harness's
//! fixed paths (`/tmp/ctd-*`, `/tmp/rt.sock`), so two runs on one machine must not overlap.
//! Run it alone with `cargo test -p rkt-cri --test critest -- --nocapture` (as root;
//! critest is built into `/tmp/critest-bin` from `../shared/cri-tools` when missing). It
//! fails when a spec fails that is not in [`KNOWN_FAILING`], the one place where the specs
//! that do not pass yet are named with the reason; it also fails when one of those passes,
//! so the list stays true.

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
    let results_dir = tempfile::tempdir().unwrap();
    let results = results_dir.path().join("results");
    // From here on the harness is torn down however the test ends.
    let mut harness = Harness {
        here: here.clone(),
        results: results.clone(),
        server: None,
        cleaned: false,
    };
    // containerd's configuration names a runc; rkt-cri runs none, and a machine without
    // one (no containerd or podman installed) would stop the script.
    let setup = "./registry.sh start && \
        { ./netns.sh exec python3 images.py check 2>/dev/null || \
          { python3 images.py build && ./netns.sh exec python3 images.py push; }; } && \
        CRITEST_RUNC=/bin/true ./containerd.sh config";
    assert!(sh(&here, setup), "the harness's setup failed");
    let data = "/tmp/ctd-rkt";
    harness.server = Some(
        Command::new(here.join("netns.sh"))
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
            .expect("start rkt-cri in the harness's netns"),
    );
    test_kit::wait_for(
        "rkt-cri's socket",
        std::time::Duration::from_secs(60),
        || Path::new("/tmp/rt.sock").exists().then_some(()),
    );
    let run = Command::new(here.join("run.sh"))
        .args(["--runtime", "external", "--endpoint", "unix:///tmp/rt.sock"])
        .arg("--results")
        .arg(&results)
        .current_dir(&here)
        .status()
        .expect("run.sh");
    let cleaned = harness.clean_up();
    let summary = std::fs::read_to_string(results.join("summary.txt")).unwrap_or_default();
    eprintln!("{summary}");
    // `FAILED [failed] `, `[panicked]`, `[timedout]`... : every way a spec can fail.
    let failed: Vec<&str> = summary
        .lines()
        .filter_map(|l| l.strip_prefix("FAILED ["))
        .filter_map(|l| l.split_once("] ").map(|(_, spec)| spec))
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
        run.success() || !KNOWN_FAILING.is_empty(),
        "critest failed (run.sh: {run:?}) though no spec is listed as failed"
    );
    assert!(cleaned.is_empty(), "left on the host: {cleaned:#?}");
}

/// The harness's registry, network namespace and server, torn down once: by the test, which
/// checks what is left, or on a panic before that.
struct Harness {
    here: PathBuf,
    results: PathBuf,
    server: Option<std::process::Child>,
    cleaned: bool,
}

impl Harness {
    /// Stops the server, runs the harness's cleanup, and returns what is still on the
    /// host: `/tmp/ctd-*` files and mounts (the cleanup's own status says nothing of them).
    fn clean_up(&mut self) -> Vec<String> {
        self.cleaned = true;
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
        let mut left = Vec::new();
        if !sh(
            &self.here,
            &format!(
                "CRITEST_SHM_BEFORE={}/ipcs-before.txt ./cleanup.sh",
                self.results.display()
            ),
        ) {
            left.push("cleanup.sh failed".to_string());
        }
        for entry in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("ctd-") {
                left.push(format!("/tmp/{name}"));
            }
        }
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        left.extend(
            mounts
                .lines()
                .filter(|l| {
                    l.split(' ')
                        .nth(4)
                        .is_some_and(|m| m.starts_with("/tmp/ctd-"))
                })
                .map(|l| format!("mount {l}")),
        );
        left
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if !self.cleaned {
            self.clean_up();
        }
    }
}
