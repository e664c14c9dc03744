//! What of the caller a pod can reach, tried from inside pods as a hostile app would: the
//! caller's terminal (typing into it with TIOCSTI, under `rkt run` and `rkt enter` in a
//! shell on a terminal the test opens), the caller's other descriptors (one on 7, the
//! stdin of an entered command read through `/proc/<pid>/fd/0`), and the host's rkt binary
//! (through `/proc/1/exe` and a `#!/proc/self/exe` script run by `rkt enter`). And what
//! must keep working: shells with job control and window resizing on a terminal, pipes in
//! and out, socket-activation descriptors. Root only; every test ends with the leak
//! checker.

use crate::{leaks, pod_support, support};

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pod_support::{escape_probe, World};
use test_kit::{wait_for, PATIENCE};

const RKT: &str = env!("CARGO_BIN_EXE_rkt");

/// A shell on a terminal the test holds the other end of, as an administrator's.
struct Terminal {
    master: std::fs::File,
    screen: test_kit::pty::Screen,
    shell: Child,
}

impl Terminal {
    /// `sh -i` on a new pseudo-terminal of `rows` x `cols`, as its controlling terminal.
    fn new(rows: u16, cols: u16) -> Terminal {
        let pty = test_kit::pty::open(Some((rows, cols)));
        let slave: OwnedFd = pty.slave;
        let mut cmd = Command::new("sh");
        cmd.arg("-i")
            .env("PS1", "$ ")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and TIOCSCTTY are async-signal-safe and take no pointers.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let shell = cmd.spawn().unwrap();
        let screen = test_kit::pty::Screen::record(&pty.master);
        Terminal {
            master: std::fs::File::from(pty.master),
            screen,
            shell,
        }
    }

    fn type_line(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.write_all(b"\n").unwrap();
    }

    /// Waits until the terminal has shown `needle` (60 s at most); returns all it showed.
    fn wait_for(&self, needle: &str) -> String {
        self.screen.wait_for(needle)
    }

    /// Runs `line` in the shell and waits until it has finished: the marker the shell
    /// prints afterwards is computed, so the typed line's own echo does not match it.
    fn run(&mut self, line: &str, tag: &str) -> String {
        self.type_line(&format!("{line}; echo {tag}-$((20+22))"));
        self.wait_for(&format!("{tag}-42"))
    }

    fn resize(&self, rows: u16, cols: u16) {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize.
        unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

/// TIOCSTI works for a process on its own controlling terminal only where the kernel's
/// legacy switch is on (the default on many distributions): turned on for the test, put
/// back as it was afterwards.
struct LegacyTiocsti(Option<String>);

impl LegacyTiocsti {
    const PATH: &'static str = "/proc/sys/dev/tty/legacy_tiocsti";

    fn on() -> LegacyTiocsti {
        let was = fs::read_to_string(Self::PATH).ok();
        if was.is_some() {
            fs::write(Self::PATH, "1").unwrap();
        }
        LegacyTiocsti(was)
    }
}

impl Drop for LegacyTiocsti {
    fn drop(&mut self) {
        if let Some(was) = &self.0 {
            let _ = fs::write(Self::PATH, was.trim());
        }
    }
}

/// `rkt` with `world`'s global options, as a line for a shell.
fn rkt_line(world: &World, args: &str) -> String {
    format!(
        "{RKT} --dir={} --local-config={} --system-config={} {args}",
        world.path("data").display(),
        world.path("local").display(),
        world.path("system").display()
    )
}

#[test]
fn a_pods_app_cannot_type_into_the_callers_terminal_under_run_or_enter() {
    test_kit::require_root!();
    let _tiocsti = LegacyTiocsti::on();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let probe = escape_probe().display().to_string();
    let marker = world.path("injected");
    let inject = format!("'tiocsti:touch {}\\n'", marker.display());
    let mut term = Terminal::new(24, 80);

    let out = term.run(
        &rkt_line(&world, &format!("run --net=none -- {probe} {inject}")),
        "run",
    );
    // The app typed into a terminal, its own: the caller's shell never reads it.
    assert!(out.contains("tiocsti: ok"), "{out}");
    let out = term.run("true", "after-run");
    assert!(
        !marker.exists(),
        "the caller's shell ran what the pod typed:\n{out}"
    );

    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "60"]);
    world.wait_running(&uuid);
    let out = term.run(
        &rkt_line(&world, &format!("enter {uuid} {probe} {inject}")),
        "enter",
    );
    assert!(out.contains("tiocsti: ok"), "{out}");
    let out = term.run("true", "after-enter");
    assert!(
        !marker.exists(),
        "the caller's shell ran what the entered command typed:\n{out}"
    );
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
}

