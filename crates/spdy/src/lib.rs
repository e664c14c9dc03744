//! SPDY/3.1 and WebSocket framing, and the Kubernetes streaming protocols on top of them,
//! for the CRI streaming server (exec, attach, port-forward).
//!
//! The core is sans-I/O: decoders take bytes, encoders and the [`session::Session`]
//! produce bytes, and nothing blocks or spawns. [`blocking`] wraps a session for a thread
//! per connection over `Read`/`Write` halves. Modules:
//! - [`frame`]: SPDY/3.1 frames, decoder (with limits) and encoder;
//! - [`headers`]: header blocks and their zlib contexts with SPDY's dictionary;
//! - [`session`]: the server side of a session (streams, FIN, RST, PING, GOAWAY);
//! - [`http`]: the HTTP/1.1 request head of an upgrade;
//! - [`k8s`]: `X-Stream-Protocol-Version` negotiation, `streamtype`, the error stream's
//!   status, resize messages;
//! - [`websocket`]: RFC 6455 handshake and codec, Kubernetes channels;
//! - [`blocking`]: a session shared by a reader thread and writer threads.

pub mod blocking;
pub mod frame;
pub mod headers;
pub mod http;
pub mod k8s;
pub mod session;
pub mod websocket;

pub use frame::{Frame, FrameDecoder, FrameEncoder, FrameError, GoAwayStatus, Limits, RstStatus};
pub use headers::Headers;
pub use session::{Config, Event, Session, SessionError};
