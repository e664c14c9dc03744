//! SPDY/3.1 frames on the wire: the `Frame` value, an incremental decoder that turns bytes
//! into frames under explicit limits, and an encoder. Both own their direction's header
//! compression context, so a session has exactly one of each.
//!
//! Layout (all integers big-endian): a control frame starts with the control bit, the
//! 15-bit version (3) and the 16-bit type; a data frame with a clear bit and the 31-bit
//! stream id. Then 8 bits of flags and a 24-bit payload length.

use crate::headers::{self, Compressor, Decompressor, HeaderError, Headers};

pub const VERSION: u16 = 3;
/// Control and data frames: the sender's last frame on this stream.
pub const FLAG_FIN: u8 = 0x01;
/// SYN_STREAM: the receiver may not send on this stream.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// SETTINGS: forget persisted settings.
pub const FLAG_SETTINGS_CLEAR: u8 = 0x01;
/// The largest length the 24-bit field can carry.
pub const MAX_PAYLOAD: usize = (1 << 24) - 1;
/// Stream ids are 31 bits.
pub const MAX_STREAM_ID: u32 = 0x7fff_ffff;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

/// RST_STREAM status codes (draft section 2.6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RstStatus(pub u32);

impl RstStatus {
    pub const PROTOCOL_ERROR: Self = Self(1);
    pub const INVALID_STREAM: Self = Self(2);
    pub const REFUSED_STREAM: Self = Self(3);
    pub const UNSUPPORTED_VERSION: Self = Self(4);
    pub const CANCEL: Self = Self(5);
    pub const INTERNAL_ERROR: Self = Self(6);
    pub const FLOW_CONTROL_ERROR: Self = Self(7);
    pub const STREAM_IN_USE: Self = Self(8);
    pub const STREAM_ALREADY_CLOSED: Self = Self(9);
    pub const FRAME_TOO_LARGE: Self = Self(11);
}

impl std::fmt::Display for RstStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            1 => "PROTOCOL_ERROR",
            2 => "INVALID_STREAM",
            3 => "REFUSED_STREAM",
            4 => "UNSUPPORTED_VERSION",
            5 => "CANCEL",
            6 => "INTERNAL_ERROR",
            7 => "FLOW_CONTROL_ERROR",
            8 => "STREAM_IN_USE",
            9 => "STREAM_ALREADY_CLOSED",
            10 => "INVALID_CREDENTIALS",
            11 => "FRAME_TOO_LARGE",
            other => return write!(f, "status {other}"),
        };
        f.write_str(name)
    }
}

/// GOAWAY status codes (draft section 2.6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GoAwayStatus(pub u32);

impl GoAwayStatus {
    pub const OK: Self = Self(0);
    pub const PROTOCOL_ERROR: Self = Self(1);
    pub const INTERNAL_ERROR: Self = Self(2);
}

/// One SETTINGS entry: 8 bits of flags, a 24-bit id, a 32-bit value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    pub flags: u8,
    pub id: u32,
    pub value: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        associated_to: u32,
        /// 0 (highest) to 7.
        priority: u8,
        slot: u8,
        fin: bool,
        unidirectional: bool,
        headers: Headers,
    },
    SynReply {
        stream_id: u32,
        fin: bool,
        headers: Headers,
    },
    RstStream {
        stream_id: u32,
        status: RstStatus,
    },
    Settings {
        clear: bool,
        entries: Vec<Setting>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: GoAwayStatus,
    },
    Headers {
        stream_id: u32,
        fin: bool,
        headers: Headers,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        fin: bool,
        data: Vec<u8>,
    },
}

/// Bounds on what a decoder accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest control frame payload, in bytes.
    pub max_control_len: usize,
    /// Largest DATA payload; a bigger one is skipped and its stream reset.
    pub max_data_len: usize,
    /// Largest header block after decompression.
    pub max_header_block: usize,
    /// Most name/value pairs in one header block.
    pub max_header_pairs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_control_len: 64 << 10,
            max_data_len: 1 << 20,
            max_header_block: 64 << 10,
            max_header_pairs: 128,
        }
    }
}

