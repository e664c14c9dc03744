//! The server session against a scripted client: stream life (SYN_STREAM, SYN_REPLY,
//! data, FIN both ways), PING, GOAWAY, and every protocol error the client can make.

use rkt_spdy::frame::Limits;
use rkt_spdy::{
    Config, Event, Frame, FrameDecoder, FrameEncoder, GoAwayStatus, Headers, RstStatus, Session,
    SessionError,
};

/// The client's side: its own compression contexts, as spdystream has.
struct Client {
    enc: FrameEncoder,
    dec: FrameDecoder,
}

impl Client {
    fn new() -> Self {
        Client {
            enc: FrameEncoder::new(),
            dec: FrameDecoder::new(Limits::default()),
        }
    }

    fn send(&mut self, s: &mut Session, frame: Frame) -> Result<(), SessionError> {
        let mut wire = Vec::new();
        self.enc.encode(&frame, &mut wire).unwrap();
        s.receive(&wire)
    }

    fn open(&mut self, s: &mut Session, stream_id: u32, kind: &str, fin: bool) {
        self.send(
            s,
            Frame::SynStream {
                stream_id,
                associated_to: 0,
                priority: 0,
                slot: 0,
                fin,
                unidirectional: false,
                headers: [("streamtype", kind)].into_iter().collect(),
            },
        )
        .unwrap();
    }

    fn data(&mut self, s: &mut Session, stream_id: u32, data: &[u8], fin: bool) {
        self.send(
            s,
            Frame::Data {
                stream_id,
                fin,
                data: data.to_vec(),
            },
        )
        .unwrap();
    }

    /// Everything the server wrote since last asked.
    fn read(&mut self, s: &mut Session) -> Vec<Frame> {
        self.dec.feed(&s.take_output());
        std::iter::from_fn(|| self.dec.next_frame().unwrap()).collect()
    }
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

#[test]
fn a_stream_from_open_to_closed_both_ways() {
    let mut s = Session::default();
    let mut c = Client::new();
    c.open(&mut s, 1, "stdin", false);
    let ev = events(&mut s);
    let [Event::StreamOpened {
        stream_id: 1,
        headers,
        fin: false,
        unidirectional: false,
    }] = &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(headers.get("streamtype"), Some("stdin"));
    assert_eq!(
        s.send_data(1, b"early", false),
        Err(SessionError::NotAccepted(1))
    );
    s.accept(1, &Headers::new(), false).unwrap();
    assert_eq!(
        s.accept(1, &Headers::new(), false),
        Err(SessionError::AlreadyAnswered(1))
    );
    assert_eq!(
        c.read(&mut s),
        [Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: Headers::new()
        }]
    );
    c.data(&mut s, 1, b"hello", false);
    c.data(&mut s, 1, b"", true);
    assert_eq!(
        events(&mut s),
        [
            Event::Data {
                stream_id: 1,
                data: b"hello".to_vec()
            },
            Event::RemoteFin { stream_id: 1 }
        ]
    );
    assert!(s.is_open(1) && !s.remote_open(1));
    s.send_data(1, b"bye", true).unwrap();
    assert!(!s.is_open(1), "closed both ways, the stream is forgotten");
    assert_eq!(
        c.read(&mut s),
        [Frame::Data {
            stream_id: 1,
            fin: true,
            data: b"bye".to_vec()
        }]
    );
    assert_eq!(s.close(1), Err(SessionError::UnknownStream(1)));
    // Late data on a stream that was open is dropped without a reset.
    c.data(&mut s, 1, b"late", false);
    assert!(c.read(&mut s).is_empty() && events(&mut s).is_empty());
}

#[test]
fn server_half_close_first_and_fin_on_syn() {
    let mut s = Session::default();
    let mut c = Client::new();
    // The client sends nothing on an error stream: SYN_STREAM with FIN.
    c.open(&mut s, 1, "error", true);
    assert!(matches!(
        events(&mut s)[..],
        [Event::StreamOpened { fin: true, .. }]
    ));
    s.accept(1, &Headers::new(), false).unwrap();
    s.send_data(1, b"status", false).unwrap();
    s.close(1).unwrap();
    assert_eq!(
        s.send_data(1, b"x", false),
        Err(SessionError::UnknownStream(1))
    );
    let frames = c.read(&mut s);
    assert_eq!(frames.len(), 3);
    assert_eq!(
        frames[2],
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: vec![]
        }
    );
    // Server closes first; the client's FIN then forgets the stream.
    c.open(&mut s, 3, "stdout", false);
    s.accept(3, &Headers::new(), true).unwrap();
    assert_eq!(
        s.send_data(3, b"x", false),
        Err(SessionError::LocalClosed(3))
    );
    assert!(s.is_open(3));
    c.data(&mut s, 3, b"", true);
    assert!(!s.is_open(3));
}

