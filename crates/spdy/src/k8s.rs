//! What Kubernetes puts on top of SPDY (and WebSocket) for exec, attach and port-forward:
//! the upgrade handshake with `X-Stream-Protocol-Version` negotiation, streams named by
//! their `streamtype` header, the error stream's message (a `metav1.Status` in
//! `v4.channel.k8s.io`, plain text before it) and the resize stream's JSON.

use serde::{Deserialize, Serialize};

use crate::headers::Headers;
use crate::http::{self, RequestHead};

/// The `Upgrade` token of a SPDY connection.
pub const SPDY_UPGRADE: &str = "SPDY/3.1";
/// The header that carries the client's protocol offers and the server's choice.
pub const PROTOCOL_HEADER: &str = "X-Stream-Protocol-Version";
/// Sent with a 403 when no offered protocol is supported.
pub const ACCEPTED_PROTOCOLS_HEADER: &str = "X-Accepted-Stream-Protocol-Versions";

/// The streaming sub-protocols negotiated on an upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamProtocol {
    /// `channel.k8s.io`: stdin, stdout, stderr, error (plain text).
    V1,
    /// `v2.channel.k8s.io`: as v1; the error stream is opened with the others.
    V2,
    /// `v3.channel.k8s.io`: adds the resize stream.
    V3,
    /// `v4.channel.k8s.io`: the error stream carries a `metav1.Status` with the exit code.
    V4,
    /// `v5.channel.k8s.io` (WebSocket only): adds closing a channel (stdin EOF).
    V5,
    /// `portforward.k8s.io`: data and error streams per `requestid`.
    PortForward,
}

impl StreamProtocol {
    /// What a server offers for exec and attach over SPDY, most preferred first.
    pub const EXEC: &'static [StreamProtocol] = &[Self::V4, Self::V3, Self::V2, Self::V1];
    /// What a server offers for port-forward over SPDY.
    pub const PORT_FORWARD: &'static [StreamProtocol] = &[Self::PortForward];

    pub fn name(self) -> &'static str {
        match self {
            Self::V1 => "channel.k8s.io",
            Self::V2 => "v2.channel.k8s.io",
            Self::V3 => "v3.channel.k8s.io",
            Self::V4 => "v4.channel.k8s.io",
            Self::V5 => "v5.channel.k8s.io",
            Self::PortForward => "portforward.k8s.io",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::V1,
            Self::V2,
            Self::V3,
            Self::V4,
            Self::V5,
            Self::PortForward,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }

    /// Whether the protocol has a resize stream.
    pub fn has_resize(self) -> bool {
        matches!(self, Self::V3 | Self::V4 | Self::V5)
    }
}

/// The first protocol in the client's order that the server supports, as kubelet's
/// `httpstream.Handshake` chooses.
pub fn negotiate(offered: &[&str], supported: &[StreamProtocol]) -> Option<StreamProtocol> {
    offered
        .iter()
        .filter_map(|o| StreamProtocol::from_name(o))
        .find(|p| supported.contains(p))
}

/// Why an upgrade request is refused; [`UpgradeError::response`] is the HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeError {
    #[error(
        "not a SPDY/3.1 upgrade request (needs 'Connection: Upgrade' and 'Upgrade: SPDY/3.1')"
    )]
    NotSpdyUpgrade,
    #[error("unable to upgrade: {PROTOCOL_HEADER} is required")]
    NoProtocol,
    #[error("unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts {supported:?}")]
    NoCommonProtocol {
        offered: Vec<String>,
        supported: Vec<&'static str>,
    },
}

impl UpgradeError {
    /// The HTTP error response: 400, or 403 with the accepted versions listed.
    pub fn response(&self) -> Vec<u8> {
        match self {
            UpgradeError::NoCommonProtocol { supported, .. } => {
                let accepted: Vec<(&str, &str)> = supported
                    .iter()
                    .map(|p| (ACCEPTED_PROTOCOLS_HEADER, *p))
                    .collect();
                http::error_response(403, "Forbidden", &accepted, &self.to_string())
            }
            _ => http::error_response(400, "Bad Request", &[], &self.to_string()),
        }
    }
}

/// Checks a SPDY upgrade request and negotiates its protocol.
pub fn spdy_upgrade(
    head: &RequestHead,
    supported: &[StreamProtocol],
) -> Result<StreamProtocol, UpgradeError> {
    let upgrade = head.has_token("connection", "upgrade")
        && head
            .list("upgrade")
            .iter()
            .any(|u| u.eq_ignore_ascii_case(SPDY_UPGRADE));
    if !upgrade {
        return Err(UpgradeError::NotSpdyUpgrade);
    }
    let offered = head.list(PROTOCOL_HEADER);
    if offered.is_empty() {
        return Err(UpgradeError::NoProtocol);
    }
    negotiate(&offered, supported).ok_or_else(|| UpgradeError::NoCommonProtocol {
        offered: offered.iter().map(|s| s.to_string()).collect(),
        supported: supported.iter().map(|p| p.name()).collect(),
    })
}

