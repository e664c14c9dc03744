//! The WebSocket transport (newer Kubernetes clients): a `GET` with `Upgrade: websocket`
//! and a channel sub-protocol (`v5.channel.k8s.io` … `channel.k8s.io`, base64 variants;
//! `portforward.k8s.io` / `v4.channel.k8s.io` for port-forward). Every message starts
//! with its channel: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize; v5's `[255, n]`
//! closes channel `n` (stdin's end). Port-forward gives port `i` (from the query's
//! `port=` parameters) channels `2i` (data) and `2i+1` (error), each opened by the
//! server with the port in two little-endian bytes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

use spdy::http::RequestHead;
use spdy::k8s::{self, Outcome, ResizeDecoder, StreamProtocol};
use spdy::websocket::{self, Channels, Decoder, Message, Role};

use super::port_forward::Target;
use super::tokens::Request;
use super::{Channel, Input, Output, TimedWriter, IDLE_TIMEOUT};
use crate::options::Config;

/// The largest message a client may send.
const MAX_MESSAGE: usize = 1 << 20;

/// The write half, shared by the backend's threads.
struct Writer {
    sock: Mutex<TimedWriter>,
    channels: Channels,
}

impl Writer {
    fn send(&self, message: &Message) -> io::Result<()> {
        let bytes = websocket::encode_message(message);
        let mut sock = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        sock.write_all(&bytes).inspect_err(|_| {
            // A write that timed out may have left half a frame: the connection ends.
            let _ = sock.0.shutdown(Shutdown::Both);
        })
    }

    fn channel(&self, channel: u8, data: &[u8]) -> io::Result<()> {
        self.send(&self.channels.message(channel, data))
    }

    fn close(&self, code: u16, why: &str) {
        let _ = self.send(&Message::Close(Some((code, why.to_string()))));
        let sock = self.sock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = sock.0.shutdown(Shutdown::Write);
    }
}

pub fn serve(
    mut sock: TcpStream,
    head: &RequestHead,
    rest: Vec<u8>,
    request: Request,
    config: &Arc<Config>,
) -> Result<(), String> {
    let supported = match request {
        Request::PortForward { .. } => websocket::PORT_FORWARD_PROTOCOLS,
        _ => websocket::EXEC_PROTOCOLS,
    };
    let up = match websocket::upgrade(head, supported) {
        Ok(up) => up,
        Err(e) => {
            let _ = sock.write_all(&e.response());
            return Err(format!("refused WebSocket upgrade: {e}"));
        }
    };
    let io_err = |e: io::Error| e.to_string();
    sock.write_all(&websocket::upgrade_response(&up))
        .map_err(io_err)?;
    sock.set_read_timeout(Some(IDLE_TIMEOUT)).map_err(io_err)?;
    let reader = sock.try_clone().map_err(io_err)?;
    let writer = Arc::new(Writer {
        sock: Mutex::new(TimedWriter(sock)),
        channels: Channels::for_protocol(up.protocol),
    });
    let mut messages = Messages {
        reader,
        decoder: Decoder::new(Role::Server, MAX_MESSAGE),
        writer: writer.clone(),
        buf: vec![0; 64 << 10],
    };
    messages.decoder.feed(&rest);
    let result = match request {
        Request::PortForward {
            sandbox_id,
            mut ports,
        } => {
            // The RPC's ports, as kubelet's streaming server takes them; the URL's `port`
            // parameters (which kubelet's proxy copies from the client's, the same ports)
            // only when the RPC named none.
            let from_url = ports.is_empty();
            for (k, v) in head.query() {
                if from_url && k == "port" {
                    match v.parse::<u16>() {
                        Ok(p) if p > 0 => ports.push(p),
                        _ => {
                            writer.close(
                                websocket::close_code::POLICY,
                                &format!("port {v:?} is not a port number"),
                            );
                            return Err(format!("bad port {v:?}"));
                        }
                    }
                }
            }
            port_forward(&mut messages, &ports, Target::of(config, &sandbox_id))
        }
        other => {
            // A sub-protocol names the channel version; none is the first one's rules.
            let name = up
                .protocol
                .unwrap_or("channel.k8s.io")
                .replace("base64.", "");
            let protocol = StreamProtocol::from_name(&name).unwrap_or(StreamProtocol::V1);
            exec_or_attach(&mut messages, protocol, other, config)
        }
    };
    let _ = messages.reader.shutdown(Shutdown::Both);
    result
}

/// The client's messages one by one, pings answered; `None` when the client is gone.
struct Messages {
    reader: TcpStream,
    decoder: Decoder,
    writer: Arc<Writer>,
    /// What one read takes from the socket.
    buf: Vec<u8>,
}

