//! A temporary rkt installation for one test: a data directory and empty local and system
//! configurations of its own, so no test touches `/var/lib/rkt` or `/etc/rkt`, and the real
//! `rkt` binary run against them, in the foreground or in the background. Dropping it kills
//! what still runs, collects every pod and removes the namespaces they left.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

use crate::{unique, wait_for, Outcome, Rkt, PATIENCE};

/// Where rkt binds a pod's network namespace (`rkt::netns::pod_netns_path`).
const POD_NETNS_DIR: &str = "/run/netns";

/// A temporary rkt world: `<root>/data` (`--dir`), `<root>/local` (`--local-config`) and
/// `<root>/system` (`--system-config`).
pub struct World {
    /// The world's directory, removed on drop.
    pub root: tempfile::TempDir,
    /// A name unique to this world, for what it shares with the host (networks, subnets).
    pub id: String,
    rkt: PathBuf,
    /// Background `rkt run`s, by index; `None` once waited for.
    background: Vec<Option<Child>>,
}

impl World {
    /// A world in the system's temporary directory, running the rkt binary at `rkt`.
    pub fn new(rkt: impl Into<PathBuf>) -> World {
        World::new_in(rkt, &std::env::temp_dir())
    }

    /// A world in a temporary directory under `parent` (a host-command pod has a `/tmp` of
    /// its own, which would hide a world there from it).
    pub fn new_in(rkt: impl Into<PathBuf>, parent: &Path) -> World {
        fs::create_dir_all(parent).unwrap();
        let root = tempfile::tempdir_in(parent).unwrap();
        for d in ["data", "local", "system"] {
            fs::create_dir(root.path().join(d)).unwrap();
        }
        World {
            root,
            id: unique(),
            rkt: rkt.into(),
            background: Vec::new(),
        }
    }

    /// `<root>/<rel>`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The data directory, `--dir`.
    pub fn data(&self) -> PathBuf {
        self.path("data")
    }

    /// The global options that point rkt at this world's directories.
    pub fn globals(&self) -> Vec<String> {
        vec![
            format!("--dir={}", self.data().display()),
            format!("--local-config={}", self.path("local").display()),
            format!("--system-config={}", self.path("system").display()),
        ]
    }

    /// `rkt <globals> <args>`, to run and assert on.
    pub fn rkt(&self, args: &[&str]) -> Rkt {
        Rkt::new(&self.rkt).args(&self.globals()).args(args)
    }

