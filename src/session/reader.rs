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

use super::error::{Result, SessionError};
use super::format::{Record, SessionHeader, FORMAT_VERSION, TURN_END};
use super::skim::{self, find_byte, Envelope};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

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
/// [`FORMAT_VERSION`] is [`SessionError::UnsupportedVersion`].
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
    let header_len = find_byte(bytes, b'\n').map_or(bytes.len(), |n| n + 1);
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

fn finish_scan<R: Read>(
    mut state: ScanState,
    source: &mut LineSource<R>,
    sink: &mut dyn RecordSink,
) -> Result<LogScan> {
    while state.torn_tail.is_none() {
        if state.skim_plain_line(source, sink)? {
            continue;
        }
        let first_line = source.line_no + 1;
        match source.next_batch()? {
            None => break,
            Some(Batch::Lines { range, end_offset }) => {
                state.take_batch(source, range, end_offset, first_line, sink)?
            }
            Some(Batch::Defect { line, reason }) => state.defect(source, line, reason)?,
        }
    }
    Ok(LogScan {
        header: state.header,
        encoding: state.encoding,
        valid_len: state.valid_len,
        scanned_len: (source.base + source.limit).min(source.offset),
        next_seq: state.next_seq.unwrap_or(0),
        valid_lines: state.valid_lines,
        has_events: state.next_seq.is_some(),
        missing_final_newline: state.missing_final_newline,
        torn_tail: state.torn_tail,
    })
}

struct ScanState {
    path: PathBuf,
    header: SessionHeader,
    encoding: Encoding,
    valid_len: u64,
    /// `None` until the first event: real logs exist whose first seq is not 0.
    next_seq: Option<u64>,
    valid_lines: u64,
    missing_final_newline: bool,
    torn_tail: Option<TornTail>,
}

/// One validated line of a batch, waiting for the rest of its batch.
enum Parsed<'a> {
    Record(Record),
    Envelope(Envelope<'a>),
}

impl Parsed<'_> {
    fn first_seq(&self) -> u64 {
        match self {
            Parsed::Record(r) => r.first_seq(),
            Parsed::Envelope(e) => e.first_seq,
        }
    }
    fn seq_count(&self) -> u64 {
        match self {
            Parsed::Record(r) => r.seq_count(),
            Parsed::Envelope(e) => e.seq_count,
        }
    }
    fn kind(&self) -> &str {
        match self {
            Parsed::Record(r) => r.kind(),
            Parsed::Envelope(e) => e.kind,
        }
    }
}

impl ScanState {
    fn new(path: &Path, header: SessionHeader, encoding: Encoding, header_end: u64) -> Self {
        ScanState {
            path: path.to_path_buf(),
            header,
            encoding,
            valid_len: header_end,
            next_seq: None,
            valid_lines: 1,
            missing_final_newline: false,
            torn_tail: None,
        }
    }

