//! Just enough HTTP/1.1 to answer an upgrade: parsing a request head (request line and
//! header fields, bounded in size), reading query parameters, and writing a response head.
//! Everything after the head belongs to the upgraded protocol.

/// Largest request head accepted, in bytes.
pub const MAX_HEAD: usize = 16 << 10;
/// Most header fields accepted.
pub const MAX_FIELDS: usize = 100;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    /// Header fields in order; names as sent.
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("request head is larger than {MAX_HEAD} bytes")]
    TooLarge,
    #[error("request head has more than {MAX_FIELDS} header fields")]
    TooManyFields,
    #[error("request head is not UTF-8")]
    NotUtf8,
    #[error("malformed request line {0:?}")]
    RequestLine(String),
    #[error("unsupported HTTP version {0:?} (HTTP/1.1 only)")]
    Version(String),
    #[error("malformed header field {0:?}")]
    Field(String),
}

impl RequestHead {
    /// Parses a head from the start of `buf`: `Ok(None)` while the blank line ending it has
    /// not arrived, else the head and the number of bytes it took (the rest of `buf` is
    /// already the upgraded protocol's).
    pub fn parse(buf: &[u8]) -> Result<Option<(RequestHead, usize)>, HttpError> {
        let Some(end) = find_head_end(buf) else {
            if buf.len() > MAX_HEAD {
                return Err(HttpError::TooLarge);
            }
            return Ok(None);
        };
        if end > MAX_HEAD {
            return Err(HttpError::TooLarge);
        }
        let text = std::str::from_utf8(&buf[..end]).map_err(|_| HttpError::NotUtf8)?;
        let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
        let line = lines.next().unwrap_or_default();
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(HttpError::RequestLine(line.into()));
        };
        if method.is_empty() || !target.starts_with('/') {
            return Err(HttpError::RequestLine(line.into()));
        }
        if version != "HTTP/1.1" {
            return Err(HttpError::Version(version.into()));
        }
        let mut fields = Vec::new();
        for line in lines {
            if fields.len() == MAX_FIELDS {
                return Err(HttpError::TooManyFields);
            }
            let Some((name, value)) = line.split_once(':') else {
                return Err(HttpError::Field(line.into()));
            };
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return Err(HttpError::Field(line.into()));
            }
            fields.push((name.to_owned(), value.trim().to_owned()));
        }
        Ok(Some((
            RequestHead {
                method: method.into(),
                target: target.into(),
                fields,
            },
            end,
        )))
    }

    /// The first value of a header field (name compared case-insensitively).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every comma-separated element of every field of that name, trimmed, in order.
    pub fn list(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// Whether a comma-separated field holds `token` (case-insensitively), as
    /// `Connection: keep-alive, Upgrade` holds `upgrade`.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.list(name)
            .iter()
            .any(|t| t.eq_ignore_ascii_case(token))
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The query's parameters, percent-decoded (`+` is a space), in order.
    pub fn query(&self) -> Vec<(String, String)> {
        let Some((_, query)) = self.target.split_once('?') else {
            return Vec::new();
        };
        query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect()
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// A response head: status line, the given fields, and the blank line.
pub fn response_head(status: u16, reason: &str, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n");
    for (n, v) in fields {
        out.push_str(n);
        out.push_str(": ");
        out.push_str(v);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// A complete plain-text error response that closes the connection.
pub fn error_response(status: u16, reason: &str, extra: &[(&str, &str)], body: &str) -> Vec<u8> {
    let body = format!("{body}\n");
    let len = body.len().to_string();
    let mut fields = vec![
        ("Content-Type", "text/plain; charset=utf-8"),
        ("Content-Length", len.as_str()),
        ("Connection", "close"),
    ];
    fields.extend_from_slice(extra);
    let mut out = response_head(status, reason, &fields);
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_head_and_leaves_the_rest() {
        let req = b"POST /exec/abc?command=sh&command=-c&command=echo+hi%21&stdin=1 HTTP/1.1\r\n\
Host: 127.0.0.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: SPDY/3.1\r\n\
X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: v3.channel.k8s.io, channel.k8s.io\r\n\r\nrest";
        let (head, used) = RequestHead::parse(req).unwrap().unwrap();
        assert_eq!(&req[used..], b"rest");
        assert_eq!(head.method, "POST");
        assert_eq!(head.path(), "/exec/abc");
        assert!(head.has_token("connection", "upgrade"));
        assert_eq!(
            head.list("x-stream-protocol-version"),
            ["v4.channel.k8s.io", "v3.channel.k8s.io", "channel.k8s.io"]
        );
        let q = head.query();
        assert_eq!(q[2], ("command".into(), "echo hi!".into()));
        assert_eq!(q[3], ("stdin".into(), "1".into()));
    }

    #[test]
    fn incomplete_and_bad_heads() {
        assert_eq!(
            RequestHead::parse(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Ok(None)
        );
        assert_eq!(
            RequestHead::parse(&vec![b'a'; MAX_HEAD + 1]),
            Err(HttpError::TooLarge)
        );
        assert!(matches!(
            RequestHead::parse(b"GET / HTTP/1.0\r\n\r\n"),
            Err(HttpError::Version(_))
        ));
        assert!(matches!(
            RequestHead::parse(b"GET /\r\n\r\n"),
            Err(HttpError::RequestLine(_))
        ));
        assert!(matches!(
            RequestHead::parse(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"),
            Err(HttpError::Field(_))
        ));
        let many = format!(
            "GET / HTTP/1.1\r\n{}\r\n",
            "a: b\r\n".repeat(MAX_FIELDS + 1)
        );
        assert_eq!(
            RequestHead::parse(many.as_bytes()),
            Err(HttpError::TooManyFields)
        );
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
