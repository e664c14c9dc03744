//! Writing a log: [`LogFile`], one file shared by an app's streams, and [`copy`], which
//! turns what one stream reads into records.
//!
//! Each read of the app's stream becomes one `write(2)` of whole records, all stamped with
//! the time of that read (a timestamp per read, not per line, as conmon does: formatting one
//! per line would cost more than the copy). A line is written once its newline arrives, or
//! in `P` records while it is longer than the split size, so a record is never cut by a
//! rotation nor interleaved with the other stream's.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::{rotated, timestamp, LogConfig, LogError, LogStream};

/// One log file, written by any number of streams' [`copy`]s.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    config: LogConfig,
    open: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    file: File,
    /// The file's size, as far as this writer knows.
    size: u64,
}

fn open(path: &Path) -> Result<Open, LogError> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
        .map_err(LogError::io("open", path))?;
    let size = file
        .metadata()
        .map_err(LogError::io("read the size of", path))?
        .len();
    Ok(Open { file, size })
}

impl LogFile {
    /// Opens `path` to append to, creating it (mode 0640) if it does not exist.
    pub fn create(path: &Path, config: LogConfig) -> Result<LogFile, LogError> {
        Ok(LogFile {
            path: path.to_path_buf(),
            config: LogConfig {
                split: config.split.max(1),
                max_files: config.max_files.max(1),
                ..config
            },
            open: Mutex::new(open(path)?),
        })
    }

    /// How the log is split and rotated.
    pub fn config(&self) -> LogConfig {
        self.config
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts writing to a new file at the log's path, after someone else renamed the
    /// current one (a record is never split across the two).
    pub fn reopen(&self) -> Result<(), LogError> {
        let mut open_file = self.lock();
        *open_file = open(&self.path)?;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends whole records (as [`Records`] makes them), rotating whenever the next record
    /// would take the file past its size (a file holds at least one record, however long).
    pub fn append(&self, mut records: &[u8]) -> Result<(), LogError> {
        let mut open_file = self.lock();
        let max = self.config.max_size;
        while !records.is_empty() {
            let take = if max == 0 {
                records.len()
            } else {
                let room =
                    usize::try_from(max.saturating_sub(open_file.size)).unwrap_or(usize::MAX);
                let within = &records[..room.min(records.len())];
                match within.iter().rposition(|b| *b == b'\n') {
                    Some(end) => end + 1,
                    None if open_file.size == 0 => records
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(records.len(), |e| e + 1),
                    None => {
                        self.rotate(&mut open_file)?;
                        continue;
                    }
                }
            };
            open_file
                .file
                .write_all(&records[..take])
                .map_err(LogError::io("write to", &self.path))?;
            open_file.size += take as u64;
            records = &records[take..];
            if max > 0 && open_file.size >= max {
                self.rotate(&mut open_file)?;
            }
        }
        Ok(())
    }

    /// `NAME.(n-1)` → `NAME.n` … `NAME` → `NAME.1`, the oldest beyond the files kept removed,
    /// and a new `NAME`.
    fn rotate(&self, open_file: &mut Open) -> Result<(), LogError> {
        let kept = self.config.max_files - 1;
        if kept == 0 {
            open_file
                .file
                .set_len(0)
                .map_err(LogError::io("truncate", &self.path))?;
            open_file.size = 0;
            return Ok(());
        }
        for n in (1..kept).rev() {
            let from = rotated(&self.path, n);
            match std::fs::rename(&from, rotated(&self.path, n + 1)) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    return Err(LogError::io("rotate", &from)(e))
                }
                _ => {}
            }
        }
        match std::fs::rename(&self.path, rotated(&self.path, 1)) {
            // Renamed by someone else meanwhile (an outside rotation without a reopen): the
            // file is theirs now; this log goes on in a new one.
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            other => other.map_err(LogError::io("rotate", &self.path))?,
        }
        *open_file = open(&self.path)?;
        Ok(())
    }
}

