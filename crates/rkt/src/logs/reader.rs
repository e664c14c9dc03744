//! Reading a log back: [`parse`] one record, and [`read`] a log's files as lines of the
//! app's, oldest first, with `rkt logs`' selections (`--tail`, `--since`) and `--follow`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{rotated, LogError, LogStream};

/// One record of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub time: SystemTime,
    pub stream: LogStream,
    /// A `P` record: the line goes on in the stream's next record.
    pub partial: bool,
    /// The text, without the newline the record ends with.
    pub text: Vec<u8>,
}

/// Parses one record, with or without its newline.
pub fn parse(line: &[u8]) -> Result<Record, &'static str> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut fields = line.splitn(4, |b| *b == b' ');
    let time = fields.next().ok_or("no time")?;
    let time = std::str::from_utf8(time)
        .ok()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        .ok_or("the time is not RFC 3339")?;
    let stream = match fields.next() {
        Some(b"stdout") => LogStream::Stdout,
        Some(b"stderr") => LogStream::Stderr,
        _ => return Err("the stream is neither stdout nor stderr"),
    };
    let partial = match fields.next() {
        Some(b"P") => true,
        Some(b"F") => false,
        _ => return Err("the tag is neither P nor F"),
    };
    let text = fields.next().unwrap_or_default().to_vec();
    Ok(Record {
        time,
        stream,
        partial,
        text,
    })
}

/// A line of the app's, put together from its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The time of its first record.
    pub time: SystemTime,
    pub stream: LogStream,
    /// The line, without a newline.
    pub text: Vec<u8>,
}

/// Which lines [`read`] gives.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only the last this many (of those since `since`).
    pub tail: Option<usize>,
    /// Only lines whose first record is at or after this time.
    pub since: Option<SystemTime>,
    /// Keep reading as the log grows, until `running` says the writer is gone and every
    /// file was read to its end.
    pub follow: bool,
}

/// The files of the log at `path`, oldest first: the rotated ones that exist, then `path`.
pub fn files(path: &Path) -> Vec<PathBuf> {
    let mut older: Vec<PathBuf> = (1..)
        .map(|n| rotated(path, n))
        .take_while(|p| p.exists())
        .collect();
    older.reverse();
    older.push(path.to_path_buf());
    older
}

/// Puts lines together from records, per stream.
#[derive(Debug, Default)]
struct Assembler {
    /// A line's parts so far, per stream (stdout, stderr).
    open: [Option<Line>; 2],
}

impl Assembler {
    fn push(&mut self, record: Record) -> Option<Line> {
        let slot = &mut self.open[record.stream as usize];
        let line = match slot.take() {
            Some(mut line) => {
                line.text.extend_from_slice(&record.text);
                line
            }
            None => Line {
                time: record.time,
                stream: record.stream,
                text: record.text,
            },
        };
        if record.partial {
            *slot = Some(line);
            None
        } else {
            Some(line)
        }
    }
}

/// One file being read, and which file it is.
struct Current {
    path: PathBuf,
    reader: BufReader<File>,
    inode: u64,
    line_number: u64,
}

fn open(path: &Path) -> Result<Option<Current>, LogError> {
    match File::open(path) {
        Ok(file) => {
            let inode = file
                .metadata()
                .map_err(LogError::io("read the metadata of", path))?
                .ino();
            Ok(Some(Current {
                path: path.to_path_buf(),
                reader: BufReader::new(file),
                inode,
                line_number: 0,
            }))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LogError::io("open", path)(e)),
    }
}

