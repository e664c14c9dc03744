//! Interop with the real Go client: client-go's SPDY executor and port-forwarder (on
//! moby/spdystream), built offline from cri-tools 1.26.1's vendor directory, against a
//! small streaming server written on this crate (a thread per connection, as the CRI
//! server would). The probe program is tests/go-probe/main.go.
//!
//! The cri-tools source archive is `RKT_CRI_TOOLS_ARCHIVE`, by default
//! /work/shared/cri-tools/cri-tools-1.26.1.tar.gz. Without `go` on PATH the tests say so
//! and pass without running; a missing archive is a failure.

use std::collections::HashMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rkt_spdy::blocking::Connection;
use rkt_spdy::http::RequestHead;
use rkt_spdy::k8s::{self, Outcome, ResizeDecoder, StreamProtocol, StreamType};
use rkt_spdy::{Config, Event, Headers};

const DEFAULT_ARCHIVE: &str = "/work/shared/cri-tools/cri-tools-1.26.1.tar.gz";

fn find_go() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("go"))
        .find(|p| p.is_file())
}

/// The probe binary, built once per test run; `None` (with a message) without `go`.
fn probe() -> Option<PathBuf> {
    static PROBE: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let Some(go) = find_go() else {
                eprintln!("SKIPPED: `go` is not on PATH; the Go interop tests need it");
                return None;
            };
            Some(build_probe(&go))
        })
        .clone()
}

fn build_probe(go: &Path) -> PathBuf {
    let archive = std::env::var_os("RKT_CRI_TOOLS_ARCHIVE")
        .map(PathBuf::from)
        .unwrap_or_else(|| DEFAULT_ARCHIVE.into());
    assert!(
        archive.is_file(),
        "cri-tools source archive {} not found; set RKT_CRI_TOOLS_ARCHIVE to cri-tools-1.26.1.tar.gz",
        archive.display()
    );
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("spdy-go-probe");
    let tree = base.join("cri-tools-1.26.1");
    let marker = base.join("extracted");
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let status = Command::new("tar")
            .arg("xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&base)
            .status()
            .unwrap();
        assert!(status.success(), "tar xzf {} failed", archive.display());
        std::fs::write(&marker, b"").unwrap();
    }
    let cmd_dir = tree.join("cmd/rkt-spdy-probe");
    std::fs::create_dir_all(&cmd_dir).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go-probe/main.go"),
        cmd_dir.join("main.go"),
    )
    .unwrap();
    let binary = base.join("rkt-spdy-probe");
    let out = Command::new(go)
        .args(["build", "-mod=vendor", "-o"])
        .arg(&binary)
        .arg("./cmd/rkt-spdy-probe")
        .current_dir(&tree)
        .env("GOFLAGS", "-mod=vendor")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "on")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build of the probe failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    binary
}

fn run_probe(probe: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(probe).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "probe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "probe output {:?}: {e}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Starts the test server; it lives as long as the test process.
fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let conn = conn.unwrap();
            std::thread::spawn(move || {
                if let Err(e) = handle(conn) {
                    eprintln!("test server: {e}");
                }
            });
        }
    });
    addr
}