/// Records of one stream, built from what it reads.
#[derive(Debug)]
pub struct Records {
    stream: LogStream,
    split: usize,
    /// The start of a line whose newline has not come yet (shorter than `split`).
    pending: Vec<u8>,
}

impl Records {
    /// Records of `stream`, lines split at `split` bytes.
    pub fn new(stream: LogStream, split: usize) -> Records {
        Records {
            stream,
            split: split.max(1),
            pending: Vec::new(),
        }
    }

    fn record(&self, out: &mut Vec<u8>, time: &str, partial: bool, text: &[u8]) {
        out.extend_from_slice(time.as_bytes());
        out.push(b' ');
        out.extend_from_slice(self.stream.as_str().as_bytes());
        out.extend_from_slice(if partial { b" P " } else { b" F " });
        out.extend_from_slice(text);
        out.push(b'\n');
    }

    /// The records `data`, read at `time`, completes, appended to `out`.
    pub fn push(&mut self, data: &[u8], time: &str, out: &mut Vec<u8>) {
        let mut rest = data;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let (line, after) = (&rest[..end], &rest[end + 1..]);
            if self.pending.is_empty() {
                self.full_line(line, time, out);
            } else {
                let mut joined = std::mem::take(&mut self.pending);
                joined.extend_from_slice(line);
                self.full_line(&joined, time, out);
            }
            rest = after;
        }
        self.pending.extend_from_slice(rest);
        // The line goes on past the split size: what is known of it goes out in parts.
        if self.pending.len() > self.split {
            let whole = self.pending.len() / self.split * self.split;
            let whole = if whole == self.pending.len() {
                whole - self.split
            } else {
                whole
            };
            for part in self.pending[..whole].chunks(self.split) {
                self.record(out, time, true, part);
            }
            self.pending.drain(..whole);
        }
    }

    fn full_line(&self, line: &[u8], time: &str, out: &mut Vec<u8>) {
        let mut parts = line.chunks(self.split).peekable();
        if parts.peek().is_none() {
            return self.record(out, time, false, b"");
        }
        while let Some(part) = parts.next() {
            self.record(out, time, parts.peek().is_some(), part);
        }
    }

    /// The stream ended: an unfinished line becomes an `F` record.
    pub fn finish(&mut self, time: &str, out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.full_line(&line, time, out);
        }
    }
}

/// Copies `from` (an app's stream) into `log` until it ends, as `stream`'s records. Returns
/// the bytes read. A read error ends the copy like the end of the stream; a write error is
/// returned after the rest of the stream was drained, so the app never blocks on a full pipe.
pub fn copy(mut from: impl Read, stream: LogStream, log: &LogFile) -> Result<u64, LogError> {
    let read = move |buf: &mut [u8]| loop {
        match from.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            done => return done.unwrap_or(0),
        }
    };
    copy_from(read, stream, Some(log), |_| {})
}

/// The copy every reader of an app's stream makes: what `next` gives (a batch into the
/// buffer; 0 at the end) becomes `stream`'s records in `log` (when kept), and goes to `tee`
/// as it was read. A write error is returned once the stream is drained (the app never
/// blocks on a full pipe); the bytes read otherwise.
pub fn copy_from(
    mut next: impl FnMut(&mut [u8]) -> usize,
    stream: LogStream,
    log: Option<&LogFile>,
    mut tee: impl FnMut(&[u8]),
) -> Result<u64, LogError> {
    let split = log.map_or(LogConfig::default().split, |l| l.config.split);
    let mut records = Records::new(stream, split);
    let mut buf = vec![0; BATCH_SIZE];
    let mut out = Vec::with_capacity(BATCH_SIZE + BATCH_SIZE / 4);
    let (mut total, mut failed) = (0, None);
    loop {
        let n = next(&mut buf);
        if n == 0 {
            break;
        }
        total += n as u64;
        tee(&buf[..n]);
        let Some(log) = log.filter(|_| failed.is_none()) else {
            continue;
        };
        out.clear();
        records.push(&buf[..n], &timestamp(SystemTime::now()), &mut out);
        if let Err(e) = log.append(&out) {
            failed = Some(e);
        }
    }
    if let Some(log) = log.filter(|_| failed.is_none()) {
        out.clear();
        records.finish(&timestamp(SystemTime::now()), &mut out);
        log.append(&out)?;
    }
    failed.map_or(Ok(total), Err)
}

