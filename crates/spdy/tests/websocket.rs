//! WebSocket exec and port-forward over real sockets: a server written on this crate (a
//! thread per connection), and a client of our own on the same codec in client role,
//! since crictl 1.26 speaks only SPDY.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use rkt_spdy::http::RequestHead;
use rkt_spdy::k8s::{self, Outcome, StreamProtocol};
use rkt_spdy::websocket::{
    self, close_code, encode_frame, encode_message, Channels, Decoder, Message, Opcode, Role,
};

fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            std::thread::spawn(move || server(conn.unwrap()));
        }
    });
    addr
}

fn read_head(stream: &mut TcpStream) -> (Vec<u8>, usize) {
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0; 1024];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "peer left before the head ended");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return (buf, end + 4);
        }
    }
}

/// Exec on `/exec` (stdin echoed to stdout, "err" on stderr, exit code 3 when stdin is
/// closed) and port-forward on `/portforward?port=N` (data upper-cased back).
fn server(mut stream: TcpStream) {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (buf, used) = read_head(&mut stream);
    let (head, _) = RequestHead::parse(&buf).unwrap().unwrap();
    let port_forward = head.path() == "/portforward";
    let supported = if port_forward {
        websocket::PORT_FORWARD_PROTOCOLS
    } else {
        websocket::EXEC_PROTOCOLS
    };
    let up = match websocket::upgrade(&head, supported) {
        Ok(up) => up,
        Err(e) => {
            stream.write_all(&e.response()).unwrap();
            return;
        }
    };
    stream.write_all(&websocket::upgrade_response(&up)).unwrap();
    let channels = Channels::for_protocol(up.protocol);
    let protocol = up
        .protocol
        .map(|p| p.replace("base64.", ""))
        .and_then(|p| StreamProtocol::from_name(&p))
        .unwrap_or(StreamProtocol::V1);
    let send = |stream: &mut TcpStream, m: &Message| stream.write_all(&encode_message(m)).unwrap();
    let mut port = 0;
    if port_forward {
        port = head
            .query()
            .iter()
            .find(|(k, _)| k == "port")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap();
        let (data, error) = websocket::port_forward_channels(0).unwrap();
        send(
            &mut stream,
            &channels.message(data, &websocket::port_prefix(port)),
        );
        send(
            &mut stream,
            &channels.message(error, &websocket::port_prefix(port)),
        );
    }
    let mut decoder = Decoder::new(Role::Server, 1 << 20);
    decoder.feed(&buf[used..]);
    loop {
        let message = match decoder.next_message() {
            Ok(Some(m)) => m,
            Ok(None) => {
                let mut chunk = [0; 4096];
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => decoder.feed(&chunk[..n]),
                }
                continue;
            }
            Err(e) => {
                let close = Message::Close(Some((e.close_code(), e.to_string())));
                send(&mut stream, &close);
                return;
            }
        };
        match &message {
            Message::Ping(p) => send(&mut stream, &Message::Pong(p.clone())),
            Message::Close(_) => {
                send(
                    &mut stream,
                    &Message::Close(Some((close_code::NORMAL, String::new()))),
                );
                return;
            }
            _ => {}
        }
        let Some((channel, data)) = channels.parse(&message).unwrap() else {
            continue;
        };
        if port_forward {
            let reply = format!(
                "port {port}: {}",
                String::from_utf8_lossy(&data).to_uppercase()
            );
            send(&mut stream, &channels.message(channel, reply.as_bytes()));
        } else if channel == websocket::STDIN {
            send(&mut stream, &channels.message(websocket::STDOUT, &data));
        } else if websocket::closed_channel(channel, &data) == Some(websocket::STDIN) {
            send(&mut stream, &channels.message(websocket::STDERR, b"err"));
            let status = k8s::error_stream_message(protocol, &Outcome::ExitCode(3));
            send(&mut stream, &channels.message(websocket::ERROR, &status));
            send(
                &mut stream,
                &Message::Close(Some((close_code::NORMAL, String::new()))),
            );
        }
    }
}

struct Client {
    stream: TcpStream,
    decoder: Decoder,
    channels: Channels,
    mask: u32,
}