fn handle(mut stream: TcpStream) -> Result<(), String> {
    // Frames are small and written one by one: without this, Nagle's algorithm and the
    // client's delayed ACK add ~40 ms to an exec.
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let (head, used) = loop {
        let mut chunk = [0; 4096];
        let n = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("client left before its request head".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(parsed) = RequestHead::parse(&buf).map_err(|e| e.to_string())? {
            break parsed;
        }
    };
    let supported = match head.path() {
        "/exec" => StreamProtocol::EXEC,
        "/exec-v2" => &[StreamProtocol::V2],
        "/portforward" => StreamProtocol::PORT_FORWARD,
        other => return Err(format!("no route {other}")),
    };
    let protocol = match k8s::spdy_upgrade(&head, supported) {
        Ok(p) => p,
        Err(e) => {
            std::io::Write::write_all(&mut stream, &e.response()).ok();
            return Err(e.to_string());
        }
    };
    std::io::Write::write_all(&mut stream, &k8s::spdy_upgrade_response(protocol))
        .map_err(|e| e.to_string())?;
    let reader = stream.try_clone().map_err(|e| e.to_string())?;
    let conn = Arc::new(Connection::new(Config::default(), stream));
    conn.with_session(|s| s.receive(&buf[used..]))
        .map_err(|e| e.to_string())?;
    let query: HashMap<String, String> = head.query().into_iter().collect();
    if protocol == StreamProtocol::PortForward {
        port_forward(conn, reader)
    } else {
        exec(conn, reader, protocol, &query)
    }
}

/// An exec-like session: stdin is echoed to stdout, "err" goes to stderr, and the exit
/// code is `exit` from the query. With a tty, each resize is reported on stdout. With
/// `slow=1`, the end waits 6 s (past client-go's 5 s ping period) and reports the pings
/// it saw and whether the client answered one of ours.
fn exec(
    conn: Arc<Connection<TcpStream>>,
    mut reader: TcpStream,
    protocol: StreamProtocol,
    query: &HashMap<String, String>,
) -> Result<(), String> {
    let tty = query.get("tty").is_some_and(|v| v == "1");
    let slow = query.get("slow").is_some_and(|v| v == "1");
    let exit: u8 = query.get("exit").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut ids: HashMap<StreamType, u32> = HashMap::new();
    let mut resize = ResizeDecoder::new();
    let mut resized = false;
    let mut stdin_done = false;
    let mut finished = false;
    let ponged = Arc::new(AtomicBool::new(false));
    let mut buf = vec![0; 64 << 10];
    loop {
        let Some(events) = conn
            .read_events(&mut reader, &mut buf)
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        for event in events {
            match event {
                Event::StreamOpened {
                    stream_id, headers, ..
                } => match k8s::exec_stream_type(&headers, protocol) {
                    Ok(t) => {
                        conn.accept(stream_id, &Headers::new(), false)
                            .map_err(|e| e.to_string())?;
                        ids.insert(t, stream_id);
                    }
                    Err(e) => {
                        eprintln!("refusing stream {stream_id}: {e}");
                        conn.refuse(stream_id).map_err(|e| e.to_string())?;
                    }
                },
                Event::Data { stream_id, data } => {
                    if Some(&stream_id) == ids.get(&StreamType::Stdin) {
                        conn.send_data(ids[&StreamType::Stdout], &data, false)
                            .map_err(|e| e.to_string())?;
                    } else if Some(&stream_id) == ids.get(&StreamType::Resize) {
                        for size in resize.feed(&data).map_err(|e| e.to_string())? {
                            let line = format!("size {}x{}\n", size.width, size.height);
                            conn.send_data(ids[&StreamType::Stdout], line.as_bytes(), false)
                                .map_err(|e| e.to_string())?;
                            resized = true;
                        }
                    }
                }
                Event::RemoteFin { stream_id }
                    if Some(&stream_id) == ids.get(&StreamType::Stdin) =>
                {
                    stdin_done = true;
                }
                Event::Pong { .. } => ponged.store(true, Ordering::SeqCst),
                _ => {}
            }
        }
        if stdin_done && (resized || !tty) && !finished {
            finished = true;
            let conn = conn.clone();
            let ids = ids.clone();
            let ponged = ponged.clone();
            // The end runs on its own thread, as a process's exit would, while this one
            // keeps reading (pings, the client's closes).
            std::thread::spawn(move || {
                if slow {
                    conn.ping().unwrap();
                    std::thread::sleep(Duration::from_secs(6));
                    let pings = conn.with_session(|s| Ok(s.pings_received())).unwrap();
                    let line = format!("pings {pings} pong {}\n", ponged.load(Ordering::SeqCst));
                    conn.send_data(ids[&StreamType::Stdout], line.as_bytes(), false)
                        .unwrap();
                }
                if let Some(&err) = ids.get(&StreamType::Stderr) {
                    conn.send_data(err, b"err", true).unwrap();
                }
                conn.close(ids[&StreamType::Stdout]).unwrap();
                let outcome = if exit == 0 {
                    Outcome::Success
                } else {
                    Outcome::ExitCode(exit)
                };
                let status = k8s::error_stream_message(protocol, &outcome);
                conn.send_data(ids[&StreamType::Error], &status, true)
                    .unwrap();
            });
        }
    }
}

/// A port-forward session: each data stream's bytes come back upper-cased after the
/// client half-closes, prefixed with the port and request id.
fn port_forward(conn: Arc<Connection<TcpStream>>, mut reader: TcpStream) -> Result<(), String> {
    struct Pair {
        error: Option<u32>,
        data: Option<u32>,
        port: u16,
        got: Vec<u8>,
    }
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let mut by_stream: HashMap<u32, String> = HashMap::new();
    let mut buf = vec![0; 64 << 10];
    loop {
        let Some(events) = conn
            .read_events(&mut reader, &mut buf)
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        for event in events {
            match event {
                Event::StreamOpened {
                    stream_id, headers, ..
                } => {
                    let s = k8s::port_forward_stream(&headers).map_err(|e| e.to_string())?;
                    let rid = s.request_id.clone().ok_or("no requestid")?;
                    conn.accept(stream_id, &Headers::new(), false)
                        .map_err(|e| e.to_string())?;
                    let pair = pairs.entry(rid.clone()).or_insert(Pair {
                        error: None,
                        data: None,
                        port: s.port,
                        got: Vec::new(),
                    });
                    match s.kind {
                        StreamType::Error => pair.error = Some(stream_id),
                        _ => pair.data = Some(stream_id),
                    }
                    by_stream.insert(stream_id, rid);
                }
                Event::Data { stream_id, data } => {
                    if let Some(rid) = by_stream.get(&stream_id) {
                        pairs.get_mut(rid).unwrap().got.extend(data);
                    }
                }
                Event::RemoteFin { stream_id } => {
                    let Some(rid) = by_stream.get(&stream_id) else {
                        continue;
                    };
                    let pair = &pairs[rid];
                    if pair.data == Some(stream_id) {
                        let reply = format!(
                            "port {} request {rid}: {}",
                            pair.port,
                            String::from_utf8_lossy(&pair.got).to_uppercase()
                        );
                        conn.send_data(stream_id, reply.as_bytes(), true)
                            .map_err(|e| e.to_string())?;
                        if let Some(err) = pair.error {
                            conn.close(err).map_err(|e| e.to_string())?;
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

#[test]
fn client_go_exec_v4_with_exit_code() {
    let Some(probe) = probe() else { return };
    let addr = serve();
    let out = run_probe(
        &probe,
        &[
            "exec",
            &format!("http://{addr}/exec?exit=3"),
            "hello from stdin",
        ],
    );
    assert_eq!(out["stdout"], "hello from stdin", "{out}");
    assert_eq!(out["stderr"], "err", "{out}");
    assert_eq!(out["code"], 3, "{out}");
    let ok = run_probe(&probe, &["exec", &format!("http://{addr}/exec?exit=0"), ""]);
    assert_eq!(ok["code"], 0, "{ok}");
    assert_eq!(ok["stdout"], "", "{ok}");
    // A measurement, not an assertion: the SPDY session of an exec, end to end.
    eprintln!(
        "client-go exec session: {} ms (first), {} ms (second)",
        out["millis"], ok["millis"]
    );
}

#[test]
fn client_go_exec_tty_with_resize() {
    let Some(probe) = probe() else { return };
    let addr = serve();
    let out = run_probe(
        &probe,
        &[
            "tty",
            &format!("http://{addr}/exec?tty=1"),
            "typed",
            "100",
            "40",
        ],
    );
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.contains("size 100x40\n"), "{out}");
    assert!(stdout.contains("typed"), "{out}");
    assert_eq!(out["code"], 0, "{out}");
}

#[test]
fn client_go_falls_back_to_v2_and_its_text_errors() {
    let Some(probe) = probe() else { return };
    let addr = serve();
    let out = run_probe(
        &probe,
        &["exec", &format!("http://{addr}/exec-v2?exit=7"), "x"],
    );
    assert_eq!(out["stdout"], "x", "{out}");
    // Before v4 an exit code is only text on the error stream.
    assert_eq!(out["code"], -1, "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("non-zero exit code: exit status 7"),
        "{out}"
    );
}

#[test]
fn client_go_pings_are_answered_and_ours_are_too() {
    let Some(probe) = probe() else { return };
    let addr = serve();
    let out = run_probe(
        &probe,
        &["exec", &format!("http://{addr}/exec?slow=1"), "s"],
    );
    let stdout = out["stdout"].as_str().unwrap();
    let pings: u32 = stdout
        .split("pings ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(pings >= 1, "client-go pings every 5 s: {out}");
    assert!(stdout.contains("pong true"), "{out}");
    assert_eq!(out["code"], 0, "{out}");
}

#[test]
fn client_go_port_forward_two_connections() {
    let Some(probe) = probe() else { return };
    let addr = serve();
    let out = run_probe(
        &probe,
        &[
            "portforward",
            &format!("http://{addr}/portforward"),
            "8080",
            "hello",
        ],
    );
    let replies: Vec<&str> = out["replies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{out}");
    for r in &replies {
        assert!(r.starts_with("port 8080 request "), "{out}");
        assert!(r.ends_with(": HELLO"), "{out}");
    }
    assert_ne!(
        replies[0], replies[1],
        "each connection has its own requestid"
    );
}

#[test]
fn spdystream_reference_frames_still_match() {
    let Some(probe) = probe() else { return };
    let out = Command::new(&probe).arg("frames").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut d = rkt_spdy::FrameDecoder::new(rkt_spdy::Limits::default());
    let mut n = 0;
    for line in text.lines() {
        let bytes: Vec<u8> = (0..line.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
            .collect();
        d.feed(&bytes);
        assert!(d.next_frame().unwrap().is_some(), "{line}");
        n += 1;
    }
    assert_eq!(n, 10);
}

#[test]
fn spdystream_reads_what_we_encode() {
    use rkt_spdy::frame::Setting;
    use rkt_spdy::{Frame, FrameEncoder, GoAwayStatus, RstStatus};
    let Some(probe) = probe() else { return };
    let h = |pairs: &[(&str, &str)]| pairs.iter().copied().collect::<Headers>();
    let frames = [
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 3,
            slot: 0,
            fin: true,
            unidirectional: false,
            headers: h(&[("streamtype", "data"), ("port", "8080"), ("requestid", "0")]),
        },
        Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: h(&[("X-Multi", "a"), ("x-multi", "b"), ("status", "200 OK")]),
        },
        Frame::SynReply {
            stream_id: 3,
            fin: true,
            headers: Headers::new(),
        },
        Frame::Headers {
            stream_id: 1,
            fin: false,
            headers: h(&[("streamtype", "data"), ("big", &"v".repeat(5000))]),
        },
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: b"bytes\n".to_vec(),
        },
        Frame::RstStream {
            stream_id: 5,
            status: RstStatus::REFUSED_STREAM,
        },
        Frame::Settings {
            clear: false,
            entries: vec![Setting {
                flags: 1,
                id: 4,
                value: 100,
            }],
        },
        Frame::Ping { id: 2 },
        Frame::GoAway {
            last_good_stream_id: 5,
            status: GoAwayStatus::PROTOCOL_ERROR,
        },
        Frame::WindowUpdate {
            stream_id: 1,
            delta: 1000,
        },
    ];
    let mut enc = FrameEncoder::new();
    let mut wire = Vec::new();
    for f in &frames {
        enc.encode(f, &mut wire).unwrap();
    }
    let mut child = Command::new(&probe)
        .arg("readframes")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &wire).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let want = [
        "SYN_STREAM 1 flags=1 pri=3 port=8080,requestid=0,streamtype=data".to_string(),
        "SYN_REPLY 1 flags=0 status=200 OK,x-multi=a|b".into(),
        "SYN_REPLY 3 flags=1 ".into(),
        "HEADERS 1 flags=0 big=<5000 bytes>,streamtype=data".into(),
        "DATA 1 flags=1 \"bytes\\n\"".into(),
        "RST_STREAM 5 status=3".into(),
        "SETTINGS flags=0 [{1 4 100}]".into(),
        "PING 2".into(),
        "GOAWAY 5 status=1".into(),
        "WINDOW_UPDATE 1 1000".into(),
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), want);
}
