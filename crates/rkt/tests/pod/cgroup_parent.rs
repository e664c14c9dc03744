//! Where a pod's cgroup goes: below the cgroup of the process that runs `rkt run` (as
//! `<that cgroup>/rkt/<uuid>`), or below `--cgroup-parent=PATH` (as `<PATH>/rkt-<uuid>`), in
//! every cgroup v1 hierarchy the pod uses; gone with the pod (also through `rkt gc` after
//! its runner was killed), the parent left as it was. Root only, on cgroup v1 hosts (v2's
//! placement is unit-tested in `isolation::cgroups::v2`). Every cgroup a test makes has a
//! name of its own and is removed when the test ends, also when it fails.

use crate::{leaks, support};

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rkt::isolation::cgroups::ProcCgroup;
use support::World;
use test_kit::{wait_for, KillOnDrop, PATIENCE};

/// The v1 hierarchies these tests place pods in: `pids` (every pod's) and `memory`
/// (`--memory`).
const CONTROLLERS: [&str; 2] = ["pids", "memory"];

/// Whether this host has the v1 hierarchies the tests use; says why it skips otherwise.
fn v1_host() -> bool {
    let root = Path::new("/sys/fs/cgroup");
    let v1 = !root.join("cgroup.controllers").exists()
        && CONTROLLERS
            .iter()
            .all(|c| root.join(c).join("cgroup.procs").exists());
    if !v1 {
        eprintln!("skipping: needs cgroup v1 pids and memory hierarchies");
    }
    v1
}

/// A cgroup of the test's own, `rkt-test-<pid>-<n>`, in each of [`CONTROLLERS`]; removed
/// on drop with whatever is left below it (its processes killed first).
struct TestCgroup {
    /// Controller → the cgroup's path within its hierarchy.
    paths: Vec<(&'static str, String)>,
}

impl TestCgroup {
    /// Below the root of each hierarchy: a `--cgroup-parent`.
    fn at_root() -> TestCgroup {
        let name = unique_name();
        TestCgroup::make(CONTROLLERS.map(|c| (c, format!("/{name}"))).to_vec())
    }

    /// Below the cgroup the test runs in, in each hierarchy (so that what runs there stays
    /// in the accounting of whoever runs the tests).
    fn below_own() -> TestCgroup {
        let own = ProcCgroup::parse(&fs::read_to_string("/proc/self/cgroup").unwrap());
        let name = unique_name();
        TestCgroup::make(
            CONTROLLERS
                .map(|c| {
                    let at = own.v1.get(c).map_or("/", String::as_str);
                    (c, format!("{}/{name}", at.trim_end_matches('/')))
                })
                .to_vec(),
        )
    }

