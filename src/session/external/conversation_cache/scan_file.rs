//! The conversation scan kept beside a heavy session's document (`<name>.scan`), so that a
//! session that grew is read from where the last read ended.
//!
//! Purpose: the file format of a kept scan. Invariant: its own magic line (version 3), the stamp
//! of the file the scan was taken of, where the scan stopped, then the agent's state as the rest
//! of the file (its binary form, read once, by the agent's scan, which refuses what does not hold together),
//! and the parent module's checksum; one of another stamp is not used. Proof: the parent
//! module's tests and `tests/session/agent_conversation_cache.rs` (every fixture's scan saved
//! and resumed at several cuts gives the whole read's conversation).

use super::{seal, unseal, Stamp, MAX_BYTES};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A conversation scan's state (the agent's bytes, read only by the agent's scan when it is
/// resumed) and the byte offset and line number it stopped at.
pub(super) struct SavedScan {
    pub(super) offset: u64,
    pub(super) line: u64,
    /// The state is `bytes[at]`: read back, the scan file's own bytes (megabytes, not copied).
    bytes: Vec<u8>,
    at: std::ops::Range<usize>,
}

impl SavedScan {
    /// The agent's state.
    pub(super) fn state(&self) -> &[u8] {
        &self.bytes[self.at.clone()]
    }
}

/// Where a saved scan stopped: the line before its state in a scan file.
#[derive(Serialize, Deserialize)]
struct ScanEnd {
    offset: u64,
    line: u64,
}

/// The first line of a kept scan; its last number is the format's version (3: the state is the
/// rest of the file, after a line of where it stopped, in the agent's binary form; 2 held it
/// as JSON text).
const SCAN_MAGIC: &str = "dsh-refs agent conversation scan 3\n";

/// Where the scan beside the kept document `document` lives (`<name>.scan`).
pub(super) fn scan_path(document: &Path) -> PathBuf {
    document.with_extension("scan")
}

/// The sealed bytes of a scan file for a file stamped `stamp`, the scan stopped at byte
/// `offset`, line `line`: its own magic line, the stamp, where the scan stopped, the state
/// `state` appends (written where it goes, never copied), a checksum. `None` when there is
/// nothing to keep: `state` wrote none (`false`), or the file would be over [`MAX_BYTES`].
pub(super) fn scan_body(
    stamp: Stamp,
    offset: u64,
    line: u64,
    state: impl FnOnce(&mut Vec<u8>) -> bool,
) -> Option<Vec<u8>> {
    let mut body = Vec::with_capacity(SCAN_MAGIC.len() + 256);
    body.extend_from_slice(SCAN_MAGIC.as_bytes());
    serde_json::to_writer(&mut body, &stamp).ok()?;
    body.push(b'\n');
    serde_json::to_writer(&mut body, &ScanEnd { offset, line }).ok()?;
    body.push(b'\n');
    let before = body.len();
    if !state(&mut body) || body.len() == before || body.len() + 17 > MAX_BYTES {
        return None;
    }
    seal(&mut body, SCAN_MAGIC);
    Some(body)
}

/// The scan kept beside the document `document`, when it is whole and was taken of the file
/// stamped `stamp` (the document's stamp); `None` otherwise (the file is then read whole).
pub(super) fn load_scan(document: &Path, stamp: Stamp) -> Option<SavedScan> {
    let bytes = crate::session::files::read_small(&scan_path(document), MAX_BYTES)?;
    let body = unseal(&bytes, SCAN_MAGIC).ok()?;
    let end = memchr::memchr(b'\n', body)?;
    let taken: Stamp = serde_json::from_slice(&body[..end]).ok()?;
    if taken != stamp {
        return None;
    }
    let rest = &body[end + 1..];
    let end = memchr::memchr(b'\n', rest)?;
    let stopped: ScanEnd = serde_json::from_slice(&rest[..end]).ok()?;
    // The agent's scan reads it, and refuses anything that is not one whole state.
    // Where the state lies in the file's bytes (kept whole rather than copied out).
    let start = rest[end + 1..].as_ptr() as usize - bytes.as_ptr() as usize;
    let at = start..start + rest.len() - (end + 1);
    Some(SavedScan {
        offset: stopped.offset,
        line: stopped.line,
        bytes,
        at,
    })
}
