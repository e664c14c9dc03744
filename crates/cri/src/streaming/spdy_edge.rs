//! The SPDY/3.1 transport (what kubelet's proxy, crictl and critest v1.26 speak): the
//! upgrade with `X-Stream-Protocol-Version` negotiation, then a `spdy` session read on the
//! connection's thread while the backend's threads write to it.
//!
//! Exec and attach wait (up to [`SETUP_TIMEOUT`]) for the streams the request asked for
//! plus the error stream, as kubelet does, then run the backend; port-forward dials the
//! pod for each `data` stream and pairs it with the `error` stream of the same
//! `requestid`.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

use spdy::blocking::Connection;
use spdy::http::RequestHead;
use spdy::k8s::{self, Outcome, ResizeDecoder, StreamProtocol, StreamType};
use spdy::{Event, GoAwayStatus, Headers, RstStatus};

use super::port_forward::Target;
use super::tokens::Request;
use super::{Channel, Input, Output, TimedWriter, IDLE_TIMEOUT, SETUP_TIMEOUT};
use crate::options::Config;

type Conn = Arc<Connection<TimedWriter>>;

pub fn serve(
    mut sock: TcpStream,
    head: &RequestHead,
    rest: Vec<u8>,
    request: Request,
    config: &Arc<Config>,
) -> Result<(), String> {
    let supported = match request {
        Request::PortForward { .. } => StreamProtocol::PORT_FORWARD,
        _ => StreamProtocol::EXEC,
    };
    let protocol = match k8s::spdy_upgrade(head, supported) {
        Ok(p) => p,
        Err(e) => {
            let _ = sock.write_all(&e.response());
            return Err(format!("refused upgrade: {e}"));
        }
    };
    let io_err = |e: io::Error| e.to_string();
    sock.write_all(&k8s::spdy_upgrade_response(protocol))
        .map_err(io_err)?;
    let reader = sock.try_clone().map_err(io_err)?;
    let conn: Conn = Arc::new(Connection::new(spdy::Config::default(), TimedWriter(sock)));
    let first = conn
        .with_session(|s| {
            s.receive(&rest)?;
            Ok(std::iter::from_fn(|| s.poll_event()).collect::<Vec<_>>())
        })
        .map_err(|e| e.to_string())?;
    let mut events = Events {
        conn: conn.clone(),
        reader,
        pending: first.into(),
        buf: vec![0; 64 << 10],
    };
    let result = match request {
        Request::PortForward { sandbox_id, .. } => {
            port_forward(&mut events, Target::of(config, &sandbox_id))
        }
        exec_or_attach => exec_or_attach_session(&mut events, protocol, exec_or_attach, config),
    };
    // Whatever ended the session, the socket goes: the backend's threads see their
    // writes fail and go on without the client.
    let _ = events.reader.shutdown(Shutdown::Both);
    result
}

/// The session's events one by one; `None` when the client is gone (EOF, error, GOAWAY).
struct Events {
    conn: Conn,
    reader: TcpStream,
    pending: std::collections::VecDeque<Event>,
    buf: Vec<u8>,
}

