//! Lines and the records in them: splitting a batch into lines, one record line parsed (or
//! skimmed), and the header line.
//!
//! Purpose: the per-line decisions of a scan — serde, or the skimmer when the sink does not want
//! the record decoded and the skimmer vouches for the line — apart from the batch loop.
//!
//! Invariant: a line the skimmer answers is one serde would accept with the same envelope
//! (the skimmer's soundness, [`crate::session::skim`]); anything it does not vouch for goes to
//! serde, which stays the one definition of a valid record and of its errors. A header of a
//! version other than [`FORMAT_VERSION`] is [`SessionError::UnsupportedVersion`]. Proof:
//! `tests/session/reliability_skim.rs`, `tests/session/versions.rs`.

use super::RecordSink;
use crate::session::error::{Result, SessionError};
use crate::session::format::Record;
use crate::session::format::{SessionHeader, FORMAT_VERSION};
use crate::session::skim;
use crate::session::skim::Envelope;
use std::path::Path;

/// The lines of a batch: split at `\n`, without the empty piece after a final newline.
pub(super) fn lines(bytes: &[u8]) -> Lines<'_> {
    Lines {
        rest: bytes.strip_suffix(b"\n").unwrap_or(bytes),
        done: bytes.is_empty(),
    }
}

pub(super) struct Lines<'a> {
    pub(super) rest: &'a [u8],
    pub(super) done: bool,
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.done {
            return None;
        }
        match memchr::memchr(b'\n', self.rest) {
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
pub(super) fn parse_line<'a>(
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

pub(super) fn parse_header(path: &Path, line: &[u8]) -> Result<SessionHeader> {
    check_version(path, decode_header(path, line)?)
}

pub(super) fn decode_header(path: &Path, line: &[u8]) -> Result<SessionHeader> {
    serde_json::from_slice(line).map_err(|e| invalid_header(path, &e.to_string()))
}

pub(super) fn check_version(path: &Path, header: SessionHeader) -> Result<SessionHeader> {
    if header.version != FORMAT_VERSION {
        return Err(SessionError::UnsupportedVersion {
            path: path.to_path_buf(),
            version: header.version,
        });
    }
    Ok(header)
}

pub(super) fn invalid_header(path: &Path, reason: &str) -> SessionError {
    SessionError::InvalidHeader {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// One validated line of a batch, waiting for the rest of its batch.
pub(super) enum Parsed<'a> {
    Record(Record),
    Envelope(Envelope<'a>),
}

impl Parsed<'_> {
    pub(super) fn first_seq(&self) -> u64 {
        match self {
            Parsed::Record(r) => r.first_seq(),
            Parsed::Envelope(e) => e.first_seq,
        }
    }
    pub(super) fn seq_count(&self) -> u64 {
        match self {
            Parsed::Record(r) => r.seq_count(),
            Parsed::Envelope(e) => e.seq_count,
        }
    }
    pub(super) fn kind(&self) -> &str {
        match self {
            Parsed::Record(r) => r.kind(),
            Parsed::Envelope(e) => e.kind,
        }
    }
}
