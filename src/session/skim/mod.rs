//! Validating a record line without decoding its payload.
//!
//! Large logs are mostly tool output (`tool/result`) and packed chunk rows, and a session
//! reference never reads either: it needs their seqs (for contiguity and `capturedThroughSeq`) and
//! their surface ops (for the fold), nothing else. Decoding them with serde costs about as much as
//! everything else in `prepare` together, so the reader can *skim* such lines instead: one pass
//! that checks the whole line is JSON serde would accept as a [`super::Record`], and returns only
//! the envelope ([`Envelope`]).
//!
//! Skimming is an optimization, never a second definition of the format: it accepts only the
//! canonical layout writers produce (`type` first, known keys, integers where serde wants them) and
//! answers `None` for everything else — unusual but valid lines as well as invalid ones — so that
//! the reader falls back to the serde parser, which stays the single source of truth for what is
//! valid and for the error messages. The property that matters is *soundness*: whatever `skim`
//! accepts, serde accepts with the same envelope. `tests/session/reliability_skim.rs` and the fuzz target
//! `skim_vs_serde` check exactly that.
//!
//! This file holds the entry points and the record's envelope; the grammar is in rooms of one
//! idea each: `cursor.rs` (the cursor over a line: tokens, integers as serde reads them, any
//! value, the surface op), `packed.rs` (a packed row's `data`, checked the way serde decodes
//! it), `string_body.rs` (string bodies, sixty-four bytes at a time from their masks) and
//! `simd.rs` (the byte classes those masks come from, the only `unsafe` of the library besides
//! `mallopt`), and `walk.rs` (a walk over another agent's records, key by key, for readers that
//! keep a few fields and skip the rest). Their unit tests are in `tests.rs`.

use super::format::{is_surface_type, PackedKind, SurfaceOp};
use cursor::{Cursor, VALUE_DEPTH};

mod cursor;
mod packed;
mod simd;
mod string_body;
#[cfg(test)]
mod tests;
mod walk;

pub use walk::Walk;

/// The envelope of a record whose payload was validated but not decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The record `type` (an event type, or a packed row type).
    pub kind: &'a str,
    /// `seq`, or `seq0` for a packed row.
    pub first_seq: u64,
    /// 1 for an event; the member count for a packed row.
    pub seq_count: u64,
    /// `time`, or `time0` for a packed row.
    pub time: i64,
    /// A packed chunk row (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`).
    pub packed: bool,
    /// `surfaceOp`; `None` when absent (always for a packed row).
    pub surface_op: Option<SurfaceOp>,
    /// `sourceEventSeqs`; `None` when absent.
    pub source_event_seqs: Option<Vec<u64>>,
}

/// The record `type` of a line in the canonical layout (`{"type":"…",`), without validating the
/// rest. `None` when the line does not start that way.
pub fn peek_kind(line: &[u8]) -> Option<&str> {
    const PREFIX: &[u8] = b"{\"type\":\"";
    let rest = line.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

/// Validates `line` (one record, without its newline; trailing whitespace allowed) and returns
/// its envelope, or `None` when the line is not in the canonical layout or not valid.
pub fn skim(line: &[u8]) -> Option<Envelope<'_>> {
    match skim_prefix(line)? {
        (envelope, end) if end == line.len() => Some(envelope),
        _ => None,
    }
}

/// Skims the record at the start of `bytes` (which may run on past the line) and returns its
/// envelope and where the record and its trailing spaces end: at a `\n` or at the end of
/// `bytes`. Nothing in a record can span a newline (whitespace here excludes `\n`, and strings
/// cannot hold a raw one), so a plain reader can find the end of a line this way instead of
/// searching for it first.
pub fn skim_prefix(bytes: &[u8]) -> Option<(Envelope<'_>, usize)> {
    let line = bytes;
    // serde validates every string it keeps, and a record keeps all of them: strings are checked
    // for UTF-8 as they are scanned, and nothing else may hold a non-ASCII byte.
    let mut c = Cursor { b: line, i: 0 };
    c.expect(b'{')?;
    let mut kind: Option<&str> = None;
    let mut seq = None;
    let mut time = None;
    let mut seq0 = None;
    let mut time0 = None;
    let mut data: Option<(usize, usize)> = None;
    let mut members: Option<u64> = None;
    let mut surface_op: Option<Option<SurfaceOp>> = None;
    let mut source_event_seqs: Option<Option<Vec<u64>>> = None;
    loop {
        c.ws();
        let key = c.simple_string()?;
        c.ws();
        c.expect(b':')?;
        c.ws();
        match key {
            b"type" if kind.is_none() => {
                let raw = c.simple_string()?;
                kind = Some(std::str::from_utf8(raw).ok()?);
            }
            b"seq" if seq.is_none() => seq = Some(c.uint()?),
            b"time" if time.is_none() => time = Some(c.int()?),
            b"seq0" if seq0.is_none() => seq0 = Some(c.uint()?),
            b"time0" if time0.is_none() => time0 = Some(c.int()?),
            b"data" if data.is_none() => {
                let start = c.i;
                match kind.and_then(PackedKind::from_type) {
                    // A packed row's data is decoded by serde: check it as such, once.
                    Some(packed) => members = Some(c.packed_data(packed)?),
                    // An event's `data` is kept as a raw value: serde checks its syntax at any
                    // depth.
                    None => c.value(usize::MAX, false)?,
                }
                data = Some((start, c.i));
            }
            b"surfaceOp" if surface_op.is_none() => surface_op = Some(c.surface_op()?),
            b"sourceEventSeqs" if source_event_seqs.is_none() => {
                source_event_seqs = Some(c.uint_array_or_null()?)
            }
            // Unknown or repeated keys: the serde parser decides.
            _ => return None,
        }
        c.ws();
        match c.next()? {
            b',' => continue,
            b'}' => break,
            _ => return None,
        }
    }
    c.ws();
    let end = c.i;
    if end != line.len() && line[end] != b'\n' {
        return None;
    }
    let kind = kind?;
    let (data_start, data_end) = data?;
    let surface_op = surface_op.flatten();
    let source_event_seqs = source_event_seqs.flatten();
    if let Some(packed) = PackedKind::from_type(kind) {
        if seq.is_some() || time.is_some() || surface_op.is_some() || source_event_seqs.is_some() {
            return None;
        }
        let count = match members {
            Some(count) => count,
            None => Cursor {
                b: &line[data_start..data_end],
                i: 0,
            }
            .packed_data(packed)?,
        };
        let envelope = Envelope {
            kind,
            first_seq: seq0?,
            seq_count: count,
            time: time0?,
            packed: true,
            surface_op: None,
            source_event_seqs: None,
        };
        return Some((envelope, end));
    }
    if seq0.is_some() || time0.is_some() {
        return None;
    }
    if is_surface_type(kind) && surface_op.is_none() {
        return None;
    }
    let envelope = Envelope {
        kind,
        first_seq: seq?,
        seq_count: 1,
        time: time?,
        packed: false,
        surface_op,
        source_event_seqs,
    };
    Some((envelope, end))
}

/// Whether `json` (one JSON value, valid as a raw value) surely decodes as a `serde_json::Value`,
/// which raw values do not promise: serde rejects unpaired surrogate escapes, numbers beyond
/// `f64` and nesting past its recursion limit when it builds a value. Errs only towards `false`
/// (a surrogate pair, a float or a long integer is `false` too).
pub fn surely_decodable(json: &[u8]) -> bool {
    let mut c = Cursor { b: json, i: 0 };
    c.value(VALUE_DEPTH, true).is_some() && {
        c.ws();
        c.i == json.len()
    }
}
