//! WebSocket (RFC 6455) as Kubernetes streaming uses it: the opening handshake with
//! sub-protocol negotiation, a frame codec without I/O (client frames must be masked,
//! fragments reassembled, control frames checked, sizes bounded), and the channel layer:
//! each binary message starts with a channel byte (0 stdin, 1 stdout, 2 stderr, 3 error,
//! 4 resize; `v5.channel.k8s.io` adds 255 = "close channel N"), or, in the `base64.`
//! variants, each text message starts with the channel as an ASCII digit and carries
//! base64. Port-forward over WebSocket uses two channels per port (data `2i`, error
//! `2i+1`), whose first message from the server is the port, little-endian.

use base64::Engine as _;

use crate::http::{self, RequestHead};

const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Channel numbers of exec and attach.
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// `v5.channel.k8s.io`: a message `[255, n]` closes channel `n` (stdin EOF).
pub const CLOSE_CHANNEL: u8 = 255;

/// Sub-protocols of exec and attach, most preferred first.
pub const EXEC_PROTOCOLS: &[&str] = &[
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];
/// Sub-protocols of port-forward.
pub const PORT_FORWARD_PROTOCOLS: &[&str] = &[
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "portforward.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

/// Whether a negotiated sub-protocol carries base64 text rather than binary.
pub fn is_base64(protocol: &str) -> bool {
    protocol.contains("base64.")
}

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(ACCEPT_GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(ctx.finish())
}

/// An accepted WebSocket upgrade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    pub accept: String,
    /// The chosen sub-protocol; `None` when the client offered none.
    pub protocol: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    #[error("a WebSocket upgrade must be a GET, not {0}")]
    Method(String),
    #[error("not a WebSocket upgrade (needs 'Connection: Upgrade' and 'Upgrade: websocket')")]
    NotWebSocket,
    #[error("unsupported Sec-WebSocket-Version {0:?} (13 only)")]
    Version(String),
    #[error("Sec-WebSocket-Key is missing or not 16 bytes in base64")]
    Key,
    #[error(
        "none of the offered sub-protocols {offered:?} is supported; supported: {supported:?}"
    )]
    NoCommonProtocol {
        offered: Vec<String>,
        supported: Vec<&'static str>,
    },
}

impl UpgradeError {
    /// The HTTP error response: 426 with the supported version, else 400.
    pub fn response(&self) -> Vec<u8> {
        match self {
            UpgradeError::Version(_) => http::error_response(
                426,
                "Upgrade Required",
                &[("Sec-WebSocket-Version", "13")],
                &self.to_string(),
            ),
            _ => http::error_response(400, "Bad Request", &[], &self.to_string()),
        }
    }
}

/// Checks a WebSocket upgrade request; the sub-protocol is the first one offered (in the
/// client's order) that `supported` holds.
pub fn upgrade(head: &RequestHead, supported: &[&'static str]) -> Result<Upgrade, UpgradeError> {
    if head.method != "GET" {
        return Err(UpgradeError::Method(head.method.clone()));
    }
    let is_ws = head.has_token("connection", "upgrade")
        && head
            .list("upgrade")
            .iter()
            .any(|u| u.eq_ignore_ascii_case("websocket"));
    if !is_ws {
        return Err(UpgradeError::NotWebSocket);
    }
    let version = head.field("sec-websocket-version").unwrap_or("");
    if version != "13" {
        return Err(UpgradeError::Version(version.into()));
    }
    let key = head.field("sec-websocket-key").ok_or(UpgradeError::Key)?;
    match base64::engine::general_purpose::STANDARD.decode(key) {
        Ok(raw) if raw.len() == 16 => {}
        _ => return Err(UpgradeError::Key),
    }
    let offered = head.list("sec-websocket-protocol");
    let protocol = if offered.is_empty() {
        None
    } else {
        let chosen = offered
            .iter()
            .find_map(|o| supported.iter().find(|s| *s == o).copied());
        match chosen {
            Some(p) => Some(p),
            None => {
                return Err(UpgradeError::NoCommonProtocol {
                    offered: offered.iter().map(|s| s.to_string()).collect(),
                    supported: supported.to_vec(),
                })
            }
        }
    };
    Ok(Upgrade {
        accept: accept_key(key),
        protocol,
    })
}

/// The `101 Switching Protocols` answer; WebSocket frames follow.
pub fn upgrade_response(upgrade: &Upgrade) -> Vec<u8> {
    let mut fields = vec![
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", upgrade.accept.as_str()),
    ];
    if let Some(p) = upgrade.protocol {
        fields.push(("Sec-WebSocket-Protocol", p));
    }
    http::response_head(101, "Switching Protocols", &fields)
}

/// Frame opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    Continuation = 0,
    Text = 1,
    Binary = 2,
    Close = 8,
    Ping = 9,
    Pong = 10,
}