/// The `101 Switching Protocols` answer to an accepted SPDY upgrade; SPDY frames follow.
pub fn spdy_upgrade_response(protocol: StreamProtocol) -> Vec<u8> {
    http::response_head(
        101,
        "Switching Protocols",
        &[
            ("Connection", "Upgrade"),
            ("Upgrade", SPDY_UPGRADE),
            (PROTOCOL_HEADER, protocol.name()),
        ],
    )
}

/// The `streamtype` header's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamType {
    Error,
    Stdin,
    Stdout,
    Stderr,
    Resize,
    /// Port-forward's data stream.
    Data,
}

impl StreamType {
    pub fn name(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Stdin => "stdin",
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Resize => "resize",
            Self::Data => "data",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamHeaderError {
    #[error("stream has no streamtype header")]
    NoStreamType,
    #[error("unknown streamtype {0:?}")]
    UnknownStreamType(String),
    #[error("streamtype {stream:?} does not belong to {protocol}")]
    WrongProtocol {
        stream: &'static str,
        protocol: &'static str,
    },
    #[error("port-forward stream has no port header")]
    NoPort,
    #[error("port-forward stream has an invalid port {0:?}")]
    BadPort(String),
}

/// The stream type an exec/attach stream announces; `resize` only where the protocol
/// has it, `data` never.
pub fn exec_stream_type(
    headers: &Headers,
    protocol: StreamProtocol,
) -> Result<StreamType, StreamHeaderError> {
    let t = stream_type(headers)?;
    let fits = match t {
        StreamType::Data => false,
        StreamType::Resize => protocol.has_resize(),
        _ => true,
    };
    if !fits {
        return Err(StreamHeaderError::WrongProtocol {
            stream: t.name(),
            protocol: protocol.name(),
        });
    }
    Ok(t)
}

fn stream_type(headers: &Headers) -> Result<StreamType, StreamHeaderError> {
    let name = headers
        .get("streamtype")
        .ok_or(StreamHeaderError::NoStreamType)?;
    [
        StreamType::Error,
        StreamType::Stdin,
        StreamType::Stdout,
        StreamType::Stderr,
        StreamType::Resize,
        StreamType::Data,
    ]
    .into_iter()
    .find(|t| t.name() == name)
    .ok_or_else(|| StreamHeaderError::UnknownStreamType(name.into()))
}

/// A port-forward stream: `streamtype` data or error, the pod `port`, and the `requestid`
/// pairing the two streams of one connection (absent from very old clients).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortForwardStream {
    pub kind: StreamType,
    pub port: u16,
    pub request_id: Option<String>,
}

pub fn port_forward_stream(headers: &Headers) -> Result<PortForwardStream, StreamHeaderError> {
    let kind = stream_type(headers)?;
    if !matches!(kind, StreamType::Data | StreamType::Error) {
        return Err(StreamHeaderError::WrongProtocol {
            stream: kind.name(),
            protocol: StreamProtocol::PortForward.name(),
        });
    }
    let port = headers.get("port").ok_or(StreamHeaderError::NoPort)?;
    let port = match port.parse::<u16>() {
        Ok(p) if p > 0 => p,
        _ => return Err(StreamHeaderError::BadPort(port.into())),
    };
    Ok(PortForwardStream {
        kind,
        port,
        request_id: headers.get("requestid").map(str::to_owned),
    })
}

/// How a command ended, as the error stream reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Exited with a non-zero code (0–255; a signal is reported as 128 + its number).
    ExitCode(u8),
    /// The runtime failed (no such container, exec refused, …).
    Error(String),
}

/// The bytes to write on the error stream before closing it. Before v4 success is
/// silence and failure is text; v4 (and v5) send a `metav1.Status` in JSON.
/// An exit code of 0 is reported as success.
pub fn error_stream_message(protocol: StreamProtocol, outcome: &Outcome) -> Vec<u8> {
    let outcome = match outcome {
        Outcome::ExitCode(0) => &Outcome::Success,
        other => other,
    };
    let text = match outcome {
        Outcome::Success => None,
        Outcome::ExitCode(code) => Some(format!(
            "command terminated with non-zero exit code: exit status {code}"
        )),
        Outcome::Error(msg) => Some(msg.clone()),
    };
    if !matches!(protocol, StreamProtocol::V4 | StreamProtocol::V5) {
        return text.map(String::into_bytes).unwrap_or_default();
    }
    let status = match outcome {
        Outcome::Success => serde_json::json!({"metadata": {}, "status": "Success"}),
        Outcome::ExitCode(code) => serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": text,
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        Outcome::Error(msg) => serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("Internal error occurred: {msg}"),
            "reason": "InternalError",
            "details": {"causes": [{"message": msg}]},
            "code": 500,
        }),
    };
    serde_json::to_vec(&status).expect("a JSON value serialises")
}

