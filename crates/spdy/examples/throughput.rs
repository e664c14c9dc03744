//! How fast a stream's data crosses a loopback socket through this crate: a server
//! thread on `blocking::Connection` writes `MIB` MiB on one accepted stream, a client
//! thread with its own frame codec reads it, both ways in turn. Prints MiB/s.
//!
//! `cargo run --release -p rkt-spdy --example throughput [MIB]`

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use rkt_spdy::blocking::Connection;
use rkt_spdy::{Config, Event, Frame, FrameDecoder, FrameEncoder, Headers, Limits};

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(256);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = stream.try_clone().unwrap();
        let conn = Connection::new(Config::default(), stream);
        let mut buf = vec![0; 64 << 10];
        let chunk = vec![0x5a; 32 << 10];
        let mut received = 0usize;
        while let Some(events) = conn.read_events(&mut reader, &mut buf).unwrap() {
            for e in events {
                match e {
                    Event::StreamOpened { stream_id: 1, .. } => {
                        conn.accept(1, &Headers::new(), false).unwrap();
                        for _ in 0..(mib << 20) / chunk.len() {
                            conn.send_data(1, &chunk, false).unwrap();
                        }
                        conn.close(1).unwrap();
                    }
                    Event::StreamOpened { stream_id, .. } => {
                        conn.accept(stream_id, &Headers::new(), true).unwrap();
                    }
                    Event::Data { data, .. } => received += data.len(),
                    Event::RemoteFin { stream_id: 3 } => {
                        conn.close(3).ok();
                        return received;
                    }
                    _ => {}
                }
            }
        }
        received
    });

    let mut stream = TcpStream::connect(addr).unwrap();
    let mut enc = FrameEncoder::new();
    let mut dec = FrameDecoder::new(Limits::default());
    let mut wire = Vec::new();
    let open = |id| Frame::SynStream {
        stream_id: id,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers: [("streamtype", "data")].into_iter().collect(),
    };
    enc.encode(&open(1), &mut wire).unwrap();
    stream.write_all(&wire).unwrap();
    let start = Instant::now();
    let mut got = 0usize;
    let mut buf = vec![0; 64 << 10];
    'read: loop {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0);
        dec.feed(&buf[..n]);
        while let Some(f) = dec.next_frame().unwrap() {
            if let Frame::Data { data, fin, .. } = f {
                got += data.len();
                if fin {
                    break 'read;
                }
            }
        }
    }
    let down = start.elapsed();
    assert_eq!(got, mib << 20);

    wire.clear();
    enc.encode(&open(3), &mut wire).unwrap();
    stream.write_all(&wire).unwrap();
    let start = Instant::now();
    let chunk = vec![0xa5; 32 << 10];
    for _ in 0..(mib << 20) / chunk.len() {
        wire.clear();
        enc.encode(
            &Frame::Data {
                stream_id: 3,
                fin: false,
                data: chunk.clone(),
            },
            &mut wire,
        )
        .unwrap();
        stream.write_all(&wire).unwrap();
    }
    wire.clear();
    enc.encode(
        &Frame::Data {
            stream_id: 3,
            fin: true,
            data: Vec::new(),
        },
        &mut wire,
    )
    .unwrap();
    stream.write_all(&wire).unwrap();
    let received = server.join().unwrap();
    let up = start.elapsed();
    assert_eq!(received, mib << 20);
    let rate = |d: std::time::Duration| mib as f64 / d.as_secs_f64();
    println!(
        "{mib} MiB server→client {:.0} MiB/s, client→server {:.0} MiB/s",
        rate(down),
        rate(up)
    );
}