    /// Validates a whole batch (the lines in `source.buf[range]`), then hands its records to
    /// the sink.
    fn take_batch<R: Read>(
        &mut self,
        source: &mut LineSource<R>,
        range: Range<usize>,
        end_offset: u64,
        first_line: u64,
        sink: &mut dyn RecordSink,
    ) -> Result<()> {
        let mut next_seq = self.next_seq;
        let mut failure = None;
        {
            let mut parsed = Vec::new();
            for (i, line) in lines(&source.buf[range]).enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match parse_line(line, &*sink, next_seq) {
                    Ok(record) => {
                        next_seq = Some(record.first_seq() + record.seq_count());
                        parsed.push((first_line + i as u64, record));
                    }
                    Err(reason) => {
                        failure = Some((first_line + i as u64, reason));
                        break;
                    }
                }
            }
            if failure.is_none() {
                for (line, record) in parsed {
                    match record {
                        Parsed::Record(record) => sink.accept(record),
                        Parsed::Envelope(envelope) => sink.accept_envelope(envelope),
                    }
                    .map_err(|e| e.in_log(&self.path, line))?;
                }
            }
        }
        if let Some((line, reason)) = failure {
            return self.defect(source, line, reason);
        }
        self.next_seq = next_seq;
        self.valid_len = end_offset;
        self.valid_lines = source.line_no;
        self.missing_final_newline = source.last_line_unterminated;
        Ok(())
    }

    /// The fast path for plain logs: skims the next line in place when the sink does not want it
    /// decoded, finding the line's end as part of the skim instead of searching for it first.
    /// Returns false (having consumed nothing) when the regular path must take the line: a
    /// wanted or unusual record, an incomplete buffer, a defect.
    fn skim_plain_line<R: Read>(
        &mut self,
        source: &mut LineSource<R>,
        sink: &mut dyn RecordSink,
    ) -> Result<bool> {
        if !matches!(source.input, Input::Plain(_)) {
            return Ok(false);
        }
        let unread = &source.buf[source.pos..source.filled];
        let skimmed = skim::peek_kind(unread)
            .filter(|kind| !sink.wants(kind))
            .and_then(|_| skim::skim_prefix(unread))
            .filter(|(_, end)| unread.get(*end) == Some(&b'\n'));
        let Some((envelope, end)) = skimmed else {
            return Ok(false);
        };
        if self
            .next_seq
            .is_some_and(|expected| expected != envelope.first_seq)
        {
            return Ok(false);
        }
        let Some(next_seq) = envelope.first_seq.checked_add(envelope.seq_count) else {
            return Ok(false);
        };
        sink.accept_envelope(envelope)
            .map_err(|e| e.in_log(&self.path, source.line_no + 1))?;
        let len = end + 1;
        source.pos += len;
        source.offset += len as u64;
        source.line_no += 1;
        source.last_line_unterminated = false;
        self.next_seq = Some(next_seq);
        self.valid_len = source.offset;
        self.valid_lines = source.line_no;
        self.missing_final_newline = false;
        Ok(true)
    }

    /// A defect at `line`: corruption if a `turn/end` follows, else a torn tail.
    fn defect<R: Read>(
        &mut self,
        source: &mut LineSource<R>,
        line: u64,
        reason: String,
    ) -> Result<()> {
        if source.turn_end_follows()? {
            return Err(SessionError::Corrupt {
                path: self.path.clone(),
                line,
                reason,
            });
        }
        self.torn_tail = Some(TornTail { line, reason });
        Ok(())
    }
}

/// The lines of a batch: split at `\n`, without the empty piece after a final newline.
fn lines(bytes: &[u8]) -> Lines<'_> {
    Lines {
        rest: bytes.strip_suffix(b"\n").unwrap_or(bytes),
        done: bytes.is_empty(),
    }
}

struct Lines<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.done {
            return None;
        }
        match find_byte(self.rest, b'\n') {
            Some(n) => {
                let line = &self.rest[..n];
                self.rest = &self.rest[n + 1..];
                Some(line)
            }
            None => {
                self.done = true;
                Some(self.rest)
            }
        }
    }
}

/// Parses one record line (skimming it when the sink does not want it decoded) and checks that
/// it continues the seq run.
fn parse_line<'a>(
    line: &'a [u8],
    sink: &dyn RecordSink,
    expected_seq: Option<u64>,
) -> std::result::Result<Parsed<'a>, String> {
    let skimmed = skim::peek_kind(line)
        .filter(|kind| !sink.wants(kind))
        .and_then(|_| skim::skim(line));
    let parsed = match skimmed {
        Some(envelope) => Parsed::Envelope(envelope),
        None => Parsed::Record(
            serde_json::from_slice(line).map_err(|e| format!("unparsable record: {e}"))?,
        ),
    };
    if let Some(expected_seq) = expected_seq.filter(|&e| e != parsed.first_seq()) {
        return Err(format!(
            "seq gap: expected {expected_seq}, found {} ({})",
            parsed.first_seq(),
            parsed.kind()
        ));
    }
    if parsed.first_seq().checked_add(parsed.seq_count()).is_none() {
        return Err(format!("seq {} out of range", parsed.first_seq()));
    }
    Ok(parsed)
}