impl Events {
    fn next(&mut self) -> Result<Option<Event>, String> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            match self.conn.read_events(&mut self.reader, &mut self.buf) {
                Ok(Some(events)) => self.pending.extend(events),
                Ok(None) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// The streams an exec or attach waits for.
fn expected(request: &Request, protocol: StreamProtocol) -> Vec<StreamType> {
    let Some(s) = request.streams() else {
        return Vec::new();
    };
    let mut want = vec![StreamType::Error];
    for (asked, t) in [
        (s.stdin, StreamType::Stdin),
        (s.stdout, StreamType::Stdout),
        (s.stderr && !s.tty, StreamType::Stderr),
        (s.tty && protocol.has_resize(), StreamType::Resize),
    ] {
        if asked {
            want.push(t);
        }
    }
    want
}

fn exec_or_attach_session(
    events: &mut Events,
    protocol: StreamProtocol,
    request: Request,
    config: &Arc<Config>,
) -> Result<(), String> {
    let conn = events.conn.clone();
    let want = expected(&request, protocol);
    let mut ids: HashMap<StreamType, u32> = HashMap::new();
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut early = Vec::new();
    while !want.iter().all(|t| ids.contains_key(t)) {
        if Instant::now() >= deadline {
            return Err(format!(
                "the client opened {:?} of the streams {want:?} within {SETUP_TIMEOUT:?}",
                ids.keys().collect::<Vec<_>>()
            ));
        }
        let Some(event) = events.next()? else {
            return Ok(());
        };
        match event {
            Event::StreamOpened {
                stream_id, headers, ..
            } => match k8s::exec_stream_type(&headers, protocol) {
                Ok(t) if !ids.contains_key(&t) => {
                    conn.accept(stream_id, &Headers::new(), false)
                        .map_err(|e| e.to_string())?;
                    ids.insert(t, stream_id);
                }
                _ => conn.refuse(stream_id).map_err(|e| e.to_string())?,
            },
            // Input that came before the last stream was opened.
            other => early.push(other),
        }
    }
    events.reader.set_read_timeout(Some(IDLE_TIMEOUT)).ok();
    let out: Arc<dyn Output> = Arc::new(SpdyOutput {
        conn: conn.clone(),
        sock: events.reader.try_clone().map_err(|e| e.to_string())?,
        ids: ids.clone(),
        protocol,
    });
    let tx = super::start_backend(config, request, out)?;
    let mut resize = ResizeDecoder::new();
    let mut input = InputState {
        ids: &ids,
        tx: Some(tx),
        resize: &mut resize,
        conn: &conn,
    };
    for event in early {
        input.handle(event);
    }
    while let Some(event) = events.next().unwrap_or(None) {
        if matches!(event, Event::GoAway { .. }) {
            break;
        }
        if let Event::StreamOpened { stream_id, .. } = event {
            // Every stream the request needs is open: more are refused.
            let _ = conn.refuse(stream_id);
            continue;
        }
        input.handle(event);
    }
    // The client is gone: no more input (stdin ends); the backend finishes on its own.
    Ok(())
}

struct InputState<'a> {
    ids: &'a HashMap<StreamType, u32>,
    tx: Option<SyncSender<Input>>,
    resize: &'a mut ResizeDecoder,
    conn: &'a Conn,
}

impl InputState<'_> {
    fn handle(&mut self, event: Event) {
        let kind = |id: u32| self.ids.iter().find(|(_, v)| **v == id).map(|(k, _)| *k);
        let message = match event {
            Event::Data { stream_id, data } => match kind(stream_id) {
                Some(StreamType::Stdin) => vec![Input::Stdin(data)],
                Some(StreamType::Resize) => match self.resize.feed(&data) {
                    Ok(sizes) => sizes.into_iter().map(Input::Resize).collect(),
                    Err(_) => {
                        let _ = self.conn.reset(stream_id, RstStatus::PROTOCOL_ERROR);
                        Vec::new()
                    }
                },
                _ => Vec::new(),
            },
            Event::RemoteFin { stream_id } | Event::StreamReset { stream_id, .. }
                if kind(stream_id) == Some(StreamType::Stdin) =>
            {
                vec![Input::StdinEnd]
            }
            _ => Vec::new(),
        };
        for m in message {
            // A backend that ended takes nothing more.
            if self.tx.as_ref().is_some_and(|tx| tx.send(m).is_err()) {
                self.tx = None;
            }
        }
    }
}

/// Output to the client's stdout and stderr streams.
struct SpdyOutput {
    conn: Conn,
    sock: TcpStream,
    ids: HashMap<StreamType, u32>,
    protocol: StreamProtocol,
}

impl Output for SpdyOutput {
    fn write(&self, channel: Channel, data: &[u8]) -> io::Result<()> {
        let t = match channel {
            Channel::Stdout => StreamType::Stdout,
            Channel::Stderr => StreamType::Stderr,
        };
        let Some(&id) = self.ids.get(&t) else {
            // A stream the client did not ask for: dropped.
            return Ok(());
        };
        self.conn.send_data(id, data, false).map_err(|e| {
            // A write that timed out may have left half a frame: the session cannot go
            // on, and the client's reads end with it.
            let _ = self.sock.shutdown(Shutdown::Both);
            io::Error::other(e)
        })
    }

    fn finish(&self, outcome: &Outcome) {
        for t in [StreamType::Stdout, StreamType::Stderr] {
            if let Some(&id) = self.ids.get(&t) {
                let _ = self.conn.close(id);
            }
        }
        if let Some(&id) = self.ids.get(&StreamType::Error) {
            let message = k8s::error_stream_message(self.protocol, outcome);
            let _ = self.conn.send_data(id, &message, true);
        }
        let _ = self.conn.go_away(GoAwayStatus::OK);
        // The client closes the connection once it has read the status; ours ends
        // sending, which also ends the reading thread should the client not.
        let _ = self.sock.shutdown(Shutdown::Write);
    }
}