impl Client {
    fn connect(addr: SocketAddr, target: &str, protocols: &str) -> (Client, Option<String>) {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let key = "AQIDBAUGBwgJCgsMDQ4PEA==";
        write!(
            stream,
            "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Protocol: {protocols}\r\n\r\n"
        )
        .unwrap();
        let (buf, used) = read_head(&mut stream);
        let head = String::from_utf8_lossy(&buf[..used]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
        assert!(
            head.contains(&format!(
                "Sec-WebSocket-Accept: {}\r\n",
                websocket::accept_key(key)
            )),
            "{head}"
        );
        let protocol = head
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Protocol: "))
            .map(str::to_owned);
        let mut decoder = Decoder::new(Role::Client, 1 << 20);
        decoder.feed(&buf[used..]);
        let channels = Channels::for_protocol(protocol.as_deref());
        (
            Client {
                stream,
                decoder,
                channels,
                mask: 0x9e37_79b9,
            },
            protocol,
        )
    }

    fn send_frame(&mut self, opcode: Opcode, payload: &[u8]) {
        self.mask = self
            .mask
            .wrapping_mul(0x0001_0001)
            .wrapping_add(0x6b43_a9b5);
        let wire = encode_frame(opcode, true, payload, Some(self.mask.to_be_bytes()));
        self.stream.write_all(&wire).unwrap();
    }

    fn send_channel(&mut self, channel: u8, data: &[u8]) {
        match self.channels.message(channel, data) {
            Message::Text(t) => self.send_frame(Opcode::Text, t.as_bytes()),
            Message::Binary(b) => self.send_frame(Opcode::Binary, &b),
            other => unreachable!("{other:?}"),
        }
    }

    fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(m) = self.decoder.next_message().unwrap() {
                return Some(m);
            }
            let mut chunk = [0; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.decoder.feed(&chunk[..n]),
            }
        }
    }

    /// Every channel's bytes until the server closes, and its close code.
    fn drain(&mut self) -> (Vec<Vec<u8>>, Option<u16>) {
        let mut got = vec![Vec::new(); 5];
        while let Some(m) = self.next() {
            if let Message::Close(c) = m {
                return (got, c.map(|c| c.0));
            }
            if let Some((ch, data)) = self.channels.parse(&m).unwrap() {
                got[usize::from(ch)].extend(data);
            }
        }
        (got, None)
    }
}

#[test]
fn exec_over_v5_binary_channels() {
    let addr = serve();
    let (mut c, protocol) = Client::connect(addr, "/exec", "v5.channel.k8s.io, v4.channel.k8s.io");
    assert_eq!(protocol.as_deref(), Some("v5.channel.k8s.io"));
    c.send_channel(websocket::STDIN, b"hello ");
    c.send_frame(Opcode::Ping, b"are you there");
    c.send_channel(websocket::STDIN, b"websocket");
    c.send_channel(websocket::CLOSE_CHANNEL, &[websocket::STDIN]);
    let (got, code) = c.drain();
    assert_eq!(got[1], b"hello websocket");
    assert_eq!(got[2], b"err");
    assert_eq!(
        k8s::parse_error_stream(StreamProtocol::V5, &got[3]),
        Ok(Outcome::ExitCode(3))
    );
    assert_eq!(code, Some(close_code::NORMAL));
}

#[test]
fn exec_over_v4_base64_channels() {
    let addr = serve();
    let (mut c, protocol) = Client::connect(addr, "/exec", "v4.base64.channel.k8s.io");
    assert_eq!(protocol.as_deref(), Some("v4.base64.channel.k8s.io"));
    assert!(c.channels.base64);
    c.send_channel(websocket::STDIN, &[0, 1, 2, 255]);
    // End it as a v4 client would: close the connection with a close frame.
    c.send_frame(
        Opcode::Close,
        &websocket::close_payload(Some(&(1000, "done".into()))),
    );
    let (got, code) = c.drain();
    assert_eq!(got[1], [0, 1, 2, 255]);
    assert_eq!(code, Some(close_code::NORMAL));
}

#[test]
fn port_forward_over_websocket() {
    let addr = serve();
    let (mut c, protocol) = Client::connect(addr, "/portforward?port=8080", "v4.channel.k8s.io");
    assert_eq!(protocol.as_deref(), Some("v4.channel.k8s.io"));
    // Each channel first carries the port, little-endian.
    for ch in [0, 1] {
        let m = c.next().unwrap();
        assert_eq!(
            c.channels.parse(&m).unwrap(),
            Some((ch, websocket::port_prefix(8080).to_vec()))
        );
    }
    c.send_channel(0, b"ping");
    let m = c.next().unwrap();
    assert_eq!(
        c.channels.parse(&m).unwrap(),
        Some((0, b"port 8080: PING".to_vec()))
    );
}

#[test]
fn bad_clients_get_a_close_code_or_an_http_error() {
    let addr = serve();
    // An unmasked frame from a client: 1002.
    let (mut c, _) = Client::connect(addr, "/exec", "v4.channel.k8s.io");
    c.stream
        .write_all(&encode_frame(Opcode::Binary, true, b"\x00x", None))
        .unwrap();
    assert_eq!(c.drain().1, Some(close_code::PROTOCOL_ERROR));
    // A frame above the size limit: 1009, before its payload is sent.
    let (mut c, _) = Client::connect(addr, "/exec", "v4.channel.k8s.io");
    c.stream
        .write_all(&[0x82, 0xff, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 2, 3, 4])
        .unwrap();
    assert_eq!(c.drain().1, Some(close_code::TOO_BIG));
    // No common sub-protocol: 400 before any upgrade.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(
        b"GET /exec HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
Sec-WebSocket-Key: AQIDBAUGBwgJCgsMDQ4PEA==\r\nSec-WebSocket-Protocol: chat\r\n\r\n",
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{resp}");
    assert!(resp.contains("v5.channel.k8s.io"), "{resp}");
}
