//! Streaming reader for one session log (SPEC §1.2).
//!
//! Logs can be large, so records are handed to a sink as they are validated instead of being
//! collected. A batch (one zstd frame, or one line of a plain log) is validated whole before any of
//! its records reach the sink, so a half-written batch is never seen as data. A defect followed by
//! a later `turn/end` is corruption (an error naming file and line); a defect with no `turn/end`
//! after it is a torn tail: the valid prefix is kept and the writer truncates the rest.
//!
//! Reading is where `prepare` spends its time on big logs, so the hot path avoids copies: a plain
//! log is read into one reusable buffer and lines are validated in place; a zstd frame is
//! decompressed straight into a reusable buffer. Records a sink does not want decoded (tool output
//! and packed chunk rows, for a session reference) are only *skimmed*: validated in one pass and
//! reduced to their envelope (see [`super::skim`]); everything else, and every line the skimmer
//! does not vouch for, goes through serde as before. One batch may not exceed
//! [`MAX_BATCH_BYTES`] (a 256 MiB line, or a zstd frame that inflates past it, is a defect), so a
//! hostile log cannot make a reader allocate without bound.

//!
//! Rooms (the API is this file: [`scan_log`], [`resume_scan`], [`read_header`] and the types
//! they answer; the rooms are private): `reader/source.rs` (batches out of a plain or zstd
//! file), `reader/scan.rs` (validating them: seqs, torn tail or corruption), `reader/parse.rs`
//! (one line: serde or the skimmer; the header), `reader/turn_end.rs` (the bounded search for a
//! `turn/end` after a defect) and `reader/lock.rs` (a length no batch of ours is half-way
//! through).

use super::error::{Result, SessionError};
use super::format::{Record, SessionHeader};
pub use super::skim::Envelope;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

mod lock;
mod parse;
mod scan;
mod source;
mod turn_end;

pub(crate) use lock::stable_len;
pub use lock::LOCK_WAIT;
use parse::{check_version, decode_header, invalid_header, lines, parse_header};
use scan::{finish_scan, ScanState};
use source::{Batch, LineSource};

/// On-disk encoding of a log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `session.jsonl`: one record per line.
    Plain,
    /// `session.jsonl.zstd`: concatenated zstd frames, one per batch.
    Zstd,
}

impl Encoding {
    /// The encoding a log file name implies: `.zstd` is zstd, anything else plain.
    pub fn of_path(path: &Path) -> Encoding {
        if path.extension().is_some_and(|ext| ext == "zstd") {
            Encoding::Zstd
        } else {
            Encoding::Plain
        }
    }
    /// The log's file name in a session directory (`session.jsonl` or `session.jsonl.zstd`).
    pub fn file_name(self) -> &'static str {
        match self {
            Encoding::Plain => super::paths::PLAIN_LOG,
            Encoding::Zstd => super::paths::ZSTD_LOG,
        }
    }
}

/// Where a torn tail starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// 1-based logical line number (the header is line 1).
    pub line: u64,
    /// What was wrong with the first line that did not continue the log (as a corruption would
    /// name it).
    pub reason: String,
}

/// What a full scan learned about a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogScan {
    /// The log's header (line 0).
    pub header: SessionHeader,
    /// The encoding the file was read as (from its name).
    pub encoding: Encoding,
    /// Bytes of the file that hold valid, complete batches.
    pub valid_len: u64,
    /// The file length this scan looked at.
    pub scanned_len: u64,
    /// The seq the next event must have (the last seq + 1; 0 for a log without events).
    pub next_seq: u64,
    /// Logical lines in the valid prefix, the header included (where a resumed scan counts from).
    pub valid_lines: u64,
    /// Whether the valid prefix holds any event.
    pub has_events: bool,
    /// Whether a plain log's valid prefix lacks its final newline.
    pub missing_final_newline: bool,
    /// The torn tail after the valid prefix, if any; `None` when the whole file is valid. Nothing
    /// is derived from it and reading never cuts it (SPEC §1.2).
    pub torn_tail: Option<TornTail>,
}

impl LogScan {
    /// The highest seq in the valid prefix, `None` for an empty log.
    pub fn last_seq(&self) -> Option<u64> {
        self.has_events.then(|| self.next_seq.saturating_sub(1))
    }
}

/// Receives validated records in log order.
pub trait RecordSink {
    /// Takes the next record, in seq order. An error stops the scan, which returns it as it is.
    fn accept(&mut self, record: Record) -> Result<()>;

    /// Whether records of type `kind` must be decoded for [`RecordSink::accept`]. A sink that
    /// answers `false` lets the reader validate such a record without decoding it (see
    /// [`super::skim`]) and hand over only its envelope, through
    /// [`RecordSink::accept_envelope`]. The reader may still decode it (lines in an unusual
    /// layout always are), so `accept` must be ready for any type. Default: decode everything.
    fn wants(&self, _kind: &str) -> bool {
        true
    }