fn parse_header(path: &Path, line: &[u8]) -> Result<SessionHeader> {
    check_version(path, decode_header(path, line)?)
}

fn decode_header(path: &Path, line: &[u8]) -> Result<SessionHeader> {
    serde_json::from_slice(line).map_err(|e| invalid_header(path, &e.to_string()))
}

fn check_version(path: &Path, header: SessionHeader) -> Result<SessionHeader> {
    if header.version != FORMAT_VERSION {
        return Err(SessionError::UnsupportedVersion {
            path: path.to_path_buf(),
            version: header.version,
        });
    }
    Ok(header)
}

fn invalid_header(path: &Path, reason: &str) -> SessionError {
    SessionError::InvalidHeader {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// How long a reader waits for a writer's lock before it reports the session busy. Our writers
/// hold it for one `write`; a lock held longer belongs to a stuck or hostile process.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The file length under a shared lock: our writers hold an exclusive lock while appending. A
/// plain log whose last writer died mid-batch ends, for readers, where that batch starts (see
/// [`super::writer`]): a live writer removes its marker before it unlocks.
///
/// The lock is tried, not awaited: another process holding it for longer than `wait` makes this
/// a [`SessionError::Busy`] naming the log, never a reader blocked forever.
pub(crate) fn stable_len(path: &Path, file: &File, wait: Duration) -> Result<u64> {
    lock_shared_within(path, file, wait)?;
    let len = file
        .metadata()
        .map(|m| m.len())
        .map(|len| match super::writer::pending_batch_start(path) {
            Some(start) => len.min(start),
            None => len,
        });
    let _ = file.unlock();
    len.map_err(|e| SessionError::io(path, e))
}

/// Takes a shared lock on `file`, retrying with growing pauses until `wait` has passed.
fn lock_shared_within(path: &Path, file: &File, wait: Duration) -> Result<()> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock_shared() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(SessionError::io(path, e)),
        }
        let waited = started.elapsed();
        if waited >= wait {
            return Err(SessionError::Busy {
                path: path.to_path_buf(),
                waited,
            });
        }
        std::thread::sleep(pause.min(wait - waited));
        // Short pauses: a writer appending back to back leaves only brief gaps between batches,
        // and a long pause would miss every one of them.
        pause = (pause * 2).min(Duration::from_millis(4));
    }
}

enum Batch {
    /// Whole lines in `LineSource::buf[range]` (each ending in `\n`, except the final line of a
    /// plain log that lost its newline), and the file offset just past the batch. The range is
    /// valid until the next call to `next_batch`.
    Lines {
        range: Range<usize>,
        end_offset: u64,
    },
    /// A batch that cannot be decoded at all (bad zstd frame, torn frame, oversized batch).
    Defect { line: u64, reason: String },
}

enum Input<R: Read> {
    /// Plain logs are read straight into `LineSource::buf`.
    Plain(std::io::Take<R>),
    /// zstd input is buffered; frames are decompressed into `LineSource::buf`.
    Zstd {
        reader: BufReader<std::io::Take<R>>,
        decoder: PooledDecoder,
    },
}