/// Why bytes did not decode to a frame. Only [`FrameError::DataTooLarge`] leaves the
/// connection usable (the decoder skips that frame's payload); every other error is a
/// session error: the header compression context can no longer be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("SPDY version {version} is not supported (only 3)")]
    UnsupportedVersion { version: u16 },
    #[error("{frame} frame of {len} bytes is larger than the limit of {limit}")]
    ControlTooLarge {
        frame: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("DATA frame of {len} bytes on stream {stream_id} is larger than the limit of {limit}")]
    DataTooLarge {
        stream_id: u32,
        len: usize,
        limit: usize,
    },
    #[error("{frame} frame has a length of {len}, which its layout does not allow")]
    BadLength { frame: &'static str, len: usize },
    #[error("{frame} frame names stream 0")]
    ZeroStreamId { frame: &'static str },
    #[error("{frame} frame has an invalid field: {what}")]
    Invalid {
        frame: &'static str,
        what: &'static str,
    },
    #[error("header block of the {frame} frame on stream {stream_id}: {source}")]
    Header {
        frame: &'static str,
        stream_id: u32,
        source: HeaderError,
    },
    #[error("the connection already had a session error")]
    Poisoned,
}

impl FrameError {
    /// The stream to reset with FRAME_TOO_LARGE, for the one recoverable error.
    pub fn stream_error(&self) -> Option<(u32, RstStatus)> {
        match self {
            FrameError::DataTooLarge { stream_id, .. } => {
                Some((*stream_id, RstStatus::FRAME_TOO_LARGE))
            }
            _ => None,
        }
    }
}

/// Bytes in, frames out.
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    /// Payload bytes of a refused DATA frame still to be dropped.
    skip: usize,
    limits: Limits,
    decompressor: Decompressor,
    poisoned: bool,
}

impl FrameDecoder {
    pub fn new(limits: Limits) -> Self {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            skip: 0,
            decompressor: Decompressor::new(limits.max_header_block),
            limits,
            poisoned: false,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Appends received bytes; call [`FrameDecoder::next_frame`] until it yields `None`.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        if self.skip > 0 {
            let n = self.skip.min(bytes.len());
            self.skip -= n;
            bytes = &bytes[n..];
        }
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet part of a returned frame.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next complete frame, `None` if more bytes are needed. Control frames of a type
    /// SPDY/3.1 does not define are skipped, as the draft requires.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        loop {
            if self.poisoned {
                return Err(FrameError::Poisoned);
            }
            let result = self.decode_one();
            if self.start > 4096 && self.start * 2 > self.buf.len() {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            match result {
                Ok(Step::Frame(f)) => return Ok(Some(f)),
                Ok(Step::NeedMore) => return Ok(None),
                Ok(Step::Skipped) => continue,
                Err(e) => {
                    if e.stream_error().is_none() {
                        self.poisoned = true;
                    }
                    return Err(e);
                }
            }
        }
    }