    /// A validated record of a type the sink does not want decoded.
    fn accept_envelope(&mut self, _envelope: Envelope<'_>) -> Result<()> {
        Ok(())
    }
}

impl<F: FnMut(Record) -> Result<()>> RecordSink for F {
    fn accept(&mut self, record: Record) -> Result<()> {
        self(record)
    }
}

/// The largest batch (a plain line, or a decompressed zstd frame) a reader accepts.
pub const MAX_BATCH_BYTES: usize = 256 << 20;

/// The largest header line (or first zstd frame, decompressed) [`read_header`] accepts. Headers
/// with a 1 MiB id or cwd are supported (hostile but valid), so the bound leaves room for them;
/// it is what a listing may read of a log whose header never ends.
pub const MAX_HEADER_BYTES: usize = 4 << 20;

/// Read-buffer sizes: small for headers (listing reads thousands), larger for whole scans.
const HEADER_BUFFER: usize = 8 * 1024;
const SCAN_BUFFER: usize = 256 * 1024;
/// Room kept free in a frame buffer before each decompression step.
const OUT_CHUNK: usize = 64 * 1024;

/// Reads the whole valid prefix of the log at `path` into memory.
pub fn read_log(path: &Path) -> Result<(LogScan, Vec<Record>)> {
    let mut records = Vec::new();
    let scan = scan_log(path, &mut |record| {
        records.push(record);
        Ok(())
    })?;
    Ok((scan, records))
}

/// Reads only the header (the first line, or the first frame). A version other than
/// [`FORMAT_VERSION`](super::format::FORMAT_VERSION) is [`SessionError::UnsupportedVersion`].
pub fn read_header(path: &Path) -> Result<SessionHeader> {
    check_version(path, read_header_any_version(path)?)
}

/// Reads only the header, whatever its version (a listing uses it to name a log it cannot
/// read), reading and decompressing at most about [`MAX_HEADER_BYTES`]: a header line (or first
/// frame) longer than that is a "header too long" error, so listing a home of hostile logs
/// stays cheap.
pub fn read_header_any_version(path: &Path) -> Result<SessionHeader> {
    let file = super::files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    read_header_from(path, file, Encoding::of_path(path))
}

/// [`read_header_any_version`] over any reader.
pub fn read_header_from<R: Read>(
    path: &Path,
    mut reader: R,
    encoding: Encoding,
) -> Result<SessionHeader> {
    if encoding == Encoding::Plain {
        // The common case without a buffer on the heap: the header line is within the first
        // read (a listing reads 100,000 headers; the buffer was an allocation each). Anything
        // else goes the general way, the bytes already read first.
        let mut first = [0u8; HEADER_BUFFER];
        let filled = loop {
            match reader.read(&mut first) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(SessionError::io(path, e)),
            }
        };
        if let Some(end) = memchr::memchr(b'\n', &first[..filled]) {
            return match lines(&first[..=end]).next() {
                Some(line) => decode_header(path, line),
                None => Err(invalid_header(path, "the log is empty")),
            };
        }
        return read_header_general(path, (&first[..filled]).chain(reader), encoding);
    }
    read_header_general(path, reader, encoding)
}

/// [`read_header_from`] through a [`LineSource`] (zstd, or a first line longer than one read).
fn read_header_general<R: Read>(
    path: &Path,
    reader: R,
    encoding: Encoding,
) -> Result<SessionHeader> {
    let mut source = LineSource::new(path, reader, encoding, u64::MAX, HEADER_BUFFER)?;
    source.max_batch = MAX_HEADER_BYTES;
    match source.next_batch()? {
        Some(Batch::Lines { range, .. }) => match lines(&source.buf[range]).next() {
            Some(line) => decode_header(path, line),
            None => Err(invalid_header(path, "the log is empty")),
        },
        Some(Batch::Defect { reason, .. }) if source.over_limit => {
            Err(invalid_header(path, &format!("header too long: {reason}")))
        }
        Some(Batch::Defect { reason, .. }) => Err(invalid_header(path, &reason)),
        None => Err(invalid_header(path, "the log is empty")),
    }
}

/// Scans the log at `path`, handing each validated record to `sink`.
pub fn scan_log(path: &Path, sink: &mut dyn RecordSink) -> Result<LogScan> {
    scan_log_waiting(path, sink, LOCK_WAIT)
}

/// [`scan_log`], waiting at most `wait` for a writer's lock (then [`SessionError::Busy`]).
pub fn scan_log_waiting(path: &Path, sink: &mut dyn RecordSink, wait: Duration) -> Result<LogScan> {
    let file = super::files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    // A shared lock gives a length at which no batch of ours is half written.
    let len = stable_len(path, &file, wait)?;
    scan_reader(path, file, Encoding::of_path(path), len, sink)
}