/// A zstd decompression context, reused by the logs read on one thread: creating one costs more
/// than reading a session header, and the first listing of a home reads thousands of them.
struct PooledDecoder(Option<Box<Decoder<'static>>>);

thread_local! {
    static DECODERS: std::cell::RefCell<Option<Box<Decoder<'static>>>> =
        const { std::cell::RefCell::new(None) };
}

impl PooledDecoder {
    fn take() -> std::io::Result<PooledDecoder> {
        let pooled = DECODERS
            .try_with(|slot| slot.borrow_mut().take())
            .ok()
            .flatten();
        Ok(PooledDecoder(Some(match pooled {
            Some(decoder) => decoder,
            None => Box::new(Decoder::new()?),
        })))
    }
}

impl std::ops::Deref for PooledDecoder {
    type Target = Decoder<'static>;
    fn deref(&self) -> &Self::Target {
        self.0.as_deref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for PooledDecoder {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_deref_mut().expect("present until dropped")
    }
}

impl Drop for PooledDecoder {
    fn drop(&mut self) {
        // Back to the thread's slot, reset to a fresh frame (a read may stop inside one); a
        // context that cannot be reset is dropped instead.
        if let Some(mut decoder) = self.0.take() {
            if decoder.reinit().is_ok() {
                let _ = DECODERS.try_with(|slot| *slot.borrow_mut() = Some(decoder));
            }
        }
    }
}

/// Yields batches of lines from a plain or zstd log, never past `limit` bytes.
struct LineSource<R: Read> {
    path: PathBuf,
    input: Input<R>,
    /// Bytes this source may read, from `base`.
    limit: u64,
    /// The file offset the reader starts at.
    base: u64,
    /// The file offset reached.
    offset: u64,
    /// Logical lines handed out so far.
    line_no: u64,
    last_line_unterminated: bool,
    /// Plain: the read buffer, unconsumed in `pos..filled`. zstd: the current frame.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    eof: bool,
    /// The largest batch accepted: [`MAX_BATCH_BYTES`], or [`MAX_HEADER_BYTES`] for a header read.
    max_batch: usize,
    /// The last defect was a batch over `max_batch`.
    over_limit: bool,
    /// A plain source stopped inside an over-long line: what follows is still that line.
    mid_line: bool,
}

/// Room kept free in a frame buffer before each decompression step.
const OUT_CHUNK: usize = 64 * 1024;

impl<R: Read> LineSource<R> {
    fn new(path: &Path, reader: R, encoding: Encoding, limit: u64, buffer: usize) -> Result<Self> {
        let reader = reader.take(limit);
        let input = match encoding {
            Encoding::Plain => Input::Plain(reader),
            Encoding::Zstd => Input::Zstd {
                reader: BufReader::with_capacity(buffer, reader),
                decoder: PooledDecoder::take().map_err(|e| SessionError::io(path, e))?,
            },
        };
        Ok(LineSource {
            path: path.to_path_buf(),
            input,
            limit,
            base: 0,
            offset: 0,
            line_no: 0,
            last_line_unterminated: false,
            buf: match encoding {
                // No bigger than what is left to read (a small log is not read through, nor
                // zeroed, a 256 KiB buffer); it grows for a long line as any buffer does.
                Encoding::Plain => {
                    let left = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
                    vec![0; buffer.min(left.max(HEADER_BUFFER))]
                }
                Encoding::Zstd => Vec::new(),
            },
            pos: 0,
            filled: 0,
            eof: false,
            max_batch: MAX_BATCH_BYTES,
            over_limit: false,
            mid_line: false,
        })
    }

    fn next_batch(&mut self) -> Result<Option<Batch>> {
        match self.input {
            Input::Plain(_) => self.next_plain_line(),
            Input::Zstd { .. } => self.next_frame(),
        }
    }

    fn next_plain_line(&mut self) -> Result<Option<Batch>> {
        // Bytes after `pos` already searched for a newline.
        let mut searched = 0;
        loop {
            let unread = &self.buf[self.pos..self.filled];
            let found = find_byte(&unread[searched..], b'\n');
            if found.is_some() || self.eof {
                if unread.is_empty() {
                    return Ok(None);
                }
                let len = found.map_or(unread.len(), |n| searched + n + 1);
                let range = self.pos..self.pos + len;
                self.pos += len;
                self.offset += len as u64;
                self.line_no += 1;
                self.last_line_unterminated = found.is_none();
                return Ok(Some(Batch::Lines {
                    range,
                    end_offset: self.offset,
                }));
            }
            searched = unread.len();
            // A long line that does not even start a JSON object is a defect now, not after
            // `max_batch` bytes of it were buffered; the rest of it is skipped, not kept.
            let not_json = unread
                .iter()
                .find(|b| !matches!(b, b' ' | b'\t' | b'\r'))
                .is_some_and(|&b| b != b'{');
            if not_json {
                self.mid_line = true;
                self.pos = self.filled;
                self.offset += searched as u64;
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason: format!(
                        "unparsable record: a line of over {searched} bytes that is not a JSON object"
                    ),
                }));
            }
            if searched >= self.max_batch {
                self.over_limit = true;
                self.mid_line = true;
                self.pos = self.filled;
                self.offset += searched as u64;
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason: format!("line longer than {} bytes", self.max_batch),
                }));
            }
            self.fill()?;
        }
    }

    /// Moves unread bytes to the front, grows a full buffer, and reads more.
    fn fill(&mut self) -> Result<()> {
        let Input::Plain(reader) = &mut self.input else {
            return Ok(());
        };
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.filled, 0);
            self.filled -= self.pos;
            self.pos = 0;
        }
        if self.filled == self.buf.len() {
            let grown = (self.buf.len() * 2).clamp(HEADER_BUFFER, self.max_batch + 1);
            self.buf.resize(grown, 0);
        }
        loop {
            match reader.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(SessionError::io(&self.path, e)),
            }
            return Ok(());
        }
    }

    /// Decodes exactly one zstd frame into `buf`.
    fn next_frame(&mut self) -> Result<Option<Batch>> {
        let Input::Zstd { reader, decoder } = &mut self.input else {
            return Ok(None);
        };
        self.buf.clear();
        let mut started = false;
        loop {
            let available = reader
                .fill_buf()
                .map_err(|e| SessionError::io(&self.path, e))?;
            if available.is_empty() {
                if !started {
                    return Ok(None);
                }
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason: "incomplete zstd frame".into(),
                }));
            }
            started = true;
            let mut input = InBuffer::around(available);
            let mut finished = false;
            let mut failure = None;
            loop {
                if self.buf.capacity() - self.buf.len() < OUT_CHUNK {
                    if self.buf.len() >= self.max_batch {
                        self.over_limit = true;
                        failure =
                            Some(format!("zstd frame inflates past {} bytes", self.max_batch));
                        break;
                    }
                    self.buf.reserve(OUT_CHUNK.max(self.buf.len()));
                }
                let before = self.buf.len();
                // Decompresses into the spare capacity; the buffer's length follows.
                let (hint, written) = {
                    let mut output = OutBuffer::around_pos(&mut self.buf, before);
                    let hint = decoder.run(&mut input, &mut output);
                    (hint, output.pos() - before)
                };
                match hint {
                    Ok(0) => {
                        finished = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failure = Some(format!("bad zstd frame: {e}"));
                        break;
                    }
                }
                let room_left = self.buf.capacity() > self.buf.len();
                if input.pos() == input.src.len() && (written == 0 || room_left) {
                    break;
                }
            }
            let consumed = input.pos();
            reader.consume(consumed);
            self.offset += consumed as u64;
            if let Some(reason) = failure {
                let _ = decoder.reinit();
                return Ok(Some(Batch::Defect {
                    line: self.line_no + 1,
                    reason,
                }));
            }
            if finished {
                let _ = decoder.reinit();
                return Ok(Some(self.frame_lines()));
            }
        }
    }

    fn frame_lines(&mut self) -> Batch {
        if self.buf.last() != Some(&b'\n') && !self.buf.is_empty() {
            return Batch::Defect {
                line: self.line_no + 1,
                reason: "zstd frame does not end with a newline".into(),
            };
        }
        self.line_no += lines(&self.buf).count() as u64;
        self.last_line_unterminated = false;
        Batch::Lines {
            range: 0..self.buf.len(),
            end_offset: self.offset,
        }
    }

    /// Whether any readable `turn/end` record follows the current position.
    ///
    /// This decides between a torn tail and corruption after a defect, and the rest of the log
    /// may be gigabytes: it is streamed through a bounded buffer, and only a line that may be a
    /// `turn/end` record is kept (see [`TurnEndScanner`]), so memory does not depend on the
    /// log's size.
    fn turn_end_follows(&mut self) -> Result<bool> {
        match &mut self.input {
            Input::Plain(reader) => {
                // The rest of an over-long line is skipped, not kept.
                let mut scanner = TurnEndScanner {
                    skipping: self.mid_line,
                    ..TurnEndScanner::default()
                };
                loop {
                    let unread = &self.buf[self.pos..self.filled];
                    let read = unread.len();
                    let found = scanner.feed(unread);
                    self.pos = self.filled;
                    self.offset += read as u64;
                    if found {
                        return Ok(true);
                    }
                    if self.eof {
                        return Ok(scanner.finish());
                    }
                    // A buffer grown for an over-long line is not needed for skimming.
                    if self.buf.len() > SCAN_BUFFER {
                        self.buf = vec![0; SCAN_BUFFER];
                    }
                    self.pos = 0;
                    self.filled = 0;
                    loop {
                        match reader.read(&mut self.buf) {
                            Ok(0) => self.eof = true,
                            Ok(n) => self.filled = n,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(SessionError::io(&self.path, e)),
                        }
                        break;
                    }
                }
            }
            Input::Zstd { reader, .. } => {
                let (found, read) =
                    zstd_turn_end_follows(reader).map_err(|e| SessionError::io(&self.path, e))?;
                self.offset += read;
                Ok(found)
            }
        }
    }
}

