//! SPDY/3.1 frames: known answers from moby/spdystream's framer, hand-built bytes per the
//! draft, round trips of every frame type, and malformed, oversized and truncated input.

use rkt_spdy::frame::{Setting, FLAG_FIN, MAX_PAYLOAD};
use rkt_spdy::headers::HeaderError;
use rkt_spdy::{
    Frame, FrameDecoder, FrameEncoder, FrameError, GoAwayStatus, Headers, Limits, RstStatus,
};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn headers(pairs: &[(&str, &str)]) -> Headers {
    pairs.iter().copied().collect()
}

/// Frames as spdystream v0.2.0's framer writes them, one framer for all (so the header
/// blocks share its compression context): `rkt-spdy-probe frames`
/// (tests/go-probe/main.go), run once and pasted here.
const SPDYSTREAM: &[&str] = &[
    "80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a0a6800000000ffff",
    "800300010100001700000003000000004000c22e555c92929907000000ffff",
    "800300020000000e000000016260606000000000ffff",
    "800300080000001300000003824a3356804b52862400000000ffff",
    "000000030100000568656c6c6f",
    "80030003000000080000000500000005",
    "800300040000000c000000010100000400000064",
    "800300060000000400000007",
    "80030007000000080000000300000000",
    "80030009000000080000000100010000",
];

fn spdystream_frames() -> Vec<Frame> {
    vec![
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: headers(&[("streamtype", "error")]),
        },
        Frame::SynStream {
            stream_id: 3,
            associated_to: 0,
            priority: 2,
            slot: 0,
            fin: true,
            unidirectional: false,
            headers: headers(&[("streamtype", "stdin")]),
        },
        Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: Headers::new(),
        },
        Frame::Headers {
            stream_id: 3,
            fin: false,
            headers: headers(&[("x", "a\0b")]),
        },
        Frame::Data {
            stream_id: 3,
            fin: true,
            data: b"hello".to_vec(),
        },
        Frame::RstStream {
            stream_id: 5,
            status: RstStatus::CANCEL,
        },
        Frame::Settings {
            clear: false,
            entries: vec![Setting {
                flags: 1,
                id: 4,
                value: 100,
            }],
        },
        Frame::Ping { id: 7 },
        Frame::GoAway {
            last_good_stream_id: 3,
            status: GoAwayStatus::OK,
        },
        Frame::WindowUpdate {
            stream_id: 1,
            delta: 65536,
        },
    ]
}

#[test]
fn decodes_what_spdystream_writes() {
    let mut d = FrameDecoder::new(Limits::default());
    for (wire, want) in SPDYSTREAM.iter().zip(spdystream_frames()) {
        d.feed(&hex(wire));
        assert_eq!(d.next_frame().unwrap(), Some(want));
        assert_eq!(d.next_frame().unwrap(), None);
    }
    // The repeated name arrived NUL-joined and reads as two values.
    let mut d = FrameDecoder::new(Limits::default());
    for wire in &SPDYSTREAM[..4] {
        d.feed(&hex(wire));
    }
    let f: Vec<_> = std::iter::from_fn(|| d.next_frame().unwrap()).collect();
    let Frame::Headers { headers, .. } = &f[3] else {
        panic!("{f:?}")
    };
    assert_eq!(headers.get_all("x").collect::<Vec<_>>(), ["a", "b"]);
}

#[test]
fn non_header_frames_encode_byte_for_byte_like_spdystream() {
    let mut e = FrameEncoder::new();
    for (wire, frame) in SPDYSTREAM.iter().zip(spdystream_frames()).skip(4) {
        let mut out = Vec::new();
        e.encode(&frame, &mut out).unwrap();
        assert_eq!(out, hex(wire), "{frame:?}");
    }
}

#[test]
fn hand_built_frames_per_the_draft() {
    // A control frame: C=1, version 3, type 6 (PING), flags 0, length 4, id 0x01020304.
    let ping = [0x80, 0x03, 0x00, 0x06, 0x00, 0x00, 0x00, 0x04, 1, 2, 3, 4];
    // A data frame: C=0, stream 0x7fffffff, FIN, length 2.
    let data = [
        0x7f, 0xff, 0xff, 0xff, FLAG_FIN, 0x00, 0x00, 0x02, b'o', b'k',
    ];
    // SETTINGS with CLEAR and two entries.
    let settings = [
        0x80, 0x03, 0x00, 0x04, 0x01, 0x00, 0x00, 0x14, 0, 0, 0, 2, 0x00, 0x00, 0x00, 0x07, 0x00,
        0x01, 0x00, 0x00, 0x02, 0x00, 0x00, 0x04, 0x00, 0x00, 0x03, 0xe8,
    ];
    let mut d = FrameDecoder::new(Limits::default());
    d.feed(&ping);
    d.feed(&data);
    d.feed(&settings);
    assert_eq!(
        d.next_frame().unwrap(),
        Some(Frame::Ping { id: 0x0102_0304 })
    );
    assert_eq!(
        d.next_frame().unwrap(),
        Some(Frame::Data {
            stream_id: 0x7fff_ffff,
            fin: true,
            data: b"ok".to_vec()
        })
    );
    assert_eq!(
        d.next_frame().unwrap(),
        Some(Frame::Settings {
            clear: true,
            entries: vec![
                Setting {
                    flags: 0,
                    id: 7,
                    value: 65536
                },
                Setting {
                    flags: 2,
                    id: 4,
                    value: 1000
                }
            ]
        })
    );
    assert_eq!(d.buffered(), 0);
}

