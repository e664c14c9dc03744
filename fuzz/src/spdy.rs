//! The bodies of the streaming-protocol fuzz targets (crate `rkt-spdy`): each takes
//! arbitrary bytes and panics only when a property fails. Kept out of `lib.rs` because
//! crates/rkt's stable smoke loop includes `lib.rs` and does not depend on rkt-spdy; the
//! cargo-fuzz binaries (`fuzz_targets/spdy_*.rs`, `websocket_frame.rs`) and rkt-spdy's
//! own stable loop (`crates/spdy/tests/fuzz_smoke.rs`) include this file by path.
//!
//! Properties beyond "does not panic":
//! - `spdy_frame`: every decoded frame encodes again and decodes to the same frame; the
//!   server session's output for any input is a valid frame sequence.
//! - `websocket_frame`: every decoded message, encoded again as a client would, decodes
//!   to the same message.
//! - `upgrade_head`: an accepted upgrade's response is a 101 naming the chosen protocol.

use rkt_spdy::frame::{FrameDecoder, FrameEncoder, Limits};
use rkt_spdy::session::{Config, Session};
use rkt_spdy::websocket::{self, Decoder, Message, Opcode, Role};

fn small_limits() -> Limits {
    Limits {
        max_control_len: 4096,
        max_data_len: 4096,
        max_header_block: 8192,
        max_header_pairs: 32,
    }
}

/// The first byte picks how the rest is cut into reads (1 to 256 bytes each).
fn chunks(data: &[u8]) -> (impl Iterator<Item = &[u8]>, &[u8]) {
    let (size, rest) = match data.split_first() {
        Some((&s, rest)) => (usize::from(s) + 1, rest),
        None => (1, data),
    };
    (rest.chunks(size), rest)
}

/// SPDY frames, through the decoder alone and through a server session.
pub fn spdy_frame(data: &[u8]) {
    let (pieces, whole) = chunks(data);
    let mut decoder = FrameDecoder::new(small_limits());
    let mut frames = Vec::new();
    'feed: for piece in pieces {
        decoder.feed(piece);
        loop {
            match decoder.next_frame() {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(e) if e.stream_error().is_some() => continue,
                Err(_) => break 'feed,
            }
        }
    }
    // One context per direction, as on a connection: encode them all, decode them all.
    let mut encoder = FrameEncoder::new();
    let mut wire = Vec::new();
    for frame in &frames {
        encoder
            .encode(frame, &mut wire)
            .unwrap_or_else(|e| panic!("decoded frame does not encode: {e}: {frame:?}"));
    }
    let mut again = FrameDecoder::new(Limits {
        max_header_block: usize::MAX / 2,
        ..small_limits()
    });
    again.feed(&wire);
    for frame in frames {
        assert_eq!(
            again.next_frame(),
            Ok(Some(frame)),
            "re-encoded frame differs"
        );
    }

    let mut session = Session::new(Config {
        limits: small_limits(),
        max_streams: 8,
        max_send_frame: 1024,
    });
    let _ = session.receive(whole);
    // Answer every opened stream, echo data, as a server would.
    while let Some(event) = session.poll_event() {
        match event {
            rkt_spdy::Event::StreamOpened { stream_id, .. } => {
                let _ = session.accept(stream_id, &rkt_spdy::Headers::new(), false);
            }
            rkt_spdy::Event::Data { stream_id, data } => {
                let _ = session.send_data(stream_id, &data, false);
            }
            rkt_spdy::Event::RemoteFin { stream_id } => {
                let _ = session.close(stream_id);
            }
            _ => {}
        }
    }
    let out = session.take_output();
    let mut client = FrameDecoder::new(Limits::default());
    client.feed(&out);
    loop {
        match client.next_frame() {
            Ok(Some(_)) => continue,
            Ok(None) => break,
            Err(e) => panic!("the session wrote an invalid frame: {e}"),
        }
    }
    assert_eq!(client.buffered(), 0, "the session wrote a partial frame");
}

/// WebSocket frames from a client, as a server decodes them.
pub fn websocket_frame(data: &[u8]) {
    let (pieces, _) = chunks(data);
    let mut decoder = Decoder::new(Role::Server, 4096);
    let mut messages = Vec::new();
    'feed: for piece in pieces {
        decoder.feed(piece);
        loop {
            match decoder.next_message() {
                Ok(Some(m)) => messages.push(m),
                Ok(None) => break,
                Err(e) => {
                    let _ = e.close_code();
                    break 'feed;
                }
            }
        }
    }
    for message in messages {
        let channels = websocket::Channels { base64: false };
        let _ = channels.parse(&message);
        let _ = websocket::Channels { base64: true }.parse(&message);
        let (opcode, payload) = match &message {
            Message::Text(t) => (Opcode::Text, t.as_bytes().to_vec()),
            Message::Binary(b) => (Opcode::Binary, b.clone()),
            Message::Ping(p) => (Opcode::Ping, p.clone()),
            Message::Pong(p) => (Opcode::Pong, p.clone()),
            Message::Close(c) => (Opcode::Close, websocket::close_payload(c.as_ref())),
        };
        let wire = websocket::encode_frame(opcode, true, &payload, Some([0x12, 0x34, 0x56, 0x78]));
        let mut again = Decoder::new(Role::Server, 4096);
        again.feed(&wire);
        assert_eq!(
            again.next_message(),
            Ok(Some(message.clone())),
            "re-encoded message differs"
        );
    }
}

/// HTTP upgrade request heads, for SPDY and WebSocket.
pub fn upgrade_head(data: &[u8]) {
    let Ok(Some((head, used))) = rkt_spdy::http::RequestHead::parse(data) else {
        return;
    };
    assert!(used <= data.len());
    let _ = head.query();
    if let Ok(protocol) = rkt_spdy::k8s::spdy_upgrade(&head, rkt_spdy::k8s::StreamProtocol::EXEC) {
        let resp = rkt_spdy::k8s::spdy_upgrade_response(protocol);
        assert!(resp.starts_with(b"HTTP/1.1 101 "));
    } else if let Err(e) = rkt_spdy::k8s::spdy_upgrade(&head, &[]) {
        let _ = e.response();
    }
    match websocket::upgrade(&head, websocket::EXEC_PROTOCOLS) {
        Ok(up) => {
            let resp = websocket::upgrade_response(&up);
            assert!(resp.starts_with(b"HTTP/1.1 101 "));
            if let Some(p) = up.protocol {
                assert!(websocket::EXEC_PROTOCOLS.contains(&p));
            }
        }
        Err(e) => {
            let _ = e.response();
        }
    }
    let mut resize = rkt_spdy::k8s::ResizeDecoder::new();
    let _ = resize.feed(&data[used..]);
}
