//! The streaming fuzz targets on stable Rust: the bodies in `fuzz/src/spdy.rs` (the same
//! functions the cargo-fuzz binaries call) fed with seeded mutations of valid input, so
//! every test run fuzzes a little. `RKT_FUZZ_SEED` and `RKT_FUZZ_ITERATIONS` reproduce
//! or extend a run.

#[path = "../../../fuzz/src/spdy.rs"]
mod bodies;

use rkt_spdy::frame::{Frame, FrameEncoder, GoAwayStatus, RstStatus};
use rkt_spdy::websocket::{encode_frame, Opcode};
use rkt_spdy::Headers;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn iterations() -> usize {
    std::env::var("RKT_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn seed() -> u64 {
    std::env::var("RKT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_5bd7)
        | 1
}

fn spdy_seeds() -> Vec<Vec<u8>> {
    let h = |pairs: &[(&str, &str)]| pairs.iter().copied().collect::<Headers>();
    let mut enc = FrameEncoder::new();
    let mut session = Vec::new();
    for frame in [
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: h(&[("streamtype", "error")]),
        },
        Frame::SynStream {
            stream_id: 3,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: h(&[("streamtype", "stdin")]),
        },
        Frame::Data {
            stream_id: 3,
            fin: false,
            data: b"echo hi\n".to_vec(),
        },
        Frame::Ping { id: 1 },
        Frame::Headers {
            stream_id: 3,
            fin: false,
            headers: h(&[("x", "1")]),
        },
        Frame::Data {
            stream_id: 3,
            fin: true,
            data: vec![],
        },
        Frame::RstStream {
            stream_id: 1,
            status: RstStatus::CANCEL,
        },
        Frame::Settings {
            clear: false,
            entries: vec![],
        },
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 1,
        },
        Frame::GoAway {
            last_good_stream_id: 3,
            status: GoAwayStatus::OK,
        },
    ] {
        enc.encode(&frame, &mut session).unwrap();
    }
    // The first byte is the read size the body cuts the rest into.
    vec![
        [&[7u8][..], &session].concat(),
        [&[255u8][..], &session].concat(),
        [&[0u8][..], &session[..40]].concat(),
    ]
}

fn ws_seeds() -> Vec<Vec<u8>> {
    let m = Some([1, 2, 3, 4]);
    let mut all = vec![3u8];
    all.extend(encode_frame(Opcode::Binary, true, b"\x00stdin", m));
    all.extend(encode_frame(Opcode::Text, false, b"0aGk", m));
    all.extend(encode_frame(Opcode::Ping, true, b"p", m));
    all.extend(encode_frame(Opcode::Continuation, true, b"=", m));
    all.extend(encode_frame(Opcode::Binary, true, &[0; 300], m));
    all.extend(encode_frame(Opcode::Close, true, b"\x03\xe8bye", m));
    vec![all]
}

fn head_seeds() -> Vec<Vec<u8>> {
    vec![
        b"POST /exec/t?command=sh&stdin=1 HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: channel.k8s.io\r\n\r\n\
{\"Width\":80,\"Height\":24}\n"
            .to_vec(),
        b"GET /portforward/t?port=80 HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Protocol: v4.base64.channel.k8s.io, v5.channel.k8s.io\r\n\r\n"
            .to_vec(),
    ]
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(8) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] = rng.next() as u8;
            }
            1 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            2 => v.truncate(at),
            3 => {
                let n = rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            4 if !v.is_empty() => {
                let end = (at + rng.below(32)).min(v.len());
                let start = at.min(end);
                v.drain(start..end);
            }
            _ => {
                // Interesting lengths and ids.
                let word: [u8; 4] = [
                    [0, 0, 0, 0],
                    [0x7f, 0xff, 0xff, 0xff],
                    [0, 0xff, 0xff, 0xff],
                    [0x80, 0x03, 0, 0x01],
                ][rng.below(4)];
                let i = at.min(v.len());
                v.splice(i..i, word);
            }
        }
    }
    v
}

fn smoke(name: &str, seeds: Vec<Vec<u8>>, body: fn(&[u8])) {
    let mut rng = Rng(seed() ^ name.len() as u64);
    for seed in &seeds {
        body(seed);
    }
    for i in 0..iterations() {
        let input = mutate(&mut rng, &seeds);
        let result = std::panic::catch_unwind(|| body(&input));
        if result.is_err() {
            panic!(
                "{name}: input {i} (RKT_FUZZ_SEED={}) failed: {input:02x?}",
                seed()
            );
        }
    }
}

#[test]
fn fuzz_smoke_spdy_frame() {
    smoke("spdy_frame", spdy_seeds(), bodies::spdy_frame);
}

#[test]
fn fuzz_smoke_websocket_frame() {
    smoke("websocket_frame", ws_seeds(), bodies::websocket_frame);
}

#[test]
fn fuzz_smoke_upgrade_head() {
    smoke("upgrade_head", head_seeds(), bodies::upgrade_head);
}

/// The seeds get past the parsers, so the mutations start from deep inside them.
#[test]
fn seeds_are_accepted() {
    for seed in spdy_seeds().iter().take(2) {
        let mut d = rkt_spdy::FrameDecoder::new(rkt_spdy::Limits::default());
        d.feed(&seed[1..]);
        let n = std::iter::from_fn(|| d.next_frame().unwrap()).count();
        assert_eq!(n, 10);
    }
    let mut d = rkt_spdy::websocket::Decoder::new(rkt_spdy::websocket::Role::Server, 4096);
    d.feed(&ws_seeds()[0][1..]);
    let n = std::iter::from_fn(|| d.next_message().unwrap()).count();
    assert_eq!(n, 5);
    for head in head_seeds() {
        assert!(rkt_spdy::http::RequestHead::parse(&head).unwrap().is_some());
    }
}
