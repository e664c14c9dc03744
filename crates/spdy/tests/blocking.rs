//! `blocking::Connection` over real sockets: a reader thread and writer threads share a
//! session; a client that breaks the protocol gets a GOAWAY and loses only its own
//! connection.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rkt_spdy::blocking::{ConnError, Connection};
use rkt_spdy::{
    Config, Event, Frame, FrameDecoder, FrameEncoder, GoAwayStatus, Headers, Limits, SessionError,
};

/// Serves one connection: every stream is accepted and gets 8 writer threads' worth of
/// data, each 100 frames. Returns how the session ended.
fn serve_one(listener: &TcpListener) -> Result<(), ConnError> {
    let (stream, _) = listener.accept().unwrap();
    stream.set_nodelay(true).unwrap();
    let mut reader = stream.try_clone().unwrap();
    let conn = Arc::new(Connection::new(Config::default(), stream));
    let mut buf = vec![0; 16 << 10];
    let mut writers = Vec::new();
    while let Some(events) = conn.read_events(&mut reader, &mut buf)? {
        for e in events {
            if let Event::StreamOpened { stream_id, .. } = e {
                conn.accept(stream_id, &Headers::new(), false)?;
                for t in 0..8u8 {
                    let conn = conn.clone();
                    writers.push(std::thread::spawn(move || {
                        for _ in 0..100 {
                            conn.send_data(stream_id, &[t; 100], false).unwrap();
                        }
                    }));
                }
            }
            if let Event::RemoteFin { stream_id } = e {
                for w in writers.drain(..) {
                    w.join().unwrap();
                }
                conn.close(stream_id)?;
                conn.go_away(GoAwayStatus::OK)?;
            }
        }
    }
    Ok(())
}

fn read_frames(stream: &mut TcpStream, dec: &mut FrameDecoder) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut buf = [0; 16 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return frames,
            Ok(n) => dec.feed(&buf[..n]),
        }
        while let Some(f) = dec.next_frame().unwrap() {
            let done = matches!(f, Frame::GoAway { .. });
            frames.push(f);
            if done {
                return frames;
            }
        }
    }
}

#[test]
fn writers_on_many_threads_keep_the_stream_in_order() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || serve_one(&listener));
    let mut client = TcpStream::connect(addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut enc = FrameEncoder::new();
    let mut wire = Vec::new();
    for frame in [
        Frame::SynStream {
            stream_id: 1,
            associated_to: 0,
            priority: 0,
            slot: 0,
            fin: false,
            unidirectional: false,
            headers: [("streamtype", "stdout")].into_iter().collect(),
        },
        Frame::Ping { id: 1 },
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: vec![],
        },
    ] {
        enc.encode(&frame, &mut wire).unwrap();
    }
    client.write_all(&wire).unwrap();
    let mut dec = FrameDecoder::new(Limits::default());
    let frames = read_frames(&mut client, &mut dec);
    // The ping is echoed while the input is decoded, before the application answers.
    assert_eq!(frames[0], Frame::Ping { id: 1 });
    assert!(matches!(frames[1], Frame::SynReply { stream_id: 1, .. }));
    let data: usize = frames
        .iter()
        .map(|f| match f {
            Frame::Data { data, .. } => data.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(
        data,
        8 * 100 * 100,
        "every frame arrived whole and decodable"
    );
    assert_eq!(
        frames[frames.len() - 2],
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: vec![]
        }
    );
    drop(client);
    server.join().unwrap().unwrap();
}

#[test]
fn a_broken_client_gets_goaway_and_the_next_one_is_served() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let first = serve_one(&listener);
        let second = serve_one(&listener);
        (first, second)
    });
    // A control frame of SPDY version 2: a session error.
    let mut bad = TcpStream::connect(addr).unwrap();
    bad.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    bad.write_all(&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1])
        .unwrap();
    let mut dec = FrameDecoder::new(Limits::default());
    assert_eq!(
        read_frames(&mut bad, &mut dec),
        [Frame::GoAway {
            last_good_stream_id: 0,
            status: GoAwayStatus::PROTOCOL_ERROR
        }]
    );
    drop(bad);
    // The next client is served normally.
    let mut good = TcpStream::connect(addr).unwrap();
    good.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut wire = Vec::new();
    FrameEncoder::new()
        .encode(&Frame::Ping { id: 3 }, &mut wire)
        .unwrap();
    good.write_all(&wire).unwrap();
    let mut buf = [0; 12];
    good.read_exact(&mut buf).unwrap();
    assert_eq!(buf, [0x80, 0x03, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 3]);
    drop(good);
    let (first, second) = server.join().unwrap();
    assert!(
        matches!(first, Err(ConnError::Session(SessionError::Protocol(_)))),
        "{first:?}"
    );
    second.unwrap();
}