#[test]
fn every_frame_type_round_trips() {
    let mut frames = spdystream_frames();
    frames.extend([
        Frame::SynStream {
            stream_id: 0x7fff_ffff,
            associated_to: 2,
            priority: 7,
            slot: 9,
            fin: true,
            unidirectional: true,
            headers: headers(&[("streamtype", "data"), ("port", "8080"), ("requestid", "0")]),
        },
        Frame::SynReply {
            stream_id: 9,
            fin: true,
            headers: headers(&[("status", "200"), ("empty", "")]),
        },
        Frame::Data {
            stream_id: 11,
            fin: false,
            data: Vec::new(),
        },
        Frame::Data {
            stream_id: 11,
            fin: false,
            data: vec![0xab; 70_000],
        },
        Frame::Settings {
            clear: true,
            entries: Vec::new(),
        },
        Frame::GoAway {
            last_good_stream_id: 0,
            status: GoAwayStatus::INTERNAL_ERROR,
        },
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 0x7fff_ffff,
        },
        Frame::RstStream {
            stream_id: 1,
            status: RstStatus(12345),
        },
    ]);
    let mut e = FrameEncoder::new();
    let mut wire = Vec::new();
    for f in &frames {
        e.encode(f, &mut wire).unwrap();
    }
    // Fed in awkward pieces, so every frame is split at least once.
    let mut d = FrameDecoder::new(Limits::default());
    let mut got = Vec::new();
    for piece in wire.chunks(7) {
        d.feed(piece);
        while let Some(f) = d.next_frame().unwrap() {
            got.push(f);
        }
    }
    assert_eq!(got, frames);
}

#[test]
fn every_prefix_is_incomplete_not_an_error() {
    let mut wire = Vec::new();
    for w in SPDYSTREAM {
        wire.extend(hex(w));
    }
    let first_len = hex(SPDYSTREAM[0]).len();
    for cut in 0..first_len {
        let mut d = FrameDecoder::new(Limits::default());
        d.feed(&wire[..cut]);
        assert_eq!(d.next_frame(), Ok(None), "cut at {cut}");
    }
}

fn first_error(limits: Limits, wire: &[u8]) -> FrameError {
    let mut d = FrameDecoder::new(limits);
    d.feed(wire);
    loop {
        match d.next_frame() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("no error for {wire:02x?}"),
            Err(e) => return e,
        }
    }
}

#[test]
fn malformed_frames_are_session_errors() {
    let l = Limits::default();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("version 2", hex("800200060000000400000007")),
        ("PING of 5 bytes", hex("80030006000000050000000700")),
        ("GOAWAY of 4", hex("800300070000000400000003")),
        ("WINDOW_UPDATE of 4", hex("800300090000000400000001")),
        (
            "WINDOW_UPDATE of 0",
            hex("80030009000000080000000100000000"),
        ),
        (
            "RST_STREAM status 0",
            hex("80030003000000080000000500000000"),
        ),
        (
            "RST_STREAM stream 0",
            hex("80030003000000080000000000000005"),
        ),
        (
            "SETTINGS count too big",
            hex("800300040000000c000000020100000400000064"),
        ),
        ("SETTINGS short", hex("8003000400000002aaaa")),
        (
            "SYN_STREAM of 9 bytes",
            hex("800300010000000900000001000000000000"),
        ),
        ("SYN_REPLY of 3 bytes", hex("8003000200000003000001")),
        ("DATA on stream 0", hex("000000000000000161")),
        // Found by fuzz_smoke: too large and on stream 0, there is no stream to reset.
        ("oversized DATA on stream 0", hex("0000000000ffffff")),
        (
            "header block not zlib",
            hex("800300020000000b00000001deadbeefcafe00"),
        ),
    ];
    for (what, wire) in cases {
        let e = first_error(l, &wire);
        assert!(e.stream_error().is_none(), "{what}: {e}");
    }
    // SYN_STREAM on stream 0, with a valid header block.
    let mut e = FrameEncoder::new();
    let mut wire = Vec::new();
    e.encode(
        &Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: Headers::new(),
        },
        &mut wire,
    )
    .unwrap();
    wire[8..12].copy_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        first_error(l, &wire),
        FrameError::ZeroStreamId {
            frame: "SYN_STREAM"
        }
    );
}