/// How long a pipe's reader lets the app write more after a read that did not fill its
/// buffer, before it reads again: an app writing fast in small pieces (4 KiB at a time)
/// then costs one wake-up, timestamp and write per [`BATCH_SIZE`] or per millisecond,
/// whichever comes first, instead of one per piece; one writing a line now and then has it
/// in its log a millisecond later.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

/// The size a log's pipe is given, so that the app does not block while its reader
/// gathers (`F_SETPIPE_SZ`; the kernel's default is 64 KiB).
const PIPE_SIZE: i32 = 1 << 20;

/// The most a batch holds.
pub const BATCH_SIZE: usize = 256 * 1024;

/// Reads a pipe (or a terminal) in batches: waits for the first bytes, lets the writer go
/// on for [`GATHER`], then takes everything there is, up to the buffer's size.
#[derive(Debug)]
pub struct Batches {
    from: std::fs::File,
    ended: bool,
}

impl Batches {
    /// Batches of the pipe `from`, made non-blocking and larger ([`PIPE_SIZE`]) where the
    /// kernel allows.
    pub fn new(from: std::fs::File) -> Batches {
        use std::os::fd::AsRawFd;
        let fd = from.as_raw_fd();
        // SAFETY: F_SETPIPE_SZ, F_GETFL and F_SETFL take integers; a failure (not a pipe,
        // over the limit) leaves a slower but working reader.
        unsafe {
            libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE_SIZE);
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        Batches { from, ended: false }
    }

    /// Reads what is there into `buf[filled..]`; the new fill.
    fn drain(&mut self, buf: &mut [u8], mut filled: usize) -> usize {
        while !self.ended && filled < buf.len() {
            match self.from.read(&mut buf[filled..]) {
                Ok(0) => self.ended = true,
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // EIO: a terminal whose other side is closed; any error ends the stream.
                Err(_) => self.ended = true,
            }
        }
        filled
    }

    /// The next batch into `buf`; 0 at the end of the stream.
    pub fn next(&mut self, buf: &mut [u8]) -> usize {
        use std::os::fd::AsFd;
        loop {
            if self.ended {
                return 0;
            }
            let mut fds = [nix::poll::PollFd::new(
                self.from.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => self.ended = true,
                Ok(_) => {}
            }
            let mut filled = self.drain(buf, 0);
            if filled > 0 && filled < buf.len() && !self.ended {
                std::thread::sleep(GATHER);
                filled = self.drain(buf, filled);
            }
            if filled > 0 || self.ended {
                return filled;
            }
        }
    }
}

/// [`copy`] for a pipe (or a terminal): read in [`Batches`].
pub fn copy_pipe(from: std::fs::File, stream: LogStream, log: &LogFile) -> Result<u64, LogError> {
    let mut batches = Batches::new(from);
    copy_from(|buf| batches.next(buf), stream, Some(log), |_| {})
}

#[cfg(test)]
mod tests {
    use super::super::reader::{parse, read, Selection};
    use super::*;
    use std::time::Duration;

    const T: &str = "2026-12-05T10:00:00.000000001Z";

    fn records(split: usize, chunks: &[&[u8]]) -> Vec<(bool, String)> {
        let mut records = Records::new(LogStream::Stdout, split);
        let mut out = Vec::new();
        for chunk in chunks {
            records.push(chunk, T, &mut out);
        }
        records.finish(T, &mut out);
        out.split_inclusive(|b| *b == b'\n')
            .map(|line| {
                let record = parse(line).unwrap();
                assert_eq!(record.stream, LogStream::Stdout);
                (record.partial, String::from_utf8(record.text).unwrap())
            })
            .collect()
    }

