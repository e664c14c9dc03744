//! Test support shared by the image tests (and included by rkt's image CLI tests): root and
//! tool checks, test images built from this machine's busybox with umoci and skopeo, and a
//! real registry (Debian's `docker-registry`) on a free loopback port, stopped on drop.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True when the test can run: as root, with every tool in `tools` on PATH. Otherwise
/// prints why and returns false; under `CI` a missing tool is a failure instead.
pub fn ready(test: &str, tools: &[&str]) -> bool {
    if !test_kit::is_root() {
        eprintln!("skipping {test}: needs root");
        return false;
    }
    for tool in tools {
        if which(tool).is_none() {
            if std::env::var_os("CI").is_some() {
                panic!("{test}: {tool} is not installed (.ci/run installs it)");
            }
            eprintln!("skipping {test}: {tool} is not installed");
            return false;
        }
    }
    true
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    })
}

/// Runs a command, panicking with its output when it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds an OCI layout at `layout` with the tag `v1`: two layers, the first with busybox
/// (`/bin/busybox`, `/bin/sh`), `/etc/greeting` and `/etc/remove-me`; the second removes
/// `/etc/remove-me` (a whiteout) and adds `/etc/second`. Entrypoint `/bin/sh -c`, Cmd
/// `echo $GREETING`, Env `GREETING=hello`, WorkingDir `/etc`.
pub fn busybox_layout(work: &Path) -> PathBuf {
    let layout = work.join("layout");
    let bundle = work.join("bundle");
    let image = format!("{}:v1", layout.display());
    run(Command::new("umoci")
        .args(["init", "--layout"])
        .arg(&layout));
    run(Command::new("umoci").args(["new", "--image", &image]));
    run(Command::new("umoci").args([
        "config",
        "--image",
        &image,
        "--config.entrypoint",
        "/bin/sh",
        "--config.entrypoint",
        "-c",
        "--config.cmd",
        "echo $GREETING from $(pwd)",
        "--config.env",
        "GREETING=hello",
        "--config.workingdir",
        "/etc",
    ]));
    run(Command::new("umoci")
        .args(["unpack", "--image", &image])
        .arg(&bundle));
    let rootfs = bundle.join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::create_dir_all(rootfs.join("etc")).unwrap();
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sh")).unwrap();
    std::fs::write(rootfs.join("etc/greeting"), "hello\n").unwrap();
    std::fs::write(rootfs.join("etc/remove-me"), "gone in layer 2\n").unwrap();
    run(Command::new("umoci")
        .args(["repack", "--refresh-bundle", "--image", &image])
        .arg(&bundle));
    std::fs::remove_file(rootfs.join("etc/remove-me")).unwrap();
    std::fs::write(rootfs.join("etc/second"), "layer 2\n").unwrap();
    run(Command::new("umoci")
        .args(["repack", "--image", &image])
        .arg(&bundle));
    std::fs::remove_dir_all(&bundle).unwrap();
    layout
}

/// An htpasswd file for docker-registry: user `tester`, password `right-password` (bcrypt).
pub const HTPASSWD: &str = "tester:$2b$12$ZkndBVFBSR1M4gVyq2YSYupbFHU6k6TnWaLdAJX7k6RsH2dTJmSSu\n";

/// `skopeo copy` with the flags these tests always want.
pub fn skopeo_copy(from: &str, to: &str) {
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
        from,
        to,
    ]));
}

/// A registry (plain HTTP, no auth) holding the OCI layout `layout`'s tag `v1` pushed as
/// `test/busybox:v1`; returns it and that image's `docker://` reference.
pub fn registry_with(layout: &Path) -> (Registry, String) {
    let registry = Registry::start("");
    let image = format!("docker://{}/test/busybox:v1", registry.addr);
    skopeo_copy(&format!("oci:{}:v1", layout.display()), &image);
    (registry, image)
}

/// Tags `layout`'s `v1` as `tag`, exposing `ports` (`80/tcp`, `53/udp`); returns the
/// `oci:` reference of the new tag.
pub fn tag_exposing(layout: &Path, tag: &str, ports: &[&str]) -> String {
    let mut cmd = Command::new("umoci");
    cmd.args(["config", "--image", &format!("{}:v1", layout.display())])
        .args(["--tag", tag]);
    for port in ports {
        cmd.args(["--config.exposedports", port]);
    }
    run(&mut cmd);
    format!("oci:{}:{tag}", layout.display())
}

/// The app options that make a busybox image pod serve the image's `/etc` over HTTP on
/// port 80 (`httpd` in the foreground).
pub const HTTPD_ETC: [&str; 8] = [
    "--exec=/bin/busybox",
    "--",
    "httpd",
    "-f",
    "-p",
    "80",
    "-h",
    "/etc",
];

/// A registry that wants the credentials of [`HTPASSWD`] (htpasswd file in `work`), holding
/// the OCI layout `layout` pushed as `test/private:v1`; returns it and that image's
/// `docker://` reference.
pub fn private_registry_with(work: &Path, layout: &Path) -> (Registry, String) {
    let htpasswd = work.join("htpasswd");
    std::fs::write(&htpasswd, HTPASSWD).unwrap();
    let registry = Registry::start(&format!(
        "auth:\n  htpasswd:\n    realm: test-realm\n    path: {}\n",
        htpasswd.display()
    ));
    let image = format!("docker://{}/test/private:v1", registry.addr);
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        "--dest-tls-verify=false",
        "--dest-creds",
        "tester:right-password",
        &format!("oci:{}:v1", layout.display()),
        &image,
    ]));
    (registry, image)
}

