//! How this crate's errors are printed: a message names its subject (the image, blob,
//! layer or path) and leaves the cause to its [`Error::source`], so the whole story is the
//! message followed by each source's.

use std::error::Error;

/// An error's message followed by each of its sources', joined with `": "`
/// (`image store /var/lib/rkt/images: Permission denied (os error 13)`). An empty message
/// adds nothing.
pub fn chain(err: &(dyn Error + 'static)) -> String {
    let mut out = String::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !text.is_empty() {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        next = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error shaped like this crate's: a message naming the subject, the cause apart.
    #[derive(Debug, thiserror::Error)]
    #[error("image store {path}")]
    struct Io {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once() {
        let e = Io {
            path: "/s".into(),
            source: std::io::Error::from_raw_os_error(13),
        };
        assert_eq!(e.to_string(), "image store /s");
        assert_eq!(chain(&e), "image store /s: Permission denied (os error 13)");
    }
}