    fn decode_one(&mut self) -> Result<Step, FrameError> {
        let avail = &self.buf[self.start..];
        let Some(head) = avail.first_chunk::<8>() else {
            return Ok(Step::NeedMore);
        };
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let flags = head[4];
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        if word & 0x8000_0000 == 0 {
            let stream_id = word & MAX_STREAM_ID;
            if stream_id == 0 {
                return Err(FrameError::ZeroStreamId { frame: "DATA" });
            }
            if len > self.limits.max_data_len {
                // Drop the payload as it arrives; the stream is reset by the session.
                let have = avail.len() - 8;
                let dropped = have.min(len);
                self.start += 8 + dropped;
                self.skip = len - dropped;
                return Err(FrameError::DataTooLarge {
                    stream_id,
                    len,
                    limit: self.limits.max_data_len,
                });
            }
            if avail.len() < 8 + len {
                return Ok(Step::NeedMore);
            }
            let data = avail[8..8 + len].to_vec();
            self.start += 8 + len;
            return Ok(Step::Frame(Frame::Data {
                stream_id,
                fin: flags & FLAG_FIN != 0,
                data,
            }));
        }
        let version = ((word >> 16) & 0x7fff) as u16;
        let kind = (word & 0xffff) as u16;
        let name = type_name(kind);
        if version != VERSION {
            return Err(FrameError::UnsupportedVersion { version });
        }
        if len > self.limits.max_control_len {
            return Err(FrameError::ControlTooLarge {
                frame: name,
                len,
                limit: self.limits.max_control_len,
            });
        }
        if avail.len() < 8 + len {
            return Ok(Step::NeedMore);
        }
        let body = &avail[8..8 + len];
        let fin = flags & FLAG_FIN != 0;
        let frame = match kind {
            TYPE_SYN_STREAM => {
                let (fixed, block) = split_fixed::<10>(body, name)?;
                let stream_id = stream_id_of(&fixed[0..4], name)?;
                let associated_to = read_u32(&fixed[4..8]) & MAX_STREAM_ID;
                let headers =
                    decode_headers(&mut self.decompressor, &self.limits, block, name, stream_id)?;
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority: fixed[8] >> 5,
                    slot: fixed[9],
                    fin,
                    unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                    headers,
                }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                let (fixed, block) = split_fixed::<4>(body, name)?;
                let stream_id = stream_id_of(&fixed, name)?;
                let headers =
                    decode_headers(&mut self.decompressor, &self.limits, block, name, stream_id)?;
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply {
                        stream_id,
                        fin,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        fin,
                        headers,
                    }
                }
            }
            TYPE_RST_STREAM => {
                let fixed = exact::<8>(body, name)?;
                let stream_id = stream_id_of(&fixed[0..4], name)?;
                let status = read_u32(&fixed[4..8]);
                if status == 0 {
                    return Err(FrameError::Invalid {
                        frame: name,
                        what: "status code 0",
                    });
                }
                Frame::RstStream {
                    stream_id,
                    status: RstStatus(status),
                }
            }
            TYPE_SETTINGS => {
                let (count, rest) = split_fixed::<4>(body, name)?;
                let count = u32::from_be_bytes(count) as usize;
                if rest.len() != count.saturating_mul(8) {
                    return Err(FrameError::BadLength { frame: name, len });
                }
                let entries = rest
                    .chunks_exact(8)
                    .map(|e| Setting {
                        flags: e[0],
                        id: read_u32(&e[0..4]) & 0x00ff_ffff,
                        value: read_u32(&e[4..8]),
                    })
                    .collect();
                Frame::Settings {
                    clear: flags & FLAG_SETTINGS_CLEAR != 0,
                    entries,
                }
            }
            TYPE_PING => {
                let fixed = exact::<4>(body, name)?;
                Frame::Ping {
                    id: u32::from_be_bytes(fixed),
                }
            }
            TYPE_GOAWAY => {
                let fixed = exact::<8>(body, name)?;
                Frame::GoAway {
                    last_good_stream_id: read_u32(&fixed[0..4]) & MAX_STREAM_ID,
                    status: GoAwayStatus(read_u32(&fixed[4..8])),
                }
            }
            TYPE_WINDOW_UPDATE => {
                let fixed = exact::<8>(body, name)?;
                let delta = read_u32(&fixed[4..8]) & MAX_STREAM_ID;
                if delta == 0 {
                    return Err(FrameError::Invalid {
                        frame: name,
                        what: "a delta of 0",
                    });
                }
                Frame::WindowUpdate {
                    stream_id: read_u32(&fixed[0..4]) & MAX_STREAM_ID,
                    delta,
                }
            }
            _ => {
                self.start += 8 + len;
                return Ok(Step::Skipped);
            }
        };
        self.start += 8 + len;
        Ok(Step::Frame(frame))
    }
}