/// Finds a `turn/end` line in a stream of bytes fed in pieces, keeping only the current line,
/// and only while it may still be one: a line in the canonical layout whose `type` is something
/// else is skipped as soon as its type is read; other lines are kept up to [`MAX_BATCH_BYTES`]
/// (a longer line is a defect, not a record).
#[derive(Default)]
struct TurnEndScanner {
    line: Vec<u8>,
    skipping: bool,
    found: bool,
}

impl TurnEndScanner {
    /// Feeds the next bytes; true once a `turn/end` line was found.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() && !self.found {
            let newline = find_byte(bytes, b'\n');
            let piece = &bytes[..newline.unwrap_or(bytes.len())];
            if !self.skipping {
                if self.line.len() + piece.len() > MAX_BATCH_BYTES {
                    self.skip();
                } else {
                    self.line.extend_from_slice(piece);
                    if self.cannot_be_turn_end() {
                        self.skip();
                    }
                }
            }
            match newline {
                Some(n) => {
                    self.end_line();
                    bytes = &bytes[n + 1..];
                }
                None => break,
            }
        }
        self.found
    }

    /// The stream ended (a final line without its newline counts too).
    fn finish(mut self) -> bool {
        if !self.found && !self.line.is_empty() {
            self.end_line();
        }
        self.found
    }

    fn end_line(&mut self) {
        if !self.skipping && is_turn_end_line(&self.line) {
            self.found = true;
        }
        self.skipping = false;
        self.line.clear();
        if self.line.capacity() > SCAN_BUFFER {
            self.line = Vec::new();
        }
    }

    fn skip(&mut self) {
        self.skipping = true;
        self.line = Vec::new();
    }

    /// The line so far is in the canonical layout with a `type` other than `turn/end`.
    fn cannot_be_turn_end(&self) -> bool {
        skim::peek_kind(&self.line).is_some_and(|kind| kind != TURN_END)
    }
}