    fn make(paths: Vec<(&'static str, String)>) -> TestCgroup {
        let cg = TestCgroup { paths };
        for (c, _) in &cg.paths {
            fs::create_dir(cg.dir(c)).unwrap();
        }
        cg
    }

    /// The cgroup's directory in `controller`'s hierarchy.
    fn dir(&self, controller: &str) -> PathBuf {
        Path::new("/sys/fs/cgroup")
            .join(controller)
            .join(self.path(controller).trim_start_matches('/'))
    }

    /// The cgroup's path within `controller`'s hierarchy.
    fn path(&self, controller: &str) -> &str {
        &self.paths.iter().find(|(c, _)| *c == controller).unwrap().1
    }

    /// The cgroups below it, relative to it, in `controller`'s hierarchy.
    fn children(&self, controller: &str) -> Vec<String> {
        fs::read_dir(self.dir(controller))
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The processes in it (not below it), in `controller`'s hierarchy.
    fn procs(&self, controller: &str) -> String {
        fs::read_to_string(self.dir(controller).join("cgroup.procs")).unwrap()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for (c, _) in &self.paths {
            remove_tree(&self.dir(c));
        }
    }
}

/// Removes the cgroup at `dir` and those below it, deepest first, killing what is left in
/// them.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    for _ in 0..100 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.parse::<i32>().ok()) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn unique_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "rkt-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `rkt <world's global options> args` in the background, started by a shell that first
/// moves itself into `cg` in every hierarchy, then becomes rkt; killed on drop.
fn rkt_in(world: &World, cg: &TestCgroup, args: &[&str]) -> KillOnDrop {
    let mut script = String::new();
    for (c, _) in &cg.paths {
        script += &format!("echo $$ > '{}/cgroup.procs' && ", cg.dir(c).display());
    }
    script += "exec \"$@\"";
    let child = Command::new("sh")
        .args(["-c", &script, "sh", env!("CARGO_BIN_EXE_rkt")])
        .arg(format!("--dir={}", world.path("data").display()))
        .arg(format!("--local-config={}", world.path("local").display()))
        .arg(format!(
            "--system-config={}",
            world.path("system").display()
        ))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    KillOnDrop(child)
}

/// Waits for the UUID `--uuid-file-save` writes to `file`.
fn saved_uuid(file: &Path) -> String {
    wait_for("the pod's UUID", PATIENCE, || {
        fs::read_to_string(file).ok().filter(|s| !s.is_empty())
    })
}

/// The cgroup path of `pid` in `controller`'s hierarchy, from `/proc/<pid>/cgroup`.
fn cgroup_of(pid: i64, controller: &str) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    ProcCgroup::parse(&text).v1[controller].clone()
}

/// The pod's init and its children (the app): every one is in `want` (controller → path).
fn assert_pod_in(init: i64, want: &[(&str, String)]) {
    let children = fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap();
    let pids: Vec<i64> = std::iter::once(init)
        .chain(children.split_whitespace().filter_map(|p| p.parse().ok()))
        .collect();
    assert!(pids.len() > 1, "the pod's init {init} has no app");
    for pid in pids {
        for (c, path) in want {
            assert_eq!(&cgroup_of(pid, c), path, "{c} cgroup of pod process {pid}");
        }
    }
}

/// Waits until pod `uuid`'s init `pid` is gone (it dies with its runner).
fn wait_gone(pid: i64) {
    wait_for("the process to end", PATIENCE, || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
}

#[test]
fn a_pod_run_from_a_cgroup_is_below_it_in_every_hierarchy_and_goes_with_the_pod() {
    test_kit::require_root!();
    if !v1_host() {
        return;
    }
    let cg = TestCgroup::below_own();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let file = world.path("uuid");
    let save = format!("--uuid-file-save={}", file.display());
    let mut runner = rkt_in(
        &world,
        &cg,
        &[
            "run",
            &save,
            "--net=none",
            "--memory=64M",
            "--",
            "sleep",
            "60",
        ],
    );
    let uuid = saved_uuid(&file);
    let init = world.wait_running(&uuid);
    let want: Vec<(&str, String)> = CONTROLLERS
        .iter()
        .map(|c| (*c, format!("{}/rkt/{uuid}", cg.path(c))))
        .collect();
    assert_pod_in(init, &want);
    // The record says where, and the limit is in that cgroup.
    let st = world.status_json(&uuid);
    for (c, path) in &want {
        assert_eq!(st["cgroups"][c], path.as_str(), "{st}");
    }
    let limit = cg
        .dir("memory")
        .join(format!("rkt/{uuid}/memory.limit_in_bytes"));
    assert_eq!(fs::read_to_string(limit).unwrap().trim(), "67108864");
    // `rkt enter`, run from elsewhere, puts its command in the recorded place.
    let entered = world
        .rkt(&["enter", &uuid, "cat", "/proc/self/cgroup"])
        .run();
    entered.assert_success();
    let inside = ProcCgroup::parse(&entered.stdout());
    assert_eq!(inside.v1["pids"], want[0].1);

    world.rkt(&["stop", &uuid]).run().assert_success();
    runner.wait().unwrap();
    // The pod's cgroup and the shared `rkt` went with it; the test's cgroup is as it was.
    for c in CONTROLLERS {
        assert!(cg.dir(c).is_dir());
        assert_eq!(cg.children(c), Vec::<String>::new(), "{c}");
        assert_eq!(cg.procs(c), "", "{c}");
    }
}

#[test]
fn with_cgroup_parent_the_pod_is_rkt_uuid_below_it_also_when_prepared() {
    test_kit::require_root!();
    if !v1_host() {
        return;
    }
    let cg = TestCgroup::at_root();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let parent = format!("--cgroup-parent={}", cg.path("pids"));
    let (uuid, index) =
        world.spawn_run(&[&parent, "--net=none", "--memory=64M", "--", "sleep", "60"]);
    let init = world.wait_running(&uuid);
    let want: Vec<(&str, String)> = CONTROLLERS
        .iter()
        .map(|c| (*c, format!("{}/rkt-{uuid}", cg.path(c))))
        .collect();
    assert_pod_in(init, &want);
    assert_eq!(
        world.status_json(&uuid)["cgroups"]["pids"],
        want[0].1.as_str()
    );
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
    for c in CONTROLLERS {
        assert!(cg.dir(c).is_dir(), "the parent went with the pod");
        assert_eq!(cg.children(c), Vec::<String>::new(), "{c}");
    }

    // `rkt prepare` keeps the parent; `rkt run-prepared` makes the pod's cgroup there.
    let out = world.rkt(&["prepare", &parent, "--", "sleep", "60"]).run();
    out.assert_success();
    let prepared = out.stdout().trim().to_string();
    assert_eq!(
        world.status_json(&prepared)["cgroup_parent"],
        cg.path("pids")
    );
    let runner = world
        .command(&["run-prepared", "--net=none", &prepared])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut runner = KillOnDrop(runner);
    let init = world.wait_running(&prepared);
    let pids_path = format!("{}/rkt-{prepared}", cg.path("pids"));
    assert_pod_in(init, &[("pids", pids_path)]);
    world.rkt(&["stop", &prepared]).run().assert_success();
    runner.wait().unwrap();
    assert_eq!(cg.children("pids"), Vec::<String>::new());

    // A relative path or one with `..` is refused, naming the flag, before any pod exists.
    let before = world.pods().len();
    for bad in ["rkt-test", "/a/../b"] {
        let flag = format!("--cgroup-parent={bad}");
        world
            .rkt(&["run", &flag, "--net=none", "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(&flag);
        world
            .rkt(&["prepare", &flag, "--", "true"])
            .run()
            .assert_failure()
            .assert_stderr_contains(&flag);
    }
    assert_eq!(world.pods().len(), before);
}

#[test]
fn gc_after_kill_9_of_the_runner_removes_the_pods_cgroup_where_it_was_recorded() {
    test_kit::require_root!();
    if !v1_host() {
        return;
    }
    // Default place (below the runner's cgroup), and a --cgroup-parent: gc, run from the
    // test's own cgroup, removes each where the record says.
    for with_parent in [false, true] {
        let cg = TestCgroup::below_own();
        let world = World::new(support::RKT);
        let _g = leaks::Guard::new(world.leak_ctx());
        let file = world.path("uuid");
        let save = format!("--uuid-file-save={}", file.display());
        let parent = format!("--cgroup-parent={}", cg.path("pids"));
        let mut args = vec!["run", save.as_str(), "--net=none"];
        if with_parent {
            args.push(&parent);
        }
        args.extend(["--", "sleep", "60"]);
        let mut runner = rkt_in(&world, &cg, &args);
        let uuid = saved_uuid(&file);
        let init = world.wait_running(&uuid);
        let pod = match with_parent {
            true => cg.dir("pids").join(format!("rkt-{uuid}")),
            false => cg.dir("pids").join(format!("rkt/{uuid}")),
        };
        assert!(pod.is_dir(), "no pod cgroup {}", pod.display());
        runner.kill().unwrap();
        runner.wait().unwrap();
        wait_gone(init);
        assert!(pod.is_dir(), "the pod's cgroup is gc's to remove");
        world
            .rkt(&["gc"])
            .run()
            .assert_success()
            .assert_stdout_contains(&format!("released pod {uuid}"));
        assert!(!pod.exists(), "gc left {}", pod.display());
        assert!(cg.dir("pids").is_dir());
        assert_eq!(cg.children("pids"), Vec::<String>::new());
    }
}