/// Reads an error stream's whole content back (what a client does); for tests and for
/// clients of our own.
pub fn parse_error_stream(protocol: StreamProtocol, bytes: &[u8]) -> Result<Outcome, String> {
    if !matches!(protocol, StreamProtocol::V4 | StreamProtocol::V5) {
        return Ok(if bytes.is_empty() {
            Outcome::Success
        } else {
            Outcome::Error(String::from_utf8_lossy(bytes).into_owned())
        });
    }
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("error stream is not JSON: {e}"))?;
    match v["status"].as_str() {
        Some("Success") => Ok(Outcome::Success),
        Some("Failure") if v["reason"] == "NonZeroExitCode" => {
            let causes = v["details"]["causes"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            causes
                .iter()
                .find(|c| c["reason"] == "ExitCode")
                .and_then(|c| c["message"].as_str()?.parse::<u8>().ok())
                .map(Outcome::ExitCode)
                .ok_or_else(|| "NonZeroExitCode without a valid ExitCode cause".to_string())
        }
        Some("Failure") => Ok(Outcome::Error(
            v["message"].as_str().unwrap_or("unknown error").into(),
        )),
        _ => Err(format!(
            "error stream status is neither Success nor Failure: {v}"
        )),
    }
}

/// One message of the resize stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    #[serde(rename = "Width")]
    pub width: u16,
    #[serde(rename = "Height")]
    pub height: u16,
}

impl TerminalSize {
    /// As a client writes it: JSON and a newline.
    pub fn to_message(self) -> Vec<u8> {
        let mut v = serde_json::to_vec(&self).expect("two integers serialise");
        v.push(b'\n');
        v
    }
}

/// The resize stream is a sequence of JSON objects with no framing of its own; this cuts
/// it into sizes whatever the DATA frame boundaries.
#[derive(Default)]
pub struct ResizeDecoder {
    buf: Vec<u8>,
}

/// The longest pending (incomplete) resize message accepted.
pub const MAX_RESIZE_MESSAGE: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResizeError {
    #[error("resize message is not {{\"Width\":…,\"Height\":…}}: {0}")]
    Json(String),
    #[error("resize message is longer than {MAX_RESIZE_MESSAGE} bytes")]
    TooLong,
}