/// The largest compressed frame worth decoding: a frame inflating to at most [`MAX_BATCH_BYTES`]
/// cannot be much larger than that (zstd's worst case adds a few bytes per 128 KiB block).
const MAX_COMPRESSED_FRAME: usize = MAX_BATCH_BYTES + (MAX_BATCH_BYTES >> 10) + 4096;

/// Tries every zstd frame start in the rest of `reader` and looks for a `turn/end` line in each
/// frame that decodes completely. Compressed bytes are held only from the candidate frame start
/// on (at most [`MAX_COMPRESSED_FRAME`]), decoded bytes only as the current line. Returns
/// whether one was found and the bytes read.
fn zstd_turn_end_follows<R: BufRead>(reader: &mut R) -> std::io::Result<(bool, u64)> {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut window: Vec<u8> = Vec::new();
    let mut eof = false;
    let mut read = 0u64;
    // Where the search for the next frame start resumes, in `window`.
    let mut start = 0;
    loop {
        let candidate = window[start..]
            .windows(4)
            .position(|w| w == MAGIC)
            .map(|p| start + p);
        let Some(at) = candidate else {
            if eof {
                return Ok((false, read));
            }
            // Keep only what could begin a magic number split across reads.
            let keep = window.len().saturating_sub(3).max(start);
            window.drain(..keep);
            start = 0;
            read += fill_window(reader, &mut window, SCAN_BUFFER, &mut eof)? as u64;
            continue;
        };
        // Bytes before the candidate are done with.
        if at > SCAN_BUFFER {
            window.drain(..at);
            start = 0;
            continue;
        }
        match decode_frame_for_turn_end(&window[at..]) {
            FrameOutcome::Found => return Ok((true, read)),
            FrameOutcome::NeedMore if !eof && window.len() - at < MAX_COMPRESSED_FRAME => {
                // Read as much again (bounded), then decode this candidate again.
                let more = (window.len() - at).clamp(SCAN_BUFFER, MAX_COMPRESSED_FRAME);
                read += fill_window(reader, &mut window, more, &mut eof)? as u64;
            }
            _ => start = at + 1,
        }
    }
}