fn decode_headers(
    decompressor: &mut Decompressor,
    limits: &Limits,
    block: &[u8],
    frame: &'static str,
    stream_id: u32,
) -> Result<Headers, FrameError> {
    let err = |source| FrameError::Header {
        frame,
        stream_id,
        source,
    };
    let plain = decompressor.decompress(block).map_err(err)?;
    headers::decode_block(&plain, limits.max_header_pairs).map_err(err)
}

enum Step {
    Frame(Frame),
    NeedMore,
    Skipped,
}

fn type_name(kind: u16) -> &'static str {
    match kind {
        TYPE_SYN_STREAM => "SYN_STREAM",
        TYPE_SYN_REPLY => "SYN_REPLY",
        TYPE_RST_STREAM => "RST_STREAM",
        TYPE_SETTINGS => "SETTINGS",
        TYPE_PING => "PING",
        TYPE_GOAWAY => "GOAWAY",
        TYPE_HEADERS => "HEADERS",
        TYPE_WINDOW_UPDATE => "WINDOW_UPDATE",
        _ => "unknown control",
    }
}

fn read_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn stream_id_of(b: &[u8], frame: &'static str) -> Result<u32, FrameError> {
    match read_u32(b) & MAX_STREAM_ID {
        0 => Err(FrameError::ZeroStreamId { frame }),
        id => Ok(id),
    }
}

fn split_fixed<'a, const N: usize>(
    body: &'a [u8],
    frame: &'static str,
) -> Result<([u8; N], &'a [u8]), FrameError> {
    match body.split_first_chunk::<N>() {
        Some((fixed, rest)) => Ok((*fixed, rest)),
        None => Err(FrameError::BadLength {
            frame,
            len: body.len(),
        }),
    }
}

fn exact<const N: usize>(body: &[u8], frame: &'static str) -> Result<[u8; N], FrameError> {
    <[u8; N]>::try_from(body).map_err(|_| FrameError::BadLength {
        frame,
        len: body.len(),
    })
}

/// A frame that cannot be put on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("stream id {0} is not between 1 and 2^31-1")]
    StreamId(u32),
    #[error("payload of {len} bytes exceeds SPDY's 24-bit length field")]
    TooLong { len: usize },
    #[error("priority {0} is not between 0 and 7")]
    Priority(u8),
}

/// Frames out, bytes in `out`.
pub struct FrameEncoder {
    compressor: Compressor,
}

impl Default for FrameEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameEncoder {
    pub fn new() -> Self {
        FrameEncoder {
            compressor: Compressor::new(),
        }
    }

    /// Appends `frame`'s bytes to `out`. On error nothing is appended, and the
    /// compression context is untouched unless the header block itself was too long.
    pub fn encode(&mut self, frame: &Frame, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mark = out.len();
        let result = self.encode_inner(frame, out);
        if result.is_err() {
            out.truncate(mark);
        }
        result
    }