#[test]
fn large_writes_are_cut_into_frames() {
    let mut s = Session::new(Config {
        max_send_frame: 1000,
        ..Config::default()
    });
    let mut c = Client::new();
    c.open(&mut s, 1, "stdout", false);
    s.accept(1, &Headers::new(), false).unwrap();
    c.read(&mut s);
    s.send_data(1, &[7; 2500], true).unwrap();
    let frames = c.read(&mut s);
    let sizes: Vec<_> = frames
        .iter()
        .map(|f| match f {
            Frame::Data { data, fin, .. } => (data.len(), *fin),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(sizes, [(1000, false), (1000, false), (500, true)]);
}

#[test]
fn pings() {
    let mut s = Session::default();
    let mut c = Client::new();
    c.send(&mut s, Frame::Ping { id: 1 }).unwrap();
    assert_eq!(c.read(&mut s), [Frame::Ping { id: 1 }]);
    let id = s.ping().unwrap();
    assert_eq!(id % 2, 0);
    assert_eq!(c.read(&mut s), [Frame::Ping { id }]);
    c.send(&mut s, Frame::Ping { id }).unwrap();
    assert_eq!(events(&mut s), [Event::Pong { id }]);
    assert!(c.read(&mut s).is_empty(), "a pong is not echoed");
}

#[test]
fn goaway_both_ways() {
    let mut s = Session::default();
    let mut c = Client::new();
    c.open(&mut s, 1, "stdout", false);
    s.accept(1, &Headers::new(), false).unwrap();
    s.go_away(GoAwayStatus::OK);
    s.go_away(GoAwayStatus::OK);
    let frames = c.read(&mut s);
    assert_eq!(
        frames[1..],
        [Frame::GoAway {
            last_good_stream_id: 1,
            status: GoAwayStatus::OK
        }]
    );
    // New streams after our GOAWAY are ignored; the open one still works.
    c.open(&mut s, 3, "stdin", false);
    assert!(!s.is_open(3));
    s.send_data(1, b"still", true).unwrap();
    c.send(
        &mut s,
        Frame::GoAway {
            last_good_stream_id: 0,
            status: GoAwayStatus::OK,
        },
    )
    .unwrap();
    assert!(s.peer_gone_away());
    assert!(events(&mut s)
        .iter()
        .any(|e| matches!(e, Event::GoAway { .. })));
}

fn expect_goaway(c: &mut Client, s: &mut Session) {
    let frames = c.read(s);
    assert_eq!(
        frames.last(),
        Some(&Frame::GoAway {
            last_good_stream_id: frames
                .iter()
                .find_map(|f| match f {
                    Frame::GoAway {
                        last_good_stream_id,
                        ..
                    } => Some(*last_good_stream_id),
                    _ => None,
                })
                .unwrap(),
            status: GoAwayStatus::PROTOCOL_ERROR
        })
    );
    assert!(s.is_failed());
    assert_eq!(s.receive(&[0]), Err(SessionError::Closed));
    assert_eq!(s.ping(), Err(SessionError::Closed));
}

#[test]
fn protocol_errors_end_the_session_with_goaway() {
    // An even stream id is the server's to use.
    let mut s = Session::default();
    let mut c = Client::new();
    let even = Frame::SynStream {
        stream_id: 2,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers: Headers::new(),
    };
    assert!(matches!(
        c.send(&mut s, even),
        Err(SessionError::Violation(_))
    ));
    expect_goaway(&mut c, &mut s);

    // Stream ids must increase.
    let mut s = Session::default();
    let mut c = Client::new();
    c.open(&mut s, 5, "stdin", false);
    let again = Frame::SynStream {
        stream_id: 3,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers: Headers::new(),
    };
    assert!(c.send(&mut s, again).is_err());
    expect_goaway(&mut c, &mut s);

    // Garbage.
    let mut s = Session::default();
    let mut c = Client::new();
    assert!(matches!(
        s.receive(&[0xff; 16]),
        Err(SessionError::Protocol(_))
    ));
    expect_goaway(&mut c, &mut s);
}

#[test]
fn stream_errors_reset_one_stream_only() {
    let mut s = Session::new(Config {
        limits: Limits {
            max_data_len: 100,
            ..Limits::default()
        },
        ..Config::default()
    });
    let mut c = Client::new();
    c.open(&mut s, 1, "stdin", false);
    c.open(&mut s, 3, "stdin", false);
    s.accept(1, &Headers::new(), false).unwrap();
    s.accept(3, &Headers::new(), false).unwrap();
    events(&mut s);
    c.read(&mut s);

    // Oversized DATA: FRAME_TOO_LARGE for its stream, the other one goes on.
    c.data(&mut s, 1, &[0; 101], false);
    c.data(&mut s, 3, b"fine", false);
    assert_eq!(
        c.read(&mut s),
        [Frame::RstStream {
            stream_id: 1,
            status: RstStatus::FRAME_TOO_LARGE
        }]
    );
    assert_eq!(
        events(&mut s),
        [
            Event::StreamReset {
                stream_id: 1,
                status: RstStatus::FRAME_TOO_LARGE,
                by_us: true
            },
            Event::Data {
                stream_id: 3,
                data: b"fine".to_vec()
            }
        ]
    );

    // DATA after the client's FIN.
    c.data(&mut s, 3, b"", true);
    c.data(&mut s, 3, b"more", false);
    assert_eq!(
        c.read(&mut s),
        [Frame::RstStream {
            stream_id: 3,
            status: RstStatus::STREAM_ALREADY_CLOSED
        }]
    );

    // DATA on a stream never opened.
    c.data(&mut s, 99, b"?", false);
    assert_eq!(
        c.read(&mut s),
        [Frame::RstStream {
            stream_id: 99,
            status: RstStatus::INVALID_STREAM
        }]
    );

    // A SYN_REPLY from the client, for an open stream.
    c.open(&mut s, 5, "stdin", false);
    c.send(
        &mut s,
        Frame::SynReply {
            stream_id: 5,
            fin: false,
            headers: Headers::new(),
        },
    )
    .unwrap();
    assert_eq!(
        c.read(&mut s),
        [Frame::RstStream {
            stream_id: 5,
            status: RstStatus::STREAM_IN_USE
        }]
    );
    assert!(!s.is_failed());
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn client_reset_and_server_refusal() {
    let mut s = Session::default();
    let mut c = Client::new();
    c.open(&mut s, 1, "stdout", false);
    s.accept(1, &Headers::new(), false).unwrap();
    c.send(
        &mut s,
        Frame::RstStream {
            stream_id: 1,
            status: RstStatus::CANCEL,
        },
    )
    .unwrap();
    assert_eq!(
        events(&mut s).last(),
        Some(&Event::StreamReset {
            stream_id: 1,
            status: RstStatus::CANCEL,
            by_us: false
        })
    );
    assert_eq!(
        s.send_data(1, b"x", false),
        Err(SessionError::UnknownStream(1))
    );
    c.open(&mut s, 3, "bogus", false);
    s.refuse(3).unwrap();
    assert_eq!(
        c.read(&mut s).last(),
        Some(&Frame::RstStream {
            stream_id: 3,
            status: RstStatus::REFUSED_STREAM
        })
    );
    assert_eq!(s.refuse(3), Err(SessionError::UnknownStream(3)));
}

#[test]
fn hundreds_of_streams_are_bounded_and_leave_nothing() {
    let mut s = Session::new(Config {
        max_streams: 100,
        ..Config::default()
    });
    let mut c = Client::new();
    for i in 0..300u32 {
        c.open(&mut s, 2 * i + 1, "data", false);
    }
    assert_eq!(s.open_streams(), 100);
    let refused = c
        .read(&mut s)
        .iter()
        .filter(|f| {
            matches!(
                f,
                Frame::RstStream {
                    status: RstStatus::REFUSED_STREAM,
                    ..
                }
            )
        })
        .count();
    assert_eq!(refused, 200);
    let opened: Vec<u32> = events(&mut s)
        .iter()
        .map(|e| match e {
            Event::StreamOpened { stream_id, .. } => *stream_id,
            other => panic!("{other:?}"),
        })
        .collect();
    for id in opened {
        s.accept(id, &Headers::new(), true).unwrap();
        c.data(&mut s, id, b"", true);
    }
    assert_eq!(s.open_streams(), 0);
    // Room again for new ones.
    c.open(&mut s, 1001, "data", false);
    assert!(s.is_open(1001));
}

#[test]
fn settings_and_window_updates_are_accepted() {
    let mut s = Session::default();
    let mut c = Client::new();
    c.send(
        &mut s,
        Frame::Settings {
            clear: false,
            entries: vec![],
        },
    )
    .unwrap();
    c.send(
        &mut s,
        Frame::WindowUpdate {
            stream_id: 0,
            delta: 1000,
        },
    )
    .unwrap();
    assert!(events(&mut s).is_empty());
    assert!(!s.has_output());
}