    fn full(text: &str) -> (bool, String) {
        (false, text.into())
    }

    fn part(text: &str) -> (bool, String) {
        (true, text.into())
    }

    #[test]
    fn each_line_is_a_full_record_without_its_newline_an_empty_one_too() {
        assert_eq!(
            records(16, &[b"a\n\nbc\n"]),
            [full("a"), full(""), full("bc")]
        );
    }

    #[test]
    fn a_line_across_reads_is_one_record() {
        assert_eq!(
            records(16, &[b"ab", b"c", b"d\ne"]),
            [full("abcd"), full("e")]
        );
    }

    #[test]
    fn a_line_longer_than_the_split_is_parts_then_the_rest() {
        assert_eq!(
            records(4, &[b"abcdefghij\n"]),
            [part("abcd"), part("efgh"), full("ij")]
        );
        // Exactly the split size: one full record, no empty one after it.
        assert_eq!(records(4, &[b"abcd\n"]), [full("abcd")]);
        assert_eq!(records(4, &[b"abcdefgh\n"]), [part("abcd"), full("efgh")]);
    }

    #[test]
    fn a_long_line_goes_out_in_parts_before_its_newline_comes() {
        let mut records = Records::new(LogStream::Stderr, 4);
        let mut out = Vec::new();
        records.push(b"abcdefghij", T, &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(text, format!("{T} stderr P abcd\n{T} stderr P efgh\n"));
        out.clear();
        records.push(b"k\n", T, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{T} stderr F ijk\n")
        );
    }

    #[test]
    fn an_unfinished_last_line_is_a_full_record() {
        assert_eq!(records(16, &[b"a\nlast"]), [full("a"), full("last")]);
    }

    #[test]
    fn copy_rotates_at_the_size_and_keeps_the_files_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let config = LogConfig {
            split: 1024,
            max_size: 200,
            max_files: 3,
        };
        let log = LogFile::create(&path, config).unwrap();
        let input: String = (0..40).map(|i| format!("line {i:02}\n")).collect();
        // One record per read: the writer rotates between whole records only.
        for line in input.lines() {
            copy(format!("{line}\n").as_bytes(), LogStream::Stdout, &log).unwrap();
        }
        let mut kept = Vec::new();
        for file in [rotated(&path, 2), rotated(&path, 1), path.clone()] {
            let text = std::fs::read(&file).unwrap();
            assert!(text.len() as u64 <= 200, "{}", file.display());
            for line in text.split_inclusive(|b| *b == b'\n') {
                kept.push(String::from_utf8(parse(line).unwrap().text).unwrap());
            }
        }
        assert!(!rotated(&path, 3).exists());
        // The newest lines, in order, none missing between the first kept and the last.
        let first: usize = kept[0][5..].parse().unwrap();
        let expected: Vec<String> = (first..40).map(|i| format!("line {i:02}")).collect();
        assert_eq!(kept, expected);
        assert!(first > 0);
    }

    #[test]
    fn one_read_of_many_lines_is_spread_over_files_of_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let config = LogConfig {
            split: 1024,
            max_size: 500,
            max_files: 100,
        };
        let log = LogFile::create(&path, config).unwrap();
        let input: String = (0..100).map(|i| format!("line {i:02}\n")).collect();
        copy(input.as_bytes(), LogStream::Stdout, &log).unwrap();
        let mut lines = 0;
        for file in super::super::reader::files(&path) {
            let text = std::fs::read(&file).unwrap();
            assert!(
                text.len() <= 500,
                "{}: {} bytes",
                file.display(),
                text.len()
            );
            lines += text.split_inclusive(|b| *b == b'\n').count();
        }
        assert_eq!(lines, 100);
    }

