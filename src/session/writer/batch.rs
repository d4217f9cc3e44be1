//! One batch: the events to append, their seqs, their bytes, and the one write that puts them
//! in the log.
//!
//! Purpose: a caller hands [`NewEvent`]s (or built records); the writer numbers them from the
//! seq the log needs, checks that the records' seqs continue the log without a gap, encodes the
//! batch (whole lines, or one checksummed zstd frame) and writes it with one `write` under the
//! log's exclusive lock. A plain batch is bracketed by its pending marker (`pending.rs`).
//! Invariant: a batch is written whole or not at all: a failing write (a full disk, or the
//! [`WriteFault`] test seam) cuts the file back to where the batch started and removes the
//! marker, and the writer's `len` and `next_seq` move only after the batch is written. A seq gap
//! is refused before a byte is written ([`SessionError::SeqGap`]).
//! Proof: `tests/session/writer.rs` (`a_failing_write_leaves_the_log_as_it_was`),
//! `tests/agent/write_failures.rs` and `tests/tui/write_safety.rs` (the seam from above),
//! `tests/session/concurrency.rs` (`reader_never_sees_a_partial_batch`) and
//! `tests/session/reliability_crash.rs` (a writer killed at random points).

use super::pending::{pending_marker, write_marker};
use super::SessionWriter;
use crate::session::error::{Result, SessionError};
use crate::session::format::{Event, EventData, Record, SurfaceOp};
use crate::session::reader::Encoding;
use crate::session::surface::Replacement;
use std::fs;
use std::io::Write;
use std::path::Path;

const ZSTD_LEVEL: i32 = 3;

/// An event to append; seq is assigned by the writer.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The typed payload, written in the identified shape.
    pub data: EventData,
    /// `None`: `append` for surface types, absent for others.
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`; `None`: not written.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Epoch ms; `None`: now.
    pub time: Option<i64>,
}

impl NewEvent {
    /// An event with the writer's defaults: `append` for surface types, no provenance, time now.
    pub fn new(data: EventData) -> Self {
        NewEvent {
            data,
            surface_op: None,
            source_event_seqs: None,
            time: None,
        }
    }
    /// Gives the event this `surfaceOp` instead of the default.
    pub fn with_surface_op(mut self, op: SurfaceOp) -> Self {
        self.surface_op = Some(op);
        self
    }
    /// Makes this event a surface replace carrying its provenance, as built by
    /// [`crate::session::surface::compaction_replace`].
    pub fn with_replacement(mut self, replacement: Replacement) -> Self {
        self.surface_op = Some(replacement.surface_op);
        self.source_event_seqs = Some(replacement.source_event_seqs);
        self
    }
}

impl From<EventData> for NewEvent {
    fn from(data: EventData) -> Self {
        NewEvent::new(data)
    }
}

/// A test seam: makes the writer's next writes fail like a full disk, after writing `after`
/// bytes of the batch (so the roll-back of a partial batch is exercised too).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFault {
    pub after: usize,
    pub kind: std::io::ErrorKind,
}

/// The events of `batch` as written: seqs from `first_seq` on, `now` where no time was given.
pub(super) fn number_events(batch: Vec<NewEvent>, first_seq: u64, now: i64) -> Vec<Event> {
    batch
        .into_iter()
        .enumerate()
        .map(|(i, new)| {
            let mut event = Event::new(first_seq + i as u64, new.time.unwrap_or(now), &new.data);
            if new.surface_op.is_some() {
                event.surface_op = new.surface_op;
            }
            event.source_event_seqs = new.source_event_seqs;
            event
        })
        .collect()
}

impl SessionWriter {
    /// Checks the seqs of `records`, then writes them as one batch (the lock is held).
    pub(super) fn write_records_locked(&mut self, records: &[Record]) -> Result<()> {
        let Some(first) = records.first() else {
            return Ok(());
        };
        // The first event of a log may start anywhere (as some real logs do).
        let mut expected = if self.has_events {
            self.next_seq
        } else {
            first.first_seq()
        };
        for record in records {
            if record.first_seq() != expected {
                return Err(SessionError::SeqGap {
                    path: self.path.clone(),
                    seq: record.first_seq(),
                    expected,
                });
            }
            expected += record.seq_count();
        }
        let mut plain = Vec::new();
        if self.needs_newline && self.encoding == Encoding::Plain {
            plain.push(b'\n');
        }
        for record in records {
            serde_json::to_writer(&mut plain, record).expect("records serialize");
            plain.push(b'\n');
        }
        let bytes = encode_batch(self.encoding, &plain, &self.path)?;
        self.write_locked(&bytes)?;
        self.next_seq = expected;
        self.has_events = true;
        self.needs_newline = false;
        Ok(())
    }

    fn write_locked(&mut self, bytes: &[u8]) -> Result<()> {
        let path = &self.path;
        let marker = (self.encoding == Encoding::Plain).then(|| pending_marker(path));
        if let Some(marker) = &marker {
            write_marker(marker, self.len).map_err(|e| SessionError::io(marker, e))?;
        }
        let written = match self.fault {
            Some(fault) => self
                .file
                .write_all(&bytes[..fault.after.min(bytes.len())])
                .and_then(|()| Err(std::io::Error::from(fault.kind))),
            None => self.file.write_all(bytes),
        };
        if let Err(e) = written {
            // Leave no partial batch behind.
            let _ = self.file.set_len(self.len);
            if let Some(marker) = &marker {
                let _ = fs::remove_file(marker);
            }
            return Err(SessionError::io(path, e));
        }
        if let Some(marker) = &marker {
            fs::remove_file(marker).map_err(|e| SessionError::io(marker, e))?;
        }
        self.len += bytes.len() as u64;
        Ok(())
    }
}

/// The bytes of a batch whose lines are `plain`: the lines themselves, or one zstd frame with its
/// checksum.
pub(super) fn encode_batch(encoding: Encoding, plain: &[u8], path: &Path) -> Result<Vec<u8>> {
    match encoding {
        Encoding::Plain => Ok(plain.to_vec()),
        Encoding::Zstd => {
            let mut compressor =
                zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| SessionError::io(path, e))?;
            compressor
                .include_checksum(true)
                .map_err(|e| SessionError::io(path, e))?;
            compressor
                .compress(plain)
                .map_err(|e| SessionError::io(path, e))
        }
    }
}
