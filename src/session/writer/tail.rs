//! What lies past a log's valid prefix, as a writer observes it.
//!
//! Purpose: a log may end in bytes that are not part of it: a plain line without its newline, a
//! zstd frame cut short, the batch of a stale pending marker, or damage (whole records after a
//! seq defect). [`observe`] scans the log and records such a tail as a [`TailSeen`] (where it
//! starts, the file's length and modification time, a digest of the bytes) without touching
//! it; [`TailSeen::refusal`] says whether an append may cut it now.
//! Invariant: only a tail that looks like one unfinished batch (at most [`MAX_CUTTABLE_TAIL`]
//! bytes, or a stale pending batch) is ever `cuttable`, and a cuttable tail that is not a stale
//! pending batch is refused until it has been left alone for [`SETTLE`]; damage is refused
//! always. Observing reads the file and writes nothing.
//! Proof: `tests/session/writer.rs` (`a_duplicated_record_is_damage_kept_byte_for_byte`,
//! `a_settled_torn_tail_is_cut_by_the_next_append_only`, `a_recently_changed_torn_tail_is_not_cut`,
//! `a_torn_tail_that_changed_since_it_was_seen_is_not_cut`).

use super::pending::pending_batch_start;
use crate::session::error::{Result, SessionError};
use crate::session::reader::{self, Encoding, LogScan, RecordSink};
use std::fs::File;
use std::hash::Hasher;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How long a torn tail must have been left alone before an append may cut it: dsh takes no lock,
/// so a tail that changed more recently may be a batch it is still writing.
pub const SETTLE: Duration = Duration::from_secs(5);

/// The largest tail an append will consider cutting: one unfinished batch, never more.
const MAX_CUTTABLE_TAIL: u64 = 64 << 20;

/// What lay past the valid prefix when the writer last looked (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailSeen {
    /// Where the valid prefix ends: where a cut would go.
    pub at: u64,
    /// The file length then.
    pub len: u64,
    /// The file's modification time then.
    pub modified: Option<SystemTime>,
    pub(super) digest: u64,
    /// Why the bytes past `at` are not part of the log.
    pub reason: String,
    /// Whether they look like one unfinished batch (which an append may cut once settled).
    pub cuttable: bool,
    /// Whether they are the batch of a stale pending marker: a writer of ours died writing it
    /// (a live one removes its marker before it unlocks), so no settling time applies.
    pub pending: bool,
}

impl TailSeen {
    /// Why an append refuses to go after this tail right now, or `None` if it may cut it.
    pub(super) fn refusal(&self, now: SystemTime) -> Option<String> {
        if !self.cuttable {
            return Some(format!(
                "the log is damaged after byte {} ({}); the {} bytes past it are kept untouched \
                 and nothing is appended after them",
                self.at,
                self.reason,
                self.len - self.at
            ));
        }
        if self.pending {
            return None;
        }
        let age = self
            .modified
            .map(|m| now.duration_since(m).unwrap_or_default())
            .unwrap_or(SETTLE);
        (age < SETTLE).then(|| {
            format!(
                "the log ends in an unfinished batch of {} bytes last changed {:.1} s ago: \
                 another process may still be appending to it; try again in a few seconds",
                self.len - self.at,
                age.as_secs_f64()
            )
        })
    }
}

/// Scans the log (the caller holds a lock on `file`) and observes what lies past its valid
/// prefix. A plain log's stale pending batch counts as past the prefix, as for readers.
pub(super) fn observe(
    path: &Path,
    file: &File,
    sink: &mut dyn RecordSink,
) -> Result<(LogScan, Option<TailSeen>)> {
    let meta = file.metadata().map_err(|e| SessionError::io(path, e))?;
    let len = meta.len();
    let marker = pending_batch_start(path).filter(|&start| start < len);
    let reader = crate::session::files::open_read(path).map_err(|e| SessionError::io(path, e))?;
    let scan = reader::scan_reader(
        path,
        reader,
        Encoding::of_path(path),
        marker.unwrap_or(len),
        sink,
    )?;
    let at = scan.valid_len;
    if at >= len {
        return Ok((scan, None));
    }
    let pending = marker == Some(at);
    let reason = match (&scan.torn_tail, pending) {
        (_, true) => "a batch left pending by a crashed writer".to_string(),
        (Some(torn), false) => format!("line {}: {}", torn.line, torn.reason),
        (None, false) => "bytes after a pending batch marker".to_string(),
    };
    let cuttable = pending
        || (len - at <= MAX_CUTTABLE_TAIL
            && unfinished_batch(scan.encoding, &read_range(path, at, len)?));
    let tail = TailSeen {
        at,
        len,
        modified: meta.modified().ok(),
        digest: digest_range(path, at, len)?,
        reason,
        cuttable,
        pending,
    };
    Ok((scan, Some(tail)))
}

/// Whether `tail` looks like one batch cut short: a plain line without its newline (or bytes a
/// crash zero-filled), or zstd bytes holding no complete frame.
fn unfinished_batch(encoding: Encoding, tail: &[u8]) -> bool {
    match encoding {
        Encoding::Plain => {
            !tail.contains(&b'\n') || tail.iter().all(|b| *b == 0 || b.is_ascii_whitespace())
        }
        Encoding::Zstd => !holds_complete_frame(tail),
    }
}

/// Whether a complete zstd frame starts anywhere in `bytes`.
fn holds_complete_frame(bytes: &[u8]) -> bool {
    const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let mut start = 0;
    while let Some(pos) = bytes[start..].windows(4).position(|w| w == MAGIC) {
        let at = start + pos;
        if let Ok(decoder) = zstd::stream::read::Decoder::with_buffer(&bytes[at..]) {
            let mut decoder = decoder.single_frame();
            if std::io::copy(&mut decoder, &mut std::io::sink()).is_ok() {
                return true;
            }
        }
        start = at + 1;
    }
    false
}

fn read_range(path: &Path, from: u64, to: u64) -> Result<Vec<u8>> {
    let mut file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| SessionError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(to - from)
        .read_to_end(&mut bytes)
        .map_err(|e| SessionError::io(path, e))?;
    Ok(bytes)
}

/// A digest of bytes `from..to` of the file, read in bounded pieces.
pub(super) fn digest_range(path: &Path, from: u64, to: u64) -> Result<u64> {
    let mut file = File::open(path).map_err(|e| SessionError::io(path, e))?;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| SessionError::io(path, e))?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut reader = file.take(to - from);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SessionError::io(path, e)),
        };
        hasher.write(&buf[..n]);
        total += n as u64;
    }
    hasher.write_u64(total);
    Ok(hasher.finish())
}