#[test]
fn shells_in_a_pod_have_job_control_and_follow_the_terminals_size() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let mut term = Terminal::new(30, 100);
    // An interactive shell in the pod: a job in the background, listed, then killed. The
    // caller's shell says when rkt has returned.
    term.type_line(&format!(
        "{}; echo outer-$((1+1))",
        rkt_line(&world, "run --net=none -- sh -i")
    ));
    // (A SIGTERM sent right after `&` is lost: the job's child ignores it, as the
    // interactive shell does, until it has set up its signals; so the kill waits.)
    term.type_line("sleep 30 & sleep 1; jobs; kill %1; wait; echo jobs-$((1+1))");
    let out = term.wait_for("jobs-2");
    assert!(!out.contains("job control turned off"), "{out}");
    assert!(out.contains("[1] + Running"), "no job listed:\n{out}");
    let out = term.wait_for("Terminated");
    assert!(
        out.contains("[1] + Terminated"),
        "the job was not killed:\n{out}"
    );
    term.type_line("exit");
    term.wait_for("outer-2");
    // The pod's terminal has the caller's size, and follows when it changes.
    term.type_line(&format!(
        "{}; echo sized-$((1+1))",
        rkt_line(
            &world,
            "run --net=none -- sh -c 'stty size; echo size-$((1+1)); read x; stty size'",
        )
    ));
    let out = term.wait_for("size-2");
    assert!(out.contains("30 100"), "{out}");
    term.resize(40, 120);
    std::thread::sleep(Duration::from_millis(200));
    term.type_line("");
    let out = term.wait_for("sized-2");
    assert!(
        out.contains("40 120"),
        "the pod's terminal kept its size:\n{out}"
    );
    // `rkt enter` on a terminal gives the command a terminal too.
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "60"]);
    world.wait_running(&uuid);
    let out = term.run(
        &rkt_line(
            &world,
            &format!("enter {uuid} sh -c '[ -t 0 ] && stty size'"),
        ),
        "enter",
    );
    assert!(out.contains("40 120"), "{out}");
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
}

/// A file of the caller's, with something the pod must not read.
fn secret(world: &World) -> std::path::PathBuf {
    let path = world.path("secret");
    fs::write(&path, "the-caller's-secret\n").unwrap();
    path
}

#[test]
fn the_callers_descriptors_do_not_reach_the_pod() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let secret = secret(&world);
    // Descriptor 7 on the caller's file, as `7<secret` in a shell gives it.
    let with_fd7 = |world: &World, args: &[&str]| {
        let mut cmd = world.command(args);
        let file = fs::File::open(&secret).unwrap();
        let fd = file.as_raw_fd();
        // SAFETY: dup2 is async-signal-safe; `file` outlives the spawn.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 7) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        drop(file);
        out
    };
    let out = with_fd7(
        &world,
        &[
            "run",
            "--net=none",
            "--",
            "sh",
            "-c",
            "cat <&7; ls /proc/self/fd",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains("secret"), "{stdout}");
    assert!(
        stderr.contains("7"),
        "reading descriptor 7 must fail: {stderr}"
    );
    let fds: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "only the streams (and ls's own)");

    // The pod's init holds none either.
    let (uuid, index) = world.spawn_run(&["--net=none", "--", "sleep", "60"]);
    let init = world.wait_running(&uuid);
    let init_fds: Vec<String> = fs::read_dir(format!("/proc/{init}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        !init_fds.iter().any(|p| p.contains("secret")),
        "{init_fds:?}"
    );

    let out = with_fd7(&world, &["enter", &uuid, "sh", "-c", "cat <&7"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("secret"));
    assert_ne!(out.status.code(), Some(0));

    // An entered command's stdin, a file of the caller's opened for reading and writing,
    // seen from another process of the pod: a relayed pipe, never the file.
    let mut held = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} <>{}",
            rkt_line(&world, &format!("enter {uuid} sleep 20")),
            secret.display()
        ))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Each process's name and stdin, once the entered `sleep` shows; then a write through
    // every stdin.
    let look = "for p in /proc/[0-9]*; do echo $(cat $p/comm) $(readlink $p/fd/0); done; \
                for p in /proc/[0-9]*; do echo tampered >> $p/fd/0; done 2>/dev/null; true";
    let seen = wait_for("the entered command's stdin", PATIENCE, || {
        let out = world.rkt(&["enter", &uuid, "sh", "-c", look]).run();
        out.assert_success();
        let stdout = out.stdout();
        let entered = stdout
            .lines()
            .any(|l| l.starts_with("sleep ") && !l.ends_with("/dev/null"));
        entered.then_some(stdout)
    });
    assert!(!seen.contains("secret"), "{seen}");
    assert!(
        seen.lines().any(|l| l.starts_with("sleep pipe:")),
        "the entered command's stdin is not a pipe: {seen}"
    );
    let _ = held.kill();
    let _ = held.wait();
    assert_eq!(
        fs::read_to_string(&secret).unwrap(),
        "the-caller's-secret\n"
    );
    world.rkt(&["stop", &uuid]).run().assert_success();
    world.wait_child(index);
}