impl ResizeDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes bytes from the resize stream; returns every size now complete, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<TerminalSize>, ResizeError> {
        self.buf.extend_from_slice(bytes);
        let mut sizes = Vec::new();
        let mut used = 0;
        let mut iter = serde_json::Deserializer::from_slice(&self.buf).into_iter::<TerminalSize>();
        loop {
            match iter.next() {
                Some(Ok(size)) => {
                    sizes.push(size);
                    used = iter.byte_offset();
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(e)) => return Err(ResizeError::Json(e.to_string())),
                None => {
                    used = self.buf.len();
                    break;
                }
            }
        }
        self.buf.drain(..used);
        if self.buf.len() > MAX_RESIZE_MESSAGE {
            return Err(ResizeError::TooLong);
        }
        Ok(sizes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> RequestHead {
        RequestHead::parse(s.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn upgrade_negotiates_in_client_order() {
        let h = head("POST /exec/x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: v3.channel.k8s.io\r\n\r\n");
        assert_eq!(
            spdy_upgrade(&h, StreamProtocol::EXEC),
            Ok(StreamProtocol::V4)
        );
        assert_eq!(
            spdy_upgrade(&h, &[StreamProtocol::V3, StreamProtocol::V4]),
            Ok(StreamProtocol::V4)
        );
        let resp = String::from_utf8(spdy_upgrade_response(StreamProtocol::V4)).unwrap();
        assert_eq!(
            resp,
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
        );
    }

    #[test]
    fn upgrade_refusals() {
        let plain = head("POST /exec/x HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(
            spdy_upgrade(&plain, StreamProtocol::EXEC),
            Err(UpgradeError::NotSpdyUpgrade)
        );
        let none = head("POST /x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n");
        let err = spdy_upgrade(&none, StreamProtocol::EXEC).unwrap_err();
        assert_eq!(err, UpgradeError::NoProtocol);
        assert!(String::from_utf8(err.response())
            .unwrap()
            .starts_with("HTTP/1.1 400 "));
        let other = head(
            "POST /x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
X-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n",
        );
        let err = spdy_upgrade(&other, StreamProtocol::EXEC).unwrap_err();
        let resp = String::from_utf8(err.response()).unwrap();
        assert!(resp.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{resp}");
        assert!(resp.contains("X-Accepted-Stream-Protocol-Versions: v4.channel.k8s.io\r\n"));
        assert!(
            resp.contains("client supports [\"portforward.k8s.io\"]"),
            "{resp}"
        );
    }

    #[test]
    fn stream_types() {
        let h = |pairs: &[(&str, &str)]| pairs.iter().copied().collect::<Headers>();
        assert_eq!(
            exec_stream_type(&h(&[("streamtype", "stdin")]), StreamProtocol::V4),
            Ok(StreamType::Stdin)
        );
        assert!(exec_stream_type(&h(&[("streamtype", "resize")]), StreamProtocol::V2).is_err());
        assert_eq!(
            exec_stream_type(&h(&[]), StreamProtocol::V4),
            Err(StreamHeaderError::NoStreamType)
        );
        assert!(exec_stream_type(&h(&[("streamtype", "bogus")]), StreamProtocol::V4).is_err());
        assert_eq!(
            port_forward_stream(&h(&[
                ("streamtype", "data"),
                ("port", "80"),
                ("requestid", "0")
            ])),
            Ok(PortForwardStream {
                kind: StreamType::Data,
                port: 80,
                request_id: Some("0".into())
            })
        );
        for bad in ["0", "65536", "-1", "http"] {
            assert_eq!(
                port_forward_stream(&h(&[("streamtype", "error"), ("port", bad)])),
                Err(StreamHeaderError::BadPort(bad.into()))
            );
        }
        assert!(port_forward_stream(&h(&[("streamtype", "stdin"), ("port", "1")])).is_err());
    }

    #[test]
    fn error_stream_known_answers() {
        assert_eq!(
            error_stream_message(StreamProtocol::V4, &Outcome::Success),
            br#"{"metadata":{},"status":"Success"}"#
        );
        let failed = error_stream_message(StreamProtocol::V4, &Outcome::ExitCode(3));
        assert_eq!(
            String::from_utf8(failed.clone()).unwrap(),
            r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
        );
        assert_eq!(
            parse_error_stream(StreamProtocol::V4, &failed),
            Ok(Outcome::ExitCode(3))
        );
        assert!(error_stream_message(StreamProtocol::V3, &Outcome::Success).is_empty());
        assert_eq!(
            error_stream_message(StreamProtocol::V4, &Outcome::ExitCode(0)),
            error_stream_message(StreamProtocol::V4, &Outcome::Success)
        );
        let v2 = error_stream_message(
            StreamProtocol::V2,
            &Outcome::Error("no such container".into()),
        );
        assert_eq!(v2, b"no such container");
        let internal = error_stream_message(StreamProtocol::V4, &Outcome::Error("boom".into()));
        assert_eq!(
            parse_error_stream(StreamProtocol::V4, &internal),
            Ok(Outcome::Error("Internal error occurred: boom".into()))
        );
        assert!(parse_error_stream(StreamProtocol::V4, b"{}").is_err());
    }

    #[test]
    fn resize_messages_across_frames() {
        let mut d = ResizeDecoder::new();
        let msg = TerminalSize {
            width: 80,
            height: 24,
        }
        .to_message();
        assert_eq!(msg, b"{\"Width\":80,\"Height\":24}\n");
        let mut stream = msg.clone();
        stream.extend(
            TerminalSize {
                width: 100,
                height: 50,
            }
            .to_message(),
        );
        let (a, b) = stream.split_at(30);
        assert_eq!(d.feed(&a[..10]).unwrap(), []);
        assert_eq!(
            d.feed(&a[10..]).unwrap(),
            [TerminalSize {
                width: 80,
                height: 24
            }]
        );
        assert_eq!(
            d.feed(b).unwrap(),
            [TerminalSize {
                width: 100,
                height: 50
            }]
        );
        assert!(ResizeDecoder::new().feed(b"{\"Width\":-1}").is_err());
        assert!(ResizeDecoder::new()
            .feed(b"{\"Width\":\"wide\",\"Height\":1}")
            .is_err());
        let mut long = ResizeDecoder::new();
        assert_eq!(
            long.feed(format!("{{\"Width\":{}", " ".repeat(5000)).as_bytes()),
            Err(ResizeError::TooLong)
        );
    }
}
