//! The progress line of a fetch (`rkt fetch`, and `rkt run`/`prepare` of an image not yet
//! stored): only when stderr is a terminal, one line rewritten in place (`\r`, then the
//! line, then erase-to-end-of-line) with the blob being downloaded, bytes done and total,
//! and the rate; erased when the fetch ends, so nothing of it stays on the screen or ever
//! reaches a pipe or a file.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use ::image::{Digest, Progress};

/// Redraws at most this often (the first and last state of each blob are always drawn).
const REDRAW: Duration = Duration::from_millis(100);

/// Erases the line the cursor is on and returns to its start.
const CLEAR: &str = "\r\x1b[K";

/// `1.5 MiB`, `12.0 KiB`, `900 B`.
fn human(bytes: f64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024.0 {
        return format!("{bytes:.0} B");
    }
    let mut value = bytes / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The progress line: blob number and short digest, bytes done of total with the
/// percentage, and the rate when one is known (bytes per second).
pub fn render(blob: usize, digest: &Digest, done: u64, total: u64, rate: Option<f64>) -> String {
    let percent = done.saturating_mul(100).checked_div(total).unwrap_or(100);
    let mut line = format!(
        "fetching blob {blob} sha256:{}: {} / {} ({percent}%)",
        digest.short(),
        human(done as f64),
        human(total as f64),
    );
    if let Some(rate) = rate {
        line.push_str(&format!(", {}/s", human(rate)));
    }
    line
}

/// A [`Progress`] that draws the line on `out`.
pub struct TermProgress<W: Write> {
    out: W,
    blob: usize,
    digest: Option<Digest>,
    total: u64,
    from: u64,
    done: u64,
    started: Instant,
    drawn_at: Option<Instant>,
    drawn: bool,
}

impl TermProgress<std::io::Stderr> {
    /// A progress line on stderr when it is a terminal; `None` otherwise.
    pub fn on_stderr() -> Option<Self> {
        let err = std::io::stderr();
        err.is_terminal().then(|| TermProgress::new(err))
    }
}

impl<W: Write> TermProgress<W> {
    /// Draws on `out` (whatever it is: [`TermProgress::on_stderr`] checks for a terminal).
    pub fn new(out: W) -> Self {
        TermProgress {
            out,
            blob: 0,
            digest: None,
            total: 0,
            from: 0,
            done: 0,
            started: Instant::now(),
            drawn_at: None,
            drawn: false,
        }
    }

    fn draw(&mut self, now: Instant) {
        let Some(digest) = &self.digest else { return };
        let secs = now.duration_since(self.started).as_secs_f64();
        let rate = (secs >= 0.05).then(|| (self.done - self.from) as f64 / secs);
        let line = render(self.blob, digest, self.done, self.total, rate);
        // A broken terminal is no reason to fail the fetch.
        let _ = write!(self.out, "\r{line}\x1b[K");
        let _ = self.out.flush();
        self.drawn_at = Some(now);
        self.drawn = true;
    }

    /// Erases the line, when one was drawn.
    pub fn clear(&mut self) {
        if self.drawn {
            let _ = write!(self.out, "{CLEAR}");
            let _ = self.out.flush();
            self.drawn = false;
        }
    }
}

impl<W: Write> Progress for TermProgress<W> {
    fn blob_started(&mut self, digest: &Digest, size: u64, from: u64) {
        self.blob += 1;
        self.digest = Some(digest.clone());
        self.total = size;
        self.from = from;
        self.done = from;
        self.started = Instant::now();
        self.draw(self.started);
    }

    fn advanced(&mut self, n: u64) {
        self.done += n;
        let now = Instant::now();
        if self
            .drawn_at
            .is_none_or(|t| now.duration_since(t) >= REDRAW)
        {
            self.draw(now);
        }
    }

    fn blob_done(&mut self) {
        self.draw(Instant::now());
    }
}

impl<W: Write> Drop for TermProgress<W> {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> Digest {
        Digest::of(b"layer")
    }

    #[test]
    fn renders_blob_bytes_percentage_and_rate() {
        let d = digest();
        assert_eq!(
            render(2, &d, 1536 * 1024, 3 * 1024 * 1024, Some(512.0 * 1024.0)),
            format!(
                "fetching blob 2 sha256:{}: 1.5 MiB / 3.0 MiB (50%), 512.0 KiB/s",
                d.short()
            )
        );
        assert_eq!(
            render(1, &d, 0, 900, None),
            format!("fetching blob 1 sha256:{}: 0 B / 900 B (0%)", d.short())
        );
        assert!(render(1, &d, 0, 0, None).contains("(100%)"));
    }

    /// Each state rewrites the one line in place, and the line is erased at the end.
    #[test]
    fn rewrites_one_line_and_erases_it_at_the_end() {
        let d = digest();
        let mut buf = Vec::new();
        let mut p = TermProgress::new(&mut buf);
        p.blob_started(&d, 2048, 1024);
        p.advanced(1024);
        p.blob_done();
        drop(p);
        let out = String::from_utf8(buf).unwrap();
        assert!(!out.contains('\n'), "{out:?}");
        let draws: Vec<&str> = out.split('\r').filter(|s| !s.is_empty()).collect();
        assert!(draws[0].starts_with("fetching blob 1 "), "{out:?}");
        assert!(draws[0].contains("1.0 KiB / 2.0 KiB (50%)"), "{out:?}");
        assert!(draws[draws.len() - 2].contains("2.0 KiB / 2.0 KiB (100%)"));
        assert!(out.ends_with(CLEAR), "{out:?}");
        // Nothing drawn, nothing written.
        let mut buf = Vec::new();
        drop(TermProgress::new(&mut buf));
        assert!(buf.is_empty());
    }
}
