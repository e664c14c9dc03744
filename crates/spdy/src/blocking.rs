//! A [`Session`] for blocking I/O, one thread per connection: the thread that owns the
//! read half calls [`Connection::read_events`] in a loop and hands events out; any thread
//! may accept streams or send data. Output is written in the order the session produced
//! it (header blocks share one compression context, so order matters), under the writer
//! lock taken before the session lock is released.
//!
//! A writer blocks while the client does not read; give the socket a write timeout
//! (`TcpStream::set_write_timeout`) so a stalled client cannot hold a process's output
//! forever.

use std::io::{self, Read, Write};
use std::sync::Mutex;

use crate::frame::{GoAwayStatus, RstStatus};
use crate::headers::Headers;
use crate::session::{Config, Event, Session, SessionError};

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("SPDY connection I/O: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Session(#[from] SessionError),
}

pub struct Connection<W> {
    session: Mutex<Session>,
    writer: Mutex<W>,
}

impl<W: Write> Connection<W> {
    pub fn new(config: Config, writer: W) -> Self {
        Connection {
            session: Mutex::new(Session::new(config)),
            writer: Mutex::new(writer),
        }
    }

    /// Reads once from `reader` and returns the events it produced (possibly none);
    /// `Ok(None)` at end of input. Ping echoes and protocol-error replies are written
    /// before returning. On a protocol error the GOAWAY is written and the error
    /// returned; events decoded before it are lost with the connection.
    pub fn read_events<R: Read>(
        &self,
        reader: &mut R,
        buf: &mut [u8],
    ) -> Result<Option<Vec<Event>>, ConnError> {
        let n = loop {
            match reader.read(buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        };
        if n == 0 {
            return Ok(None);
        }
        self.with_session(|s| {
            let result = s.receive(&buf[..n]);
            let mut events = Vec::new();
            while let Some(e) = s.poll_event() {
                events.push(e);
            }
            result.map(|()| events)
        })
        .map(Some)
    }

    /// Runs `f` on the session, then writes what it produced. Output is written even when
    /// `f` fails (a GOAWAY after a protocol error, say).
    pub fn with_session<T>(
        &self,
        f: impl FnOnce(&mut Session) -> Result<T, SessionError>,
    ) -> Result<T, ConnError> {
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let result = f(&mut session);
        let out = session.take_output();
        if !out.is_empty() {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            drop(session);
            writer.write_all(&out)?;
            writer.flush()?;
        }
        Ok(result?)
    }

    pub fn accept(&self, stream_id: u32, headers: &Headers, fin: bool) -> Result<(), ConnError> {
        self.with_session(|s| s.accept(stream_id, headers, fin))
    }

    pub fn refuse(&self, stream_id: u32) -> Result<(), ConnError> {
        self.with_session(|s| s.refuse(stream_id))
    }

    pub fn reset(&self, stream_id: u32, status: RstStatus) -> Result<(), ConnError> {
        self.with_session(|s| s.reset(stream_id, status))
    }

    pub fn send_data(&self, stream_id: u32, data: &[u8], fin: bool) -> Result<(), ConnError> {
        self.with_session(|s| s.send_data(stream_id, data, fin))
    }

    pub fn close(&self, stream_id: u32) -> Result<(), ConnError> {
        self.with_session(|s| s.close(stream_id))
    }

    pub fn ping(&self) -> Result<u32, ConnError> {
        self.with_session(|s| s.ping())
    }

    pub fn go_away(&self, status: GoAwayStatus) -> Result<(), ConnError> {
        self.with_session(|s| {
            s.go_away(status);
            Ok(())
        })
    }
}