    #[test]
    fn reopen_writes_to_a_new_file_after_an_outside_rename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let log = LogFile::create(&path, LogConfig::default()).unwrap();
        copy(&b"before\n"[..], LogStream::Stdout, &log).unwrap();
        let moved = dir.path().join("app.log.20261205");
        std::fs::rename(&path, &moved).unwrap();
        log.reopen().unwrap();
        copy(&b"after\n"[..], LogStream::Stderr, &log).unwrap();
        let text = |p: &Path| parse(&std::fs::read(p).unwrap()).unwrap();
        assert_eq!(text(&moved).text, b"before");
        let after = text(&path);
        assert_eq!(
            (after.stream, after.text),
            (LogStream::Stderr, b"after".to_vec())
        );
    }

    #[test]
    fn a_log_renamed_by_someone_else_goes_on_in_a_new_file_at_its_next_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let config = LogConfig {
            max_size: 100,
            max_files: 10,
            ..LogConfig::default()
        };
        let log = LogFile::create(&path, config).unwrap();
        copy(&b"first\n"[..], LogStream::Stdout, &log).unwrap();
        let moved = dir.path().join("elsewhere.log");
        std::fs::rename(&path, &moved).unwrap();
        for _ in 0..4 {
            copy(
                &b"0123456789012345678901234567890123456789\n"[..],
                LogStream::Stdout,
                &log,
            )
            .unwrap();
        }
        assert!(path.exists(), "a new file at the log's path");
        let lines = |p: &Path| std::fs::read_to_string(p).map_or(0, |t| t.lines().count());
        let kept: usize = super::super::reader::files(&path)
            .iter()
            .map(|p| lines(p))
            .sum();
        assert_eq!(lines(&moved) + kept, 5, "no record lost");
    }

    #[test]
    fn one_file_kept_is_truncated_at_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        let config = LogConfig {
            max_size: 100,
            max_files: 1,
            ..LogConfig::default()
        };
        let log = LogFile::create(&path, config).unwrap();
        for _ in 0..10 {
            copy(&b"0123456789\n"[..], LogStream::Stdout, &log).unwrap();
        }
        assert!(std::fs::metadata(&path).unwrap().len() < 100);
        assert!(!rotated(&path, 1).exists());
    }

    #[test]
    fn follow_reads_what_is_written_and_across_a_rotation_until_the_writer_is_gone() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let config = LogConfig {
            max_size: 300,
            max_files: 2,
            ..LogConfig::default()
        };
        let log = Arc::new(LogFile::create(&path, config).unwrap());
        let done = Arc::new(AtomicBool::new(false));
        let read_so_far = Arc::new(AtomicUsize::new(0));
        // The writer waits for the reader to have each line before it writes the next: a
        // follower more than a whole file behind loses that file (it follows the path, as
        // kubelet's does), which a loaded machine must not turn into a failure here.
        let writer = {
            let (log, done, read_so_far) = (log.clone(), done.clone(), read_so_far.clone());
            std::thread::spawn(move || {
                for i in 0..30 {
                    copy(format!("n{i}\n").as_bytes(), LogStream::Stdout, &log).unwrap();
                    let deadline = std::time::Instant::now() + Duration::from_secs(20);
                    while read_so_far.load(Ordering::SeqCst) <= i
                        && std::time::Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        let mut got = Vec::new();
        let selection = Selection {
            follow: true,
            ..Default::default()
        };
        read(
            &path,
            &selection,
            &|| !done.load(Ordering::SeqCst),
            &mut |line| {
                got.push(String::from_utf8(line.text.clone()).unwrap());
                read_so_far.store(got.len(), Ordering::SeqCst);
                true
            },
        )
        .unwrap();
        writer.join().unwrap();
        let expected: Vec<String> = (0..30).map(|i| format!("n{i}")).collect();
        assert_eq!(got, expected);
    }
}
