//! Attach's backend: a client of the app's monitor on its attach socket (the library's
//! `attach` protocol, as `rkt attach` is): the app's output frames to the client, the
//! client's input, stdin's end and terminal sizes to the monitor. The client leaving
//! detaches (the app goes on); the app's streams ending ends the session with success.

use std::net::Shutdown;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use rkt::attach::{attach_dir, connect, Frame};
use spdy::k8s::Outcome;

use super::tokens::Streams;
use super::{Channel, Input, Output};
use crate::container::Container;

/// Relays until the app's streams end or the client leaves.
pub fn attach(c: &Container, wanted: Streams, input: Receiver<Input>, out: Arc<dyn Output>) {
    let outcome = match relay(c, wanted, input, out.clone()) {
        Ok(()) => Outcome::Success,
        Err(e) => Outcome::Error(e),
    };
    out.finish(&outcome);
}

fn relay(
    c: &Container,
    wanted: Streams,
    input: Receiver<Input>,
    out: Arc<dyn Output>,
) -> Result<(), String> {
    let mut conn = connect(&attach_dir(&c.sandbox.pod.dir), &c.app).map_err(|_| {
        format!(
            "container {} cannot be attached to: it is not running, or its output has ended",
            c.meta.id
        )
    })?;
    let offered = match Frame::read(&mut conn) {
        Ok(Some(Frame::Hello(e))) => e,
        _ => {
            return Err(format!(
                "container {}: its monitor did not say which streams it has",
                c.meta.id
            ))
        }
    };
    if wanted.stdin && !offered.stdin {
        return Err(format!(
            "container {} was created without stdin: there is no stdin to attach to",
            c.meta.id
        ));
    }
    let mut writer = conn
        .try_clone()
        .map_err(|e| format!("cannot use the attach socket: {e}"))?;
    let stdin = wanted.stdin;
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        for message in input {
            let frame = match message {
                Input::Stdin(data) if stdin => Frame::Stdin(data),
                Input::StdinEnd if stdin => Frame::StdinClose,
                Input::Resize(size) => Frame::Resize {
                    rows: size.height,
                    cols: size.width,
                },
                _ => continue,
            };
            if writer.write_all(&frame.encode()).is_err() {
                break;
            }
        }
        // The client left (or the monitor did): detach, which also ends the reading below.
        let _ = writer.shutdown(Shutdown::Both);
    });
    let mut client_gone = false;
    loop {
        let (channel, data) = match Frame::read(&mut conn) {
            Ok(Some(Frame::Stdout(d))) if wanted.stdout => (Channel::Stdout, d),
            Ok(Some(Frame::Stderr(d))) if wanted.stderr => (Channel::Stderr, d),
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        };
        if !client_gone && out.write(channel, &data).is_err() {
            // Detach rather than let the monitor queue for a client that stopped reading.
            client_gone = true;
            let _ = conn.shutdown(Shutdown::Both);
        }
    }
    let _ = conn.shutdown(Shutdown::Both);
    drop(feeder);
    Ok(())
}
