//! The socket's front: gRPC clients of Kubernetes 1.26 and older (kubelet, crictl, critest)
//! send the unix socket's path as the HTTP/2 `:authority` (`/run/rkt/cri.sock`), which the
//! HTTP/2 server under tonic (h2) rejects as malformed with a PROTOCOL_ERROR before any RPC
//! is seen (hyperium/h2#487; Kubernetes sends `localhost` since kubernetes#112597). So each
//! connection goes through this relay: the client's header blocks are decoded (HPACK, with
//! the client's dynamic table), an `:authority` that is not a host is replaced with
//! `localhost`, and the block is encoded again without indexing (so the server's table stays
//! empty and both sides agree); every other frame, and the server's side, pass unchanged.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::net::UnixStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// HTTP/2's smallest (and default) maximum frame size: what is sent is never larger.
const MAX_FRAME: usize = 16384;

/// The server's end of one relayed connection, as tonic takes it.
pub struct Relayed(pub DuplexStream);

impl tonic::transport::server::Connected for Relayed {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Relayed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Relayed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Relays `client` to a new in-process stream, returned for the server; the relay runs on
/// its own tasks until either side closes.
pub fn relay(client: UnixStream) -> Relayed {
    let (ours, theirs) = tokio::io::duplex(256 * 1024);
    let (client_read, mut client_write) = client.into_split();
    let (mut server_read, server_write) = tokio::io::split(ours);
    tokio::spawn(async move {
        let mut server_write = server_write;
        let _ = rewrite(client_read, &mut server_write).await;
        // The client is gone (or spoke badly): the server must see the end of its stream,
        // or it holds the connection open for ever, and so does the task copying its
        // answers (each crictl run left a socket and its HTTP/2 state behind, about 0.2 MiB
        // of the server's memory per connection in bench scenario 13).
        let _ = server_write.shutdown().await;
    });
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    });
    Relayed(theirs)
}

/// Copies the client's frames to the server, header blocks rewritten.
async fn rewrite(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
) -> std::io::Result<()> {
    let mut preface = [0u8; 24];
    from.read_exact(&mut preface).await?;
    to.write_all(&preface).await?;
    if preface != PREFACE {
        // Not HTTP/2 with prior knowledge: the server will say so.
        tokio::io::copy(&mut from, &mut to).await?;
        return Ok(());
    }
    let mut decoder = hpack::Decoder::new();
    loop {
        let (kind, flags, stream, payload) = read_frame(&mut from).await?;
        if kind != HEADERS {
            to.write_all(&frame_header(payload.len(), kind, flags, stream))
                .await?;
            to.write_all(&payload).await?;
            to.flush().await?;
            continue;
        }
        let mut block = header_fragment(flags, &payload)?;
        let mut end = flags & END_HEADERS != 0;
        while !end {
            let (k, f, _, more) = read_frame(&mut from).await?;
            if k != CONTINUATION {
                return Err(bad("a header block not continued by CONTINUATION"));
            }
            block.extend_from_slice(&more);
            end = f & END_HEADERS != 0;
        }
        let headers = decoder
            .decode(&block)
            .map_err(|e| bad(&format!("a header block does not decode: {e:?}")))?;
        let encoded = encode(&fix_authority(headers));
        // One HEADERS frame, then CONTINUATIONs if the block is larger than a frame.
        let mut chunks = encoded.chunks(MAX_FRAME).peekable();
        let mut first = true;
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            let (k, mut f) = if first {
                (HEADERS, flags & END_STREAM)
            } else {
                (CONTINUATION, 0)
            };
            if last {
                f |= END_HEADERS;
            }
            to.write_all(&frame_header(chunk.len(), k, f, stream))
                .await?;
            to.write_all(chunk).await?;
            first = false;
        }
        if encoded.is_empty() {
            to.write_all(&frame_header(
                0,
                HEADERS,
                (flags & END_STREAM) | END_HEADERS,
                stream,
            ))
            .await?;
        }
        to.flush().await?;
    }
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

async fn read_frame(
    from: &mut (impl AsyncRead + Unpin),
) -> std::io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    from.read_exact(&mut head).await?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    from.read_exact(&mut payload).await?;
    Ok((head[3], head[4], stream, payload))
}

fn frame_header(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// The header block fragment of a HEADERS frame's payload (padding and priority removed).
fn header_fragment(flags: u8, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut start = 0;
    let mut end = payload.len();
    if flags & PADDED != 0 {
        let pad = *payload
            .first()
            .ok_or_else(|| bad("a padded frame without its length"))? as usize;
        start = 1;
        end = end
            .checked_sub(pad)
            .ok_or_else(|| bad("padding longer than the frame"))?;
    }
    if flags & PRIORITY != 0 {
        start += 5;
    }
    payload
        .get(start..end)
        .map(<[u8]>::to_vec)
        .ok_or_else(|| bad("a HEADERS frame too short for its flags"))
}

/// `:authority` that is not `host[:port]` (a socket's path) becomes `localhost`.
fn fix_authority(mut headers: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    for (name, value) in &mut headers {
        if name == b":authority"
            && value
                .iter()
                .any(|b| !(b.is_ascii_alphanumeric() || b"-._~:[]@!$&'()*+,;=".contains(b)))
        {
            *value = b"localhost".to_vec();
        }
    }
    headers
}

/// HPACK: each header as a literal without indexing, with a literal name, no Huffman.
fn encode(headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.push(0x00);
        integer(&mut out, name.len(), 7, 0x00);
        out.extend_from_slice(name);
        integer(&mut out, value.len(), 7, 0x00);
        out.extend_from_slice(value);
    }
    out
}

/// An HPACK integer with an `n`-bit prefix, the first byte's other bits `high`.
fn integer(out: &mut Vec<u8>, mut value: usize, n: u32, high: u8) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(high | value as u8);
        return;
    }
    out.push(high | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_rfc_7541() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        integer(&mut out, 10, 5, 0);
        assert_eq!(out, [0x0a]);
        out.clear();
        integer(&mut out, 1337, 5, 0);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn a_socket_path_authority_becomes_localhost_and_decodes_again() {
        let headers = vec![
            (b":method".to_vec(), b"POST".to_vec()),
            (b":authority".to_vec(), b"/tmp/rt.sock".to_vec()),
            (b"x-long".to_vec(), vec![b'a'; 300]),
        ];
        let fixed = fix_authority(headers.clone());
        assert_eq!(fixed[1].1, b"localhost");
        assert_eq!(fixed[0], headers[0]);
        let mut decoder = hpack::Decoder::new();
        assert_eq!(decoder.decode(&encode(&fixed)).unwrap(), fixed);
        // A host authority is kept.
        let host = vec![(b":authority".to_vec(), b"localhost:80".to_vec())];
        assert_eq!(fix_authority(host.clone()), host);
    }

    #[test]
    fn padding_and_priority_are_taken_off_a_fragment() {
        let payload = [2, 1, 2, 3, 4, 5, 0xaa, 0xbb, 0, 0];
        assert_eq!(
            header_fragment(PADDED | PRIORITY, &payload).unwrap(),
            vec![0xaa, 0xbb]
        );
        assert!(header_fragment(PADDED, &[9]).is_err());
    }
}
