//! The server side of a SPDY/3.1 session as a state machine without I/O: bytes from the
//! client go into [`Session::receive`], what the application must decide comes out of
//! [`Session::poll_event`], and everything to send (replies, data, ping echoes, resets,
//! GOAWAY) accumulates for [`Session::take_output`], in the order it must be written.
//!
//! Streams are opened by the client only (odd ids, strictly increasing). Each opened stream
//! waits for the application's [`Session::accept`] (SYN_REPLY) or [`Session::refuse`]
//! (RST_STREAM). Either side half-closes with FIN; a stream is forgotten once both have,
//! or on a reset. Flow control is not enforced: WINDOW_UPDATE frames are accepted and
//! ignored, like moby/spdystream, the only peer Kubernetes has.

use std::collections::{BTreeMap, VecDeque};

use crate::frame::{
    EncodeError, Frame, FrameDecoder, FrameEncoder, FrameError, GoAwayStatus, Limits, RstStatus,
    MAX_STREAM_ID,
};
use crate::headers::Headers;

/// Session-wide limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub limits: Limits,
    /// Open streams at once; a SYN_STREAM beyond this is refused with REFUSED_STREAM.
    pub max_streams: usize,
    /// DATA written by [`Session::send_data`] is cut into frames of at most this size.
    pub max_send_frame: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::default(),
            max_streams: 256,
            max_send_frame: 32 << 10,
        }
    }
}

/// What the application learns from the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new stream: answer with [`Session::accept`] or [`Session::refuse`]. `fin` means
    /// the client will send nothing on it; `unidirectional` that it takes nothing either.
    StreamOpened {
        stream_id: u32,
        headers: Headers,
        fin: bool,
        unidirectional: bool,
    },
    Data {
        stream_id: u32,
        data: Vec<u8>,
    },
    /// The client half-closed the stream (no more data from it).
    RemoteFin {
        stream_id: u32,
    },
    /// Extra headers on a stream (HEADERS frame).
    Headers {
        stream_id: u32,
        headers: Headers,
    },
    /// The stream is gone: reset by the client, or by this session (`by_us`) because the
    /// client broke the protocol on it.
    StreamReset {
        stream_id: u32,
        status: RstStatus,
        by_us: bool,
    },
    /// The answer to a [`Session::ping`].
    Pong {
        id: u32,
    },
    /// The client will open no more streams.
    GoAway {
        last_good_stream_id: u32,
        status: GoAwayStatus,
    },
}