impl Opcode {
    fn from_bits(b: u8) -> Option<Self> {
        Some(match b {
            0 => Self::Continuation,
            1 => Self::Text,
            2 => Self::Binary,
            8 => Self::Close,
            9 => Self::Ping,
            10 => Self::Pong,
            _ => return None,
        })
    }

    fn is_control(self) -> bool {
        self as u8 >= 8
    }
}

/// Which end this codec is: a server requires masked frames and sends unmasked ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}

/// A whole message, fragments reassembled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// The close code and reason, if the peer gave one.
    Close(Option<(u16, String)>),
}

pub mod close_code {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    pub const PROTOCOL_ERROR: u16 = 1002;
    pub const UNSUPPORTED: u16 = 1003;
    pub const INVALID_DATA: u16 = 1007;
    pub const POLICY: u16 = 1008;
    pub const TOO_BIG: u16 = 1009;
    pub const INTERNAL_ERROR: u16 = 1011;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WsError {
    #[error("WebSocket protocol error: {0}")]
    Protocol(&'static str),
    #[error("WebSocket text message is not UTF-8")]
    NotUtf8,
    #[error("WebSocket message of {len} bytes exceeds the limit of {limit}")]
    TooBig { len: u64, limit: usize },
    #[error("the WebSocket connection already failed")]
    Poisoned,
}

impl WsError {
    /// The close code to send before dropping the connection.
    pub fn close_code(&self) -> u16 {
        match self {
            WsError::NotUtf8 => close_code::INVALID_DATA,
            WsError::TooBig { .. } => close_code::TOO_BIG,
            _ => close_code::PROTOCOL_ERROR,
        }
    }
}

/// Bytes in, messages out.
pub struct Decoder {
    role: Role,
    max_message: usize,
    buf: Vec<u8>,
    start: usize,
    /// Opcode and bytes of a fragmented message in progress.
    partial: Option<(Opcode, Vec<u8>)>,
    poisoned: bool,
}

impl Decoder {
    /// `max_message` bounds a frame and a reassembled message alike.
    pub fn new(role: Role, max_message: usize) -> Self {
        Decoder {
            role,
            max_message,
            buf: Vec::new(),
            start: 0,
            partial: None,
            poisoned: false,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete message, `None` if more bytes are needed. After an error the
    /// connection must be closed with [`WsError::close_code`].
    pub fn next_message(&mut self) -> Result<Option<Message>, WsError> {
        if self.poisoned {
            return Err(WsError::Poisoned);
        }
        let result = self.decode();
        if result.is_err() {
            self.poisoned = true;
        }
        if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        result
    }

    fn decode(&mut self) -> Result<Option<Message>, WsError> {
        loop {
            let Some((fin, opcode, payload)) = self.frame()? else {
                return Ok(None);
            };
            if opcode.is_control() {
                return control_message(opcode, payload).map(Some);
            }
            let (kind, mut data) = match (opcode, self.partial.take()) {
                (Opcode::Continuation, Some((kind, mut data))) => {
                    data.extend_from_slice(&payload);
                    (kind, data)
                }
                (Opcode::Continuation, None) => {
                    return Err(WsError::Protocol("continuation frame without a message"))
                }
                (_, Some(_)) => {
                    return Err(WsError::Protocol("new message inside a fragmented one"))
                }
                (kind, None) => (kind, payload),
            };
            if data.len() > self.max_message {
                return Err(WsError::TooBig {
                    len: data.len() as u64,
                    limit: self.max_message,
                });
            }
            if !fin {
                self.partial = Some((kind, data));
                continue;
            }
            return Ok(Some(match kind {
                Opcode::Text => {
                    Message::Text(String::from_utf8(data).map_err(|_| WsError::NotUtf8)?)
                }
                _ => {
                    data.shrink_to_fit();
                    Message::Binary(data)
                }
            }));
        }
    }

    /// One frame's FIN bit, opcode and unmasked payload.
    fn frame(&mut self) -> Result<Option<(bool, Opcode, Vec<u8>)>, WsError> {
        let avail = &self.buf[self.start..];
        let Some(&[b0, b1]) = avail.first_chunk::<2>() else {
            return Ok(None);
        };
        if b0 & 0x70 != 0 {
            return Err(WsError::Protocol("reserved bits set without an extension"));
        }
        let opcode = Opcode::from_bits(b0 & 0x0f).ok_or(WsError::Protocol("reserved opcode"))?;
        let fin = b0 & 0x80 != 0;
        let masked = b1 & 0x80 != 0;
        match (self.role, masked) {
            (Role::Server, false) => return Err(WsError::Protocol("client frame is not masked")),
            (Role::Client, true) => return Err(WsError::Protocol("server frame is masked")),
            _ => {}
        }
        let (len, mut at) = match b1 & 0x7f {
            126 => match avail.get(2..4) {
                Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
                None => return Ok(None),
            },
            127 => match avail.get(2..10) {
                Some(b) => {
                    let len = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                    if len >> 63 != 0 {
                        return Err(WsError::Protocol("64-bit length with the top bit set"));
                    }
                    (len, 10)
                }
                None => return Ok(None),
            },
            n => (u64::from(n), 2),
        };
        if opcode.is_control() {
            if !fin {
                return Err(WsError::Protocol("fragmented control frame"));
            }
            if len > 125 {
                return Err(WsError::Protocol("control frame longer than 125 bytes"));
            }
        }
        if len > self.max_message as u64 {
            return Err(WsError::TooBig {
                len,
                limit: self.max_message,
            });
        }
        let len = len as usize;
        let mut key = None;
        if masked {
            let Some(k) = avail.get(at..at + 4) else {
                return Ok(None);
            };
            key = Some([k[0], k[1], k[2], k[3]]);
            at += 4;
        }
        let Some(body) = avail.get(at..at.saturating_add(len)) else {
            return Ok(None);
        };
        let mut payload = body.to_vec();
        if let Some(key) = key {
            apply_mask(&mut payload, key);
        }
        self.start += at + len;
        Ok(Some((fin, opcode, payload)))
    }
}

fn control_message(opcode: Opcode, payload: Vec<u8>) -> Result<Message, WsError> {
    Ok(match opcode {
        Opcode::Ping => Message::Ping(payload),
        Opcode::Pong => Message::Pong(payload),
        _ => {
            if payload.is_empty() {
                return Ok(Message::Close(None));
            }
            let Some((code, reason)) = payload.split_first_chunk::<2>() else {
                return Err(WsError::Protocol("close payload of one byte"));
            };
            let code = u16::from_be_bytes(*code);
            let valid = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
            if !valid {
                return Err(WsError::Protocol("invalid close code"));
            }
            let reason = std::str::from_utf8(reason).map_err(|_| WsError::NotUtf8)?;
            Message::Close(Some((code, reason.to_owned())))
        }
    })
}

fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

/// One frame's bytes. A server passes `mask: None`; a client must pass a fresh random key.
pub fn encode_frame(opcode: Opcode, fin: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(if fin { 0x80 } else { 0 } | opcode as u8);
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n @ 0..=125 => out.push(mask_bit | n as u8),
        n @ 126..=0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            let start = out.len();
            out.extend_from_slice(payload);
            apply_mask(&mut out[start..], key);
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// A whole message in one frame (server side: unmasked).
pub fn encode_message(message: &Message) -> Vec<u8> {
    match message {
        Message::Text(t) => encode_frame(Opcode::Text, true, t.as_bytes(), None),
        Message::Binary(b) => encode_frame(Opcode::Binary, true, b, None),
        Message::Ping(p) => encode_frame(Opcode::Ping, true, &p[..p.len().min(125)], None),
        Message::Pong(p) => encode_frame(Opcode::Pong, true, &p[..p.len().min(125)], None),
        Message::Close(c) => encode_frame(Opcode::Close, true, &close_payload(c.as_ref()), None),
    }
}

/// A close frame's payload: the code, then as much of the reason as fits in 125 bytes.
pub fn close_payload(close: Option<&(u16, String)>) -> Vec<u8> {
    let Some((code, reason)) = close else {
        return Vec::new();
    };
    let mut out = code.to_be_bytes().to_vec();
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&reason.as_bytes()[..end]);
    out
}

/// Kubernetes channel messages, binary or base64 as negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channels {
    pub base64: bool,
}

impl Channels {
    pub fn for_protocol(protocol: Option<&str>) -> Self {
        Channels {
            base64: protocol.is_some_and(is_base64),
        }
    }

    /// A server message carrying `data` on `channel`.
    pub fn message(self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            let mut text = String::with_capacity(1 + data.len() * 4 / 3 + 4);
            text.push(char::from(b'0' + channel % 10));
            base64::engine::general_purpose::STANDARD.encode_string(data, &mut text);
            Message::Text(text)
        } else {
            let mut bytes = Vec::with_capacity(data.len() + 1);
            bytes.push(channel);
            bytes.extend_from_slice(data);
            Message::Binary(bytes)
        }
    }

    /// Splits a received message into its channel and data; `None` for control messages.
    pub fn parse(self, message: &Message) -> Result<Option<(u8, Vec<u8>)>, ChannelError> {
        match message {
            Message::Binary(b) if !self.base64 => match b.split_first() {
                Some((&ch, data)) => Ok(Some((ch, data.to_vec()))),
                None => Err(ChannelError::Empty),
            },
            Message::Text(t) if self.base64 => {
                let mut chars = t.chars();
                let ch = chars
                    .next()
                    .and_then(|c| c.to_digit(10))
                    .ok_or(ChannelError::Empty)?;
                let data = base64::engine::general_purpose::STANDARD
                    .decode(chars.as_str())
                    .map_err(|_| ChannelError::Base64)?;
                Ok(Some((ch as u8, data)))
            }
            Message::Text(_) | Message::Binary(_) => Err(ChannelError::WrongKind),
            _ => Ok(None),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    #[error("channel message without a channel number")]
    Empty,
    #[error("base64 channel message is not valid base64")]
    Base64,
    #[error("text message on a binary channel protocol, or binary on a base64 one")]
    WrongKind,
}

/// `v5.channel.k8s.io`: the channel a `[255, n]` message closes, if it is one.
pub fn closed_channel(channel: u8, data: &[u8]) -> Option<u8> {
    match (channel, data) {
        (CLOSE_CHANNEL, &[n]) => Some(n),
        _ => None,
    }
}

/// Port-forward over WebSocket: the data and error channels of the `index`th port.
pub fn port_forward_channels(index: usize) -> Option<(u8, u8)> {
    let data = u8::try_from(index.checked_mul(2)?).ok()?;
    Some((data, data.checked_add(1)?))
}

/// The first message on each port-forward channel: the port, little-endian.
pub fn port_prefix(port: u16) -> [u8; 2] {
    port.to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_of_rfc_6455() {
        // Section 1.3's example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    fn head(s: &str) -> RequestHead {
        RequestHead::parse(s.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn handshake_and_protocols() {
        let h = head(
            "GET /exec/t?command=sh HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Protocol: v5.channel.k8s.io, v4.channel.k8s.io\r\n\r\n",
        );
        let up = upgrade(&h, EXEC_PROTOCOLS).unwrap();
        assert_eq!(up.protocol, Some("v5.channel.k8s.io"));
        let resp = String::from_utf8(upgrade_response(&up)).unwrap();
        assert_eq!(
            resp,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: v5.channel.k8s.io\r\n\r\n"
        );
        let old = upgrade(&h, &["v4.channel.k8s.io"]).unwrap();
        assert_eq!(old.protocol, Some("v4.channel.k8s.io"));
        let err = upgrade(&h, &["portforward.k8s.io"]).unwrap_err();
        assert!(matches!(err, UpgradeError::NoCommonProtocol { .. }));
        let v12 = head("GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 12\r\n\r\n");
        let err = upgrade(&v12, EXEC_PROTOCOLS).unwrap_err();
        assert!(String::from_utf8(err.response())
            .unwrap()
            .starts_with("HTTP/1.1 426"));
        let bad_key = head("GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: c2hvcnQ=\r\n\r\n");
        assert_eq!(upgrade(&bad_key, EXEC_PROTOCOLS), Err(UpgradeError::Key));
        let post = head("POST / HTTP/1.1\r\n\r\n");
        assert!(matches!(
            upgrade(&post, EXEC_PROTOCOLS),
            Err(UpgradeError::Method(_))
        ));
    }

    #[test]
    fn rfc_examples_decode() {
        // Section 5.7: a masked "Hello" from a client, and the fragmented unmasked one.
        let mut d = Decoder::new(Role::Server, 1024);
        d.feed(&[
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ]);
        assert_eq!(d.next_message(), Ok(Some(Message::Text("Hello".into()))));
        let mut c = Decoder::new(Role::Client, 1024);
        c.feed(&[0x01, 0x03, 0x48, 0x65, 0x6c]);
        assert_eq!(c.next_message(), Ok(None));
        c.feed(&[0x89, 0x00, 0x80, 0x02, 0x6c, 0x6f]);
        assert_eq!(c.next_message(), Ok(Some(Message::Ping(vec![]))));
        assert_eq!(c.next_message(), Ok(Some(Message::Text("Hello".into()))));
        assert_eq!(
            encode_message(&Message::Text("Hello".into())),
            [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
        );
    }

    #[test]
    fn lengths_round_trip_byte_by_byte() {
        for len in [0usize, 1, 125, 126, 127, 65535, 65536, 70000] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let wire = encode_frame(Opcode::Binary, true, &payload, Some([1, 2, 3, 4]));
            let mut d = Decoder::new(Role::Server, 1 << 20);
            let mut got = None;
            for b in &wire {
                d.feed(std::slice::from_ref(b));
                if let Some(m) = d.next_message().unwrap() {
                    got = Some(m);
                }
            }
            assert_eq!(got, Some(Message::Binary(payload)), "len {len}");
        }
    }

    fn decode_err(role: Role, limit: usize, wire: &[u8]) -> WsError {
        let mut d = Decoder::new(role, limit);
        d.feed(wire);
        loop {
            match d.next_message() {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("no error for {wire:?}"),
                Err(e) => {
                    assert_eq!(d.next_message(), Err(WsError::Poisoned));
                    return e;
                }
            }
        }
    }

    #[test]
    fn malformed_frames() {
        let m = Some([9, 9, 9, 9]);
        let unmasked = encode_frame(Opcode::Binary, true, b"x", None);
        assert_eq!(
            decode_err(Role::Server, 64, &unmasked),
            WsError::Protocol("client frame is not masked")
        );
        let mut rsv = encode_frame(Opcode::Binary, true, b"x", m);
        rsv[0] |= 0x40;
        assert_eq!(decode_err(Role::Server, 64, &rsv).close_code(), 1002);
        let mut op = encode_frame(Opcode::Binary, true, b"x", m);
        op[0] = 0x83;
        assert_eq!(
            decode_err(Role::Server, 64, &op),
            WsError::Protocol("reserved opcode")
        );
        let frag_ping = encode_frame(Opcode::Ping, false, b"", m);
        assert_eq!(
            decode_err(Role::Server, 64, &frag_ping),
            WsError::Protocol("fragmented control frame")
        );
        let long_ping = encode_frame(Opcode::Ping, true, &[0; 126], m);
        assert!(matches!(
            decode_err(Role::Server, 1024, &long_ping),
            WsError::Protocol(_)
        ));
        let cont = encode_frame(Opcode::Continuation, true, b"x", m);
        assert!(matches!(
            decode_err(Role::Server, 64, &cont),
            WsError::Protocol(_)
        ));
        let mut two = encode_frame(Opcode::Text, false, b"a", m);
        two.extend(encode_frame(Opcode::Text, true, b"b", m));
        assert!(matches!(
            decode_err(Role::Server, 64, &two),
            WsError::Protocol(_)
        ));
        let big = encode_frame(Opcode::Binary, true, &[0; 100], m);
        assert_eq!(decode_err(Role::Server, 99, &big).close_code(), 1009);
        let mut frags = encode_frame(Opcode::Binary, false, &[0; 60], m);
        frags.extend(encode_frame(Opcode::Continuation, true, &[0; 60], m));
        assert_eq!(decode_err(Role::Server, 100, &frags).close_code(), 1009);
        let huge = [0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            decode_err(Role::Server, 64, &huge),
            WsError::Protocol(_)
        ));
        let bad_utf8 = encode_frame(Opcode::Text, true, &[0xff, 0xfe], m);
        assert_eq!(decode_err(Role::Server, 64, &bad_utf8), WsError::NotUtf8);
        let bad_close = encode_frame(Opcode::Close, true, &1005u16.to_be_bytes(), m);
        assert!(matches!(
            decode_err(Role::Server, 64, &bad_close),
            WsError::Protocol(_)
        ));
        let short_close = encode_frame(Opcode::Close, true, &[3], m);
        assert!(matches!(
            decode_err(Role::Server, 64, &short_close),
            WsError::Protocol(_)
        ));
    }

    #[test]
    fn close_and_channels() {
        let wire = encode_frame(
            Opcode::Close,
            true,
            &close_payload(Some(&(1000, "bye".into()))),
            Some([0; 4]),
        );
        let mut d = Decoder::new(Role::Server, 64);
        d.feed(&wire);
        assert_eq!(
            d.next_message(),
            Ok(Some(Message::Close(Some((1000, "bye".into())))))
        );
        let long = "é".repeat(100);
        let p = close_payload(Some(&(1000, long)));
        assert!(p.len() <= 125 && std::str::from_utf8(&p[2..]).is_ok());

        let bin = Channels::for_protocol(Some("v4.channel.k8s.io"));
        let msg = bin.message(STDOUT, b"hi");
        assert_eq!(msg, Message::Binary(vec![1, b'h', b'i']));
        assert_eq!(bin.parse(&msg), Ok(Some((1, b"hi".to_vec()))));
        assert_eq!(
            bin.parse(&Message::Binary(vec![])),
            Err(ChannelError::Empty)
        );
        let b64 = Channels::for_protocol(Some("v4.base64.channel.k8s.io"));
        let msg = b64.message(STDERR, b"hi");
        assert_eq!(msg, Message::Text("2aGk=".into()));
        assert_eq!(b64.parse(&msg), Ok(Some((2, b"hi".to_vec()))));
        assert_eq!(
            b64.parse(&Message::Text("1!!".into())),
            Err(ChannelError::Base64)
        );
        assert_eq!(closed_channel(CLOSE_CHANNEL, &[STDIN]), Some(STDIN));
        assert_eq!(closed_channel(STDIN, &[STDIN]), None);
        assert_eq!(port_forward_channels(1), Some((2, 3)));
        assert_eq!(port_forward_channels(200), None);
        assert_eq!(port_prefix(8080), [0x90, 0x1f]);
    }
}