    fn encode_inner(&mut self, frame: &Frame, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match frame {
            Frame::Data {
                stream_id,
                fin,
                data,
            } => encode_data(*stream_id, *fin, data, out)?,
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                slot,
                fin,
                unidirectional,
                headers,
            } => {
                check_id(*stream_id)?;
                if *associated_to > MAX_STREAM_ID {
                    return Err(EncodeError::StreamId(*associated_to));
                }
                if *priority > 7 {
                    return Err(EncodeError::Priority(*priority));
                }
                let flags = flag(*fin, FLAG_FIN) | flag(*unidirectional, FLAG_UNIDIRECTIONAL);
                let mut fixed = Vec::with_capacity(10);
                fixed.extend_from_slice(&stream_id.to_be_bytes());
                fixed.extend_from_slice(&associated_to.to_be_bytes());
                fixed.push(priority << 5);
                fixed.push(*slot);
                self.header_frame(TYPE_SYN_STREAM, flags, &fixed, headers, out)?;
            }
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            } => {
                check_id(*stream_id)?;
                let fixed = stream_id.to_be_bytes();
                self.header_frame(TYPE_SYN_REPLY, flag(*fin, FLAG_FIN), &fixed, headers, out)?;
            }
            Frame::Headers {
                stream_id,
                fin,
                headers,
            } => {
                check_id(*stream_id)?;
                let fixed = stream_id.to_be_bytes();
                self.header_frame(TYPE_HEADERS, flag(*fin, FLAG_FIN), &fixed, headers, out)?;
            }
            Frame::RstStream { stream_id, status } => {
                check_id(*stream_id)?;
                push_control(out, TYPE_RST_STREAM, 0, 8);
                out.extend_from_slice(&stream_id.to_be_bytes());
                out.extend_from_slice(&status.0.to_be_bytes());
            }
            Frame::Settings { clear, entries } => {
                let len = 4 + entries.len().saturating_mul(8);
                if len > MAX_PAYLOAD {
                    return Err(EncodeError::TooLong { len });
                }
                push_control(out, TYPE_SETTINGS, flag(*clear, FLAG_SETTINGS_CLEAR), len);
                out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
                for e in entries {
                    out.push(e.flags);
                    out.extend_from_slice(&e.id.to_be_bytes()[1..]);
                    out.extend_from_slice(&e.value.to_be_bytes());
                }
            }
            Frame::Ping { id } => {
                push_control(out, TYPE_PING, 0, 4);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                if *last_good_stream_id > MAX_STREAM_ID {
                    return Err(EncodeError::StreamId(*last_good_stream_id));
                }
                push_control(out, TYPE_GOAWAY, 0, 8);
                out.extend_from_slice(&last_good_stream_id.to_be_bytes());
                out.extend_from_slice(&status.0.to_be_bytes());
            }
            Frame::WindowUpdate { stream_id, delta } => {
                if *stream_id > MAX_STREAM_ID {
                    return Err(EncodeError::StreamId(*stream_id));
                }
                push_control(out, TYPE_WINDOW_UPDATE, 0, 8);
                out.extend_from_slice(&stream_id.to_be_bytes());
                out.extend_from_slice(&(delta & MAX_STREAM_ID).to_be_bytes());
            }
        }
        Ok(())
    }

    fn header_frame(
        &mut self,
        kind: u16,
        flags: u8,
        fixed: &[u8],
        headers: &Headers,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let mut block = Vec::new();
        self.compressor
            .compress(&headers::encode_block(headers), &mut block);
        let len = fixed.len() + block.len();
        if len > MAX_PAYLOAD {
            return Err(EncodeError::TooLong { len });
        }
        push_control(out, kind, flags, len);
        out.extend_from_slice(fixed);
        out.extend_from_slice(&block);
        Ok(())
    }
}

/// Appends a DATA frame without building a [`Frame`] (DATA needs no compression
/// context, so this is a free function); nothing is appended on error.
pub fn encode_data(
    stream_id: u32,
    fin: bool,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    check_id(stream_id)?;
    if data.len() > MAX_PAYLOAD {
        return Err(EncodeError::TooLong { len: data.len() });
    }
    out.reserve(8 + data.len());
    out.extend_from_slice(&stream_id.to_be_bytes());
    push_flags_len(out, flag(fin, FLAG_FIN), data.len());
    out.extend_from_slice(data);
    Ok(())
}

fn flag(set: bool, bit: u8) -> u8 {
    if set {
        bit
    } else {
        0
    }
}

fn check_id(id: u32) -> Result<(), EncodeError> {
    if id == 0 || id > MAX_STREAM_ID {
        return Err(EncodeError::StreamId(id));
    }
    Ok(())
}

fn push_control(out: &mut Vec<u8>, kind: u16, flags: u8, len: usize) {
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    push_flags_len(out, flags, len);
}

fn push_flags_len(out: &mut Vec<u8>, flags: u8, len: usize) {
    let len = len as u32;
    out.push(flags);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
}