/// One forwarded connection: its two streams and its socket into the pod.
struct Forward {
    error: Option<u32>,
    data: Option<u32>,
    pod: Option<TcpStream>,
}

fn port_forward(events: &mut Events, target: Result<Target, String>) -> Result<(), String> {
    let conn = events.conn.clone();
    events.reader.set_read_timeout(Some(IDLE_TIMEOUT)).ok();
    let mut forwards: HashMap<String, Forward> = HashMap::new();
    let mut by_stream: HashMap<u32, String> = HashMap::new();
    while let Some(event) = events.next().unwrap_or(None) {
        // A data frame ends no stream: the forwards are looked over after other events
        // only, not for every frame of a transfer.
        let may_end = !matches!(event, Event::Data { .. });
        match event {
            Event::StreamOpened {
                stream_id, headers, ..
            } => {
                let stream = match k8s::port_forward_stream(&headers) {
                    Ok(s) => s,
                    Err(_) => {
                        let _ = conn.refuse(stream_id);
                        continue;
                    }
                };
                if conn.accept(stream_id, &Headers::new(), false).is_err() {
                    continue;
                }
                let key = stream
                    .request_id
                    .clone()
                    .unwrap_or_else(|| format!("port {}", stream.port));
                by_stream.insert(stream_id, key.clone());
                let forward = forwards.entry(key).or_insert(Forward {
                    error: None,
                    data: None,
                    pod: None,
                });
                if stream.kind == StreamType::Error {
                    forward.error = Some(stream_id);
                    continue;
                }
                forward.data = Some(stream_id);
                let (c, error) = (conn.clone(), forward.error);
                let send = {
                    let c = c.clone();
                    move |bytes: &[u8]| c.send_data(stream_id, bytes, false).is_ok()
                };
                let end = move || {
                    let _ = c.close(stream_id);
                    if let Some(e) = error {
                        let _ = c.close(e);
                    }
                };
                match super::port_forward::forward(&target, stream.port, send, end) {
                    Ok(pod) => forward.pod = Some(pod),
                    Err(message) => {
                        if let Some(err_id) = forward.error {
                            let _ = conn.send_data(err_id, message.as_bytes(), true);
                        }
                        let _ = conn.close(stream_id);
                    }
                }
            }
            Event::Data { stream_id, data } => {
                let Some(f) = by_stream.get(&stream_id).and_then(|k| forwards.get_mut(k)) else {
                    continue;
                };
                if f.data != Some(stream_id) {
                    continue;
                }
                if let Some(pod) = f.pod.as_mut() {
                    if pod.write_all(&data).is_err() {
                        let _ = pod.shutdown(Shutdown::Both);
                        let _ = conn.reset(stream_id, RstStatus::CANCEL);
                    }
                }
            }
            Event::RemoteFin { stream_id } => {
                if let Some(f) = by_stream.get(&stream_id).and_then(|k| forwards.get(k)) {
                    if f.data == Some(stream_id) {
                        if let Some(pod) = &f.pod {
                            let _ = pod.shutdown(Shutdown::Write);
                        }
                    }
                }
            }
            Event::StreamReset { stream_id, .. } => {
                if let Some(key) = by_stream.remove(&stream_id) {
                    if let Some(f) = forwards.remove(&key) {
                        if let Some(pod) = f.pod {
                            let _ = pod.shutdown(Shutdown::Both);
                        }
                        for id in [f.error, f.data].into_iter().flatten() {
                            by_stream.remove(&id);
                        }
                    }
                }
            }
            Event::GoAway { .. } => break,
            _ => {}
        }
        if !may_end {
            continue;
        }
        // Forwards whose streams are both gone are forgotten.
        forwards.retain(|_, f| {
            let open = |id: Option<u32>| {
                id.is_some_and(|id| conn.with_session(|s| Ok(s.is_open(id))).unwrap_or(false))
            };
            open(f.error) || open(f.data) || f.data.is_none()
        });
        by_stream.retain(|_, key| forwards.contains_key(key));
    }
    // The client is gone: every connection into the pod ends.
    for f in forwards.into_values() {
        if let Some(pod) = f.pod {
            let _ = pod.shutdown(Shutdown::Both);
        }
    }
    Ok(())
}
