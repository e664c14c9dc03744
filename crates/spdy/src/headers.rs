//! SPDY/3 name/value header blocks: the uncompressed layout (a 32-bit pair count, then
//! 32-bit-length-prefixed names and values, several values of one name joined by NUL) and
//! the zlib contexts that carry them, primed with SPDY/3's dictionary. Each direction of a
//! session owns one context for its whole life, and every block ends with a sync flush, so
//! a block can be decoded only after every earlier block of the same direction.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The zlib dictionary of SPDY/3 (section 2.6.10.1 of the draft), 1423 bytes whose
/// Adler-32 is `0xe3c6a7c2`.
pub const DICTIONARY: &[u8] = include_bytes!("dictionary.bin");

/// Header names and values in the order they came; names are lowercase ASCII.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    pairs: Vec<(String, String)>,
}

impl Headers {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a header; the name is lowercased (SPDY sends lowercase names only).
    pub fn add(&mut self, name: &str, value: &str) -> &mut Self {
        self.pairs
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// The first value of `name` (compared case-insensitively).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.split('\0').next())
    }

    /// Every value of `name`, in order; a value sent NUL-joined counts as several.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split('\0'))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Headers {
    fn from_iter<T: IntoIterator<Item = (&'a str, &'a str)>>(iter: T) -> Self {
        let mut headers = Headers::new();
        for (n, v) in iter {
            headers.add(n, v);
        }
        headers
    }
}

/// Why a header block was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("header block is not valid zlib data with the SPDY/3 dictionary: {0}")]
    Zlib(String),
    #[error("header block decompresses to more than the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("header block is truncated: {0}")]
    Truncated(&'static str),
    #[error("header block has {extra} bytes after its last pair")]
    TrailingBytes { extra: usize },
    #[error("header block has an empty name")]
    EmptyName,
    #[error("header name {name:?} is not lowercase")]
    UppercaseName { name: String },
    #[error("header name {name:?} appears twice")]
    DuplicateName { name: String },
    #[error("header {name:?} is not valid UTF-8")]
    NotUtf8 { name: String },
    #[error("header block has {count} pairs, more than the limit of {limit}")]
    TooManyPairs { count: u32, limit: usize },
}

/// Serialises `headers` to the uncompressed block layout. Values of a repeated name are
/// joined with NUL, as the draft requires (a name may appear once per block).
pub fn encode_block(headers: &Headers) -> Vec<u8> {
    let mut merged: Vec<(&str, String)> = Vec::new();
    for (name, value) in headers.iter() {
        match merged.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                v.push('\0');
                v.push_str(value);
            }
            None => merged.push((name, value.to_owned())),
        }
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(merged.len() as u32).to_be_bytes());
    for (name, value) in merged {
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Parses an uncompressed block; the whole of `block` must be used.
pub fn decode_block(block: &[u8], max_pairs: usize) -> Result<Headers, HeaderError> {
    let mut rest = block;
    let count = take_u32(&mut rest, "pair count")?;
    // Each pair needs at least 8 bytes, so a count beyond that is a lie caught early.
    if count as usize > max_pairs || count as usize > rest.len() / 8 {
        if count as usize > max_pairs {
            return Err(HeaderError::TooManyPairs {
                count,
                limit: max_pairs,
            });
        }
        return Err(HeaderError::Truncated(
            "fewer bytes than the pair count needs",
        ));
    }
    let mut headers = Headers::new();
    for _ in 0..count {
        let name = take_bytes(&mut rest, "name")?;
        let value = take_bytes(&mut rest, "value")?;
        if name.is_empty() {
            return Err(HeaderError::EmptyName);
        }
        let name = std::str::from_utf8(name).map_err(|_| HeaderError::NotUtf8 {
            name: String::from_utf8_lossy(name).into_owned(),
        })?;
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(HeaderError::UppercaseName { name: name.into() });
        }
        if headers.pairs.iter().any(|(n, _)| n == name) {
            return Err(HeaderError::DuplicateName { name: name.into() });
        }
        let value =
            std::str::from_utf8(value).map_err(|_| HeaderError::NotUtf8 { name: name.into() })?;
        headers.pairs.push((name.to_owned(), value.to_owned()));
    }
    if !rest.is_empty() {
        return Err(HeaderError::TrailingBytes { extra: rest.len() });
    }
    Ok(headers)
}