impl Messages {
    fn next(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            match self.decoder.next_message() {
                Ok(Some(Message::Ping(p))) => {
                    let _ = self.writer.send(&Message::Pong(p));
                    continue;
                }
                Ok(Some(Message::Close(_))) => {
                    self.writer.close(websocket::close_code::NORMAL, "");
                    return None;
                }
                Ok(Some(Message::Pong(_))) => continue,
                Ok(Some(m)) => match self.writer.channels.parse(&m) {
                    Ok(Some(parsed)) => return Some(parsed),
                    Ok(None) => continue,
                    Err(e) => {
                        self.writer
                            .close(websocket::close_code::PROTOCOL_ERROR, &e.to_string());
                        return None;
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    self.writer.close(e.close_code(), &e.to_string());
                    return None;
                }
            }
            match self.reader.read(&mut self.buf) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.decoder.feed(&self.buf[..n]),
            }
        }
    }
}

struct WsOutput {
    writer: Arc<Writer>,
    protocol: StreamProtocol,
    stdout: bool,
    stderr: bool,
}

impl Output for WsOutput {
    fn write(&self, channel: Channel, data: &[u8]) -> io::Result<()> {
        match channel {
            Channel::Stdout if self.stdout => self.writer.channel(websocket::STDOUT, data),
            Channel::Stderr if self.stderr => self.writer.channel(websocket::STDERR, data),
            _ => Ok(()),
        }
    }

    fn finish(&self, outcome: &Outcome) {
        let message = k8s::error_stream_message(self.protocol, outcome);
        if !message.is_empty() {
            let _ = self.writer.channel(websocket::ERROR, &message);
        }
        self.writer.close(websocket::close_code::NORMAL, "");
    }
}

fn exec_or_attach(
    messages: &mut Messages,
    protocol: StreamProtocol,
    request: Request,
    config: &Arc<Config>,
) -> Result<(), String> {
    let Some(streams) = request.streams() else {
        return Err(format!("a {} request has no streams", request.kind()));
    };
    let out: Arc<dyn Output> = Arc::new(WsOutput {
        writer: messages.writer.clone(),
        protocol,
        stdout: streams.stdout,
        stderr: streams.stderr,
    });
    let tx = super::start_backend(config, request, out)?;
    let mut resize = ResizeDecoder::new();
    while let Some((channel, data)) = messages.next() {
        let inputs = match channel {
            websocket::STDIN => vec![Input::Stdin(data)],
            websocket::RESIZE => match resize.feed(&data) {
                Ok(sizes) => sizes.into_iter().map(Input::Resize).collect(),
                Err(e) => {
                    messages
                        .writer
                        .close(websocket::close_code::INVALID_DATA, &e.to_string());
                    break;
                }
            },
            ch => match websocket::closed_channel(ch, &data) {
                Some(websocket::STDIN) if protocol == StreamProtocol::V5 => vec![Input::StdinEnd],
                _ => Vec::new(),
            },
        };
        for input in inputs {
            if tx.send(input).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn port_forward(
    messages: &mut Messages,
    ports: &[u16],
    target: Result<Target, String>,
) -> Result<(), String> {
    let writer = messages.writer.clone();
    if ports.is_empty() {
        writer.close(websocket::close_code::POLICY, "no port=N in the query");
        return Err("a port-forward without ports".into());
    }
    let mut pods: Vec<Option<TcpStream>> = Vec::new();
    let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for (i, &port) in ports.iter().enumerate() {
        let Some((data, error)) = websocket::port_forward_channels(i) else {
            writer.close(websocket::close_code::POLICY, "too many ports");
            return Err("too many ports".into());
        };
        for ch in [data, error] {
            writer
                .channel(ch, &websocket::port_prefix(port))
                .map_err(|e| e.to_string())?;
        }
        let (w, live_too) = (writer.clone(), live.clone());
        live.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let send = {
            let w = w.clone();
            move |bytes: &[u8]| w.channel(data, bytes).is_ok()
        };
        let end = move || {
            // The last connection's end ends the session.
            if live_too.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                w.close(websocket::close_code::NORMAL, "");
            }
        };
        match super::port_forward::forward(&target, port, send, end) {
            Ok(pod) => pods.push(Some(pod)),
            Err(message) => {
                live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                let _ = writer.channel(error, message.as_bytes());
                pods.push(None);
            }
        }
    }
    if live.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        writer.close(websocket::close_code::NORMAL, "");
    }
    while let Some((channel, data)) = messages.next() {
        let index = usize::from(channel / 2);
        if channel % 2 != 0 {
            continue;
        }
        if let Some(Some(pod)) = pods.get_mut(index) {
            if pod.write_all(&data).is_err() {
                let _ = pod.shutdown(Shutdown::Both);
            }
        }
    }
    for pod in pods.into_iter().flatten() {
        let _ = pod.shutdown(Shutdown::Both);
    }
    Ok(())
}