#[test]
fn an_error_poisons_the_decoder() {
    let mut d = FrameDecoder::new(Limits::default());
    d.feed(&hex("800200060000000400000007"));
    d.feed(&hex(SPDYSTREAM[7]));
    assert!(d.next_frame().is_err());
    assert_eq!(d.next_frame(), Err(FrameError::Poisoned));
}

#[test]
fn unknown_control_frames_are_skipped() {
    let mut d = FrameDecoder::new(Limits::default());
    // Type 10 (CREDENTIAL, dropped in 3.1) and type 0xff with some payload.
    d.feed(&hex("8003000a00000003abcdef"));
    d.feed(&hex("800300ff00000000"));
    d.feed(&hex(SPDYSTREAM[7]));
    assert_eq!(d.next_frame().unwrap(), Some(Frame::Ping { id: 7 }));
}

#[test]
fn oversized_frames() {
    let limits = Limits {
        max_control_len: 100,
        max_data_len: 10,
        ..Limits::default()
    };
    // A control frame above the limit is refused before its payload arrives.
    assert!(matches!(
        first_error(limits, &hex("8003000100000065")),
        FrameError::ControlTooLarge { len: 101, .. }
    ));
    // A DATA frame above the limit is skipped (even arriving in pieces) and its stream
    // named; the frames after it still decode.
    let mut d = FrameDecoder::new(limits);
    d.feed(&hex("000000050000000b"));
    d.feed(&[0; 5]);
    let e = d.next_frame().unwrap_err();
    assert_eq!(e.stream_error(), Some((5, RstStatus::FRAME_TOO_LARGE)));
    d.feed(&[0; 6]);
    d.feed(&hex(SPDYSTREAM[7]));
    assert_eq!(d.next_frame().unwrap(), Some(Frame::Ping { id: 7 }));
    // The 24-bit maximum itself, refused by default limits without buffering it.
    let mut d = FrameDecoder::new(Limits::default());
    d.feed(&hex("00000001ffffffff"));
    assert!(matches!(
        d.next_frame(),
        Err(FrameError::DataTooLarge {
            len: MAX_PAYLOAD,
            ..
        })
    ));
}

#[test]
fn header_bomb_and_pair_limits() {
    let mut e = FrameEncoder::new();
    let bomb = "x".repeat(4 << 20);
    let mut wire = Vec::new();
    e.encode(
        &Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: headers(&[("a", &bomb)]),
        },
        &mut wire,
    )
    .unwrap();
    assert!(wire.len() < 64 << 10, "the bomb is small: {}", wire.len());
    assert_eq!(
        first_error(Limits::default(), &wire),
        FrameError::Header {
            frame: "SYN_REPLY",
            stream_id: 1,
            source: HeaderError::TooLarge { limit: 64 << 10 }
        }
    );
    let many: Vec<(String, String)> = (0..200).map(|i| (format!("h{i}"), String::new())).collect();
    let many: Headers = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let mut wire = Vec::new();
    FrameEncoder::new()
        .encode(
            &Frame::Headers {
                stream_id: 1,
                fin: false,
                headers: many,
            },
            &mut wire,
        )
        .unwrap();
    assert!(matches!(
        first_error(Limits::default(), &wire),
        FrameError::Header {
            source: HeaderError::TooManyPairs { count: 200, .. },
            ..
        }
    ));
}

#[test]
fn unencodable_frames_are_errors_and_write_nothing() {
    let mut e = FrameEncoder::new();
    let mut out = vec![1, 2, 3];
    for frame in [
        Frame::Data {
            stream_id: 0,
            fin: false,
            data: vec![],
        },
        Frame::Data {
            stream_id: 0x8000_0000,
            fin: false,
            data: vec![],
        },
        Frame::Data {
            stream_id: 1,
            fin: false,
            data: vec![0; MAX_PAYLOAD + 1],
        },
        Frame::RstStream {
            stream_id: 0,
            status: RstStatus::CANCEL,
        },
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 8,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: Headers::new(),
        },
    ] {
        assert!(e.encode(&frame, &mut out).is_err(), "{frame:?}");
        assert_eq!(out, [1, 2, 3]);
    }
}