/// Scans a log from an arbitrary reader (tests, fuzzing, in-memory logs).
pub fn scan_reader<R: Read>(
    path: &Path,
    reader: R,
    encoding: Encoding,
    len: u64,
    sink: &mut dyn RecordSink,
) -> Result<LogScan> {
    let mut source = LineSource::new(path, reader, encoding, len, SCAN_BUFFER)?;
    let (range, header_end) = match source.next_batch()? {
        Some(Batch::Lines { range, end_offset }) => (range, end_offset),
        Some(Batch::Defect { reason, .. }) => return Err(invalid_header(path, &reason)),
        None => return Err(invalid_header(path, "the log is empty")),
    };
    let bytes = &source.buf[range.clone()];
    let header_len = memchr::memchr(b'\n', bytes).map_or(bytes.len(), |n| n + 1);
    let header = parse_header(path, &bytes[..header_len])?;
    let mut state = ScanState::new(path, header, encoding, header_end);
    // A plain log may be just a header whose newline is not written yet.
    state.missing_final_newline = source.last_line_unterminated;
    // A plain log's first batch is the header alone; a zstd header frame written by someone
    // else may carry records too: they form the first batch.
    let rest = range.start + header_len..range.end;
    if !rest.is_empty() {
        state.take_batch(&mut source, rest, header_end, 2, sink)?;
    }
    finish_scan(state, &mut source, sink)
}

/// Continues `previous`, a scan of the same log from its start, reading only the bytes past its
/// valid prefix: the result is what a full scan would give now, provided the log only grew by
/// appends (and cuts of what was never valid) since. `sink` must hold what `previous`'s sink had
/// folded. Used by the store's conversation cache.
///
/// A valid prefix that ends in a line without its newline cannot be resumed: bytes appended to
/// that line could make it invalid after all. Such scans must be redone from the start.
pub fn resume_scan(path: &Path, previous: &LogScan, sink: &mut dyn RecordSink) -> Result<LogScan> {
    resume_scan_waiting(path, previous, sink, LOCK_WAIT)
}

/// [`resume_scan`], waiting at most `wait` for a writer's lock (then [`SessionError::Busy`]).
pub fn resume_scan_waiting(
    path: &Path,
    previous: &LogScan,
    sink: &mut dyn RecordSink,
    wait: Duration,
) -> Result<LogScan> {
    if previous.missing_final_newline {
        return Err(SessionError::UnresumableScan {
            path: path.to_path_buf(),
        });
    }
    let mut file = super::files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    let len = stable_len(path, &file, wait)?;
    if len < previous.valid_len {
        return Err(SessionError::Shrank {
            path: path.to_path_buf(),
        });
    }
    file.seek(SeekFrom::Start(previous.valid_len))
        .map_err(|e| SessionError::io(path, e))?;
    let limit = len - previous.valid_len;
    let mut source = LineSource::new(path, file, previous.encoding, limit, SCAN_BUFFER)?;
    source.base = previous.valid_len;
    source.offset = previous.valid_len;
    source.line_no = previous.valid_lines;
    let mut state = ScanState::new(
        path,
        previous.header.clone(),
        previous.encoding,
        previous.valid_len,
    );
    state.next_seq = previous.has_events.then_some(previous.next_seq);
    state.valid_lines = previous.valid_lines;
    finish_scan(state, &mut source, sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// An endless stream of one byte, counting what was read from it.
    struct Endless {
        byte: u8,
        read: Rc<Cell<u64>>,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(self.byte);
            self.read.set(self.read.get() + buf.len() as u64);
            Ok(buf.len())
        }
    }

    #[test]
    fn a_header_without_newline_is_read_bounded() {
        let read = Rc::new(Cell::new(0));
        let endless = Endless {
            byte: b' ',
            read: read.clone(),
        };
        let err = read_header_from(Path::new("log"), endless, Encoding::Plain).unwrap_err();
        assert!(err.to_string().contains("header too long"), "{err}");
        assert!(
            read.get() <= 2 * MAX_HEADER_BYTES as u64,
            "read {} bytes",
            read.get()
        );
    }

    #[test]
    fn a_zstd_header_bomb_is_inflated_bounded() {
        // 64 MiB of spaces compress to a few KB.
        let bomb = zstd::bulk::compress(&vec![b' '; 64 << 20], 3).unwrap();
        assert!(bomb.len() < 64 << 10);
        let err = read_header_from(Path::new("log"), &bomb[..], Encoding::Zstd).unwrap_err();
        assert!(err.to_string().contains("header too long"), "{err}");
        // A header that fits is read.
        let header = br#"{"type":"session","version":0,"id":"a","createdAt":1}
"#;
        let frame = zstd::bulk::compress(header, 3).unwrap();
        let read = read_header_from(Path::new("log"), &frame[..], Encoding::Zstd).unwrap();
        assert_eq!(read.id, "a");
    }
}