/// A registry on 127.0.0.1 with its storage in a temporary directory; killed and removed
/// when dropped.
pub struct Registry {
    child: Child,
    _dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`
    pub addr: String,
}

impl Registry {
    /// Starts `docker-registry` with plain HTTP and no auth; `extra` is appended to its
    /// configuration (YAML).
    pub fn start(extra: &str) -> Registry {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Registry::start_on(&format!("127.0.0.1:{port}"), extra)
    }

    /// Like [`Registry::start`], listening on `addr` (`IP:PORT`, in the calling thread's
    /// network namespace).
    pub fn start_on(addr: &str, extra: &str) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let addr = addr.to_string();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: {addr}\n{extra}",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let mut registry = Registry {
            child,
            _dir: dir,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&registry.addr).is_err() {
            if let Ok(Some(status)) = registry.child.try_wait() {
                panic!("docker-registry exited: {status}");
            }
            assert!(Instant::now() < deadline, "docker-registry did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a [`Proxy`] does to the bytes the server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Passes everything on.
    None,
    /// Once the server has sent this many bytes (counted from when the fault was set), the
    /// connection carrying them is cut; once only, then everything passes again.
    CutAfter(u64),
    /// Once the server has sent this many bytes, nothing more is passed on (connections
    /// stay open) until the fault changes.
    StallAfter(u64),
    /// `Range` request headers are renamed before the server sees them, as if it ignored
    /// them (it answers 200 with the whole blob).
    HideRange,
}

#[derive(Debug)]
struct ProxyState {
    fault: Fault,
    sent: u64,
    ranges: Vec<String>,
}

/// A TCP proxy on 127.0.0.1 in front of `upstream` that the test steers with [`Fault`]s,
/// recording the `Range` headers clients send. Stopped when dropped.
pub struct Proxy {
    /// `127.0.0.1:PORT`
    pub addr: String,
    state: std::sync::Arc<std::sync::Mutex<ProxyState>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    /// Starts the proxy in front of `upstream` (`HOST:PORT`).
    pub fn start(upstream: &str) -> Proxy {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let state = Arc::new(Mutex::new(ProxyState {
            fault: Fault::None,
            sent: 0,
            ranges: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp, up) = (state.clone(), stop.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if sp.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = std::net::TcpStream::connect(&up) else {
                    continue;
                };
                let (st1, st2, sp2) = (st.clone(), st.clone(), sp.clone());
                let (c1, s1) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || Proxy::requests(c1, s1, st1));
                std::thread::spawn(move || Proxy::responses(server, client, st2, sp2));
            }
        });
        Proxy { addr, state, stop }
    }

    /// Sets the fault (and starts counting the server's bytes again).
    pub fn set(&self, fault: Fault) {
        let mut st = self.state.lock().unwrap();
        st.fault = fault;
        st.sent = 0;
    }

    /// The `Range` header values clients sent so far.
    pub fn ranges(&self) -> Vec<String> {
        self.state.lock().unwrap().ranges.clone()
    }

    fn requests(
        mut client: std::net::TcpStream,
        mut server: std::net::TcpStream,
        state: std::sync::Arc<std::sync::Mutex<ProxyState>>,
    ) {
        use std::io::{Read, Write};
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &mut buf[..n];
            {
                let mut st = state.lock().unwrap();
                let text = String::from_utf8_lossy(chunk).into_owned();
                for line in text.lines() {
                    if let Some(v) = line
                        .split_once(':')
                        .filter(|(k, _)| k.eq_ignore_ascii_case("range"))
                        .map(|(_, v)| v.trim().to_string())
                    {
                        st.ranges.push(v);
                    }
                }
                if st.fault == Fault::HideRange {
                    // Same length, so the request stays well formed: "Range:" -> "X-Rng:".
                    let mut i = 0;
                    while i + 6 <= chunk.len() {
                        if chunk[i..i + 6].eq_ignore_ascii_case(b"range:")
                            && (i == 0 || chunk[i - 1] == b'\n')
                        {
                            chunk[i..i + 6].copy_from_slice(b"X-Rng:");
                        }
                        i += 1;
                    }
                }
            }
            if server.write_all(chunk).is_err() {
                break;
            }
        }
        let _ = server.shutdown(std::net::Shutdown::Write);
    }

    fn responses(
        mut server: std::net::TcpStream,
        mut client: std::net::TcpStream,
        state: std::sync::Arc<std::sync::Mutex<ProxyState>>,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        use std::io::{Read, Write};
        let mut buf = vec![0u8; 1 << 14];
        loop {
            let n = match server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut pass = n;
            let mut cut = false;
            loop {
                let mut st = state.lock().unwrap();
                match st.fault {
                    Fault::CutAfter(k) if st.sent + n as u64 >= k => {
                        pass = (k - st.sent.min(k)) as usize;
                        st.fault = Fault::None;
                        cut = true;
                    }
                    Fault::StallAfter(k) if st.sent + n as u64 >= k => {
                        if st.sent < k {
                            // Pass on up to the limit once, then hold the rest.
                            let now = (k - st.sent) as usize;
                            st.sent = k;
                            drop(st);
                            let _ = client.write_all(&buf[..now]);
                            buf.copy_within(now..n, 0);
                            pass = n - now;
                            continue;
                        }
                        drop(st);
                        if stop.load(std::sync::atomic::Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    _ => {}
                }
                st.sent += pass as u64;
                break;
            }
            if client.write_all(&buf[..pass]).is_err() {
                break;
            }
            if cut {
                let _ = client.shutdown(std::net::Shutdown::Both);
                let _ = server.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
        let _ = client.shutdown(std::net::Shutdown::Write);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(&self.addr);
    }
}
