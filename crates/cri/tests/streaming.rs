//! rkt-cri's streaming server as operators and clients meet it: the real `crictl` (SPDY,
//! client-go's executor and port-forwarder) for `exec`, `exec -it` and `attach -it`
//! through a pseudo-terminal, and `port-forward`; a WebSocket client of our own (the
//! `spdy` crate's codec) for exec and port-forward, which crictl 1.26 does not speak; and
//! bad clients: unknown, reused and expired-looking tokens, a bad upgrade, a removed
//! container, a crowd of connections that never finish their request. Ends with the
//! server's descriptors back where they were, no exec helper left, and the leak checker.
//!
//! A URL for our own client comes from crictl itself: `crictl --debug` prints the
//! response of `Exec`/`PortForward`, and run in an empty network namespace
//! (`unshare -n`) it cannot reach the URL, so the one-time token is still unused.

mod operator_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;
use spdy::k8s::{self, Outcome, StreamProtocol};
use spdy::websocket::{self, Channels, Decoder, Message, Opcode, Role};
use test_kit::{wait_for, KillOnDrop, PATIENCE};

use operator_support::*;

#[test]
fn crictl_and_websocket_clients_exec_attach_and_forward() {
    let Some((_held, mut node, net, guard)) = setup(
        "crictl_and_websocket_clients_exec_attach_and_forward",
        "stream",
        Images::Registry,
    ) else {
        return;
    };
    let server_pid = node.server_pid().unwrap();

    node.ok(&["pull", IMAGE]);
    let pod = node.pod_config("streams", json!({}));
    let pod_id = node.ok(&["runp", &pod]);
    let web = node.container_config("httpd", &HTTPD, json!({}));
    let plain = node.container_config("plain", &SLEEP, json!({}));
    let shell = node.container_config("shell", &["sh"], json!({"stdin": true, "tty": true}));
    let web_id = node.ok(&["create", &pod_id, &web, &pod]);
    let plain_id = node.ok(&["create", "--no-pull", &pod_id, &plain, &pod]);
    let shell_id = node.ok(&["create", "--no-pull", &pod_id, &shell, &pod]);
    for id in [&web_id, &plain_id, &shell_id] {
        node.ok(&["start", id]);
    }
    let fds_before = open_fds(server_pid);

    // crictl exec (streaming, SPDY): stdout and stderr apart, the exit code.
    let t = Instant::now();
    let out = node.crictl(&[
        "exec",
        &plain_id,
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    eprintln!("crictl exec: {:?}", t.elapsed());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    // crictl 1.26 reports a non-zero exit code as its own failure, naming the code.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("err\n"), "{stderr}");
    assert!(
        stderr.contains("command terminated with exit code 3"),
        "{stderr}"
    );
    assert!(!out.status.success());
    // stdin to the end, through pipes.
    let mut child = node
        .crictl_command(&["exec", "-i", &plain_id, "sh", "-c", "tr a-z A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"through stdin\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "THROUGH STDIN\n");
    assert!(out.status.success());
    // ExecSync (crictl exec -s) still answers as before.
    assert_eq!(
        node.ok(&["exec", "-s", &plain_id, "sh", "-c", "echo sync"]),
        "sync"
    );

    // crictl exec -it through a terminal: its size reaches the command's terminal, keys
    // reach the command, its exit code comes back.
    let term = Terminal::run(&node, &["exec", "-it", &plain_id, "sh"], (31, 101));
    term.type_keys(b"stty size; echo $((6*7)); exit 5\r");
    term.expect("31 101");
    term.expect("42");
    term.expect("exit code 5");
    assert_eq!(term.wait(), Some(1), "{}", term.text());

    // A client that goes away hangs its terminal up: the command does not outlive it.
    let term = Terminal::run(&node, &["exec", "-it", &plain_id, "sh"], (24, 80));
    // The quotes keep the terminal's echo of the line from reading as the answer.
    term.type_keys(b"echo rea''dy; exec sleep 4243\r");
    term.expect("ready");
    let running = || {
        let ps = node.ok(&["exec", "-s", &plain_id, "sh", "-c", "busybox ps"]);
        ps.contains("sleep 4243")
    };
    wait_for("the command to run", PATIENCE, || running().then_some(()));
    term.kill();
    wait_for("the command to end with its client", PATIENCE, || {
        (!running()).then_some(())
    });

    // crictl attach -it to the shell container's terminal.
    let term = Terminal::run(&node, &["attach", "-it", &shell_id], (24, 80));
    // The shell prints nothing until a key comes; its prompt comes back with the echo.
    std::thread::sleep(Duration::from_millis(300));
    term.type_keys(b"echo attached-$((1+2))\r");
    term.expect("attached-3");
    term.type_keys(b"exit\r");
    assert_eq!(term.wait(), Some(0), "{}", term.text());

    // crictl port-forward into the pod's network namespace.
    let local = free_port();
    let forward = KillOnDrop(
        node.crictl_command(&["port-forward", &pod_id, &format!("{local}:80")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let body = wait_for("crictl port-forward to serve", PATIENCE, || {
        http_get(&format!("127.0.0.1:{local}"), "/greeting").ok()
    });
    assert_eq!(body, "hello\n");
    for _ in 0..5 {
        assert_eq!(
            http_get(&format!("127.0.0.1:{local}"), "/greeting").unwrap(),
            "hello\n"
        );
    }
    drop(forward);

    // WebSocket exec (v5): stdin, its close, stdout, stderr, the exit code.
    let url = url_of(
        &node,
        &[
            "exec",
            "-i",
            &plain_id,
            "sh",
            "-c",
            "cat; echo err >&2; exit 7",
        ],
    );
    let mut ws = WsClient::connect(&url, "", "v5.channel.k8s.io");
    ws.send(0, b"over websocket\n");
    ws.send(255, &[0]);
    let got = ws.read_all();
    assert_eq!(got.channel(1), b"over websocket\n");
    assert_eq!(got.channel(2), b"err\n");
    assert_eq!(
        k8s::parse_error_stream(StreamProtocol::V5, &got.channel(3)),
        Ok(Outcome::ExitCode(7))
    );
    // The token served once.
    assert_eq!(http_status(&url, "GET", ""), 404);
    assert_eq!(
        http_status(&url.replace("/exec/", "/exec/0"), "GET", ""),
        404
    );

    // WebSocket port-forward: the port from the query, the port prefix on both channels.
    let url = url_of(&node, &["port-forward", &pod_id, "0:80"]);
    let mut ws = WsClient::connect(&url, "?port=80", "portforward.k8s.io");
    ws.send(0, b"GET /greeting HTTP/1.0\r\n\r\n");
    let got = ws.read_all();
    let data = got.channel(0);
    assert_eq!(&data[..2], &websocket::port_prefix(80));
    let text = String::from_utf8_lossy(&data[2..]);
    assert!(
        text.starts_with("HTTP/1.") && text.ends_with("hello\n"),
        "{text}"
    );
    assert_eq!(got.channel(1), websocket::port_prefix(80));

    // A client that stops reading: after the write timeout (30 s) it is dropped, the
    // command's output is drained, and the command ends.
    let url = url_of(
        &node,
        &[
            "exec",
            &plain_id,
            "sh",
            "-c",
            "head -c 50000000 /dev/zero; touch /drained",
        ],
    );
    let stalled = WsClient::connect(&url, "", "v4.channel.k8s.io");
    let t = Instant::now();
    wait_for("the command of a stalled client to end", PATIENCE, || {
        let out = node.crictl(&["exec", "-s", &plain_id, "sh", "-c", "test -f /drained"]);
        out.status.success().then_some(())
    });
    eprintln!("a stalled client's command ended after {:?}", t.elapsed());
    // Not before the write timeout: a server that kept the 50 MB in memory would be done
    // at once.
    assert!(
        t.elapsed() >= Duration::from_secs(20),
        "the command ended after {:?}, before the write timeout",
        t.elapsed()
    );
    drop(stalled);

    // A URL used without an upgrade: 400, and the token is gone with it.
    let url = url_of(&node, &["exec", &plain_id, "true"]);
    assert_eq!(http_status(&url, "POST", ""), 400);
    assert_eq!(http_status(&url, "POST", ""), 404);

    // A container removed between Exec and the connection: a clean error on the error
    // channel.
    let gone = node.container_config("gone", &SLEEP, json!({}));
    let gone_id = node.ok(&["create", "--no-pull", &pod_id, &gone, &pod]);
    node.ok(&["start", &gone_id]);
    let url = url_of(&node, &["exec", &gone_id, "true"]);
    node.ok(&["rm", "-f", &gone_id]);
    let mut ws = WsClient::connect(&url, "", "v4.channel.k8s.io");
    let got = ws.read_all();
    match k8s::parse_error_stream(StreamProtocol::V4, &got.channel(3)) {
        Ok(Outcome::Error(e)) => assert!(e.contains(&gone_id), "{e}"),
        other => panic!("expected an error naming the container: {other:?}"),
    }

    // 200 connections that never finish their request head do not stop others.
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut c = TcpStream::connect(url_host(&url)).unwrap();
            c.write_all(b"POST /exec/").unwrap();
            c
        })
        .collect();
    let out = node.crictl(&["exec", &plain_id, "sh", "-c", "echo still serving"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "still serving\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(idle);

    // Nothing is left: the server's descriptors, exec helpers.
    wait_for("the server's descriptors to come back", PATIENCE, || {
        (open_fds(server_pid) <= fds_before).then_some(())
    });
    let helpers = helpers_of(server_pid);
    assert!(helpers.is_empty(), "exec helpers left: {helpers:?}");

    node.ok(&["rmp", "-f", &pod_id]);
    node.terminate();
    net.assert_empty_and_remove();
    node.assert_clean(&guard, &[uuid_of(&pod_id)]);
}

/// The number of open descriptors of `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// `rkt-cri exec-in` children of `pid` still there, their command lines.
fn helpers_of(pid: u32) -> Vec<String> {
    children_of(pid)
        .into_iter()
        .map(|child| args_of(child).join(" "))
        .filter(|cmdline| cmdline.contains("exec-in"))
        .collect()
}

/// The streaming URL the RPC behind `crictl ARGS` returned, its token unused: crictl runs
/// with `--debug` in an empty network namespace, where the URL cannot be reached.
fn url_of(node: &Node, args: &[&str]) -> String {
    let mut cmd = Command::new("unshare");
    let endpoint = format!("unix://{}", node.socket.display());
    cmd.arg("-n")
        .arg(&node.crictl)
        .args(["--debug", "--runtime-endpoint", &endpoint])
        .args(["--timeout", "20s"])
        .args(args)
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let start = text
        .find("http://")
        .unwrap_or_else(|| panic!("no URL in crictl's debug output: {text}"));
    text[start..]
        .split(|c: char| c.is_whitespace() || c == ',' || c == '}' || c == '"')
        .next()
        .unwrap()
        .to_string()
}

/// `HOST:PORT` of a URL.
fn url_host(url: &str) -> String {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

/// The path of a URL.
fn url_path(url: &str) -> String {
    let host = url_host(url);
    url.trim_start_matches("http://")[host.len()..].to_string()
}

/// The status of a plain HTTP request (no upgrade) on `url`.
fn http_status(url: &str, method: &str, extra: &str) -> u16 {
    let mut c = TcpStream::connect(url_host(url)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "{method} {} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: 0\r\n\r\n",
        url_path(url)
    )
    .unwrap();
    let mut head = String::new();
    let _ = c.read_to_string(&mut head);
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// A WebSocket client of the `spdy` crate's codec.
struct WsClient {
    sock: TcpStream,
    decoder: Decoder,
    channels: Channels,
}

/// What came on each channel, and the close.
struct Received {
    by_channel: Vec<(u8, Vec<u8>)>,
}

impl Received {
    fn channel(&self, ch: u8) -> Vec<u8> {
        self.by_channel
            .iter()
            .filter(|(c, _)| *c == ch)
            .flat_map(|(_, d)| d.clone())
            .collect()
    }
}

impl WsClient {
    fn connect(url: &str, query: &str, protocol: &str) -> WsClient {
        let mut sock = TcpStream::connect(url_host(url)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            sock,
            "GET {}{query} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Protocol: {protocol}\r\n\r\n",
            url_path(url),
            url_host(url)
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(sock.read(&mut byte).unwrap(), 1, "closed during the head");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        assert!(
            head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            "RFC 6455's accept key: {head}"
        );
        assert!(head.contains(protocol), "{head}");
        WsClient {
            sock,
            decoder: Decoder::new(Role::Client, 1 << 20),
            channels: Channels::for_protocol(Some(protocol)),
        }
    }

    fn send(&mut self, channel: u8, data: &[u8]) {
        let mut payload = vec![channel];
        payload.extend_from_slice(data);
        let frame = websocket::encode_frame(Opcode::Binary, true, &payload, Some([1, 2, 3, 4]));
        self.sock.write_all(&frame).unwrap();
    }

    /// Every message until the server's close.
    fn read_all(&mut self) -> Received {
        let mut by_channel = Vec::new();
        let mut buf = vec![0; 64 << 10];
        loop {
            while let Some(m) = self.decoder.next_message().unwrap() {
                match m {
                    Message::Close(_) => {
                        let close =
                            websocket::encode_frame(Opcode::Close, true, &[], Some([9, 9, 9, 9]));
                        let _ = self.sock.write_all(&close);
                        return Received { by_channel };
                    }
                    m => {
                        if let Some(parsed) = self.channels.parse(&m).unwrap() {
                            by_channel.push(parsed);
                        }
                    }
                }
            }
            let n = self.sock.read(&mut buf).expect("the server's messages");
            assert!(n > 0, "closed without a close message: {by_channel:?}");
            self.decoder.feed(&buf[..n]);
        }
    }
}

/// crictl on a pseudo-terminal of its own, its output collected; killed on drop, so a
/// failing test leaves no `crictl exec -it` or `attach` behind.
struct Terminal {
    master: OwnedFd,
    child: Mutex<KillOnDrop>,
    screen: test_kit::pty::Screen,
}

impl Terminal {
    fn run(node: &Node, args: &[&str], size: (u16, u16)) -> Terminal {
        let pty = test_kit::pty::open(Some(size));
        let slave = || Stdio::from(pty.slave.try_clone().unwrap());
        let child = node
            .crictl_command(args)
            .stdin(slave())
            .stdout(slave())
            .stderr(slave())
            .spawn()
            .unwrap();
        drop(pty.slave);
        Terminal {
            screen: test_kit::pty::Screen::record(&pty.master),
            master: pty.master,
            child: Mutex::new(KillOnDrop(child)),
        }
    }

    fn type_keys(&self, keys: &[u8]) {
        nix::unistd::write(&self.master, keys).unwrap();
    }

    fn text(&self) -> String {
        self.screen.text()
    }

    fn expect(&self, what: &str) {
        self.screen.wait_for(what);
    }

    fn kill(&self) {
        let mut child = self.child.lock().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }

    fn wait(&self) -> Option<i32> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.lock().unwrap().try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.lock().unwrap().kill();
                panic!("crictl did not end: {:?}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