/// Appends up to `want` bytes of `reader` to `window`.
fn fill_window<R: BufRead>(
    reader: &mut R,
    window: &mut Vec<u8>,
    want: usize,
    eof: &mut bool,
) -> std::io::Result<usize> {
    let mut added = 0;
    while added < want {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            *eof = true;
            break;
        }
        let n = available.len().min(want - added);
        window.extend_from_slice(&available[..n]);
        reader.consume(n);
        added += n;
    }
    Ok(added)
}

enum FrameOutcome {
    /// The frame decoded completely and holds a `turn/end` line.
    Found,
    /// The frame decoded completely without one, or is not a frame.
    NotFound,
    /// The bytes end inside the frame.
    NeedMore,
}

/// Decodes one zstd frame at the start of `bytes`, streaming its output through a
/// [`TurnEndScanner`].
fn decode_frame_for_turn_end(bytes: &[u8]) -> FrameOutcome {
    let Ok(mut decoder) = Decoder::new() else {
        return FrameOutcome::NotFound;
    };
    let mut input = InBuffer::around(bytes);
    let mut out = vec![0u8; OUT_CHUNK];
    let mut scanner = TurnEndScanner::default();
    let mut produced = 0usize;
    loop {
        let mut output = OutBuffer::around(&mut out[..]);
        let hint = decoder.run(&mut input, &mut output);
        let written = output.pos();
        produced += written;
        scanner.feed(&out[..written]);
        match hint {
            Err(_) => return FrameOutcome::NotFound,
            Ok(0) => {
                return if scanner.finish() {
                    FrameOutcome::Found
                } else {
                    FrameOutcome::NotFound
                }
            }
            Ok(_) => {}
        }
        if produced > MAX_BATCH_BYTES {
            return FrameOutcome::NotFound;
        }
        if input.pos() == bytes.len() && written < out.len() {
            return FrameOutcome::NeedMore;
        }
    }
}

fn is_turn_end_line(line: &[u8]) -> bool {
    // Cheap filter first: most lines are not turn ends.
    if !line
        .windows(TURN_END.len())
        .any(|w| w == TURN_END.as_bytes())
    {
        return false;
    }
    matches!(serde_json::from_slice::<Record>(line), Ok(r) if r.kind() == TURN_END)
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