fn take_u32(rest: &mut &[u8], what: &'static str) -> Result<u32, HeaderError> {
    let Some((word, tail)) = rest.split_first_chunk::<4>() else {
        return Err(HeaderError::Truncated(what));
    };
    *rest = tail;
    Ok(u32::from_be_bytes(*word))
}

fn take_bytes<'a>(rest: &mut &'a [u8], what: &'static str) -> Result<&'a [u8], HeaderError> {
    let len = take_u32(rest, what)? as usize;
    if rest.len() < len {
        return Err(HeaderError::Truncated(what));
    }
    let (bytes, tail) = rest.split_at(len);
    *rest = tail;
    Ok(bytes)
}

/// The sending side's zlib context.
pub struct Compressor {
    zlib: Compress,
}

impl Default for Compressor {
    fn default() -> Self {
        Self::new()
    }
}

impl Compressor {
    pub fn new() -> Self {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(DICTIONARY)
            .expect("a fresh deflate context accepts a dictionary");
        Compressor { zlib }
    }

    /// Compresses one block and sync-flushes, appending to `out`.
    pub fn compress(&mut self, block: &[u8], out: &mut Vec<u8>) {
        let start_in = self.zlib.total_in();
        loop {
            let used = (self.zlib.total_in() - start_in) as usize;
            out.reserve(block.len() / 2 + 64);
            self.zlib
                .compress_vec(&block[used..], out, FlushCompress::Sync)
                .expect("deflate of in-memory bytes cannot fail");
            let used = (self.zlib.total_in() - start_in) as usize;
            // zlib's contract: a flush is complete once a call leaves output room unused.
            if used == block.len() && out.len() < out.capacity() {
                break;
            }
        }
    }
}

/// The receiving side's zlib context, with a bound on what one block may inflate to.
pub struct Decompressor {
    zlib: Decompress,
    max_block: usize,
}

impl Decompressor {
    pub fn new(max_block: usize) -> Self {
        Decompressor {
            zlib: Decompress::new(true),
            max_block,
        }
    }

