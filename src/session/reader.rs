//! Streaming reader for one session log (SPEC §1.2).
//!
//! Logs can be large, so records are handed to a sink as they are validated instead of being
//! collected. A batch (one zstd frame, or one line of a plain log) is validated whole before any of
//! its records reach the sink, so a half-written batch is never seen as data. A defect followed by
//! a later `turn/end` is corruption (an error naming file and line); a defect with no `turn/end`
//! after it is a torn tail: the valid prefix is kept and the writer truncates the rest.

use super::error::{Result, SessionError};
use super::format::{Record, SessionHeader, FORMAT_VERSION, TURN_END};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
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
    pub fn of_path(path: &Path) -> Encoding {
        if path.extension().is_some_and(|ext| ext == "zstd") {
            Encoding::Zstd
        } else {
            Encoding::Plain
        }
    }
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
    pub reason: String,
}

/// What a full scan learned about a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogScan {
    pub header: SessionHeader,
    pub encoding: Encoding,
    /// Bytes of the file that hold valid, complete batches.
    pub valid_len: u64,
    /// The file length this scan looked at.
    pub scanned_len: u64,
    /// The seq the next event must have (the last seq + 1; 0 for a log without events).
    pub next_seq: u64,
    /// Whether the valid prefix holds any event.
    pub has_events: bool,
    /// Whether a plain log's valid prefix lacks its final newline.
    pub missing_final_newline: bool,
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
    fn accept(&mut self, record: Record) -> Result<()>;
}

impl<F: FnMut(Record) -> Result<()>> RecordSink for F {
    fn accept(&mut self, record: Record) -> Result<()> {
        self(record)
    }
}

/// Reads the whole valid prefix of the log at `path` into memory.
pub fn read_log(path: &Path) -> Result<(LogScan, Vec<Record>)> {
    let mut records = Vec::new();
    let scan = scan_log(path, &mut |record| {
        records.push(record);
        Ok(())
    })?;
    Ok((scan, records))
}

/// Reads only the header (the first line, or the first frame).
pub fn read_header(path: &Path) -> Result<SessionHeader> {
    let file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    let mut lines = LineSource::new(path, file, Encoding::of_path(path), u64::MAX)?;
    match lines.next_batch()? {
        Some(Batch::Lines { lines, .. }) => match lines.first() {
            Some(line) => parse_header(path, line),
            None => Err(invalid_header(path, "the log is empty")),
        },
        Some(Batch::Defect { reason, .. }) => Err(invalid_header(path, &reason)),
        None => Err(invalid_header(path, "the log is empty")),
    }
}

/// Scans the log at `path`, handing each validated record to `sink`.
pub fn scan_log(path: &Path, sink: &mut dyn RecordSink) -> Result<LogScan> {
    let file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    // A shared lock gives a length at which no batch of ours is half written.
    let len = stable_len(path, &file)?;
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
    let mut source = LineSource::new(path, reader, encoding, len)?;
    let (first, header_end) = match source.next_batch()? {
        Some(Batch::Lines { lines, end_offset }) => (lines, end_offset),
        Some(Batch::Defect { reason, .. }) => return Err(invalid_header(path, &reason)),
        None => return Err(invalid_header(path, "the log is empty")),
    };
    let mut lines = first.into_iter();
    let header = parse_header(path, &lines.next().unwrap_or_default())?;
    let mut state = ScanState::new(path, header, encoding, header_end);
    // A plain log's first batch is the header alone; a zstd header frame written by someone
    // else may carry records too: they form the first batch.
    let rest: Vec<Vec<u8>> = lines.collect();
    if !rest.is_empty() {
        state.take_batch(&mut source, rest, header_end, 2, sink)?;
    }
    finish_scan(state, &mut source, sink)
}