/// Why the session or a call on it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The client broke the protocol; a GOAWAY is queued and the session is over.
    #[error("SPDY protocol error from the client: {0}")]
    Protocol(#[from] FrameError),
    #[error("SPDY protocol error from the client: {0}")]
    Violation(&'static str),
    #[error("the session is closed")]
    Closed,
    #[error("stream {0} is not open")]
    UnknownStream(u32),
    #[error("stream {0} was already answered")]
    AlreadyAnswered(u32),
    #[error("stream {0} has not been accepted yet")]
    NotAccepted(u32),
    #[error("stream {0} is already closed for sending")]
    LocalClosed(u32),
    #[error("cannot encode the frame: {0}")]
    Encode(#[from] EncodeError),
}

#[derive(Debug)]
struct Stream {
    replied: bool,
    local_closed: bool,
    remote_closed: bool,
}

pub struct Session {
    config: Config,
    decoder: FrameDecoder,
    encoder: FrameEncoder,
    out: Vec<u8>,
    events: VecDeque<Event>,
    streams: BTreeMap<u32, Stream>,
    last_remote_id: u32,
    next_ping_id: u32,
    goaway_sent: bool,
    goaway_received: bool,
    failed: bool,
    pings_received: u64,
}

impl Default for Session {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl Session {
    pub fn new(config: Config) -> Self {
        Session {
            decoder: FrameDecoder::new(config.limits),
            encoder: FrameEncoder::new(),
            config,
            out: Vec::new(),
            events: VecDeque::new(),
            streams: BTreeMap::new(),
            last_remote_id: 0,
            next_ping_id: 2,
            goaway_sent: false,
            goaway_received: false,
            failed: false,
            pings_received: 0,
        }
    }

    /// Takes bytes read from the client. A protocol error ends the session: a GOAWAY with
    /// PROTOCOL_ERROR is queued, the error returned, and the caller should write the
    /// output and close the connection. Events decoded before the error stay queued.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        if self.failed {
            return Err(SessionError::Closed);
        }
        self.decoder.feed(bytes);
        loop {
            match self.decoder.next_frame() {
                Ok(Some(frame)) => {
                    if let Err(e) = self.handle(frame) {
                        return Err(self.fail(e));
                    }
                }
                Ok(None) => return Ok(()),
                Err(e) => match e.stream_error() {
                    Some((stream_id, status)) => self.reset_by_us(stream_id, status),
                    None => return Err(self.fail(SessionError::Protocol(e))),
                },
            }
        }
    }

    fn fail(&mut self, e: SessionError) -> SessionError {
        self.failed = true;
        if !self.goaway_sent {
            self.go_away(GoAwayStatus::PROTOCOL_ERROR);
        }
        e
    }

    fn handle(&mut self, frame: Frame) -> Result<(), SessionError> {
        match frame {
            Frame::SynStream {
                stream_id,
                fin,
                unidirectional,
                headers,
                ..
            } => {
                if stream_id % 2 == 0 {
                    return Err(SessionError::Violation(
                        "SYN_STREAM with an even stream id (the server's)",
                    ));
                }
                if stream_id <= self.last_remote_id {
                    return Err(SessionError::Violation(
                        "SYN_STREAM with a stream id not above the previous one",
                    ));
                }
                self.last_remote_id = stream_id;
                if self.goaway_sent {
                    // The draft: after GOAWAY, new streams are ignored.
                    return Ok(());
                }
                if self.streams.len() >= self.config.max_streams {
                    self.push(Frame::RstStream {
                        stream_id,
                        status: RstStatus::REFUSED_STREAM,
                    });
                    return Ok(());
                }
                self.streams.insert(
                    stream_id,
                    Stream {
                        replied: false,
                        local_closed: unidirectional,
                        remote_closed: fin,
                    },
                );
                self.events.push_back(Event::StreamOpened {
                    stream_id,
                    headers,
                    fin,
                    unidirectional,
                });
            }
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                let Some(stream) = self.streams.get_mut(&stream_id) else {
                    self.unknown_stream(stream_id);
                    return Ok(());
                };
                if stream.remote_closed {
                    self.reset_by_us(stream_id, RstStatus::STREAM_ALREADY_CLOSED);
                    return Ok(());
                }
                if !data.is_empty() {
                    self.events.push_back(Event::Data { stream_id, data });
                }
                if fin {
                    self.remote_fin(stream_id);
                }
            }
            Frame::Headers {
                stream_id,
                fin,
                headers,
            } => {
                let Some(stream) = self.streams.get(&stream_id) else {
                    self.unknown_stream(stream_id);
                    return Ok(());
                };
                if stream.remote_closed {
                    self.reset_by_us(stream_id, RstStatus::STREAM_ALREADY_CLOSED);
                    return Ok(());
                }
                self.events.push_back(Event::Headers { stream_id, headers });
                if fin {
                    self.remote_fin(stream_id);
                }
            }
            Frame::SynReply { stream_id, .. } => {
                // This server opens no streams, so there is nothing to reply to.
                if self.streams.contains_key(&stream_id) {
                    self.reset_by_us(stream_id, RstStatus::STREAM_IN_USE);
                } else {
                    self.unknown_stream(stream_id);
                }
            }
            Frame::RstStream { stream_id, status } => {
                if self.streams.remove(&stream_id).is_some() {
                    self.events.push_back(Event::StreamReset {
                        stream_id,
                        status,
                        by_us: false,
                    });
                }
            }
            Frame::Ping { id } => {
                if id % 2 == 1 {
                    self.pings_received += 1;
                    if !self.goaway_sent {
                        self.push(Frame::Ping { id });
                    }
                } else {
                    self.events.push_back(Event::Pong { id });
                }
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                if !self.goaway_received {
                    self.goaway_received = true;
                    self.events.push_back(Event::GoAway {
                        last_good_stream_id,
                        status,
                    });
                }
            }
            Frame::Settings { .. } | Frame::WindowUpdate { .. } => {}
        }
        Ok(())
    }

    /// DATA or HEADERS for a stream that is not open: a stream the client never opened
    /// is an INVALID_STREAM error; one that was open (and is now closed or reset) may
    /// still have frames in flight, which are dropped.
    fn unknown_stream(&mut self, stream_id: u32) {
        let was_opened = stream_id % 2 == 1 && stream_id <= self.last_remote_id;
        if !was_opened && !self.goaway_sent {
            self.push(Frame::RstStream {
                stream_id,
                status: RstStatus::INVALID_STREAM,
            });
        }
    }

    fn remote_fin(&mut self, stream_id: u32) {
        if let Some(stream) = self.streams.get_mut(&stream_id) {
            stream.remote_closed = true;
            self.events.push_back(Event::RemoteFin { stream_id });
            self.forget_if_done(stream_id);
        }
    }

    fn forget_if_done(&mut self, stream_id: u32) {
        if let Some(s) = self.streams.get(&stream_id) {
            if s.remote_closed && s.local_closed && s.replied {
                self.streams.remove(&stream_id);
            }
        }
    }

    fn reset_by_us(&mut self, stream_id: u32, status: RstStatus) {
        self.push(Frame::RstStream { stream_id, status });
        if self.streams.remove(&stream_id).is_some() {
            self.events.push_back(Event::StreamReset {
                stream_id,
                status,
                by_us: true,
            });
        }
    }

    fn push(&mut self, frame: Frame) {
        // Frames the session builds itself are always encodable (ids come from the wire,
        // checked to 31 bits; payloads are fixed-size), so an error here is a bug.
        if let Err(e) = self.encoder.encode(&frame, &mut self.out) {
            debug_assert!(false, "session built an unencodable frame {frame:?}: {e}");
        }
    }

    /// The next thing the application must know, in arrival order.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes to write to the client, in order; empties the queue.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Accepts a stream the client opened (SYN_REPLY). `fin` closes the server's side at
    /// once (a stream the server will never write to).
    pub fn accept(
        &mut self,
        stream_id: u32,
        headers: &Headers,
        fin: bool,
    ) -> Result<(), SessionError> {
        self.check_usable()?;
        let stream = self
            .streams
            .get_mut(&stream_id)
            .ok_or(SessionError::UnknownStream(stream_id))?;
        if stream.replied {
            return Err(SessionError::AlreadyAnswered(stream_id));
        }
        stream.replied = true;
        let fin = fin || stream.local_closed;
        stream.local_closed = fin;
        self.encoder.encode(
            &Frame::SynReply {
                stream_id,
                fin,
                headers: headers.clone(),
            },
            &mut self.out,
        )?;
        self.forget_if_done(stream_id);
        Ok(())
    }

    /// Refuses a stream the client opened, or abandons an accepted one (RST_STREAM).
    pub fn reset(&mut self, stream_id: u32, status: RstStatus) -> Result<(), SessionError> {
        self.check_usable()?;
        if self.streams.remove(&stream_id).is_none() {
            return Err(SessionError::UnknownStream(stream_id));
        }
        self.push(Frame::RstStream { stream_id, status });
        Ok(())
    }

    /// Refuses a newly opened stream with REFUSED_STREAM.
    pub fn refuse(&mut self, stream_id: u32) -> Result<(), SessionError> {
        self.reset(stream_id, RstStatus::REFUSED_STREAM)
    }

    /// Sends data on an accepted stream, cut into frames of at most `max_send_frame`
    /// bytes; `fin` half-closes the server's side after it.
    pub fn send_data(
        &mut self,
        stream_id: u32,
        data: &[u8],
        fin: bool,
    ) -> Result<(), SessionError> {
        self.check_usable()?;
        let stream = self
            .streams
            .get_mut(&stream_id)
            .ok_or(SessionError::UnknownStream(stream_id))?;
        if !stream.replied {
            return Err(SessionError::NotAccepted(stream_id));
        }
        if stream.local_closed {
            return Err(SessionError::LocalClosed(stream_id));
        }
        stream.local_closed = fin;
        let size = self
            .config
            .max_send_frame
            .clamp(1, crate::frame::MAX_PAYLOAD);
        let mut chunks = data.chunks(size).peekable();
        if chunks.peek().is_none() {
            crate::frame::encode_data(stream_id, fin, &[], &mut self.out)?;
        }
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            crate::frame::encode_data(stream_id, fin && last, chunk, &mut self.out)?;
        }
        self.forget_if_done(stream_id);
        Ok(())
    }

    /// Half-closes the server's side of a stream (an empty DATA frame with FIN).
    pub fn close(&mut self, stream_id: u32) -> Result<(), SessionError> {
        self.send_data(stream_id, &[], true)
    }

    /// Sends a PING; its [`Event::Pong`] carries the returned id.
    pub fn ping(&mut self) -> Result<u32, SessionError> {
        self.check_usable()?;
        let id = self.next_ping_id;
        self.next_ping_id = if id >= MAX_STREAM_ID - 1 { 2 } else { id + 2 };
        self.push(Frame::Ping { id });
        Ok(id)
    }

    /// Tells the client no more streams will be accepted; open streams may finish.
    pub fn go_away(&mut self, status: GoAwayStatus) {
        if self.goaway_sent {
            return;
        }
        self.goaway_sent = true;
        self.push(Frame::GoAway {
            last_good_stream_id: self.last_remote_id,
            status,
        });
    }

    fn check_usable(&self) -> Result<(), SessionError> {
        if self.failed {
            return Err(SessionError::Closed);
        }
        Ok(())
    }

    /// Whether the stream is known (opened and not yet closed both ways or reset).
    pub fn is_open(&self, stream_id: u32) -> bool {
        self.streams.contains_key(&stream_id)
    }

    /// Streams currently open.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether the client may send more on this stream.
    pub fn remote_open(&self, stream_id: u32) -> bool {
        self.streams
            .get(&stream_id)
            .is_some_and(|s| !s.remote_closed)
    }

    /// True once a protocol error ended the session.
    pub fn is_failed(&self) -> bool {
        self.failed
    }

    /// PINGs the client sent (each one echoed): a sign of a live client.
    pub fn pings_received(&self) -> u64 {
        self.pings_received
    }

    /// True once the client sent GOAWAY.
    pub fn peer_gone_away(&self) -> bool {
        self.goaway_received
    }
}