    /// The same as a plain `Command` (stdin from `/dev/null`), for background use or
    /// streams of the test's choosing.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.rkt);
        cmd.args(self.globals()).args(args).stdin(Stdio::null());
        cmd
    }

    /// `rkt <globals> <args>` run to completion.
    pub fn output(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `rkt <globals> <args>` with `input` written to its stdin (then closed), run to
    /// completion.
    pub fn output_with_stdin(&self, args: &[&str], input: &str) -> Output {
        crate::output_with_stdin(&mut self.command(args), input.as_bytes())
    }

    /// `rkt gc --grace-period=0s --expire-prepared=0s`.
    pub fn gc(&self) -> Output {
        self.output(&["gc", "--grace-period=0s", "--expire-prepared=0s"])
    }

    /// What the leak checker may blame on this world: every pod in its data directory.
    /// Tests add the networks (`shared_network("default")`) and subnets their pods use.
    pub fn leak_ctx(&self) -> leak_check::Ctx {
        leak_check::Ctx::new(self.data())
    }

    /// `rkt run --uuid-file-save=… <args>` in the foreground: its outcome and the new pod's
    /// UUID (empty when no pod was made).
    pub fn run_uuid(&self, args: &[&str]) -> (Outcome, String) {
        let file = self.path("uuid-fg");
        let _ = fs::remove_file(&file);
        let save = format!("--uuid-file-save={}", file.display());
        let mut full = vec!["run", save.as_str()];
        full.extend_from_slice(args);
        let out = self.rkt(&full).run();
        (out, fs::read_to_string(&file).unwrap_or_default())
    }

    /// Starts `rkt run <args>` in the background, saving the UUID; returns (uuid, index)
    /// once the UUID is known.
    pub fn spawn_run(&mut self, args: &[&str]) -> (String, usize) {
        let uuid_file = self.path(&format!("uuid-bg-{}", self.background.len()));
        let save = format!("--uuid-file-save={}", uuid_file.display());
        let mut full = vec!["run", save.as_str()];
        full.extend_from_slice(args);
        let child = self
            .command(&full)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.background.push(Some(child));
        let index = self.background.len() - 1;
        let uuid = wait_for("the pod's UUID", PATIENCE, || {
            fs::read_to_string(&uuid_file)
                .ok()
                .filter(|s| !s.is_empty())
        });
        (uuid, index)
    }

    /// The background `rkt run` number `index`.
    pub fn child(&mut self, index: usize) -> &mut Child {
        self.background[index].as_mut().expect("already waited for")
    }

    /// Waits for background run `index` to end; returns its exit code and stderr.
    pub fn wait_child(&mut self, index: usize) -> (Option<i32>, String) {
        let child = self.background[index].take().expect("already waited for");
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `rkt status --format=json <uuid>`, which must succeed.
    pub fn status_json(&self, uuid: &str) -> Value {
        let out = self.rkt(&["status", "--format=json", uuid]).run();
        out.assert_success();
        out.json()
    }

    /// Waits until pod `uuid` runs its app (`rkt status`: state running, init PID known);
    /// returns that PID.
    pub fn wait_running(&self, uuid: &str) -> i64 {
        wait_for("the pod to run its app", PATIENCE, || {
            let out = self.output(&["status", "--format=json", uuid]);
            let st: Value = serde_json::from_slice(&out.stdout).ok()?;
            (st["state"] == "running")
                .then(|| st["pid"].as_i64())
                .flatten()
        })
    }

    /// Waits until pod `uuid` has exited (`rkt status`: state exited).
    pub fn wait_exited(&self, uuid: &str) {
        wait_for("the pod to exit", PATIENCE, || {
            (self.status_json(uuid)["state"] == "exited").then_some(())
        })
    }

    /// Asserts that `rkt gc <options>` succeeds, says it removed pod `uuid`, and leaves no
    /// pod in the data directory.
    pub fn assert_gc_removes(&self, options: &[&str], uuid: &str) {
        let mut args = vec!["gc"];
        args.extend_from_slice(options);
        self.rkt(&args)
            .run()
            .assert_success()
            .assert_stdout_contains(&format!("removed pod {uuid}"));
        let left = self.pods();
        assert!(left.is_empty(), "rkt gc left pods {left:?}");
    }

    /// The UUIDs of the pods in this world's data directory.
    pub fn pods(&self) -> Vec<String> {
        fs::read_dir(self.data().join("pods"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The state of pod `uuid` (its `state.json`'s `state`; empty when there is none).
    pub fn state(&self, uuid: &str) -> String {
        let text = fs::read_to_string(self.data().join("pods").join(uuid).join("state.json"))
            .unwrap_or_default();
        let v: Value = serde_json::from_str(&text).unwrap_or_default();
        v["state"].as_str().unwrap_or("").to_string()
    }
}

impl Drop for World {
    /// Best effort, so a failing test leaves nothing on the host (the leak checker, dropped
    /// earlier, has already judged): kill the background runs and the pods still running
    /// (sandboxes and detached pods have no runner the test holds), collect every pod,
    /// then unmount and remove the namespaces the pods left.
    fn drop(&mut self) {
        for child in self.background.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let pods = self.pods();
        // Pods no child of the test holds (sandboxes, `--detach`): killed, and their
        // runners given a moment to tear them down.
        let running = |uuid: &str| {
            let out = self.output(&["status", "--format=json", uuid]);
            serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|s| s["state"] == "running")
        };
        let live: Vec<&String> = pods.iter().filter(|u| running(u)).collect();
        for uuid in &live {
            let _ = self.output(&["stop", "--force", uuid]);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while live.iter().any(|u| running(u)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.gc();
        for uuid in pods {
            let ns = Path::new(POD_NETNS_DIR).join(format!("rkt-{uuid}"));
            if ns.exists() {
                let _ = nix::mount::umount2(&ns, nix::mount::MntFlags::MNT_DETACH);
                let _ = fs::remove_file(&ns);
            }
        }
    }
}
