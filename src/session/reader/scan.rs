//! The validation of a log, batch by batch: seq contiguity, the header, and the line between a
//! torn tail and corruption (SPEC §1.2).
//!
//! Purpose: [`ScanState`] takes each batch [`super::source::LineSource`] yields, validates it
//! whole, and only then hands its records to the sink; a defect is judged by what follows it
//! ([`ScanState::defect`]); [`finish_scan`] runs the loop and reports the [`LogScan`].
//!
//! Invariant: a sink never sees a record of a batch that is not valid whole, and sees records
//! in log order with contiguous seqs; a defect followed by a readable `turn/end` is an error
//! naming file and line, one with no `turn/end` after it ends the valid prefix as a torn tail.
//! Proof: `tests/session/store.rs` (torn tails at every offset, corruption naming file and
//! line), `tests/session/hostile_sessions.rs`, `tests/session/reliability_crash.rs`, and the
//! skim differential tests (a skimmed line gives the sink the envelope a decoded one would).

use super::parse::{lines, parse_line, Parsed};
use super::source::{Batch, Input, LineSource};
use super::{Encoding, LogScan, RecordSink, TornTail};
use crate::session::error::{Result, SessionError};
use crate::session::format::SessionHeader;
use crate::session::skim;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};

pub(super) fn finish_scan<R: Read>(
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

pub(super) struct ScanState {
    pub(super) path: PathBuf,
    pub(super) header: SessionHeader,
    pub(super) encoding: Encoding,
    pub(super) valid_len: u64,
    /// `None` until the first event: real logs exist whose first seq is not 0.
    pub(super) next_seq: Option<u64>,
    pub(super) valid_lines: u64,
    pub(super) missing_final_newline: bool,
    pub(super) torn_tail: Option<TornTail>,
}

impl ScanState {
    pub(super) fn new(
        path: &Path,
        header: SessionHeader,
        encoding: Encoding,
        header_end: u64,
    ) -> Self {
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
    pub(super) fn take_batch<R: Read>(
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
    pub(super) fn skim_plain_line<R: Read>(
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
    pub(super) fn defect<R: Read>(
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