    /// Inflates the compressed bytes of one frame. The output is capped at the limit:
    /// a block that would inflate beyond it is refused without inflating the rest.
    pub fn decompress(&mut self, input: &[u8]) -> Result<Vec<u8>, HeaderError> {
        let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(self.max_block) + 1);
        let start_in = self.zlib.total_in();
        loop {
            let used = (self.zlib.total_in() - start_in) as usize;
            if used == input.len() && out.len() < out.capacity() {
                return Ok(out);
            }
            if out.len() == out.capacity() {
                if out.len() > self.max_block {
                    return Err(HeaderError::TooLarge {
                        limit: self.max_block,
                    });
                }
                // One byte beyond the limit, so "exactly the limit" still succeeds.
                let room = (out.capacity() * 2).min(self.max_block + 1);
                out.reserve_exact(room - out.len());
            }
            let before = (self.zlib.total_in(), self.zlib.total_out());
            match self
                .zlib
                .decompress_vec(&input[used..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::StreamEnd) => {
                    return Err(HeaderError::Zlib("the zlib stream ended".into()));
                }
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.zlib
                        .set_dictionary(DICTIONARY)
                        .map_err(|e| HeaderError::Zlib(format!("dictionary refused: {e}")))?;
                    continue;
                }
                Err(e) => return Err(HeaderError::Zlib(e.to_string())),
            }
            if out.len() > self.max_block {
                return Err(HeaderError::TooLarge {
                    limit: self.max_block,
                });
            }
            let progressed = (self.zlib.total_in(), self.zlib.total_out()) != before;
            if !progressed && out.len() < out.capacity() {
                return Err(HeaderError::Zlib(
                    "the compressed block is incomplete".into(),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_is_the_drafts() {
        assert_eq!(DICTIONARY.len(), 1423);
        let mut adler = (1u32, 0u32);
        for &b in DICTIONARY {
            adler.0 = (adler.0 + u32::from(b)) % 65521;
            adler.1 = (adler.1 + adler.0) % 65521;
        }
        assert_eq!((adler.1 << 16) | adler.0, 0xe3c6_a7c2);
        assert!(DICTIONARY.starts_with(b"\0\0\0\x07options"));
    }

    #[test]
    fn block_round_trip_joins_repeated_names() {
        let mut h = Headers::new();
        h.add("StreamType", "stdin").add("x", "1").add("x", "2");
        let block = encode_block(&h);
        let back = decode_block(&block, 100).unwrap();
        assert_eq!(back.get("streamtype"), Some("stdin"));
        assert_eq!(back.get_all("x").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(back.len(), 2);
    }

    #[test]
    fn block_errors() {
        assert_eq!(
            decode_block(&[0, 0, 0], 10),
            Err(HeaderError::Truncated("pair count"))
        );
        let mut b = encode_block(&[("a", "b")].into_iter().collect());
        b.push(0);
        assert_eq!(
            decode_block(&b, 10),
            Err(HeaderError::TrailingBytes { extra: 1 })
        );
        let upper = [0, 0, 0, 1, 0, 0, 0, 1, b'A', 0, 0, 0, 0];
        assert!(matches!(
            decode_block(&upper, 10),
            Err(HeaderError::UppercaseName { .. })
        ));
        let dup = [
            0, 0, 0, 2, 0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 0, 0,
        ];
        assert!(matches!(
            decode_block(&dup, 10),
            Err(HeaderError::DuplicateName { .. })
        ));
        let huge_count = [0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            decode_block(&huge_count, 10),
            Err(HeaderError::TooManyPairs { .. })
        ));
        let lying = [0, 0, 0, 5, 0, 0, 0, 0];
        assert!(matches!(
            decode_block(&lying, 10),
            Err(HeaderError::Truncated(_))
        ));
        let long_name = [0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff, b'a', 0, 0, 0, 0];
        assert!(matches!(
            decode_block(&long_name, 10),
            Err(HeaderError::Truncated("name"))
        ));
    }

    #[test]
    fn contexts_carry_over_blocks() {
        let mut c = Compressor::new();
        let mut d = Decompressor::new(1 << 16);
        for i in 0..50 {
            let h: Headers = [("streamtype", "stdout"), ("n", &*i.to_string())]
                .into_iter()
                .collect();
            let mut wire = Vec::new();
            c.compress(&encode_block(&h), &mut wire);
            // A sync flush ends with the empty stored block.
            assert!(wire.ends_with(&[0, 0, 0xff, 0xff]), "{wire:?}");
            let back = decode_block(&d.decompress(&wire).unwrap(), 100).unwrap();
            assert_eq!(back, h);
        }
    }

    #[test]
    fn first_block_names_the_dictionary() {
        let mut wire = Vec::new();
        Compressor::new().compress(&encode_block(&Headers::new()), &mut wire);
        // zlib header with FDICT set, then the dictionary's Adler-32.
        assert_eq!(wire[0] & 0x0f, 8);
        assert_ne!(wire[1] & 0x20, 0);
        assert_eq!(&wire[2..6], &0xe3c6_a7c2u32.to_be_bytes());
    }

    #[test]
    fn bomb_is_refused() {
        let mut h = Headers::new();
        let big = "a".repeat(1 << 20);
        h.add("x", &big);
        let mut wire = Vec::new();
        Compressor::new().compress(&encode_block(&h), &mut wire);
        assert!(wire.len() < 8 << 10, "compresses well: {}", wire.len());
        let err = Decompressor::new(64 << 10).decompress(&wire).unwrap_err();
        assert_eq!(err, HeaderError::TooLarge { limit: 64 << 10 });
    }

    #[test]
    fn exact_limit_is_accepted_and_garbage_refused() {
        let block = encode_block(&[("a", "b")].into_iter().collect());
        let mut wire = Vec::new();
        Compressor::new().compress(&block, &mut wire);
        assert_eq!(
            Decompressor::new(block.len()).decompress(&wire).unwrap(),
            block
        );
        assert!(matches!(
            Decompressor::new(block.len() - 1).decompress(&wire),
            Err(HeaderError::TooLarge { .. })
        ));
        assert!(matches!(
            Decompressor::new(1024).decompress(b"not zlib at all"),
            Err(HeaderError::Zlib(_))
        ));
        // Truncated: the block stops in the middle of the deflate data; what inflates is
        // not a whole block.
        let half = Decompressor::new(1024).decompress(&wire[..wire.len() / 2]);
        assert!(half.is_err() || decode_block(&half.unwrap(), 10).is_err());
    }
}