#[test]
fn socket_activation_descriptors_pass_with_their_variables() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let file = world.path("listen");
    fs::write(&file, "activated\n").unwrap();
    let line = format!(
        "exec 3<{}; LISTEN_FDS=1 LISTEN_PID=$$ exec {}",
        file.display(),
        rkt_line(
            &world,
            "run --net=none -- sh -c 'echo fds=$LISTEN_FDS pid=$LISTEN_PID; cat <&3'"
        )
    );
    let out = Command::new("sh").arg("-c").arg(line).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("fds=1 pid=2"), "{stdout}");
    assert!(stdout.contains("activated"), "{stdout}");
}

#[test]
fn pipes_and_null_streams_still_reach_the_app() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let script = ["run", "--net=none", "--", "sh", "-c", "cat; echo err >&2"];
    let out = world.output_with_stdin(&script, "through a pipe\n");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "through a pipe\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("err"));
    let out = world
        .rkt(&["run", "--net=none", "--stdout=null", "--", "echo", "hidden"])
        .run();
    out.assert_success();
    assert!(!out.stdout().contains("hidden"));
}

/// The host's rkt binary, as `(device, inode)`.
fn host_rkt() -> (u64, u64) {
    let meta = fs::metadata(RKT).unwrap();
    (meta.dev(), meta.ino())
}

#[test]
fn the_pod_never_reaches_the_host_rkt_binary() {
    test_kit::require_root!();
    let mut world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let probe = escape_probe().display().to_string();
    let (dev, ino) = host_rkt();
    // The pod's init is rkt: with every capability (so that /proc/1/exe may be opened at
    // all), what it shows is another file, which refuses writes.
    let check = format!("exe-of:1:{dev}:{ino}");
    let out = world
        .rkt(&[
            "run",
            "--net=none",
            "--insecure-options=capabilities",
            "--",
            &probe,
            &check,
        ])
        .run();
    out.assert_success();
    assert!(
        out.stdout().contains("exe-of: other write=EROFS"),
        "{}",
        out.stdout()
    );

    // `rkt enter` of a script whose interpreter is `/proc/self/exe`, planted by the pod in
    // its own /tmp, runs rkt in the pod: a watcher in the pod looks at every process's
    // executable meanwhile.
    let watch = format!("watch-exe:{dev}:{ino}:60000");
    let (uuid, index) = world.spawn_run(&["--net=none", "--", &probe, &watch]);
    world.wait_running(&uuid);
    let plant = "printf '#!/proc/self/exe\\n' >/tmp/evil && chmod 755 /tmp/evil";
    world
        .rkt(&["enter", &uuid, "sh", "-c", plant])
        .run()
        .assert_success();
    for _ in 0..20 {
        let out = world.rkt(&["enter", &uuid, "/tmp/evil"]).run();
        // rkt ran, as the script's interpreter, and refused its arguments.
        out.assert_stderr_contains("/tmp/evil");
    }
    let stop = "touch /tmp/escape-probe-stop";
    world
        .rkt(&["enter", &uuid, "sh", "-c", stop])
        .run()
        .assert_success();
    let child = world.child(index);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    world.wait_child(index);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("watch-exe:"))
        .unwrap();
    assert!(line.starts_with("watch-exe: host=0 "), "{stdout}");
    let seen: usize = line.rsplit('=').next().unwrap().parse().unwrap();
    assert!(
        seen > 0,
        "the watcher saw no rkt process in the pod: {stdout}"
    );
}

#[test]
fn the_pods_init_shows_no_host_path() {
    test_kit::require_root!();
    let world = World::new(support::RKT);
    let _g = leaks::Guard::new(world.leak_ctx());
    let out = world
        .rkt(&["run", "--", "sh", "-c", "tr '\\0' ' ' </proc/1/cmdline"])
        .run();
    out.assert_success();
    let title = out.stdout();
    assert!(title.starts_with("rkt stage1-init "), "{title}");
    let data = world.path("data").display().to_string();
    assert!(
        !title.contains(&data) && !title.contains("/run/netns"),
        "{title}"
    );
}