fn finish_scan<R: Read>(
    mut state: ScanState,
    source: &mut LineSource<R>,
    sink: &mut dyn RecordSink,
) -> Result<LogScan> {
    while state.torn_tail.is_none() {
        let first_line = source.line_no + 1;
        match source.next_batch()? {
            None => break,
            Some(Batch::Lines { lines, end_offset }) => {
                state.take_batch(source, lines, end_offset, first_line, sink)?
            }
            Some(Batch::Defect { line, reason }) => state.defect(source, line, reason)?,
        }
    }
    Ok(LogScan {
        header: state.header,
        encoding: state.encoding,
        valid_len: state.valid_len,
        scanned_len: source.limit.min(source.offset),
        next_seq: state.next_seq.unwrap_or(0),
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
    missing_final_newline: bool,
    torn_tail: Option<TornTail>,
}

impl ScanState {
    fn new(path: &Path, header: SessionHeader, encoding: Encoding, header_end: u64) -> Self {
        ScanState {
            path: path.to_path_buf(),
            header,
            encoding,
            valid_len: header_end,
            next_seq: None,
            missing_final_newline: false,
            torn_tail: None,
        }
    }

    /// Validates a whole batch, then hands its records to the sink.
    fn take_batch<R: Read>(
        &mut self,
        source: &mut LineSource<R>,
        lines: Vec<Vec<u8>>,
        end_offset: u64,
        first_line: u64,
        sink: &mut dyn RecordSink,
    ) -> Result<()> {
        let mut records = Vec::with_capacity(lines.len());
        let mut next_seq = self.next_seq;
        for (i, line) in lines.iter().enumerate() {
            let line_no = first_line + i as u64;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match check_record(line, next_seq) {
                Ok(record) => {
                    next_seq = Some(record.first_seq() + record.seq_count());
                    records.push(record);
                }
                Err(reason) => return self.defect(source, line_no, reason),
            }
        }
        for record in records {
            sink.accept(record)?;
        }
        self.next_seq = next_seq;
        self.valid_len = end_offset;
        self.missing_final_newline = source.last_line_unterminated;
        Ok(())
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

/// Parses one record line and checks that it continues the seq run.
fn check_record(line: &[u8], expected_seq: Option<u64>) -> std::result::Result<Record, String> {
    let record: Record =
        serde_json::from_slice(line).map_err(|e| format!("unparsable record: {e}"))?;
    if let Some(expected_seq) = expected_seq.filter(|&e| e != record.first_seq()) {
        return Err(format!(
            "seq gap: expected {expected_seq}, found {} ({})",
            record.first_seq(),
            record.kind()
        ));
    }
    Ok(record)
}

fn parse_header(path: &Path, line: &[u8]) -> Result<SessionHeader> {
    let header: SessionHeader =
        serde_json::from_slice(line).map_err(|e| invalid_header(path, &e.to_string()))?;
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

/// The file length under a shared lock: our writers hold an exclusive lock while appending.
pub(crate) fn stable_len(path: &Path, file: &File) -> Result<u64> {
    file.lock_shared().map_err(|e| SessionError::io(path, e))?;
    let len = file.metadata().map(|m| m.len());
    let _ = file.unlock();
    len.map_err(|e| SessionError::io(path, e))
}

enum Batch {
    /// Whole lines (without their newline) and the file offset just past the batch.
    Lines {
        lines: Vec<Vec<u8>>,
        end_offset: u64,
    },
    /// A batch that cannot be decoded at all (bad zstd frame, torn frame).
    Defect { line: u64, reason: String },
}

/// Yields batches of lines from a plain or zstd log, never past `limit` bytes.
struct LineSource<R: Read> {
    path: PathBuf,
    reader: BufReader<std::io::Take<R>>,
    encoding: Encoding,
    limit: u64,
    /// Bytes consumed from the file.
    offset: u64,
    /// Logical lines handed out so far.
    line_no: u64,
    last_line_unterminated: bool,
    decoder: Option<Decoder<'static>>,
    out: Vec<u8>,
}

const OUT_CHUNK: usize = 64 * 1024;

impl<R: Read> LineSource<R> {
    fn new(path: &Path, reader: R, encoding: Encoding, limit: u64) -> Result<Self> {
        let decoder = match encoding {
            Encoding::Plain => None,
            Encoding::Zstd => Some(Decoder::new().map_err(|e| SessionError::io(path, e))?),
        };
        Ok(LineSource {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(256 * 1024, reader.take(limit)),
            encoding,
            limit,
            offset: 0,
            line_no: 0,
            last_line_unterminated: false,
            decoder,
            out: vec![0; OUT_CHUNK],
        })
    }

    fn next_batch(&mut self) -> Result<Option<Batch>> {
        match self.encoding {
            Encoding::Plain => self.next_plain_line(),
            Encoding::Zstd => self.next_frame(),
        }
    }

    fn next_plain_line(&mut self) -> Result<Option<Batch>> {
        let mut line = Vec::new();
        let n = self
            .reader
            .read_until(b'\n', &mut line)
            .map_err(|e| SessionError::io(&self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.offset += n as u64;
        self.line_no += 1;
        self.last_line_unterminated = line.last() != Some(&b'\n');
        if !self.last_line_unterminated {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        Ok(Some(Batch::Lines {
            lines: vec![line],
            end_offset: self.offset,
        }))
    }

    /// Decodes exactly one zstd frame.
    fn next_frame(&mut self) -> Result<Option<Batch>> {
        let decoder = self.decoder.as_mut().expect("zstd source has a decoder");
        let mut frame = Vec::new();
        let mut started = false;
        loop {
            let available = self
                .reader
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
            loop {
                let mut output = OutBuffer::around(&mut self.out[..]);
                let hint = match decoder.run(&mut input, &mut output) {
                    Ok(hint) => hint,
                    Err(e) => {
                        let consumed = input.pos();
                        self.reader.consume(consumed);
                        self.offset += consumed as u64;
                        let _ = decoder.reinit();
                        return Ok(Some(Batch::Defect {
                            line: self.line_no + 1,
                            reason: format!("bad zstd frame: {e}"),
                        }));
                    }
                };
                let written = output.pos();
                frame.extend_from_slice(&self.out[..written]);
                if hint == 0 {
                    finished = true;
                    break;
                }
                if input.pos() == input.src.len() && written < self.out.len() {
                    break;
                }
            }
            let consumed = input.pos();
            self.reader.consume(consumed);
            self.offset += consumed as u64;
            if finished {
                let _ = decoder.reinit();
                return Ok(Some(self.split_frame(frame)));
            }
        }
    }

    fn split_frame(&mut self, frame: Vec<u8>) -> Batch {
        if frame.last() != Some(&b'\n') && !frame.is_empty() {
            return Batch::Defect {
                line: self.line_no + 1,
                reason: "zstd frame does not end with a newline".into(),
            };
        }
        let lines: Vec<Vec<u8>> = frame
            .split(|b| *b == b'\n')
            .map(<[u8]>::to_vec)
            .collect::<Vec<_>>();
        // `split` yields an empty piece after the final newline.
        let lines = &lines[..lines.len().saturating_sub(1)];
        self.line_no += lines.len() as u64;
        self.last_line_unterminated = false;
        Batch::Lines {
            lines: lines.to_vec(),
            end_offset: self.offset,
        }
    }

    /// Whether any readable `turn/end` record follows the current position.
    fn turn_end_follows(&mut self) -> Result<bool> {
        let mut rest = Vec::new();
        self.reader
            .read_to_end(&mut rest)
            .map_err(|e| SessionError::io(&self.path, e))?;
        self.offset += rest.len() as u64;
        Ok(match self.encoding {
            Encoding::Plain => rest.split(|b| *b == b'\n').any(is_turn_end_line),
            Encoding::Zstd => zstd_frames_contain_turn_end(&rest),
        })
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

/// Tries every zstd frame start in `bytes` and looks for a `turn/end` line in what decodes.
fn zstd_frames_contain_turn_end(bytes: &[u8]) -> bool {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut start = 0;
    while let Some(pos) = bytes[start..].windows(4).position(|w| w == MAGIC) {
        let at = start + pos;
        let mut decoder = match zstd::stream::read::Decoder::new(&bytes[at..]) {
            Ok(d) => d.single_frame(),
            Err(_) => return false,
        };
        let mut out = Vec::new();
        if decoder.read_to_end(&mut out).is_ok() && out.split(|b| *b == b'\n').any(is_turn_end_line)
        {
            return true;
        }
        start = at + 1;
    }
    false
}

/// Reads complete batches of a log from byte `offset` on, for incremental scans (titles).
/// Calls `visit` with each line of each complete batch; returns the offset after the last
/// complete batch. Stops quietly at the first batch it cannot decode.
pub(crate) fn scan_lines_from(
    path: &Path,
    offset: u64,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<u64> {
    let mut file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    let len = stable_len(path, &file)?;
    if offset >= len {
        return Ok(offset.min(len));
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| SessionError::io(path, e))?;
    let mut source = LineSource::new(path, file, Encoding::of_path(path), len - offset)?;
    let mut done = offset;
    while let Some(batch) = source.next_batch()? {
        match batch {
            Batch::Lines { lines, end_offset } => {
                if source.last_line_unterminated {
                    break;
                }
                for line in &lines {
                    visit(line);
                }
                done = offset + end_offset;
            }
            Batch::Defect { .. } => break,
        }
    }
    Ok(done)
}