/// How often `--follow` looks for more.
const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// Reads the log at `path` (its rotated files first), giving `emit` each selected line in
/// order; `emit` returning false stops the reading. With `follow`, waits for more until
/// `running()` is false and the log has been read to its end (a file rotated away while
/// being read is finished first). A record that does not parse is an error naming the file
/// and line.
pub fn read(
    path: &Path,
    selection: &Selection,
    running: &dyn Fn() -> bool,
    emit: &mut dyn FnMut(&Line) -> bool,
) -> Result<(), LogError> {
    let mut assembler = Assembler::default();
    let mut tail = selection
        .tail
        .map(|n| (n, VecDeque::with_capacity(n.min(4096))));
    let selected = |line: &Line| selection.since.is_none_or(|since| line.time >= since);
    // Read what is there: every file to its end, keeping only the tail if asked.
    let mut give = |line: Line, tail: &mut Option<(usize, VecDeque<Line>)>| -> bool {
        if !selected(&line) {
            return true;
        }
        match tail {
            Some((n, kept)) => {
                if *n > 0 {
                    if kept.len() == *n {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
                true
            }
            None => emit(&line),
        }
    };
    let files = files(path);
    let last = files.len() - 1;
    let mut current = None;
    for (i, file) in files.iter().enumerate() {
        let Some(mut reading) = open(file)? else {
            continue;
        };
        if !drain(&mut reading, &mut assembler, &mut |l| give(l, &mut tail))? {
            return Ok(());
        }
        if i == last {
            current = Some(reading);
        }
    }
    if let Some((_, kept)) = tail.take() {
        for line in kept {
            if !emit(&line) {
                return Ok(());
            }
        }
    }
    if !selection.follow {
        return Ok(());
    }
    let mut give = |line: Line| !selected(&line) || emit(&line);
    loop {
        let was_running = running();
        if let Some(reading) = current.as_mut() {
            if !drain(reading, &mut assembler, &mut give)? {
                return Ok(());
            }
        }
        // Rotated or reopened: the old file gets no more records once the new one exists;
        // finish it, then go on with the new one.
        let now = std::fs::metadata(path).ok().map(|m| m.ino());
        if now.is_some() && now != current.as_ref().map(|c| c.inode) {
            if let Some(reading) = current.as_mut() {
                if !drain(reading, &mut assembler, &mut give)? {
                    return Ok(());
                }
            }
            current = open(path)?;
            continue;
        }
        if !was_running {
            return Ok(());
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

/// Reads `reading` to its current end. False when `give` asked to stop.
fn drain(
    reading: &mut Current,
    assembler: &mut Assembler,
    give: &mut dyn FnMut(Line) -> bool,
) -> Result<bool, LogError> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reading
            .reader
            .read_until(b'\n', &mut buf)
            .map_err(LogError::io("read", &reading.path))?;
        if n == 0 {
            return Ok(true);
        }
        if buf.last() != Some(&b'\n') {
            // A record being written: read it whole next time.
            let back = i64::try_from(n).unwrap_or(i64::MAX);
            std::io::Seek::seek_relative(&mut reading.reader, -back)
                .map_err(LogError::io("read", &reading.path))?;
            return Ok(true);
        }
        reading.line_number += 1;
        let record = parse(&buf).map_err(|reason| LogError::Parse {
            path: reading.path.clone(),
            line: reading.line_number,
            reason,
        })?;
        if let Some(line) = assembler.push(record) {
            if !give(line) {
                return Ok(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    fn lines(path: &Path, selection: &Selection) -> Vec<String> {
        let mut got = Vec::new();
        read(path, selection, &|| false, &mut |line| {
            got.push(format!(
                "{} {}",
                line.stream,
                String::from_utf8_lossy(&line.text)
            ));
            true
        })
        .unwrap();
        got
    }

    #[test]
    fn parse_reads_what_kubelet_writes_too() {
        // RFC 3339 with fewer fractional digits, as Go's RFC3339Nano trims them.
        let record = parse(b"2016-10-06T00:17:09.669794202Z stdout P log content 1\n").unwrap();
        assert!(record.partial);
        assert_eq!(record.text, b"log content 1");
        let record = parse(b"2016-10-06T00:17:10.1Z stderr F").unwrap();
        assert_eq!((record.stream, record.partial), (LogStream::Stderr, false));
        assert_eq!(record.text, b"");
        assert_eq!(
            parse(b"2016-10-06 stdout F x"),
            Err("the time is not RFC 3339")
        );
        assert_eq!(
            parse(b"2016-10-06T00:17:10Z out F x"),
            Err("the stream is neither stdout nor stderr")
        );
        assert_eq!(
            parse(b"2016-10-06T00:17:10Z stdout X x"),
            Err("the tag is neither P nor F")
        );
    }

    #[test]
    fn parts_of_a_line_are_joined_per_stream_across_rotated_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        write(
            &rotated(&path, 1),
            "2026-01-01T00:00:01Z stdout P he\n2026-01-01T00:00:01Z stderr F err\n",
        );
        write(
            &path,
            "2026-01-01T00:00:02Z stdout P ll\n2026-01-01T00:00:02Z stdout F o\n",
        );
        assert_eq!(
            lines(&path, &Selection::default()),
            ["stderr err", "stdout hello"]
        );
    }

    #[test]
    fn tail_and_since_select_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let text: String = (1..=9)
            .map(|s| format!("2026-01-01T00:00:0{s}Z stdout F l{s}\n"))
            .collect();
        write(&path, &text);
        let tail = |n| Selection {
            tail: Some(n),
            ..Selection::default()
        };
        assert_eq!(lines(&path, &tail(2)), ["stdout l8", "stdout l9"]);
        assert!(lines(&path, &tail(0)).is_empty());
        assert_eq!(lines(&path, &tail(20)).len(), 9);
        let since = humantime::parse_rfc3339("2026-01-01T00:00:07Z").unwrap();
        let selection = Selection {
            since: Some(since),
            tail: Some(5),
            ..Selection::default()
        };
        assert_eq!(
            lines(&path, &selection),
            ["stdout l7", "stdout l8", "stdout l9"]
        );
    }

    #[test]
    fn a_bad_record_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        write(&path, "2026-01-01T00:00:01Z stdout F ok\nnonsense\n");
        let err = read(&path, &Selection::default(), &|| false, &mut |_| true).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the log {}, line 2, is no CRI log record: the time is not RFC 3339",
                path.display()
            )
        );
    }

    #[test]
    fn a_missing_log_has_no_lines() {
        let dir = tempfile::tempdir().unwrap();
        assert!(lines(&dir.path().join("none.log"), &Selection::default()).is_empty());
    }
}
